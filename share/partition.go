package share

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// RecordState is a record's delivery state, with Kafka's ids (the
// DeliveryState of a state batch) and Strata's ARCHIVING.
type RecordState int8

const (
	Available    RecordState = 0 // may be acquired
	Acquired     RecordState = 1 // locked to a member until acknowledged or the lock expires
	Acknowledged RecordState = 2 // accepted: terminal
	Archiving    RecordState = 3 // Strata: on its way to the dead-letter topic, then Archived
	Archived     RecordState = 4 // rejected, past the delivery count limit, or a gap: terminal
)

func (s RecordState) String() string {
	switch s {
	case Available:
		return "AVAILABLE"
	case Acquired:
		return "ACQUIRED"
	case Acknowledged:
		return "ACKNOWLEDGED"
	case Archiving:
		return "ARCHIVING"
	case Archived:
		return "ARCHIVED"
	}
	return "UNKNOWN"
}

func (s RecordState) terminal() bool { return s == Acknowledged || s == Archived }

// Reason says why a record is ARCHIVING (the dead-letter header).
type Reason int8

const (
	ReasonNone          Reason = iota
	ReasonRejected             // a member acknowledged it with REJECT
	ReasonDeliveryLimit        // it was delivered group.share.delivery.count.limit times
)

func (r Reason) String() string {
	switch r {
	case ReasonRejected:
		return "rejected"
	case ReasonDeliveryLimit:
		return "delivery count limit"
	}
	return "none"
}

// Message is Kafka's text of the reason: the dead letter's
// __dlq.errors.message header (KIP-1191).
func (r Reason) Message() string {
	switch r {
	case ReasonRejected:
		return "Offset rejected by client."
	case ReasonDeliveryLimit:
		return "Offset delivery count exceeded the threshold."
	}
	return ""
}

// AckType is an acknowledgement type, with the wire ids of ShareFetch and
// ShareAcknowledge AcknowledgeTypes.
type AckType int8

const (
	AckGap     AckType = 0 // the offset is no record (compaction, control batch): archived
	AckAccept  AckType = 1 // processed: ACKNOWLEDGED
	AckRelease AckType = 2 // give it back: AVAILABLE (ARCHIVED/ARCHIVING at the limit)
	AckReject  AckType = 3 // unprocessable: ARCHIVED (ARCHIVING with a dead-letter topic)
	AckRenew   AckType = 4 // KIP-1222 (Kafka 4.2): extend the acquisition lock, stay ACQUIRED
)

// AckBatch acknowledges offsets First..Last: Types holds one type for all
// of them or one per offset (ShareAcknowledge's AcknowledgementBatches).
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// AcquiredRecords is a run of consecutive offsets acquired by one call
// with the same delivery count (ShareFetch's AcquiredRecords).
type AcquiredRecords struct {
	First, Last int64
	Count       int16
}

// DeadLetter is a record that entered ARCHIVING: the shell writes it to the
// dead-letter topic and then calls DeadLettered.
type DeadLetter struct {
	Offset int64
	Count  int16
	Reason Reason
}

// Effects is what a transition asks of the shell.
type Effects struct {
	// Write is a ShareUpdate to persist (start offset and the batches
	// whose persisted form changed), nil when nothing persistent changed.
	// Answer the request that caused it only once it is durable.
	Write *State
	// DeadLetters entered ARCHIVING in this transition.
	DeadLetters []DeadLetter
	// Available is set when records became AVAILABLE again (a waiting
	// ShareFetch may be answered).
	Available bool
}

type record struct {
	state     RecordState
	count     int16
	reason    Reason
	member    string
	lockUntil int64 // Acquired: the lock expires at this time (ms)
}

// persisted is the record's persisted form (ACQUIRED n -> AVAILABLE n-1).
func (r record) persisted() (RecordState, int16, Reason) {
	if r.state == Acquired {
		return Available, r.count - 1, ReasonNone
	}
	return r.state, r.count, r.reason
}

// Partition is the state of one share-partition: a pure state machine.
// It reads no clock (every transition takes nowMs), does no I/O and starts
// no goroutine; it is not safe for concurrent use (its owner serializes
// calls). The window recs covers offsets [start, end): start is the SPSO,
// end is one past the highest offset ever acquired (Kafka's SPEO is
// end-1 while the window is not empty).
type Partition struct {
	cfg        Config
	stateEpoch int32
	start, end int64
	recs       []record // recs[i] is offset start+i
	acquired   int      // records in Acquired
	archiving  int      // records in Archiving
	// archivingSince is when the records in Archiving began to be some
	// (ms, the nowMs of the transition that made the first of them
	// ARCHIVING while none was), 0 while none is: State.ArchivingSinceMs.
	archivingSince int64
}

// New returns the state of a share-partition that has none persisted,
// starting at startOffset: the offset share.auto.offset.reset gave (see
// Reset.Timestamp).
func New(cfg Config, startOffset int64) *Partition {
	return &Partition{cfg: cfg.withDefaults(), start: max(startOffset, 0), end: max(startOffset, 0)}
}

// Restore rebuilds a share-partition from its persisted state.
func Restore(cfg Config, s State) (*Partition, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	p := &Partition{cfg: cfg.withDefaults(), stateEpoch: s.StateEpoch, start: s.StartOffset, end: s.StartOffset}
	p.archivingSince = max(s.ArchivingSinceMs, 0)
	for _, b := range s.Batches {
		for p.end < b.First {
			p.recs = append(p.recs, record{})
			p.end++
		}
		for o := b.First; o <= b.Last; o++ {
			r := record{state: b.State, count: b.Count}
			if b.State == Archiving {
				r.reason = b.Reason
				if r.reason == ReasonNone {
					r.reason = ReasonRejected
				}
				p.archiving++
			}
			p.recs = append(p.recs, r)
			p.end++
		}
	}
	p.advance()
	if p.archiving == 0 {
		p.archivingSince = 0
	}
	return p, nil
}

// SetConfig changes the configuration from now on (a group config
// changed): records already acquired keep their lock's expiry, the next
// acquisitions, releases and expiries follow cfg. Without DeadLetter, the
// records still ARCHIVING (their dead letters not written) are archived:
// the group no longer has a dead-letter topic to write them to (the
// operator's way out of a dead-letter topic that cannot be written). The
// shell persists the Effects' Write.
func (p *Partition) SetConfig(cfg Config) Effects {
	p.cfg = cfg.withDefaults()
	c := newChanges()
	if !p.cfg.DeadLetter {
		for i := range p.recs {
			if r := &p.recs[i]; r.state == Archiving {
				r.state, r.reason = Archived, ReasonNone
				p.unarchiving()
				c.touch(p.start + int64(i))
			}
		}
		c.startMoved = p.advance()
	}
	return p.effects(c, Effects{})
}

// StartOffset is the SPSO.
func (p *Partition) StartOffset() int64 { return p.start }

// EndOffset is one past the highest offset acquired so far.
func (p *Partition) EndOffset() int64 { return p.end }

// StateEpoch is the state epoch (bumped by ResetStart).
func (p *Partition) StateEpoch() int32 { return p.stateEpoch }

// InFlight is the number of offsets in the window [SPSO, end).
func (p *Partition) InFlight() int { return len(p.recs) }

// Record returns the state and delivery count of offset o (offsets outside
// the window: below it terminal, above it AVAILABLE with count 0).
func (p *Partition) Record(o int64) (RecordState, int16, string) {
	switch {
	case o < p.start:
		return Archived, 0, ""
	case o >= p.end:
		return Available, 0, ""
	}
	r := p.recs[o-p.start]
	return r.state, r.count, r.member
}

// Snapshot is the whole persisted state (a ShareSnapshot).
func (p *Partition) Snapshot() State {
	return p.stateOf(p.start, p.end)
}

// ArchivingSince is when the records now ARCHIVING began to be some (the
// nowMs of the transition that made the first of them ARCHIVING while none
// was), 0 when none is or the state was restored from a snapshot that did
// not record it: a dead letter written for any of them has a timestamp
// (the shell's clock when it wrote it) at or after it.
func (p *Partition) ArchivingSince() int64 { return p.archivingSince }

// stateOf returns the persisted state of offsets [from, to) as an update.
func (p *Partition) stateOf(from, to int64) State {
	s := State{StateEpoch: p.stateEpoch, StartOffset: p.start, ArchivingSinceMs: p.archivingSince}
	from, to = max(from, p.start), min(to, p.end)
	for o := from; o < to; o++ {
		st, n, why := p.recs[o-p.start].persisted()
		s.Batches = append(s.Batches, StateBatch{First: o, Last: o, State: st, Count: n, Reason: why})
	}
	return normalize(s)
}

// DeadLetters lists the records in ARCHIVING, for a shell that restored
// the state to write them (again) to the dead-letter topic.
func (p *Partition) DeadLetters() []DeadLetter {
	var out []DeadLetter
	for i, r := range p.recs {
		if r.state == Archiving {
			out = append(out, DeadLetter{Offset: p.start + int64(i), Count: r.count, Reason: r.reason})
		}
	}
	return out
}

// NextDeadline is when the earliest acquisition lock expires (Tick is due
// then), or -1 when no record is acquired.
func (p *Partition) NextDeadline() int64 {
	if p.acquired == 0 {
		return -1
	}
	next := int64(-1)
	for _, r := range p.recs {
		if r.state == Acquired && (next < 0 || r.lockUntil < next) {
			next = r.lockUntil
		}
	}
	return next
}

// changes tracks the offsets a transition touched, for its Write.
type changes struct {
	lo, hi     int64 // touched offsets [lo, hi]; lo > hi: none
	startMoved bool
}

func newChanges() changes { return changes{lo: 1<<63 - 1, hi: -1} }

func (c *changes) touch(o int64) { c.lo, c.hi = min(c.lo, o), max(c.hi, o) }

func (p *Partition) effects(c changes, e Effects) Effects {
	if c.startMoved || c.lo <= c.hi {
		w := State{StateEpoch: p.stateEpoch, StartOffset: p.start, ArchivingSinceMs: p.archivingSince}
		if c.lo <= c.hi {
			w.Batches = p.explicit(c.lo, c.hi+1)
		}
		e.Write = &w
	}
	return e
}

// explicit is stateOf's batches without dropping AVAILABLE count-0 runs
// (an update must say that an offset went back to that).
func (p *Partition) explicit(from, to int64) []StateBatch {
	from, to = max(from, p.start), min(to, p.end)
	var out []StateBatch
	for o := from; o < to; o++ {
		st, n, why := p.recs[o-p.start].persisted()
		if k := len(out); k > 0 && out[k-1].State == st && out[k-1].Count == n && out[k-1].Reason == why {
			out[k-1].Last = o
			continue
		}
		out = append(out, StateBatch{First: o, Last: o, State: st, Count: n, Reason: why})
	}
	return out
}

// unarchiving counts a record that left Archiving.
func (p *Partition) unarchiving() {
	if p.archiving--; p.archiving <= 0 {
		p.archiving, p.archivingSince = 0, 0
	}
}

// advance moves the SPSO past the terminal head of the window.
func (p *Partition) advance() bool {
	n := 0
	for n < len(p.recs) && p.recs[n].state.terminal() {
		n++
	}
	if n == 0 {
		return false
	}
	p.recs = append(p.recs[:0], p.recs[n:]...)
	p.start += int64(n)
	return true
}

// release ends an acquisition that was not acknowledged (lock expiry,
// RELEASE, the member left): AVAILABLE again, or at the delivery count
// limit ARCHIVED (ARCHIVING with a dead-letter topic).
func (p *Partition) release(nowMs, o int64, r *record, e *Effects) {
	r.member, r.lockUntil = "", 0
	p.acquired--
	if r.count >= p.cfg.DeliveryCountLimit {
		p.archive(nowMs, o, r, ReasonDeliveryLimit, e)
		return
	}
	r.state = Available
	e.Available = true
}

func (p *Partition) archive(nowMs, o int64, r *record, why Reason, e *Effects) {
	if !p.cfg.DeadLetter {
		r.state = Archived
		return
	}
	r.state, r.reason = Archiving, why
	if p.archiving == 0 {
		p.archivingSince = max(nowMs, 1) // 0 means unknown
	}
	p.archiving++
	e.DeadLetters = append(e.DeadLetters, DeadLetter{Offset: o, Count: r.count, Reason: why})
}

// Tick expires the acquisition locks due at nowMs.
func (p *Partition) Tick(nowMs int64) Effects {
	var e Effects
	c := newChanges()
	p.expire(nowMs, &c, &e)
	c.startMoved = p.advance()
	return p.effects(c, e)
}

func (p *Partition) expire(nowMs int64, c *changes, e *Effects) {
	if p.acquired == 0 {
		return
	}
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired && r.lockUntil <= nowMs {
			o := p.start + int64(i)
			p.release(nowMs, o, r, e)
			c.touch(o)
		}
	}
}

// Acquire locks up to maxRecords records for member at nowMs: first the
// AVAILABLE ones in the window (redeliveries, lowest offsets first), then
// new records from the end of the window up to logEnd (the high watermark,
// or the last stable offset for read_committed), as far as
// group.share.partition.max.record.locks lets the window grow. Each
// acquired record's delivery count goes up by one and its lock expires at
// nowMs + group.share.record.lock.duration.ms. Locks due at nowMs expire
// first. Acquiring writes nothing (ACQUIRED is not persisted) unless an
// expiry did.
func (p *Partition) Acquire(nowMs int64, member string, maxRecords int, logEnd int64) ([]AcquiredRecords, Effects) {
	var e Effects
	c := newChanges()
	p.expire(nowMs, &c, &e)
	c.startMoved = p.advance()
	if member == "" || maxRecords <= 0 {
		return nil, p.effects(c, e)
	}
	var out []AcquiredRecords
	lock := nowMs + p.cfg.LockDurationMs
	take := func(o int64, r *record) {
		r.state, r.member, r.lockUntil = Acquired, member, lock
		if r.count < 1<<15-1 {
			r.count++
		}
		p.acquired++
		maxRecords--
		if k := len(out); k > 0 && out[k-1].Last+1 == o && out[k-1].Count == r.count {
			out[k-1].Last = o
			return
		}
		out = append(out, AcquiredRecords{First: o, Last: o, Count: r.count})
	}
	for i := 0; i < len(p.recs) && maxRecords > 0; i++ {
		if r := &p.recs[i]; r.state == Available {
			take(p.start+int64(i), r)
		}
	}
	for maxRecords > 0 && p.end < logEnd && len(p.recs) < p.cfg.MaxRecordLocks {
		p.recs = append(p.recs, record{})
		p.end++
		take(p.end-1, &p.recs[len(p.recs)-1])
	}
	return out, p.effects(c, e)
}

// AckError is a refused acknowledgement: Kafka's error code and message.
type AckError struct {
	Code int16
	Msg  string
}

func (e *AckError) Error() string { return e.Msg }

func ackErr(code int16, msg string) *AckError { return &AckError{Code: code, Msg: msg} }

// Acknowledge applies member's acknowledgements at nowMs, all or none:
// every offset must be in the window and ACQUIRED by member, or nothing
// changes and the error is INVALID_RECORD_STATE with Kafka's message (a
// malformed batch is INVALID_REQUEST). Locks due at nowMs expire first, so
// a record whose lock ran out cannot be acknowledged. ACCEPT makes the
// record ACKNOWLEDGED, RELEASE AVAILABLE (ARCHIVED at the delivery count
// limit), REJECT ARCHIVED, GAP ARCHIVED, RENEW extends its lock to nowMs +
// the lock duration (not persisted). The SPSO then moves past the
// terminal head of the window.
func (p *Partition) Acknowledge(nowMs int64, member string, batches []AckBatch) (Effects, *AckError) {
	var e Effects
	c := newChanges()
	p.expire(nowMs, &c, &e)
	c.startMoved = p.advance()
	pre := p.effects(c, e)
	for _, b := range batches {
		n := b.Last - b.First + 1
		switch {
		case b.First < 0 || b.Last < b.First:
			return pre, ackErr(kerr.InvalidRequest.Code, "The acknowledgement batch's last offset is before its first offset.")
		case len(b.Types) != 1 && int64(len(b.Types)) != n:
			return pre, ackErr(kerr.InvalidRequest.Code, "The acknowledgement batch has neither one type nor one type per offset.")
		}
		for _, t := range b.Types {
			if t < AckGap || t > AckRenew {
				return pre, ackErr(kerr.InvalidRequest.Code, "Unknown acknowledgement type.")
			}
		}
		if b.First < p.start || b.Last >= p.end {
			return pre, ackErr(kerr.InvalidRecordState.Code, "Batch record not found. The request batch offsets are not found in the cache.")
		}
		for o := b.First; o <= b.Last; o++ {
			r := &p.recs[o-p.start]
			if r.state != Acquired {
				return pre, ackErr(kerr.InvalidRecordState.Code, "The batch cannot be acknowledged. The batch is not in the acquired state.")
			}
			if r.member != member {
				return pre, ackErr(kerr.InvalidRecordState.Code, "Member is not the owner of batch record")
			}
		}
	}
	// Overlapping batches acknowledge an offset twice: the second sees it
	// no longer ACQUIRED, as Kafka would.
	seen := map[int64]bool{}
	for _, b := range batches {
		for o := b.First; o <= b.Last; o++ {
			if seen[o] {
				return pre, ackErr(kerr.InvalidRecordState.Code, "The batch cannot be acknowledged. The batch is not in the acquired state.")
			}
			seen[o] = true
		}
	}
	for _, b := range batches {
		for o := b.First; o <= b.Last; o++ {
			t := b.Types[0]
			if len(b.Types) > 1 {
				t = b.Types[o-b.First]
			}
			r := &p.recs[o-p.start]
			switch t {
			case AckRenew:
				r.lockUntil = nowMs + p.cfg.LockDurationMs
				continue
			case AckAccept:
				r.state = Acknowledged
				r.member, r.lockUntil = "", 0
				p.acquired--
			case AckRelease:
				p.release(nowMs, o, r, &e)
			case AckReject:
				r.member, r.lockUntil = "", 0
				p.acquired--
				p.archive(nowMs, o, r, ReasonRejected, &e)
			case AckGap:
				r.state = Archived
				r.member, r.lockUntil = "", 0
				p.acquired--
			}
			c.touch(o)
		}
	}
	c.startMoved = p.advance() || c.startMoved
	return p.effects(c, e), nil
}

// ReleaseMember releases every record member holds (its share session
// closed or it left the group), as a lock expiry would.
func (p *Partition) ReleaseMember(nowMs int64, member string) Effects {
	var e Effects
	c := newChanges()
	p.expire(nowMs, &c, &e)
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired && r.member == member {
			o := p.start + int64(i)
			p.release(nowMs, o, r, &e)
			c.touch(o)
		}
	}
	c.startMoved = p.advance()
	return p.effects(c, e)
}

// DeadLettered marks the ARCHIVING records in [first, last] ARCHIVED once
// the shell has written them to the dead-letter topic; offsets in another
// state are left alone (a repeat after a failover is harmless). It returns
// how many records it archived.
func (p *Partition) DeadLettered(first, last int64) (int, Effects) {
	c := newChanges()
	n := 0
	for o := max(first, p.start); o <= last && o < p.end; o++ {
		if r := &p.recs[o-p.start]; r.state == Archiving {
			r.state, r.reason = Archived, ReasonNone
			p.unarchiving()
			c.touch(o)
			n++
		}
	}
	c.startMoved = p.advance()
	return n, p.effects(c, Effects{})
}

// AdvanceLogStart drops the records below the log start offset (retention
// or DeleteRecords removed them): the SPSO moves up to it. ARCHIVING
// records dropped this way can no longer be dead-lettered.
func (p *Partition) AdvanceLogStart(logStart int64) Effects {
	if logStart <= p.start {
		return Effects{}
	}
	n := min(logStart-p.start, int64(len(p.recs)))
	for _, r := range p.recs[:n] {
		switch r.state {
		case Acquired:
			p.acquired--
		case Archiving:
			p.unarchiving()
		}
	}
	p.recs = append(p.recs[:0], p.recs[n:]...)
	p.start = logStart
	p.end = max(p.end, logStart)
	c := newChanges()
	c.startMoved = true
	p.advance()
	return p.effects(c, Effects{})
}

// ResetStart sets the SPSO (AlterShareGroupOffsets, or the offset reset of
// a share-partition whose group is empty): the window empties and the
// state epoch goes up, and the write replaces the persisted state. It is
// refused (false) while records are acquired: Kafka only alters the
// offsets of an empty share group.
func (p *Partition) ResetStart(offset int64) (bool, Effects) {
	if p.acquired > 0 || offset < 0 {
		return false, Effects{}
	}
	p.recs = p.recs[:0]
	p.start, p.end = offset, offset
	p.archiving, p.archivingSince = 0, 0
	p.stateEpoch++
	w := State{StateEpoch: p.stateEpoch, StartOffset: offset}
	return true, Effects{Write: &w}
}
