package engine

// Embedded consumer groups: in-process members of a named group share the
// partitions of the topics they subscribe to, assigned with Kafka's range
// or round-robin assignor (package group/assign, the same code the
// broker's KIP-848 coordinator uses) and reassigned whenever a member joins
// or leaves or a subscribed topic is created, deleted or grows. Positions
// start at the group's committed offset (Engine.Commit's records in
// __consumer_offsets) or, without one, where Kafka's auto.offset.reset
// says; a position outside the retained log (below the log start after
// retention or Truncate) is reset the same way, so a member with
// ResetEarliest resumes at the earliest retained record instead of failing
// with ErrOffsetOutOfRange.
//
// Rebalances are immediate and eager per partition: Join and Leave compute
// the new assignment under the group's lock and each member sees it at its
// next Poll. A partition a member keeps across a rebalance keeps its
// position; a partition it receives starts at the committed offset. A
// member's Commit writes the positions of the partitions it owns at that
// moment only (one batch, durable before it returns) and holds the group's
// lock while it does, so a partition's new owner reads the committed offset
// after the old owner's last commit. Delivery is at least once: records a
// member polled but did not commit before losing their partition are polled
// again by the new owner.
//
// There are no session timeouts: members live in the process and leave by
// Leave. The group lives in memory only (its committed offsets are
// durable); it is not the broker's group coordinator, and a broker serving
// the same data directory does not see its members.

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/stratalog/strata/group/assign"
)

// OffsetReset is Kafka's auto.offset.reset: where a member starts on a
// partition with no committed offset, and where it resumes when its
// position is outside the retained log.
type OffsetReset string

const (
	ResetLatest   OffsetReset = "latest"   // the high watermark (Kafka's default)
	ResetEarliest OffsetReset = "earliest" // the log start offset: the earliest retained record
	ResetNone     OffsetReset = "none"     // no reset: ErrNoOffset or ErrOffsetOutOfRange
)

// Assignors of embedded consumer groups, named as Kafka's
// partition.assignment.strategy names them.
const (
	AssignRange      = "range"
	AssignRoundRobin = "roundrobin"
)

// Errors of embedded consumer groups.
var (
	// ErrNoOffset: a member with ResetNone has no committed offset for a
	// partition it was assigned (Kafka's NoOffsetForPartitionException).
	ErrNoOffset = errors.New("engine: no committed offset and auto.offset.reset is none")
	// ErrMemberLeft: the member called Leave.
	ErrMemberLeft = errors.New("engine: member left the group")
)

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// GroupRecord is a record Poll returns, with its topic.
type GroupRecord struct {
	Topic string
	Record
}

// GroupOptions configure an embedded consumer group.
type GroupOptions struct {
	// Assignor is AssignRange (the default, as Kafka's) or AssignRoundRobin.
	Assignor string
}

// MemberOptions configure one member.
type MemberOptions struct {
	Topics []string    // subscription; topics that do not exist yet are assigned once created
	Reset  OffsetReset // "" is ResetLatest, as Kafka
}

// ConsumerGroup is an embedded consumer group: Engine.ConsumerGroup returns
// the same one for the same id. Safe for concurrent use.
type ConsumerGroup struct {
	e      *Engine
	id     string
	assign func([]assign.Member, assign.Topics) (assign.Assignment, error)
	name   string // the assignor's name

	mu         sync.Mutex
	members    map[string]*GroupMember
	nextID     int
	generation int32
	counts     map[string]int32 // partition counts the current assignment was computed on
}

// GroupMember is one member of an embedded consumer group. Poll and Commit
// of one member must not be called concurrently; different members may be
// used from different goroutines.
type GroupMember struct {
	g      *ConsumerGroup
	id     string
	topics []string
	reset  OffsetReset

	// Under g.mu: the member's share of the current generation, and the
	// partitions rebalances took from it since its last Poll or Commit
	// (their positions are no longer the member's to use).
	owned []TopicPartition
	gen   int32
	left  bool
	lost  map[TopicPartition]bool

	// The member's own (Poll and Commit, one goroutine at a time).
	pos  map[TopicPartition]int64
	next int // the partition Poll starts at, so every partition gets its turn
}

// ConsumerGroup returns the embedded consumer group id, creating it on first
// use with opts; later calls return the same group and must pass the same
// assignor (or none).
func (e *Engine) ConsumerGroup(id string, opts GroupOptions) (*ConsumerGroup, error) {
	if id == "" || len(id) > 32767 {
		return nil, fmt.Errorf("%w: group id of %d bytes", ErrInvalidConfig, len(id))
	}
	name := opts.Assignor
	var fn func([]assign.Member, assign.Topics) (assign.Assignment, error)
	switch name {
	case "", AssignRange:
		name, fn = AssignRange, assign.Range
	case AssignRoundRobin:
		fn = assign.RoundRobin
	default:
		return nil, fmt.Errorf("%w: assignor %q (want %q or %q)", ErrInvalidConfig, opts.Assignor, AssignRange, AssignRoundRobin)
	}
	v, _ := e.groups.LoadOrStore(id, &ConsumerGroup{e: e, id: id, assign: fn, name: name,
		members: map[string]*GroupMember{}, counts: map[string]int32{}})
	g := v.(*ConsumerGroup)
	if g.name != name && opts.Assignor != "" {
		return nil, fmt.Errorf("%w: group %q uses the %s assignor, not %s", ErrInvalidConfig, id, g.name, name)
	}
	return g, nil
}

// ID returns the group id.
func (g *ConsumerGroup) ID() string { return g.id }

// Generation returns the group's generation: it grows by one at every
// rebalance.
func (g *ConsumerGroup) Generation() int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.generation
}

// Members returns the ids of the current members, sorted.
func (g *ConsumerGroup) Members() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Join adds a member subscribed to opts.Topics and rebalances the group.
func (g *ConsumerGroup) Join(opts MemberOptions) (*GroupMember, error) {
	reset := opts.Reset
	switch reset {
	case "":
		reset = ResetLatest
	case ResetLatest, ResetEarliest, ResetNone:
	default:
		return nil, fmt.Errorf("%w: auto.offset.reset %q", ErrInvalidConfig, opts.Reset)
	}
	if len(opts.Topics) == 0 {
		return nil, fmt.Errorf("%w: a member subscribes to no topic", ErrInvalidConfig)
	}
	topics := slices.Clone(opts.Topics)
	slices.Sort(topics)
	topics = slices.Compact(topics)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextID++
	m := &GroupMember{g: g, id: fmt.Sprintf("%s-member-%d", g.id, g.nextID), topics: topics, reset: reset,
		pos: map[TopicPartition]int64{}, lost: map[TopicPartition]bool{}}
	g.members[m.id] = m
	if err := g.rebalance(); err != nil {
		delete(g.members, m.id)
		return nil, err
	}
	return m, nil
}

// rebalance computes a new generation's assignment of the subscribed topics'
// partitions among the members (g.mu held).
func (g *ConsumerGroup) rebalance() error {
	counts := map[string]int32{}
	ms := make([]assign.Member, 0, len(g.members))
	for _, m := range g.members {
		for _, t := range m.topics {
			if _, done := counts[t]; done {
				continue
			}
			if tp := g.e.Topic(t); tp != nil && !tp.Deleted() {
				counts[t] = tp.Partitions()
			}
		}
		ms = append(ms, assign.Member{ID: m.id, Topics: m.topics})
	}
	var plan assign.Assignment
	if len(ms) > 0 {
		var err error
		if plan, err = g.assign(ms, assign.Topics(counts)); err != nil {
			return fmt.Errorf("engine: assigning group %s: %w", g.id, err)
		}
	}
	g.generation++
	g.counts = counts
	for id, m := range g.members {
		owned := make([]TopicPartition, 0, len(plan[id]))
		for _, tp := range plan[id] {
			owned = append(owned, TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		}
		for _, tp := range m.owned {
			if !slices.Contains(owned, tp) {
				m.lost[tp] = true
			}
		}
		m.owned, m.gen = owned, g.generation
	}
	return nil
}

// topicsChanged reports whether a subscribed topic was created, deleted or
// grew since the last rebalance (g.mu held).
func (g *ConsumerGroup) topicsChanged() bool {
	for _, m := range g.members {
		for _, t := range m.topics {
			var n int32 = -1
			if tp := g.e.Topic(t); tp != nil && !tp.Deleted() {
				n = tp.Partitions()
			}
			old, ok := g.counts[t]
			if !ok {
				old = -1
			}
			if n != old {
				return true
			}
		}
	}
	return false
}

// ID returns the member id (assigned by Join).
func (m *GroupMember) ID() string { return m.id }

// Assignment returns the member's partitions in the group's current
// generation, sorted by topic and partition, and that generation.
func (m *GroupMember) Assignment() ([]TopicPartition, int32) {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	return slices.Clone(m.owned), m.gen
}

// Leave removes the member from the group and rebalances the others. It
// does not commit: call Commit first to keep the member's progress.
func (m *GroupMember) Leave() error {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.left {
		return ErrMemberLeft
	}
	m.left = true
	m.owned = nil
	delete(g.members, m.id)
	return g.rebalance()
}

// Poll returns up to max records from the member's partitions that are
// available now (it does not wait), starting each partition at the
// member's position and moving the position past what it returns. After
// a rebalance it takes the new assignment: positions of partitions it kept
// stay; a new partition starts at the committed offset, or where the
// member's OffsetReset says if there is none. A position outside the
// retained log is reset the same way (ResetEarliest: the log start), or
// with ResetNone the error is returned with the records polled so far.
func (m *GroupMember) Poll(max int) ([]GroupRecord, error) {
	g := m.g
	g.mu.Lock()
	if m.left {
		g.mu.Unlock()
		return nil, ErrMemberLeft
	}
	if g.topicsChanged() {
		if err := g.rebalance(); err != nil {
			g.mu.Unlock()
			return nil, err
		}
	}
	owned := slices.Clone(m.owned)
	m.dropLost()
	g.mu.Unlock()

	if err := m.initPositions(owned); err != nil {
		return nil, err
	}
	var out []GroupRecord
	for i := 0; i < len(owned) && len(out) < max; i++ {
		tp := owned[(m.next+i)%len(owned)]
		recs, err := m.consume(tp, max-len(out))
		for _, r := range recs {
			out = append(out, GroupRecord{Topic: tp.Topic, Record: r})
		}
		if err != nil {
			return out, err
		}
	}
	if len(owned) > 0 {
		m.next = (m.next + 1) % len(owned)
	}
	return out, nil
}

// initPositions sets the position of every owned partition that has none.
func (m *GroupMember) initPositions(owned []TopicPartition) error {
	var missing []TopicPartition
	for _, tp := range owned {
		if _, ok := m.pos[tp]; !ok {
			missing = append(missing, tp)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	committed, err := m.g.e.committedAll(m.g.id)
	if err != nil {
		return err
	}
	for _, tp := range missing {
		if off, ok := committed[tp]; ok {
			m.pos[tp] = off
			continue
		}
		off, err := m.resetPosition(tp, ErrNoOffset)
		if err != nil {
			return err
		}
		m.pos[tp] = off
	}
	return nil
}

// resetPosition applies the member's OffsetReset to tp; cause is returned
// (wrapped) with ResetNone.
func (m *GroupMember) resetPosition(tp TopicPartition, cause error) (int64, error) {
	t := m.g.e.Topic(tp.Topic)
	if t == nil {
		return -1, fmt.Errorf("%w: %s-%d", ErrUnknownTopic, tp.Topic, tp.Partition)
	}
	l, err := t.partition(tp.Partition)
	if err != nil {
		return -1, err
	}
	switch m.reset {
	case ResetEarliest:
		return l.LogStartOffset(), nil
	case ResetLatest:
		return l.HighWatermark(), nil
	}
	return -1, fmt.Errorf("%w: group %s, %s-%d", cause, m.g.id, tp.Topic, tp.Partition)
}

// consume reads up to max records of tp at the member's position and moves
// it; a position outside the retained log is reset once.
func (m *GroupMember) consume(tp TopicPartition, max int) ([]Record, error) {
	t := m.g.e.Topic(tp.Topic)
	if t == nil {
		return nil, nil // deleted since the assignment: the next Poll rebalances
	}
	for attempt := 0; ; attempt++ {
		// Transaction markers are never handed to the application, and
		// the position moves past them (a Kafka consumer's does).
		recs, next, err := t.consumeAt(tp.Partition, m.pos[tp], max, true)
		if errors.Is(err, ErrOffsetOutOfRange) && attempt == 0 {
			off, rerr := m.resetPosition(tp, err)
			if rerr != nil {
				return nil, rerr
			}
			m.pos[tp] = off
			continue
		}
		if next > m.pos[tp] {
			m.pos[tp] = next
		}
		return recs, err
	}
}

// Position returns the member's next offset on tp and whether it has one
// (it has after a Poll that took tp).
func (m *GroupMember) Position(tp TopicPartition) (int64, bool) {
	off, ok := m.pos[tp]
	return off, ok
}

// Commit makes the member's positions of the partitions it owns now the
// group's committed offsets (one durable write). Positions of partitions
// the group moved to another member since are not committed.
func (m *GroupMember) Commit() error {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.left {
		return ErrMemberLeft
	}
	m.dropLost()
	offs := map[TopicPartition]int64{}
	for _, tp := range m.owned {
		if off, ok := m.pos[tp]; ok {
			offs[tp] = off
		}
	}
	if len(offs) == 0 {
		return nil
	}
	return g.e.commitOffsets(g.id, offs)
}

// dropLost forgets the positions of partitions rebalances took from the
// member (g.mu held): if one comes back, it starts at the committed offset.
func (m *GroupMember) dropLost() {
	for tp := range m.lost {
		delete(m.pos, tp)
	}
	clear(m.lost)
}
