package metrics

import (
	"testing"
	"time"
)

// The request phases land in their own histograms per API key, the
// throttle histogram has both series from the start, and observations of
// keys out of range are dropped.
func TestRequestPhases(t *testing.T) {
	b := New()
	base, _ := serve(t, b)
	f := scrape(t, base)
	for _, key := range []string{"Produce", "Fetch"} {
		if m := f.Find(RequestThrottleTime, "request", key); m == nil || m.GetHistogram().GetSampleCount() != 0 {
			t.Errorf("%s{request=%s} before any request: %v", RequestThrottleTime, key, m)
		}
	}
	b.RequestPhases(0, 2*time.Millisecond, 30*time.Millisecond)
	b.RequestPhases(0, time.Millisecond, 10*time.Millisecond)
	b.RequestPhases(3, 0, time.Millisecond)
	b.RequestPhases(-1, time.Second, time.Second)
	b.ResponseSent(0, 5*time.Millisecond)
	b.ResponseSent(500, time.Second)
	b.RequestOnReader(0, 4*time.Millisecond)
	b.RequestOnReader(-1, time.Second)
	b.Throttle(0, 0)
	b.Throttle(1, 1500)
	b.Throttle(3, 100) // not Produce or Fetch: dropped
	f = scrape(t, base)
	for _, c := range []struct {
		name, key string
		count     uint64
		sum       float64
	}{
		{RequestQueueTime, "Produce", 2, 0.003},
		{RequestProcessingTime, "Produce", 2, 0.040},
		{RequestQueueTime, "Metadata", 1, 0},
		{ResponseSendTime, "Produce", 1, 0.005},
		{RequestReaderTime, "Produce", 1, 0.004},
		{RequestThrottleTime, "Produce", 1, 0},
		{RequestThrottleTime, "Fetch", 1, 1.5},
	} {
		h := f.Find(c.name, "request", c.key).GetHistogram()
		if h.GetSampleCount() != c.count || h.GetSampleSum() < c.sum-1e-9 || h.GetSampleSum() > c.sum+1e-9 {
			t.Errorf("%s{request=%s}: count %d sum %v, want %d and %v", c.name, c.key, h.GetSampleCount(), h.GetSampleSum(), c.count, c.sum)
		}
	}
	if n := len(f[RequestQueueTime].GetMetric()); n != 2 {
		t.Errorf("%d queue time series, want 2", n)
	}
	if n := len(f[RequestThrottleTime].GetMetric()); n != 2 {
		t.Errorf("%d throttle series, want 2", n)
	}
}

// Cluster counters start at 0 and count; the controller's figures appear
// only with a source, one role series per role with this node's at 1.
func TestClusterMetrics(t *testing.T) {
	b := New()
	base, _ := serve(t, b)
	f := scrape(t, base)
	for _, name := range []string{ISRShrinks, ISRExpands, LeaderElections} {
		if m := f.Find(name); m == nil || m.GetCounter().GetValue() != 0 {
			t.Errorf("%s before any event: %v", name, m)
		}
	}
	if f[ControllerRole] != nil {
		t.Errorf("controller figures without a controller")
	}
	b.ISRShrink(2)
	b.ISRShrink(0)
	b.ISRExpand(1)
	b.LeaderElection(3)
	b.SetController(func() (RaftStats, bool) {
		return RaftStats{Role: "follower", Voter: true, Term: 7, CommitIndex: 120, AppliedIndex: 118, LastIndex: 121}, true
	})
	f = scrape(t, base)
	for name, want := range map[string]float64{ISRShrinks: 2, ISRExpands: 1, LeaderElections: 3} {
		if got := f.Counter(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for _, r := range ControllerRoles {
		want := 0.0
		if r == "follower" {
			want = 1
		}
		if got := f.Gauge(ControllerRole, "role", r); got != want {
			t.Errorf("%s{role=%s} = %v, want %v", ControllerRole, r, got, want)
		}
	}
	for name, want := range map[string]float64{ControllerVoter: 1, ControllerTerm: 7, ControllerCommitIndex: 120, ControllerAppliedIndex: 118, ControllerLastIndex: 121} {
		if got := f.Gauge(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	var nilB *Broker
	nilB.ISRShrink(1)
	nilB.LeaderElection(1)
	nilB.Listener("x").Accepted()
	nilB.RequestPhases(0, 0, 0)
	nilB.ResponseSent(0, 0)
	nilB.Throttle(0, 0)
}

func TestConnectionMetrics(t *testing.T) {
	b := New()
	base, _ := serve(t, b)
	for range 3 {
		b.Listener("INTERNAL").Accepted()
	}
	b.Listener("INTERNAL").Closed()
	b.Listener("EXTERNAL").Accepted()
	f := scrape(t, base)
	for _, c := range []struct {
		name, listener string
		want           float64
		gauge          bool
	}{
		{Connections, "INTERNAL", 2, true}, {ConnectionsAccepted, "INTERNAL", 3, false}, {ConnectionsClosed, "INTERNAL", 1, false},
		{Connections, "EXTERNAL", 1, true}, {ConnectionsClosed, "EXTERNAL", 0, false},
	} {
		got := f.Counter(c.name, "listener", c.listener)
		if c.gauge {
			got = f.Gauge(c.name, "listener", c.listener)
		}
		if got != c.want {
			t.Errorf("%s{listener=%s} = %v, want %v", c.name, c.listener, got, c.want)
		}
	}
}

// Log sizes and group offsets: per topic and per group by default (sums,
// and the smallest margin), per partition with PartitionLabels.
func TestLogAndGroupMetrics(t *testing.T) {
	logs := []LogSize{{"a", 0, 2, 1000}, {"a", 1, 1, 500}, {"b", 0, 1, 7}}
	offs := []GroupOffset{
		{Group: "g", Topic: "a", Partition: 0, Lag: 10, Margin: 40},
		{Group: "g", Topic: "a", Partition: 1, Lag: 5, Margin: -3},
		{Group: "h", Topic: "b", Partition: 0, Lag: 0, Margin: 9},
	}
	for _, perPartition := range []bool{false, true} {
		b := NewWithOptions(Options{PartitionLabels: perPartition})
		base, _ := serve(t, b)
		b.SetLogs(func() []LogSize { return logs })
		b.SetGroups(func() []GroupOffset { return offs })
		b.SetTailCache(func() (TailCacheStats, bool) { return TailCacheStats{Hits: 11, Misses: 4}, true })
		f := scrape(t, base)
		if f.Counter(TailCacheHits) != 11 || f.Counter(TailCacheMisses) != 4 {
			t.Errorf("tail cache %v/%v", f.Counter(TailCacheHits), f.Counter(TailCacheMisses))
		}
		type want struct {
			name   string
			labels []string
			v      float64
		}
		var wants []want
		if !perPartition {
			wants = []want{
				{LogSizeBytes, []string{"topic", "a"}, 1500}, {LogSegments, []string{"topic", "a"}, 3},
				{LogSizeBytes, []string{"topic", "b"}, 7}, {LogSegments, []string{"topic", "b"}, 1},
				{GroupLag, []string{"group", "g"}, 15}, {GroupRetentionMargin, []string{"group", "g"}, -3},
				{GroupLag, []string{"group", "h"}, 0}, {GroupRetentionMargin, []string{"group", "h"}, 9},
			}
			if n := len(f[LogSizeBytes].GetMetric()); n != 2 {
				t.Errorf("%d log size series per topic, want 2", n)
			}
		} else {
			wants = []want{
				{LogSizeBytes, []string{"topic", "a", "partition", "0"}, 1000}, {LogSegments, []string{"topic", "a", "partition", "0"}, 2},
				{LogSizeBytes, []string{"topic", "a", "partition", "1"}, 500},
				{GroupLag, []string{"group", "g", "topic", "a", "partition", "1"}, 5},
				{GroupRetentionMargin, []string{"group", "g", "topic", "a", "partition", "0"}, 40},
			}
			if n := len(f[GroupLag].GetMetric()); n != 3 {
				t.Errorf("%d lag series per partition, want 3", n)
			}
		}
		for _, w := range wants {
			if got := f.Gauge(w.name, w.labels...); got != w.v {
				t.Errorf("partition labels %v: %s%v = %v, want %v", perPartition, w.name, w.labels, got, w.v)
			}
		}
	}
}

// The hooks the request path calls allocate nothing (the first call of a
// key creates its series).
func TestPhaseHooksDoNotAllocate(t *testing.T) {
	m := New()
	m.RequestPhases(0, time.Millisecond, time.Millisecond)
	m.ResponseSent(0, time.Millisecond)
	l := m.Listener("PLAINTEXT")
	if n := testing.AllocsPerRun(100, func() {
		m.RequestPhases(0, time.Millisecond, time.Millisecond)
		m.ResponseSent(0, time.Millisecond)
		m.Throttle(0, 0)
		m.Throttle(1, 0)
		l.Accepted()
		l.Closed()
	}); n != 0 {
		t.Errorf("%v allocations per request's phase hooks, want 0", n)
	}
}

// Lag in seconds is the scrape clock minus the oldest unconsumed record's
// time: per group the largest over its partitions, 0 for a caught-up
// group, never negative (a record stamped after now), and absent for a
// lagging partition whose record time is unknown (a group with only such
// partitions has no series).
func TestGroupLagSeconds(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	offs := []GroupOffset{
		{Group: "g", Topic: "a", Partition: 0, Lag: 10, Oldest: now.Add(-90 * time.Second)},
		{Group: "g", Topic: "a", Partition: 1, Lag: 5, Oldest: now.Add(-1500 * time.Millisecond)},
		{Group: "g", Topic: "a", Partition: 2, Lag: 0},
		{Group: "h", Topic: "b", Partition: 0, Lag: 0},
		{Group: "skew", Topic: "b", Partition: 0, Lag: 3, Oldest: now.Add(time.Minute)},
		{Group: "unknown", Topic: "b", Partition: 0, Lag: 3},
		{Group: "mixed", Topic: "a", Partition: 0, Lag: 3},
		{Group: "mixed", Topic: "a", Partition: 1, Lag: 1, Oldest: now.Add(-2 * time.Second)},
	}
	for _, perPartition := range []bool{false, true} {
		b := NewWithOptions(Options{PartitionLabels: perPartition, Now: func() time.Time { return now }})
		base, _ := serve(t, b)
		b.SetGroups(func() []GroupOffset { return offs })
		f := scrape(t, base)
		type want struct {
			labels []string
			v      float64
		}
		var wants []want
		var series int
		if !perPartition {
			wants = []want{{[]string{"group", "g"}, 90}, {[]string{"group", "h"}, 0},
				{[]string{"group", "skew"}, 0}, {[]string{"group", "mixed"}, 2}}
			series = 4
		} else {
			wants = []want{
				{[]string{"group", "g", "topic", "a", "partition", "0"}, 90},
				{[]string{"group", "g", "topic", "a", "partition", "1"}, 1.5},
				{[]string{"group", "g", "topic", "a", "partition", "2"}, 0},
				{[]string{"group", "h", "topic", "b", "partition", "0"}, 0},
				{[]string{"group", "skew", "topic", "b", "partition", "0"}, 0},
				{[]string{"group", "mixed", "topic", "a", "partition", "1"}, 2},
			}
			series = 6
		}
		for _, w := range wants {
			if f.Find(GroupLagSeconds, w.labels...) == nil {
				t.Errorf("partition labels %v: no %s%v", perPartition, GroupLagSeconds, w.labels)
			} else if got := f.Gauge(GroupLagSeconds, w.labels...); got != w.v {
				t.Errorf("partition labels %v: %s%v = %v, want %v", perPartition, GroupLagSeconds, w.labels, got, w.v)
			}
		}
		if f.Find(GroupLagSeconds, "group", "unknown") != nil {
			t.Errorf("partition labels %v: a series for a group whose record time is unknown", perPartition)
		}
		if n := len(f[GroupLagSeconds].GetMetric()); n != series {
			t.Errorf("partition labels %v: %d %s series, want %d", perPartition, n, GroupLagSeconds, series)
		}
	}
}
