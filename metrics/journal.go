package metrics

import "github.com/prometheus/client_golang/prometheus"

// The journal's metrics (log.io.journal.bytes): the engine counts, the
// server hands the counts over at scrape time (SetJournal).
const (
	JournalGroups      = "strata_journal_groups_total"
	JournalRecords     = "strata_journal_records_total"
	JournalBytes       = "strata_journal_bytes_total"
	JournalCheckpoints = "strata_journal_checkpoints_total"
	JournalFlushes     = "strata_journal_flushes_total"
	JournalWrite       = "strata_journal_write_seconds"
	JournalFlush       = "strata_journal_flush_seconds"
	JournalCommitWait  = "strata_journal_commit_wait_seconds"
	JournalCkptWait    = "strata_journal_checkpoint_wait_seconds"
	JournalRefGroups   = "strata_journal_ref_groups_total"
	JournalAheadGroups = "strata_journal_ahead_groups_total"
)

// Histogram is a latency histogram as its owner counted it: Counts[i]
// observations at most Bounds[i] seconds and above Bounds[i-1]; the last
// count, past every bound, is Counts[len(Bounds)].
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Sum    float64
	Count  uint64
}

// JournalStats is the journal's state at a scrape.
type JournalStats struct {
	Groups, Flushes, Records, Bytes, Checkpoints, RefGroups, AheadGroups uint64
	Write, Flush, CommitWait, CheckpointWait                             Histogram
}

var (
	descJournalGroups = prometheus.NewDesc(JournalGroups,
		"Journal groups written (one write each; a flush makes every group written before it durable, acknowledging the acks=all appends they hold).", nil, nil)
	descJournalFlushes = prometheus.NewDesc(JournalFlushes,
		"Journal flushes (fdatasync of the journal file: a device cache flush).", nil, nil)
	descJournalRecords = prometheus.NewDesc(JournalRecords,
		"Records (appends and barriers) the journal's groups held.", nil, nil)
	descJournalBytes = prometheus.NewDesc(JournalBytes,
		"Bytes written to the journal's files (each group padded to 4 KiB).", nil, nil)
	descJournalCheckpoints = prometheus.NewDesc(JournalCheckpoints,
		"Journal checkpoints (segment chunks written and one device flush, after which the journal's space is reused).", nil, nil)
	descJournalWrite = prometheus.NewDesc(JournalWrite,
		"Time to write one journal group (O_DIRECT, without its flush).", nil, nil)
	descJournalFlush = prometheus.NewDesc(JournalFlush,
		"Time of one journal flush (fdatasync).", nil, nil)
	descJournalCommitWait = prometheus.NewDesc(JournalCommitWait,
		"Time from a journal group's first append staged to the group durable (what an acks=all append waits for the journal).", nil, nil)
	descJournalCkptWait = prometheus.NewDesc(JournalCkptWait,
		"Time the journal's writer waited for a checkpoint before it could reuse a file (checkpoints lagging behind the appends).", nil, nil)
	descJournalRefGroups = prometheus.NewDesc(JournalRefGroups,
		"Journal groups written (in part) straight from segment chunk memory (large appends to O_DIRECT segments: no staging copy).", nil, nil)
	descJournalAheadGroups = prometheus.NewDesc(JournalAheadGroups,
		"Journal groups written ahead of their flush (a large request's first partitions, written while it appends the rest; the flush after its last group makes them durable).", nil, nil)
)

// SetJournal sets the source of the journal's metrics, called at each
// scrape; ok false (no journal) reports nothing.
func (b *Broker) SetJournal(f func() (JournalStats, bool)) { b.journal.Store(&f) }

func (b *Broker) collectJournal(ch chan<- prometheus.Metric) {
	f := b.journal.Load()
	if f == nil || *f == nil {
		return
	}
	s, ok := (*f)()
	if !ok {
		return
	}
	for _, c := range []struct {
		d *prometheus.Desc
		v uint64
	}{{descJournalGroups, s.Groups}, {descJournalFlushes, s.Flushes}, {descJournalRecords, s.Records}, {descJournalBytes, s.Bytes}, {descJournalCheckpoints, s.Checkpoints}, {descJournalRefGroups, s.RefGroups}, {descJournalAheadGroups, s.AheadGroups}} {
		ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.v))
	}
	ch <- ConstHistogram(descJournalWrite, s.Write)
	ch <- ConstHistogram(descJournalFlush, s.Flush)
	ch <- ConstHistogram(descJournalCommitWait, s.CommitWait)
	ch <- ConstHistogram(descJournalCkptWait, s.CheckpointWait)
}

// ConstHistogram turns h (per-bucket counts, the last past every bound)
// into Prometheus's cumulative form: the journal's histograms here, the
// remote log manager's read latency in cmd/strata.
func ConstHistogram(d *prometheus.Desc, h Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, ub := range h.Bounds {
		if i < len(h.Counts) {
			cum += h.Counts[i]
		}
		buckets[ub] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
}
