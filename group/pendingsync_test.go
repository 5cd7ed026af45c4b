package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Pending syncs (Kafka's pendingSyncMembers and expirePendingSync): a member
// that got its JoinGroup answer must send SyncGroup within the rebalance
// timeout (5 s in the harness) after the join completed, or it is removed
// and the group rebalances. Sessions are 1 s, so every member that should
// stay heartbeats every 500 ms of fake time.

// twoJoined brings a (leader) and b to generation 2, CompletingRebalance,
// with neither synced yet.
func (h *harness) twoJoined() (a, b string) {
	h.t.Helper()
	a, _ = h.joinNew()
	b, jb := h.joinNew()
	ja := h.join(a, "")
	if !ja.got || !jb.got || ja.r.Generation != 2 || ja.r.LeaderID != a {
		h.t.Fatalf("join answers: %+v %+v", ja.r, jb.r)
	}
	h.wantState(CompletingRebalance)
	return a, b
}

// heartbeatUntil advances fake time by step up to total, heartbeating
// members at generation gen; it fails if any heartbeat is refused.
func (h *harness) heartbeatUntil(total, step int64, gen int32, members ...string) {
	h.t.Helper()
	for spent := int64(0); spent < total; spent += step {
		h.tick(step)
		for _, m := range members {
			if code := h.g.Heartbeat(h.now, m, "", gen); code != 0 {
				h.t.Fatalf("heartbeat of %s at +%d ms: %d", m, spent+step, code)
			}
		}
	}
}

func TestGroupPendingSyncExpiresFollower(t *testing.T) {
	h := newHarness(t)
	a, b := h.twoJoined()
	// The leader syncs and the group becomes Stable; b heartbeats but
	// never sends SyncGroup.
	sa := h.sync(a, 2, map[string][]byte{a: []byte("A"), b: []byte("B")})
	h.eff(h.g.Persisted(h.now, h.lastSeq, 0))
	if !sa.got || sa.r.Err != 0 || string(sa.r.Assignment) != "A" {
		t.Fatalf("leader sync: %+v", sa.r)
	}
	h.wantState(Stable)
	if d := h.g.NextDeadline(); d > h.now+5000 {
		t.Fatalf("next deadline %d, want the sync deadline %d at the latest", d, h.now+5000)
	}
	// Up to 1 ms before the rebalance timeout nothing happens.
	h.heartbeatUntil(4999, 1, 2, a, b)
	h.wantState(Stable)
	h.tick(1)
	h.wantState(PreparingRebalance)
	if _, ok := h.g.members[b]; ok {
		t.Fatal("b is still a member after the sync deadline")
	}
	if s := h.sync(b, 2, nil); !s.got || s.r.Err != kerr.UnknownMemberID.Code {
		t.Fatalf("b's late sync: %+v, want UNKNOWN_MEMBER_ID", s.r)
	}
	if code := h.g.Heartbeat(h.now, b, "", 2); code != kerr.UnknownMemberID.Code {
		t.Fatalf("b's heartbeat: %d, want UNKNOWN_MEMBER_ID", code)
	}
	if code := h.g.Heartbeat(h.now, a, "", 2); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("a's heartbeat: %d, want REBALANCE_IN_PROGRESS", code)
	}
	ja := h.join(a, "")
	if !ja.got || ja.r.Err != 0 || ja.r.Generation != 3 || ja.r.LeaderID != a ||
		len(ja.r.Members) != 1 || ja.r.Members[0].MemberID != a {
		t.Fatalf("a's rejoin: %+v", ja.r)
	}
	sa = h.sync(a, 3, map[string][]byte{a: []byte("ALL")})
	h.eff(h.g.Persisted(h.now, h.lastSeq, 0))
	if !sa.got || string(sa.r.Assignment) != "ALL" {
		t.Fatalf("a's sync at generation 3: %+v", sa.r)
	}
	h.wantState(Stable)
	// a synced: no pending-sync deadline is left for generation 3.
	h.heartbeatUntil(6000, 500, 3, a)
	h.wantState(Stable)
}

func TestGroupPendingSyncExpiresLeader(t *testing.T) {
	h := newHarness(t)
	a, b := h.twoJoined()
	// b syncs and waits for the leader's assignment, which never comes.
	sb := h.sync(b, 2, nil)
	h.heartbeatUntil(4500, 500, 2, a, b)
	if sb.got {
		t.Fatalf("b answered before the leader synced: %+v", sb.r)
	}
	h.tick(500)
	if !sb.got || sb.r.Err != kerr.RebalanceInProgress.Code {
		t.Fatalf("b's waiting sync: %+v, want REBALANCE_IN_PROGRESS", sb.r)
	}
	if _, ok := h.g.members[a]; ok {
		t.Fatal("the leader that never synced is still a member")
	}
	jb := h.join(b, "")
	if !jb.got || jb.r.Generation != 3 || jb.r.LeaderID != b || len(jb.r.Members) != 1 {
		t.Fatalf("b's rejoin: %+v", jb.r)
	}
}

func TestGroupPendingSyncAllSynced(t *testing.T) {
	h := newHarness(t)
	a, b := h.twoJoined()
	h.heartbeatUntil(4000, 500, 2, a, b)
	sb := h.sync(b, 2, nil)
	sa := h.sync(a, 2, map[string][]byte{a: []byte("A"), b: []byte("B")})
	h.eff(h.g.Persisted(h.now, h.lastSeq, 0))
	if !sa.got || !sb.got || sa.r.Err != 0 || sb.r.Err != 0 {
		t.Fatalf("syncs: %+v %+v", sa.r, sb.r)
	}
	if len(h.g.pendingSync) != 0 {
		t.Fatalf("pending syncs left: %v", h.g.pendingSync)
	}
	h.heartbeatUntil(10000, 500, 2, a, b)
	h.wantState(Stable)
	if h.g.Generation() != 2 || h.g.NumMembers() != 2 {
		t.Fatalf("generation %d with %d members, want 2 and 2", h.g.Generation(), h.g.NumMembers())
	}
}

func TestGroupPendingSyncClearedByRebalance(t *testing.T) {
	h := newHarness(t)
	a, b := h.twoJoined()
	h.heartbeatUntil(3000, 500, 2, a, b)
	// A third member joins before anyone synced: the generation-2 sync
	// deadline no longer applies; the rebalance timeout of the new
	// rebalance does.
	c, jc := h.joinNew()
	h.wantState(PreparingRebalance)
	if len(h.g.pendingSync) != 0 {
		t.Fatalf("pending syncs survived the rebalance: %v", h.g.pendingSync)
	}
	ja, jb := h.join(a, ""), h.join(b, "")
	if !ja.got || !jb.got || !jc.got || ja.r.Generation != 3 {
		t.Fatalf("generation 3 joins: %+v %+v %+v", ja.r, jb.r, jc.r)
	}
	// All three sync 4 s into generation 3 (7 s after generation 2's
	// join): nobody is removed.
	h.heartbeatUntil(4000, 500, 3, a, b, c)
	h.sync(b, 3, nil)
	h.sync(c, 3, nil)
	h.sync(a, 3, map[string][]byte{a: []byte("A"), b: []byte("B"), c: []byte("C")})
	h.eff(h.g.Persisted(h.now, h.lastSeq, 0))
	h.heartbeatUntil(3000, 500, 3, a, b, c)
	h.wantState(Stable)
	if h.g.NumMembers() != 3 || h.g.Generation() != 3 {
		t.Fatalf("generation %d with %d members, want 3 and 3", h.g.Generation(), h.g.NumMembers())
	}
}

func TestGroupPendingSyncStaticReplacement(t *testing.T) {
	h := newHarness(t)
	// Static members s1 (leader) and s2 at generation 2; s1 syncs and
	// the group is Stable; s2 has not synced.
	j1 := h.join("", "s1")
	id1 := j1.r.MemberID
	j2 := h.join("", "s2")
	j1 = h.join(id1, "s1")
	if !j1.got || !j2.got || j1.r.Generation != 2 {
		t.Fatalf("static joins: %+v %+v", j1.r, j2.r)
	}
	id2 := j2.r.MemberID
	h.sync(id1, 2, map[string][]byte{id1: []byte("1"), id2: []byte("2")})
	h.eff(h.g.Persisted(h.now, h.lastSeq, 0))
	h.wantState(Stable)
	// s2 restarts and rejoins with the same subscription and no member
	// id: Kafka's replaceStaticMember gives it a new id, keeps the
	// generation, and the new id inherits the pending sync.
	h.heartbeatUntil(1000, 500, 2, id1, id2)
	j2b := h.join("", "s2")
	if !j2b.got || j2b.r.Err != 0 || j2b.r.MemberID == id2 || j2b.r.Generation != 2 {
		t.Fatalf("static rejoin: %+v", j2b.r)
	}
	id2b := j2b.r.MemberID
	if _, ok := h.g.pendingSync[id2b]; !ok || len(h.g.pendingSync) != 1 {
		t.Fatalf("pending syncs %v, want only the new id %s", h.g.pendingSync, id2b)
	}
	// It never syncs either: removed at generation 2's sync deadline.
	h.heartbeatUntil(3500, 500, 2, id1, id2b)
	h.wantState(Stable)
	h.tick(500)
	h.wantState(PreparingRebalance)
	if _, ok := h.g.members[id2b]; ok || h.g.NumMembers() != 1 {
		t.Fatalf("members after the sync deadline: %d, s2 present %v", h.g.NumMembers(), ok)
	}
}
