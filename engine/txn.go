package engine

// Transactions on the partition side (issue 8): open transactions, the last
// stable offset (LSO), transaction markers and read_committed reads.
//
// # Open transactions
//
// The first transactional batch of a producer (record.Header.Transactional)
// opens its transaction at that batch's first offset
// (producerEntry.txnFirstOffset, snapshotted with the producer state); its
// COMMIT or ABORT marker closes it. The Log keeps the open transactions
// ordered by first offset (openTxns), so the first unstable offset is the
// first entry. As in Kafka's ProducerStateManager, a transaction whose
// marker is appended but not yet below the high watermark stays unstable
// (openTxns.ended) until the HW passes the marker, so a read_committed
// consumer never reads a transaction's records before its outcome is
// committed to the ISR:
//
//	LSO = min(first offset of every open or not-yet-replicated transaction, HW)
//
// The same code applies batches to this state whichever way they reach the
// log: leader appends (Append, AppendTxnMarker: recordProducers), and the
// replay of the log by Open (after a crash, from the newest snapshot),
// truncations and follower appends (syncProducers -> replayProducers, before
// the next append, roll or Close, or before the LSO is read), so a follower
// that becomes leader, or a restarted broker, reports the same LSO and
// aborted transactions as the old leader did.
//
// # Client batches
//
// Kafka's rules (ProducerAppendInfo): a transactional batch needs a
// producer id (INVALID_RECORD); a producer with an open transaction may not
// write a non-transactional batch (ErrInvalidTxnState, INVALID_TXN_STATE);
// an older epoch is INVALID_PRODUCER_EPOCH (producers.go); clients may not
// write control batches (record.Validate: INVALID_RECORD).
//
// # Markers
//
// AppendTxnMarker (WriteTxnMarkers on a partition leader) checks, in Kafka's
// order, the marker's producer epoch (below the producer's:
// ErrInvalidProducerEpoch) and coordinator epoch (below the last one seen
// for the producer: ErrTransactionCoordinatorFenced), then appends the
// marker batch (the bytes txn.AppendMarkerBatch builds: control and
// transactional attributes, base sequence -1, one record with key {0,
// type} and value {0, coordinatorEpoch}) through the normal append path.
// Applying it sets the producer's epoch to the marker's (dropping its
// retained batches if that bumps it: sequences restart at 0), records the
// coordinator epoch, closes the open transaction and, for ABORT, adds the
// aborted transaction index entry (txnindex.go). A marker for a producer
// with no open transaction (a retried marker, or an empty transaction) is
// appended and updates the epochs, but indexes nothing.
//
// # Verification guards (KIP-890)
//
// A partition leader asks the transaction coordinator whether a
// transactional batch belongs to an ongoing transaction before the batch
// may open one (BeginTxnVerification says when; package server asks). The
// answer is only true at the moment it is given: Kafka's VerificationGuard
// closes the gap to the append, and so does txnGuard here. The guard is
// taken before the question and released after the append; a marker of
// the producer appended in between ends it, and the append then fails
// with ErrInvalidTxnState. Appends without a guard (followers, the
// embedded API) are not checked.
//
// # Concurrency
//
// openTxns is written under Log.mu (appends, replays) and its own mutex;
// readers (LastStableOffset, read_committed Fetch) take only that mutex,
// and none at all while no transaction is unstable (one atomic load).

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/record"
)

// Errors of transactional appends; server maps them to Kafka codes.
var (
	ErrInvalidTxnState              = errors.New("engine: invalid transaction state")              // INVALID_TXN_STATE (48)
	ErrTransactionCoordinatorFenced = errors.New("engine: transaction coordinator epoch is stale") // TRANSACTION_COORDINATOR_FENCED (52)
)

// txnMarker is the marker an AppendTxnMarker call appends.
type txnMarker struct {
	pid              int64
	epoch            int16
	coordinatorEpoch int32
	commit           bool
}

// openTxn is a transaction of the first unstable offset computation.
type openTxn struct {
	pid    int64
	first  int64
	marker int64 // ended: the marker's offset
}

// openTxns is a Log's unstable transactions. mu guards open and ended;
// writers also hold Log.mu.
type openTxns struct {
	mu    sync.Mutex
	open  []openTxn // by first offset, ascending
	ended []openTxn // marker appended, not yet below the HW
	// unstable is 1 + the smallest first offset of open and ended (the
	// first unstable offset), 0 when both are empty (the zero value).
	unstable atomic.Int64
	// anyAborted is set once the log's aborted transaction index holds an
	// entry (never cleared): read_committed reads of logs that never had
	// an aborted transaction skip the index.
	anyAborted atomic.Bool
}

// firstUnstable returns the first unstable offset, math.MaxInt64 if none.
func (t *openTxns) firstUnstable() int64 {
	if v := t.unstable.Load(); v > 0 {
		return v - 1
	}
	return math.MaxInt64
}

// setCovered sets coveredEnd and its mirror for readers without Log.mu.
// Caller holds Log.mu.
func (ps *producerState) setCovered(end int64) {
	ps.coveredEnd = end
	ps.coveredA.Store(end)
}

// republish recomputes unstable. Caller holds t.mu.
func (t *openTxns) republish() {
	v := int64(math.MaxInt64)
	if len(t.open) > 0 {
		v = t.open[0].first
	}
	for _, x := range t.ended {
		v = min(v, x.first)
	}
	if v == math.MaxInt64 {
		t.unstable.Store(0)
	} else {
		t.unstable.Store(v + 1)
	}
}

// txnData applies a transactional data batch at first to producer pid:
// the first one opens its transaction. Caller holds Log.mu.
func (l *Log) txnData(e *producerEntry, pid, first int64) {
	if e.txnFirstOffset >= 0 {
		return
	}
	e.txnFirstOffset = first
	t := &l.producers.txn
	t.mu.Lock()
	i, _ := slices.BinarySearchFunc(t.open, first, func(x openTxn, f int64) int { return cmpInt64(x.first, f) })
	t.open = slices.Insert(t.open, i, openTxn{pid: pid, first: first})
	t.republish()
	t.mu.Unlock()
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// applyMarker applies a marker at offset to producer pid's entry e (see
// the file comment). Caller holds Log.mu.
func (l *Log) applyMarker(e *producerEntry, pid int64, epoch int16, coordinatorEpoch int32, commit bool, offset int64) error {
	if epoch != e.epoch {
		e.epoch, e.n, e.head = epoch, 0, 0
	}
	e.coordinatorEpoch = coordinatorEpoch
	first := e.txnFirstOffset
	if len(l.producers.guards) > 0 {
		l.markerEndsGuard(pid, first)
	}
	if first < 0 {
		return nil
	}
	e.txnFirstOffset = -1
	t := &l.producers.txn
	t.mu.Lock()
	if i := slices.IndexFunc(t.open, func(x openTxn) bool { return x.pid == pid }); i >= 0 {
		t.open = slices.Delete(t.open, i, i+1)
	}
	lso := offset + 1 // Kafka's lastStableOffset(completedTxn)
	if len(t.open) > 0 {
		lso = t.open[0].first
	}
	if offset >= l.hw.Load() {
		t.ended = append(t.ended, openTxn{pid: pid, first: first, marker: offset})
	}
	t.republish()
	t.mu.Unlock()
	if commit {
		return nil
	}
	return l.addAbortedTxn(abortedTxn{pid: pid, firstOffset: first, lastOffset: offset, lso: lso})
}

// rebuildOpenTxns sets the open transactions from the producer entries
// (after a snapshot load or a reset); nothing is ended. Caller holds Log.mu
// or has the log to itself.
func (l *Log) rebuildOpenTxns() {
	t := &l.producers.txn
	t.mu.Lock()
	t.open, t.ended = t.open[:0], t.ended[:0]
	for pid, e := range l.producers.entries {
		if e.txnFirstOffset >= 0 {
			t.open = append(t.open, openTxn{pid: pid, first: e.txnFirstOffset})
		}
	}
	slices.SortFunc(t.open, func(a, b openTxn) int { return cmpInt64(a.first, b.first) })
	t.republish()
	t.mu.Unlock()
}

// loadTxnIndexes loads the aborted transaction index of every segment not
// loaded yet and cuts every index at end. Caller holds Log.mu or has the
// log to itself.
func (l *Log) loadTxnIndexes(end int64) {
	for _, s := range *l.segs.Load() {
		if s.txnLoaded {
			l.cutTxnIndex(s, end)
		} else {
			l.loadTxnIndex(s, end)
		}
	}
}

// replayMarker applies a marker batch read back from the log (batch is
// the whole batch, nil if it could not be read whole). Caller holds Log.mu.
func (l *Log) replayMarker(h *record.Header, batch []byte, nowMs int64) error {
	commit, coordEpoch, err := parseMarkerBatch(batch)
	if err != nil {
		// Not a transaction marker (another control type) or unreadable:
		// it changes no producer state, as in Kafka.
		return nil
	}
	ps := &l.producers
	e := ps.entries[h.ProducerID]
	if e == nil {
		if ps.entries == nil {
			ps.entries = make(map[int64]*producerEntry)
		}
		e = newProducerEntry()
		ps.entries[h.ProducerID] = e
	}
	ps.replayed++
	e.lastMs = nowMs
	return l.applyMarker(e, h.ProducerID, h.ProducerEpoch, coordEpoch, commit, h.BaseOffset)
}

// parseMarkerBatch reads the outcome and coordinator epoch of a marker
// batch: its first control record (record.ParseEndTxnMarker).
func parseMarkerBatch(batch []byte) (commit bool, coordinatorEpoch int32, err error) {
	if batch == nil {
		return false, 0, errors.New("engine: marker batch not read")
	}
	found := false
	err = record.Iterate(batch, func(h *record.Header, r *record.Record) error {
		if found {
			return nil
		}
		found = true
		commit, coordinatorEpoch, err = record.ParseEndTxnMarker(r.Key, r.Value)
		return err
	})
	if err == nil && !found {
		err = errors.New("engine: empty control batch")
	}
	return commit, coordinatorEpoch, err
}

// appendMarkerBatch appends to dst the marker batch of m.
func appendMarkerBatch(dst []byte, m *txnMarker, timestampMs int64) []byte {
	return record.AppendEndTxnMarker(dst, m.pid, m.epoch, m.coordinatorEpoch, m.commit, timestampMs)
}

// checkMarker is Kafka's checkProducerEpoch + checkCoordinatorEpoch for a
// marker. Caller holds Log.mu.
func (l *Log) checkMarker(m *txnMarker, nowMs int64) error {
	cur := l.liveProducer(m.pid, nowMs)
	if cur == nil {
		return nil
	}
	if m.epoch < cur.epoch {
		return fmt.Errorf("%w: marker of producer %d has epoch %d, older than the last seen epoch %d in %s",
			ErrInvalidProducerEpoch, m.pid, m.epoch, cur.epoch, l)
	}
	if m.coordinatorEpoch < cur.coordinatorEpoch {
		return fmt.Errorf("%w: marker of producer %d from coordinator epoch %d, the last seen is %d in %s",
			ErrTransactionCoordinatorFenced, m.pid, m.coordinatorEpoch, cur.coordinatorEpoch, l)
	}
	return nil
}

// AppendTxnMarker appends a COMMIT (commit) or ABORT marker for producer
// pid's transaction, as the partition leader does for WriteTxnMarkers:
// producerEpoch is the marker's epoch, coordinatorEpoch the coordinator's,
// leaderEpoch the partition leader epoch the batch is stamped with (as for
// Append). Errors: ErrInvalidProducerEpoch, ErrTransactionCoordinatorFenced
// (the log is unchanged), and Append's. The marker is written, not yet
// durable: wait with WhenDurable (or the replication equivalent) on
// info.LastOffset before reporting it written.
func (l *Log) AppendTxnMarker(pid int64, producerEpoch int16, coordinatorEpoch int32, commit bool, leaderEpoch int32) (AppendInfo, error) {
	if pid < 0 || producerEpoch < 0 {
		return AppendInfo{}, fmt.Errorf("%w: marker for producer %d epoch %d", ErrInvalidRecord, pid, producerEpoch)
	}
	m := &txnMarker{pid: pid, epoch: producerEpoch, coordinatorEpoch: coordinatorEpoch, commit: commit}
	var buf [128]byte
	batch := appendMarkerBatch(buf[:0], m, l.e.nowMs())
	return l.appendBatches(batch, leaderEpoch, m, nil, 0)
}

// catchUpProducers brings the producer state to the log end when follower
// appends moved it (replayed lazily otherwise, see producers.go), so the
// LSO and the aborted transactions of a log that just became leader are
// right before its first append.
func (l *Log) catchUpProducers() {
	if l.producers.coveredA.Load() == l.logEnd.Load() {
		return
	}
	l.mu.Lock()
	if !l.closed && l.active != nil && l.producers.coveredEnd != l.logEnd.Load() && l.e.Offline() == nil {
		l.syncProducers(l.e.nowMs())
	}
	l.mu.Unlock()
}

// LastStableOffset returns the last stable offset: the first offset of the
// oldest transaction not yet decided and replicated (not below the log
// start), or the high watermark if that is lower (see the file comment).
// read_committed consumers read below it.
func (l *Log) LastStableOffset() int64 {
	return l.lastStableOffset(l.hw.Load())
}

// lastStableOffset is LastStableOffset for a HW the caller loaded.
func (l *Log) lastStableOffset(hw int64) int64 {
	l.catchUpProducers()
	t := &l.producers.txn
	if t.firstUnstable() >= hw {
		return hw
	}
	t.mu.Lock()
	if len(t.ended) > 0 {
		cur := l.hw.Load()
		t.ended = slices.DeleteFunc(t.ended, func(x openTxn) bool { return x.marker < cur })
		t.republish()
	}
	v := t.firstUnstable()
	t.mu.Unlock()
	// A transaction whose first records were deleted (retention,
	// DeleteRecords) holds the LSO at the log start, as in Kafka.
	return min(max(v, l.logStart.Load()), hw)
}

// ReadCommittedMem is ReadMem for a read_committed consumer: batches below
// the last stable offset only. The aborted transactions of the range read
// come from AbortedTransactions(dst, offset, result.LastStableOffset).
func (l *Log) ReadCommittedMem(offset int64, maxBytes int32, minOneBatch bool) (ReadResult, error) {
	lso := l.LastStableOffset()
	res, err := l.read(offset, maxBytes, minOneBatch, lso, true)
	res.LastStableOffset = min(res.LastStableOffset, lso)
	return res, err
}

// txnGuard is the verification guard of the transactional batches of one
// producer that a partition leader is having verified (KIP-890 part 1) or
// implicitly added (part 2) by the transaction coordinator. Guarded by
// Log.mu.
type txnGuard struct {
	n int32 // BeginTxnVerification calls not yet ended
	// ended: a marker of the producer was appended since the guard was
	// created, so the transaction the batches were verified for may be
	// over; their append fails (ErrInvalidTxnState) rather than opening a
	// transaction the coordinator does not know.
	ended bool
	// prevFirst is the first offset of the producer's open transaction of
	// an older epoch when the guard was created (-1: none): its marker
	// (which a TV2 client's next transaction may race with) ends that
	// transaction, not the one being verified, and leaves the guard alone.
	prevFirst int64
}

// BeginTxnVerification is called by a partition leader before it appends a
// transactional batch of producer pid at epoch (KIP-890). verify reports
// whether the transaction coordinator must first confirm the partition is
// in the producer's transaction: true unless the producer has a transaction
// open in this log at this epoch. Either way it registers a guard for pid,
// which the caller must release with EndTxnVerification once the batch is
// appended or given up: a transaction marker of pid appended while the
// guard is held (the transaction ended, for instance aborted by its
// timeout, between the check and the append) makes the append of pid's
// transactional batches fail with ErrInvalidTxnState, so a batch that
// arrives late can never open a transaction nobody will end. The one
// exception is the marker of an older-epoch transaction open at the call
// (a TV2 producer's next transaction starts with a bumped epoch before the
// previous one's markers are all written). Guards of the same producer
// nest (a count); a marker ends all of them. Errors: the log is closed or
// the engine offline (nothing registered).
func (l *Log) BeginTxnVerification(pid int64, epoch int16) (verify bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false, l.closedErr()
	}
	if err := l.e.Offline(); err != nil {
		return false, err
	}
	nowMs := l.e.nowMs()
	ps := &l.producers
	if ps.coveredEnd != l.logEnd.Load() && l.active != nil {
		l.syncProducers(nowMs) // follower appends since the last sync
	}
	e := l.liveProducer(pid, nowMs)
	open := e != nil && e.txnFirstOffset >= 0
	g, ok := ps.guards[pid]
	if !ok {
		g.prevFirst = -1
		if open && e.epoch < epoch {
			g.prevFirst = e.txnFirstOffset
		}
		if ps.guards == nil {
			ps.guards = make(map[int64]txnGuard)
		}
	}
	g.n++
	ps.guards[pid] = g
	return !open || e.epoch != epoch, nil
}

// EndTxnVerification releases a guard of BeginTxnVerification.
func (l *Log) EndTxnVerification(pid int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := &l.producers
	g, ok := ps.guards[pid]
	if !ok {
		return
	}
	if g.n--; g.n <= 0 {
		delete(ps.guards, pid)
		return
	}
	ps.guards[pid] = g
}

// checkTxnGuard refuses a transactional batch of pid whose guard was ended
// by a marker. Caller holds Log.mu.
func (l *Log) checkTxnGuard(pid int64) error {
	if g, ok := l.producers.guards[pid]; ok && g.ended {
		return fmt.Errorf("%w: a transaction marker of producer %d was written in %s while its batch was being verified",
			ErrInvalidTxnState, pid, l)
	}
	return nil
}

// markerEndsGuard applies a marker of pid that closed the transaction
// opened at closed (-1: none) to pid's guard. Caller holds Log.mu.
func (l *Log) markerEndsGuard(pid, closed int64) {
	ps := &l.producers
	g, ok := ps.guards[pid]
	if !ok || g.ended {
		return
	}
	if closed >= 0 && closed == g.prevFirst {
		g.prevFirst = -1
	} else {
		g.ended = true
	}
	ps.guards[pid] = g
}
