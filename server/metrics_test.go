package server

import (
	"bytes"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/metrics/metricstest"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startMeteredBroker is startBroker with metrics and their endpoint on
// 127.0.0.1:0; it returns the broker's address and the /metrics URL.
func startMeteredBroker(t *testing.T, opts ...func(*Config, *engine.Options)) (addr, url string, s *Server) {
	t.Helper()
	m := metrics.New()
	opts = append(opts, func(c *Config, _ *engine.Options) { c.Metrics = m })
	addr, s, _ = startBroker(t, opts...)
	ep, err := metrics.Listen([]string{"127.0.0.1:0"}, m, s.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	return addr, "http://" + ep.Addrs()[0].String() + "/metrics", s
}

func scrapeMetrics(t *testing.T, url string) metricstest.Families {
	t.Helper()
	f, err := metricstest.Scrape(url)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// clientCounts counts, with franz-go's hooks, the Produce requests a
// client wrote and the batches it produced and fetched (bytes as on the
// wire: the records plus the batch header), per topic.
type clientCounts struct {
	mu                   sync.Mutex
	produceRequests      int
	bytesIn, recordsIn   map[string]int
	bytesOut, recordsOut map[string]int
}

func newClientCounts() *clientCounts {
	return &clientCounts{bytesIn: map[string]int{}, recordsIn: map[string]int{}, bytesOut: map[string]int{}, recordsOut: map[string]int{}}
}

func (c *clientCounts) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 0 && err == nil {
		c.mu.Lock()
		c.produceRequests++
		c.mu.Unlock()
	}
}

func (c *clientCounts) OnProduceBatchWritten(_ kgo.BrokerMetadata, topic string, _ int32, m kgo.ProduceBatchMetrics) {
	c.mu.Lock()
	c.bytesIn[topic] += record.HeaderSize + m.CompressedBytes
	c.recordsIn[topic] += m.NumRecords
	c.mu.Unlock()
}

func (c *clientCounts) OnFetchBatchRead(_ kgo.BrokerMetadata, topic string, _ int32, m kgo.FetchBatchMetrics) {
	c.mu.Lock()
	c.bytesOut[topic] += record.HeaderSize + m.CompressedBytes
	c.recordsOut[topic] += m.NumRecords
	c.mu.Unlock()
}

// The metrics a produce and consume run moves, scraped over HTTP: one
// Produce latency observation and one request count per Produce request
// the client wrote, the topic's bytes and records in as the client's
// batches had them, its bytes out as the consumer's batches had them.
func TestMetricsCountProduceAndFetch(t *testing.T) {
	addr, url, _ := startMeteredBroker(t)
	ctx := testCtx(t)
	adm := newAdmin(t, addr)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "metered"); err != nil {
		t.Fatal(err)
	}
	before := scrapeMetrics(t, url)
	if n := before.HistogramCount(metrics.RequestTotalTime, "request", "Produce"); n != 0 {
		t.Fatalf("Produce observed %d times before any produce", n)
	}

	counts := newClientCounts()
	cl := newClient(t, addr, kgo.WithHooks(counts), kgo.DefaultProduceTopic("metered"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	const n = 300
	for i := range n {
		r := &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: []byte("value-" + strconv.Itoa(i))}
		if i%50 == 0 {
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	after := scrapeMetrics(t, url)
	counts.mu.Lock()
	reqs, bytesIn, recordsIn := counts.produceRequests, counts.bytesIn["metered"], counts.recordsIn["metered"]
	counts.mu.Unlock()
	if reqs == 0 || recordsIn != n {
		t.Fatalf("client hooks: %d produce requests, %d records", reqs, recordsIn)
	}
	if got := after.HistogramCount(metrics.RequestTotalTime, "request", "Produce"); got != uint64(reqs) {
		t.Errorf("Produce histogram count %d, client wrote %d Produce requests", got, reqs)
	}
	var perVersion float64
	for _, m := range after[metrics.RequestsTotal].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "request" && l.GetValue() == "Produce" {
				perVersion += m.GetCounter().GetValue()
			}
		}
	}
	if perVersion != float64(reqs) {
		t.Errorf("%s{request=Produce} sums to %v, want %d", metrics.RequestsTotal, perVersion, reqs)
	}
	if got := after.Counter(metrics.TopicBytesIn, "topic", "metered"); got != float64(bytesIn) {
		t.Errorf("bytes in %v, the client's batches were %d bytes", got, bytesIn)
	}
	if got := after.Counter(metrics.TopicRecordsIn, "topic", "metered"); got != n {
		t.Errorf("records in %v, want %d", got, n)
	}
	if got := after.Counter(metrics.TopicBytesOut, "topic", "metered"); got != 0 {
		t.Errorf("bytes out %v before any fetch", got)
	}
	if got := after.Gauge(metrics.Partitions); got != 3 {
		t.Errorf("%s = %v, want 3", metrics.Partitions, got)
	}
	if got := after.Gauge(metrics.PartitionLeaders); got != 3 {
		t.Errorf("%s = %v, want 3", metrics.PartitionLeaders, got)
	}

	// Consume everything; the broker counts each batch it sends.
	cons := newClient(t, addr, kgo.WithHooks(counts), kgo.ConsumeTopics("metered"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	counts.mu.Lock()
	bytesOut := counts.bytesOut["metered"]
	counts.mu.Unlock()
	after = scrapeMetrics(t, url)
	if got := after.Counter(metrics.TopicBytesOut, "topic", "metered"); got != float64(bytesOut) {
		t.Errorf("bytes out %v, the consumer read batches of %d bytes", got, bytesOut)
	}
	if got := after.HistogramCount(metrics.RequestTotalTime, "request", "Fetch"); got == 0 {
		t.Errorf("no Fetch observed")
	}
}

// Error codes are counted under Kafka's names: per partition for
// Produce, the top-level code for other APIs.
func TestMetricsCountErrors(t *testing.T) {
	addr, url, _ := startMeteredBroker(t, func(c *Config, _ *engine.Options) { c.AutoCreateTopics = false })
	cl := newClient(t, addr)
	ctx := testCtx(t)

	// Produce to a topic that does not exist: two partitions, two errors.
	batch := prodBatch(t, 1, record.CodecNone, "x") // 00_produce_test.go
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "nope"
	for p := range int32(2) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		rp.Records = append([]byte(nil), batch...)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	// UNKNOWN_TOPIC_ID from Produce v13 on (franz-go names topics by id).
	code := resp.Topics[0].Partitions[0].ErrorCode
	if code != kerr.UnknownTopicOrPartition.Code && code != kerr.UnknownTopicID.Code {
		t.Fatalf("produce to a missing topic: code %d", code)
	}
	// A group API with a top-level code: Heartbeat of an unknown group.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", "m", 1
	hresp, err := hb.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if hresp.ErrorCode == 0 {
		t.Fatal("heartbeat of an unknown group succeeded")
	}
	f := scrapeMetrics(t, url)
	perr := kerr.ErrorForCode(code).(*kerr.Error).Message
	if got := f.Counter(metrics.RequestErrors, "request", "Produce", "error", perr); got != 2 {
		t.Errorf("Produce %s = %v, want 2", perr, got)
	}
	name := kerr.ErrorForCode(hresp.ErrorCode).(*kerr.Error).Message
	if got := f.Counter(metrics.RequestErrors, "request", "Heartbeat", "error", name); got != 1 {
		t.Errorf("Heartbeat %s = %v, want 1", name, got)
	}
	if got := f.Counter(metrics.TopicBytesIn, "topic", "nope"); got != 0 {
		t.Errorf("failed produce counted %v bytes in", got)
	}
}

// BenchmarkMeteredProduce is a Produce through the handler (acks=1, one
// partition, one 10-record batch, the response encoded and discarded)
// without and with metrics: the difference is what the metrics cost a
// request (clock reads, histogram, counters, the topic's bytes).
func BenchmarkMeteredProduce(b *testing.B) {
	for _, metered := range []bool{false, true} {
		b.Run("metrics="+strconv.FormatBool(metered), func(b *testing.B) {
			logger := slog.New(slog.NewTextHandler(io.Discard, nil))
			eng, err := engine.Open(engine.Options{Dir: b.TempDir(), Log: engine.DefaultLogConfig(), Logger: logger})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			cfg := Config{NodeID: 0, ClusterID: "bench", Logger: logger, LogDefaults: engine.DefaultLogConfig()}
			if metered {
				cfg.Metrics = metrics.New()
			}
			s := New(cfg, eng)
			defer s.Close()
			if _, err := eng.CreateTopic("bench", 1, nil); err != nil {
				b.Fatal(err)
			}
			var rb record.Builder
			rb.Reset(record.CodecNone, 1000)
			for range 10 {
				rb.Add(1000, nil, bytes.Repeat([]byte("v"), 100), nil)
			}
			batch, err := rb.AppendTo(nil)
			if err != nil {
				b.Fatal(err)
			}
			req := prodRequest(9, 1, "bench", [16]byte{}, 0, batch)
			r := &discardReply{}
			b.ReportAllocs()
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				rc := reqCtx{reply: r, key: 0, version: 9, req: req, log: logger}
				s.meterStart(&rc, s.now())
				handleProduce(s, &rc)
			}
		})
	}
}

// In a cluster: every broker is ready once registered and caught up, the
// partition gauges follow the controller's view (each broker a replica of
// every partition, the leaders split among them), and a stopped broker
// leaves the partitions it was a replica of under-replicated on their
// leaders, and under min.insync.replicas=3.
func TestMetricsClusterGauges(t *testing.T) {
	brokers, _ := startInCluster(t, 3) // cluster_test.go
	waitRegistered(t, brokers)
	adm := newAdmin(t, brokers[0].addr)
	ctx := testCtx(t)
	const topic = "gauged"
	ct, err := adm.CreateTopic(ctx, 4, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("3")}, topic)
	if err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}
	sum := func(live []*inCluster) (c metrics.PartitionCounts) {
		for _, b := range live {
			p := b.s.partitionCounts()
			c.Replicas += p.Replicas
			c.Leaders += p.Leaders
			c.UnderReplicated += p.UnderReplicated
			c.UnderMinISR += p.UnderMinISR
			c.Offline = max(c.Offline, p.Offline)
		}
		return c
	}
	waitFor := func(what string, live []*inCluster, ok func(metrics.PartitionCounts) bool) {
		t.Helper()
		for deadline := time.Now().Add(testTimeout); ; {
			c := sum(live)
			if ok(c) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, c)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("every partition led, replicated three times", brokers, func(c metrics.PartitionCounts) bool {
		return c == metrics.PartitionCounts{Replicas: 12, Leaders: 4}
	})
	for _, b := range brokers {
		if err := b.s.ready(); err != nil {
			t.Errorf("broker %d not ready: %v", b.id, err)
		}
	}

	brokers[2].stop(t)
	waitFor("broker 2 out of every ISR", brokers[:2], func(c metrics.PartitionCounts) bool {
		return c.Leaders == 4 && c.UnderReplicated == 4 && c.UnderMinISR == 4 && c.Offline == 0
	})
}

// TestMetricsJournal: with the journal on, acks=all produces are counted
// in the journal's groups and both latency histograms (one observation per
// group); without it nothing of the journal is reported.
func TestMetricsJournal(t *testing.T) {
	_, noURL, _ := startMeteredBroker(t)
	if f := scrapeMetrics(t, noURL); f[metrics.JournalGroups] != nil {
		t.Fatalf("%s reported by a broker without a journal", metrics.JournalGroups)
	}
	addr, url, _ := startMeteredBroker(t, func(_ *Config, o *engine.Options) { o.JournalBytes = engine.JournalMinBytes })
	ctx := testCtx(t)
	adm := newAdmin(t, addr)
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "journaled"); err != nil {
		t.Fatal(err)
	}
	before := scrapeMetrics(t, url)
	cl := newClient(t, addr, kgo.DefaultProduceTopic("journaled"), kgo.RequiredAcks(kgo.AllISRAcks()))
	const n = 200
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	after := scrapeMetrics(t, url)
	groups := after.Counter(metrics.JournalGroups) - before.Counter(metrics.JournalGroups)
	records := after.Counter(metrics.JournalRecords) - before.Counter(metrics.JournalRecords)
	if groups < 1 || records < n { // one record per synchronous append at least
		t.Fatalf("after %d acks=all appends: %v groups, %v records", n, groups, records)
	}
	if b := after.Counter(metrics.JournalBytes); b < 4096*after.Counter(metrics.JournalGroups) {
		t.Errorf("%v journal bytes for %v groups of at least 4 KiB", b, after.Counter(metrics.JournalGroups))
	}
	// One-record requests: nothing is written ahead of its flush.
	if after.Find(metrics.JournalAheadGroups) == nil {
		t.Errorf("%s not reported", metrics.JournalAheadGroups)
	}
	if f, g, a := after.Counter(metrics.JournalFlushes), after.Counter(metrics.JournalGroups), after.Counter(metrics.JournalAheadGroups); f < 1 || a != 0 || f != g {
		t.Errorf("%v flushes for %v groups, %v written ahead", f, g, a)
	}
	if got := after.HistogramCount(metrics.JournalFlush); float64(got) != after.Counter(metrics.JournalFlushes) {
		t.Errorf("%s counted %d, flushes %v", metrics.JournalFlush, got, after.Counter(metrics.JournalFlushes))
	}
	if got := after.HistogramCount(metrics.JournalWrite); float64(got) != after.Counter(metrics.JournalGroups) {
		t.Errorf("%s counted %d, groups %v", metrics.JournalWrite, got, after.Counter(metrics.JournalGroups))
	}
	// The commit wait counts the groups of appends (not Open's empty one).
	if got := after.HistogramCount(metrics.JournalCommitWait); got < 1 || float64(got) >= after.Counter(metrics.JournalGroups) {
		t.Errorf("%s counted %d, groups %v", metrics.JournalCommitWait, got, after.Counter(metrics.JournalGroups))
	}
}
