package controller

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func tid(n byte) TopicID { return TopicID{15: n, 0: 0xAB} }

func inc(n byte) [16]byte { return [16]byte{0: n, 15: 1} }

func apply(t *testing.T, s *State, c Command) Result {
	t.Helper()
	r := s.Apply(c)
	if err := s.Check(); err != nil {
		t.Fatalf("after %T: %v", c, err)
	}
	return r
}

func mustApply(t *testing.T, s *State, c Command) Result {
	t.Helper()
	r := apply(t, s, c)
	if r.Code != 0 {
		t.Fatalf("%T: %v", c, r.Err())
	}
	for _, p := range r.Partitions {
		if p.Code != 0 {
			t.Fatalf("%T %s-%d: %v %s", c, p.Topic, p.Partition, kerr.ErrorForCode(p.Code), p.Message)
		}
	}
	return r
}

func wantCode(t *testing.T, r Result, e *kerr.Error) {
	t.Helper()
	if r.Code != e.Code {
		t.Fatalf("code %v (%s), want %v", kerr.ErrorForCode(r.Code), r.Message, e)
	}
}

func wantPartCode(t *testing.T, r Result, e *kerr.Error) {
	t.Helper()
	if r.Code != 0 || len(r.Partitions) != 1 || r.Partitions[0].Code != e.Code {
		t.Fatalf("result %+v, want one partition with %v", r, e)
	}
}

// addBroker registers broker id and unfences it with a caught-up heartbeat.
func addBroker(t *testing.T, s *State, id int32, rack string, nowMs int64) int64 {
	t.Helper()
	r := mustApply(t, s, RegisterBroker{ID: id, IncarnationID: inc(byte(id)), Host: "127.0.0.1", Port: 9092 + id, Rack: rack, NowMs: nowMs})
	hb := mustApply(t, s, BrokerHeartbeat{ID: id, Epoch: r.BrokerEpoch, NowMs: nowMs, MetadataOffset: s.Offset()})
	if hb.Fenced {
		t.Fatalf("broker %d still fenced after a caught-up heartbeat", id)
	}
	return r.BrokerEpoch
}

func part(t *testing.T, s *State, topic string, p int32) Partition {
	t.Helper()
	pp, ok := s.Partition(topic, p)
	if !ok {
		t.Fatalf("no partition %s-%d", topic, p)
	}
	return pp.clone()
}

func wantPart(t *testing.T, got Partition, leader int32, isr []int32, leaderEpoch, partEpoch int32) {
	t.Helper()
	if got.Leader != leader || !equalInt32s(got.ISR, isr) || got.LeaderEpoch != leaderEpoch || got.PartitionEpoch != partEpoch {
		t.Fatalf("partition leader %d isr %v epochs %d/%d; want leader %d isr %v epochs %d/%d",
			got.Leader, got.ISR, got.LeaderEpoch, got.PartitionEpoch, leader, isr, leaderEpoch, partEpoch)
	}
}

func TestRegisterBroker(t *testing.T) {
	s := NewState()
	r := mustApply(t, s, RegisterBroker{ID: 1, IncarnationID: inc(1), Host: "h", Port: 9093, Rack: "r1", NowMs: 100})
	if r.BrokerEpoch != 1 || r.Offset != 1 || !r.Fenced {
		t.Fatalf("first registration %+v", r)
	}
	b, _ := s.Broker(1)
	if b.Host != "h" || b.Port != 9093 || b.Rack != "r1" || !b.Fenced || b.LastHeartbeatMs != 100 {
		t.Fatalf("broker %+v", b)
	}
	// Not caught up: the broker's metadata is behind its registration.
	if r := mustApply(t, s, BrokerHeartbeat{ID: 1, Epoch: 1, NowMs: 200, MetadataOffset: 0}); !r.Fenced {
		t.Fatal("unfenced before catching up")
	}
	wantCode(t, apply(t, s, BrokerHeartbeat{ID: 1, Epoch: 7, NowMs: 200, MetadataOffset: 5}), kerr.StaleBrokerEpoch)
	wantCode(t, apply(t, s, BrokerHeartbeat{ID: 9, Epoch: 1, NowMs: 200}), kerr.BrokerIDNotRegistered)
	wantCode(t, apply(t, s, RegisterBroker{ID: -1}), kerr.InvalidRequest)
	if r := mustApply(t, s, BrokerHeartbeat{ID: 1, Epoch: 1, NowMs: 300, MetadataOffset: 1}); r.Fenced {
		t.Fatal("still fenced after catching up")
	}
	// A retried registration (same incarnation) changes nothing.
	if r := mustApply(t, s, RegisterBroker{ID: 1, IncarnationID: inc(1), Host: "h", Port: 9093, NowMs: 400}); r.BrokerEpoch != 1 || r.Fenced {
		t.Fatalf("retry %+v", r)
	}
	// A new incarnation gets a new epoch and starts fenced.
	r = mustApply(t, s, RegisterBroker{ID: 1, IncarnationID: inc(2), Host: "h2", Port: 9093, NowMs: 500})
	if r.BrokerEpoch != r.Offset || r.BrokerEpoch <= 1 || !r.Fenced {
		t.Fatalf("re-registration %+v", r)
	}
	wantCode(t, apply(t, s, BrokerHeartbeat{ID: 1, Epoch: 1, NowMs: 600}), kerr.StaleBrokerEpoch)
}

func TestRestartedBrokerLosesLeadership(t *testing.T) {
	s := NewState()
	for id := int32(0); id < 3; id++ {
		addBroker(t, s, id, "", 0)
	}
	mustApply(t, s, CreateTopic{Name: "t", ID: tid(1), Assignment: [][]int32{{0, 1, 2}}})
	mustApply(t, s, RegisterBroker{ID: 0, IncarnationID: inc(99), Host: "h", Port: 1, NowMs: 10})
	wantPart(t, part(t, s, "t", 0), 1, []int32{1, 2}, 1, 1)
}

func TestSessionExpiryByTick(t *testing.T) {
	s := NewState()
	e0 := addBroker(t, s, 0, "", 1000)
	addBroker(t, s, 1, "", 1000)
	e2 := addBroker(t, s, 2, "", 1000)
	mustApply(t, s, BrokerHeartbeat{ID: 2, Epoch: e2, NowMs: 5000, MetadataOffset: s.Offset()})

	mustApply(t, s, Tick{NowMs: 10000}) // exactly the timeout: not expired
	if got := s.ExpiredBrokers(10000, DefaultSessionTimeoutMs); len(got) != 0 {
		t.Fatalf("expired %v at the timeout", got)
	}
	if got := s.ExpiredBrokers(10001, DefaultSessionTimeoutMs); !equalInt32s(got, []int32{0, 1}) {
		t.Fatalf("ExpiredBrokers %v", got)
	}
	mustApply(t, s, Tick{NowMs: 10001})
	for id, want := range map[int32]bool{0: true, 1: true, 2: false} {
		if b, _ := s.Broker(id); b.Fenced != want {
			t.Fatalf("broker %d fenced=%v, want %v", id, b.Fenced, want)
		}
	}
	// A custom timeout, and a reset of every session (controller failover).
	mustApply(t, s, Tick{NowMs: 6000, SessionTimeoutMs: 500}) // 2: 1000ms since its heartbeat
	if b, _ := s.Broker(2); !b.Fenced {
		t.Fatal("custom session timeout ignored")
	}
	mustApply(t, s, BrokerHeartbeat{ID: 0, Epoch: e0, NowMs: 20000, MetadataOffset: s.Offset()})
	mustApply(t, s, Tick{NowMs: 90000, ResetSessions: true})
	if b, _ := s.Broker(0); b.Fenced || b.LastHeartbeatMs != 90000 {
		t.Fatalf("after reset: %+v", b)
	}
}

func TestFencingElectsFirstLiveISRMember(t *testing.T) {
	s := NewState()
	for id := int32(0); id < 4; id++ {
		addBroker(t, s, id, "", 0)
	}
	mustApply(t, s, CreateTopic{Name: "t", ID: tid(1), Assignment: [][]int32{{2, 0, 1}}})
	wantPart(t, part(t, s, "t", 0), 2, []int32{2, 0, 1}, 0, 0)

	mustApply(t, s, FenceBroker{ID: 2})
	wantPart(t, part(t, s, "t", 0), 0, []int32{0, 1}, 1, 1)
	mustApply(t, s, FenceBroker{ID: 3}) // not a replica: nothing changes
	wantPart(t, part(t, s, "t", 0), 0, []int32{0, 1}, 1, 1)
	mustApply(t, s, FenceBroker{ID: 1}) // a follower leaves the ISR
	wantPart(t, part(t, s, "t", 0), 0, []int32{0}, 1, 2)
	mustApply(t, s, FenceBroker{ID: 0}) // the last ISR member: offline, ISR kept
	wantPart(t, part(t, s, "t", 0), NoLeader, []int32{0}, 2, 3)

	mustApply(t, s, UnfenceBroker{ID: 2}) // not in the ISR: stays offline (no unclean election)
	wantPart(t, part(t, s, "t", 0), NoLeader, []int32{0}, 2, 3)
	mustApply(t, s, UnfenceBroker{ID: 0}) // the ISR member returns and leads
	wantPart(t, part(t, s, "t", 0), 0, []int32{0}, 3, 4)
}

func TestUncleanElectionConfig(t *testing.T) {
	s := NewState()
	for id := int32(0); id < 2; id++ {
		addBroker(t, s, id, "", 0)
	}
	mustApply(t, s, CreateTopic{Name: "t", ID: tid(1), Assignment: [][]int32{{0, 1}},
		Configs: map[string]string{UncleanLeaderElectionConfig: "true"}})
	mustApply(t, s, AlterPartition{BrokerID: 0, BrokerEpoch: 1, Partitions: []AlterPartitionItem{
		{Topic: "t", Partition: 0, ISR: []ISRMember{{0, -1}}}}})
	mustApply(t, s, FenceBroker{ID: 0})
	wantPart(t, part(t, s, "t", 0), 1, []int32{1}, 1, 2)
}

func TestAlterPartitionEpochChecks(t *testing.T) {
	s := NewState()
	var epochs [3]int64
	for id := int32(0); id < 3; id++ {
		epochs[id] = addBroker(t, s, id, "", 0)
	}
	mustApply(t, s, CreateTopic{Name: "t", ID: tid(1), Assignment: [][]int32{{0, 1, 2}}})
	item := func(le, pe int32, isr ...int32) AlterPartition {
		m := make([]ISRMember, len(isr))
		for i, id := range isr {
			m[i] = ISRMember{ID: id, Epoch: epochs[id]}
		}
		return AlterPartition{BrokerID: 0, BrokerEpoch: epochs[0], Partitions: []AlterPartitionItem{
			{Topic: "t", Partition: 0, LeaderEpoch: le, PartitionEpoch: pe, ISR: m}}}
	}
	// Shrink, then expand back: the partition epoch moves, the leader epoch not.
	r := mustApply(t, s, item(0, 0, 0, 2))
	if p := r.Partitions[0]; p.PartitionEpoch != 1 || p.LeaderEpoch != 0 || !equalInt32s(p.ISR, []int32{0, 2}) {
		t.Fatalf("shrink result %+v", p)
	}
	wantPartCode(t, apply(t, s, item(0, 0, 0, 1, 2)), kerr.InvalidUpdateVersion) // stale partition epoch
	wantPartCode(t, apply(t, s, item(0, 2, 0, 1, 2)), kerr.NotController)        // newer than the controller's
	wantPartCode(t, apply(t, s, item(1, 1, 0, 1, 2)), kerr.NotController)
	mustApply(t, s, item(0, 1, 2, 1, 0)) // any order; stored in replica order
	wantPart(t, part(t, s, "t", 0), 0, []int32{0, 1, 2}, 0, 2)

	// A leader change fences the old leader's requests.
	mustApply(t, s, FenceBroker{ID: 0})
	mustApply(t, s, UnfenceBroker{ID: 0})
	wantPart(t, part(t, s, "t", 0), 1, []int32{1, 2}, 1, 3)
	wantPartCode(t, apply(t, s, item(0, 2, 0, 1, 2)), kerr.FencedLeaderEpoch)
	wantPartCode(t, apply(t, s, item(1, 3, 0, 1, 2)), kerr.InvalidRequest) // 0 is not the leader

	lead := func(isr ...ISRMember) AlterPartition {
		return AlterPartition{BrokerID: 1, BrokerEpoch: epochs[1], Partitions: []AlterPartitionItem{
			{Topic: "t", Partition: 0, LeaderEpoch: 1, PartitionEpoch: 3, ISR: isr}}}
	}
	wantPartCode(t, apply(t, s, lead()), kerr.InvalidRequest)                                   // empty ISR
	wantPartCode(t, apply(t, s, lead(ISRMember{2, -1})), kerr.InvalidRequest)                   // leader not in it
	wantPartCode(t, apply(t, s, lead(ISRMember{1, -1}, ISRMember{1, -1})), kerr.InvalidRequest) // duplicate
	wantPartCode(t, apply(t, s, lead(ISRMember{1, -1}, ISRMember{7, -1})), kerr.InvalidRequest) // not a replica
	wantPartCode(t, apply(t, s, lead(ISRMember{1, -1}, ISRMember{0, 12345})), kerr.IneligibleReplica)
	mustApply(t, s, FenceBroker{ID: 2}) // leaves the ISR: partition epoch 4
	wantPart(t, part(t, s, "t", 0), 1, []int32{1}, 1, 4)
	wantPartCode(t, apply(t, s, AlterPartition{BrokerID: 1, BrokerEpoch: epochs[1], Partitions: []AlterPartitionItem{
		{Topic: "t", Partition: 0, LeaderEpoch: 1, PartitionEpoch: 4, ISR: []ISRMember{{1, -1}, {2, -1}}}}}), kerr.IneligibleReplica) // fenced
	wantCode(t, apply(t, s, AlterPartition{BrokerID: 1, BrokerEpoch: 999}), kerr.StaleBrokerEpoch)
	r = apply(t, s, AlterPartition{BrokerID: 1, BrokerEpoch: epochs[1], Partitions: []AlterPartitionItem{{Topic: "nope"}}})
	wantPartCode(t, r, kerr.UnknownTopicOrPartition)
	// Through all of it the ISR never became empty and 1 still leads.
	wantPart(t, part(t, s, "t", 0), 1, []int32{1}, 1, 4)
}

func TestControlledShutdown(t *testing.T) {
	s := NewState()
	var e [3]int64
	for id := int32(0); id < 3; id++ {
		e[id] = addBroker(t, s, id, "", 0)
	}
	mustApply(t, s, CreateTopic{Name: "t", ID: tid(1), Assignment: [][]int32{{0, 1, 2}, {1, 0, 2}}})
	mustApply(t, s, CreateTopic{Name: "u", ID: tid(2), Assignment: [][]int32{{0}}})
	r := mustApply(t, s, BrokerHeartbeat{ID: 0, Epoch: e[0], NowMs: 1, MetadataOffset: s.Offset(), WantShutdown: true})
	if !r.ShouldShutdown {
		t.Fatal("broker 0 leads nothing it could hand over, yet may not shut down")
	}
	wantPart(t, part(t, s, "t", 0), 1, []int32{1, 2}, 1, 1)
	wantPart(t, part(t, s, "t", 1), 1, []int32{1, 2}, 0, 1)
	wantPart(t, part(t, s, "u", 0), NoLeader, []int32{0}, 1, 1)
	if b, _ := s.Broker(0); !b.ShuttingDown || b.Fenced {
		t.Fatalf("broker %+v", b)
	}
	// A shutting-down broker cannot rejoin an ISR.
	wantPartCode(t, apply(t, s, AlterPartition{BrokerID: 1, BrokerEpoch: e[1], Partitions: []AlterPartitionItem{
		{Topic: "t", Partition: 0, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []ISRMember{{0, -1}, {1, -1}, {2, -1}}}}}), kerr.IneligibleReplica)
}

func TestCreateTopicValidation(t *testing.T) {
	s := NewState()
	for id := int32(0); id < 3; id++ {
		addBroker(t, s, id, "", 0)
	}
	r := mustApply(t, s, CreateTopic{Name: "a.b", ID: tid(1), Partitions: 6, ReplicationFactor: 3, Configs: map[string]string{"retention.ms": "1"}})
	if r.TopicID != tid(1) || len(r.Partitions) != 6 {
		t.Fatalf("result %+v", r)
	}
	leaders := map[int32]int{}
	for _, p := range s.Topic("a.b").Partitions {
		leaders[p.Leader]++
		if len(p.Replicas) != 3 || len(p.ISR) != 3 || p.Leader != p.Replicas[0] {
			t.Fatalf("partition %+v", p)
		}
	}
	if leaders[0] != 2 || leaders[1] != 2 || leaders[2] != 2 {
		t.Fatalf("leaders %v", leaders)
	}
	wantCode(t, apply(t, s, CreateTopic{Name: "a.b", ID: tid(2), Partitions: 1, ReplicationFactor: 1}), kerr.TopicAlreadyExists)
	wantCode(t, apply(t, s, CreateTopic{Name: "a_b", ID: tid(2), Partitions: 1, ReplicationFactor: 1}), kerr.InvalidTopicException)
	wantCode(t, apply(t, s, CreateTopic{Name: "bad/name", ID: tid(2), Partitions: 1, ReplicationFactor: 1}), kerr.InvalidTopicException)
	wantCode(t, apply(t, s, CreateTopic{Name: "x", ID: tid(1), Partitions: 1, ReplicationFactor: 1}), kerr.InvalidRequest)
	wantCode(t, apply(t, s, CreateTopic{Name: "x", Partitions: 1, ReplicationFactor: 1}), kerr.InvalidRequest)
	wantCode(t, apply(t, s, CreateTopic{Name: "x", ID: tid(2), Partitions: 1, ReplicationFactor: 4}), kerr.InvalidReplicationFactor)
	wantCode(t, apply(t, s, CreateTopic{Name: "x", ID: tid(2), Partitions: 0, ReplicationFactor: 1}), kerr.InvalidPartitions)
	wantCode(t, apply(t, s, CreateTopic{Name: "x", ID: tid(2), Partitions: MaxPartitionsPerTopic + 1, ReplicationFactor: 1}), kerr.InvalidPartitions)
	wantCode(t, apply(t, s, CreateTopic{Name: "x", ID: tid(2), Assignment: [][]int32{{0, 0}}}), kerr.InvalidReplicaAssignment)
	wantCode(t, apply(t, s, CreateTopic{Name: "x", ID: tid(2), Assignment: [][]int32{{0, 9}}}), kerr.InvalidReplicaAssignment)
	wantCode(t, apply(t, s, CreateTopic{Name: "x", ID: tid(2), Assignment: [][]int32{{0, 1}, {2}}}), kerr.InvalidReplicaAssignment)
	wantCode(t, apply(t, s, CreateTopic{Name: "x", ID: tid(2), Assignment: [][]int32{}}), kerr.InvalidPartitions)
	mustApply(t, s, FenceBroker{ID: 2})
	wantCode(t, apply(t, s, CreateTopic{Name: "x", ID: tid(2), Assignment: [][]int32{{2}}}), kerr.InvalidReplicaAssignment)
	// A fenced replica in an explicit assignment is left out of the ISR.
	mustApply(t, s, CreateTopic{Name: "x", ID: tid(2), Assignment: [][]int32{{2, 1}}})
	wantPart(t, part(t, s, "x", 0), 1, []int32{1}, 0, 0)
	// Placement uses live brokers only.
	wantCode(t, apply(t, s, CreateTopic{Name: "y", ID: tid(3), Partitions: 1, ReplicationFactor: 3}), kerr.InvalidReplicationFactor)
}

func TestDeleteTopic(t *testing.T) {
	s := NewState()
	addBroker(t, s, 0, "", 0)
	mustApply(t, s, CreateTopic{Name: "a", ID: tid(1), Partitions: 2, ReplicationFactor: 1})
	mustApply(t, s, CreateTopic{Name: "b", ID: tid(2), Partitions: 1, ReplicationFactor: 1})
	mustApply(t, s, DeleteTopic{Name: "a"})
	if s.Topic("a") != nil || s.TopicByID(tid(1)) != nil {
		t.Fatal("topic a still present")
	}
	mustApply(t, s, DeleteTopic{ID: tid(2)})
	if len(s.Topics()) != 0 {
		t.Fatal("topics left")
	}
	wantCode(t, apply(t, s, DeleteTopic{Name: "a"}), kerr.UnknownTopicOrPartition)
	wantCode(t, apply(t, s, DeleteTopic{ID: tid(2)}), kerr.UnknownTopicID)
	// The name is free again, with a new id.
	mustApply(t, s, CreateTopic{Name: "a", ID: tid(3), Partitions: 1, ReplicationFactor: 1})
}

func TestCreatePartitionsKeepsExisting(t *testing.T) {
	s := NewState()
	for id := int32(0); id < 3; id++ {
		addBroker(t, s, id, "", 0)
	}
	mustApply(t, s, CreateTopic{Name: "t", ID: tid(1), Partitions: 2, ReplicationFactor: 2})
	mustApply(t, s, FenceBroker{ID: 0})
	before := s.Topic("t").clone()
	r := mustApply(t, s, CreatePartitions{Topic: "t", Count: 5})
	if len(r.Partitions) != 3 || r.Partitions[0].Partition != 2 {
		t.Fatalf("result %+v", r)
	}
	after := s.Topic("t")
	for i := range before.Partitions {
		if !bytes.Equal(encodePartition(before.Partitions[i]), encodePartition(after.Partitions[i])) {
			t.Fatalf("partition %d changed: %+v -> %+v", i, before.Partitions[i], after.Partitions[i])
		}
	}
	for _, p := range after.Partitions[2:] {
		if len(p.Replicas) != 2 || contains(p.Replicas, 0) {
			t.Fatalf("new partition %+v (broker 0 is fenced)", p)
		}
	}
	mustApply(t, s, CreatePartitions{Topic: "t", Count: 6, Assignment: [][]int32{{2, 1}}})
	wantPart(t, part(t, s, "t", 5), 2, []int32{2, 1}, 0, 0)
	wantCode(t, apply(t, s, CreatePartitions{Topic: "t", Count: 6}), kerr.InvalidPartitions)
	wantCode(t, apply(t, s, CreatePartitions{Topic: "t", Count: 7, Assignment: [][]int32{{1}}}), kerr.InvalidReplicaAssignment)
	wantCode(t, apply(t, s, CreatePartitions{Topic: "nope", Count: 7}), kerr.UnknownTopicOrPartition)
}

func encodePartition(p Partition) []byte {
	b := appendInt32s(nil, p.Replicas)
	b = appendInt32s(b, p.ISR)
	b = appendInt32s(b, p.Adding)
	b = appendInt32s(b, p.Removing)
	return appendInt32s(b, []int32{p.Leader, p.LeaderEpoch, p.PartitionEpoch})
}

func TestAlterConfigs(t *testing.T) {
	s := NewState()
	addBroker(t, s, 0, "", 0)
	mustApply(t, s, CreateTopic{Name: "t", ID: tid(1), Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"a": "1", "b": "2"}})
	mustApply(t, s, AlterConfigs{Topic: "t", Set: map[string]string{"c": "3"}, Delete: []string{"a"}})
	if c := s.Topic("t").Configs; len(c) != 2 || c["b"] != "2" || c["c"] != "3" {
		t.Fatalf("incremental: %v", c)
	}
	mustApply(t, s, AlterConfigs{Topic: "t", Replace: true, Set: map[string]string{"d": "4"}})
	if c := s.Topic("t").Configs; len(c) != 1 || c["d"] != "4" {
		t.Fatalf("replace: %v", c)
	}
	wantCode(t, apply(t, s, AlterConfigs{Topic: "t", Set: map[string]string{"x": "1"}, Delete: []string{"x"}}), kerr.InvalidRequest)
	wantCode(t, apply(t, s, AlterConfigs{Topic: "t", Set: map[string]string{"": "1"}}), kerr.InvalidConfig)
	wantCode(t, apply(t, s, AlterConfigs{Topic: "u"}), kerr.UnknownTopicOrPartition)
}

func TestElectLeaders(t *testing.T) {
	s := NewState()
	var e [3]int64
	for id := int32(0); id < 3; id++ {
		e[id] = addBroker(t, s, id, "", 0)
	}
	mustApply(t, s, CreateTopic{Name: "t", ID: tid(1), Assignment: [][]int32{{0, 1}, {2, 1}}})
	mustApply(t, s, FenceBroker{ID: 0})
	mustApply(t, s, UnfenceBroker{ID: 0})
	wantPart(t, part(t, s, "t", 0), 1, []int32{1}, 1, 1)
	// 0 is not in the ISR yet.
	wantPartCode(t, apply(t, s, ElectLeaders{Partitions: []TopicPartition{{"t", 0}}}), kerr.PreferredLeaderNotAvailable)
	mustApply(t, s, AlterPartition{BrokerID: 1, BrokerEpoch: e[1], Partitions: []AlterPartitionItem{
		{Topic: "t", Partition: 0, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []ISRMember{{0, -1}, {1, -1}}}}})
	r := mustApply(t, s, ElectLeaders{Partitions: nil}) // all partitions: only changes reported
	if len(r.Partitions) != 1 || r.Partitions[0].Leader != 0 {
		t.Fatalf("elect all: %+v", r)
	}
	wantPart(t, part(t, s, "t", 0), 0, []int32{0, 1}, 2, 3)
	wantPartCode(t, apply(t, s, ElectLeaders{Partitions: []TopicPartition{{"t", 1}}}), kerr.ElectionNotNeeded)
	wantPartCode(t, apply(t, s, ElectLeaders{Partitions: []TopicPartition{{"t", 9}}}), kerr.UnknownTopicOrPartition)

	// Unclean: partition 1's ISR is {2,1}; fence both, unfence 0 (not a replica) and 1 after shrinking.
	mustApply(t, s, AlterPartition{BrokerID: 2, BrokerEpoch: e[2], Partitions: []AlterPartitionItem{
		{Topic: "t", Partition: 1, ISR: []ISRMember{{2, -1}}}}})
	mustApply(t, s, FenceBroker{ID: 2})
	wantPart(t, part(t, s, "t", 1), NoLeader, []int32{2}, 1, 2)
	wantPartCode(t, apply(t, s, ElectLeaders{Partitions: []TopicPartition{{"t", 1}}}), kerr.PreferredLeaderNotAvailable)
	mustApply(t, s, ElectLeaders{Election: ElectUnclean, Partitions: []TopicPartition{{"t", 1}}})
	wantPart(t, part(t, s, "t", 1), 1, []int32{1}, 2, 3)
	wantCode(t, apply(t, s, ElectLeaders{Election: 7}), kerr.InvalidRequest)
}

func TestReassignment(t *testing.T) {
	s := NewState()
	var e [4]int64
	for id := int32(0); id < 4; id++ {
		e[id] = addBroker(t, s, id, "", 0)
	}
	mustApply(t, s, CreateTopic{Name: "t", ID: tid(1), Assignment: [][]int32{{0, 1, 2}}})
	mustApply(t, s, ReassignPartitions{Items: []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 3}}}})
	p := part(t, s, "t", 0)
	if !equalInt32s(p.Replicas, []int32{1, 2, 3, 0}) || !equalInt32s(p.Adding, []int32{3}) || !equalInt32s(p.Removing, []int32{0}) || p.Leader != 0 {
		t.Fatalf("in progress: %+v", p)
	}
	// The leader adds 3 to the ISR: the reassignment completes and 0 hands over.
	r := apply(t, s, AlterPartition{BrokerID: 0, BrokerEpoch: e[0], Partitions: []AlterPartitionItem{
		{Topic: "t", Partition: 0, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []ISRMember{{0, -1}, {1, -1}, {2, -1}, {3, -1}}}}})
	wantPartCode(t, r, kerr.NewLeaderElected)
	p = part(t, s, "t", 0)
	if !equalInt32s(p.Replicas, []int32{1, 2, 3}) || p.Reassigning() || p.Leader != 1 || !equalInt32s(p.ISR, []int32{1, 2, 3}) {
		t.Fatalf("completed: %+v", p)
	}
	// Start another and cancel it.
	mustApply(t, s, ReassignPartitions{Items: []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{0, 1, 2}}}})
	mustApply(t, s, ReassignPartitions{Items: []Reassignment{{Topic: "t", Partition: 0}}})
	p = part(t, s, "t", 0)
	if !equalInt32s(p.Replicas, []int32{1, 2, 3}) || p.Reassigning() || p.Leader != 1 {
		t.Fatalf("cancelled: %+v", p)
	}
	wantPartCode(t, apply(t, s, ReassignPartitions{Items: []Reassignment{{Topic: "t", Partition: 0}}}), kerr.NoReassignmentInProgress)
	wantPartCode(t, apply(t, s, ReassignPartitions{Items: []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{1, 1}}}}), kerr.InvalidReplicaAssignment)
	wantPartCode(t, apply(t, s, ReassignPartitions{Items: []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{8}}}}), kerr.InvalidReplicaAssignment)
	// Shrinking to a subset of the ISR completes at once.
	mustApply(t, s, ReassignPartitions{Items: []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{3, 2}}}})
	p = part(t, s, "t", 0)
	if !equalInt32s(p.Replicas, []int32{3, 2}) || p.Reassigning() || p.Leader != 3 {
		t.Fatalf("shrunk: %+v", p)
	}
}

func TestOffsetCountsEveryCommand(t *testing.T) {
	s := NewState()
	for i := 1; i <= 5; i++ {
		r := s.Apply(FenceBroker{ID: 42}) // fails: unknown broker
		if r.Offset != int64(i) || s.Offset() != int64(i) {
			t.Fatalf("offset %d after %d commands", r.Offset, i)
		}
	}
	// Pointers work as values.
	if r := s.Apply(&RegisterBroker{ID: 1, Host: "h"}); r.Code != 0 {
		t.Fatal(r.Err())
	}
}
