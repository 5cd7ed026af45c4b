package group

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

type fakeCatalog map[string]int32

func (c fakeCatalog) Partitions(t string) int32 { return c[t] }
func (c fakeCatalog) Names() []string {
	var out []string
	for t := range c {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// client is a well-behaved KIP-848 member: it owns what it was last told.
type client struct {
	id    string
	epoch int32
	owned map[string][]int32
}

func (h *harness) hb(c *client, cat Catalog, topics []string) HeartbeatResult {
	req := HeartbeatRequest{Group: "g", MemberID: c.id, MemberEpoch: c.epoch, RebalanceTimeoutMs: 5000,
		Owned: c.owned, OwnedSet: true}
	if c.epoch == 0 {
		req.Topics = topics
		req.Owned = nil
	}
	r := h.g.ConsumerHeartbeat(h.now, req, cat)
	if r.Err == 0 {
		c.epoch = r.MemberEpoch
		if r.HasAssignment {
			c.owned = r.Assignment
		}
	}
	return r
}

// checkExclusive fails if a partition is owned (assigned or pending
// revocation) by two members.
func checkExclusive(t *testing.T, g *Group) {
	t.Helper()
	seen := map[TopicPartition]string{}
	for _, m := range g.cg.members {
		for _, set := range []map[string][]int32{m.Assigned, m.Pending} {
			for tp, ps := range set {
				for _, p := range ps {
					k := TopicPartition{tp, p}
					if o, ok := seen[k]; ok {
						t.Fatalf("%v owned by %s and %s", k, o, m.ID)
					}
					seen[k] = m.ID
				}
			}
		}
	}
}

func TestConsumerGroupIncrementalReconciliation(t *testing.T) {
	for seed := uint64(0); seed < 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			h := newHarness(t)
			cat := fakeCatalog{"a": 6, "b": 3}
			topics := []string{"a", "b"}
			var clients []*client
			for step := 0; step < 60; step++ {
				switch x := rng.IntN(10); {
				case x == 0 && len(clients) < 6 || len(clients) == 0:
					c := &client{id: fmt.Sprintf("m%d", step)}
					if r := h.hb(c, cat, topics); r.Err != 0 {
						t.Fatalf("join: %+v", r)
					}
					clients = append(clients, c)
				case x == 1 && len(clients) > 1:
					i := rng.IntN(len(clients))
					c := clients[i]
					c.epoch = -1
					h.hb(c, cat, nil)
					clients = slices.Delete(clients, i, i+1)
				default:
					c := clients[rng.IntN(len(clients))]
					if r := h.hb(c, cat, nil); r.Err != 0 {
						t.Fatalf("heartbeat of %s: %+v", c.id, r)
					}
				}
				checkExclusive(t, h.g)
			}
			// Quiesce: everyone heartbeats until nothing changes.
			for round := 0; round < 10; round++ {
				for _, c := range clients {
					if r := h.hb(c, cat, nil); r.Err != 0 {
						t.Fatalf("heartbeat: %+v", r)
					}
					checkExclusive(t, h.g)
				}
			}
			if st := h.g.StateName(); st != "Stable" {
				t.Fatalf("state %s after quiescing", st)
			}
			owned := map[TopicPartition]int{}
			minN, maxN := 100, 0
			for _, c := range clients {
				n := 0
				for tp, ps := range c.owned {
					for _, p := range ps {
						owned[TopicPartition{tp, p}]++
						n++
					}
				}
				minN, maxN = min(minN, n), max(maxN, n)
			}
			if len(owned) != 9 {
				t.Fatalf("%d of 9 partitions owned: %v", len(owned), owned)
			}
			if maxN-minN > 1 {
				t.Fatalf("unbalanced: %d..%d", minN, maxN)
			}
		})
	}
}

func TestConsumerGroupRevokeBeforeAssign(t *testing.T) {
	h := newHarness(t)
	cat := fakeCatalog{"a": 4}
	a := &client{id: "a"}
	h.hb(a, cat, []string{"a"})
	if n := len(a.owned["a"]); n != 4 || a.epoch != 1 {
		t.Fatalf("first member: %v epoch %d", a.owned, a.epoch)
	}
	b := &client{id: "b"}
	h.hb(b, cat, []string{"a"})
	if len(b.owned["a"]) != 0 {
		t.Fatalf("b got %v while a still owns everything", b.owned)
	}
	// a learns to revoke two; until it confirms, b gets nothing.
	keep := a.owned["a"]
	r := h.hb(a, cat, nil)
	if !r.HasAssignment || len(a.owned["a"]) != 2 {
		t.Fatalf("a after the new target: %+v", r)
	}
	a.owned = map[string][]int32{"a": keep} // a has not revoked yet
	h.hb(a, cat, nil)
	if h.hb(b, cat, nil); len(b.owned["a"]) != 0 {
		t.Fatalf("b got %v before a revoked", b.owned)
	}
	a.owned = map[string][]int32{"a": keep[:0]}
	for _, p := range keep {
		if slices.Contains(h.g.cg.members["a"].Assigned["a"], p) {
			a.owned["a"] = append(a.owned["a"], p)
		}
	}
	h.hb(a, cat, nil) // confirms the revocation
	h.hb(b, cat, nil)
	if len(b.owned["a"]) != 2 || b.epoch != a.epoch {
		t.Fatalf("b after the revocation: %v epoch %d (a %d)", b.owned, b.epoch, a.epoch)
	}
	// A zombie with an old epoch is fenced.
	if r := h.g.ConsumerHeartbeat(h.now, HeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: 99}, cat); r.Err != kerr.FencedMemberEpoch.Code {
		t.Fatalf("zombie: %+v", r)
	}
	// Commits: current epoch ok, stale refused, simple refused with members.
	if code := h.g.CheckCommit(h.now, a.epoch, "a", ""); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if code := h.g.CheckCommit(h.now, a.epoch+5, "a", ""); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("stale commit: %d", code)
	}
	if code := h.g.CheckCommit(h.now, -1, "", ""); code != kerr.UnknownMemberID.Code {
		t.Fatalf("simple commit to a live consumer group: %d", code)
	}
	// Session expiry frees b's partitions.
	h.now += int64(h.cfg.ConsumerSessionTimeoutMs) + 1
	h.hb(a, cat, nil) // a stays alive
	h.tick(0)
	if _, ok := h.g.cg.members["b"]; ok {
		t.Fatal("b survived its session")
	}
	for i := 0; i < 3; i++ {
		h.hb(a, cat, nil)
	}
	if len(a.owned["a"]) != 4 {
		t.Fatalf("a after b expired: %v", a.owned)
	}
	// A classic JoinGroup to a live consumer group is refused.
	if j := h.join("", ""); !j.got || j.r.Err != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join: %+v", j.r)
	}
}
