package share

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Defaults of Kafka's share-group membership configurations.
const (
	// DefaultSessionTimeoutMs is group.share.session.timeout.ms.
	DefaultSessionTimeoutMs = 45_000
	// DefaultHeartbeatIntervalMs is group.share.heartbeat.interval.ms.
	DefaultHeartbeatIntervalMs = 5_000
	// DefaultMaxGroupSize is group.share.max.size.
	DefaultMaxGroupSize = 200
	// AssignorSimple is the name of Kafka's simple share assignor.
	AssignorSimple = "simple"
)

// GroupConfig configures the share-group coordinator core.
type GroupConfig struct {
	SessionTimeoutMs    int32 // group.share.session.timeout.ms (0: default)
	HeartbeatIntervalMs int32 // group.share.heartbeat.interval.ms (0: default)
	MaxSize             int   // group.share.max.size (0: default)
}

func (c GroupConfig) withDefaults() GroupConfig {
	if c.SessionTimeoutMs <= 0 {
		c.SessionTimeoutMs = DefaultSessionTimeoutMs
	}
	if c.HeartbeatIntervalMs <= 0 {
		c.HeartbeatIntervalMs = DefaultHeartbeatIntervalMs
	}
	if c.MaxSize <= 0 {
		c.MaxSize = DefaultMaxGroupSize
	}
	return c
}

// Catalog tells the coordinator how many partitions a topic has (0: the
// topic does not exist).
type Catalog interface {
	Partitions(topic string) int32
}

// Member is one member of a share group.
type Member struct {
	ID, ClientID, ClientHost, RackID string
	Epoch, PrevEpoch                 int32
	Topics                           []string           // subscribed topic names, sorted
	Assignment                       map[string][]int32 // topic -> partitions, as last sent to the member
	deadlineMs                       int64              // session expires at this time
	// The assignment the group's last assignment gave the member, at
	// targetEpoch, until its own heartbeat hands it over (hasTarget).
	// Epoch and Assignment are what the member was told: they move only in
	// its own heartbeat, as in Kafka, so a member several reassignments
	// behind still heartbeats at an epoch the coordinator accepts.
	target      map[string][]int32
	targetEpoch int32
	hasTarget   bool
}

// pending is the assignment the member will have: its target, or what it
// was told.
func (m *Member) pending() map[string][]int32 {
	if m.hasTarget {
		return m.target
	}
	return m.Assignment
}

// Group is one share group.
type Group struct {
	ID              string
	Epoch           int32 // bumped by every membership, subscription or metadata change
	AssignmentEpoch int32
	Members         map[string]*Member
	metaKey         string // subscribed topics and their partition counts at the last assignment
}

// State is the group state name ShareGroupDescribe reports.
func (g *Group) State() string {
	if len(g.Members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// Groups is the share-group coordinator's state: membership by
// ShareGroupHeartbeat, session timeouts and the assignment (KIP-932's
// simple assignor). A pure state machine like Partition: time is an
// input (nowMs), no I/O, no goroutine, no lock (the owner serializes
// calls).
//
// Membership is not persisted (the share-partitions' state is what is
// durable), yet it survives a coordinator move as Kafka's persisted
// membership makes it: a heartbeat at a member epoch above 0 from a member
// this coordinator does not know, carrying its subscription (clients send
// their whole state again after any coordinator error), takes the member
// in at that epoch (adopt) instead of answering UNKNOWN_MEMBER_ID. The
// member is then reassigned like any other, at a group epoch above the one
// it presented. Answering UNKNOWN_MEMBER_ID instead would make the client
// rejoin at epoch 0 and reset its share sessions everywhere, dropping the
// acknowledgements of every record it holds (franz-go discards them as
// stale), so those records would be delivered again after their locks
// expire, on partitions whose leaders never moved. A member that left or
// timed out here is not adopted for a session timeout afterwards: it gets
// UNKNOWN_MEMBER_ID as in Kafka.
type Groups struct {
	cfg    GroupConfig
	groups map[string]*Group
	// departed: members that left or expired here, keyed group "\x00"
	// member, with the time (ms) until which they are not adopted.
	departed map[string]int64
}

// NewGroups returns an empty coordinator.
func NewGroups(cfg GroupConfig) *Groups {
	return &Groups{cfg: cfg.withDefaults(), groups: map[string]*Group{}, departed: map[string]int64{}}
}

// adoptable reports whether a heartbeat for a member this coordinator does
// not know takes it in (see Groups).
func (gs *Groups) adoptable(nowMs int64, req HeartbeatRequest) bool {
	if req.MemberEpoch <= 0 || req.Topics == nil {
		return false
	}
	until, ok := gs.departed[req.Group+"\x00"+req.MemberID]
	return !ok || nowMs >= until
}

// Config returns the effective configuration.
func (gs *Groups) Config() GroupConfig { return gs.cfg }

// HeartbeatRequest is a ShareGroupHeartbeat (v1: the member id is the
// client's).
type HeartbeatRequest struct {
	Group, MemberID      string
	MemberEpoch          int32
	RackID               *string  // nil: unchanged
	Topics               []string // nil: unchanged
	ClientID, ClientHost string
}

// HeartbeatResult is the answer: an error code (and message), or the
// member's epoch, the heartbeat interval and, when the member has not seen
// it yet, its assignment.
type HeartbeatResult struct {
	Err           int16
	Msg           string
	MemberEpoch   int32
	IntervalMs    int32
	HasAssignment bool
	Assignment    map[string][]int32
	// Left is the member that left (epoch -1): the shell releases what it
	// holds.
	Left *Departure
}

// Departure is a member that left its group or whose session expired.
type Departure struct {
	Group, Member string
}

// Heartbeat handles a ShareGroupHeartbeat at nowMs. Epoch 0 joins (or
// rejoins with the same member id), -1 leaves, anything else must be the
// member's current (or previous: a lost response) epoch, else
// FENCED_MEMBER_EPOCH. A joining member must name its topics.
func (gs *Groups) Heartbeat(nowMs int64, req HeartbeatRequest, cat Catalog) HeartbeatResult {
	fail := func(code int16, msg string) HeartbeatResult { return HeartbeatResult{Err: code, Msg: msg} }
	switch {
	case req.Group == "":
		return fail(kerr.InvalidGroupID.Code, "the group id is empty")
	case req.MemberID == "":
		return fail(kerr.InvalidRequest.Code, "MemberId can't be empty.")
	case req.MemberEpoch < -1:
		return fail(kerr.InvalidRequest.Code, "MemberEpoch is invalid.")
	case req.MemberEpoch == 0 && len(req.Topics) == 0:
		return fail(kerr.InvalidRequest.Code, "SubscribedTopicNames must be set in first request.")
	}
	g := gs.groups[req.Group]
	if req.MemberEpoch == -1 {
		if g == nil || g.Members[req.MemberID] == nil {
			return fail(kerr.UnknownMemberID.Code, "")
		}
		gs.remove(nowMs, g, req.MemberID)
		return HeartbeatResult{MemberEpoch: -1, Left: &Departure{Group: req.Group, Member: req.MemberID}}
	}
	adopt := false
	if g == nil || g.Members[req.MemberID] == nil {
		if req.MemberEpoch != 0 && !gs.adoptable(nowMs, req) {
			return fail(kerr.UnknownMemberID.Code, "")
		}
		adopt = req.MemberEpoch != 0
	}
	if g == nil {
		g = &Group{ID: req.Group, Members: map[string]*Member{}}
		gs.groups[req.Group] = g
	}
	m := g.Members[req.MemberID]
	seen := false // the member has its current assignment
	switch {
	case m == nil:
		if len(g.Members) >= gs.cfg.MaxSize {
			return fail(kerr.GroupMaxSizeReached.Code, "")
		}
		m = &Member{ID: req.MemberID}
		if adopt {
			// The epoch it had at its old coordinator; the group's moves
			// past it, so the assignment below gives it a newer one.
			m.Epoch, m.PrevEpoch = req.MemberEpoch, req.MemberEpoch
			g.Epoch = max(g.Epoch, req.MemberEpoch)
		}
		g.Members[req.MemberID] = m
		g.Epoch++
	case req.MemberEpoch == 0:
		// A rejoin with the same id: it has lost its state.
	case req.MemberEpoch == m.Epoch:
		seen = true
	case req.MemberEpoch == m.PrevEpoch:
	default:
		return fail(kerr.FencedMemberEpoch.Code, "")
	}
	m.ClientID, m.ClientHost = req.ClientID, req.ClientHost
	if req.RackID != nil {
		m.RackID = *req.RackID
	}
	if req.Topics != nil {
		t := slices.Clone(req.Topics)
		slices.Sort(t)
		t = slices.Compact(t)
		if !slices.Equal(t, m.Topics) {
			m.Topics = t
			g.Epoch++
		}
	}
	m.deadlineMs = nowMs + int64(gs.cfg.SessionTimeoutMs)
	if key := metaKey(g, cat); key != g.metaKey {
		g.metaKey = key
		g.Epoch++
	}
	if g.AssignmentEpoch != g.Epoch {
		assign(g, cat)
	}
	if m.hasTarget {
		// Handed over now: the member held req.MemberEpoch (a lost
		// answer leaves it there), so that stays acceptable.
		if m.Epoch != m.targetEpoch {
			m.PrevEpoch, m.Epoch = req.MemberEpoch, m.targetEpoch
		}
		m.Assignment, m.target, m.hasTarget = m.target, nil, false
	}
	res := HeartbeatResult{MemberEpoch: m.Epoch, IntervalMs: gs.cfg.HeartbeatIntervalMs}
	if !seen || req.MemberEpoch != m.Epoch || req.Topics != nil {
		res.HasAssignment = true
		res.Assignment = cloneAssignment(m.Assignment)
	}
	return res
}

// Expire removes the members whose session timed out at nowMs and returns
// them (the shell releases their records).
func (gs *Groups) Expire(nowMs int64) []Departure {
	var out []Departure
	for k, until := range gs.departed {
		if nowMs >= until {
			delete(gs.departed, k)
		}
	}
	for _, id := range sortedKeys(gs.groups) {
		g := gs.groups[id]
		for _, mid := range sortedKeys(g.Members) {
			if g.Members[mid].deadlineMs <= nowMs {
				gs.remove(nowMs, g, mid)
				out = append(out, Departure{Group: id, Member: mid})
			}
		}
	}
	return out
}

// IsMember reports whether member belongs to group.
func (gs *Groups) IsMember(group, member string) bool {
	g := gs.groups[group]
	return g != nil && g.Members[member] != nil
}

// Group returns a group (nil if unknown). The caller must not change it.
func (gs *Groups) Group(id string) *Group { return gs.groups[id] }

// Names returns the known groups' ids, sorted.
func (gs *Groups) Names() []string { return sortedKeys(gs.groups) }

// Delete forgets an empty group (DeleteGroups, KIP-932): 0 when it is
// removed, NON_EMPTY_GROUP while it has members (nothing changes),
// GROUP_ID_NOT_FOUND when the coordinator does not know it. The group's
// share-partitions' state is the shell's to delete. A member joining the
// same id afterwards starts a new group at epoch 1.
func (gs *Groups) Delete(id string) int16 {
	g := gs.groups[id]
	switch {
	case g == nil:
		return kerr.GroupIDNotFound.Code
	case len(g.Members) > 0:
		return kerr.NonEmptyGroup.Code
	}
	delete(gs.groups, id)
	return 0
}

func (gs *Groups) remove(nowMs int64, g *Group, member string) {
	delete(g.Members, member)
	gs.departed[g.ID+"\x00"+member] = nowMs + int64(gs.cfg.SessionTimeoutMs)
	// The others keep their epochs until the next heartbeat reassigns
	// them (assign moves them to the group epoch then).
	g.Epoch++
}

// metaKey sums up the subscribed topics' partition counts, so a change
// (a topic created, deleted or given partitions) bumps the group epoch.
func metaKey(g *Group, cat Catalog) string {
	var ts []string
	for _, m := range g.Members {
		ts = append(ts, m.Topics...)
	}
	slices.Sort(ts)
	ts = slices.Compact(ts)
	b := make([]byte, 0, 16*len(ts))
	for _, t := range ts {
		b = append(b, t...)
		n := cat.Partitions(t)
		b = append(b, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return string(b)
}

// assign computes every member's assignment with KIP-932's simple
// assignor rule, per subscribed topic: with at least as many partitions as
// subscribers, each partition goes to one subscriber (round-robin over the
// subscribers sorted by id); with more subscribers than partitions, each
// subscriber gets one partition and partitions are shared (subscriber i
// gets partition i mod P), so every member has work and every partition a
// consumer. A member whose assignment changed gets it as its target at the
// group epoch, and takes both in its own next heartbeat.
func assign(g *Group, cat Catalog) {
	subs := map[string][]string{} // topic -> member ids, sorted
	for _, id := range sortedKeys(g.Members) {
		for _, t := range g.Members[id].Topics {
			subs[t] = append(subs[t], id)
		}
	}
	next := map[string]map[string][]int32{}
	for t, ms := range subs {
		n := cat.Partitions(t)
		if n <= 0 {
			continue
		}
		give := func(m string, p int32) {
			if next[m] == nil {
				next[m] = map[string][]int32{}
			}
			next[m][t] = append(next[m][t], p)
		}
		if int(n) >= len(ms) {
			for p := int32(0); p < n; p++ {
				give(ms[int(p)%len(ms)], p)
			}
		} else {
			for i, m := range ms {
				give(m, int32(i)%n)
			}
		}
	}
	for id, m := range g.Members {
		a := next[id]
		if a == nil {
			a = map[string][]int32{}
		}
		switch {
		case m.Epoch != 0 && equalAssignment(a, m.Assignment):
			// Back to what it was told (or never changed): nothing to hand over.
			m.target, m.hasTarget = nil, false
		case !m.hasTarget || !equalAssignment(a, m.target):
			m.target, m.targetEpoch, m.hasTarget = a, g.Epoch, true
		}
	}
	g.AssignmentEpoch = g.Epoch
}

func equalAssignment(a, b map[string][]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

func cloneAssignment(a map[string][]int32) map[string][]int32 {
	out := make(map[string][]int32, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
