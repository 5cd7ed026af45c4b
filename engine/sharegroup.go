package engine

// Embedded share groups (KIP-932's queues, issue 24): in-process members of
// a named share group acquire records of the topics they subscribe to,
// every member from every partition, and acknowledge each record: accept
// (done), release (deliver it again), reject (archive it) or renew (extend
// the lock). An acquired record is locked to its member until it is
// acknowledged or the acquisition lock (group.share.record.lock.duration.ms)
// expires; then it is delivered again with its delivery count one higher,
// and a record delivered group.share.delivery.count.limit times is archived
// instead. Two members never hold the same record at once.
//
// The state of each share-partition (the group on one topic-partition) is
// package share's pure state machine, share.Partition, the same core the
// broker's ShareFetch and ShareAcknowledge run: this file only serializes
// its calls (one mutex per group), gives it the engine's clock
// (Options.Now) and the partition's log start and high watermark, reads the
// acquired records and persists what it asks. Offsets acquired that hold no
// record (control records, compacted away) are acknowledged as gaps on the
// member's behalf, so they never reach the application.
//
// Durability: every transition that changes a share-partition's persistent
// state (its start offset, delivery states and counts) appends the
// partition's whole snapshot to the compacted internal topic
// __share_group_state (share.StateTopic, created on first use), keyed and
// encoded as the broker's share groups do (share.StateKey, share.EncodeState),
// and the call returns once it is durable. A share-partition used for the
// first time is restored from its last snapshot there, so an engine reopened
// on the same directory keeps accepted and archived records done and
// delivery counts as they were. As KIP-932 specifies, an acquisition is not
// persisted: records acquired when the engine closed are delivered again
// after the reopen, with the delivery count they had before that
// acquisition. Because the records are the broker's, a broker serving the
// data directory later continues the group where the embedded one left it
// (and the reverse); do not serve one group id both ways at once, each side
// would hold its own state.
//
// Not here: dead-letter topics (KIP-1191). The writer of dead letters is
// the broker's (broker/sharehost/dlq.go); an embedded share group archives a
// rejected record or one at the delivery count limit without writing it
// anywhere, and a restored share-partition's records still waiting for
// their dead letter (ARCHIVING, left by a broker) are archived, as the
// broker does when a group's dead-letter topic is unset. (Moving a range
// of records to a dead-letter topic by hand, and re-driving it, is
// Engine.MoveToDeadLetter and RedriveDeadLetters, deadletter.go, for
// consumer groups; not a share group's path.) Membership is
// not persisted and there are no session timeouts: members live in the
// process, and a member that stops without Leave gives its records back when
// their locks expire. Reads are read_uncommitted (up to the high watermark).

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/share"
)

// ShareAck is an acknowledgement type (share.AckType).
type ShareAck = share.AckType

// Acknowledgement types of embedded share groups.
const (
	ShareAccept  ShareAck = share.AckAccept  // processed: ACKNOWLEDGED, never delivered again
	ShareRelease ShareAck = share.AckRelease // give it back: delivered again (archived at the delivery count limit)
	ShareReject  ShareAck = share.AckReject  // unprocessable: ARCHIVED, never delivered again
	ShareRenew   ShareAck = share.AckRenew   // keep it: the lock runs for another lock duration from now
)

// ShareRecordState is a record's delivery state in a share group
// (share.RecordState).
type ShareRecordState = share.RecordState

// Delivery states of a record in a share group.
const (
	ShareAvailable    ShareRecordState = share.Available
	ShareAcquired     ShareRecordState = share.Acquired
	ShareAcknowledged ShareRecordState = share.Acknowledged
	ShareArchived     ShareRecordState = share.Archived
)

// ErrInvalidRecordState: an acknowledgement named a record that is not
// acquired by the member (never acquired, already acknowledged, its lock
// expired, or held by another member). Nothing was acknowledged.
var ErrInvalidRecordState = errors.New("engine: invalid record state")

// ShareGroupOptions configure an embedded share group; zero fields take
// Kafka's defaults.
type ShareGroupOptions struct {
	// LockDuration is group.share.record.lock.duration.ms (30 s).
	LockDuration time.Duration
	// DeliveryCountLimit is group.share.delivery.count.limit (5): a
	// record delivered this many times is archived instead of being
	// delivered again.
	DeliveryCountLimit int16
	// MaxRecordLocks is group.share.partition.max.record.locks (2000):
	// the most offsets a share-partition's in-flight window may span.
	MaxRecordLocks int
	// Reset is share.auto.offset.reset, where a share-partition with no
	// state starts: ResetLatest ("", Kafka's default) or ResetEarliest.
	Reset OffsetReset
}

// ShareRecord is a record Acquire returns: its topic, the record and how
// many times it has been delivered (1 the first time).
type ShareRecord struct {
	Topic string
	Record
	DeliveryCount int16
}

// ShareOffsets describe one share-partition: its start offset (every
// offset below is done: acknowledged or archived), one past the highest
// offset acquired so far, and the offsets in between (in flight).
type ShareOffsets struct {
	Start, End int64
	InFlight   int
}

// ShareGroup is an embedded share group: Engine.ShareGroup returns the same
// one for the same id. Safe for concurrent use.
type ShareGroup struct {
	e     *Engine
	id    string
	cfg   share.Config
	reset OffsetReset

	mu      sync.Mutex
	parts   map[shareGroupPart]*embeddedSharePart
	members map[string]*ShareMember
	nextID  int
}

// shareGroupKey keys share groups in Engine.groups, apart from the
// consumer groups' string keys.
type shareGroupKey struct{ id string }

type shareGroupPart struct {
	topicID [16]byte
	part    int32
}

type embeddedSharePart struct {
	p   *share.Partition
	t   *Topic
	l   *Log
	tp  TopicPartition
	key []byte // its share.StateKey
}

// ShareMember is one member of an embedded share group. Its methods may be
// called from any goroutine.
type ShareMember struct {
	g      *ShareGroup
	id     string
	topics []string
	left   bool // under g.mu
	next   int  // under g.mu: the partition Acquire starts at
}

// ShareGroup returns the embedded share group id, creating it on first use
// with opts; later calls return the same group and must pass the same
// options (or zero ones).
func (e *Engine) ShareGroup(id string, opts ShareGroupOptions) (*ShareGroup, error) {
	if id == "" || len(id) > 32767 {
		return nil, fmt.Errorf("%w: group id of %d bytes", ErrInvalidConfig, len(id))
	}
	reset := opts.Reset
	switch reset {
	case "":
		reset = ResetLatest
	case ResetLatest, ResetEarliest:
	default:
		return nil, fmt.Errorf("%w: share.auto.offset.reset %q (want %q or %q)", ErrInvalidConfig, opts.Reset, ResetEarliest, ResetLatest)
	}
	if opts.LockDuration < 0 || opts.DeliveryCountLimit < 0 || opts.MaxRecordLocks < 0 {
		return nil, fmt.Errorf("%w: negative share group option", ErrInvalidConfig)
	}
	cfg := share.Config{LockDurationMs: opts.LockDuration.Milliseconds(), DeliveryCountLimit: opts.DeliveryCountLimit,
		MaxRecordLocks: opts.MaxRecordLocks}
	switch {
	case opts.LockDuration == 0:
		cfg.LockDurationMs = share.DefaultLockDurationMs
	case cfg.LockDurationMs == 0:
		cfg.LockDurationMs = 1
	}
	if cfg.DeliveryCountLimit == 0 {
		cfg.DeliveryCountLimit = share.DefaultDeliveryCountLimit
	}
	if cfg.MaxRecordLocks == 0 {
		cfg.MaxRecordLocks = share.DefaultMaxRecordLocks
	}
	v, _ := e.groups.LoadOrStore(shareGroupKey{id}, &ShareGroup{e: e, id: id, cfg: cfg, reset: reset,
		parts: map[shareGroupPart]*embeddedSharePart{}, members: map[string]*ShareMember{}})
	g := v.(*ShareGroup)
	if opts != (ShareGroupOptions{}) && (g.cfg != cfg || g.reset != reset) {
		return nil, fmt.Errorf("%w: share group %q exists with other options", ErrInvalidConfig, id)
	}
	return g, nil
}

// ID returns the group id.
func (g *ShareGroup) ID() string { return g.id }

// Members returns the ids of the current members, sorted.
func (g *ShareGroup) Members() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Join adds a member that acquires records of topics (topics that do not
// exist yet are read once created).
func (g *ShareGroup) Join(topics ...string) (*ShareMember, error) {
	if len(topics) == 0 {
		return nil, fmt.Errorf("%w: a member subscribes to no topic", ErrInvalidConfig)
	}
	ts := slices.Clone(topics)
	slices.Sort(ts)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextID++
	m := &ShareMember{g: g, id: fmt.Sprintf("%s-share-member-%d", g.id, g.nextID), topics: slices.Compact(ts)}
	g.members[m.id] = m
	return m, nil
}

// ID returns the member id (assigned by Join).
func (m *ShareMember) ID() string { return m.id }

// pending is a set of appends to __share_group_state to wait for.
type pending []struct {
	l   *Log
	off int64
}

func (w pending) wait() error {
	var first error
	for _, a := range w {
		done := make(chan error, 1)
		a.l.WhenDurable(a.off, func(err error) { done <- err })
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Acquire locks up to max records for the member, from the partitions of
// its topics in turn, and returns them (it does not wait for records):
// first records released or whose lock expired (redeliveries), then new
// ones, each partition in offset order. Each stays locked to the member
// for the group's lock duration from the engine's clock, until the member
// acknowledges it.
func (m *ShareMember) Acquire(max int) ([]ShareRecord, error) {
	if max <= 0 {
		return nil, nil
	}
	g := m.g
	type got struct {
		sp  *embeddedSharePart
		t   *Topic // sp.t when acquired (sp's fields are g.mu's)
		tp  TopicPartition
		acq []share.AcquiredRecords
	}
	var gots []got
	var w pending
	g.mu.Lock()
	if m.left {
		g.mu.Unlock()
		return nil, ErrMemberLeft
	}
	now := g.e.nowMs()
	tps := m.partitions()
	left := max
	var err error
	for i := 0; i < len(tps) && left > 0; i++ {
		tp := tps[(m.next+i)%len(tps)]
		var sp *embeddedSharePart
		if sp, err = g.part(tp, &w); err != nil {
			break
		}
		if err = g.apply(sp, sp.p.AdvanceLogStart(sp.l.LogStartOffset()), &w); err != nil {
			break
		}
		acq, eff := sp.p.Acquire(now, m.id, left, sp.l.HighWatermark())
		if err = g.apply(sp, eff, &w); err != nil {
			break
		}
		for _, a := range acq {
			left -= int(a.Last - a.First + 1)
		}
		if len(acq) > 0 {
			gots = append(gots, got{sp, sp.t, tp, acq})
		}
	}
	if len(tps) > 0 {
		m.next = (m.next + 1) % len(tps)
	}
	g.mu.Unlock()
	if werr := w.wait(); err == nil {
		err = werr
	}

	// Read what was acquired (the records are the member's: no lock
	// needed); offsets with no record are gaps, acknowledged at once.
	var out []ShareRecord
	for _, gt := range gots {
		var gaps, unread []share.AckBatch
		for _, a := range gt.acq {
			recs, rerr := gt.t.consume(gt.tp.Partition, a.First, int(a.Last-a.First+1), true)
			next := a.First
			for _, r := range recs {
				if r.Offset > a.Last {
					break
				}
				if r.Offset > next {
					gaps = append(gaps, share.AckBatch{First: next, Last: r.Offset - 1, Types: []share.AckType{share.AckGap}})
				}
				out = append(out, ShareRecord{Topic: gt.tp.Topic, Record: r, DeliveryCount: a.Count})
				next = r.Offset + 1
			}
			if next <= a.Last {
				b := share.AckBatch{First: next, Last: a.Last, Types: []share.AckType{share.AckGap}}
				if rerr != nil {
					b.Types[0] = share.AckRelease // not read: give it back
					unread = append(unread, b)
				} else {
					gaps = append(gaps, b)
				}
			}
			if rerr != nil && err == nil {
				err = fmt.Errorf("engine: share group %s reading %s-%d: %w", g.id, gt.tp.Topic, gt.tp.Partition, rerr)
			}
		}
		if acks := append(gaps, unread...); len(acks) > 0 {
			// A refusal means a lock already expired: those offsets
			// are acquired again later and acknowledged then.
			_ = m.acknowledge(map[*embeddedSharePart][]share.AckBatch{gt.sp: acks}, false)
		}
	}
	return out, err
}

// partitions lists the partitions of the member's topics that exist now
// (g.mu held).
func (m *ShareMember) partitions() []TopicPartition {
	var out []TopicPartition
	for _, name := range m.topics {
		t := m.g.e.Topic(name)
		if t == nil || t.Deleted() {
			continue
		}
		for p := range t.Partitions() {
			out = append(out, TopicPartition{Topic: name, Partition: p})
		}
	}
	return out
}

// Accept acknowledges records the member acquired as processed.
func (m *ShareMember) Accept(recs ...ShareRecord) error { return m.ackRecords(recs, ShareAccept) }

// Release gives records back: they are delivered again (to any member),
// or archived once delivered DeliveryCountLimit times.
func (m *ShareMember) Release(recs ...ShareRecord) error { return m.ackRecords(recs, ShareRelease) }

// Reject archives records: they are never delivered again.
func (m *ShareMember) Reject(recs ...ShareRecord) error { return m.ackRecords(recs, ShareReject) }

// Renew extends the locks of records for another lock duration from now.
func (m *ShareMember) Renew(recs ...ShareRecord) error { return m.ackRecords(recs, ShareRenew) }

// Acknowledge acknowledges the offsets first..last of one partition, every
// one of which the member must hold, with one type.
func (m *ShareMember) Acknowledge(tp TopicPartition, first, last int64, ack ShareAck) error {
	if first > last {
		return fmt.Errorf("%w: offsets %d..%d", ErrInvalidConfig, first, last)
	}
	return m.ackBatches(map[TopicPartition][]share.AckBatch{tp: {{First: first, Last: last, Types: []share.AckType{ack}}}})
}

func (m *ShareMember) ackRecords(recs []ShareRecord, ack ShareAck) error {
	offs := map[TopicPartition][]int64{}
	for _, r := range recs {
		tp := TopicPartition{Topic: r.Topic, Partition: r.Partition}
		offs[tp] = append(offs[tp], r.Offset)
	}
	byTP := map[TopicPartition][]share.AckBatch{}
	for tp, os := range offs {
		slices.Sort(os)
		var bs []share.AckBatch
		for _, o := range os {
			if k := len(bs); k > 0 && bs[k-1].Last+1 == o {
				bs[k-1].Last = o
				continue
			}
			bs = append(bs, share.AckBatch{First: o, Last: o, Types: []share.AckType{ack}})
		}
		byTP[tp] = bs
	}
	return m.ackBatches(byTP)
}

// ackBatches acknowledges batches of several partitions, all or none.
func (m *ShareMember) ackBatches(byTP map[TopicPartition][]share.AckBatch) error {
	if len(byTP) == 0 {
		return nil
	}
	g := m.g
	g.mu.Lock()
	var w pending
	parts := map[*embeddedSharePart][]share.AckBatch{}
	for tp, bs := range byTP {
		sp, err := g.part(tp, &w)
		if err != nil {
			g.mu.Unlock()
			return errors.Join(err, w.wait())
		}
		parts[sp] = append(parts[sp], bs...)
	}
	g.mu.Unlock()
	if err := w.wait(); err != nil {
		return err
	}
	return m.acknowledge(parts, true)
}

// acknowledge applies acknowledgements to share-partitions at the engine's
// time, all or none: with check, every offset is first checked to be held
// by the member in every partition.
func (m *ShareMember) acknowledge(parts map[*embeddedSharePart][]share.AckBatch, check bool) error {
	g := m.g
	var w pending
	g.mu.Lock()
	if m.left {
		g.mu.Unlock()
		return ErrMemberLeft
	}
	now := g.e.nowMs()
	fail := func(err error) error {
		g.mu.Unlock()
		return errors.Join(err, w.wait())
	}
	if check && len(parts) > 1 {
		for sp, bs := range parts {
			if err := g.apply(sp, sp.p.Tick(now), &w); err != nil {
				return fail(err)
			}
			seen := map[int64]bool{}
			for _, b := range bs {
				for o := b.First; o <= b.Last && b.Last-b.First < share.MaxWindow; o++ {
					st, _, owner := sp.p.Record(o)
					if st != share.Acquired || owner != m.id || seen[o] {
						return fail(fmt.Errorf("%w: %s-%d offset %d is %s, not acquired by %s", ErrInvalidRecordState,
							sp.tp.Topic, sp.tp.Partition, o, st, m.id))
					}
					seen[o] = true
				}
			}
		}
	}
	for sp, bs := range parts {
		eff, aerr := sp.p.Acknowledge(now, m.id, bs)
		if err := g.apply(sp, eff, &w); err != nil {
			return fail(err)
		}
		if aerr != nil {
			return fail(fmt.Errorf("%w: %s-%d: %s", ErrInvalidRecordState, sp.tp.Topic, sp.tp.Partition, aerr.Msg))
		}
	}
	g.mu.Unlock()
	return w.wait()
}

// Leave removes the member from the group; the records it holds are
// released (delivered again, or archived at the delivery count limit).
func (m *ShareMember) Leave() error {
	g := m.g
	var w pending
	g.mu.Lock()
	if m.left {
		g.mu.Unlock()
		return ErrMemberLeft
	}
	m.left = true
	delete(g.members, m.id)
	now := g.e.nowMs()
	var err error
	for _, sp := range g.parts {
		if err = g.apply(sp, sp.p.ReleaseMember(now, m.id), &w); err != nil {
			break
		}
	}
	g.mu.Unlock()
	return errors.Join(err, w.wait())
}

// Offsets describes the group's share-partition on tp (restoring or
// starting it as Acquire would), after the locks due now expired.
func (g *ShareGroup) Offsets(tp TopicPartition) (ShareOffsets, error) {
	var w pending
	g.mu.Lock()
	sp, err := g.part(tp, &w)
	var o ShareOffsets
	if err == nil {
		err = g.apply(sp, sp.p.Tick(g.e.nowMs()), &w)
		o = ShareOffsets{Start: sp.p.StartOffset(), End: sp.p.EndOffset(), InFlight: sp.p.InFlight()}
	}
	g.mu.Unlock()
	return o, errors.Join(err, w.wait())
}

// RecordState returns the delivery state of offset on tp in the group, its
// delivery count and, while it is acquired, the member holding it
// (offsets below the start offset are reported ARCHIVED with count 0:
// done, whether accepted or archived).
func (g *ShareGroup) RecordState(tp TopicPartition, offset int64) (ShareRecordState, int16, string, error) {
	var w pending
	g.mu.Lock()
	sp, err := g.part(tp, &w)
	var (
		st     ShareRecordState
		n      int16
		member string
	)
	if err == nil {
		err = g.apply(sp, sp.p.Tick(g.e.nowMs()), &w)
		st, n, member = sp.p.Record(offset)
	}
	g.mu.Unlock()
	return st, n, member, errors.Join(err, w.wait())
}

// part returns the group's share-partition on tp, restoring it from
// __share_group_state or starting it where the group's Reset says
// (persisted at once, so a reopen keeps its start) (g.mu held).
func (g *ShareGroup) part(tp TopicPartition, w *pending) (*embeddedSharePart, error) {
	t := g.e.Topic(tp.Topic)
	if t == nil || t.Deleted() {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, tp.Topic)
	}
	l, err := t.partition(tp.Partition)
	if err != nil {
		return nil, err
	}
	k := shareGroupPart{topicID: t.ID(), part: tp.Partition}
	if sp := g.parts[k]; sp != nil {
		sp.t, sp.l = t, l
		return sp, nil
	}
	sp := &embeddedSharePart{t: t, l: l, tp: tp, key: share.StateKey(g.id, t.ID(), tp.Partition)}
	state, found, err := g.e.readShareState(sp.key)
	if err != nil {
		return nil, err
	}
	if found {
		if sp.p, err = share.Restore(g.cfg, state); err != nil {
			return nil, fmt.Errorf("engine: share group %s, %s-%d: %s: %w", g.id, tp.Topic, tp.Partition, share.StateTopic, err)
		}
		g.parts[k] = sp
		// No dead-letter topic here: ARCHIVING records are archived.
		if err := g.apply(sp, sp.p.SetConfig(g.cfg), w); err != nil {
			return nil, err
		}
		return sp, nil
	}
	start := l.HighWatermark()
	if g.reset == ResetEarliest {
		start = l.LogStartOffset()
	}
	sp.p = share.New(g.cfg, start)
	if err := g.persist(sp, w); err != nil {
		return nil, err
	}
	g.parts[k] = sp
	return sp, nil
}

// apply persists a transition's write (g.mu held).
func (g *ShareGroup) apply(sp *embeddedSharePart, e share.Effects, w *pending) error {
	if e.Write == nil {
		return nil
	}
	return g.persist(sp, w)
}

// persist appends the share-partition's snapshot to __share_group_state
// (g.mu held, so snapshots go in the order of the transitions); w gets
// the append to wait for.
func (g *ShareGroup) persist(sp *embeddedSharePart, w *pending) error {
	v, err := share.EncodeState(sp.p.Snapshot())
	if err != nil {
		return err
	}
	st, err := g.e.shareStateTopic(true)
	if err != nil {
		return err
	}
	p := share.StatePartition(sp.key, st.Partitions())
	l, err := st.partition(p)
	if err != nil {
		return err
	}
	b := builderPool.Get().(*record.Builder)
	defer builderPool.Put(b)
	now := g.e.nowMs()
	b.Reset(record.CodecNone, now)
	b.Add(now, sp.key, v, nil)
	batch, err := b.AppendTo(nil)
	if err != nil {
		return fmt.Errorf("engine: encoding share state: %w", err)
	}
	info, err := l.Append(batch, l.LeaderEpoch())
	if err != nil {
		return fmt.Errorf("engine: share group %s: writing %s: %w", g.id, share.StateTopic, err)
	}
	*w = append(*w, struct {
		l   *Log
		off int64
	}{l, info.LastOffset})
	return nil
}

// shareStatePartitions is share.coordinator.state.topic.num.partitions'
// default, used when an embedded share group creates the topic.
const shareStatePartitions = 50

// shareStateTopic returns __share_group_state, creating it if asked.
func (e *Engine) shareStateTopic(create bool) (*Topic, error) {
	if t := e.Topic(share.StateTopic); (t != nil && !t.Deleted()) || !create {
		return t, nil
	}
	t, err := e.CreateTopic(share.StateTopic, shareStatePartitions, map[string]string{"cleanup.policy": "compact"})
	if errors.Is(err, ErrTopicExists) {
		return e.Topic(share.StateTopic), nil
	}
	return t, err
}

// readShareState returns the last snapshot written under key (one scan of
// its __share_group_state partition); found is false without one or after
// a tombstone.
func (e *Engine) readShareState(key []byte) (share.State, bool, error) {
	st, err := e.shareStateTopic(false)
	if err != nil || st == nil || st.Deleted() {
		return share.State{}, false, err
	}
	p := share.StatePartition(key, st.Partitions())
	l, err := st.partition(p)
	if err != nil {
		return share.State{}, false, err
	}
	var last []byte
	found := false
	for from := l.LogStartOffset(); from < l.HighWatermark(); {
		recs, err := st.Consume(p, from, 4096)
		if errors.Is(err, ErrOffsetOutOfRange) {
			from, last, found = l.LogStartOffset(), nil, false
			continue
		}
		if err != nil {
			return share.State{}, false, err
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if string(r.Key) == string(key) {
				last, found = r.Value, r.Value != nil
			}
		}
		from = recs[len(recs)-1].Offset + 1
	}
	if !found {
		return share.State{}, false, nil
	}
	s, err := share.DecodeState(last)
	if err != nil {
		return share.State{}, false, fmt.Errorf("engine: %s-%d: share state: %w", share.StateTopic, p, err)
	}
	return s, true, nil
}
