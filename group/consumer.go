package group

// KIP-848 consumer groups: the coordinator computes the assignment and
// hands it out through ConsumerGroupHeartbeat, incrementally.
//
// A consumer group has a group epoch (bumped when membership, a
// subscription or a subscribed topic's partition count changes), a target
// assignment computed by a group/assign assignor ("uniform" = assign.Uniform,
// "range" = assign.Range) at an assignment epoch, and per member a current
// assignment and member epoch. A member reconciles toward its target one
// heartbeat at a time:
//
//   - partitions it owns that the target gives away are revoked first: the
//     member is sent its assignment without them and must confirm (a
//     heartbeat whose owned partitions no longer list them) within its
//     rebalance timeout, or it is removed;
//   - only then does it get the target's other partitions, and only those
//     no other member still owns (pending revocation there); it gets the
//     rest on a later heartbeat, once they are released;
//   - its member epoch becomes the assignment epoch once nothing is left to
//     revoke.
//
// So a partition is never owned by two members, and partitions move only
// when the target moves them (Uniform keeps every partition it can).
// Membership is not persisted (offsets are): after a coordinator moves,
// members get UNKNOWN_MEMBER_ID and rejoin with epoch 0. Static members
// (instance id) are replaced on rejoin; a static leave (epoch -2) keeps the
// member until its session times out.

import (
	"hash/maphash"
	"regexp"
	"slices"
	"sort"

	"github.com/stratalog/strata/group/assign"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupKind int8

const (
	kindClassic groupKind = iota
	kindConsumer
)

// Catalog tells the coordinator which topics exist and their partition
// counts (the server implements it over the engine).
type Catalog interface {
	Partitions(topic string) int32 // 0 if the topic does not exist
	Names() []string               // every topic, internal ones included (regex subscriptions, regex.go)
}

// CMember is one member of a consumer (KIP-848) group.
type CMember struct {
	ID, InstanceID, RackID, ClientID, ClientHost string
	Epoch, PrevEpoch                             int32
	RebalanceTimeoutMs                           int32
	Topics                                       []string // subscribed names
	Regex                                        string   // subscribed regex ("" none)
	Assigned                                     map[string][]int32
	Pending                                      map[string][]int32 // revoked, not yet confirmed

	re               *regexp.Regexp
	deadlineMs       int64
	revokeDeadlineMs int64
	sent             bool // Assigned was sent in a response
}

type consumerState struct {
	epoch       int32
	assignEpoch int32
	assignor    string
	members     map[string]*CMember
	instances   map[string]string
	target      assign.Assignment
	owner       map[TopicPartition]string
	metaHash    uint64
}

var metaSeed = maphash.MakeSeed()

// HeartbeatRequest is a ConsumerGroupHeartbeat.
type HeartbeatRequest struct {
	Group, MemberID, InstanceID, RackID, ClientID, ClientHost string
	MemberEpoch                                               int32
	RebalanceTimeoutMs                                        int32    // -1: unchanged
	Topics                                                    []string // nil: unchanged
	Regex                                                     *string  // nil: unchanged
	Assignor                                                  *string  // nil: unchanged
	Owned                                                     map[string][]int32
	OwnedSet                                                  bool // Owned was sent (nil Topics = unchanged)
}

// HeartbeatResult is the ConsumerGroupHeartbeat answer. Assignment is set
// only when it changed since the member last heard it.
type HeartbeatResult struct {
	Err                 int16
	Msg                 string
	MemberID            string
	MemberEpoch         int32
	HeartbeatIntervalMs int32
	Assignment          map[string][]int32
	HasAssignment       bool
}

// IsEmpty reports whether the group has no members (either protocol).
func (g *Group) IsEmpty() bool {
	if g.kind == kindConsumer {
		return len(g.cg.members) == 0
	}
	return g.state == Empty
}

// IsConsumer reports whether the group is a KIP-848 consumer group.
func (g *Group) IsConsumer() bool { return g.kind == kindConsumer }

// StateName is the state as ListGroups and the describe APIs name it:
// the classic states, or for consumer groups Empty, Assigning (a new
// target is due), Reconciling (members still moving to it) and Stable.
func (g *Group) StateName() string {
	if g.kind != kindConsumer {
		return g.state.String()
	}
	c := &g.cg
	switch {
	case len(c.members) == 0:
		return "Empty"
	case c.assignEpoch < c.epoch:
		return "Assigning"
	}
	for _, m := range c.members {
		if m.Epoch != c.assignEpoch || len(m.Pending) > 0 {
			return "Reconciling"
		}
	}
	return "Stable"
}

func (g *Group) toConsumer() {
	g.kind = kindConsumer
	g.protocolType = "consumer"
	g.cg = consumerState{epoch: g.generation, assignEpoch: g.generation, members: map[string]*CMember{},
		instances: map[string]string{}, owner: map[TopicPartition]string{}, target: assign.Assignment{}}
}

func (g *Group) toClassic() {
	g.kind = kindClassic
	g.generation = max(g.generation, g.cg.epoch)
	g.protocolType = ""
	g.cg = consumerState{}
}

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat at nowMs.
func (g *Group) ConsumerHeartbeat(nowMs int64, req HeartbeatRequest, cat Catalog) HeartbeatResult {
	fail := func(code int16, msg string) HeartbeatResult {
		return HeartbeatResult{Err: code, Msg: msg, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	}
	if g.state == Dead {
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
	if g.kind == kindClassic {
		if !g.IsEmpty() || len(g.members) > 0 {
			return fail(kerr.GroupIDNotFound.Code, "group "+g.ID+" is a classic group with members")
		}
		if req.MemberEpoch != 0 {
			return fail(kerr.UnknownMemberID.Code, "")
		}
		g.toConsumer()
	}
	c := &g.cg
	switch {
	case req.MemberEpoch == 0:
		return g.consumerJoin(nowMs, req, cat)
	case req.MemberEpoch == -1:
		if m := c.members[req.MemberID]; m != nil {
			g.removeConsumer(m)
		}
		return HeartbeatResult{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	case req.MemberEpoch == -2:
		// A static member leaving temporarily keeps its partitions for
		// its session timeout: a restart with the same instance id
		// takes over before anything moves; otherwise it expires.
		if m := c.members[req.MemberID]; m != nil {
			m.deadlineMs = nowMs + int64(g.cfg.ConsumerSessionTimeoutMs)
		}
		return HeartbeatResult{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	case req.MemberEpoch < -2:
		return fail(kerr.InvalidRequest.Code, "invalid member epoch")
	}
	m := c.members[req.MemberID]
	if m == nil {
		return fail(kerr.UnknownMemberID.Code, "")
	}
	if req.MemberEpoch != m.Epoch {
		// A member that missed our last answer comes back with its
		// previous epoch; anything else is a zombie.
		if req.MemberEpoch != m.PrevEpoch || !ownedWithin(req.Owned, m.Assigned, m.Pending) {
			return fail(kerr.FencedMemberEpoch.Code, "")
		}
		m.sent = false
	}
	changed, code, msg := g.updateConsumer(m, req)
	if code != 0 {
		return fail(code, msg)
	}
	return g.consumerStep(nowMs, m, req, cat, changed)
}

func (g *Group) consumerJoin(nowMs int64, req HeartbeatRequest, cat Catalog) HeartbeatResult {
	c := &g.cg
	if len(req.Owned) > 0 {
		return HeartbeatResult{Err: kerr.InvalidRequest.Code, Msg: "a joining member owns no partitions", MemberID: req.MemberID}
	}
	if req.Topics == nil && (req.Regex == nil || *req.Regex == "") {
		return HeartbeatResult{Err: kerr.InvalidRequest.Code, Msg: "a joining member must subscribe", MemberID: req.MemberID}
	}
	if req.RebalanceTimeoutMs <= 0 {
		return HeartbeatResult{Err: kerr.InvalidRequest.Code, Msg: "rebalance timeout required on join", MemberID: req.MemberID}
	}
	if req.MemberID == "" {
		req.MemberID = g.cfg.newMemberID(memberIDPrefix(JoinRequest{InstanceID: req.InstanceID, ClientID: req.ClientID}))
	}
	if old := c.members[req.MemberID]; old != nil {
		g.removeConsumer(old) // a rejoin after being fenced: start over
	}
	if req.InstanceID != "" {
		if oldID, ok := c.instances[req.InstanceID]; ok {
			g.removeConsumer(c.members[oldID])
		}
		c.instances[req.InstanceID] = req.MemberID
	}
	if g.cfg.MaxSize > 0 && len(c.members) >= int(g.cfg.MaxSize) {
		return HeartbeatResult{Err: kerr.GroupMaxSizeReached.Code, MemberID: req.MemberID}
	}
	m := &CMember{ID: req.MemberID, InstanceID: req.InstanceID, Assigned: map[string][]int32{}, Pending: map[string][]int32{}}
	c.members[m.ID] = m
	if _, code, msg := g.updateConsumer(m, req); code != 0 {
		g.removeConsumer(m)
		return HeartbeatResult{Err: code, Msg: msg, MemberID: req.MemberID}
	}
	r := g.consumerStep(nowMs, m, req, cat, true)
	r.HasAssignment = true
	if r.Assignment == nil {
		r.Assignment = cloneAssigned(m.Assigned)
	}
	return r
}

// updateConsumer applies the request's subscription and settings; changed
// reports a change that needs a new target assignment.
func (g *Group) updateConsumer(m *CMember, req HeartbeatRequest) (changed bool, code int16, msg string) {
	c := &g.cg
	m.ClientID, m.ClientHost = req.ClientID, req.ClientHost
	if req.RackID != "" {
		m.RackID = req.RackID
	}
	if req.RebalanceTimeoutMs > 0 {
		m.RebalanceTimeoutMs = req.RebalanceTimeoutMs
	}
	if req.Assignor != nil && *req.Assignor != "" {
		switch *req.Assignor {
		case "uniform", "range":
		default:
			return false, kerr.UnsupportedAssignor.Code, "assignor " + *req.Assignor + " is not supported (uniform, range)"
		}
		if c.assignor != *req.Assignor {
			c.assignor = *req.Assignor
			changed = true
		}
	}
	if req.Topics != nil {
		ts := slices.Clone(req.Topics)
		sort.Strings(ts)
		ts = slices.Compact(ts)
		if !slices.Equal(ts, m.Topics) {
			m.Topics = ts
			changed = true
		}
	}
	if req.Regex != nil && *req.Regex != m.Regex {
		if *req.Regex != "" {
			re, code, msg := compileSubscriptionRegex(*req.Regex)
			if code != 0 {
				return false, code, msg
			}
			m.re = re
		} else {
			m.re = nil
		}
		m.Regex = *req.Regex
		changed = true
	}
	return changed, 0, ""
}

// consumerStep processes the member's owned partitions, refreshes the
// target if the group epoch moved, and reconciles the member.
func (g *Group) consumerStep(nowMs int64, m *CMember, req HeartbeatRequest, cat Catalog, changed bool) HeartbeatResult {
	c := &g.cg
	m.deadlineMs = nowMs + int64(g.cfg.ConsumerSessionTimeoutMs)
	if req.OwnedSet && len(m.Pending) > 0 {
		for t, ps := range m.Pending {
			kept := ps[:0:0]
			for _, p := range ps {
				if slices.Contains(req.Owned[t], p) {
					kept = append(kept, p)
					continue
				}
				tp := TopicPartition{t, p}
				if c.owner[tp] == m.ID {
					delete(c.owner, tp)
				}
			}
			if len(kept) == 0 {
				delete(m.Pending, t)
			} else {
				m.Pending[t] = kept
			}
		}
	}
	if h := g.metadataHash(cat); h != c.metaHash {
		c.metaHash = h
		changed = true
	}
	if changed {
		c.epoch++
	}
	if c.assignEpoch < c.epoch {
		g.computeTarget(cat)
	}
	g.reconcile(nowMs, m)
	r := HeartbeatResult{MemberID: m.ID, MemberEpoch: m.Epoch, HeartbeatIntervalMs: g.cfg.ConsumerHeartbeatIntervalMs}
	if !m.sent {
		r.Assignment, r.HasAssignment = cloneAssigned(m.Assigned), true
		m.sent = true
	}
	return r
}

func (m *CMember) subscribed(cat Catalog) []string {
	if m.re == nil {
		return m.Topics
	}
	out := append(slices.Clone(m.Topics), resolveRegex(m.re, cat)...)
	sort.Strings(out)
	return slices.Compact(out)
}

// metadataHash summarises the partition counts of every subscribed topic,
// so a topic created, deleted or grown moves the group epoch.
func (g *Group) metadataHash(cat Catalog) uint64 {
	var h maphash.Hash
	h.SetSeed(metaSeed)
	var all []string
	for _, m := range g.cg.members {
		all = append(all, m.subscribed(cat)...)
	}
	sort.Strings(all)
	all = slices.Compact(all)
	for _, t := range all {
		h.WriteString(t)
		n := cat.Partitions(t)
		h.Write([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	}
	return h.Sum64()
}

// computeTarget runs the assignor over the members' subscriptions, seeded
// with the previous target so partitions stay where they are.
func (g *Group) computeTarget(cat Catalog) {
	c := &g.cg
	topics := assign.Topics{}
	members := make([]assign.Member, 0, len(c.members))
	for _, m := range c.members {
		subs := m.subscribed(cat)
		for _, t := range subs {
			if n := cat.Partitions(t); n > 0 {
				topics[t] = n
			}
		}
		members = append(members, assign.Member{ID: m.ID, InstanceID: m.InstanceID, Topics: subs,
			Owned: c.target[m.ID], Generation: c.assignEpoch, Rack: m.RackID})
	}
	var a assign.Assignment
	var err error
	if c.assignor == "range" {
		a, err = assign.Range(members, topics)
	} else {
		a, err = assign.Uniform(members, topics)
	}
	if err != nil {
		a = assign.Assignment{} // only on absurd inputs (limits): assign nothing rather than fail
	}
	c.target = a
	c.assignEpoch = c.epoch
}

// reconcile moves member m one step toward its target (see the file doc).
func (g *Group) reconcile(nowMs int64, m *CMember) {
	c := &g.cg
	if len(m.Pending) > 0 {
		return // waiting for the member to confirm its revocations
	}
	target := map[string][]int32{}
	for _, tp := range c.target[m.ID] {
		target[tp.Topic] = append(target[tp.Topic], tp.Partition)
	}
	revoke := map[string][]int32{}
	kept := map[string][]int32{}
	for t, ps := range m.Assigned {
		for _, p := range ps {
			if slices.Contains(target[t], p) {
				kept[t] = append(kept[t], p)
			} else {
				revoke[t] = append(revoke[t], p)
			}
		}
	}
	if len(revoke) > 0 {
		m.Assigned, m.Pending, m.sent = kept, revoke, false
		m.revokeDeadlineMs = nowMs + int64(m.RebalanceTimeoutMs)
		return
	}
	next := map[string][]int32{}
	for t, ps := range target {
		for _, p := range ps {
			tp := TopicPartition{t, p}
			if o := c.owner[tp]; o == "" || o == m.ID {
				c.owner[tp] = m.ID
				next[t] = append(next[t], p)
			}
		}
	}
	for _, ps := range next {
		slices.Sort(ps)
	}
	if m.Epoch != c.assignEpoch || !sameAssigned(next, m.Assigned) {
		if m.Epoch != c.assignEpoch {
			m.PrevEpoch, m.Epoch = m.Epoch, c.assignEpoch
		}
		if !sameAssigned(next, m.Assigned) {
			m.Assigned = next
		}
		m.sent = false
	}
}

func (g *Group) removeConsumer(m *CMember) {
	c := &g.cg
	for _, set := range []map[string][]int32{m.Assigned, m.Pending} {
		for t, ps := range set {
			for _, p := range ps {
				if tp := (TopicPartition{t, p}); c.owner[tp] == m.ID {
					delete(c.owner, tp)
				}
			}
		}
	}
	delete(c.members, m.ID)
	if m.InstanceID != "" && c.instances[m.InstanceID] == m.ID {
		delete(c.instances, m.InstanceID)
	}
	c.epoch++
}

// consumerTick expires members whose session ended or who did not confirm
// a revocation within their rebalance timeout.
func (g *Group) consumerTick(nowMs int64) {
	for _, m := range g.cg.members {
		if m.deadlineMs <= nowMs || (len(m.Pending) > 0 && m.revokeDeadlineMs <= nowMs) {
			g.removeConsumer(m)
		}
	}
	if len(g.cg.members) == 0 && g.stateTimestampMs < nowMs && g.state != Dead {
		g.stateTimestampMs = nowMs
	}
}

func (g *Group) consumerNextDeadline() int64 {
	next := int64(1<<63 - 1)
	for _, m := range g.cg.members {
		next = min(next, m.deadlineMs)
		if len(m.Pending) > 0 {
			next = min(next, m.revokeDeadlineMs)
		}
	}
	return next
}

// checkConsumerCommit is CheckCommit for consumer groups: the member must
// exist and commit with its current (or, after a missed answer, previous)
// member epoch; simple commits only while the group has no members.
func (g *Group) checkConsumerCommit(nowMs int64, epoch int32, memberID string) int16 {
	c := &g.cg
	if epoch < 0 && memberID == "" {
		if len(c.members) == 0 {
			return 0
		}
		return kerr.UnknownMemberID.Code
	}
	m := c.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if epoch != m.Epoch && epoch != m.PrevEpoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// ConsumerDescription is a consumer group as ConsumerGroupDescribe shows it.
type ConsumerDescription struct {
	Group, State, Assignor string
	Epoch, AssignmentEpoch int32
	Members                []ConsumerMemberDescription
}

// ConsumerMemberDescription is one member in ConsumerGroupDescribe.
type ConsumerMemberDescription struct {
	MemberID, InstanceID, RackID, ClientID, ClientHost, Regex string
	Epoch                                                     int32
	Topics                                                    []string
	Assigned, Target                                          map[string][]int32
}

func (g *Group) consumerDescription() ConsumerDescription {
	c := &g.cg
	d := ConsumerDescription{Group: g.ID, State: g.StateName(), Assignor: c.assignor, Epoch: c.epoch, AssignmentEpoch: c.assignEpoch}
	if d.Assignor == "" {
		d.Assignor = "uniform"
	}
	ids := make([]string, 0, len(c.members))
	for id := range c.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := c.members[id]
		target := map[string][]int32{}
		for _, tp := range c.target[id] {
			target[tp.Topic] = append(target[tp.Topic], tp.Partition)
		}
		d.Members = append(d.Members, ConsumerMemberDescription{MemberID: m.ID, InstanceID: m.InstanceID, RackID: m.RackID,
			ClientID: m.ClientID, ClientHost: m.ClientHost, Regex: m.Regex, Epoch: m.Epoch, Topics: slices.Clone(m.Topics),
			Assigned: cloneAssigned(m.Assigned), Target: target})
	}
	return d
}

// classicDescription is a consumer group in DescribeGroups' classic shape,
// as Kafka answers it: protocol type "consumer", the server-side assignor
// as the protocol, and per member a ConsumerProtocolSubscription (v0, its
// subscribed topic names) as metadata and a ConsumerProtocolAssignment (v0,
// the partitions it currently owns) as assignment.
func (g *Group) classicDescription() Description {
	cd := g.consumerDescription()
	d := Description{Group: g.ID, ProtocolType: "consumer", Protocol: cd.Assignor, State: g.state, StateName: cd.State, Generation: cd.Epoch}
	for _, m := range cd.Members {
		sub := kmsg.NewConsumerMemberMetadata()
		sub.Topics = m.Topics
		if sub.Topics == nil {
			sub.Topics = []string{}
		}
		asg := kmsg.NewConsumerMemberAssignment()
		topics := make([]string, 0, len(m.Assigned))
		for t := range m.Assigned {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		for _, t := range topics {
			asg.Topics = append(asg.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: t, Partitions: m.Assigned[t]})
		}
		d.Members = append(d.Members, MemberDescription{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID,
			ClientHost: m.ClientHost, Metadata: sub.AppendTo(nil), Assignment: asg.AppendTo(nil)})
	}
	return d
}

func cloneAssigned(a map[string][]int32) map[string][]int32 {
	out := make(map[string][]int32, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func sameAssigned(a, b map[string][]int32) bool {
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

// ownedWithin reports whether every owned partition is assigned or pending.
func ownedWithin(owned, assigned, pending map[string][]int32) bool {
	for t, ps := range owned {
		for _, p := range ps {
			if !slices.Contains(assigned[t], p) && !slices.Contains(pending[t], p) {
				return false
			}
		}
	}
	return true
}
