package controller

import (
	"net"
	"testing"
	"time"
)

// imbalanced sets up brokers 0..2 and topic "t" whose four partitions prefer
// broker 0, then fences and unfences broker 0: every partition is led by
// another replica, broker 0 is out of every ISR.
func imbalanced(t *testing.T) *State {
	t.Helper()
	s := NewState()
	for id := int32(0); id < 3; id++ {
		addBroker(t, s, id, "", 1)
	}
	mustApply(t, s, CreateTopic{Name: "t", ID: tid(1), Assignment: [][]int32{{0, 1, 2}, {0, 2, 1}, {0, 1, 2}, {0, 2, 1}}})
	mustApply(t, s, CreateTopic{Name: "u", ID: tid(2), Assignment: [][]int32{{1, 0, 2}}})
	mustApply(t, s, FenceBroker{ID: 0})
	mustApply(t, s, UnfenceBroker{ID: 0})
	for i := int32(0); i < 4; i++ {
		if p := part(t, s, "t", i); p.Leader == 0 || contains(p.ISR, 0) {
			t.Fatalf("t-%d after fencing broker 0: %+v", i, p)
		}
	}
	return s
}

// rejoin has partition i's leader add broker 0 back to its ISR.
func rejoin(t *testing.T, s *State, topic string, i int32) {
	t.Helper()
	p := part(t, s, topic, i)
	b, _ := s.Broker(p.Leader)
	isr := []ISRMember{{ID: 0, Epoch: -1}}
	for _, id := range p.ISR {
		isr = append(isr, ISRMember{ID: id, Epoch: -1})
	}
	mustApply(t, s, AlterPartition{BrokerID: p.Leader, BrokerEpoch: b.Epoch, Partitions: []AlterPartitionItem{{
		Topic: topic, Partition: i, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: isr}}})
}

func TestImbalancedPartitions(t *testing.T) {
	s := imbalanced(t)
	if got := s.ImbalancedPartitions(10); len(got) != 0 {
		t.Fatalf("preferred replica out of every ISR: %v, want none", got)
	}
	rejoin(t, s, "t", 1)
	rejoin(t, s, "t", 2)
	rejoin(t, s, "t", 3)
	want := []TopicPartition{{"t", 1}, {"t", 2}, {"t", 3}}
	if got := s.ImbalancedPartitions(10); !equalTPs(got, want) {
		t.Fatalf("imbalanced %v, want %v (t-0's preferred replica is not in sync)", got, want)
	}
	// Broker 1 prefers u-0 and leads it: balanced, never listed.
	for _, tp := range s.ImbalancedPartitions(0) {
		if tp.Topic == "u" {
			t.Fatalf("u-0 listed while its preferred replica leads")
		}
	}

	// The election moves them; then broker 0 leads 3 of its 4 (25% imbalance).
	r := mustApply(t, s, ElectLeaders{Election: ElectPreferred, Partitions: want})
	if len(r.Partitions) != 3 {
		t.Fatalf("election result %+v", r)
	}
	rejoin(t, s, "t", 0)
	if got := s.ImbalancedPartitions(25); len(got) != 0 {
		t.Fatalf("25%% imbalance with a 25%% threshold: %v, want none (strictly above)", got)
	}
	if got := s.ImbalancedPartitions(24); !equalTPs(got, []TopicPartition{{"t", 0}}) {
		t.Fatalf("25%% imbalance with a 24%% threshold: %v, want [t-0]", got)
	}
	// A reassignment in progress keeps the partition out.
	addBroker(t, s, 3, "", 1)
	mustApply(t, s, ReassignPartitions{Items: []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{0, 3}}}})
	if p := part(t, s, "t", 0); !p.Reassigning() || p.Leader == 0 {
		t.Fatalf("t-0 after starting a reassignment to [0 3]: %+v", p)
	}
	if got := s.ImbalancedPartitions(0); len(got) != 0 {
		t.Fatalf("reassigning partition listed: %v", got)
	}
	// A fenced preferred replica is never a candidate.
	s2 := imbalanced(t)
	rejoin(t, s2, "t", 1)
	mustApply(t, s2, FenceBroker{ID: 0})
	if got := s2.ImbalancedPartitions(0); len(got) != 0 {
		t.Fatalf("fenced preferred replica: %v, want none", got)
	}
}

func equalTPs(a, b []TopicPartition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAutoLeaderRebalance: the Raft leader's driver moves leadership back
// to the preferred replica once the check interval has passed on its clock.
func TestAutoLeaderRebalance(t *testing.T) {
	clock := &manualClock{}
	clock.ms.Store(7_000_000)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(0, map[int32]string{0: ln.Addr().String()}, t.TempDir(), ln, clock)
	cfg.LeaderImbalanceCheckInterval = 30 * time.Second
	nd, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	eventually(t, "leadership", nd.IsLeader)
	eventually(t, "the leader's session reset", func() bool { return nd.Offset() >= 1 })
	registerAll(t, nd, 2)
	mustPropose(t, nd, CreateTopic{Name: "t", ID: NewTopicID(), Assignment: [][]int32{{0, 1}, {1, 0}}})
	mustPropose(t, nd, FenceBroker{ID: 0})
	mustPropose(t, nd, UnfenceBroker{ID: 0})
	p, _ := nd.State().Partition("t", 0)
	if p.Leader != 1 {
		t.Fatalf("t-0 after broker 0 was fenced: %+v", p)
	}
	b1, _ := nd.State().Broker(1)
	mustPropose(t, nd, AlterPartition{BrokerID: 1, BrokerEpoch: b1.Epoch, Partitions: []AlterPartitionItem{{
		Topic: "t", Partition: 0, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		ISR: []ISRMember{{ID: 0, Epoch: -1}, {ID: 1, Epoch: -1}}}}})
	epoch := p.LeaderEpoch

	clock.advance(31 * time.Second)
	eventually(t, "t-0 back on its preferred replica", func() bool {
		p, _ := nd.State().Partition("t", 0)
		return p.Leader == 0
	})
	st := nd.State()
	if p, _ := st.Partition("t", 0); p.LeaderEpoch != epoch+1 || !equalInt32s(p.ISR, []int32{0, 1}) {
		t.Fatalf("t-0 after the rebalance: %+v", p)
	}
	if p, _ := st.Partition("t", 1); p.Leader != 1 {
		t.Fatalf("t-1 moved: %+v", p)
	}
	if err := st.Check(); err != nil {
		t.Fatal(err)
	}
}
