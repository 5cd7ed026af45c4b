package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups in a cluster, where a group's coordinator and the leaders
// of its share-partitions are different brokers (issue 24).

// startShareCluster is startInCluster with cfg applied to every broker's
// server Config.
func startShareCluster(t *testing.T, n int, cfg func(*Config)) []*inCluster {
	t.Helper()
	voters, lns := quorumListeners(t, n)
	var brokers []*inCluster
	for i := int32(0); i < int32(n); i++ {
		b := &inCluster{id: i, dataDir: t.TempDir(), ctlDir: t.TempDir(), cfg: cfg}
		b.start(t, voters, lns[i])
		brokers = append(brokers, b)
	}
	return brokers
}

// shareTopology is a share-group test's cluster: a client for every
// broker, a topic and each partition's leader.
type shareTopology struct {
	brokers []*inCluster
	cl      *kgo.Client // produces with a manual partitioner
	adm     *kadm.Client
	topic   string
	id      [16]byte
	leaders []int32
}

func newShareTopology(t *testing.T, brokers []*inCluster, topic string, partitions int32, rf int16, configs map[string]*string) *shareTopology {
	t.Helper()
	var seeds []string
	for _, b := range brokers {
		seeds = append(seeds, b.addr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	waitRegistered(t, brokers)
	adm := kadm.NewClient(cl)
	// A create retried by the client after its first attempt went
	// through answers TOPIC_ALREADY_EXISTS: the id is the metadata's.
	if _, err := adm.CreateTopic(testCtx(t), partitions, rf, configs, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create %s: %v", topic, err)
	}
	st := &shareTopology{brokers: brokers, cl: cl, adm: adm, topic: topic, leaders: make([]int32, partitions)}
	for _, b := range brokers {
		waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
			mt := clusterTopic(r, topic)
			if mt == nil || len(mt.Partitions) != int(partitions) {
				return "topic not ready"
			}
			for _, p := range mt.Partitions {
				if p.Leader < 0 || len(p.ISR) != int(rf) {
					return "partition not ready"
				}
				st.leaders[p.Partition] = p.Leader
			}
			st.id = mt.TopicID
			return ""
		})
	}
	return st
}

// coordinator is the broker FindCoordinator names for group.
func (st *shareTopology) coordinator(t *testing.T, group string) int32 {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{group}
		resp := issue[*kmsg.FindCoordinatorResponse](t, st.cl, req)
		if len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0 {
			return resp.Coordinators[0].NodeID
		}
		if time.Now().After(deadline) {
			t.Fatalf("no coordinator for %s: %+v", group, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// notLedBy is a partition of the topic whose leader is not broker id.
func (st *shareTopology) notLedBy(t *testing.T, id int32) int32 {
	t.Helper()
	for p, l := range st.leaders {
		if l != id {
			return int32(p)
		}
	}
	t.Fatalf("broker %d leads every partition (%v)", id, st.leaders)
	return -1
}

func (st *shareTopology) produce(t *testing.T, p int32, n int) {
	t.Helper()
	for i := range n {
		r := &kgo.Record{Topic: st.topic, Partition: p, Value: []byte(fmt.Sprint(i))}
		if err := st.cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatalf("produce to %s-%d: %v", st.topic, p, err)
		}
	}
}

// heartbeat sends a ShareGroupHeartbeat to broker id.
func (st *shareTopology) heartbeat(t *testing.T, id int32, group, member string, epoch int32) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
	if epoch == 0 {
		req.SubscribedTopicNames = []string{st.topic}
	}
	// The coordinator may still be loading the group's partition:
	// retriable errors are retried (at most 100 times).
	var resp *kmsg.ShareGroupHeartbeatResponse
	for try := 0; ; try++ {
		var err error
		resp, err = req.RequestWith(testCtx(t), st.cl.Broker(int(id)))
		if err != nil {
			t.Fatalf("ShareGroupHeartbeat to broker %d: %v", id, err)
		}
		if ke, ok := kerr.ErrorForCode(resp.ErrorCode).(*kerr.Error); !ok || !ke.Retriable || try == 100 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ShareGroupHeartbeat of %s (epoch %d) to broker %d: %v", member, epoch, id, err)
	}
	return resp
}

// fetch sends one ShareFetch of partition p to its leader and returns the
// offsets acquired with their delivery counts.
func (st *shareTopology) fetch(t *testing.T, group, member string, p, epoch int32) map[int64]int16 {
	got, _ := st.fetchLock(t, group, member, p, epoch)
	return got
}

// fetchLock is fetch, also returning the answer's acquisition lock
// duration.
func (st *shareTopology) fetchLock(t *testing.T, group, member string, p, epoch int32) (map[int64]int16, int32) {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(group), kmsg.StringPtr(member)
	req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = epoch, 200, 1, 1<<20, 100
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = st.id
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.Partition = p
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), st.cl.Broker(int(st.leaders[p])))
	if err != nil {
		t.Fatalf("ShareFetch: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ShareFetch of %s at broker %d: %v", member, st.leaders[p], err)
	}
	got := map[int64]int16{}
	lock := resp.AcquisitionLockTimeoutMillis
	for _, tt := range resp.Topics {
		for _, rp := range tt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("ShareFetch of %s-%d at broker %d: %v", st.topic, p, st.leaders[p], err)
			}
			for _, a := range rp.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					got[o] = a.DeliveryCount
				}
			}
		}
	}
	return got, lock
}

// acquire fetches partition p as member until it holds want records (at
// most rounds fetches of up to 200 ms each) and returns them, with the
// session's next epoch.
func (st *shareTopology) acquire(t *testing.T, group, member string, p int32, want, rounds int) (map[int64]int16, int32) {
	t.Helper()
	got := map[int64]int16{}
	epoch := int32(0)
	for ; len(got) < want && int(epoch) < rounds; epoch++ {
		for o, n := range st.fetch(t, group, member, p, epoch) {
			got[o] = n
		}
	}
	return got, epoch
}

// TestClusterShareMemberGoneReleases: in a 3-broker cluster a share
// member acquires records on a partition led by a broker that is not the
// group's coordinator; when it leaves (heartbeat epoch -1) or its session
// times out at the coordinator, those records are available again at the
// leader at once (delivery count kept: another member gets them with
// delivery count 2), not when their 60 s acquisition lock expires.
func TestClusterShareMemberGoneReleases(t *testing.T) {
	brokers := startShareCluster(t, 3, func(c *Config) {
		c.Groups.Share.Groups.SessionTimeoutMs = 1500
		c.Groups.Share.Groups.HeartbeatIntervalMs = 500
	})
	st := newShareTopology(t, brokers, "tasks", 3, 2, nil)
	for _, tc := range []struct {
		group string
		leave bool
	}{{"leavers", true}, {"sleepers", false}} {
		setGroupConfig(t, st.cl, tc.group, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "60000")
		coord := st.coordinator(t, tc.group)
		p := st.notLedBy(t, coord)
		st.produce(t, p, 4)
		holder, other := tc.group+"-holder", tc.group+"-other"
		st.heartbeat(t, coord, tc.group, holder, 0)
		held, _ := st.acquire(t, tc.group, holder, p, 4, 20)
		if len(held) < 4 {
			t.Fatalf("%s: the holder acquired %v on %s-%d", tc.group, held, st.topic, p)
		}
		if tc.leave {
			st.heartbeat(t, coord, tc.group, holder, -1)
		} // else: it goes silent and times out at the coordinator
		// At most 40 fetches of up to 200 ms (the lock lasts 60 s).
		again, _ := st.acquire(t, tc.group, other, p, len(held), 40)
		for o := range held {
			if again[o] != 2 {
				t.Fatalf("%s (leave %v, coordinator %d, leader %d): after the holder went, another member acquired %v, want %v again with delivery count 2",
					tc.group, tc.leave, coord, st.leaders[p], again, held)
			}
		}
	}
}

// ack sends one ShareAcknowledge of partition p's offsets [first, last]
// with type typ to its leader, in member's session at epoch.
func (st *shareTopology) ack(t *testing.T, group, member string, p, epoch int32, first, last int64, typ int8) {
	t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr(member), epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = st.id
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.Partition = p
	rp.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
		{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{typ}}}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), st.cl.Broker(int(st.leaders[p])))
	if err != nil {
		t.Fatalf("ShareAcknowledge: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ShareAcknowledge of %s: %v", member, err)
	}
	for _, tt := range resp.Topics {
		for _, rp := range tt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("ShareAcknowledge of %s-%d: %v", st.topic, p, err)
			}
		}
	}
}

// TestClusterShareDeadLetterAutoCreate: with
// errors.deadletterqueue.auto.create.topics.enable in a 3-broker cluster,
// a group's dead-letter topic that does not exist is created through the
// controller (every broker's metadata has it, with
// errors.deadletterqueue.group.enable=true) when a record is rejected,
// and the dead letter lands in it with its headers.
func TestClusterShareDeadLetterAutoCreate(t *testing.T) {
	brokers := startShareCluster(t, 3, func(c *Config) { c.Groups.Share.DeadLetterAutoCreate = true })
	st := newShareTopology(t, brokers, "orders", 1, 2, nil)
	const group, dlq = "billing", "dlq.billing"
	setGroupConfig(t, st.cl, group, "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", dlq)
	st.produce(t, 0, 3)
	got, epoch := st.acquire(t, group, "rejecter", 0, 3, 20)
	if len(got) != 3 {
		t.Fatalf("acquired %v, want offsets 0-2", got)
	}
	st.ack(t, group, "rejecter", 0, epoch, 1, 1, 3) // REJECT offset 1
	for _, b := range brokers {
		waitMetadata(t, st.cl, b, func(r *kmsg.MetadataResponse) string {
			if mt := clusterTopic(r, dlq); mt == nil || len(mt.Partitions) == 0 || mt.Partitions[0].Leader < 0 {
				return dlq + " not created"
			}
			return ""
		})
	}
	rc, err := st.adm.DescribeTopicConfigs(testCtx(t), dlq)
	if err != nil {
		t.Fatal(err)
	}
	enabled := ""
	for _, c := range rc[0].Configs {
		if c.Key == "errors.deadletterqueue.group.enable" && c.Value != nil {
			enabled = *c.Value
		}
	}
	if rc[0].Err != nil || enabled != "true" {
		t.Fatalf("%s: errors.deadletterqueue.group.enable=%q (%v), want true", dlq, enabled, rc[0].Err)
	}
	letters := readAll(t, brokers, dlq, 1)
	if len(letters) != 1 {
		t.Fatalf("%s holds %d records, want the one dead letter", dlq, len(letters))
	}
	h := map[string]string{}
	for _, kv := range letters[0].Headers {
		h[kv.Key] = string(kv.Value)
	}
	if h["__dlq.errors.topic"] != st.topic || h["__dlq.errors.offset"] != "1" || h["__dlq.errors.group"] != group {
		t.Fatalf("dead letter headers %v", h)
	}
}

// alterGroupConfigsAt sets group configs with IncrementalAlterConfigs
// sent to broker id.
func (st *shareTopology) alterGroupConfigsAt(t *testing.T, id int32, group string, kv ...string) {
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
	resp, err := req.RequestWith(testCtx(t), st.cl.Broker(int(id)))
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs at broker %d: %v", id, err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("IncrementalAlterConfigs of group %s at broker %d: %v", group, id, err)
	}
}

// readAll reads topic from its start until it has n records (at most
// 20 s) and returns them.
func readAll(t *testing.T, brokers []*inCluster, topic string, n int) []*kgo.Record {
	t.Helper()
	var seeds []string
	for _, b := range brokers {
		if b.running {
			seeds = append(seeds, b.addr)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// TestClusterShareGroupConfigsReachLeaders: group configs set with
// IncrementalAlterConfigs through a broker that does not lead the
// share-partition take effect at its leader at once, while a member
// keeps its share session open there: the lock duration (the next
// ShareFetch answers 5000 ms), the delivery count limit (2: a record
// released twice is not delivered a third time) and the dead-letter topic
// (the rejected record and the one past the limit are in it).
func TestClusterShareGroupConfigsReachLeaders(t *testing.T) {
	brokers := startShareCluster(t, 3, nil)
	st := newShareTopology(t, brokers, "events", 1, 2, nil)
	const group, dlq = "auditors", "dlq.auditors"
	if _, err := st.adm.CreateTopic(testCtx(t), 1, 2, map[string]*string{"errors.deadletterqueue.group.enable": kmsg.StringPtr("true")}, dlq); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create %s: %v", dlq, err)
	}
	leader := st.leaders[0]
	other := (leader + 1) % 3
	st.alterGroupConfigsAt(t, other, group, "share.auto.offset.reset", "earliest")
	st.produce(t, 0, 3)
	const m = "auditor"
	got, epoch := st.acquire(t, group, m, 0, 3, 20)
	if len(got) != 3 {
		t.Fatalf("acquired %v, want offsets 0-2", got)
	}
	// The member's session stays open at the leader while the configs
	// change through another broker.
	st.alterGroupConfigsAt(t, other, group,
		"share.record.lock.duration.ms", "5000",
		"share.delivery.count.limit", "2",
		"errors.deadletterqueue.topic.name", dlq)
	st.ack(t, group, m, 0, epoch, 0, 0, 3) // REJECT 0: dead-lettered
	epoch++
	st.ack(t, group, m, 0, epoch, 1, 1, 2) // RELEASE 1: delivery 1 of 2
	epoch++
	again, lock := st.fetchLock(t, group, m, 0, epoch)
	epoch++
	if lock != 5000 {
		t.Fatalf("the leader (broker %d) answers a lock of %d ms after the group's was set to 5000 through broker %d", leader, lock, other)
	}
	if again[1] != 2 || len(again) != 1 {
		t.Fatalf("after a RELEASE, acquired %v, want offset 1 with delivery count 2", again)
	}
	st.ack(t, group, m, 0, epoch, 1, 1, 2) // RELEASE 1 again: the limit of 2 is reached
	epoch++
	if third, _ := st.fetchLock(t, group, m, 0, epoch); len(third) != 0 {
		t.Fatalf("with a delivery count limit of 2, acquired %v after two deliveries", third)
	}
	letters := readAll(t, brokers, dlq, 2)
	offs := map[string]string{}
	for _, r := range letters {
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		offs[h["__dlq.errors.offset"]] = h["__dlq.errors.message"]
	}
	if len(letters) != 2 || offs["0"] != "Offset rejected by client." || offs["1"] != "Offset delivery count exceeded the threshold." {
		t.Fatalf("%s holds %d dead letters %v, want offsets 0 (rejected) and 1 (delivery count)", dlq, len(letters), offs)
	}
}

// describeOffsets asks the group's coordinator (the client routes it) for
// the group's share-partitions on the topic's partition p.
func (st *shareTopology) describeOffsets(t *testing.T, group string, p int32) kmsg.DescribeShareGroupOffsetsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	rg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: st.topic, Partitions: []int32{p}}}
	req.Groups = append(req.Groups, rg)
	resp := issue[*kmsg.DescribeShareGroupOffsetsResponse](t, st.cl, req)
	return resp.Groups[0]
}

// describedStart is the start offset and lag describeOffsets answers
// for partition p, failing on an error.
func (st *shareTopology) describedStart(t *testing.T, group string, p int32) (int64, int64) {
	t.Helper()
	g := st.describeOffsets(t, group, p)
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil || len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 {
		t.Fatalf("DescribeShareGroupOffsets of %s: %v %+v", group, err, g)
	}
	op := g.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(op.ErrorCode); err != nil {
		t.Fatalf("DescribeShareGroupOffsets of %s, %s-%d: %v", group, st.topic, p, err)
	}
	return op.StartOffset, op.Lag
}

// TestClusterShareOffsetsAdminElsewhere: the share-group offset admin
// APIs and DeleteGroups, sent to the group's coordinator (the client
// routes them), for a share-partition led by another broker on a topic
// with one replica (the coordinator has none of that partition): while a
// member is in the group AlterShareGroupOffsets, DeleteShareGroupOffsets
// and DeleteGroups answer NON_EMPTY_GROUP; DescribeShareGroupOffsets
// answers the leader's state (start offset, lag); after the member left,
// AlterShareGroupOffsets moves the leader's start offset,
// DeleteShareGroupOffsets makes the leader start over where
// share.auto.offset.reset says, and DeleteGroups deletes the leader's
// share-partition (its acquired records are delivered afresh).
func TestClusterShareOffsetsAdminElsewhere(t *testing.T) {
	brokers := startShareCluster(t, 3, nil)
	st := newShareTopology(t, brokers, "ledger", 3, 1, nil)
	const group = "accountants"
	coord := st.coordinator(t, group)
	p := st.notLedBy(t, coord)
	setGroupConfig(t, st.cl, group, "share.auto.offset.reset", "earliest")
	st.produce(t, p, 5)
	const m = "accountant"
	st.heartbeat(t, coord, group, m, 0)
	got, epoch := st.acquire(t, group, m, p, 5, 20)
	if len(got) != 5 {
		t.Fatalf("acquired %v, want offsets 0-4", got)
	}
	st.ack(t, group, m, p, epoch, 0, 1, 1) // ACCEPT 0-1
	epoch++

	// A member: the changes are refused.
	areq := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	areq.GroupID = group
	areq.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: st.topic, Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: p, StartOffset: 4}}}}
	if r := issue[*kmsg.AlterShareGroupOffsetsResponse](t, st.cl, areq); r.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("AlterShareGroupOffsets with a member: %v, want NON_EMPTY_GROUP", kerr.ErrorForCode(r.ErrorCode))
	}
	dreq := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	dreq.GroupID = group
	dreq.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: st.topic}}
	if r := issue[*kmsg.DeleteShareGroupOffsetsResponse](t, st.cl, dreq); r.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("DeleteShareGroupOffsets with a member: %v, want NON_EMPTY_GROUP", kerr.ErrorForCode(r.ErrorCode))
	}
	delreq := kmsg.NewPtrDeleteGroupsRequest()
	delreq.Groups = []string{group}
	if r := issue[*kmsg.DeleteGroupsResponse](t, st.cl, delreq); r.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("DeleteGroups with a member: %v, want NON_EMPTY_GROUP", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}
	// Another broker than the coordinator refuses them.
	if r, err := areq.RequestWith(testCtx(t), st.cl.Broker(int(st.leaders[p]))); err != nil || r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("AlterShareGroupOffsets at broker %d (not the coordinator %d): %v %v, want NOT_COORDINATOR", st.leaders[p], coord, err, kerr.ErrorForCode(r.ErrorCode))
	}
	if start, lag := st.describedStart(t, group, p); start != 2 || lag != 3 {
		t.Fatalf("the coordinator (broker %d) describes %s-%d (leader %d) at start offset %d, lag %d; want 2, 3", coord, st.topic, p, st.leaders[p], start, lag)
	}

	// The member leaves (its records are released): Alter moves the
	// leader's start offset.
	// The leader releases the member's records when the coordinator's
	// notice arrives: until then the partition answers NON_EMPTY_GROUP
	// (records still acquired), retried (at most 50 times).
	st.heartbeat(t, coord, group, m, -1)
	for try := 0; ; try++ {
		r := issue[*kmsg.AlterShareGroupOffsetsResponse](t, st.cl, areq)
		pc := r.Topics[0].Partitions[0].ErrorCode
		if r.ErrorCode == 0 && pc == 0 {
			break
		}
		if r.ErrorCode != 0 || pc != kerr.NonEmptyGroup.Code || try == 50 {
			t.Fatalf("AlterShareGroupOffsets (try %d): %v / %v", try, kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(pc))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if start, _ := st.describedStart(t, group, p); start != 4 {
		t.Fatalf("after AlterShareGroupOffsets to 4, described start offset %d", start)
	}
	if again, _ := st.acquire(t, group, "second", p, 1, 10); len(again) != 1 || again[4] != 1 {
		t.Fatalf("after AlterShareGroupOffsets to 4, acquired %v at the leader, want offset 4 only", again)
	}

	// Delete: the leader forgets the share-partition and starts over at
	// the earliest offset (the acquired offset 4 included).
	if r := issue[*kmsg.DeleteShareGroupOffsetsResponse](t, st.cl, dreq); r.ErrorCode != 0 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteShareGroupOffsets: %v / %v", kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
	if again, _ := st.acquire(t, group, "third", p, 5, 10); len(again) != 5 || again[0] != 1 {
		t.Fatalf("after DeleteShareGroupOffsets, acquired %v at the leader, want offsets 0-4 afresh", again)
	}

	// DeleteGroups: the leader's share-partition (offsets 0-4 held by
	// "third") is deleted; a new consumer gets them all afresh.
	if r := issue[*kmsg.DeleteGroupsResponse](t, st.cl, delreq); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}
	if g := st.describeOffsets(t, group, p); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("after DeleteGroups the group is described as %+v, want GROUP_ID_NOT_FOUND", g)
	}
	if again, _ := st.acquire(t, group, "fourth", p, 5, 10); len(again) != 5 || again[0] != 1 || again[4] != 1 {
		t.Fatalf("after DeleteGroups, acquired %v at the leader, want offsets 0-4 with delivery count 1", again)
	}
}
