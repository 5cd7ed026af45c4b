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
	Flushes uint64 // fdatasyncs (one a group)
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
var latencyBounds = func() []float64 {
	b := make([]float64, 16)
	for i := range b {
		b[i] = 50e-6 * math.Exp2(float64(i))
	}
	return b
}()

// latencyHist is a fixed-bucket histogram updated with atomics (no lock,
// no allocation per observation).
type latencyHist struct {
	counts [17]atomic.Uint64
	sumNs  atomic.Uint64
}

func (h *latencyHist) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(latencyBounds) && s > latencyBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(max(d, 0)))
}

func (h *latencyHist) snapshot() Histogram {
	out := Histogram{Bounds: latencyBounds, Counts: make([]uint64, len(h.counts))}
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
		out.Count += out.Counts[i]
	}
	out.Sum = float64(h.sumNs.Load()) / 1e9
	return out
}

// journalStats are the journal's counters (updated by the writer and the
// checkpoints, read by JournalStats).
type journalStats struct {
	groups, records, bytes, checkpoints, refGroups atomic.Uint64
	write, flush, commitWait, ckptWait             latencyHist
}

// JournalStats reports the journal's counters; ok is false when the engine
// runs without a journal.
func (e *Engine) JournalStats() (s JournalStats, ok bool) {
	j := e.jnl
	if j == nil {
		return s, false
	}
	st := &j.stats
	flush := st.flush.snapshot()
	return JournalStats{Groups: st.groups.Load(), Flushes: flush.Count, Records: st.records.Load(), Bytes: st.bytes.Load(),
		RefGroups: st.refGroups.Load(), Checkpoints: st.checkpoints.Load(), Write: st.write.snapshot(), Flush: flush, CommitWait: st.commitWait.snapshot(),
		CheckpointWait: st.ckptWait.snapshot()}, true
}
