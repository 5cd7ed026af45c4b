package group

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a classic group's state, named as Kafka names it on the wire
// (DescribeGroups, ListGroups).
type State int8

const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// ParseState returns the state named s (case-insensitive, as ListGroups'
// state filter); ok is false for unknown names.
func ParseState(s string) (State, bool) {
	for i, n := range stateNames {
		if equalFold(n, s) {
			return State(i), true
		}
	}
	return Dead, false
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// Protocol is one (name, metadata) pair a member supports, in its order of
// preference.
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a JoinGroup request as the state machine needs it.
type JoinRequest struct {
	Group              string
	MemberID           string // "" on the first join
	InstanceID         string // group.instance.id, "" for dynamic members
	ClientID           string
	ClientHost         string
	ProtocolType       string
	Protocols          []Protocol
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	// RequireKnownMemberID: JoinGroup v4+ (KIP-394) answers a first join
	// with MEMBER_ID_REQUIRED and the new member id, which the client sends
	// back in a second join.
	RequireKnownMemberID bool
}

// JoinMember is one member listed in the leader's JoinGroup response.
type JoinMember struct {
	MemberID   string
	InstanceID string
	Metadata   []byte
}

// JoinResult is the JoinGroup response.
type JoinResult struct {
	Err          int16
	Generation   int32
	ProtocolType string
	Protocol     string
	LeaderID     string
	MemberID     string
	Members      []JoinMember // the leader only
	// SkipAssignment: a static leader rejoined a Stable group; it must not
	// compute a new assignment (KIP-814).
	SkipAssignment bool
}

// memberIDPrefix is what Kafka puts before the UUID of a new member id:
// the group.instance.id for static members (clients recognise their
// leadership by it), the client id otherwise.
func memberIDPrefix(req JoinRequest) string {
	if req.InstanceID != "" {
		return req.InstanceID
	}
	return req.ClientID
}

// SyncRequest is a SyncGroup request.
type SyncRequest struct {
	Group        string
	MemberID     string
	InstanceID   string
	Generation   int32
	ProtocolType *string // v5+
	Protocol     *string // v5+
	Assignments  map[string][]byte
}

// SyncResult is the SyncGroup response.
type SyncResult struct {
	Err          int16
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// Member is one member of a classic group.
type Member struct {
	ID                 string
	InstanceID         string
	ClientID           string
	ClientHost         string
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	Protocols          []Protocol
	Assignment         []byte

	deadlineMs int64 // session expiry (heartbeat deadline)
	isNew      bool  // joined during the current rebalance, not yet in a generation
	joinDone   func(JoinResult)
	syncDone   func(SyncResult)
}

// metadataFor returns the member's metadata for protocol name.
func (m *Member) metadataFor(name string) []byte {
	for _, p := range m.Protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

func (m *Member) supports(name string) bool {
	for _, p := range m.Protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}

func sameProtocols(a, b []Protocol) bool {
	return slices.EqualFunc(a, b, func(x, y Protocol) bool {
		return x.Name == y.Name && string(x.Metadata) == string(y.Metadata)
	})
}

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Offset is one committed offset.
type Offset struct {
	Offset            int64
	LeaderEpoch       int32 // -1 if unknown
	Metadata          string
	CommitTimestampMs int64
}

// Effects tell the caller (the Coordinator) what I/O a transition needs.
type Effects struct {
	// Persist asks for the group's metadata record (Group.MetadataValue, or
	// a tombstone if the group is Dead) to be written; when the write
	// finished, call Persisted with PersistSeq.
	Persist    bool
	PersistSeq uint64
}

func (e *Effects) merge(o Effects) {
	if o.Persist {
		e.Persist, e.PersistSeq = true, o.PersistSeq
	}
}

// Group is one classic consumer group: a pure state machine. It does no I/O
// and reads no clock: every method takes the current time (Unix ms) and
// returns the Effects the caller must carry out. Delayed answers (JoinGroup
// waits for the rebalance; SyncGroup waits for the leader's assignment and
// its write) are callbacks the group calls later from one of its methods,
// under whatever lock the caller holds; they must not block or call back
// into the group. A Group is not safe for concurrent use.
type Group struct {
	ID  string
	cfg *Config

	state            State
	protocolType     string
	protocol         string
	generation       int32
	leader           string
	stateTimestampMs int64

	members   map[string]*Member
	order     []string          // member ids in join order (leader choice, listings)
	instances map[string]string // instance id -> member id
	pending   map[string]int64  // member id handed out with MEMBER_ID_REQUIRED -> expiry

	// Pending syncs (Kafka's pendingSyncMembers): the members of the
	// current generation that got their JoinGroup answer and have not sent
	// SyncGroup yet. Those still pending at syncDeadlineMs (the rebalance
	// timeout after the join completed) are removed and the group
	// rebalances; empty outside CompletingRebalance and Stable.
	pendingSync    map[string]struct{}
	syncDeadlineMs int64

	// Rebalance bookkeeping (PreparingRebalance).
	rebalanceDeadlineMs int64
	initialDelay        bool  // the delayed first rebalance of an Empty group
	initialLimitMs      int64 // the initial delay may not extend past this

	// Assignment write (CompletingRebalance -> Stable).
	persistSeq     uint64 // last Effects.PersistSeq handed out
	syncPersistSeq uint64 // the write that completes the sync; 0 if none

	offsets map[TopicPartition]Offset
	// txnOffsets are the offsets transactions staged with TxnOffsetCommit,
	// by producer id, until their marker (txnoffsets.go); nil if none.
	txnOffsets map[int64]map[TopicPartition]txnOffset

	inflight int // Coordinator: log writes of this group not yet finished

	kind groupKind     // classic or KIP-848 consumer (consumer.go)
	cg   consumerState // consumer groups only
}

// NewGroup returns an Empty group with no offsets.
func NewGroup(id string, cfg *Config, nowMs int64) *Group {
	return &Group{
		ID: id, cfg: cfg, state: Empty, stateTimestampMs: nowMs,
		members: map[string]*Member{}, instances: map[string]string{},
		pending: map[string]int64{}, offsets: map[TopicPartition]Offset{},
		pendingSync: map[string]struct{}{},
	}
}

// State returns the group's state.
func (g *Group) State() State { return g.state }

// Generation returns the current generation id.
func (g *Group) Generation() int32 { return g.generation }

// ProtocolType returns the protocol type ("consumer" for consumer groups).
func (g *Group) ProtocolType() string { return g.protocolType }

// Protocol returns the selected protocol (assignor), "" unless a
// generation with members is in place.
func (g *Group) Protocol() string { return g.protocol }

// Leader returns the leader's member id.
func (g *Group) Leader() string { return g.leader }

// NumMembers returns the number of members (not counting pending ones).
func (g *Group) NumMembers() int { return len(g.members) }

// Members returns the members in join order. The caller must not modify them.
func (g *Group) Members() []*Member {
	out := make([]*Member, 0, len(g.order))
	for _, id := range g.order {
		out = append(out, g.members[id])
	}
	return out
}

// Offsets returns the committed offsets (the caller must not modify the map).
func (g *Group) Offsets() map[TopicPartition]Offset { return g.offsets }

func (g *Group) transition(s State, nowMs int64) {
	g.state = s
	g.stateTimestampMs = nowMs
}

func (g *Group) nextPersist() Effects {
	g.persistSeq++
	return Effects{Persist: true, PersistSeq: g.persistSeq}
}

// Join handles a JoinGroup. done is called exactly once, now or from a later
// call (when the rebalance completes, or the member is fenced or removed).
func (g *Group) Join(nowMs int64, req JoinRequest, done func(JoinResult)) Effects {
	fail := func(code int16) Effects {
		done(JoinResult{Err: code, MemberID: req.MemberID, Generation: -1})
		return Effects{}
	}
	if g.state == Dead {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	if g.kind == kindConsumer {
		if !g.IsEmpty() {
			return fail(kerr.InconsistentGroupProtocol.Code)
		}
		g.toClassic()
	}
	if req.SessionTimeoutMs < g.cfg.MinSessionTimeoutMs || req.SessionTimeoutMs > g.cfg.MaxSessionTimeoutMs {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	if req.RebalanceTimeoutMs <= 0 {
		req.RebalanceTimeoutMs = req.SessionTimeoutMs // JoinGroup v0
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 || !g.supportsProtocols(req.ProtocolType, req.Protocols, req.MemberID) {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	if req.MemberID == "" {
		return g.joinUnknown(nowMs, req, done)
	}
	return g.joinKnown(nowMs, req, done)
}

// supportsProtocols is Kafka's GroupMetadata.supportsProtocols: an empty
// group takes anything; otherwise the type must match and the member must
// share a protocol with every other member.
func (g *Group) supportsProtocols(ptype string, protos []Protocol, self string) bool {
	others := 0
	for _, m := range g.members {
		if m.ID != self {
			others++
		}
	}
	if others == 0 {
		return true
	}
	if ptype != g.protocolType {
		return false
	}
	for _, p := range protos {
		all := true
		for _, m := range g.members {
			if m.ID != self && !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func (g *Group) full() bool {
	return g.cfg.MaxSize > 0 && len(g.members)+len(g.pending) >= int(g.cfg.MaxSize)
}

func (g *Group) joinUnknown(nowMs int64, req JoinRequest, done func(JoinResult)) Effects {
	if req.InstanceID != "" {
		if old, ok := g.instances[req.InstanceID]; ok {
			return g.replaceStatic(nowMs, old, req, done)
		}
	}
	if g.full() {
		done(JoinResult{Err: kerr.GroupMaxSizeReached.Code, Generation: -1})
		return Effects{}
	}
	id := g.cfg.newMemberID(memberIDPrefix(req))
	if req.RequireKnownMemberID && req.InstanceID == "" {
		// KIP-394: hand out the id; the member must come back with it
		// before its session timeout.
		g.pending[id] = nowMs + int64(req.SessionTimeoutMs)
		done(JoinResult{Err: kerr.MemberIDRequired.Code, MemberID: id, Generation: -1})
		return Effects{}
	}
	return g.addMember(nowMs, id, req, done)
}

func (g *Group) joinKnown(nowMs int64, req JoinRequest, done func(JoinResult)) Effects {
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		if g.full() {
			done(JoinResult{Err: kerr.GroupMaxSizeReached.Code, MemberID: req.MemberID, Generation: -1})
			return Effects{}
		}
		return g.addMember(nowMs, req.MemberID, req, done)
	}
	m, ok := g.members[req.MemberID]
	if code := g.checkInstance(req.MemberID, req.InstanceID); code != 0 {
		done(JoinResult{Err: code, MemberID: req.MemberID, Generation: -1})
		return Effects{}
	}
	if !ok {
		done(JoinResult{Err: kerr.UnknownMemberID.Code, MemberID: req.MemberID, Generation: -1})
		return Effects{}
	}
	switch g.state {
	case PreparingRebalance:
		g.updateMember(nowMs, m, req, done)
		return g.maybeCompleteJoin(nowMs)
	case CompletingRebalance:
		if sameProtocols(m.Protocols, req.Protocols) {
			// The member missed our answer; send it again.
			done(g.joinResult(m))
			return Effects{}
		}
		g.updateMember(nowMs, m, req, done)
		return g.prepareRebalance(nowMs)
	case Stable:
		if m.ID == g.leader || !sameProtocols(m.Protocols, req.Protocols) {
			g.updateMember(nowMs, m, req, done)
			return g.prepareRebalance(nowMs)
		}
		m.deadlineMs = nowMs + int64(m.SessionTimeoutMs)
		done(g.joinResult(m))
		return Effects{}
	default: // Empty cannot have members
		done(JoinResult{Err: kerr.UnknownMemberID.Code, MemberID: req.MemberID, Generation: -1})
		return Effects{}
	}
}

// checkInstance returns FENCED_INSTANCE_ID when instanceID belongs to a
// different member id than memberID (a zombie of a replaced static member).
func (g *Group) checkInstance(memberID, instanceID string) int16 {
	if instanceID == "" {
		return 0
	}
	if cur, ok := g.instances[instanceID]; ok && cur != memberID {
		return kerr.FencedInstanceID.Code
	}
	return 0
}

func (g *Group) addMember(nowMs int64, id string, req JoinRequest, done func(JoinResult)) Effects {
	m := &Member{ID: id, InstanceID: req.InstanceID, isNew: true}
	g.members[id] = m
	g.order = append(g.order, id)
	if req.InstanceID != "" {
		g.instances[req.InstanceID] = id
	}
	if len(g.members) == 1 {
		g.protocolType = req.ProtocolType // the first member's, as in Kafka (an Empty group takes any)
	}
	g.updateMember(nowMs, m, req, done)
	// A new member that never completes its join is dropped after this
	// long (Kafka's NewMemberJoinTimeoutMs).
	m.deadlineMs = nowMs + int64(g.cfg.NewMemberJoinTimeoutMs)
	switch g.state {
	case PreparingRebalance:
		if g.initialDelay {
			g.rebalanceDeadlineMs = min(nowMs+int64(g.cfg.InitialRebalanceDelayMs), g.initialLimitMs)
		}
		return g.maybeCompleteJoin(nowMs)
	default:
		return g.prepareRebalance(nowMs)
	}
}

func (g *Group) updateMember(nowMs int64, m *Member, req JoinRequest, done func(JoinResult)) {
	if m.joinDone != nil {
		// A second join from the same member replaces the first; the first
		// gets the answer Kafka gives a superseded request.
		m.joinDone(JoinResult{Err: kerr.UnknownMemberID.Code, MemberID: m.ID, Generation: -1})
	}
	m.ClientID, m.ClientHost = req.ClientID, req.ClientHost
	m.SessionTimeoutMs, m.RebalanceTimeoutMs = req.SessionTimeoutMs, req.RebalanceTimeoutMs
	m.Protocols = cloneProtocols(req.Protocols)
	m.joinDone = done
	m.deadlineMs = nowMs + int64(m.SessionTimeoutMs)
}

func cloneProtocols(ps []Protocol) []Protocol {
	out := make([]Protocol, len(ps))
	for i, p := range ps {
		out[i] = Protocol{Name: p.Name, Metadata: slices.Clone(p.Metadata)}
	}
	return out
}

// replaceStatic handles a join with no member id from a known
// group.instance.id (KIP-345): the old member id is fenced and replaced.
func (g *Group) replaceStatic(nowMs int64, oldID string, req JoinRequest, done func(JoinResult)) Effects {
	old := g.members[oldID]
	newID := g.cfg.newMemberID(memberIDPrefix(req))
	if old.joinDone != nil {
		old.joinDone(JoinResult{Err: kerr.FencedInstanceID.Code, MemberID: oldID, Generation: -1})
		old.joinDone = nil
	}
	if old.syncDone != nil {
		old.syncDone(SyncResult{Err: kerr.FencedInstanceID.Code})
		old.syncDone = nil
	}
	delete(g.members, oldID)
	old.ID = newID
	g.members[newID] = old
	g.order[slices.Index(g.order, oldID)] = newID
	g.instances[req.InstanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if _, ok := g.pendingSync[oldID]; ok {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = struct{}{}
	}
	switch g.state {
	case Stable:
		if sameProtocols(old.Protocols, req.Protocols) {
			// Same subscription: keep the generation and the assignment;
			// the member syncs and gets its old partitions back.
			old.ClientID, old.ClientHost = req.ClientID, req.ClientHost
			old.SessionTimeoutMs, old.RebalanceTimeoutMs = req.SessionTimeoutMs, req.RebalanceTimeoutMs
			old.deadlineMs = nowMs + int64(old.SessionTimeoutMs)
			// KIP-814: a returning leader learns it leads but must
			// not assign (SkipAssignment; JoinGroup v9+).
			r := g.joinResult(old)
			r.SkipAssignment = old.ID == g.leader
			done(r)
			return g.nextPersist()
		}
		g.updateMember(nowMs, old, req, done)
		return g.prepareRebalance(nowMs)
	case PreparingRebalance:
		g.updateMember(nowMs, old, req, done)
		return g.maybeCompleteJoin(nowMs)
	default: // CompletingRebalance
		g.updateMember(nowMs, old, req, done)
		return g.prepareRebalance(nowMs)
	}
}

func (g *Group) joinResult(m *Member) JoinResult {
	r := JoinResult{
		Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol,
		LeaderID: g.leader, MemberID: m.ID,
	}
	if m.ID == g.leader {
		r.Members = make([]JoinMember, 0, len(g.order))
		for _, id := range g.order {
			o := g.members[id]
			r.Members = append(r.Members, JoinMember{MemberID: o.ID, InstanceID: o.InstanceID, Metadata: o.metadataFor(g.protocol)})
		}
	}
	return r
}

// prepareRebalance moves the group to PreparingRebalance: pending syncs are
// answered REBALANCE_IN_PROGRESS and members must rejoin before the
// rebalance timeout.
func (g *Group) prepareRebalance(nowMs int64) Effects {
	if g.state == CompletingRebalance {
		for _, m := range g.members {
			m.Assignment = nil
			if m.syncDone != nil {
				m.syncDone(SyncResult{Err: kerr.RebalanceInProgress.Code})
				m.syncDone = nil
			}
		}
	}
	g.syncPersistSeq = 0
	g.clearPendingSync()
	if g.state == Empty {
		g.initialDelay = true
		var maxRebalance int32
		for _, m := range g.members {
			maxRebalance = max(maxRebalance, m.RebalanceTimeoutMs)
		}
		g.initialLimitMs = nowMs + int64(maxRebalance)
		g.rebalanceDeadlineMs = min(nowMs+int64(g.cfg.InitialRebalanceDelayMs), g.initialLimitMs)
	} else {
		g.initialDelay = false
		g.rebalanceDeadlineMs = nowMs + int64(g.maxRebalanceTimeout())
	}
	g.transition(PreparingRebalance, nowMs)
	return g.maybeCompleteJoin(nowMs)
}

func (g *Group) maxRebalanceTimeout() int32 {
	var t int32
	for _, m := range g.members {
		t = max(t, m.RebalanceTimeoutMs)
	}
	return t
}

// maybeCompleteJoin completes the rebalance when every member rejoined and
// no KIP-394 pending member is outstanding (never during the initial delay),
// or when the rebalance deadline passed.
func (g *Group) maybeCompleteJoin(nowMs int64) Effects {
	if g.state != PreparingRebalance {
		return Effects{}
	}
	if nowMs >= g.rebalanceDeadlineMs || (!g.initialDelay && g.allJoined()) {
		return g.completeJoin(nowMs)
	}
	return Effects{}
}

func (g *Group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinDone == nil {
			return false
		}
	}
	return true
}

// completeJoin ends PreparingRebalance: members that did not rejoin are
// removed, and the group either becomes Empty (next generation, no members)
// or CompletingRebalance with a new generation, protocol and leader, and
// every member gets its JoinGroup answer.
func (g *Group) completeJoin(nowMs int64) Effects {
	for _, id := range slices.Clone(g.order) {
		if m := g.members[id]; m.joinDone == nil {
			g.removeMember(id)
		}
	}
	g.initialDelay = false
	g.generation++
	g.clearPendingSync()
	if len(g.members) == 0 {
		// The protocol type stays (Kafka's initNextGeneration): an Empty
		// group that was a consumer group is described as one.
		g.protocol, g.leader = "", ""
		g.transition(Empty, nowMs)
		return g.nextPersist()
	}
	g.protocol = g.selectProtocol()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.order[0]
	}
	g.transition(CompletingRebalance, nowMs)
	for _, id := range g.order {
		m := g.members[id]
		m.isNew = false
		m.deadlineMs = nowMs + int64(m.SessionTimeoutMs)
		done := m.joinDone
		m.joinDone = nil
		done(g.joinResult(m))
		g.pendingSync[id] = struct{}{}
	}
	// Every member now has the rebalance timeout to send its SyncGroup
	// (Kafka's schedulePendingSync).
	g.syncDeadlineMs = nowMs + int64(g.maxRebalanceTimeout())
	return Effects{}
}

func (g *Group) clearPendingSync() {
	clear(g.pendingSync)
	g.syncDeadlineMs = 0
}

// expirePendingSync is Kafka's expirePendingSync: members of the current
// generation that have not sent SyncGroup within the rebalance timeout
// after the join completed are removed, and the group rebalances without
// them. Their late SyncGroup or Heartbeat gets UNKNOWN_MEMBER_ID; the
// others are told REBALANCE_IN_PROGRESS and rejoin.
func (g *Group) expirePendingSync(nowMs int64) Effects {
	if len(g.pendingSync) == 0 || nowMs < g.syncDeadlineMs ||
		(g.state != CompletingRebalance && g.state != Stable) {
		return Effects{}
	}
	for _, id := range slices.Clone(g.order) {
		if _, ok := g.pendingSync[id]; ok {
			g.removeMember(id)
		}
	}
	return g.prepareRebalance(nowMs)
}

// selectProtocol is Kafka's vote: among the protocols every member
// supports, each member votes for the first one in its preference order;
// the most votes win, ties go to the earlier in the first member's order.
func (g *Group) selectProtocol() string {
	first := g.members[g.order[0]]
	var candidates []string
	for _, p := range first.Protocols {
		all := true
		for _, m := range g.members {
			if !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	if len(candidates) == 0 {
		return first.Protocols[0].Name // unreachable: Join checks support
	}
	votes := make([]int, len(candidates))
	for _, m := range g.members {
		for _, p := range m.Protocols {
			if i := slices.Index(candidates, p.Name); i >= 0 {
				votes[i]++
				break
			}
		}
	}
	best := 0
	for i := range votes {
		if votes[i] > votes[best] {
			best = i
		}
	}
	return candidates[best]
}

func (g *Group) removeMember(id string) {
	m, ok := g.members[id]
	if !ok {
		return
	}
	delete(g.members, id)
	delete(g.pendingSync, id)
	g.order = slices.DeleteFunc(g.order, func(s string) bool { return s == id })
	if m.InstanceID != "" && g.instances[m.InstanceID] == id {
		delete(g.instances, m.InstanceID)
	}
	if m.joinDone != nil {
		m.joinDone(JoinResult{Err: kerr.UnknownMemberID.Code, MemberID: id, Generation: -1})
		m.joinDone = nil
	}
	if m.syncDone != nil {
		m.syncDone(SyncResult{Err: kerr.UnknownMemberID.Code})
		m.syncDone = nil
	}
	if g.leader == id {
		g.leader = ""
	}
}

// Sync handles a SyncGroup; done is called exactly once.
func (g *Group) Sync(nowMs int64, req SyncRequest, done func(SyncResult)) Effects {
	m, ok := g.members[req.MemberID]
	switch {
	case g.state == Dead:
		done(SyncResult{Err: kerr.CoordinatorNotAvailable.Code})
		return Effects{}
	case g.checkInstance(req.MemberID, req.InstanceID) != 0:
		done(SyncResult{Err: kerr.FencedInstanceID.Code})
		return Effects{}
	case !ok:
		done(SyncResult{Err: kerr.UnknownMemberID.Code})
		return Effects{}
	case req.Generation != g.generation:
		done(SyncResult{Err: kerr.IllegalGeneration.Code})
		return Effects{}
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Protocol != nil && *req.Protocol != g.protocol:
		done(SyncResult{Err: kerr.InconsistentGroupProtocol.Code})
		return Effects{}
	}
	switch g.state {
	case PreparingRebalance:
		done(SyncResult{Err: kerr.RebalanceInProgress.Code})
		return Effects{}
	case Stable:
		g.syncReceived(m.ID)
		m.deadlineMs = nowMs + int64(m.SessionTimeoutMs)
		done(SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.Assignment})
		return Effects{}
	case CompletingRebalance:
		if m.syncDone != nil {
			m.syncDone(SyncResult{Err: kerr.UnknownMemberID.Code})
		}
		m.syncDone = done
		g.syncReceived(m.ID)
		m.deadlineMs = nowMs + int64(m.SessionTimeoutMs)
		if m.ID != g.leader || g.syncPersistSeq != 0 {
			return Effects{}
		}
		for _, o := range g.members {
			o.Assignment = slices.Clone(req.Assignments[o.ID]) // absent: empty
		}
		eff := g.nextPersist()
		g.syncPersistSeq = eff.PersistSeq
		return eff
	}
	done(SyncResult{Err: kerr.UnknownMemberID.Code})
	return Effects{}
}

// syncReceived takes a member off the pending-sync list; the timer stops
// once the list is empty.
func (g *Group) syncReceived(id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 {
		g.syncDeadlineMs = 0
	}
}

// Persisted reports that the metadata write with sequence seq finished
// (code 0) or failed (a Kafka error code). If it carried the leader's
// assignment, the group becomes Stable and every waiting member gets its
// assignment; on failure they get the error and the group rebalances.
func (g *Group) Persisted(nowMs int64, seq uint64, code int16) Effects {
	if g.state != CompletingRebalance || seq == 0 || seq != g.syncPersistSeq {
		return Effects{}
	}
	g.syncPersistSeq = 0
	if code != 0 {
		for _, m := range g.members {
			m.Assignment = nil
			if m.syncDone != nil {
				m.syncDone(SyncResult{Err: code})
				m.syncDone = nil
			}
		}
		return g.prepareRebalance(nowMs)
	}
	g.transition(Stable, nowMs)
	for _, m := range g.members {
		if m.syncDone != nil {
			m.deadlineMs = nowMs + int64(m.SessionTimeoutMs)
			m.syncDone(SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.Assignment})
			m.syncDone = nil
		}
	}
	return Effects{}
}

// Heartbeat handles a Heartbeat and returns its error code.
func (g *Group) Heartbeat(nowMs int64, memberID, instanceID string, generation int32) int16 {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if code := g.checkInstance(memberID, instanceID); code != 0 {
		return code
	}
	m, ok := g.members[memberID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m.deadlineMs = nowMs + int64(m.SessionTimeoutMs)
	if g.state == PreparingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// Leave removes one member (LeaveGroup). With memberID "" the member is
// found by instanceID (LeaveGroup v3+ static leave). It returns the error
// code for this member.
func (g *Group) Leave(nowMs int64, memberID, instanceID string) (int16, Effects) {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable.Code, Effects{}
	}
	if instanceID != "" {
		cur, ok := g.instances[instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code, Effects{}
		}
		if memberID != "" && cur != memberID {
			return kerr.FencedInstanceID.Code, Effects{}
		}
		memberID = cur
	}
	if _, ok := g.pending[memberID]; ok {
		delete(g.pending, memberID)
		return 0, g.maybeCompleteJoin(nowMs)
	}
	if _, ok := g.members[memberID]; !ok {
		return kerr.UnknownMemberID.Code, Effects{}
	}
	return 0, g.memberGone(nowMs, memberID)
}

// memberGone removes a member that left or expired and rebalances.
func (g *Group) memberGone(nowMs int64, id string) Effects {
	g.removeMember(id)
	switch g.state {
	case Stable, CompletingRebalance:
		return g.prepareRebalance(nowMs)
	case PreparingRebalance:
		return g.maybeCompleteJoin(nowMs)
	}
	return Effects{}
}

// Tick runs the group's timers at nowMs: expired sessions and KIP-394
// pending members are removed, a rebalance whose deadline passed
// completes, and members that joined but did not sync within the
// rebalance timeout are removed (expirePendingSync).
func (g *Group) Tick(nowMs int64) Effects {
	if g.kind == kindConsumer {
		g.consumerTick(nowMs)
		return Effects{}
	}
	var eff Effects
	for id, exp := range g.pending {
		if exp <= nowMs {
			delete(g.pending, id)
		}
	}
	for _, id := range slices.Clone(g.order) {
		m, ok := g.members[id]
		if !ok || m.deadlineMs > nowMs {
			continue
		}
		// Kafka's shouldKeepAlive: a member waiting for its join answer
		// is alive (new members only up to their join timeout); one
		// waiting for its sync answer is alive.
		if (m.joinDone != nil && !m.isNew) || m.syncDone != nil {
			continue
		}
		eff.merge(g.memberGone(nowMs, id))
	}
	if g.state == PreparingRebalance {
		eff.merge(g.maybeCompleteJoin(nowMs))
	}
	eff.merge(g.expirePendingSync(nowMs))
	return eff
}

// NextDeadline returns the earliest time Tick has something to do, or
// math.MaxInt64 if nothing is scheduled.
func (g *Group) NextDeadline() int64 {
	if g.kind == kindConsumer {
		return g.consumerNextDeadline()
	}
	next := int64(1<<63 - 1)
	for _, exp := range g.pending {
		next = min(next, exp)
	}
	for _, m := range g.members {
		next = min(next, m.deadlineMs)
	}
	if g.state == PreparingRebalance {
		next = min(next, g.rebalanceDeadlineMs)
	}
	if len(g.pendingSync) > 0 {
		next = min(next, g.syncDeadlineMs)
	}
	return next
}

// CheckCommit validates an OffsetCommit's group fields (Kafka's rules) and
// returns 0 if the commit may be stored. A generation below 0 with no
// member id is a "simple" commit, allowed only while the group is Empty.
// A valid commit from a member counts as its heartbeat.
func (g *Group) CheckCommit(nowMs int64, generation int32, memberID, instanceID string) int16 {
	if g.kind == kindConsumer && g.state != Dead {
		return g.checkConsumerCommit(nowMs, generation, memberID)
	}
	switch {
	case g.state == Dead:
		return kerr.CoordinatorNotAvailable.Code
	case generation < 0 && g.state == Empty:
		return 0
	case g.checkInstance(memberID, instanceID) != 0:
		return kerr.FencedInstanceID.Code
	case g.state == CompletingRebalance:
		return kerr.RebalanceInProgress.Code
	}
	m, ok := g.members[memberID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m.deadlineMs = nowMs + int64(m.SessionTimeoutMs)
	return 0
}

// ExpiredOffsets returns the offsets due for deletion at nowMs under
// retentionMs (Kafka's KIP-211 rules): all of them once the group has been
// Empty for retentionMs; for a consumer group with members, those of
// topics no member subscribes to, committed more than retentionMs ago.
func (g *Group) ExpiredOffsets(nowMs, retentionMs int64) []TopicPartition {
	var out []TopicPartition
	switch {
	case g.kind == kindClassic && g.state == Empty && g.protocolType == "" && g.generation == 0:
		// Only simple (manual) commits ever: each offset expires on its own.
		for tp, o := range g.offsets {
			if nowMs-o.CommitTimestampMs >= retentionMs {
				out = append(out, tp)
			}
		}
	case g.kind == kindClassic && g.state == Empty:
		if nowMs-g.stateTimestampMs < retentionMs {
			return nil
		}
		for tp := range g.offsets {
			out = append(out, tp)
		}
	case g.kind == kindConsumer && g.IsEmpty():
		if nowMs-g.stateTimestampMs < retentionMs {
			return nil
		}
		for tp := range g.offsets {
			out = append(out, tp)
		}
	case g.kind == kindConsumer || (g.state == Stable && g.protocolType == "consumer"):
		for tp, o := range g.offsets {
			if nowMs-o.CommitTimestampMs >= retentionMs && !g.Subscribed(tp.Topic) {
				out = append(out, tp)
			}
		}
	}
	return out
}

// SetOffset records a committed offset (after its write finished).
func (g *Group) SetOffset(tp TopicPartition, o Offset) { g.offsets[tp] = o }

// DeleteOffset forgets a committed offset (after its tombstone was written).
func (g *Group) DeleteOffset(tp TopicPartition) { delete(g.offsets, tp) }

// Subscribed reports whether a member of the group's current generation
// subscribes to topic, judged by the consumer protocol metadata; groups of
// other protocol types answer false.
func (g *Group) Subscribed(topic string) bool {
	if g.kind == kindConsumer {
		for _, m := range g.cg.members {
			if slices.Contains(m.Topics, topic) || (m.re != nil && m.re.MatchString(topic)) {
				return true
			}
		}
		return false
	}
	if g.protocolType != "consumer" || g.protocol == "" {
		return false
	}
	for _, m := range g.members {
		if slices.Contains(ConsumerTopics(m.metadataFor(g.protocol)), topic) {
			return true
		}
	}
	return false
}

// MarkDead makes the group Dead (deleted): every waiting member is answered
// with COORDINATOR_NOT_AVAILABLE (the client looks for the coordinator again).
func (g *Group) MarkDead(nowMs int64, code int16) {
	for _, m := range g.members {
		if m.joinDone != nil {
			m.joinDone(JoinResult{Err: code, MemberID: m.ID, Generation: -1})
			m.joinDone = nil
		}
		if m.syncDone != nil {
			m.syncDone(SyncResult{Err: code})
			m.syncDone = nil
		}
	}
	g.clearPendingSync()
	g.transition(Dead, nowMs)
}
