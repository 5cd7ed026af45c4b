package group

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// harness drives one Group with a fake clock (ms) and records every answer.
type harness struct {
	t   *testing.T
	cfg Config
	g   *Group
	now int64
	ids int
	// persisted counts metadata writes asked for; lastSeq is the newest.
	persisted int
	lastSeq   uint64
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, now: 1_000_000}
	h.cfg = Config{MinSessionTimeoutMs: 100, InitialRebalanceDelayMs: -1}.withDefaults()
	h.cfg.NewMemberID = func(prefix string) string { h.ids++; return fmt.Sprintf("%s-%d", prefix, h.ids) }
	h.g = NewGroup("g", &h.cfg, h.now)
	return h
}

func (h *harness) eff(e Effects) {
	if e.Persist {
		h.persisted++
		h.lastSeq = e.PersistSeq
	}
}

// joinBox holds an answer that may arrive later.
type joinBox struct {
	got bool
	r   JoinResult
}

func (h *harness) join(member, instance string, protos ...string) *joinBox {
	if len(protos) == 0 {
		protos = []string{"range"}
	}
	req := JoinRequest{Group: "g", MemberID: member, InstanceID: instance, ClientID: "c", ProtocolType: "consumer",
		SessionTimeoutMs: 1000, RebalanceTimeoutMs: 5000, RequireKnownMemberID: true}
	for _, p := range protos {
		req.Protocols = append(req.Protocols, Protocol{Name: p, Metadata: []byte(member + p)})
	}
	b := &joinBox{}
	h.eff(h.g.Join(h.now, req, func(r JoinResult) {
		if b.got {
			h.t.Fatalf("join of %q answered twice", member)
		}
		b.got, b.r = true, r
	}))
	return b
}

// joinNew does the two-step KIP-394 join and returns the pending answer.
func (h *harness) joinNew(protos ...string) (string, *joinBox) {
	b := h.join("", "", protos...)
	if !b.got || b.r.Err != kerr.MemberIDRequired.Code {
		h.t.Fatalf("first join: %+v, want MEMBER_ID_REQUIRED", b.r)
	}
	return b.r.MemberID, h.join(b.r.MemberID, "", protos...)
}

type syncBox struct {
	got bool
	r   SyncResult
}

func (h *harness) sync(member string, gen int32, assign map[string][]byte) *syncBox {
	b := &syncBox{}
	h.eff(h.g.Sync(h.now, SyncRequest{Group: "g", MemberID: member, Generation: gen, Assignments: assign}, func(r SyncResult) {
		if b.got {
			h.t.Fatalf("sync of %q answered twice", member)
		}
		b.got, b.r = true, r
	}))
	return b
}

func (h *harness) tick(ms int64) {
	h.now += ms
	h.eff(h.g.Tick(h.now))
}

func (h *harness) wantState(s State) {
	h.t.Helper()
	if h.g.State() != s {
		h.t.Fatalf("state %v, want %v", h.g.State(), s)
	}
}

// stable brings members a and b to a Stable generation.
func (h *harness) twoStable() (a, b string) {
	a, ja := h.joinNew()
	if !ja.got || ja.r.Err != 0 || ja.r.LeaderID != a || len(ja.r.Members) != 1 {
		h.t.Fatalf("single join: %+v", ja.r)
	}
	b, jb := h.joinNew()
	if jb.got {
		h.t.Fatalf("second member answered before the first rejoined: %+v", jb.r)
	}
	h.wantState(PreparingRebalance)
	ja2 := h.join(a, "")
	if !ja2.got || !jb.got || ja2.r.Generation != 2 || jb.r.Generation != 2 {
		h.t.Fatalf("rebalance answers: %+v %+v", ja2.r, jb.r)
	}
	if len(ja2.r.Members) != 2 || len(jb.r.Members) != 0 || jb.r.LeaderID != a {
		h.t.Fatalf("leader %q members %d, follower members %d", ja2.r.LeaderID, len(ja2.r.Members), len(jb.r.Members))
	}
	h.wantState(CompletingRebalance)
	sb := h.sync(b, 2, nil)
	sa := h.sync(a, 2, map[string][]byte{a: []byte("A"), b: []byte("B")})
	if sa.got || sb.got {
		h.t.Fatal("sync answered before the assignment was written")
	}
	h.eff(h.g.Persisted(h.now, h.lastSeq, 0))
	if !sa.got || !sb.got || string(sa.r.Assignment) != "A" || string(sb.r.Assignment) != "B" {
		h.t.Fatalf("sync answers: %+v %+v", sa.r, sb.r)
	}
	h.wantState(Stable)
	return a, b
}

func TestGroupJoinSyncStable(t *testing.T) {
	h := newHarness(t)
	a, b := h.twoStable()
	if code := h.g.Heartbeat(h.now, a, "", 2); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	if code := h.g.Heartbeat(h.now, b, "", 1); code != kerr.IllegalGeneration.Code {
		t.Fatalf("stale heartbeat: %d", code)
	}
	if code := h.g.Heartbeat(h.now, "nobody", "", 2); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown heartbeat: %d", code)
	}
	// A late sync in Stable gets the stored assignment.
	if s := h.sync(b, 2, nil); !s.got || string(s.r.Assignment) != "B" {
		t.Fatalf("stable sync: %+v", s.r)
	}
}

func TestGroupSessionExpiryRebalances(t *testing.T) {
	h := newHarness(t)
	a, b := h.twoStable()
	// a heartbeats, b goes silent.
	for i := 0; i < 5; i++ {
		h.tick(300)
		if code := h.g.Heartbeat(h.now, a, "", 2); code != 0 && code != kerr.RebalanceInProgress.Code {
			t.Fatalf("heartbeat: %d", code)
		}
	}
	h.wantState(PreparingRebalance)
	if code := h.g.Heartbeat(h.now, a, "", 2); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat during rebalance: %d", code)
	}
	ja := h.join(a, "")
	if !ja.got || ja.r.Generation != 3 || len(ja.r.Members) != 1 {
		t.Fatalf("rejoin after expiry: %+v", ja.r)
	}
	if code := h.g.Heartbeat(h.now, b, "", 3); code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member heartbeat: %d", code)
	}
	if code := h.g.CheckCommit(h.now, 3, a, ""); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("commit during CompletingRebalance: %d", code)
	}
	h.sync(a, 3, nil)
	h.eff(h.g.Persisted(h.now, h.lastSeq, 0))
	h.wantState(Stable)
	if code := h.g.CheckCommit(h.now, 2, b, ""); code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member commit: %d", code)
	}
}

func TestGroupRebalanceTimeoutDropsLaggards(t *testing.T) {
	h := newHarness(t)
	a, b := h.twoStable()
	_ = b
	c, jc := h.joinNew() // a third member triggers a rebalance
	h.wantState(PreparingRebalance)
	ja := h.join(a, "")
	if ja.got || jc.got {
		t.Fatal("rebalance completed without b")
	}
	// b never rejoins; a and c keep heartbeating; after the rebalance
	// timeout (5 s) the group moves on without b.
	for i := 0; i < 30 && !ja.got; i++ {
		h.tick(200)
		h.g.Heartbeat(h.now, a, "", 2)
	}
	if !ja.got || !jc.got || ja.r.Generation != 3 || len(ja.r.Members) != 2 {
		t.Fatalf("after the rebalance timeout: %+v / %+v", ja.r, jc.r)
	}
	if _, ok := h.g.members[b]; ok {
		t.Fatal("b still a member")
	}
	_ = c
}

func TestGroupCommitRules(t *testing.T) {
	h := newHarness(t)
	if code := h.g.CheckCommit(h.now, -1, "", ""); code != 0 {
		t.Fatalf("simple commit to an empty group: %d", code)
	}
	a, _ := h.twoStable()
	cases := []struct {
		gen    int32
		member string
		inst   string
		want   int16
	}{
		{2, a, "", 0},
		{1, a, "", kerr.IllegalGeneration.Code},
		{2, "ghost", "", kerr.UnknownMemberID.Code},
		{-1, "", "", kerr.UnknownMemberID.Code}, // simple commit while the group has members
	}
	for _, c := range cases {
		if got := h.g.CheckCommit(h.now, c.gen, c.member, c.inst); got != c.want {
			t.Errorf("commit gen %d member %q: %d, want %d", c.gen, c.member, got, c.want)
		}
	}
	// During CompletingRebalance commits are refused.
	h.g.Leave(h.now, a, "")
	h.wantState(PreparingRebalance)
}

func TestGroupLeaveAndEmpty(t *testing.T) {
	h := newHarness(t)
	a, b := h.twoStable()
	code, eff := h.g.Leave(h.now, a, "")
	h.eff(eff)
	if code != 0 {
		t.Fatalf("leave: %d", code)
	}
	jb := h.join(b, "")
	if !jb.got || jb.r.Generation != 3 || jb.r.LeaderID != b {
		t.Fatalf("after leader left: %+v", jb.r)
	}
	before := h.persisted
	code, eff = h.g.Leave(h.now, b, "")
	h.eff(eff)
	if code != 0 {
		t.Fatalf("leave: %d", code)
	}
	h.wantState(Empty)
	if h.persisted == before {
		t.Fatal("becoming Empty wrote no metadata")
	}
	if h.g.Generation() != 4 {
		t.Fatalf("generation %d, want 4", h.g.Generation())
	}
	// Kafka keeps the protocol type of an Empty group: DescribeGroups
	// shows a consumer group that everyone left as "consumer".
	if pt := h.g.ProtocolType(); pt != "consumer" {
		t.Fatalf("Empty group's protocol type %q, want consumer", pt)
	}
	if code, _ := h.g.Leave(h.now, b, ""); code != kerr.UnknownMemberID.Code {
		t.Fatalf("second leave: %d", code)
	}
	// An Empty group takes any protocol type: the first member's.
	req := JoinRequest{Group: "g", ClientID: "c", ProtocolType: "connect", SessionTimeoutMs: 1000, RebalanceTimeoutMs: 5000,
		Protocols: []Protocol{{Name: "sessioned", Metadata: []byte("w")}}}
	h.eff(h.g.Join(h.now, req, func(JoinResult) {}))
	if pt := h.g.ProtocolType(); pt != "connect" {
		t.Fatalf("protocol type %q after a connect worker joined the Empty group, want connect", pt)
	}
}

func TestGroupStaticMemberReplaced(t *testing.T) {
	h := newHarness(t)
	j := h.join("", "inst-1")
	if !j.got || j.r.Err != 0 || j.r.Generation != 1 {
		t.Fatalf("static join: %+v", j.r)
	}
	old := j.r.MemberID
	s := h.sync(old, 1, map[string][]byte{old: []byte("P")})
	h.eff(h.g.Persisted(h.now, h.lastSeq, 0))
	if !s.got || string(s.r.Assignment) != "P" {
		t.Fatalf("sync: %+v", s.r)
	}
	// The instance restarts: same generation, no rebalance, old id fenced.
	j2 := h.join("", "inst-1")
	if !j2.got || j2.r.Err != 0 || j2.r.Generation != 1 || j2.r.MemberID == old || !j2.r.SkipAssignment {
		t.Fatalf("static rejoin: %+v", j2.r)
	}
	h.wantState(Stable)
	if code := h.g.Heartbeat(h.now, old, "inst-1", 1); code != kerr.FencedInstanceID.Code {
		t.Fatalf("zombie heartbeat: %d", code)
	}
	if code := h.g.CheckCommit(h.now, 1, old, "inst-1"); code != kerr.FencedInstanceID.Code {
		t.Fatalf("zombie commit: %d", code)
	}
	if s := h.sync(j2.r.MemberID, 1, nil); !s.got || string(s.r.Assignment) != "P" {
		t.Fatalf("replacement sync: %+v", s.r)
	}
	// Static leave by instance id.
	if code, _ := h.g.Leave(h.now, "", "inst-1"); code != 0 {
		t.Fatalf("static leave: %d", code)
	}
}

func TestGroupProtocolSelection(t *testing.T) {
	h := newHarness(t)
	a, ja := h.joinNew("sticky", "range")
	_ = ja
	b, jb := h.joinNew("range", "sticky")
	_ = b
	c, jc := h.joinNew("range")
	_ = c
	ja = h.join(a, "", "sticky", "range")
	if !ja.got || !jb.got || !jc.got {
		t.Fatal("rebalance did not complete")
	}
	if ja.r.Protocol != "range" {
		t.Fatalf("protocol %q, want range (the only common one)", ja.r.Protocol)
	}
	// A member with no common protocol is refused.
	bad := h.join("", "", "roundrobin")
	if !bad.got || bad.r.Err != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("inconsistent join: %+v", bad.r)
	}
}

func TestGroupSessionTimeoutBounds(t *testing.T) {
	h := newHarness(t)
	var r JoinResult
	h.g.Join(h.now, JoinRequest{Group: "g", ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}},
		SessionTimeoutMs: 10}, func(x JoinResult) { r = x })
	if r.Err != kerr.InvalidSessionTimeout.Code {
		t.Fatalf("session timeout below the minimum: %+v", r)
	}
}

func TestGroupPendingMemberExpires(t *testing.T) {
	h := newHarness(t)
	b := h.join("", "")
	id := b.r.MemberID
	h.tick(2000) // past the 1 s session timeout
	if _, ok := h.g.pending[id]; ok {
		t.Fatal("pending member survived its session timeout")
	}
	if j := h.join(id, ""); !j.got || j.r.Err != kerr.UnknownMemberID.Code {
		t.Fatalf("join with the expired id: %+v", j.r)
	}
}

func TestGroupInitialRebalanceDelay(t *testing.T) {
	h := newHarness(t)
	h.cfg.InitialRebalanceDelayMs = 1000
	_, ja := h.joinNew()
	if ja.got {
		t.Fatal("answered before the initial delay")
	}
	h.tick(500)
	_, jb := h.joinNew() // extends the delay to now+1000
	h.tick(700)
	if ja.got || jb.got {
		t.Fatal("answered before the extended delay")
	}
	h.tick(400)
	if !ja.got || !jb.got || ja.r.Generation != 1 {
		t.Fatalf("after the delay: %+v %+v", ja.r, jb.r)
	}
}

func TestGroupFailedAssignmentWriteRebalances(t *testing.T) {
	h := newHarness(t)
	a, j := h.joinNew()
	_ = j
	s := h.sync(a, 1, map[string][]byte{a: []byte("X")})
	h.eff(h.g.Persisted(h.now, h.lastSeq, kerr.CoordinatorNotAvailable.Code))
	if !s.got || s.r.Err != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("sync after a failed write: %+v", s.r)
	}
	h.wantState(PreparingRebalance)
}

func TestPartitionForMatchesKafka(t *testing.T) {
	// Values from Kafka: Utils.abs("my-group".hashCode()) % 50 etc.
	// Java: "my-group".hashCode() = 1,  computed below by the definition.
	javaHash := func(s string) int32 {
		var h int32
		for _, r := range s { // ASCII here
			h = 31*h + int32(r)
		}
		return h
	}
	for _, g := range []string{"my-group", "g", "console-consumer-12345", "a-much-longer-group-name-with-overflow"} {
		want := (javaHash(g) & 0x7fffffff) % 50
		if got := PartitionFor(g, 50); got != want {
			t.Errorf("%q: %d, want %d", g, got, want)
		}
	}
	// Known value from Kafka: "test-group" -> hashCode -1,204,781,587? Check
	// one fixed value so a change in the hash is caught.
	if got := PartitionFor("test", 50); got != int32((3556498&0x7fffffff)%50) {
		t.Errorf("\"test\": %d", got)
	}
	// Non-ASCII goes through UTF-16 code units.
	if got, want := PartitionFor("é", 50), int32(0xe9%50); got != want {
		t.Errorf("é: %d, want %d", got, want)
	}
}

func TestGroupMaxSize(t *testing.T) {
	h := newHarness(t)
	h.cfg.MaxSize = 1
	a, ja := h.joinNew()
	if !ja.got || ja.r.Err != 0 {
		t.Fatalf("first member: %+v", ja.r)
	}
	if j := h.join("", ""); !j.got || j.r.Err != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("second member of a full group: %+v", j.r)
	}
	_ = a
}

func TestGroupOffsetsExpireAfterEmpty(t *testing.T) {
	h := newHarness(t)
	a, _ := h.joinNew()
	h.g.SetOffset(TopicPartition{"t", 0}, Offset{Offset: 1, CommitTimestampMs: h.now})
	h.now += 10_000
	if got := h.g.ExpiredOffsets(h.now, 5_000); len(got) != 0 {
		t.Fatalf("offsets of a live group expired: %v", got)
	}
	h.g.Leave(h.now, a, "")
	h.wantState(Empty)
	if got := h.g.ExpiredOffsets(h.now+4_000, 5_000); len(got) != 0 {
		t.Fatalf("expired before the group was empty for the retention: %v", got)
	}
	if got := h.g.ExpiredOffsets(h.now+5_000, 5_000); len(got) != 1 {
		t.Fatalf("not expired after the retention: %v", got)
	}
}
