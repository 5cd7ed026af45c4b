package share

import (
	"maps"
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
