package loadgen

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/metrics"
)

// bucketOf is the (lower, upper] bucket of the broker's request-time
// histogram that holds v seconds.
func bucketOf(t *testing.T, v float64) (lo, hi float64) {
	t.Helper()
	for _, ub := range metrics.RequestTimeBuckets() {
		if v <= ub {
			return lo, ub
		}
		lo = ub
	}
	t.Fatalf("%v s past the buckets", v)
	return 0, 0
}

// metricsServer serves m's /metrics on a loopback listener; its host:port.
func metricsServer(t *testing.T, m *metrics.Broker) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestBrokerProduceFromMetrics: two brokers' real /metrics endpoints,
// scraped before and after the measured window: the result holds only the
// window's Produce requests of both, other APIs left out, percentiles in
// the buckets that hold them and the maximum as its bucket's bound.
func TestBrokerProduceFromMetrics(t *testing.T) {
	m0, m1 := metrics.New(), metrics.New()
	c := &Cluster{Brokers: []*SpawnedBroker{{NodeID: 0, MetricsAddr: metricsServer(t, m0)}, {NodeID: 1, MetricsAddr: metricsServer(t, m1)}}}
	ctx := testCtx(t, time.Minute)
	for range 500 {
		m0.Request(0, 9, 5*time.Millisecond) // before the window
	}
	h0, _ := c.brokerProduceSample(ctx) // broker 1 has no Produce series yet
	if h0 == nil || h0.count != 500 {
		t.Fatalf("first reading %+v", h0)
	}
	for i := range 1000 {
		m := m0
		if i%2 == 1 {
			m = m1
		}
		d := time.Millisecond
		if i < 10 {
			d = 100 * time.Millisecond
		}
		m.Request(0, 9, d)
		m.Request(1, 11, 400*time.Millisecond) // Fetch: not counted
	}
	h1, _ := c.brokerProduceSample(ctx)
	if h1 == nil || c.metricsOff {
		t.Fatal("second reading failed")
	}
	var r Result
	if err := r.setBrokerProduce(h0, h1); err != nil {
		t.Fatal(err)
	}
	if r.BrokerProduceRequests != 1000 {
		t.Fatalf("%d requests in the window, want 1000", r.BrokerProduceRequests)
	}
	lo1, hi1 := bucketOf(t, 0.001)
	lo100, hi100 := bucketOf(t, 0.1)
	if p := r.BrokerProduceP50Ms / 1000; p <= lo1 || p > hi1 {
		t.Fatalf("p50 %v s outside 1 ms's bucket (%v, %v]", p, lo1, hi1)
	}
	// rank 990 is the 1 ms bucket's last request: its upper bound.
	if p := r.BrokerProduceP99Ms / 1000; math.Abs(p-hi1) > 1e-12 {
		t.Fatalf("p99 %v s, want the 1 ms bucket's bound %v", p, hi1)
	}
	if p := r.BrokerProduceP999Ms / 1000; p <= lo100 || p > hi100 {
		t.Fatalf("p99.9 %v s outside 100 ms's bucket (%v, %v]", p, lo100, hi100)
	}
	if mx := r.BrokerProduceMaxBucketMs / 1000; mx != hi100 || r.BrokerProducePastLastBucket {
		t.Fatalf("max bucket %v s (past the last: %v), want %v", mx, r.BrokerProducePastLastBucket, hi100)
	}
	if mean := r.BrokerProduceMeanMs; math.Abs(mean-(990*1+10*100)/1000.0) > 1e-6 {
		t.Fatalf("mean %v ms, want 1.99", mean)
	}
}

// TestBrokerReaderFromMetrics: the reader-time figures come from
// strata_request_reader_time_seconds{request="Produce"} over the window,
// summed over the brokers, apart from the request→response ones; a broker
// without the series (an older build) adds nothing.
func TestBrokerReaderFromMetrics(t *testing.T) {
	m0, m1 := metrics.New(), metrics.New()
	c := &Cluster{Brokers: []*SpawnedBroker{{NodeID: 0, MetricsAddr: metricsServer(t, m0)}, {NodeID: 1, MetricsAddr: metricsServer(t, m1)}}}
	ctx := testCtx(t, time.Minute)
	m0.RequestOnReader(0, time.Second) // before the window
	_, r0 := c.brokerProduceSample(ctx)
	for i := range 100 {
		m := m0
		if i%2 == 1 {
			m = m1
		}
		d := time.Millisecond
		if i == 0 {
			d = 120 * time.Millisecond
		}
		m.RequestOnReader(0, d)
		m.Request(0, 9, 200*time.Millisecond) // request→response: not these
		m.RequestOnReader(1, time.Second)     // Fetch: not counted
	}
	_, r1 := c.brokerProduceSample(ctx)
	var r Result
	if err := r.setBrokerReader(r0, r1); err != nil || c.metricsOff {
		t.Fatal(err)
	}
	lo1, hi1 := bucketOf(t, 0.001)
	_, hi120 := bucketOf(t, 0.12)
	if r.BrokerReaderRequests != 100 || r.BrokerReaderP50Ms/1000 <= lo1 || r.BrokerReaderP50Ms/1000 > hi1 || r.BrokerReaderMaxBucketMs/1000 != hi120 {
		t.Fatalf("%d requests, p50 %v ms, max bucket %v ms: want 100, in (%v, %v] s, %v s", r.BrokerReaderRequests, r.BrokerReaderP50Ms, r.BrokerReaderMaxBucketMs, lo1, hi1, hi120)
	}
	if math.Abs(r.BrokerReaderMeanMs-(99*1+120)/100.0) > 1e-6 {
		t.Fatalf("mean %v ms", r.BrokerReaderMeanMs)
	}
	if r.BrokerProduceRequests != 0 {
		t.Fatalf("request→response figures set: %d", r.BrokerProduceRequests)
	}
	var out strings.Builder
	r.BrokerProduceRequests, r.BrokerProduceP50Ms = 100, 200
	rep := &Report{Result: r}
	if err := rep.WriteTable(&out); err != nil || !strings.Contains(out.String(), "of which on the connection's reader") {
		t.Fatalf("table (%v):\n%s", err, out.String())
	}
}

// TestPromHistQuantiles: linear interpolation within a bucket from the
// previous bound (0 for the first), the +Inf bucket answered by the last
// finite bound, and readings that went back refused.
func TestPromHistQuantiles(t *testing.T) {
	h := promHist{bounds: []float64{1, 2, 4, math.Inf(1)}, cum: []uint64{0, 10, 10, 10}, count: 10}
	if q := h.quantile(0.5); q != 1.5 {
		t.Fatalf("median %v, want 1.5", q)
	}
	if q := h.quantile(1); q != 2 || h.maxBucket() != 2 {
		t.Fatalf("max %v, max bucket %v, want 2", q, h.maxBucket())
	}
	first := promHist{bounds: []float64{1, 2}, cum: []uint64{4, 4}, count: 4}
	if q := first.quantile(0.25); q != 0.25 {
		t.Fatalf("first bucket's quartile %v, want 0.25", q)
	}
	over := promHist{bounds: []float64{1, 2, math.Inf(1)}, cum: []uint64{0, 0, 5}, count: 5}
	if q := over.quantile(0.5); q != 2 || !math.IsInf(over.maxBucket(), 1) {
		t.Fatalf("past the last bound: median %v, max bucket %v", q, over.maxBucket())
	}
	var r Result
	if err := r.setBrokerProduce(&promHist{}, &over); err != nil || !r.BrokerProducePastLastBucket || r.BrokerProduceMaxBucketMs != 2000 {
		t.Fatalf("past the last bucket: %+v, %v", r, err)
	}
	if _, err := first.sub(h); err == nil {
		t.Fatal("a histogram that went back was subtracted")
	}
	if _, err := first.add(h); err == nil {
		t.Fatal("histograms with different buckets were added")
	}
	if !math.IsNaN((promHist{}).quantile(0.5)) {
		t.Fatal("an empty histogram has a median")
	}
}

// TestBrokerMetricsFailureIsToldOnce: a broker whose endpoint answers
// garbage (or nothing) ends the measurement with one log line; the result
// then has no broker figures.
func TestBrokerMetricsFailureIsToldOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "strata_request_total_time_seconds_bucket{request=\"Produce\",le=\"0.1\"} not-a-number")
	}))
	defer srv.Close()
	var log strings.Builder
	c := &Cluster{log: &log, Brokers: []*SpawnedBroker{{MetricsAddr: strings.TrimPrefix(srv.URL, "http://")}}}
	ctx := context.Background()
	if h, rh := c.brokerProduceSample(ctx); h != nil || rh != nil {
		t.Fatalf("garbage read as %+v", h)
	}
	if h, _ := c.brokerProduceSample(ctx); h != nil || strings.Count(log.String(), "latency not measured") != 1 {
		t.Fatalf("second reading %+v; log %q", h, log.String())
	}
	var r Result
	if err := r.setBrokerProduce(nil, nil); err != nil || r.BrokerProduceRequests != 0 {
		t.Fatalf("%+v %v", r, err)
	}
}

// TestBrokerProduceLatencyOfSpawnedBrokers: two spawned brokers serve
// their metrics on ports loadgen gave them; the result has their Produce
// requests of the window, summed: as many as the client sent in it, give
// or take the requests in flight when the window opened.
func TestBrokerProduceLatencyOfSpawnedBrokers(t *testing.T) {
	cfg := smallRun(EngineNative)
	cfg.Spawn = 2
	cfg.Consumers = 0
	// A fresh two-broker cluster may answer its first Produce requests
	// UNKNOWN_TOPIC_OR_PARTITION (a leader not yet hosting its partition;
	// the native producer does not retry): the warm-up takes those, and
	// the window is scraped after it.
	cfg.Warmup = time.Second
	var log strings.Builder
	cfg.Log = &log
	rep, err := Run(testCtx(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Result
	if r.RecordsAcked != 4000 || r.Requests == 0 {
		t.Fatalf("sent %d acked %d failed %d in %d requests; errors %+v", r.RecordsSent, r.RecordsAcked, r.RecordsFailed, r.Requests, r.Errors)
	}
	if n, sent := r.BrokerProduceRequests, r.Requests; n < sent/2 || n > sent+int64(cfg.MaxInflight*cfg.Spawn) {
		t.Fatalf("brokers answered %d Produce requests in the window, the client sent %d; log:\n%s", n, sent, log.String())
	}
	if !(r.BrokerProduceP50Ms > 0 && r.BrokerProduceP50Ms <= r.BrokerProduceP90Ms && r.BrokerProduceP90Ms <= r.BrokerProduceP99Ms &&
		r.BrokerProduceP99Ms <= r.BrokerProduceP999Ms && r.BrokerProduceP999Ms <= r.BrokerProduceMaxBucketMs && r.BrokerProduceMeanMs > 0) {
		t.Fatalf("broker produce p50 %v p90 %v p99 %v p99.9 %v max bucket %v mean %v", r.BrokerProduceP50Ms, r.BrokerProduceP90Ms,
			r.BrokerProduceP99Ms, r.BrokerProduceP999Ms, r.BrokerProduceMaxBucketMs, r.BrokerProduceMeanMs)
	}
	if strings.Contains(log.String(), "latency not measured") {
		t.Fatalf("log: %s", log.String())
	}
	// The handlers' time on their readers: measured too, and a part of
	// the request→response time.
	if r.BrokerReaderRequests < r.BrokerProduceRequests/2 || r.BrokerReaderP50Ms <= 0 || r.BrokerReaderP50Ms > r.BrokerProduceP99Ms {
		t.Fatalf("reader time: %d requests, p50 %v ms (request→response p99 %v ms)", r.BrokerReaderRequests, r.BrokerReaderP50Ms, r.BrokerProduceP99Ms)
	}
	t.Logf("%d Produce requests (client: %d); broker p50 %.2f p99 %.2f max ≤ %.2f ms; client p50 %.2f p99 %.2f ms",
		r.BrokerProduceRequests, r.Requests, r.BrokerProduceP50Ms, r.BrokerProduceP99Ms, r.BrokerProduceMaxBucketMs, r.ProduceP50Ms, r.ProduceP99Ms)
}
