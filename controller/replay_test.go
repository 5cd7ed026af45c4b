package controller

import (
	"bytes"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
)

// cmdGen makes random commands, mostly well-formed for the state it is
// shown so that sequences reach deep states (elections, reassignments,
// ISR changes), with a share of stale and malformed ones.
type cmdGen struct {
	rng *rand.Rand
	now int64
	ids byte
}

func (g *cmdGen) broker() int32 { return int32(g.rng.Intn(6)) }

func (g *cmdGen) replicas(maxLen int) []int32 {
	n := 1 + g.rng.Intn(maxLen)
	out := make([]int32, 0, n)
	for len(out) < n {
		b := g.broker()
		if !contains(out, b) || g.rng.Intn(20) == 0 {
			out = append(out, b)
		}
	}
	return out
}

func (g *cmdGen) topicName() string { return fmt.Sprintf("t%d", g.rng.Intn(4)) }

// somePartition picks an existing partition (or a made-up one).
func (g *cmdGen) somePartition(s *State) (string, int32, *Partition) {
	ts := s.Topics()
	if len(ts) == 0 || g.rng.Intn(10) == 0 {
		return g.topicName(), int32(g.rng.Intn(3)), nil
	}
	t := ts[g.rng.Intn(len(ts))]
	i := g.rng.Intn(len(t.Partitions))
	return t.Name, int32(i), &t.Partitions[i]
}

func (g *cmdGen) next(s *State) Command {
	g.now += int64(g.rng.Intn(3000))
	switch g.rng.Intn(16) {
	case 0, 1:
		rb := RegisterBroker{ID: g.broker(), IncarnationID: [16]byte{byte(g.rng.Intn(3))}, Host: "h", Port: 9000, Rack: []string{"", "a", "b"}[g.rng.Intn(3)], NowMs: g.now}
		if g.rng.Intn(2) == 0 {
			rb.Listeners = []Endpoint{{Name: "INTERNAL", Host: "h", Port: 9000}, {Name: "EXTERNAL", Host: "e", Port: int32(9100 + g.rng.Intn(3))}}
		}
		return rb
	case 2, 3, 4:
		id := g.broker()
		b, _ := s.Broker(id)
		epoch := b.Epoch
		if g.rng.Intn(8) == 0 {
			epoch = int64(g.rng.Intn(50))
		}
		return BrokerHeartbeat{ID: id, Epoch: epoch, NowMs: g.now, MetadataOffset: s.Offset() - int64(g.rng.Intn(3)),
			WantFence: g.rng.Intn(10) == 0, WantShutdown: g.rng.Intn(15) == 0}
	case 5:
		if g.rng.Intn(2) == 0 {
			return FenceBroker{ID: g.broker()}
		}
		return UnfenceBroker{ID: g.broker()}
	case 6, 7:
		g.ids++
		c := CreateTopic{Name: g.topicName(), ID: TopicID{0: 1, 1: g.ids}, Configs: map[string]string{}}
		if g.rng.Intn(3) == 0 {
			c.Configs[UncleanLeaderElectionConfig] = "true"
		}
		if g.rng.Intn(2) == 0 {
			rf := 1 + g.rng.Intn(3)
			for i := 0; i < 1+g.rng.Intn(3); i++ {
				rs := g.replicas(rf)
				c.Assignment = append(c.Assignment, rs)
			}
		} else {
			c.Partitions = int32(g.rng.Intn(5))
			c.ReplicationFactor = int16(g.rng.Intn(4))
		}
		return c
	case 8:
		if g.rng.Intn(2) == 0 {
			return DeleteTopic{Name: g.topicName()}
		}
		return DeleteTopic{ID: TopicID{0: 1, 1: byte(g.rng.Intn(int(g.ids) + 1))}}
	case 9:
		return CreatePartitions{Topic: g.topicName(), Count: int32(g.rng.Intn(6))}
	case 10:
		return AlterConfigs{Topic: g.topicName(), Replace: g.rng.Intn(3) == 0,
			Set: map[string]string{UncleanLeaderElectionConfig: []string{"true", "false"}[g.rng.Intn(2)]}, Delete: []string{"x"}}
	case 11, 12, 13:
		name, idx, p := g.somePartition(s)
		it := AlterPartitionItem{Topic: name, Partition: idx}
		leader := g.broker()
		if p != nil {
			it.LeaderEpoch, it.PartitionEpoch = p.LeaderEpoch, p.PartitionEpoch
			if g.rng.Intn(6) == 0 {
				it.LeaderEpoch += int32(g.rng.Intn(3)) - 1
				it.PartitionEpoch += int32(g.rng.Intn(3)) - 1
			}
			if p.Leader != NoLeader && g.rng.Intn(6) != 0 {
				leader = p.Leader
			}
			for _, r := range p.Replicas {
				if r == leader || g.rng.Intn(2) == 0 {
					it.ISR = append(it.ISR, ISRMember{ID: r, Epoch: -1})
				}
			}
		}
		b, _ := s.Broker(leader)
		return AlterPartition{BrokerID: leader, BrokerEpoch: b.Epoch, Partitions: []AlterPartitionItem{it}}
	case 14:
		c := ElectLeaders{Election: ElectionType(g.rng.Intn(2))}
		if g.rng.Intn(3) != 0 {
			name, idx, _ := g.somePartition(s)
			c.Partitions = []TopicPartition{{name, idx}}
		}
		return c
	default:
		name, idx, _ := g.somePartition(s)
		it := Reassignment{Topic: name, Partition: idx}
		if g.rng.Intn(4) != 0 {
			it.Replicas = g.replicas(3)
		}
		if g.rng.Intn(3) == 0 {
			return Tick{NowMs: g.now, SessionTimeoutMs: int64(g.rng.Intn(12000)), ResetSessions: g.rng.Intn(5) == 0}
		}
		return ReassignPartitions{Items: []Reassignment{it}}
	}
}

// leaderLedger records which broker led each (topic id, partition, leader
// epoch); two different leaders for one key is a safety violation.
type leaderLedger map[string]int32

func (l leaderLedger) observe(s *State) error {
	for _, t := range s.Topics() {
		for i, p := range t.Partitions {
			k := fmt.Sprintf("%s/%d/%d", t.ID, i, p.LeaderEpoch)
			if prev, ok := l[k]; ok && prev != p.Leader {
				return fmt.Errorf("%s-%d epoch %d led by %d and by %d", t.Name, i, p.LeaderEpoch, prev, p.Leader)
			}
			l[k] = p.Leader
		}
	}
	return nil
}

// TestReplayDeterminism applies random command sequences to two States, one
// from the commands and one from their decoded encodings, comparing the
// canonical encodings and results after every command; checks the
// invariants and the one-leader-per-epoch rule; and restores a snapshot
// taken midway, which must end in the same state after the remaining
// commands.
func TestReplayDeterminism(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		g := &cmdGen{rng: rng}
		a, b := NewState(), NewState()
		ledger := leaderLedger{}
		var cmds []Command
		n := 300 + rng.Intn(300)
		for i := 0; i < n; i++ {
			c := g.next(a)
			cmds = append(cmds, c)
			ra := a.Apply(c)
			dec, err := DecodeCommand(EncodeCommand(c))
			if err != nil {
				t.Fatalf("seed %d cmd %d %T: %v", seed, i, c, err)
			}
			rb := b.Apply(dec)
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("seed %d cmd %d %T: results differ\n%+v\n%+v", seed, i, c, ra, rb)
			}
			if err := a.Check(); err != nil {
				t.Fatalf("seed %d cmd %d %+v: %v", seed, i, c, err)
			}
			if !bytes.Equal(a.AppendTo(nil), b.AppendTo(nil)) {
				t.Fatalf("seed %d cmd %d %T: states differ", seed, i, c)
			}
			if err := ledger.observe(a); err != nil {
				t.Fatalf("seed %d cmd %d: %v", seed, i, err)
			}
		}
		// Replay from scratch, with a snapshot/restore in the middle.
		cut := rng.Intn(len(cmds))
		c := NewState()
		for _, cmd := range cmds[:cut] {
			c.Apply(cmd)
		}
		snap := c.AppendTo(nil)
		restored, err := DecodeState(snap)
		if err != nil {
			t.Fatalf("seed %d: restore: %v", seed, err)
		}
		if !bytes.Equal(restored.AppendTo(nil), snap) {
			t.Fatalf("seed %d: restored state encodes differently", seed)
		}
		clone := c.Clone()
		for _, cmd := range cmds[cut:] {
			restored.Apply(cmd)
			clone.Apply(cmd)
		}
		if final := a.AppendTo(nil); !bytes.Equal(restored.AppendTo(nil), final) || !bytes.Equal(clone.AppendTo(nil), final) {
			t.Fatalf("seed %d: snapshot at %d + replay differs from the original run", seed, cut)
		}
		if len(a.Topics()) == 0 && len(a.Brokers()) == 0 {
			t.Fatalf("seed %d: the generator reached no state", seed)
		}
	}
}

// TestGeneratorCoverage guards the property test against a generator that
// stopped reaching the interesting paths.
func TestGeneratorCoverage(t *testing.T) {
	seen := map[string]int{}
	for seed := int64(1); seed <= 10; seed++ {
		g := &cmdGen{rng: rand.New(rand.NewSource(seed))}
		s := NewState()
		for i := 0; i < 400; i++ {
			c := g.next(s)
			r := s.Apply(c)
			if r.Code == 0 {
				seen[c.Type().String()+" ok"]++
			}
			for _, p := range r.Partitions {
				if p.Code == 0 && p.LeaderEpoch > 0 {
					seen["leader change"]++
				}
			}
			for _, tp := range s.Topics() {
				for _, p := range tp.Partitions {
					if p.Reassigning() {
						seen["reassigning"]++
					}
					if p.Leader == NoLeader {
						seen["offline"]++
					}
				}
			}
		}
	}
	for _, k := range []string{"CreateTopic ok", "AlterPartition ok", "ElectLeaders ok", "ReassignPartitions ok",
		"BrokerHeartbeat ok", "DeleteTopic ok", "CreatePartitions ok", "leader change", "reassigning", "offline"} {
		if seen[k] == 0 {
			t.Errorf("generator never produced %q (%v)", k, seen)
		}
	}
}

func TestDecodeStateRejects(t *testing.T) {
	s := NewState()
	s.Apply(RegisterBroker{ID: 0, Host: "h"})
	s.Apply(BrokerHeartbeat{ID: 0, Epoch: 1, MetadataOffset: 1})
	s.Apply(CreateTopic{Name: "t", ID: tid(1), Partitions: 2, ReplicationFactor: 1})
	s.Apply(RegisterBroker{ID: 1, Host: "h", Port: 2, Listeners: []Endpoint{{Name: "IN", Host: "h", Port: 2}, {Name: "EX", Host: "x", Port: 3}}})
	good := s.AppendTo(nil)
	if _, err := DecodeState(good); err != nil {
		t.Fatal(err)
	}
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x40
		if _, err := DecodeState(bad); err == nil {
			t.Fatalf("flipped byte %d accepted", i)
		}
	}
	for n := 0; n < len(good); n++ {
		if _, err := DecodeState(good[:n]); err == nil {
			t.Fatalf("truncation to %d accepted", n)
		}
	}
}
