package server

// Dead-letter topics for share groups (KIP-1191, issue 24) end to end:
// franz-go's share consumer rejects records or fails them up to the
// delivery count limit, and a plain kgo consumer reads the dead-letter
// topic.

import (
	"context"
	"github.com/stratalog/strata/broker/sharehost"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readDLQ reads n records of topic from the start with a plain consumer.
func readDLQ(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	c := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer c.Close()
	var out []*kgo.Record
	for len(out) < n {
		fs := c.PollFetches(testCtx(t))
		if err := testCtx(t).Err(); err != nil {
			t.Fatalf("read %d of %d dead letters", len(out), n)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func dlqHeaders(r *kgo.Record) map[string]string {
	m := map[string]string{}
	for _, h := range r.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

// waitSPSO waits until the share-partition's start offset reaches want.
func waitSPSO(t *testing.T, s *Server, group, topic string, part int32, want int64) {
	t.Helper()
	ctx := testCtx(t)
	for {
		st := s.groups.share
		st.Lock()
		got := int64(-1)
		if tp := s.eng.Topic(topic); tp != nil {
			if sp := st.PartOf(sharehost.Key{Group: group, TopicID: tp.ID(), Part: part}); sp != nil {
				got = sp.P.StartOffset()
			}
		}
		st.Unlock()
		if got >= want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s/%s-%d: share-partition start offset %d, want %d", group, topic, part, got, want)
		case <-waitABit():
		}
	}
}

// archiving returns how many records of the share-partition are ARCHIVING.
func archiving(s *Server, group, topic string, part int32) int {
	st := s.groups.share
	st.Lock()
	defer st.Unlock()
	tp := s.eng.Topic(topic)
	if tp == nil {
		return -1
	}
	sp := st.PartOf(sharehost.Key{Group: group, TopicID: tp.ID(), Part: part})
	if sp == nil {
		return -1
	}
	return len(sp.P.DeadLetters())
}

// createDLQTopic creates a topic that may be a dead-letter topic
// (errors.deadletterqueue.group.enable=true).
func createDLQTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	if _, err := adm.CreateTopic(testCtx(t), partitions, 1, map[string]*string{"errors.deadletterqueue.group.enable": kmsg.StringPtr("true")}, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// rejectAll acquires the records of topic's partition 0 as member m of
// group sg and REJECTs offsets 0..last.
func rejectAll(t *testing.T, s *Server, cl *kgo.Client, topic string, last int64) {
	t.Helper()
	topicID := s.eng.Topic(topic).ID()
	if n := acquireRaw(t, cl, "sg", "m", topic, topicID); n != int(last+1) {
		t.Fatalf("acquired %d, want %d", n, last+1)
	}
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	g, m := "sg", "m"
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = &g, &m, 1
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = topicID
	rt.Partitions = []kmsg.ShareAcknowledgeRequestTopicPartition{{AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
		{FirstOffset: 0, LastOffset: last, AcknowledgeTypes: []int8{3}}}}} // REJECT
	ack.Topics = append(ack.Topics, rt)
	if resp := issue[*kmsg.ShareAcknowledgeResponse](t, cl, ack); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("reject: %+v", resp)
	}
}

func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

func TestShareGroupDeadLetterTopic(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(2))
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	createShareTopic(t, adm, "orders", 2)
	createDLQTopic(t, adm, "dlq.orders", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest",
		"errors.deadletterqueue.topic.name", "dlq.orders", "errors.deadletterqueue.copy.record.enable", "true")

	// Partition 0: ok, poison, flaky; partition 1: poison, ok.
	var recs []*kgo.Record
	for p, vs := range [][]string{{"ok-0", "poison-0", "flaky-0"}, {"poison-1", "ok-1"}} {
		for _, v := range vs {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(p), Key: []byte("k-" + v), Value: []byte(v)})
		}
	}
	pc := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := pc.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	out := make(chan delivery, 64)
	var wg sync.WaitGroup
	c := newClient(t, addr, kgo.ShareGroup("sg"), kgo.ConsumeTopics("orders"))
	shareConsumer(t, ctx, c, 0, func(r *kgo.Record) kgo.AckStatus {
		switch v := string(r.Value); {
		case strings.HasPrefix(v, "poison"):
			return kgo.AckReject
		case strings.HasPrefix(v, "flaky"):
			return kgo.AckRelease // fails every time: the limit of 2 dead-letters it
		}
		return kgo.AckAccept
	}, out, &wg)
	go func() {
		for range out {
		}
	}()

	// Every record done: the start offsets pass them only once the dead
	// letters are durable.
	waitSPSO(t, s, "sg", "orders", 0, 3)
	waitSPSO(t, s, "sg", "orders", 1, 2)
	cancel()
	wg.Wait()
	close(out)

	// Exactly three dead letters: nothing is pending, so none is still
	// to come.
	if ends := endOffsets(t, adm, "dlq.orders"); ends[0] != 3 {
		t.Fatalf("dead-letter topic end offsets %v, want 3 records", ends)
	}
	got := map[string]map[string]string{}
	for _, r := range readDLQ(t, addr, "dlq.orders", 3) {
		h := dlqHeaders(r)
		if string(r.Key) != "k-"+string(r.Value) {
			t.Errorf("dead letter %q has key %q: copy.record.enable copies the key", r.Value, r.Key)
		}
		if r.Timestamp.IsZero() {
			t.Errorf("dead letter %q has no timestamp", r.Value)
		}
		got[string(r.Value)] = h
	}
	want := map[string]map[string]string{
		"poison-0": {"__dlq.errors.topic": "orders", "__dlq.errors.partition": "0", "__dlq.errors.offset": "1", "__dlq.errors.group": "sg",
			"__dlq.errors.delivery.count": "1", "__dlq.errors.message": "Offset rejected by client."},
		"flaky-0": {"__dlq.errors.topic": "orders", "__dlq.errors.partition": "0", "__dlq.errors.offset": "2", "__dlq.errors.group": "sg",
			"__dlq.errors.delivery.count": "2", "__dlq.errors.message": "Offset delivery count exceeded the threshold."},
		"poison-1": {"__dlq.errors.topic": "orders", "__dlq.errors.partition": "1", "__dlq.errors.offset": "0", "__dlq.errors.group": "sg",
			"__dlq.errors.delivery.count": "1", "__dlq.errors.message": "Offset rejected by client."},
	}
	for v, wh := range want {
		gh, ok := got[v]
		if !ok {
			t.Errorf("no dead letter for %s (got %v)", v, got)
			continue
		}
		for k, w := range wh {
			if gh[k] != w {
				t.Errorf("dead letter %s: header %s = %q, want %q", v, k, gh[k], w)
			}
		}
	}
}

// A dead-letter topic that cannot be written keeps the records ARCHIVING
// (the start offset stays before them) across a restart; once the topic
// exists they are written, exactly once, and archived.
func TestShareGroupDeadLetterSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	addr, srv, stop := openBroker(t, dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	createShareTopic(t, kadm.NewClient(cl), "jobs", 1)
	// Auto-created topics (Metadata) would create the dead-letter topic:
	// the broker writes without that, and refuses a missing one.
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.jobs")
	var vs []string
	for i := range 5 {
		vs = append(vs, "bad-"+strconv.Itoa(i))
	}
	produceValues(t, cl, "jobs", append(vs, "good")...)

	ctx, cancel := context.WithCancel(testCtx(t))
	out := make(chan delivery, 64)
	var wg sync.WaitGroup
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("sg"), kgo.ConsumeTopics("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	shareConsumer(t, ctx, c, 0, func(r *kgo.Record) kgo.AckStatus {
		if string(r.Value) == "good" {
			return kgo.AckAccept
		}
		return kgo.AckReject
	}, out, &wg)
	seen := 0
	for seen < 6 {
		select {
		case <-out:
			seen++
		case <-ctx.Done():
			t.Fatalf("%d deliveries", seen)
		}
	}
	for archiving(srv, "sg", "jobs", 0) != 5 {
		select {
		case <-ctx.Done():
			t.Fatalf("ARCHIVING records: %d, want 5", archiving(srv, "sg", "jobs", 0))
		case <-waitABit():
		}
	}
	cancel()
	wg.Wait()
	c.Close()
	if srv.eng.Topic("dlq.jobs") != nil {
		t.Fatal("the dead-letter topic was created without errors.deadletterqueue.auto.create.topics.enable")
	}
	st := srv.groups.share
	st.Lock()
	spso := st.PartOf(sharehost.Key{Group: "sg", TopicID: srv.eng.Topic("jobs").ID(), Part: 0}).P.StartOffset()
	st.Unlock()
	if spso != 0 {
		t.Fatalf("start offset %d with the dead letters unwritten, want 0", spso)
	}
	cl.Close()
	stop()

	addr, srv, _ = openBroker(t, dir)
	cl2 := newClient(t, addr)
	adm := kadm.NewClient(cl2)
	// No consumer: the restarted broker restores the ARCHIVING records
	// itself and retries them until the topic exists.
	createDLQTopic(t, adm, "dlq.jobs", 1)
	waitSPSO(t, srv, "sg", "jobs", 0, 6)
	if ends := endOffsets(t, adm, "dlq.jobs"); ends[0] != 5 {
		t.Fatalf("dead-letter end offsets %v, want 5 records", ends)
	}
	offs := map[string]bool{}
	for _, r := range readDLQ(t, addr, "dlq.jobs", 5) {
		h := dlqHeaders(r)
		offs[h["__dlq.errors.offset"]] = true
		if r.Value != nil || r.Key != nil {
			t.Errorf("dead letter at %s carries key %q value %q without copy.record.enable", h["__dlq.errors.offset"], r.Key, r.Value)
		}
		if h["__dlq.errors.message"] != "Offset rejected by client." || h["__dlq.errors.topic"] != "jobs" {
			t.Errorf("headers %v", h)
		}
	}
	for i := range 5 {
		if !offs[strconv.Itoa(i)] {
			t.Errorf("no dead letter for offset %d (have %v)", i, offs)
		}
	}
}

// Kafka's checks of the dead-letter topic: a group config naming a topic
// that starts with "__" is refused (INVALID_CONFIG); a topic without the
// prefix, one without errors.deadletterqueue.group.enable=true and one that
// does not exist (auto-creation off) are not written: the broker logs why,
// the records stay ARCHIVING and the start offset before them, until the
// group names a good topic.
func TestShareGroupDeadLetterTopicChecks(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(0))
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)

	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "errors.deadletterqueue.topic.name", kmsg.StringPtr("__internal")
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	if resp := issue[*kmsg.IncrementalAlterConfigsResponse](t, cl, req); resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("a DLQ topic starting with __: %v, want INVALID_CONFIG", kerr.ErrorForCode(resp.Resources[0].ErrorCode))
	}

	createShareTopic(t, adm, "work", 1)
	createDLQTopic(t, adm, "errors", 1)      // enabled, but no dlq. prefix
	createShareTopic(t, adm, "dlq.plain", 1) // prefixed, not enabled
	createDLQTopic(t, adm, "dlq.work", 1)    // good
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "errors")
	produceValues(t, cl, "work", "a", "b")
	rejectAll(t, s, cl, "work", 1)
	if n := archiving(s, "sg", "work", 0); n != 2 {
		t.Fatalf("ARCHIVING records %d, want 2", n)
	}
	for _, step := range []struct{ topic, log string }{
		{"errors", "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: sg, topic: errors, prefix: dlq."},
		{"dlq.plain", "DLQ is not enabled on configured DLQ topic for share group: sg, topic: dlq.plain."},
		{"dlq.missing", "DLQ topic does not exist and auto create is disabled on cluster for share group: sg, topic: dlq.missing."},
	} {
		setGroupConfig(t, cl, "sg", "errors.deadletterqueue.topic.name", step.topic)
		waitLog(t, s, step.log)
		if n := archiving(s, "sg", "work", 0); n != 2 {
			t.Fatalf("DLQ topic %s refused: ARCHIVING records %d, want 2", step.topic, n)
		}
		st := s.groups.share
		st.Lock()
		spso := st.PartOf(sharehost.Key{Group: "sg", TopicID: s.eng.Topic("work").ID(), Part: 0}).P.StartOffset()
		st.Unlock()
		if spso != 0 {
			t.Fatalf("DLQ topic %s refused: start offset %d, want 0 (nothing archived)", step.topic, spso)
		}
	}
	if s.eng.Topic("dlq.missing") != nil {
		t.Fatal("dlq.missing was created with auto-creation off")
	}
	for _, topic := range []string{"errors", "dlq.plain"} {
		if ends := endOffsets(t, adm, topic); ends[0] != 0 {
			t.Fatalf("the refused topic %s was written: %v", topic, ends)
		}
	}
	setGroupConfig(t, cl, "sg", "errors.deadletterqueue.topic.name", "dlq.work")
	waitSPSO(t, s, "sg", "work", 0, 2)
	if ends := endOffsets(t, adm, "dlq.work"); ends[0] != 2 {
		t.Fatalf("dlq.work end offsets %v, want 2", ends)
	}
	if n := archiving(s, "sg", "work", 0); n != 0 {
		t.Fatalf("ARCHIVING records %d after the write, want 0", n)
	}
}

// errors.deadletterqueue.auto.create.topics.enable: a missing dead-letter
// topic is created, with errors.deadletterqueue.group.enable=true, and
// written; with an empty prefix any name (but "__...") is accepted.
func TestShareGroupDeadLetterAutoCreate(t *testing.T) {
	empty := ""
	addr, s, _ := startBroker(t, withShare(0), func(c *Config, _ *engine.Options) {
		c.Groups.Share.DeadLetterAutoCreate = true
		c.Groups.Share.DeadLetterTopicPrefix = &empty
	})
	cl := newClient(t, addr)
	createShareTopic(t, kadm.NewClient(cl), "work", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "work-dead")
	produceValues(t, cl, "work", "a", "b", "c")
	rejectAll(t, s, cl, "work", 2)
	waitSPSO(t, s, "sg", "work", 0, 3)
	tp := s.eng.Topic("work-dead")
	if tp == nil {
		t.Fatal("work-dead was not created")
	}
	if v := tp.Overrides()["errors.deadletterqueue.group.enable"]; v != "true" {
		t.Errorf("auto-created DLQ topic: errors.deadletterqueue.group.enable %q, want true", v)
	}
	waitLog(t, s, "share: created dead-letter topic")
	if ends := endOffsets(t, kadm.NewClient(cl), "work-dead"); ends[0] != 3 {
		t.Fatalf("work-dead end offsets %v, want 3", ends)
	}
}

// Dead letters are batched within the dead-letter topic's
// max.message.bytes, and a source record too large for it is written
// with the headers only (copy.record.enable notwithstanding).
func TestShareGroupDeadLetterLargeRecords(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(0))
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	createShareTopic(t, adm, "work", 1)
	if _, err := adm.CreateTopic(testCtx(t), 1, 1, map[string]*string{
		"errors.deadletterqueue.group.enable": kmsg.StringPtr("true"),
		"max.message.bytes":                   kmsg.StringPtr("2048"),
	}, "dlq.small"); err != nil {
		t.Fatal(err)
	}
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest",
		"errors.deadletterqueue.topic.name", "dlq.small", "errors.deadletterqueue.copy.record.enable", "true")
	vals := []string{strings.Repeat("a", 700), strings.Repeat("b", 700), strings.Repeat("c", 700), strings.Repeat("d", 5000)}
	produceValues(t, cl, "work", vals...)
	rejectAll(t, s, cl, "work", 3)
	waitSPSO(t, s, "sg", "work", 0, 4)
	recs := readDLQ(t, addr, "dlq.small", 4)
	for i, r := range recs {
		h := dlqHeaders(r)
		if h["__dlq.errors.offset"] != strconv.Itoa(i) {
			t.Fatalf("dead letter %d has offset header %q", i, h["__dlq.errors.offset"])
		}
		want := vals[i]
		if i == 3 {
			want = "" // larger than the topic's max.message.bytes
		}
		if string(r.Value) != want {
			t.Errorf("dead letter of offset %d: value of %d bytes, want %d", i, len(r.Value), len(want))
		}
	}
	if recs[3].Value != nil {
		t.Errorf("the oversized record's dead letter has a value of %d bytes, want null", len(recs[3].Value))
	}
}

// Back-pressure: records waiting for their dead letters hold room in the
// share-partition's window (group.share.partition.max.record.locks), so
// an unwritable dead-letter topic stops new acquisitions instead of
// growing a backlog; once the topic exists they are written, archived,
// and the next records are acquired.
func TestShareGroupDeadLetterBackPressure(t *testing.T) {
	addr, s, _ := startBroker(t, withShare(0), func(c *Config, _ *engine.Options) {
		c.Groups.Share.Partition.MaxRecordLocks = 3
	})
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	createShareTopic(t, adm, "work", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.later")
	produceValues(t, cl, "work", "a", "b", "c", "d", "e")
	rejectAll(t, s, cl, "work", 2) // the window's 3 records, ARCHIVING: dlq.later does not exist
	topicID := s.eng.Topic("work").ID()
	r := rawShareFetch(t, cl, "sg", "m", 2, topicID, nil)
	if r.ErrorCode != 0 {
		t.Fatalf("fetch: %+v", r)
	}
	for _, rt := range r.Topics { // none: nothing to answer after the wait
		for _, rp := range rt.Partitions {
			if len(rp.AcquiredRecords) != 0 {
				t.Fatalf("acquired %+v with the window full of ARCHIVING records", rp.AcquiredRecords)
			}
		}
	}
	if n := archiving(s, "sg", "work", 0); n != 3 {
		t.Fatalf("ARCHIVING records %d, want 3", n)
	}
	createDLQTopic(t, adm, "dlq.later", 1)
	waitSPSO(t, s, "sg", "work", 0, 3)
	r = rawShareFetch(t, cl, "sg", "m", 3, topicID, nil)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("fetch: %+v", r)
	}
	n := int64(0)
	for _, a := range r.Topics[0].Partitions[0].AcquiredRecords {
		n += a.LastOffset - a.FirstOffset + 1
		if a.FirstOffset < 3 {
			t.Errorf("acquired %+v: offsets below 3 were dead-lettered", a)
		}
	}
	if n != 2 {
		t.Fatalf("acquired %d records after the dead letters were written, want 2", n)
	}
	if ends := endOffsets(t, adm, "dlq.later"); ends[0] != 3 {
		t.Fatalf("dlq.later end offsets %v, want 3", ends)
	}
}

// waitABit paces the polling loops of these tests (not a deadline: the
// test's context is).
func waitABit() <-chan time.Time { return time.After(10 * time.Millisecond) }

// rejectRange REJECTs offsets first..last of topic's partition 0 as member
// m of group sg, in its share session at epoch.
func rejectRange(t *testing.T, cl *kgo.Client, topicID [16]byte, epoch int32, first, last int64) {
	t.Helper()
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = kmsg.StringPtr("sg"), kmsg.StringPtr("m"), epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = topicID
	rt.Partitions = []kmsg.ShareAcknowledgeRequestTopicPartition{{AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
		{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{3}}}}} // REJECT
	ack.Topics = append(ack.Topics, rt)
	if resp := issue[*kmsg.ShareAcknowledgeResponse](t, cl, ack); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("reject %d-%d: %+v", first, last, resp)
	}
}

// waitEnd waits until topic's partition 0 ends at want.
func waitEnd(t *testing.T, adm *kadm.Client, topic string, want int64) {
	t.Helper()
	for {
		got := endOffsets(t, adm, topic)[0]
		if got == want {
			return
		}
		select {
		case <-testCtx(t).Done():
			t.Fatalf("%s ends at %d, want %d", topic, got, want)
		case <-waitABit():
		}
	}
}

// A broker that stops after a dead-letter append is durable but before
// the records it holds are ARCHIVED (persisted) restores them ARCHIVING;
// it finds their dead letters in the dead-letter topic and archives them
// without writing them again, and writes those of the records whose
// dead letters were never written: one dead letter per record.
func TestShareGroupDeadLetterExactlyOnceAfterCrash(t *testing.T) {
	dir := t.TempDir()
	addr, srv, stop := openBroker(t, dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	createShareTopic(t, adm, "jobs", 1)
	createDLQTopic(t, adm, "dlq.jobs", 1)
	setGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.jobs")
	var vs []string
	for i := range 8 {
		vs = append(vs, "bad-"+strconv.Itoa(i))
	}
	produceValues(t, cl, "jobs", vs...)
	// The writer stops once its first append is durable, as a broker
	// that crashes before it persists ARCHIVED.
	srv.groups.share.HoldDeadLettered(true)
	topicID := srv.eng.Topic("jobs").ID()
	if n := acquireRaw(t, cl, "sg", "m", "jobs", topicID); n != 8 {
		t.Fatalf("acquired %d, want 8", n)
	}
	rejectRange(t, cl, topicID, 1, 0, 4)
	waitEnd(t, adm, "dlq.jobs", 5)
	// These stay ARCHIVING with no dead letter: the writer is stuck.
	rejectRange(t, cl, topicID, 2, 5, 7)
	if n := archiving(srv, "sg", "jobs", 0); n != 8 {
		t.Fatalf("ARCHIVING records: %d, want 8", n)
	}
	cl.Close()
	stop()

	addr, srv, _ = openBroker(t, dir)
	cl2 := newClient(t, addr)
	adm = kadm.NewClient(cl2)
	waitSPSO(t, srv, "sg", "jobs", 0, 8)
	if n := archiving(srv, "sg", "jobs", 0); n != 0 {
		t.Fatalf("ARCHIVING records after the restart: %d, want 0", n)
	}
	if ends := endOffsets(t, adm, "dlq.jobs"); ends[0] != 8 {
		t.Fatalf("dead-letter end offsets %v, want 8 records: one per rejected record", ends)
	}
	offs := map[string]int{}
	for _, r := range readDLQ(t, addr, "dlq.jobs", 8) {
		h := dlqHeaders(r)
		offs[h["__dlq.errors.offset"]]++
		if h["__dlq.errors.group"] != "sg" || h["__dlq.errors.topic"] != "jobs" || h["__dlq.errors.delivery.count"] != "1" {
			t.Errorf("headers %v", h)
		}
	}
	for i := range 8 {
		if n := offs[strconv.Itoa(i)]; n != 1 {
			t.Errorf("offset %d has %d dead letters, want 1 (%v)", i, n, offs)
		}
	}
}
