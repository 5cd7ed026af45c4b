package engine

import (
	"math"
	"sync/atomic"
	"time"
)

// JournalStats is what the journal (journal.go) has done since Open, for
// the metrics endpoint: groups written, the records and bytes they held,
// checkpoints, and two latency histograms.
type JournalStats struct {
	Groups  uint64 // groups written
	Flushes uint64 // fdatasyncs (one a group, but groups written ahead share the next one)
	Ahead   uint64 // groups written ahead of their flush (journal.go, "Writing ahead")
	Records uint64 // records in them (write and barrier)
	Bytes   uint64 // bytes written to the journal files (4 KiB padded)
	// RefGroups are groups written (in part) straight from segment chunks
	// (ref records, no staging copy).
	RefGroups   uint64
	Checkpoints uint64
	// Write is each group's write, Flush its fdatasync; CommitWait is
	// from a group's first record staged to the group durable (what an
	// acks=all append waits for the journal, the group written before it
	// included); CheckpointWait is each time the writer waited for a
	// checkpoint before it could reuse a file (the checkpoints lagged).
	Write, Flush, CommitWait, CheckpointWait Histogram
}

// Histogram is a snapshot of a latency histogram: Counts[i] observations
// at most Bounds[i] seconds and above Bounds[i-1] (the last, past every
// bound, is Counts[len(Bounds)]), their Sum in seconds and Count.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Sum    float64
	Count  uint64
}

// latencyBounds are 50 us doubling up to ~1.6 s (16 buckets and one past).
var latencyBounds = DoublingBounds(50e-6, 16)

// DoublingBounds are n histogram bounds in seconds from first, each twice
// the one before (at most MaxLatencyBuckets).
func DoublingBounds(first float64, n int) []float64 {
	b := make([]float64, min(n, MaxLatencyBuckets))
	for i := range b {
		b[i] = first * math.Exp2(float64(i))
	}
	return b
}

// MaxLatencyBuckets bounds a LatencyHist's bounds.
const MaxLatencyBuckets = 24

// LatencyHist is a fixed-bucket histogram of durations updated with
// atomics (no lock, no allocation per observation); its zero value is
// empty. Its bounds (seconds, ascending, at most MaxLatencyBuckets) are
// the caller's, the same slice at every Observe and Snapshot: the journal's
// here, the remote log manager's remote reads.
type LatencyHist struct {
	counts [MaxLatencyBuckets + 1]atomic.Uint64
	sumNs  atomic.Int64
}

// Observe counts d in the first bucket whose bound it does not pass.
func (h *LatencyHist) Observe(bounds []float64, d time.Duration) {
	d = max(d, 0)
	s := d.Seconds()
	i := 0
	for i < len(bounds) && s > bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// Snapshot is the histogram with bounds as a Histogram.
func (h *LatencyHist) Snapshot(bounds []float64) Histogram {
	out := Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
	for i := range out.Counts {
		out.Counts[i] = h.counts[i].Load()
		out.Count += out.Counts[i]
	}
	out.Sum = time.Duration(h.sumNs.Load()).Seconds()
	return out
}

// journalStats are the journal's counters (updated by the writer and the
// checkpoints, read by JournalStats).
type journalStats struct {
	groups, records, bytes, checkpoints, refGroups, ahead atomic.Uint64
	write, flush, commitWait, ckptWait                    LatencyHist // latencyBounds
}

// JournalStats reports the journal's counters; ok is false when the engine
// runs without a journal.
func (e *Engine) JournalStats() (s JournalStats, ok bool) {
	j := e.jnl
	if j == nil {
		return s, false
	}
	st := &j.stats
	flush := st.flush.Snapshot(latencyBounds)
	return JournalStats{Groups: st.groups.Load(), Flushes: flush.Count, Records: st.records.Load(), Bytes: st.bytes.Load(),
		RefGroups: st.refGroups.Load(), Ahead: st.ahead.Load(), Checkpoints: st.checkpoints.Load(), Write: st.write.Snapshot(latencyBounds), Flush: flush, CommitWait: st.commitWait.Snapshot(latencyBounds),
		CheckpointWait: st.ckptWait.Snapshot(latencyBounds)}, true
}
