package server

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/metrics/metricstest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startMeteredBrokerWith is startMeteredBroker with metrics options.
func startMeteredBrokerWith(t *testing.T, mo metrics.Options, opts ...func(*Config, *engine.Options)) (addr, url string, s *Server) {
	t.Helper()
	m := metrics.NewWithOptions(mo)
	opts = append(opts, func(c *Config, _ *engine.Options) { c.Metrics = m })
	addr, s, _ = startBroker(t, opts...)
	ep, err := metrics.Listen([]string{"127.0.0.1:0"}, m, s.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	return addr, "http://" + ep.Addrs()[0].String() + "/metrics", s
}

// histSum is the sum of a histogram's observations (0 without a sample).
func histSum(f metricstest.Families, name string, labels ...string) float64 {
	return f.Find(name, labels...).GetHistogram().GetSampleSum()
}

// waitMetric scrapes url until ok accepts the scrape (or fails the test
// after testTimeout), and returns that scrape.
func waitMetric(t *testing.T, url, what string, ok func(metricstest.Families) bool) metricstest.Families {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		f := scrapeMetrics(t, url)
		if ok(f) {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// produceN produces n keyed records to topic with acks=all and waits for
// every acknowledgement.
func produceN(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx := testCtx(t)
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte("value-" + strconv.Itoa(i))},
			func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// The phases of a request's time, its throttle time, the connections of
// the listener: after a produce and consume run from franz-go, each
// Produce request the client wrote has one queue, processing and send
// observation, queue plus processing is the total time, Fetch was
// timed too, every Produce and Fetch response's throttle time (0) was
// observed, and the connections are counted open, then closed.
func TestMetricsRequestPhasesAndConnections(t *testing.T) {
	addr, url, _ := startMeteredBroker(t)
	f := scrapeMetrics(t, url)
	for _, key := range []string{"Produce", "Fetch"} {
		if f.Find(metrics.RequestThrottleTime, "request", key) == nil {
			t.Errorf("no %s{request=%s} series before any request", metrics.RequestThrottleTime, key)
		}
	}
	ctx := testCtx(t)
	adm := newAdmin(t, addr)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "phased"); err != nil {
		t.Fatal(err)
	}
	counts := newClientCounts()
	cl := newClient(t, addr, kgo.WithHooks(counts), kgo.RequiredAcks(kgo.AllISRAcks()))
	const n = 200
	produceN(t, cl, "phased", n)
	cons := newClient(t, addr, kgo.ConsumeTopics("phased"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	counts.mu.Lock()
	reqs := counts.produceRequests
	counts.mu.Unlock()
	cons.Close() // no Fetch in flight from here on: the counts settle

	// A response's send is observed when its write completes (or the
	// response is dropped with its connection), just after the client may
	// have read it: wait for the last ones.
	f = waitMetric(t, url, "every Produce and Fetch response's send observed", func(f metricstest.Families) bool {
		fetches := f.HistogramCount(metrics.RequestTotalTime, "request", "Fetch")
		return f.HistogramCount(metrics.ResponseSendTime, "request", "Produce") == uint64(reqs) &&
			f.HistogramCount(metrics.ResponseSendTime, "request", "Fetch") == fetches &&
			// the reader's share is observed when the handler returns,
			// which may come after the response went out
			f.HistogramCount(metrics.RequestReaderTime, "request", "Produce") == uint64(reqs)
	})
	if histSum(f, metrics.RequestReaderTime, "request", "Produce") <= 0 {
		t.Errorf("Produce handlers held their reader no time")
	}
	for _, name := range []string{metrics.RequestQueueTime, metrics.RequestProcessingTime, metrics.RequestThrottleTime} {
		if got := f.HistogramCount(name, "request", "Produce"); got != uint64(reqs) {
			t.Errorf("%s{Produce} counted %d, the client wrote %d Produce requests", name, got, reqs)
		}
	}
	total := histSum(f, metrics.RequestTotalTime, "request", "Produce")
	parts := histSum(f, metrics.RequestQueueTime, "request", "Produce") + histSum(f, metrics.RequestProcessingTime, "request", "Produce")
	if total <= 0 || math.Abs(total-parts) > 1e-6 {
		t.Errorf("Produce: total time %v s, queue + processing %v s", total, parts)
	}
	if histSum(f, metrics.RequestProcessingTime, "request", "Produce") <= 0 {
		t.Errorf("Produce processing took no time")
	}
	if got := histSum(f, metrics.RequestThrottleTime, "request", "Produce"); got != 0 {
		t.Errorf("Produce throttled %v s (no quotas)", got)
	}
	fetches := f.HistogramCount(metrics.RequestTotalTime, "request", "Fetch")
	if fetches == 0 || f.HistogramCount(metrics.RequestQueueTime, "request", "Fetch") != fetches ||
		f.HistogramCount(metrics.RequestProcessingTime, "request", "Fetch") != fetches {
		t.Errorf("Fetch: %d answered, queue %d, processing %d", fetches,
			f.HistogramCount(metrics.RequestQueueTime, "request", "Fetch"), f.HistogramCount(metrics.RequestProcessingTime, "request", "Fetch"))
	}
	if got := f.HistogramCount(metrics.RequestThrottleTime, "request", "Fetch"); got == 0 {
		t.Errorf("no Fetch throttle time observed")
	}
	if got := f.HistogramCount(metrics.RequestQueueTime, "request", "Metadata"); got == 0 {
		t.Errorf("no Metadata queue time observed")
	}

	// Three clients (producer, consumer, admin), each with at least one
	// connection, all on the unnamed listener; two still open.
	open := f.Gauge(metrics.Connections, "listener", "PLAINTEXT")
	accepted := f.Counter(metrics.ConnectionsAccepted, "listener", "PLAINTEXT")
	if open < 2 || accepted < 3 || accepted < open {
		t.Fatalf("connections: %v open, %v accepted", open, accepted)
	}
	cl.Close()
	adm.Close()
	f = waitMetric(t, url, "every connection closed", func(f metricstest.Families) bool {
		return f.Gauge(metrics.Connections, "listener", "PLAINTEXT") == 0
	})
	if got := f.Counter(metrics.ConnectionsClosed, "listener", "PLAINTEXT"); got != f.Counter(metrics.ConnectionsAccepted, "listener", "PLAINTEXT") || got < accepted {
		t.Errorf("closed %v, accepted %v (%v before closing)", got, f.Counter(metrics.ConnectionsAccepted, "listener", "PLAINTEXT"), accepted)
	}
}

// Consumer group lag and the retention-cliff margin, per group by
// default: a group that committed offset 0 of every partition lags by
// every record produced, with a margin of 0; after consuming and
// committing it lags by 0 with a margin of every record; records deleted
// past its position make the margin negative. Log sizes per topic equal
// the bytes produced; reads at the head hit the tail cache.
func TestMetricsGroupLagAndLogs(t *testing.T) {
	addr, url, _ := startMeteredBroker(t)
	ctx := testCtx(t)
	adm := newAdmin(t, addr)
	const topic, group, n = "lagged", "lagging", 300
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	// A consumer at the head before the records arrive: the tail cache
	// caches the appends that follow a read.
	head := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.FetchMaxWait(50*time.Millisecond))
	pollCtx, cancel := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		head.PollFetches(pollCtx) // returns when canceled: the topic is empty
	}()
	waitMetric(t, url, "the head consumer's fetches", func(f metricstest.Families) bool {
		return f.HistogramCount(metrics.RequestTotalTime, "request", "Fetch") > 0
	})
	cancel()
	<-polled

	cl := newClient(t, addr, kgo.RequiredAcks(kgo.AllISRAcks()))
	produceN(t, cl, topic, n)
	zero := kadm.Offsets{}
	for p := range int32(3) {
		zero.Add(kadm.Offset{Topic: topic, Partition: p, At: 0, LeaderEpoch: -1})
	}
	if r, err := adm.CommitOffsets(ctx, group, zero); err != nil || r.Error() != nil {
		t.Fatalf("commit 0: %v %v", err, r.Error())
	}
	f := scrapeMetrics(t, url)
	if got := f.Gauge(metrics.GroupLag, "group", group); got != n {
		t.Errorf("lag after producing %d without consuming: %v", n, got)
	}
	if got := f.Gauge(metrics.GroupRetentionMargin, "group", group); got != 0 {
		t.Errorf("retention margin at offset 0: %v", got)
	}
	bytesIn := f.Counter(metrics.TopicBytesIn, "topic", topic)
	if got := f.Gauge(metrics.LogSizeBytes, "topic", topic); bytesIn == 0 || got != bytesIn {
		t.Errorf("log size %v bytes, %v bytes produced", got, bytesIn)
	}
	if got := f.Gauge(metrics.LogSegments, "topic", topic); got != 3 {
		t.Errorf("%v segments for 3 partitions", got)
	}
	if f.Find(metrics.LogSizeBytes, "partition", "0") != nil {
		t.Errorf("per-partition log size without metrics.partition.labels")
	}

	// Consume as the group and commit: lag 0.
	cons := newClient(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	f = scrapeMetrics(t, url)
	if got := f.Gauge(metrics.GroupLag, "group", group); got != 0 {
		t.Errorf("lag after consuming and committing: %v", got)
	}
	if got := f.Gauge(metrics.GroupRetentionMargin, "group", group); got <= 0 {
		t.Errorf("retention margin after committing the ends: %v", got)
	}
	if hits := f.Counter(metrics.TailCacheHits); hits == 0 {
		t.Errorf("tail cache: %v hits, %v misses after reading at the head", hits, f.Counter(metrics.TailCacheMisses))
	}
	cons.Close()

	// Delete every record of partition 0 and produce more: the group's
	// position of partition 0 is below the log start.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end0, _ := ends.Lookup(topic, 0)
	if end0.Offset == 0 {
		t.Fatal("no records in partition 0")
	}
	cl2 := newClient(t, addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 5 {
		if err := cl2.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("more-" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 0, At: end0.Offset + 5})
	if r, err := adm.DeleteRecords(ctx, del); err != nil || r.Error() != nil {
		t.Fatalf("delete records: %v %v", err, r.Error())
	}
	f = scrapeMetrics(t, url)
	if got := f.Gauge(metrics.GroupRetentionMargin, "group", group); got != -5 {
		t.Errorf("retention margin with the log start 5 past the committed offset: %v", got)
	}
	if got := f.Gauge(metrics.GroupLag, "group", group); got != 5 {
		t.Errorf("lag after 5 more records: %v", got)
	}
}

// With metrics.partition.labels the log sizes and the group lag are per
// partition, and they add up to the figures of the topic.
func TestMetricsPartitionLabels(t *testing.T) {
	addr, url, _ := startMeteredBrokerWith(t, metrics.Options{PartitionLabels: true})
	ctx := testCtx(t)
	adm := newAdmin(t, addr)
	const topic, group, n = "labelled", "g", 100
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.RequiredAcks(kgo.AllISRAcks()))
	produceN(t, cl, topic, n)
	zero := kadm.Offsets{}
	zero.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
	zero.Add(kadm.Offset{Topic: topic, Partition: 1, At: 0, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, group, zero); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	f := scrapeMetrics(t, url)
	var bytes, lag float64
	for p := range int32(2) {
		ps := strconv.Itoa(int(p))
		end, _ := ends.Lookup(topic, p)
		if got := f.Gauge(metrics.GroupLag, "group", group, "topic", topic, "partition", ps); got != float64(end.Offset) {
			t.Errorf("partition %d: lag %v, end offset %d", p, got, end.Offset)
		}
		lag += f.Gauge(metrics.GroupLag, "group", group, "topic", topic, "partition", ps)
		if got := f.Gauge(metrics.LogSegments, "topic", topic, "partition", ps); got != 1 {
			t.Errorf("partition %d: %v segments", p, got)
		}
		bytes += f.Gauge(metrics.LogSizeBytes, "topic", topic, "partition", ps)
	}
	if lag != n {
		t.Errorf("lag sums to %v, want %d", lag, n)
	}
	if in := f.Counter(metrics.TopicBytesIn, "topic", topic); bytes != in {
		t.Errorf("log sizes sum to %v, %v bytes produced", bytes, in)
	}
}

// startMeteredCluster is startInCluster with metrics on every broker and
// an endpoint for each; it returns the brokers, the voters and the
// brokers' /metrics URLs.
func startMeteredCluster(t *testing.T, n int) ([]*inCluster, map[int32]string, []string) {
	t.Helper()
	voters, lns := quorumListeners(t, n)
	var brokers []*inCluster
	var urls []string
	for i := range int32(n) {
		b := &inCluster{id: i, dataDir: t.TempDir(), ctlDir: t.TempDir(), metrics: metrics.New()}
		b.start(t, voters, lns[i])
		ep, err := metrics.Listen([]string{"127.0.0.1:0"}, b.metrics, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ep.Close() })
		brokers = append(brokers, b)
		urls = append(urls, "http://"+ep.Addrs()[0].String()+"/metrics")
	}
	return brokers, voters, urls
}

// In a cluster, scraped from each broker: every broker reports its
// controller role (one leader among the voters, the same term everywhere,
// applied indexes moving); a stopped broker's partitions elect new leaders
// (counted by the brokers that took them) and every ISR shrinks on its
// leader; after the broker returns and catches up every ISR expands again.
func TestMetricsClusterEvents(t *testing.T) {
	brokers, voters, urls := startMeteredCluster(t, 3)
	waitRegistered(t, brokers)
	ctx := testCtx(t)
	adm := newAdmin(t, brokers[0].addr)
	const topic, parts = "evented", 6
	if ct, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}
	full := func(c metrics.PartitionCounts) bool { return c.Leaders == parts && c.UnderReplicated == 0 }
	sumCounts := func(live []*inCluster) (c metrics.PartitionCounts) {
		for _, b := range live {
			p := b.s.partitionCounts()
			c.Leaders += p.Leaders
			c.UnderReplicated += p.UnderReplicated
		}
		return c
	}
	waitCounts := func(what string, live []*inCluster, ok func(metrics.PartitionCounts) bool) {
		t.Helper()
		for deadline := time.Now().Add(testTimeout); !ok(sumCounts(live)); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, sumCounts(live))
			}
		}
	}
	waitCounts("every partition led and fully replicated", brokers, full)
	produceN(t, newClient(t, brokers[0].addr, kgo.RequiredAcks(kgo.AllISRAcks())), topic, 60)

	type events struct{ shrinks, expands, elections float64 }
	scrapeAll := func(idx ...int) (sum events, fams []metricstest.Families) {
		for _, i := range idx {
			f := scrapeMetrics(t, urls[i])
			fams = append(fams, f)
			sum.shrinks += f.Counter(metrics.ISRShrinks)
			sum.expands += f.Counter(metrics.ISRExpands)
			sum.elections += f.Counter(metrics.LeaderElections)
		}
		return sum, fams
	}
	// A slow follower may drop out of an ISR and return on this shared
	// machine: the counts below are compared with this scrape's.
	start, fams := scrapeAll(0, 1, 2)
	for i, f := range fams {
		if f.Gauge(metrics.ControllerVoter) != 1 || f.Gauge(metrics.ControllerAppliedIndex) <= 0 ||
			f.Gauge(metrics.ControllerCommitIndex) < f.Gauge(metrics.ControllerAppliedIndex) {
			t.Errorf("broker %d: voter %v, commit %v, applied %v", i, f.Gauge(metrics.ControllerVoter),
				f.Gauge(metrics.ControllerCommitIndex), f.Gauge(metrics.ControllerAppliedIndex))
		}
	}
	// One leader, the others followers, all in one term (an election may
	// be under way on this shared machine: wait for it).
	quorum := func(fams []metricstest.Families) string {
		leaders, followers, terms := 0, 0, map[float64]bool{}
		for _, f := range fams {
			leaders += int(f.Gauge(metrics.ControllerRole, "role", "leader"))
			followers += int(f.Gauge(metrics.ControllerRole, "role", "follower"))
			terms[f.Gauge(metrics.ControllerTerm)] = true
		}
		if leaders != 1 || followers != len(fams)-1 || len(terms) != 1 {
			return fmt.Sprintf("%d leaders, %d followers, terms %v", leaders, followers, terms)
		}
		return ""
	}
	for deadline := time.Now().Add(testTimeout); quorum(fams) != ""; {
		if time.Now().After(deadline) {
			t.Fatalf("controller roles: %s", quorum(fams))
		}
		time.Sleep(20 * time.Millisecond)
		_, fams = scrapeAll(0, 1, 2)
	}

	led2 := brokers[2].s.partitionCounts().Leaders
	brokers[2].stop(t)
	waitCounts("broker 2 out of every ISR", brokers[:2], func(c metrics.PartitionCounts) bool {
		return c.Leaders == parts && c.UnderReplicated == parts
	})
	after, _ := scrapeAll(0, 1)
	if after.shrinks-start.shrinks < parts || after.elections-start.elections < float64(led2) {
		t.Errorf("after broker 2 stopped (it led %d): %+v (before %+v)", led2, after, start)
	}

	brokers[2].restart(t, voters)
	waitCounts("broker 2 back in every ISR", brokers, full)
	back, _ := scrapeAll(0, 1)
	if back.expands-after.expands < parts {
		t.Errorf("after broker 2 returned: %+v (before %+v)", back, after)
	}
}

// Error codes inside a response's entries count, one per entry, as Kafka
// counts them: a Metadata of two missing topics (auto-creation off) is two
// UNKNOWN_TOPIC_OR_PARTITION, a CreateTopics of an existing and a new
// topic one TOPIC_ALREADY_EXISTS; the walk allocates nothing.
func TestMetricsCountNestedErrors(t *testing.T) {
	addr, url, _ := startMeteredBroker(t, func(c *Config, _ *engine.Options) { c.AutoCreateTopics = false })
	ctx := testCtx(t)
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "present"); err != nil {
		t.Fatal(err)
	}
	md := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"missing-1", "missing-2"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		md.Topics = append(md.Topics, rt)
	}
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range mresp.Topics {
		if rt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("metadata of a missing topic: code %d", rt.ErrorCode)
		}
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 5000
	for _, name := range []string{"present", "fresh"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		ct.Topics = append(ct.Topics, rt)
	}
	if _, err := ct.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	f := scrapeMetrics(t, url)
	if got := f.Counter(metrics.RequestErrors, "request", "Metadata", "error", "UNKNOWN_TOPIC_OR_PARTITION"); got != 2 {
		t.Errorf("Metadata UNKNOWN_TOPIC_OR_PARTITION = %v, want 2", got)
	}
	if got := f.Counter(metrics.RequestErrors, "request", "CreateTopics", "error", "TOPIC_ALREADY_EXISTS"); got != 1 {
		t.Errorf("CreateTopics TOPIC_ALREADY_EXISTS = %v, want 1", got)
	}

	p := errorPlans()[3]
	if p == nil {
		t.Fatal("no error plan for Metadata")
	}
	m := metrics.New()
	v := reflect.ValueOf(mresp).Elem()
	if n := testing.AllocsPerRun(100, func() { p.count(m, 3, v) }); n != 0 {
		t.Errorf("%v allocations counting a Metadata response's errors", n)
	}
}

// A Fetch whose connection closes while it long-polls is answered by
// nobody, and its response still counts as sent (dropped with its
// connection), so Fetch's send count catches up with its total count. A
// consumer closed while its next fetch waited left the send count one
// short forever, and TestMetricsRequestPhasesAndConnections waited for it.
func TestMetricsFetchClosedInLongPoll(t *testing.T) {
	addr, url, _ := startMeteredBroker(t)
	ctx := testCtx(t)
	adm := newAdmin(t, addr)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "idle"); err != nil {
		t.Fatal(err)
	}
	cons := newClient(t, addr, kgo.ConsumeTopics("idle"), kgo.FetchMaxWait(30*time.Second))
	// Nothing to read: the client's fetch long-polls for 30 s.
	waitCtx, cancel := context.WithTimeout(ctx, time.Second)
	cons.PollFetches(waitCtx)
	cancel()
	cons.Close()
	f := waitMetric(t, url, "the long-polling Fetch counted as answered and sent", func(f metricstest.Families) bool {
		return f.HistogramCount(metrics.RequestTotalTime, "request", "Fetch") >= 1 &&
			f.HistogramCount(metrics.ResponseSendTime, "request", "Fetch") == f.HistogramCount(metrics.RequestTotalTime, "request", "Fetch")
	})
	t.Logf("Fetch: %d answered, %d sent", f.HistogramCount(metrics.RequestTotalTime, "request", "Fetch"), f.HistogramCount(metrics.ResponseSendTime, "request", "Fetch"))
}
