package metrics

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/metrics/metricstest"
)

// serve starts an endpoint for b on 127.0.0.1:0, closed at cleanup, and
// returns its base URL.
func serve(t *testing.T, b *Broker) (string, *Endpoint) {
	t.Helper()
	e, err := Listen([]string{"127.0.0.1:0"}, b, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return "http://" + e.Addrs()[0].String(), e
}

func scrape(t *testing.T, base string) metricstest.Families {
	t.Helper()
	f, err := metricstest.Scrape(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The request hooks land in the histogram's buckets (by the durations
// given: no clock here), in the per-version counters and the error
// counters under Kafka's names.
func TestRequestMetrics(t *testing.T) {
	b := New()
	base, _ := serve(t, b)
	b.Request(0, 9, 150*time.Microsecond)
	b.Request(0, 9, 2*time.Second)
	b.Request(0, 11, 40*time.Second) // past the last bucket: +Inf
	b.Request(1, 16, time.Millisecond)
	b.Error(0, 6) // NOT_LEADER_OR_FOLLOWER
	b.Error(0, 6)
	b.Error(1, 1)     // OFFSET_OUT_OF_RANGE
	b.Error(1, 0)     // not an error
	b.Error(1, 30000) // no such code
	b.Request(-1, 0, time.Second)
	b.Request(500, 0, time.Second)

	f := scrape(t, base)
	h := f.Find(RequestTotalTime, "request", "Produce").GetHistogram()
	if h.GetSampleCount() != 3 {
		t.Fatalf("Produce histogram count %d, want 3", h.GetSampleCount())
	}
	if got, want := h.GetSampleSum(), 0.000150+2+40; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("Produce histogram sum %v, want %v", got, want)
	}
	bounds := RequestTimeBuckets()
	if len(bounds) != 64 || bounds[0] != 0.0001 || bounds[63] < 29.999 || bounds[63] > 30.001 {
		t.Fatalf("buckets %v", bounds)
	}
	if len(h.GetBucket()) != 65 || !math.IsInf(h.GetBucket()[64].GetUpperBound(), 1) {
		t.Fatalf("%d buckets exported, want 64 and +Inf", len(h.GetBucket()))
	}
	for _, bk := range h.GetBucket() {
		ub, n := bk.GetUpperBound(), bk.GetCumulativeCount()
		want := uint64(0)
		if ub >= 0.000150 {
			want++
		}
		if ub >= 2 {
			want++
		}
		if math.IsInf(ub, 1) {
			want++ // the 40 s request
		}
		if n != want {
			t.Errorf("bucket le=%v: %d, want %d", ub, n, want)
		}
	}
	if n := f.HistogramCount(RequestTotalTime, "request", "Fetch"); n != 1 {
		t.Errorf("Fetch histogram count %d", n)
	}
	if len(f[RequestTotalTime].GetMetric()) != 2 {
		t.Errorf("histogram series %d, want 2 (only keys that had requests)", len(f[RequestTotalTime].GetMetric()))
	}
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"request", "Produce", "version", "9"}, 2},
		{[]string{"request", "Produce", "version", "11"}, 1},
		{[]string{"request", "Fetch", "version", "16"}, 1},
	} {
		if got := f.Counter(RequestsTotal, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", RequestsTotal, c.labels, got, c.want)
		}
	}
	if n := len(f[RequestsTotal].GetMetric()); n != 3 {
		t.Errorf("%d request series, want 3", n)
	}
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"request", "Produce", "error", "NOT_LEADER_OR_FOLLOWER"}, 2},
		{[]string{"request", "Fetch", "error", "OFFSET_OUT_OF_RANGE"}, 1},
		{[]string{"request", "Fetch", "error", "UNKNOWN"}, 1},
	} {
		if got := f.Counter(RequestErrors, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", RequestErrors, c.labels, got, c.want)
		}
	}
	if n := len(f[RequestErrors].GetMetric()); n != 3 {
		t.Errorf("%d error series, want 3", n)
	}
	if f["go_goroutines"] == nil || f["process_cpu_seconds_total"] == nil {
		t.Errorf("no Go or process collector metrics")
	}
	if f[Partitions] != nil {
		t.Errorf("partition gauges reported without a source")
	}
}

// A nil Broker (no metrics listener) takes every hook.
func TestNilBroker(t *testing.T) {
	var b *Broker
	b.Request(0, 0, time.Second)
	b.Error(0, 1)
	if b.Topic("x") != nil {
		t.Fatal("nil broker returned topic counters")
	}
}

// Topic counters: reported per topic; with a topic source every listed
// topic is reported and a deleted one's counters go away.
func TestTopicMetrics(t *testing.T) {
	b := New()
	base, _ := serve(t, b)
	b.Topic("a").In(1000, 10)
	b.Topic("a").In(500, 1)
	b.Topic("a").Out(700)
	b.Topic("a").OutRecords(9)
	b.Topic("b").Out(3)
	f := scrape(t, base)
	if f.Counter(TopicRecordsOut, "topic", "a") != 9 || f.Find(TopicRecordsOut, "topic", "b") == nil ||
		f.Counter(TopicRecordsOut, "topic", "b") != 0 {
		t.Fatalf("records out: a %v, b %v", f.Counter(TopicRecordsOut, "topic", "a"), f.Find(TopicRecordsOut, "topic", "b"))
	}
	if f.Counter(TopicBytesIn, "topic", "a") != 1500 || f.Counter(TopicRecordsIn, "topic", "a") != 11 ||
		f.Counter(TopicBytesOut, "topic", "a") != 700 || f.Counter(TopicBytesOut, "topic", "b") != 3 {
		t.Fatalf("topic counters: a in %v/%v out %v, b out %v", f.Counter(TopicBytesIn, "topic", "a"),
			f.Counter(TopicRecordsIn, "topic", "a"), f.Counter(TopicBytesOut, "topic", "a"), f.Counter(TopicBytesOut, "topic", "b"))
	}
	topics := []string{"a", "c"} // b deleted, c created without traffic yet
	b.SetTopics(func() []string { return topics })
	f = scrape(t, base)
	if f.Find(TopicBytesIn, "topic", "b") != nil {
		t.Errorf("deleted topic b still reported")
	}
	if f.Find(TopicBytesIn, "topic", "c") == nil || f.Counter(TopicBytesIn, "topic", "a") != 1500 {
		t.Errorf("c not reported at 0 or a lost its count")
	}
	topics = []string{"a", "b", "c"} // b created again: starts at 0
	f = scrape(t, base)
	if m := f.Find(TopicBytesOut, "topic", "b"); m == nil || m.GetCounter().GetValue() != 0 {
		t.Errorf("recreated b: %v", m)
	}
}

// The per-batch hooks of the produce and fetch paths allocate nothing once
// a topic's counters exist.
func TestTopicCountersAllocateNothing(t *testing.T) {
	b := New()
	b.Topic("t")
	allocs := testing.AllocsPerRun(100, func() {
		c := b.Topic("t")
		c.In(100, 2)
		c.Out(100)
		c.OutRecords(2)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per lookup and count", allocs)
	}
	if c := b.Topic("t"); c.recordsOut.Load() != 2*101 { // AllocsPerRun runs f once more to warm up
		t.Fatalf("records out %d after the runs", c.recordsOut.Load())
	}
}

func TestPartitionGauges(t *testing.T) {
	b := New()
	base, _ := serve(t, b)
	b.SetPartitions(func() PartitionCounts {
		return PartitionCounts{Replicas: 7, Leaders: 5, UnderReplicated: 2, UnderMinISR: 1, Offline: 3}
	})
	f := scrape(t, base)
	for name, want := range map[string]float64{Partitions: 7, PartitionLeaders: 5, UnderReplicated: 2, UnderMinISR: 1, OfflinePartitions: 3} {
		if got := f.Gauge(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// /healthz answers while the endpoint runs; /readyz follows the readiness
// check, not ready before one is set.
func TestHealth(t *testing.T) {
	b := New()
	base, _ := serve(t, b)
	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "not started") {
		t.Errorf("/readyz before a check: %d %q", code, body)
	}
	var state error = errors.New("recovering logs")
	b.SetReady(func() error { return state })
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "recovering logs") {
		t.Errorf("/readyz while recovering: %d %q", code, body)
	}
	state = nil
	if code, body := get(t, base+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz when ready: %d %q", code, body)
	}
	b.Stopping()
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz when stopping: %d %q", code, body)
	}
	(*Broker)(nil).Stopping()
	if code, _ := get(t, base+"/nothing"); code != 404 {
		t.Errorf("/nothing: %d", code)
	}
}

// Close stops every listener: connections are refused afterwards.
func TestEndpointClose(t *testing.T) {
	b := New()
	e, err := Listen([]string{"127.0.0.1:0", "127.0.0.1:0"}, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	addrs := e.Addrs()
	for _, a := range addrs {
		if code, _ := get(t, "http://"+a.String()+"/healthz"); code != 200 {
			t.Fatalf("%s: %d", a, code)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e.Close() // twice is fine
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a.String(), 5*time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after Close", a)
		}
	}
	// A taken port fails Listen and leaves nothing listening.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Listen([]string{"127.0.0.1:0", ln.Addr().String()}, b, nil); err == nil {
		t.Fatal("Listen on a taken port succeeded")
	}
}

// The hooks the request path calls allocate nothing.
func BenchmarkHooks(b *testing.B) {
	m := New()
	name := string([]byte("events")) // not a constant: as a decoded request holds it
	m.Topic(name)
	m.Request(0, 9, time.Millisecond)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.Request(0, 9, time.Duration(i)*time.Microsecond)
		m.Topic(name).In(1024, 10)
		m.Error(0, 6)
	}
}

func TestHooksDoNotAllocate(t *testing.T) {
	m := New()
	name := string([]byte("events"))
	m.Topic(name)
	m.Request(0, 9, time.Millisecond)
	m.Error(0, 6)
	if n := testing.AllocsPerRun(100, func() {
		m.Request(0, 9, time.Millisecond)
		m.Topic(name).In(1024, 10)
		m.Topic(name).Out(1024)
		m.Error(0, 6)
	}); n != 0 {
		t.Errorf("%v allocations per request's hooks, want 0", n)
	}
}
