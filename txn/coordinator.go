package txn

import (
	"math"
	"slices"
)

// Defaults of Kafka's coordinator configs.
const (
	DefaultMaxTimeoutMs   = 900_000     // transaction.max.timeout.ms
	DefaultIDExpirationMs = 604_800_000 // transactional.id.expiration.ms
)

// Config configures a Coordinator. Zero fields take the defaults.
type Config struct {
	MaxTimeoutMs   int32 // transaction.max.timeout.ms
	IDExpirationMs int64 // transactional.id.expiration.ms
}

// Markers asks the caller to write a COMMIT or ABORT control batch for
// ProducerID/ProducerEpoch with CoordinatorEpoch into every partition of
// Partitions (WriteTxnMarkers), retrying each until it succeeds or the
// partition no longer exists, and then to call MarkersDone.
type Markers struct {
	TransactionalID  string
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	Partitions       []TopicPartition
}

// Step is what the caller does after a Coordinator call, in this order:
// append Write (when non-nil) to the __transaction_state partition and
// call WriteDone with the outcome; send Markers (when non-nil); answer the
// waiting client with Reply (when HasReply).
type Step struct {
	Write    *Metadata // record to append: key EncodeKey(ID), value EncodeValue (nil value for Dead)
	Markers  *Markers
	HasReply bool
	Reply    Reply
}

// Reply is the answer to the client's request. ProducerID and
// ProducerEpoch are set for InitProducerId and EndTxn (v5+).
type Reply struct {
	Err           ErrorCode
	ProducerID    int64
	ProducerEpoch int16
}

func reply(err ErrorCode) Step {
	return Step{HasReply: true, Reply: Reply{Err: err, ProducerID: NoProducerID, ProducerEpoch: NoProducerEpoch}}
}

// op is what a pending log write is for.
type op uint8

const (
	opInit     op = iota + 1 // InitProducerId: reply with the new id and epoch
	opAdd                    // AddPartitions/AddOffsets: reply NONE
	opEnd                    // EndTxn prepare: reply, then markers
	opFence                  // abort written by InitProducerId fencing an ongoing txn: reply CONCURRENT_TRANSACTIONS, then markers
	opTimeout                // abort of a timed-out txn: markers, no reply
	opComplete               // Complete* after markers: nothing
	opExpire                 // tombstone of an expired id: forget it
)

// entry is one transactional id: its durable metadata and at most one
// in-flight transition.
type entry struct {
	md        *Metadata
	pending   *Metadata // the transit being appended, or nil
	pendingOp op
}

// Coordinator is the transaction coordinator's state machine for one
// __transaction_state partition led by this broker (see the package doc).
// It does no I/O and reads no clock: time is a parameter (ms). It is not
// safe for concurrent use: the caller serialises calls (one mutex per
// partition).
type Coordinator struct {
	cfg   Config
	epoch int32 // coordinator epoch: the partition's leader epoch
	txns  map[string]*entry
}

// NewCoordinator returns an empty coordinator for a partition led at
// coordinatorEpoch; fill it with Load before serving requests.
func NewCoordinator(cfg Config, coordinatorEpoch int32) *Coordinator {
	if cfg.MaxTimeoutMs <= 0 {
		cfg.MaxTimeoutMs = DefaultMaxTimeoutMs
	}
	if cfg.IDExpirationMs <= 0 {
		cfg.IDExpirationMs = DefaultIDExpirationMs
	}
	return &Coordinator{cfg: cfg, epoch: coordinatorEpoch, txns: make(map[string]*entry)}
}

// CoordinatorEpoch is the epoch markers carry.
func (c *Coordinator) CoordinatorEpoch() int32 { return c.epoch }

// Get returns a copy of id's durable metadata and whether a transition is
// in flight (DescribeTransactions, ListTransactions).
func (c *Coordinator) Get(id string) (md Metadata, pending bool, ok bool) {
	e := c.txns[id]
	if e == nil {
		return Metadata{}, false, false
	}
	return *e.md.clone(), e.pending != nil, true
}

// IDs returns the transactional ids known, sorted.
func (c *Coordinator) IDs() []string {
	ids := make([]string, 0, len(c.txns))
	for id := range c.txns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// ProducerIDAndEpoch is what a KIP-360 InitProducerId (v3+) sends when the
// producer already has an id.
type ProducerIDAndEpoch struct {
	ProducerID int64
	Epoch      int16
}

// InitProducerID handles InitProducerId with a transactional id. expected
// is nil unless the request carries a producer id (v3+, not -1). newID
// hands out a fresh producer id (IDManager.Next); it is called only when
// one is needed, and its error is returned with nothing changed (the
// caller answers it, e.g. COORDINATOR_NOT_AVAILABLE so the client retries).
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, expected *ProducerIDAndEpoch, nowMs int64, newID func() (int64, error)) (Step, error) {
	if id == "" {
		return reply(InvalidRequest), nil
	}
	if timeoutMs <= 0 || timeoutMs > c.cfg.MaxTimeoutMs {
		return reply(InvalidTransactionTimeout), nil
	}
	e := c.txns[id]
	if e == nil {
		pid, err := newID()
		if err != nil {
			return Step{}, err
		}
		e = &entry{md: &Metadata{
			TransactionalID: id, ProducerID: pid, PrevProducerID: NoProducerID, NextProducerID: NoProducerID,
			ProducerEpoch: NoProducerEpoch, LastProducerEpoch: NoProducerEpoch, TimeoutMs: timeoutMs,
			State: Empty, StartMs: -1, LastUpdateMs: nowMs,
		}}
		c.txns[id] = e
	}
	md := e.md
	if e.pending != nil {
		return reply(ConcurrentTransactions), nil
	}
	if expected != nil && !(md.ProducerEpoch == NoProducerEpoch || expected.ProducerID == md.ProducerID ||
		(expected.ProducerID == md.PrevProducerID && epochExhausted(expected.Epoch))) {
		return reply(ProducerFenced), nil
	}
	switch md.State {
	case PrepareCommit, PrepareAbort:
		return reply(ConcurrentTransactions), nil
	case Ongoing, PrepareEpochFence:
		// Abort the open transaction with a bumped epoch, fencing the old
		// producer; the client retries on CONCURRENT_TRANSACTIONS and
		// gets the next epoch (or a new id) once the abort is complete.
		return c.startAbort(e, opFence, nowMs), nil
	case Empty, CompleteCommit, CompleteAbort:
	default: // Dead: forgotten once its tombstone is written; never here
		return reply(ConcurrentTransactions), nil
	}
	t := md.clone()
	t.TimeoutMs, t.State, t.Partitions, t.StartMs, t.LastUpdateMs = timeoutMs, Empty, nil, -1, nowMs
	t.NextProducerID = NoProducerID
	if epochExhausted(md.ProducerEpoch) && (expected == nil || expected.Epoch == md.ProducerEpoch) {
		pid, err := newID()
		if err != nil {
			return Step{}, err
		}
		// Rotate; LastProducerEpoch lets a retry of this call with the
		// old id and epoch be answered with the new id.
		t.PrevProducerID, t.ProducerID, t.ProducerEpoch, t.LastProducerEpoch = md.ProducerID, pid, 0, NoProducerEpoch
		if expected != nil {
			t.LastProducerEpoch = md.ProducerEpoch
		}
	} else {
		bumped := md.ProducerEpoch + 1
		switch {
		case expected == nil: // a new producer instance
			t.ProducerEpoch, t.LastProducerEpoch = bumped, NoProducerEpoch
		case md.ProducerEpoch == NoProducerEpoch || expected.Epoch == md.ProducerEpoch:
			t.ProducerEpoch, t.LastProducerEpoch = bumped, md.ProducerEpoch
		case expected.Epoch == md.LastProducerEpoch:
			// a retry of a bump that succeeded: answer the same epoch
			t.ProducerEpoch, t.LastProducerEpoch = md.ProducerEpoch, md.LastProducerEpoch
		default:
			return reply(ProducerFenced), nil
		}
	}
	return c.begin(e, t, opInit), nil
}

// begin makes t the pending transit of e and asks for its write.
func (c *Coordinator) begin(e *entry, t *Metadata, o op) Step {
	e.pending, e.pendingOp = t, o
	return Step{Write: t.clone()}
}

// startAbort logs PrepareAbort for e's ongoing transaction with the epoch
// bumped (unless it cannot grow), fencing the producer that opened it. The
// bump is from the durable epoch, so a fence whose write failed and is
// retried bumps once, not twice (Kafka's hasFailedEpochFence).
func (c *Coordinator) startAbort(e *entry, o op, nowMs int64) Step {
	t := e.md.clone()
	if t.ProducerEpoch < math.MaxInt16 {
		t.ProducerEpoch++
	}
	t.LastProducerEpoch = NoProducerEpoch
	t.State, t.LastUpdateMs, t.NextProducerID = PrepareAbort, nowMs, NoProducerID
	return c.begin(e, t, o)
}

// checkProducer is the common id/epoch/pending check of AddPartitions,
// AddOffsets and their verify-only form.
func (c *Coordinator) checkProducer(id string, pid int64, epoch int16) (*entry, ErrorCode) {
	if id == "" {
		return nil, InvalidRequest
	}
	e := c.txns[id]
	switch {
	case e == nil || e.md.ProducerID != pid:
		return nil, InvalidProducerIDMapping
	case e.md.ProducerEpoch != epoch:
		return nil, ProducerFenced
	case e.pending != nil, e.md.State == PrepareCommit, e.md.State == PrepareAbort:
		return nil, ConcurrentTransactions
	}
	return e, None
}

// AddPartitions handles AddPartitionsToTxn (v3, and each transaction of a
// v4+ batch) and AddOffsetsToTxn (with the group's __consumer_offsets
// partition). Every partition shares the answer.
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, tps []TopicPartition, nowMs int64) Step {
	e, code := c.checkProducer(id, pid, epoch)
	if code != None {
		return reply(code)
	}
	md := e.md
	if md.State == Ongoing || md.State == PrepareEpochFence {
		added := false
		for _, tp := range tps {
			if !containsTP(md.Partitions, tp) {
				added = true
				break
			}
		}
		if !added {
			return reply(None)
		}
	}
	t := md.clone()
	if md.State != Ongoing && md.State != PrepareEpochFence {
		t.StartMs, t.Partitions = nowMs, nil
	}
	t.State, t.LastUpdateMs = Ongoing, nowMs
	t.Partitions = unionTPs(t.Partitions, tps)
	return c.begin(e, t, opAdd)
}

// VerifyPartitions handles a verify-only AddPartitionsToTxn (v4+, KIP-890
// part 1, sent by partition leaders before appending a transactional
// batch): code is the error for the whole transaction; otherwise perTP[i]
// is None if tps[i] is in the transaction and TRANSACTION_ABORTABLE if not.
// Nothing changes.
func (c *Coordinator) VerifyPartitions(id string, pid int64, epoch int16, tps []TopicPartition) (code ErrorCode, perTP []ErrorCode) {
	e, code := c.checkProducer(id, pid, epoch)
	if code != None {
		return code, nil
	}
	perTP = make([]ErrorCode, len(tps))
	for i, tp := range tps {
		if e.md.State != Ongoing || !containsTP(e.md.Partitions, tp) {
			perTP[i] = TransactionAbortable
		}
	}
	return None, perTP
}

// EndTxn handles EndTxn. tv2 is true for EndTxn v5+ (KIP-890 part 2: the
// epoch is bumped by every end, and the reply carries the new id and
// epoch); newID is called only if the epoch is exhausted under tv2.
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit, tv2 bool, nowMs int64, newID func() (int64, error)) (Step, error) {
	if id == "" {
		return reply(InvalidRequest), nil
	}
	e := c.txns[id]
	if e == nil {
		return reply(InvalidProducerIDMapping), nil
	}
	md := e.md
	retryOnOverflow := tv2 && md.PrevProducerID == pid && epoch == math.MaxInt16 && md.ProducerEpoch == 0
	retryOnBump := tv2 && int32(md.ProducerEpoch) == int32(epoch)+1
	if md.ProducerID != pid && !retryOnOverflow {
		return reply(InvalidProducerIDMapping), nil
	}
	valid := epoch == md.ProducerEpoch
	if tv2 {
		switch md.State {
		case PrepareCommit, PrepareAbort:
			valid = retryOnBump
		case CompleteCommit, CompleteAbort:
			valid = retryOnBump || retryOnOverflow || epoch == md.ProducerEpoch
		}
	}
	if !valid {
		return reply(ProducerFenced), nil
	}
	if e.pending != nil {
		return reply(ConcurrentTransactions), nil
	}
	ok := Step{HasReply: true, Reply: Reply{Err: None, ProducerID: md.ProducerID, ProducerEpoch: md.ProducerEpoch}}
	switch md.State {
	case Ongoing, PrepareEpochFence:
		t := md.clone()
		t.State, t.LastUpdateMs, t.TV2, t.NextProducerID = PrepareAbort, nowMs, tv2, NoProducerID
		if commit {
			t.State = PrepareCommit
		}
		if tv2 {
			if epochExhausted(md.ProducerEpoch) {
				pid, err := newID()
				if err != nil {
					return Step{}, err
				}
				t.NextProducerID = pid
			}
			t.LastProducerEpoch, t.ProducerEpoch = md.ProducerEpoch, md.ProducerEpoch+1
		}
		return c.begin(e, t, opEnd), nil
	case Empty:
		if !commit && tv2 {
			return c.emptyAbort(e, nowMs, newID)
		}
		return reply(InvalidTxnState), nil
	case CompleteCommit, CompleteAbort:
		retry := !tv2 || retryOnBump || retryOnOverflow
		if commit == (md.State == CompleteCommit) && retry {
			return ok, nil // a retry of an end that completed
		}
		if !commit && tv2 && !retry {
			return c.emptyAbort(e, nowMs, newID)
		}
		return reply(InvalidTxnState), nil
	case PrepareCommit, PrepareAbort:
		if commit != (md.State == PrepareCommit) {
			return reply(InvalidTxnState), nil
		}
		return reply(ConcurrentTransactions), nil
	}
	return reply(InvalidTxnState), nil
}

// emptyAbort is a KIP-890 abort with no partitions added: it bumps the
// epoch (fencing a zombie of the same producer) and, with no markers to
// write, completes as soon as the PrepareAbort record is written.
func (c *Coordinator) emptyAbort(e *entry, nowMs int64, newID func() (int64, error)) (Step, error) {
	md := e.md
	t := md.clone()
	t.State, t.LastUpdateMs, t.TV2, t.StartMs, t.Partitions = PrepareAbort, nowMs, true, nowMs, nil
	t.NextProducerID = NoProducerID
	if epochExhausted(md.ProducerEpoch) {
		pid, err := newID()
		if err != nil {
			return Step{}, err
		}
		t.NextProducerID = pid
	}
	t.LastProducerEpoch, t.ProducerEpoch = md.ProducerEpoch, md.ProducerEpoch+1
	return c.begin(e, t, opEnd), nil
}

// WriteDone reports the outcome of appending the Write of the last Step
// for id (ok: committed to the partition's ISR). On failure the transition
// is dropped and the waiting client, if any, gets NOT_COORDINATOR (the
// caller may answer a more precise error, e.g. when leadership moved).
func (c *Coordinator) WriteDone(id string, ok bool, nowMs int64) Step {
	e := c.txns[id]
	if e == nil || e.pending == nil {
		return Step{}
	}
	t, o := e.pending, e.pendingOp
	e.pending, e.pendingOp = nil, 0
	if !ok {
		if e.md.ProducerEpoch == NoProducerEpoch && e.md.State == Empty {
			delete(c.txns, id) // never written: forget the fresh id
		}
		switch o {
		case opTimeout, opComplete, opExpire:
			return Step{}
		}
		return reply(NotCoordinator)
	}
	e.md = t
	switch o {
	case opInit:
		return Step{HasReply: true, Reply: Reply{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch}}
	case opAdd:
		return reply(None)
	case opEnd:
		s := c.markersStep(e, nowMs)
		s.HasReply = true
		s.Reply = Reply{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch}
		if t.NextProducerID != NoProducerID {
			s.Reply.ProducerID, s.Reply.ProducerEpoch = t.NextProducerID, 0
		}
		return s
	case opFence:
		s := c.markersStep(e, nowMs)
		s.HasReply, s.Reply = true, Reply{Err: ConcurrentTransactions, ProducerID: NoProducerID, ProducerEpoch: NoProducerEpoch}
		return s
	case opTimeout:
		return c.markersStep(e, nowMs)
	case opExpire:
		delete(c.txns, id)
	}
	return Step{}
}

// markersStep asks for e's markers, or, with no partitions, goes straight
// to the Complete* write.
func (c *Coordinator) markersStep(e *entry, nowMs int64) Step {
	md := e.md
	if len(md.Partitions) == 0 {
		return c.complete(e, nowMs)
	}
	return Step{Markers: &Markers{
		TransactionalID: md.TransactionalID, ProducerID: md.ProducerID, ProducerEpoch: md.ProducerEpoch,
		CoordinatorEpoch: c.epoch, Commit: md.State == PrepareCommit, Partitions: slices.Clone(md.Partitions),
	}}
}

// complete logs Complete* for e (rotating to NextProducerID if set).
func (c *Coordinator) complete(e *entry, nowMs int64) Step {
	t := e.md.clone()
	t.State = CompleteAbort
	if e.md.State == PrepareCommit {
		t.State = CompleteCommit
	}
	t.Partitions, t.LastUpdateMs = nil, nowMs
	if t.NextProducerID != NoProducerID {
		t.PrevProducerID, t.ProducerID, t.ProducerEpoch, t.LastProducerEpoch = t.ProducerID, t.NextProducerID, 0, NoProducerEpoch
		t.NextProducerID = NoProducerID
	}
	return c.begin(e, t, opComplete)
}

// MarkersDone reports that every marker of id's Prepare* state is
// written. The returned step writes the Complete* record; if that write
// fails, call MarkersDone again (the markers need not be resent).
func (c *Coordinator) MarkersDone(id string, nowMs int64) Step {
	e := c.txns[id]
	if e == nil || e.pending != nil || (e.md.State != PrepareCommit && e.md.State != PrepareAbort) {
		return Step{}
	}
	return c.complete(e, nowMs)
}

// Tick aborts transactions open longer than their timeout (fencing their
// producer with an epoch bump, as Kafka's abortTimedOutTransactions) and
// expires ids idle for transactional.id.expiration.ms. Call it
// periodically (Kafka: every transaction.abort.timed.out.transaction.cleanup.interval.ms,
// 10 s); steps are in transactional id order.
func (c *Coordinator) Tick(nowMs int64) []Step {
	var steps []Step
	for _, id := range c.IDs() {
		e := c.txns[id]
		if e.pending != nil {
			continue
		}
		md := e.md
		switch md.State {
		case Ongoing, PrepareEpochFence:
			if md.StartMs+int64(md.TimeoutMs) < nowMs {
				steps = append(steps, c.startAbort(e, opTimeout, nowMs))
			}
		case Empty, CompleteCommit, CompleteAbort:
			if md.LastUpdateMs+c.cfg.IDExpirationMs <= nowMs {
				t := md.clone()
				t.State, t.LastUpdateMs = Dead, nowMs
				steps = append(steps, c.begin(e, t, opExpire))
			}
		}
	}
	return steps
}
