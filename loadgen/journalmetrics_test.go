package loadgen

import (
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/metrics"
)

// TestBrokerJournalFromMetrics: two brokers' journal histograms, read from
// their real /metrics endpoints before and after the window: the result
// holds the window's groups of both, with percentiles in the buckets that
// hold them; a broker without a journal leaves the figures absent.
func TestBrokerJournalFromMetrics(t *testing.T) {
	bounds := []float64{0.001, 0.002, 0.004, 0.008}
	var mu sync.Mutex
	st := [2]metrics.JournalStats{}
	for i := range st {
		st[i].Write = metrics.Histogram{Bounds: bounds, Counts: make([]uint64, 5)}
		st[i].CommitWait = metrics.Histogram{Bounds: bounds, Counts: make([]uint64, 5)}
	}
	var ms [2]*metrics.Broker
	var brokers []*SpawnedBroker
	for i := range ms {
		ms[i] = metrics.New()
		ms[i].SetJournal(func() (metrics.JournalStats, bool) {
			mu.Lock()
			defer mu.Unlock()
			s := st[i]
			s.Write.Counts = append([]uint64(nil), s.Write.Counts...)
			s.CommitWait.Counts = append([]uint64(nil), s.CommitWait.Counts...)
			return s, true
		})
		brokers = append(brokers, &SpawnedBroker{NodeID: i, MetricsAddr: metricsServer(t, ms[i])})
	}
	observe := func(b, n, writeBucket, commitBucket int) {
		mu.Lock()
		defer mu.Unlock()
		s := &st[b]
		s.Write.Counts[writeBucket] += uint64(n)
		s.Write.Count += uint64(n)
		s.Write.Sum += float64(n) * bounds[writeBucket]
		s.CommitWait.Counts[commitBucket] += uint64(n)
		s.CommitWait.Count += uint64(n)
		s.CommitWait.Sum += float64(n) * bounds[commitBucket]
	}
	observe(0, 300, 3, 3) // before the window: slow, left out
	c := &Cluster{Brokers: brokers}
	ctx := testCtx(t, time.Minute)
	j0 := c.brokerJournalSample(ctx)
	observe(0, 50, 0, 1) // write <= 1 ms, commit in (1, 2] ms
	observe(1, 50, 0, 1)
	j1 := c.brokerJournalSample(ctx)
	if j0 == nil || j1 == nil || c.metricsOff {
		t.Fatal("scrape failed")
	}
	var r Result
	if err := r.setBrokerJournal(j0, j1); err != nil {
		t.Fatal(err)
	}
	if r.BrokerJournalGroups != 100 {
		t.Fatalf("%d groups in the window, want 100", r.BrokerJournalGroups)
	}
	if r.BrokerJournalWriteP99Ms <= 0 || r.BrokerJournalWriteP99Ms > 1 {
		t.Fatalf("write p99 %v ms, want within (0, 1]", r.BrokerJournalWriteP99Ms)
	}
	if r.BrokerJournalCommitP50Ms <= 1 || r.BrokerJournalCommitP50Ms > 2 {
		t.Fatalf("commit p50 %v ms, want within (1, 2]", r.BrokerJournalCommitP50Ms)
	}

	none := &Cluster{Brokers: []*SpawnedBroker{{NodeID: 0, MetricsAddr: metricsServer(t, metrics.New())}}}
	var r2 Result
	if err := r2.setBrokerJournal(none.brokerJournalSample(ctx), none.brokerJournalSample(ctx)); err != nil || r2.BrokerJournalGroups != 0 {
		t.Fatalf("a broker without a journal: %v, %d groups", err, r2.BrokerJournalGroups)
	}
}
