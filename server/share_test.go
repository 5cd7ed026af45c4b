package server

// Share groups (issue 24) end to end: franz-go's share consumer (kgo
// ShareGroup) against a broker on 127.0.0.1, and hand-made requests where a
// consumer must misbehave (hold records past their lock).

import (
	"context"
	"errors"
	"fmt"
	"github.com/stratalog/strata/broker/sharehost"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// withShare configures share groups for a test broker: one state
// partition, a fast tick, and the given delivery count limit.
func withShare(limit int16) func(*Config, *engine.Options) {
	return func(c *Config, _ *engine.Options) {
		c.Groups.Share = ShareConfig{
			StatePartitions: 1,
			Tick:            20 * time.Millisecond,
			Partition:       share.Config{DeliveryCountLimit: limit},
		}
	}
}

// setGroupConfig sets share group configs with IncrementalAlterConfigs on
// a GROUP resource.
func setGroupConfig(t *testing.T, cl *kgo.Client, group string, kv ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = kv[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[i+1])
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	resp := issue[*kmsg.IncrementalAlterConfigsResponse](t, cl, req)
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("alter group configs: %v %v", err, resp.Resources[0].ErrorMessage)
	}
}

func createShareTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	if _, err := adm.CreateTopic(testCtx(t), partitions, 1, nil, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

func produceValues(t *testing.T, cl *kgo.Client, topic string, values ...string) {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(v)}
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// delivery is one record as a share consumer received it.
type delivery struct {
	consumer int
	value    string
	offset   int64
	count    int32
}

// shareConsumer polls a kgo share consumer until ctx ends, acknowledging
// each record with decide(record) and reporting it on out.
func shareConsumer(t *testing.T, ctx context.Context, cl *kgo.Client, id int, decide func(*kgo.Record) kgo.AckStatus, out chan<- delivery, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				// Report first, then acknowledge: a record this consumer
				// stops before reporting goes back for another to take,
				// never accepted unseen.
				select {
				case out <- delivery{consumer: id, value: string(r.Value), offset: r.Offset, count: r.DeliveryCount()}:
					r.Ack(decide(r))
				case <-ctx.Done():
					r.Ack(kgo.AckRelease)
				}
			})
			if err := cl.FlushAcks(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("consumer %d: FlushAcks: %v", id, err)
			}
		}
	}()
}

func accept(*kgo.Record) kgo.AckStatus { return kgo.AckAccept }

func TestShareGroupTwoConsumersOnePartition(t *testing.T) {
	addr, _, _ := startBroker(t, withShare(0))
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	createShareTopic(t, adm, "queue", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest")

	var ackErrs sync.Map
	onAck := func(_ *kgo.Client, rs kgo.ShareAckResults) {
		for _, r := range rs {
			if r.Err != nil {
				ackErrs.Store(fmt.Sprint(r), r.Err)
			}
		}
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	out := make(chan delivery, 1024)
	var wg sync.WaitGroup
	for i := range 2 {
		c := newClient(t, addr, kgo.ShareGroup("sg"), kgo.ConsumeTopics("queue"),
			kgo.ShareMaxRecords(5), kgo.ShareAckCallback(onAck))
		shareConsumer(t, ctx, c, i, accept, out, &wg)
	}
	// Both members join and are both given the one partition.
	waitShareMembers(t, adm, "sg", 2)
	described, err := adm.DescribeShareGroups(testCtx(t), "sg")
	if err != nil {
		t.Fatal(err)
	}
	g := described["sg"]
	if g.Err != nil || len(g.Members) != 2 {
		t.Fatalf("describe: %+v", g)
	}
	for _, m := range g.Members {
		if ps := m.Assignment["queue"]; len(ps) != 1 || !hasKey(ps, 0) {
			t.Fatalf("member %s assigned %v, want queue[0]", m.MemberID, m.Assignment)
		}
	}
	// ListGroups lists it as a share group; a consumer-type filter does
	// not, and kadm's DescribeShareGroups without names finds it.
	listed, err := adm.ListGroupsByType(testCtx(t), []string{"share"})
	if l, ok := listed["sg"]; err != nil || !ok || l.GroupType != "share" || l.State != "Stable" {
		t.Fatalf("listed share groups %+v %v", listed, err)
	}
	if listed, err := adm.ListGroupsByType(testCtx(t), []string{"consumer"}); err != nil || hasKey(listed, "sg") {
		t.Fatalf("listed consumer groups %+v %v", listed, err)
	}
	if all, err := adm.DescribeShareGroups(testCtx(t)); err != nil || len(all["sg"].Members) != 2 {
		t.Fatalf("describe all share groups: %+v %v", all, err)
	}

	const n = 300
	for i := 0; i < n; i += 10 {
		var vs []string
		for j := i; j < i+10; j++ {
			vs = append(vs, strconv.Itoa(j))
		}
		produceValues(t, cl, "queue", vs...)
	}
	seen := map[string][]delivery{}
	per := map[int]int{}
	for len(seen) < n {
		select {
		case d := <-out:
			seen[d.value] = append(seen[d.value], d)
			per[d.consumer]++
		case <-ctx.Done():
			t.Fatalf("received %d of %d records", len(seen), n)
		}
	}
	cancel()
	wg.Wait()
	for len(out) > 0 {
		d := <-out
		seen[d.value] = append(seen[d.value], d)
	}
	for v, ds := range seen {
		if len(ds) != 1 || ds[0].count != 1 {
			t.Errorf("record %s delivered %+v, want once", v, ds)
		}
	}
	if per[0] == 0 || per[1] == 0 {
		t.Errorf("records per consumer %v: both should receive records", per)
	}
	ackErrs.Range(func(k, v any) bool {
		t.Errorf("ack error %v: %v", k, v)
		return true
	})
}

func hasKey[K comparable, V any](m map[K]V, k K) bool { _, ok := m[k]; return ok }

// waitShareMembers waits until the share group has n members.
func waitShareMembers(t *testing.T, adm *kadm.Client, group string, n int) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		d, err := adm.DescribeShareGroups(testCtx(t), group)
		if err == nil && d[group].Err == nil && len(d[group].Members) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("share group %s: want %d members: %+v %v", group, n, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestShareGroupReleaseRejectAndDeliveryLimit(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(3))
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	createShareTopic(t, adm, "acks", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest")
	produceValues(t, cl, "acks", "release", "reject", "accept")

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	out := make(chan delivery, 64)
	var wg sync.WaitGroup
	c := newClient(t, addr, kgo.ShareGroup("sg"), kgo.ConsumeTopics("acks"))
	shareConsumer(t, ctx, c, 0, func(r *kgo.Record) kgo.AckStatus {
		switch string(r.Value) {
		case "release":
			return kgo.AckRelease
		case "reject":
			return kgo.AckReject
		}
		return kgo.AckAccept
	}, out, &wg)

	counts := map[string][]int32{}
	sentinel := false
	for !sentinel {
		select {
		case d := <-out:
			counts[d.value] = append(counts[d.value], d.count)
			// The third release reached the limit: it is archived now
			// (the consumer flushed its acks before polling again).
			// Records are acquired in offset order, so once a record
			// produced after that arrives, a fourth delivery of
			// "release" would have come first.
			if d.value == "release" && d.count == 3 {
				produceValues(t, cl, "acks", "sentinel")
			}
			sentinel = d.value == "sentinel"
		case <-ctx.Done():
			t.Fatalf("deliveries so far %v", counts)
		}
	}
	cancel()
	wg.Wait()
	want := map[string][]int32{"release": {1, 2, 3}, "reject": {1}, "accept": {1}, "sentinel": {1}}
	for v, w := range want {
		if !slices.Equal(counts[v], w) {
			t.Errorf("%s delivered with counts %v, want %v", v, counts[v], w)
		}
	}
	// The broker's view: the three records are done (archived or
	// acknowledged), so the share-partition start offset moved past them
	// (the sentinel's acknowledgement may not have been sent yet).
	topic := s.eng.Topic("acks")
	st := s.groups.share
	st.Lock()
	spso := st.PartOf(sharehost.Key{Group: "sg", TopicID: topic.ID(), Part: 0}).P.StartOffset()
	st.Unlock()
	if spso < 3 {
		t.Errorf("share-partition start offset %d, want at least 3 (every record done)", spso)
	}
}

// rawShareFetch sends a ShareFetch for partition 0 of topicID.
func rawShareFetch(t *testing.T, cl *kgo.Client, group, member string, epoch int32, topicID [16]byte, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, epoch
	req.MaxWaitMillis, req.MaxRecords, req.BatchSize = 2000, 100, 100
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rp.AcknowledgementBatches = acks
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return issue[*kmsg.ShareFetchResponse](t, cl, req)
}

func TestShareGroupLockExpiryRedelivers(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(0))
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	createShareTopic(t, adm, "locks", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "1000")
	produceValues(t, cl, "locks", "a", "b", "c")
	topicID := s.eng.Topic("locks").ID()

	// A hand-made member acquires the records and never acknowledges.
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "raw-member", []string{"locks"}
	hbr := issue[*kmsg.ShareGroupHeartbeatResponse](t, cl, hb)
	if hbr.ErrorCode != 0 || hbr.Assignment == nil || len(hbr.Assignment.TopicPartitions) != 1 {
		t.Fatalf("heartbeat: %+v", hbr)
	}
	if r := rawShareFetch(t, cl, "sg", "raw-member", 3, topicID, nil); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("fetch without a session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r := rawShareFetch(t, cl, "sg", "raw-member", 0, topicID, nil)
	if r.ErrorCode != 0 || len(r.Topics) != 1 {
		t.Fatalf("first fetch: %+v", r)
	}
	p := r.Topics[0].Partitions[0]
	if want := []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{{FirstOffset: 0, LastOffset: 2, DeliveryCount: 1}}; !slices.EqualFunc(p.AcquiredRecords, want, func(a, b kmsg.ShareFetchResponseTopicPartitionAcquiredRecord) bool {
		return a.FirstOffset == b.FirstOffset && a.LastOffset == b.LastOffset && a.DeliveryCount == b.DeliveryCount
	}) || len(p.Records) == 0 || r.AcquisitionLockTimeoutMillis != 1000 {
		t.Fatalf("acquired %+v (lock %d ms, %d bytes)", p.AcquiredRecords, r.AcquisitionLockTimeoutMillis, len(p.Records))
	}
	if r := rawShareFetch(t, cl, "sg", "raw-member", 7, topicID, nil); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong session epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// A kgo consumer gets them once the lock has expired, delivered twice.
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	out := make(chan delivery, 64)
	var wg sync.WaitGroup
	c := newClient(t, addr, kgo.ShareGroup("sg"), kgo.ConsumeTopics("locks"))
	shareConsumer(t, ctx, c, 0, accept, out, &wg)
	got := map[string]int32{}
	for len(got) < 3 {
		select {
		case d := <-out:
			got[d.value] = d.count
		case <-ctx.Done():
			t.Fatalf("redelivered %v", got)
		}
	}
	cancel()
	wg.Wait()
	for _, v := range []string{"a", "b", "c"} {
		if got[v] != 2 {
			t.Errorf("%s delivered with count %d, want 2", v, got[v])
		}
	}
	// The raw member's late acknowledgement is refused: it lost the lock.
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	g, m := "sg", "raw-member"
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = &g, &m, 1
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = topicID
	ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ap.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 2, AcknowledgeTypes: []int8{1}}}
	at.Partitions = append(at.Partitions, ap)
	ack.Topics = append(ack.Topics, at)
	ar := issue[*kmsg.ShareAcknowledgeResponse](t, cl, ack)
	if ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("late ack: %+v", ar)
	}
}

// openBroker serves an engine on dir until the returned stop is called
// (also at cleanup).
func openBroker(t *testing.T, dir string) (string, *Server, func()) {
	t.Helper()
	cfg := Config{NodeID: 0, ClusterID: "strata-test-cluster", NumPartitions: 1, AutoCreateTopics: true,
		Logger: slog.New(slog.DiscardHandler)}
	withShare(0)(&cfg, nil)
	eng, err := engine.Open(engine.Options{Dir: dir, Log: engine.DefaultLogConfig(), Logger: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg, eng)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			if err := s.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				t.Errorf("close: %v", err)
			}
			<-served
			if err := eng.Close(); err != nil {
				t.Errorf("engine close: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), s, stop
}

func TestShareGroupStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	addr, srv, stop := openBroker(t, dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	createShareTopic(t, kadm.NewClient(cl), "durable", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest")
	var vs []string
	for i := range 10 {
		vs = append(vs, "first-"+strconv.Itoa(i))
	}
	produceValues(t, cl, "durable", vs...)
	consume := func(addr string, want int) map[string]int32 {
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		out := make(chan delivery, 64)
		var wg sync.WaitGroup
		c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("sg"), kgo.ConsumeTopics("durable"))
		if err != nil {
			t.Fatal(err)
		}
		shareConsumer(t, ctx, c, 0, accept, out, &wg)
		got := map[string]int32{}
		for len(got) < want {
			select {
			case d := <-out:
				got[d.value] = d.count
			case <-ctx.Done():
				t.Fatalf("received %v", got)
			}
		}
		cancel()
		wg.Wait()
		c.Close()
		return got
	}
	if got := consume(addr, 10); len(got) != 10 {
		t.Fatalf("before the restart: %v", got)
	}
	// One more record is delivered to a hand-made member and released:
	// AVAILABLE with one delivery, which the restart must remember.
	produceValues(t, cl, "durable", "released")
	topicID := srv.eng.Topic("durable").ID()
	if n := acquireRaw(t, cl, "sg", "raw", "durable", topicID); n != 1 {
		t.Fatalf("raw member acquired %d records, want 1", n)
	}
	rel := kmsg.NewPtrShareAcknowledgeRequest()
	g, m := "sg", "raw"
	rel.GroupID, rel.MemberID, rel.ShareSessionEpoch = &g, &m, 1
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = topicID
	rt.Partitions = []kmsg.ShareAcknowledgeRequestTopicPartition{{AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
		{FirstOffset: 10, LastOffset: 10, AcknowledgeTypes: []int8{int8(share.AckRelease)}}}}}
	rel.Topics = append(rel.Topics, rt)
	if r := issue[*kmsg.ShareAcknowledgeResponse](t, cl, rel); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("release: %+v", r)
	}
	cl.Close()
	stop()

	addr, _, _ = openBroker(t, dir)
	cl2 := newClient(t, addr)
	produceValues(t, cl2, "durable", "second-0", "second-1")
	got := consume(addr, 3)
	want := map[string]int32{"released": 2, "second-0": 1, "second-1": 1}
	for v, n := range got {
		if want[v] != n {
			t.Errorf("after the restart %s was delivered with count %d (all: %v, want %v)", v, n, got, want)
		}
	}
}

// acquireRaw makes a hand-made member join the group and acquire every
// record of partition 0 of topic through cl, and returns how many.
func acquireRaw(t *testing.T, cl *kgo.Client, group, member, topic string, topicID [16]byte) int {
	t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = group, member, []string{topic}
	if r := issue[*kmsg.ShareGroupHeartbeatResponse](t, cl, hb); r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r := rawShareFetch(t, cl, group, member, 0, topicID, nil)
	if r.ErrorCode != 0 || len(r.Topics) != 1 {
		t.Fatalf("fetch: %+v", r)
	}
	n := 0
	for _, a := range r.Topics[0].Partitions[0].AcquiredRecords {
		n += int(a.LastOffset - a.FirstOffset + 1)
	}
	return n
}

// receiveAll polls a new kgo share consumer until it has want distinct
// records and returns their delivery counts.
func receiveAll(t *testing.T, addr, group, topic string, want int) map[string]int32 {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	out := make(chan delivery, 64)
	var wg sync.WaitGroup
	c := newClient(t, addr, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	shareConsumer(t, ctx, c, 0, accept, out, &wg)
	got := map[string]int32{}
	for len(got) < want {
		select {
		case d := <-out:
			got[d.value] = d.count
		case <-ctx.Done():
			t.Fatalf("received %v of %d", got, want)
		}
	}
	cancel()
	wg.Wait()
	c.Close() // leaves the group
	return got
}

// A member whose connection closes gives its records back at once: the
// lock (10 minutes here) need not expire.
func TestShareGroupClosedConnectionReleases(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(0))
	cl := newClient(t, addr)
	createShareTopic(t, kadm.NewClient(cl), "conn", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "600000")
	produceValues(t, cl, "conn", "a", "b")
	raw, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	if n := acquireRaw(t, raw, "sg", "raw-member", "conn", s.eng.Topic("conn").ID()); n != 2 {
		t.Fatalf("acquired %d records, want 2", n)
	}
	raw.Close()
	got := receiveAll(t, addr, "sg", "conn", 2)
	if got["a"] != 2 || got["b"] != 2 {
		t.Fatalf("delivery counts %v, want 2 each", got)
	}
}

// A member that stops heartbeating is removed after the session timeout
// and its records are released.
func TestShareGroupSessionTimeoutReleases(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(0), func(c *Config, _ *engine.Options) {
		c.Groups.Share.Groups = share.GroupConfig{SessionTimeoutMs: 3000, HeartbeatIntervalMs: 1000}
	})
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	createShareTopic(t, adm, "timeout", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "600000")
	produceValues(t, cl, "timeout", "a", "b", "c")
	if n := acquireRaw(t, cl, "sg", "raw-member", "timeout", s.eng.Topic("timeout").ID()); n != 3 {
		t.Fatalf("acquired %d records, want 3", n)
	}
	got := receiveAll(t, addr, "sg", "timeout", 3)
	for _, v := range []string{"a", "b", "c"} {
		if got[v] != 2 {
			t.Errorf("%s delivered with count %d, want 2", v, got[v])
		}
	}
	d, err := adm.DescribeShareGroups(testCtx(t), "sg")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range d["sg"].Members {
		if m.MemberID == "raw-member" {
			t.Errorf("the silent member is still in the group")
		}
	}
}

// RENEW needs ShareAcknowledge v2; at v1 it is refused, and a v2 RENEW
// keeps the record acquired.
func TestShareAcknowledgeRenewVersions(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(0))
	cl := newClient(t, addr)
	createShareTopic(t, kadm.NewClient(cl), "renew", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest")
	produceValues(t, cl, "renew", "a")
	topicID := s.eng.Topic("renew").ID()
	if n := acquireRaw(t, cl, "sg", "m", "renew", topicID); n != 1 {
		t.Fatalf("acquired %d", n)
	}
	rc := dialRaw(t, addr) // a raw connection: kgo would pick the version
	ack := func(version int16, epoch int32) int16 {
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.Version = version
		g, m := "sg", "m"
		req.GroupID, req.MemberID, req.ShareSessionEpoch, req.IsRenewAck = &g, &m, epoch, version >= 2
		rt := kmsg.NewShareAcknowledgeRequestTopic()
		rt.TopicID = topicID
		rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
		rp.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{int8(share.AckRenew)}}}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		rc.roundTrip(req, epoch, r)
		if r.ErrorCode != 0 {
			t.Fatalf("v%d: %v", version, kerr.ErrorForCode(r.ErrorCode))
		}
		return r.Topics[0].Partitions[0].ErrorCode
	}
	if code := ack(1, 1); code != kerr.InvalidRequest.Code {
		t.Fatalf("RENEW at v1: %v", kerr.ErrorForCode(code))
	}
	if code := ack(2, 2); code != 0 {
		t.Fatalf("RENEW at v2: %v", kerr.ErrorForCode(code))
	}
	st := s.groups.share
	st.Lock()
	rs, n, member := st.PartOf(sharehost.Key{Group: "sg", TopicID: topicID, Part: 0}).P.Record(0)
	st.Unlock()
	if rs != share.Acquired || n != 1 || member != "m" {
		t.Fatalf("after RENEW: %v count %d member %q", rs, n, member)
	}
}

// A ShareFetch waiting for records is answered when they are produced, by
// the high-watermark wake, not by the periodic tick (an hour here).
func TestShareFetchWaitWokenByNewRecords(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(0), func(c *Config, _ *engine.Options) { c.Groups.Share.Tick = time.Hour })
	cl := newClient(t, addr, kgo.RequestTimeoutOverhead(testTimeout))
	createShareTopic(t, kadm.NewClient(cl), "wake", 1)
	topicID := s.eng.Topic("wake").ID()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "m", []string{"wake"}
	if r := issue[*kmsg.ShareGroupHeartbeatResponse](t, cl, hb); r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Open the session; "latest": the share-partition starts at the end.
	if r := rawShareFetch(t, cl, "sg", "m", 0, topicID, nil); r.ErrorCode != 0 {
		t.Fatalf("open: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	done := make(chan *kmsg.ShareFetchResponse, 1)
	go func() {
		req := kmsg.NewPtrShareFetchRequest()
		g, m := "sg", "m"
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &g, &m, 1
		req.MaxWaitMillis, req.MaxRecords, req.BatchSize = int32(testTimeout/time.Millisecond)/2, 100, 100
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Errorf("waiting fetch: %v", err)
		}
		done <- resp
	}()
	// Produce once the fetch waits (or before: then it acquires at once).
	deadline := time.Now().Add(testTimeout)
	for {
		st := s.groups.share
		st.Lock()
		n := st.Waiting()
		st.Unlock()
		if n == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	produceValues(t, cl, "wake", "x")
	r := <-done
	if r == nil || r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions[0].AcquiredRecords) != 1 {
		t.Fatalf("woken fetch: %+v", r)
	}
}

// A share group cannot take the id of a consumer group.
func TestShareGroupHeartbeatRefusesConsumerGroupID(t *testing.T) {
	addr, _, _ := startBroker(t, withShare(0))
	cl := newClient(t, addr)
	createShareTopic(t, kadm.NewClient(cl), "ids", 1)
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "classic", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "ids"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset = 0
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if r := issue[*kmsg.OffsetCommitResponse](t, cl, commit); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "classic", "m", []string{"ids"}
	if r := issue[*kmsg.ShareGroupHeartbeatResponse](t, cl, hb); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share heartbeat on a consumer group's id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	hb.GroupID = "fresh"
	if r := issue[*kmsg.ShareGroupHeartbeatResponse](t, cl, hb); r.ErrorCode != 0 || r.MemberEpoch <= 0 {
		t.Fatalf("share heartbeat: %+v", r)
	}
}

// Six consumers share a three-partition topic (two per partition, as the
// simple assignor gives more members than partitions); two of them leave
// mid-run. Every record is delivered, a record delivered again is a
// redelivery (a higher delivery count, never two holders at once), and at
// the end every share-partition has passed its last record.
func TestShareGroupSixConsumersThreePartitions(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(0))
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	createShareTopic(t, adm, "wide", 3)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest")

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	out := make(chan delivery, 4096)
	var wg sync.WaitGroup
	clients := make([]*kgo.Client, 6)
	stops := make([]context.CancelFunc, 6)
	for i := range clients {
		cctx, stop := context.WithCancel(ctx)
		stops[i] = stop
		clients[i] = newClient(t, addr, kgo.ShareGroup("sg"), kgo.ConsumeTopics("wide"), kgo.ShareMaxRecords(7))
		shareConsumer(t, cctx, clients[i], i, accept, out, &wg)
	}
	waitShareMembers(t, adm, "sg", 6)

	const n = 600
	seen := map[string][]delivery{}
	receive := func(want int) {
		for len(seen) < want {
			select {
			case d := <-out:
				seen[d.value] = append(seen[d.value], d)
			case <-ctx.Done():
				t.Fatalf("received %d of %d records", len(seen), want)
			}
		}
	}
	produceBatch := func(from, to int) {
		for i := from; i < to; i += 20 {
			var vs []string
			for j := i; j < i+20 && j < to; j++ {
				vs = append(vs, strconv.Itoa(j))
			}
			produceValues(t, cl, "wide", vs...)
		}
	}
	produceBatch(0, n/2)
	receive(n / 4)
	// Two members leave while records are in flight.
	for _, i := range []int{1, 4} {
		stops[i]()
		clients[i].Close()
	}
	produceBatch(n/2, n)
	receive(n)
	cancel()
	wg.Wait()
	// The others close too: their last acknowledgements go out with
	// their share sessions' final requests.
	for i, c := range clients {
		if i != 1 && i != 4 {
			c.Close()
		}
	}
	for len(out) > 0 {
		d := <-out
		seen[d.value] = append(seen[d.value], d)
	}
	for v, ds := range seen {
		for i := 1; i < len(ds); i++ {
			if ds[i].count <= ds[i-1].count {
				t.Errorf("record %s delivered %+v: a second delivery without a higher count", v, ds)
			}
		}
	}
	// Every share-partition ends past its last record: nothing is left
	// acquired or available (the records the leavers held were
	// acknowledged or released to the others when they closed).
	eventually(t, "every share-partition done", func() bool {
		st := s.groups.share
		st.Lock()
		defer st.Unlock()
		topic := s.eng.Topic("wide")
		for p := range int32(3) {
			sp := st.PartOf(sharehost.Key{Group: "sg", TopicID: topic.ID(), Part: p})
			if sp == nil || sp.P.StartOffset() != topic.Partition(p).HighWatermark() {
				return false
			}
		}
		return true
	})
}

// DescribeShareGroupOffsets and AlterShareGroupOffsets through kadm: the
// start offset and lag after some records are accepted, a reset refused
// while the group has members and done once it is empty, after which a
// consumer starts at the new offset.
func TestShareGroupOffsetsAdmin(t *testing.T) {
	addr, _, _ := startBroker(t, withShare(0))
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	createShareTopic(t, adm, "offs", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest")
	var vs []string
	for i := range 10 {
		vs = append(vs, strconv.Itoa(i))
	}
	produceValues(t, cl, "offs", vs[:4]...)
	if got := receiveAll(t, addr, "sg", "offs", 4); len(got) != 4 {
		t.Fatalf("received %v", got)
	}
	produceValues(t, cl, "offs", vs[4:]...)
	if d, err := adm.DescribeShareGroupOffsets(testCtx(t), "nope"); err == nil && !errors.Is(d["nope"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("unknown group: %+v", d["nope"])
	}
	eventually(t, "start offset 4, lag 6", func() bool {
		d, err := adm.DescribeShareGroupOffsets(testCtx(t), "sg")
		if err != nil || d["sg"].Err != nil {
			return false
		}
		o, ok := d["sg"].Offsets["offs"][0]
		return ok && o.StartOffset == 4 && o.Lag == 6
	})
	// A member holds the group: the reset is refused.
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "m", []string{"offs"}
	if r := issue[*kmsg.ShareGroupHeartbeatResponse](t, cl, hb); r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "offs", Partition: 0, At: 8})
	if _, err := adm.AlterShareGroupOffsets(testCtx(t), "sg", offsets); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("alter with a member: %v", err)
	}
	hb.MemberEpoch = -1
	if r := issue[*kmsg.ShareGroupHeartbeatResponse](t, cl, hb); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	res, err := adm.AlterShareGroupOffsets(testCtx(t), "sg", offsets)
	if err != nil || res.Error() != nil {
		t.Fatalf("alter: %v %v", err, res.Error())
	}
	got := receiveAll(t, addr, "sg", "offs", 2)
	if _, ok := got["8"]; !ok || len(got) != 2 {
		t.Fatalf("after the reset to 8: %v", got)
	}
	// Deleting the group's offsets of the topic forgets its state: with
	// "earliest" the next consumer starts over at 0.
	if _, err := adm.DeleteShareGroupOffsets(testCtx(t), "sg", "offs"); err != nil {
		t.Fatalf("delete offsets: %v", err)
	}
	if d, err := adm.DescribeShareGroupOffsets(testCtx(t), "sg"); err != nil || len(d["sg"].Offsets) != 0 {
		t.Fatalf("after the delete: %+v %v", d["sg"], err)
	}
	if got := receiveAll(t, addr, "sg", "offs", 10); len(got) != 10 {
		t.Fatalf("after the delete: %v", got)
	}
}

// Without share.auto.offset.reset a share-partition starts at the end of
// the log when first fetched ("latest", Kafka's default): older records
// are not delivered.
func TestShareGroupDefaultResetIsLatest(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(0))
	cl := newClient(t, addr)
	createShareTopic(t, kadm.NewClient(cl), "latest", 1)
	produceValues(t, cl, "latest", "old-0", "old-1")
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	out := make(chan delivery, 16)
	var wg sync.WaitGroup
	c := newClient(t, addr, kgo.ShareGroup("sg"), kgo.ConsumeTopics("latest"))
	shareConsumer(t, ctx, c, 0, accept, out, &wg)
	topicID := s.eng.Topic("latest").ID()
	eventually(t, "share-partition initialized", func() bool {
		st := s.groups.share
		st.Lock()
		defer st.Unlock()
		return st.PartOf(sharehost.Key{Group: "sg", TopicID: topicID, Part: 0}) != nil
	})
	produceValues(t, cl, "latest", "new")
	select {
	case d := <-out:
		if d.value != "new" || d.offset != 2 {
			t.Fatalf("first delivery %+v, want the record produced after the group started", d)
		}
	case <-ctx.Done():
		t.Fatal("nothing delivered")
	}
	cancel()
	wg.Wait()
}

// Group configs: IncrementalAlterConfigs checks keys and values, and
// DescribeConfigs reports what is set (GROUP_CONFIG) and the defaults.
func TestShareGroupConfigs(t *testing.T) {
	addr, _, _ := startBroker(t, withShare(0))
	cl := newClient(t, addr)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest")
	alter := func(name, value string) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg"
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
		r.Configs = append(r.Configs, c)
		req.Resources = append(req.Resources, r)
		return issue[*kmsg.IncrementalAlterConfigsResponse](t, cl, req).Resources[0].ErrorCode
	}
	for _, tc := range []struct{ name, value string }{
		{"share.record.lock.duration.ms", "10"},
		{"share.delivery.count.limit", "1"},
		{"share.delivery.count.limit", "11"},
		{"share.auto.offset.reset", "sometime"},
		{"share.isolation.level", "serializable"},
		{"no.such.key", "1"},
		{"errors.deadletterqueue.topic.name", "__consumer_offsets"},
		{"errors.deadletterqueue.copy.record.enable", "yes"},
	} {
		if code := alter(tc.name, tc.value); code != kerr.InvalidConfig.Code {
			t.Errorf("%s=%s: %v, want INVALID_CONFIG", tc.name, tc.value, kerr.ErrorForCode(code))
		}
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg"
	req.Resources = append(req.Resources, rr)
	resp := issue[*kmsg.DescribeConfigsResponse](t, cl, req)
	if resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe: %v", kerr.ErrorForCode(resp.Resources[0].ErrorCode))
	}
	got := map[string]string{}
	for _, c := range resp.Resources[0].Configs {
		got[c.Name] = fmt.Sprintf("%s/%v", *c.Value, c.Source)
	}
	want := map[string]string{
		"share.auto.offset.reset":       "earliest/GROUP_CONFIG",
		"share.record.lock.duration.ms": "30000/DEFAULT_CONFIG",
		"share.isolation.level":         "read_uncommitted/DEFAULT_CONFIG",
		"share.delivery.count.limit":    "5/DEFAULT_CONFIG", // KIP-1240
		// KIP-1191: no dead-letter topic by default.
		"errors.deadletterqueue.topic.name":         "/DEFAULT_CONFIG",
		"errors.deadletterqueue.copy.record.enable": "false/DEFAULT_CONFIG",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("group configs %v, want %v", got, want)
	}
}

// With share.isolation.level=read_committed the group gets committed and
// plain records only: those of an aborted transaction are archived by the
// broker, and records past an open transaction wait for its end.
func TestShareGroupReadCommitted(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(0))
	cl := newClient(t, addr)
	createShareTopic(t, kadm.NewClient(cl), "txn", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest", "share.isolation.level", "read_committed")
	tx := newClient(t, addr, kgo.TransactionalID("share-tx"), kgo.DefaultProduceTopic("txn"))
	ctx := testCtx(t)
	txn := func(commit bool, values ...string) {
		t.Helper()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	txn(false, "aborted-1", "aborted-2")
	txn(true, "committed")
	produceValues(t, cl, "txn", "plain")
	got := receiveAll(t, addr, "sg", "txn", 2)
	if _, ok := got["committed"]; !ok || got["plain"] != 1 || len(got) != 2 {
		t.Fatalf("read_committed share consumer got %v", got)
	}
	topic := s.eng.Topic("txn")
	eventually(t, "every record done", func() bool {
		st := s.groups.share
		st.Lock()
		defer st.Unlock()
		sp := st.PartOf(sharehost.Key{Group: "sg", TopicID: topic.ID(), Part: 0})
		return sp != nil && sp.P.StartOffset() == topic.Partition(0).HighWatermark()
	})
}

// A share group known only by its share-partitions' state (a restarted
// broker: members are not persisted) is described Empty, as ListGroups
// lists it, not GROUP_ID_NOT_FOUND; a group without state still is.
func TestShareGroupDescribeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	addr, _, stop := openBroker(t, dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	createShareTopic(t, kadm.NewClient(cl), "q", 1)
	produceValues(t, cl, "q", "a", "b")
	offs := kadm.Offsets{}
	offs.AddOffset("q", 0, 1, -1)
	if resp, err := kadm.NewClient(cl).AlterShareGroupOffsets(testCtx(t), "sg", offs); err != nil || resp.Error() != nil {
		t.Fatalf("alter share group offsets: %v %v", err, resp.Error())
	}
	cl.Close()
	stop()

	addr, _, _ = openBroker(t, dir)
	adm := kadm.NewClient(newClient(t, addr))
	ds, err := adm.DescribeShareGroups(testCtx(t), "sg", "nope")
	if err != nil {
		t.Fatal(err)
	}
	if d := ds["sg"]; d.Err != nil || d.GroupState != "Empty" || len(d.Members) != 0 {
		t.Errorf("sg after restart: %+v, want Empty without members", d)
	}
	if d := ds["nope"]; !errors.Is(d.Err, kerr.GroupIDNotFound) {
		t.Errorf("nope: %v, want GROUP_ID_NOT_FOUND", d.Err)
	}
}
