package share

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

type catalog map[string]int32

func (c catalog) Partitions(t string) int32 { return c[t] }

func hb(t *testing.T, gs *Groups, now int64, member string, epoch int32, topics []string, cat Catalog) HeartbeatResult {
	t.Helper()
	r := gs.Heartbeat(now, HeartbeatRequest{Group: "g", MemberID: member, MemberEpoch: epoch, Topics: topics}, cat)
	if r.Err != 0 {
		t.Fatalf("heartbeat %s epoch %d: %v %s", member, epoch, kerr.ErrorForCode(r.Err), r.Msg)
	}
	return r
}

func TestGroupsJoinShareOnePartition(t *testing.T) {
	gs := NewGroups(GroupConfig{SessionTimeoutMs: 1000})
	cat := catalog{"t": 1}
	a := hb(t, gs, 0, "a", 0, []string{"t"}, cat)
	if !a.HasAssignment || !slices.Equal(a.Assignment["t"], []int32{0}) || a.MemberEpoch <= 0 {
		t.Fatalf("a joined: %+v", a)
	}
	b := hb(t, gs, 10, "b", 0, []string{"t"}, cat)
	if !slices.Equal(b.Assignment["t"], []int32{0}) {
		t.Fatalf("b joined: %+v, want partition 0 shared", b)
	}
	// a keeps partition 0: its assignment did not change, so its epoch
	// stands and it is sent nothing new.
	a2 := hb(t, gs, 20, "a", a.MemberEpoch, nil, cat)
	if a2.HasAssignment || a2.MemberEpoch != a.MemberEpoch {
		t.Fatalf("a's heartbeat: %+v", a2)
	}
	// A stale epoch is fenced.
	if r := gs.Heartbeat(30, HeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: a.MemberEpoch + 5}, cat); r.Err != kerr.FencedMemberEpoch.Code {
		t.Fatalf("fenced: %+v", r)
	}
	// b's session times out; a's does not (it heartbeated at 20).
	if d := gs.Expire(1010); !slices.Equal(d, []Departure{{"g", "b"}}) {
		t.Fatalf("expired %v, want b", d)
	}
	if !gs.IsMember("g", "a") || gs.IsMember("g", "b") {
		t.Fatal("membership after expiry")
	}
	l := hb(t, gs, 1020, "a", -1, nil, cat)
	if l.Left == nil || l.MemberEpoch != -1 || gs.IsMember("g", "a") {
		t.Fatalf("leave: %+v", l)
	}
}

// TestGroupsAdoptAfterCoordinatorMove: a coordinator that never saw a
// member takes it in at the epoch it presents when its heartbeat carries
// its subscription (what a client sends after a coordinator error), so the
// client keeps its share sessions; without the subscription, or for a
// member that left or timed out here within a session timeout, it answers
// UNKNOWN_MEMBER_ID as before.
func TestGroupsAdoptAfterCoordinatorMove(t *testing.T) {
	cat := catalog{"t": 3}
	old := NewGroups(GroupConfig{SessionTimeoutMs: 1000})
	a := hb(t, old, 0, "a", 0, []string{"t"}, cat)
	b := hb(t, old, 0, "b", 0, []string{"t"}, cat)
	a = hb(t, old, 0, "a", a.MemberEpoch, nil, cat)

	moved := NewGroups(GroupConfig{SessionTimeoutMs: 1000}) // the new coordinator
	if r := moved.Heartbeat(10, HeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: a.MemberEpoch}, cat); r.Err != kerr.UnknownMemberID.Code {
		t.Fatalf("a heartbeat without its subscription: %+v, want UNKNOWN_MEMBER_ID", r)
	}
	a2 := hb(t, moved, 20, "a", a.MemberEpoch, []string{"t"}, cat)
	if !a2.HasAssignment || a2.MemberEpoch <= a.MemberEpoch || len(a2.Assignment["t"]) != 3 {
		t.Fatalf("a adopted: %+v (its epoch was %d)", a2, a.MemberEpoch)
	}
	b2 := hb(t, moved, 30, "b", b.MemberEpoch, []string{"t"}, cat)
	if b2.MemberEpoch <= a2.MemberEpoch || len(b2.Assignment["t"]) == 0 {
		t.Fatalf("b adopted: %+v", b2)
	}
	// a is moved to the group's epoch on its next heartbeat, and shares.
	a3 := hb(t, moved, 40, "a", a2.MemberEpoch, nil, cat)
	if len(a3.Assignment["t"])+len(b2.Assignment["t"]) != 3 || a3.MemberEpoch != b2.MemberEpoch {
		t.Fatalf("after both: a %+v, b %+v", a3, b2)
	}
	// A member that leaves is not taken back at its old epoch.
	if l := hb(t, moved, 50, "a", -1, nil, cat); l.Left == nil {
		t.Fatalf("leave: %+v", l)
	}
	if r := moved.Heartbeat(60, HeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: a3.MemberEpoch, Topics: []string{"t"}}, cat); r.Err != kerr.UnknownMemberID.Code {
		t.Fatalf("a after leaving: %+v, want UNKNOWN_MEMBER_ID", r)
	}
	// Nor one that timed out, until a session timeout has passed.
	if d := moved.Expire(1030); !slices.Equal(d, []Departure{{"g", "b"}}) {
		t.Fatalf("expired %v, want b", d)
	}
	if r := moved.Heartbeat(1040, HeartbeatRequest{Group: "g", MemberID: "b", MemberEpoch: b2.MemberEpoch, Topics: []string{"t"}}, cat); r.Err != kerr.UnknownMemberID.Code {
		t.Fatalf("b after its session expired: %+v, want UNKNOWN_MEMBER_ID", r)
	}
	moved.Expire(2040)
	if len(moved.departed) != 0 {
		t.Fatalf("departures kept past a session timeout: %v", moved.departed)
	}
	// It rejoins at epoch 0 as always.
	if r := hb(t, moved, 2050, "b", 0, []string{"t"}, cat); len(r.Assignment["t"]) != 3 {
		t.Fatalf("b rejoined: %+v", r)
	}
}

// TestGroupsEpochMovesInOwnHeartbeat: a member's epoch moves only when it
// heartbeats, so one that missed two reassignments (two members joined
// between its heartbeats) is not fenced at the epoch it holds; until then
// ShareGroupDescribe shows it at that epoch, behind the assignment's.
func TestGroupsEpochMovesInOwnHeartbeat(t *testing.T) {
	gs := NewGroups(GroupConfig{SessionTimeoutMs: 1000})
	cat := catalog{"t": 6}
	a := hb(t, gs, 0, "a", 0, []string{"t"}, cat)
	b := hb(t, gs, 10, "b", 0, []string{"t"}, cat)
	c := hb(t, gs, 20, "c", 0, []string{"t"}, cat)
	g := gs.Group("g")
	if m := g.Members["a"]; m.Epoch != a.MemberEpoch || len(m.Assignment["t"]) != 6 || g.AssignmentEpoch <= a.MemberEpoch {
		t.Fatalf("a before its heartbeat: epoch %d assignment %v (told %d), the group's assignment epoch %d",
			m.Epoch, m.Assignment, a.MemberEpoch, g.AssignmentEpoch)
	}
	a2 := hb(t, gs, 30, "a", a.MemberEpoch, nil, cat)
	if !a2.HasAssignment || a2.MemberEpoch != g.AssignmentEpoch || len(a2.Assignment["t"]) != 2 {
		t.Fatalf("a after two joins: %+v (group assignment epoch %d)", a2, g.AssignmentEpoch)
	}
	// Its answer lost, it may still send the epoch before.
	if a3 := hb(t, gs, 40, "a", a.MemberEpoch, nil, cat); a3.MemberEpoch != a2.MemberEpoch || !a3.HasAssignment {
		t.Fatalf("a at its previous epoch: %+v", a3)
	}
	hb(t, gs, 50, "b", b.MemberEpoch, nil, cat)
	if c2 := hb(t, gs, 60, "c", c.MemberEpoch, nil, cat); c2.HasAssignment || c2.MemberEpoch != c.MemberEpoch {
		t.Fatalf("c, whose assignment did not change since it joined: %+v", c2)
	}
	n := 0
	for _, m := range g.Members {
		n += len(m.Assignment["t"])
		if m.Epoch > g.AssignmentEpoch || len(m.Assignment["t"]) != 2 {
			t.Fatalf("member %s: epoch %d assignment %v", m.ID, m.Epoch, m.Assignment)
		}
	}
	if n != 6 {
		t.Fatalf("%d partitions assigned, want 6", n)
	}
}

func TestGroupsSpreadPartitions(t *testing.T) {
	gs := NewGroups(GroupConfig{})
	cat := catalog{"t": 4}
	a := hb(t, gs, 0, "a", 0, []string{"t"}, cat)
	if !slices.Equal(a.Assignment["t"], []int32{0, 1, 2, 3}) {
		t.Fatalf("alone: %v", a.Assignment)
	}
	b := hb(t, gs, 0, "b", 0, []string{"t"}, cat)
	a2 := hb(t, gs, 0, "a", a.MemberEpoch, nil, cat)
	if !a2.HasAssignment || a2.MemberEpoch <= a.MemberEpoch {
		t.Fatalf("a not moved to the new epoch: %+v", a2)
	}
	got := map[int32]int{}
	for _, r := range []HeartbeatResult{a2, b} {
		for _, p := range r.Assignment["t"] {
			got[p]++
		}
	}
	if len(got) != 4 || slices.Max(slices.Collect(maps.Values(got))) != 1 {
		t.Fatalf("partitions spread %v (a %v, b %v)", got, a2.Assignment, b.Assignment)
	}
	// More members than partitions: each gets one, all are covered.
	cat["t"] = 1
	c := hb(t, gs, 0, "c", 0, []string{"t"}, cat)
	if !slices.Equal(c.Assignment["t"], []int32{0}) {
		t.Fatalf("c: %v", c.Assignment)
	}
}

func TestGroupsRequestChecks(t *testing.T) {
	gs := NewGroups(GroupConfig{})
	for _, tc := range []struct {
		req  HeartbeatRequest
		code int16
	}{
		{HeartbeatRequest{Group: "", MemberID: "a"}, kerr.InvalidGroupID.Code},
		{HeartbeatRequest{Group: "g", MemberID: ""}, kerr.InvalidRequest.Code},
		{HeartbeatRequest{Group: "g", MemberID: "a"}, kerr.InvalidRequest.Code}, // joins without topics
		{HeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: 3}, kerr.UnknownMemberID.Code},
		{HeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: -1}, kerr.UnknownMemberID.Code},
		{HeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: -2}, kerr.InvalidRequest.Code},
	} {
		if r := gs.Heartbeat(0, tc.req, catalog{}); r.Err != tc.code {
			t.Errorf("%+v: %d, want %d", tc.req, r.Err, tc.code)
		}
	}
}

func TestSessionsEpochs(t *testing.T) {
	var ss Sessions
	k := SessionKey{"g", "m"}
	if _, _, code := ss.Use(k, 1, 7); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("no session: %d", code)
	}
	s, old, code := ss.Use(k, 0, 7)
	if code != 0 || old != nil || s.Epoch != 1 {
		t.Fatalf("open: %v %v %d", s, old, code)
	}
	if _, _, code := ss.Use(k, 2, 7); code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("skipped epoch: %d", code)
	}
	if s2, _, code := ss.Use(k, 1, 7); code != 0 || s2 != s || s.Epoch != 2 {
		t.Fatalf("epoch 1: %v %d", s2, code)
	}
	if _, old, _ := ss.Use(k, 0, 8); old != s {
		t.Fatal("a new session does not replace the old one")
	}
	if s3, _, code := ss.Use(k, -1, 8); code != 0 || s3 == nil {
		t.Fatalf("close: %v %d", s3, code)
	}
	ss.MaxSessions = 1
	if _, _, code := ss.Use(SessionKey{"g", "other"}, 0, 9); code != kerr.ShareSessionLimitReached.Code {
		t.Fatalf("limit: %d", code)
	}
}

// TestGroupsRandomInvariants drives random joins, heartbeats, leaves,
// expiries and partition counts and checks after every step: every
// partition of a subscribed topic is assigned to a subscriber, nobody is
// assigned a topic it does not subscribe to or a partition that does not
// exist, and with no more subscribers than partitions no partition is
// shared.
func TestGroupsRandomInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 932))
	checked := 0
	defer func() {
		if checked < 100 {
			t.Errorf("only %d assignments checked", checked)
		}
	}()
	for run := range 50 {
		gs := NewGroups(GroupConfig{SessionTimeoutMs: 100})
		cat := catalog{"x": int32(rng.IntN(4)), "y": int32(1 + rng.IntN(5))}
		epochs := map[string]int32{}
		now := int64(0)
		for step := range 200 {
			now += int64(rng.IntN(30))
			id := fmt.Sprintf("m%d", rng.IntN(6))
			switch op := rng.IntN(10); {
			case op < 5: // heartbeat or join
				var topics []string
				if epochs[id] == 0 || rng.IntN(4) == 0 {
					topics = [][]string{{"x"}, {"y"}, {"x", "y"}}[rng.IntN(3)]
				}
				r := gs.Heartbeat(now, HeartbeatRequest{Group: "g", MemberID: id, MemberEpoch: epochs[id], Topics: topics}, cat)
				switch {
				case r.Err == 0:
					epochs[id] = r.MemberEpoch
				case r.Err == kerr.UnknownMemberID.Code && epochs[id] != 0:
					epochs[id] = 0 // its session expired
				default:
					// A member heartbeating at the epoch it was last told
					// is never fenced, however many reassignments it missed.
					t.Fatalf("run %d step %d: heartbeat %s: %d %s", run, step, id, r.Err, r.Msg)
				}
			case op < 6: // leave
				if epochs[id] != 0 {
					gs.Heartbeat(now, HeartbeatRequest{Group: "g", MemberID: id, MemberEpoch: -1}, cat)
					epochs[id] = 0
				}
			case op < 7:
				for _, d := range gs.Expire(now) {
					epochs[d.Member] = 0
				}
			case op < 8:
				cat["x"] = int32(rng.IntN(4))
			default: // everyone heartbeats, so every member is reassigned
				for m, e := range epochs {
					if e != 0 {
						switch r := gs.Heartbeat(now, HeartbeatRequest{Group: "g", MemberID: m, MemberEpoch: e}, cat); r.Err {
						case 0:
							epochs[m] = r.MemberEpoch
						case kerr.UnknownMemberID.Code:
							epochs[m] = 0
						default:
							t.Fatalf("run %d step %d: heartbeat %s at its epoch %d: %d %s", run, step, m, e, r.Err, r.Msg)
						}
					}
				}
				if checkAssignment(t, gs.Group("g"), cat, run, step) {
					checked++
				}
			}
		}
	}
}

// checkAssignment checks the group's assignment and reports whether it
// could (the group was reassigned since its last change).
func checkAssignment(t *testing.T, g *Group, cat catalog, run, step int) bool {
	t.Helper()
	if g == nil || g.AssignmentEpoch != g.Epoch || len(g.Members) == 0 {
		return false
	}
	owners := map[string]map[int32]int{}
	subs := map[string]int{}
	for id, m := range g.Members {
		for _, topic := range m.Topics {
			subs[topic]++
		}
		for topic, ps := range m.Assignment {
			if !slices.Contains(m.Topics, topic) {
				t.Fatalf("run %d step %d: %s assigned %s without subscribing", run, step, id, topic)
			}
			for _, p := range ps {
				if p < 0 || p >= cat[topic] {
					t.Fatalf("run %d step %d: %s assigned %s-%d of %d partitions", run, step, id, topic, p, cat[topic])
				}
				if owners[topic] == nil {
					owners[topic] = map[int32]int{}
				}
				owners[topic][p]++
			}
		}
	}
	for topic, n := range subs {
		for p := range cat[topic] {
			switch c := owners[topic][p]; {
			case c == 0:
				t.Fatalf("run %d step %d: %s-%d has no consumer among %d subscribers", run, step, topic, p, n)
			case c > 1 && int(cat[topic]) >= n:
				t.Fatalf("run %d step %d: %s-%d shared by %d with %d partitions for %d subscribers", run, step, topic, p, c, cat[topic], n)
			}
		}
	}
	return true
}

// Delete removes an empty group only; a new member of the same id starts
// a new group.
func TestGroupsDelete(t *testing.T) {
	gs := NewGroups(GroupConfig{SessionTimeoutMs: 1000})
	cat := catalog{"t": 2}
	if code := gs.Delete("g"); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete of an unknown group: %v", kerr.ErrorForCode(code))
	}
	a := hb(t, gs, 0, "a", 0, []string{"t"}, cat)
	if code := gs.Delete("g"); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with a member: %v", kerr.ErrorForCode(code))
	}
	if !gs.IsMember("g", "a") || gs.Group("g") == nil {
		t.Fatal("a refused delete changed the group")
	}
	hb(t, gs, 10, "a", a.MemberEpoch, nil, cat)
	hb(t, gs, 20, "a", -1, nil, cat)
	if g := gs.Group("g"); g == nil || g.State() != "Empty" {
		t.Fatalf("after the leave: %+v, want an Empty group", g)
	}
	if code := gs.Delete("g"); code != 0 {
		t.Fatalf("delete of the empty group: %v", kerr.ErrorForCode(code))
	}
	if gs.Group("g") != nil || slices.Contains(gs.Names(), "g") {
		t.Fatal("the deleted group is still known")
	}
	if code := gs.Delete("g"); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("second delete: %v", kerr.ErrorForCode(code))
	}
	// A member of the same id starts a new group: its epoch is the one
	// the first member of the old group got, not past the old group's.
	b := hb(t, gs, 30, "b", 0, []string{"t"}, cat)
	if g := gs.Group("g"); g == nil || b.MemberEpoch != a.MemberEpoch || g.Epoch != a.MemberEpoch || !slices.Equal(b.Assignment["t"], []int32{0, 1}) {
		t.Fatalf("new group after delete: %+v, member %+v", g, b)
	}
}
