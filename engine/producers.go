package engine

// Producer state: what makes a retried produce land once (idempotence).
//
// Every partition log tracks, per producer id, the producer epoch and the
// last five batches it appended (first and last sequence, first and last
// offset, max timestamp), as Kafka's ProducerStateManager does. Append checks
// each batch that carries a producer id (record.Header.ProducerID >= 0)
// against that state under Log.mu, before offsets are assigned, with Kafka's
// rules in Kafka's order:
//
//  1. Duplicate: same epoch and the same (first, last) sequence range as one
//     of the five retained batches. Nothing is written; Append returns the
//     ORIGINAL offsets with AppendInfo.Duplicate set. A duplicate is never an
//     error: answering OUT_OF_ORDER_SEQUENCE_NUMBER would make a client bump
//     its epoch and write the records again.
//  2. Epoch older than the producer's: ErrInvalidProducerEpoch
//     (INVALID_PRODUCER_EPOCH).
//  3. Newer epoch: the first sequence must be 0, else ErrOutOfOrderSequence
//     (an epoch bump restarts sequences).
//  4. Same epoch: the first sequence must follow the last one (last+1, or 0
//     after math.MaxInt32: sequences wrap), else ErrOutOfOrderSequence.
//     After an epoch bump with no batch yet, "last" is -1, so 0 is required.
//  5. Unknown producer (never seen, or expired): any sequence is accepted.
//     Since KIP-360 (Kafka 2.5+, ProducerAppendInfo.checkSequence) Kafka no
//     longer answers UNKNOWN_PRODUCER_ID here; it accepts the write, because
//     the only reason a live producer is unknown is that its state expired
//     or its records were deleted. Strata does the same.
//
// A batch with a producer id and a negative base sequence is INVALID_RECORD
// (Kafka's LogValidator). Several batches of one request are checked in
// order, each against the state the earlier ones left, and recorded only if
// all pass. Recording happens after the write (recordProducers), still under
// Log.mu; a write failure takes the engine offline, so a batch is never
// recorded without being written. The check and the recording allocate
// nothing for a producer the partition already knows (map lookup, a reused
// scratch slice, a fixed five-slot ring per producer).
//
// # Expiry
//
// A producer not seen for producer.id.expiration.ms (Options.
// ProducerIDExpirationMs, Kafka's default one day) by the engine's clock is
// forgotten: it is treated as unknown from that moment, and entries are
// removed from memory by a sweep that runs on append at most every
// producer.id.expiration.check.interval.ms (Kafka's ten minutes), and when
// state is loaded. Producers rebuilt from the log at Open count as seen at
// Open, so a crash never shortens a producer's life.
//
// # Snapshots
//
// Beside the segments, "<offset>.snapshot" (20 digits, Kafka's name) holds
// the producer state built from every batch below <offset>. It is written
// when the log rolls (offset = the new segment's base), on append when the
// log has advanced and 30 s passed since its last snapshot (logs without
// producers too, so a crash never replays more than 30 s), and at a clean
// Close (offset = log end, for the last two); then the files beyond the
// newest three are deleted, except, for a log with remote.storage.enable,
// those at the end of a local segment not copied to remote storage yet
// (uploadPendingSnapshot: the copy takes the segment's snapshot along).
// Layout, big-endian (Strata's own version 1: Kafka's snapshot keeps one
// batch per producer, this one keeps all five so deduplication survives a
// restart unchanged):
//
//	int16  version (1)
//	uint32 CRC-32C of every byte after this field
//	int64  offset (equals the file name's)
//	int32  producer count
//	producer count times:
//	    int64 producer id
//	    int16 epoch
//	    int64 last seen (engine clock, ms)
//	    int32 coordinator epoch (-1: none)
//	    int64 first offset of the open transaction (-1: none)
//	    int8  batch count (0..5), oldest first, then per batch:
//	          int32 first sequence, int32 last sequence,
//	          int64 first offset, int64 last offset, int64 max timestamp
//
// Snapshots are written without fsync (tmp file, rename): the CRC, the
// offset check and the rule below make a torn or lost snapshot harmless.
// Open loads the newest snapshot that decodes and whose offset is at or below
// the recovered log end (newer ones describe records a crash took away and
// are deleted) and at or above the first segment's base (an older one
// misses the batches of the segments deleted since, which a crash that
// lost the newer snapshots would otherwise leave out: it is deleted too,
// as Kafka deletes the snapshots below the log start), then replays the batch headers from that offset to the log
// end (header reads only, sequential 1 MiB reads), so a SIGKILL loses no
// producer state. With no usable snapshot the whole log is replayed. After a
// clean Close the newest snapshot is at the log end and nothing is replayed;
// after a crash the replay covers the appends of the last 30 s (logs with
// producers) or at most the active segment (logs without).
//
// producersTruncated does the same after a truncation (snapshots above the
// new end are deleted; an emptied log starts with no producers); the
// truncations call it under Log.mu. Batches appended as a follower
// (AppendAsFollower) are replayed from the log by syncProducers at the next
// Append, roll or Close, or when the last stable offset is read (txn.go),
// so a new leader knows every producer its log holds. The replay applies
// transactional batches and transaction markers too (txn.go: open
// transactions, the aborted transaction index).
//
// # Concurrency
//
// Log.producers is guarded by Log.mu (held by Append, roll and shutdown;
// Producers takes it). Open loads the state before the log is published.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/stratalog/strata/internal/vfs"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/stratalog/strata/record"
)

// Errors of the producer checks; server maps them to Kafka codes.
var (
	ErrOutOfOrderSequence   = errors.New("engine: out of order sequence number") // OUT_OF_ORDER_SEQUENCE_NUMBER (45)
	ErrInvalidProducerEpoch = errors.New("engine: invalid producer epoch")       // INVALID_PRODUCER_EPOCH (47)
)

// ProducerIDBlockFile is the data directory file where package txn keeps the
// producer id blocks of a single broker; Open leaves it alone.
const ProducerIDBlockFile = "producer-id-block"

// ScramCredentialsFile is where the broker keeps its SCRAM users (salted
// keys; cmd/strata, internal/sasl) in the data directory; Open leaves it
// alone.
const ScramCredentialsFile = "scram-credentials.json"

// AclsFile is where the broker keeps its ACLs (package auth) in the data
// directory; Open leaves it alone.
const AclsFile = "acls.json"

// QuotasFile is where the broker keeps its client quotas (package auth)
// in the data directory; Open leaves it alone.
const QuotasFile = "quotas.json"

const (
	// DefaultProducerIDExpirationMs is Kafka's producer.id.expiration.ms.
	DefaultProducerIDExpirationMs = 24 * 60 * 60 * 1000
	// producerExpiryCheckMs is Kafka's producer.id.expiration.check.interval.ms.
	producerExpiryCheckMs = 10 * 60 * 1000

	producerBatchesRetained = 5 // Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
	noProducerEpoch         = -1
	noSequence              = -1

	snapshotSuffix  = ".snapshot"
	snapshotVersion = 1
	snapshotsKept   = 3
	// producerSnapshotIntervalMs: a log with producers also snapshots on
	// append when this long passed since its last snapshot, so the replay
	// after a crash covers seconds of appends, not a whole segment.
	producerSnapshotIntervalMs = 30_000
	// snapshotPhaseStepMs spreads the logs' periodic snapshots over the
	// interval (snapshotDueFrom).
	snapshotPhaseStepMs = 997
	// snapshotHeaderBytes: version, CRC, offset, count.
	snapshotHeaderBytes = 2 + 4 + 8 + 4
	// snapshotEntryBytes: the fixed part of one producer.
	snapshotEntryBytes = 8 + 2 + 8 + 4 + 8 + 1
	snapshotBatchBytes = 4 + 4 + 8 + 8 + 8
	// maxSnapshotBytes bounds what Open reads (about 5 million producers).
	maxSnapshotBytes = 1 << 30
	// replayReadBytes is the read size of the replay walk.
	replayReadBytes = 1 << 20
)

// producerBatch is one retained batch of a producer.
type producerBatch struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	maxTimestamp            int64
}

// producerEntry is one producer's state in one partition: its epoch and its
// last batches in a five-slot ring (oldest at head).
type producerEntry struct {
	epoch            int16
	n, head          uint8
	batches          [producerBatchesRetained]producerBatch
	lastMs           int64 // engine clock when last appended (expiry)
	coordinatorEpoch int32 // -1 until transactions write markers
	txnFirstOffset   int64 // -1: no open transaction
}

func newProducerEntry() *producerEntry {
	return &producerEntry{epoch: noProducerEpoch, coordinatorEpoch: -1, txnFirstOffset: -1}
}

// at returns the i-th retained batch, oldest first.
func (e *producerEntry) at(i int) *producerBatch {
	return &e.batches[(int(e.head)+i)%producerBatchesRetained]
}

// newest returns the last batch; nil if none.
func (e *producerEntry) newest() *producerBatch {
	if e.n == 0 {
		return nil
	}
	return e.at(int(e.n) - 1)
}

// lastSeq is the last sequence appended in the current epoch, -1 if none.
func (e *producerEntry) lastSeq() int32 {
	if b := e.newest(); b != nil {
		return b.lastSeq
	}
	return noSequence
}

// add records a batch; a new epoch drops the batches of the old one.
func (e *producerEntry) add(epoch int16, b producerBatch) {
	if epoch != e.epoch {
		e.epoch, e.n, e.head = epoch, 0, 0
	}
	if e.n == producerBatchesRetained {
		e.head = (e.head + 1) % producerBatchesRetained
		e.n--
	}
	*e.at(int(e.n)) = b
	e.n++
}

// findDuplicate returns the retained batch with exactly this epoch and
// sequence range (Kafka's ProducerStateEntry.findDuplicateBatch).
func (e *producerEntry) findDuplicate(epoch int16, firstSeq, lastSeq int32) (producerBatch, bool) {
	if epoch != e.epoch {
		return producerBatch{}, false
	}
	for i := 0; i < int(e.n); i++ {
		if b := e.at(i); b.firstSeq == firstSeq && b.lastSeq == lastSeq {
			return *b, true
		}
	}
	return producerBatch{}, false
}

// pendingBatch is a checked batch of the append in progress, recorded once
// the append is written.
type pendingBatch struct {
	pid       int64
	epoch     int16
	firstSeq  int32
	lastSeq   int32
	rel       int64 // first offset relative to the append's base offset
	lastDelta int32
	maxTs     int64
	txn       bool       // a transactional data batch (txn.go)
	marker    *txnMarker // the marker batch of AppendTxnMarker (txn.go), nil for data
}

// producerState is a Log's producer bookkeeping; guarded by Log.mu.
type producerState struct {
	entries     map[int64]*producerEntry
	pending     []pendingBatch // scratch of the append in progress
	nextSweepMs int64
	snapshots   []int64 // offsets of the snapshot files on disk, ascending
	snapOffset  int64   // offset of the newest snapshot written or loaded; -1 if none
	snapMs      int64   // clock time of the last snapshot written or loaded
	changed     bool    // state or log end moved since snapOffset
	// coveredEnd is the log end the state reflects. Append keeps it equal
	// to the log end; follower appends and truncations move the log end
	// alone, and syncProducers catches up (replay) or rebuilds.
	coveredEnd int64
	replayed   int64 // batches applied by replays (tests)

	coveredA atomic.Int64 // coveredEnd, for readers without mu (txn.go)

	txn openTxns // open transactions and the first unstable offset (txn.go)

	// guards are the KIP-890 verification guards of batches being
	// verified, by producer id (txn.go: BeginTxnVerification).
	guards map[int64]txnGuard
}

// ProducerState describes one producer of a partition (DescribeProducers).
type ProducerState struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32 // -1 if no batch in the current epoch
	LastTimestamp         int64 // max timestamp of the last batch, -1 if none
	CoordinatorEpoch      int32 // -1 if none
	CurrentTxnStartOffset int64 // -1 if no open transaction
	FirstOffset           int64 // of the oldest retained batch, -1 if none
	LastOffset            int64 // of the newest batch, -1 if none
}

// incrementSequence adds delta to a sequence, wrapping after math.MaxInt32
// to 0 (Kafka's DefaultRecordBatch.incrementSequence).
func incrementSequence(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

// inSequence reports whether next follows last.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

func (l *Log) producerExpiryMs() int64 {
	if ms := l.e.producerExpiryMs; ms > 0 {
		return ms
	}
	return DefaultProducerIDExpirationMs
}

// liveProducer returns the producer's entry, nil if unknown or expired at nowMs.
func (l *Log) liveProducer(pid, nowMs int64) *producerEntry {
	e := l.producers.entries[pid]
	if e == nil || l.producerExpired(e, nowMs) {
		return nil
	}
	return e
}

func (l *Log) producerExpired(e *producerEntry, nowMs int64) bool {
	return e.txnFirstOffset < 0 && nowMs-e.lastMs >= l.producerExpiryMs()
}

// checkProducers applies the producer rules (package doc above) to every
// batch of an append; batches are validated already. done is true when
// Append must return (info, err) at once without writing: err is a rule
// violation, or err is nil and info holds a duplicate's original offsets.
// The batches that passed stay in the pending scratch for recordProducers.
// Caller holds mu.
func (l *Log) checkProducers(batches []byte, nowMs int64, m *txnMarker) (info AppendInfo, done bool, err error) {
	ps := &l.producers
	ps.pending = ps.pending[:0]
	if ps.coveredEnd != l.logEnd.Load() {
		l.syncProducers(nowMs)
	}
	if m != nil {
		// A transaction marker (txn.go): coordinator fencing, no sequence.
		if err := l.checkMarker(m, nowMs); err != nil {
			return AppendInfo{}, true, err
		}
		ps.pending = append(ps.pending, pendingBatch{pid: m.pid, epoch: m.epoch, firstSeq: -1, lastSeq: -1, marker: m})
		return AppendInfo{}, false, nil
	}
	rel := int64(0)
	for rest := batches; len(rest) > 0; {
		_, r, h, _ := record.Next(rest)
		rest = r
		if h.ProducerID < 0 && h.Transactional() {
			return AppendInfo{}, true, fmt.Errorf("%w: transactional batch without a producer id", ErrInvalidRecord)
		}
		if h.ProducerID >= 0 {
			if h.BaseSequence < 0 {
				return AppendInfo{}, true, fmt.Errorf("%w: sequence number %d in a batch of producer %d", ErrInvalidRecord, h.BaseSequence, h.ProducerID)
			}
			lastSeq := incrementSequence(h.BaseSequence, h.LastOffsetDelta)
			cur := l.liveProducer(h.ProducerID, nowMs)
			if cur != nil {
				if b, ok := cur.findDuplicate(h.ProducerEpoch, h.BaseSequence, lastSeq); ok {
					ps.pending = ps.pending[:0]
					return l.duplicateInfo(b), true, nil
				}
			}
			if h.Transactional() && len(ps.guards) > 0 {
				if err := l.checkTxnGuard(h.ProducerID); err != nil { // txn.go
					ps.pending = ps.pending[:0]
					return AppendInfo{}, true, err
				}
			}
			if err := l.checkSequence(cur, &h, rel); err != nil {
				ps.pending = ps.pending[:0]
				return AppendInfo{}, true, err
			}
			if cur != nil && cur.txnFirstOffset >= 0 && !h.Transactional() {
				ps.pending = ps.pending[:0]
				return AppendInfo{}, true, fmt.Errorf("%w: producer %d has a transaction open since offset %d in %s and sent a non-transactional batch",
					ErrInvalidTxnState, h.ProducerID, cur.txnFirstOffset, l)
			}
			ps.pending = append(ps.pending, pendingBatch{
				pid: h.ProducerID, epoch: h.ProducerEpoch, firstSeq: h.BaseSequence, lastSeq: lastSeq,
				rel: rel, lastDelta: h.LastOffsetDelta, maxTs: h.MaxTimestamp, txn: h.Transactional(),
			})
		}
		rel += int64(h.LastOffsetDelta) + 1
	}
	return AppendInfo{}, false, nil
}

// checkSequence is Kafka's checkProducerEpoch + checkSequence for one batch
// of a client append. cur is the producer's state before this append (nil
// if unknown); batches of the same producer earlier in the append (pending)
// take precedence, as Kafka's ProducerAppendInfo.updatedEntry does.
func (l *Log) checkSequence(cur *producerEntry, h *record.Header, rel int64) error {
	curEpoch, curLast := int16(noProducerEpoch), int32(noSequence)
	if cur != nil {
		curEpoch, curLast = cur.epoch, cur.lastSeq()
	}
	updEpoch, updLast, updHas := curEpoch, int32(noSequence), false
	for i := len(l.producers.pending) - 1; i >= 0; i-- {
		if p := &l.producers.pending[i]; p.pid == h.ProducerID {
			updEpoch, updLast, updHas = p.epoch, p.lastSeq, true
			break
		}
	}
	seq := h.BaseSequence
	if h.ProducerEpoch < updEpoch {
		return fmt.Errorf("%w: producer %d epoch %d at offset %d of %s is older than the last seen epoch %d",
			ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, l.logEnd.Load()+rel, l, updEpoch)
	}
	if h.ProducerEpoch != updEpoch {
		if seq != 0 && updEpoch != noProducerEpoch {
			return fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, not %d (current epoch %d) in %s",
				ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, seq, updEpoch, l)
		}
		return nil
	}
	last := int32(noSequence)
	switch {
	case updHas:
		last = updLast
	case h.ProducerEpoch == curEpoch:
		last = curLast
	}
	if curEpoch != noProducerEpoch && !inSequence(last, seq) {
		return fmt.Errorf("%w: producer %d epoch %d sent sequence %d, expected %d, in %s",
			ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, seq, incrementSequence(last, 1), l)
	}
	return nil
}

// duplicateInfo is Append's answer for a retried batch: its original offsets.
func (l *Log) duplicateInfo(b producerBatch) AppendInfo {
	appendTime := int64(-1)
	if l.config().logAppendTime() {
		appendTime = b.maxTimestamp
	}
	return AppendInfo{
		BaseOffset:     b.firstOffset,
		LastOffset:     b.lastOffset,
		LogAppendTime:  appendTime,
		LogStartOffset: l.logStart.Load(),
		Duplicate:      true,
	}
}

// recordProducers records the batches checkProducers passed, now written at
// [base, next). appendTime >= 0 replaces their max timestamps
// (LogAppendTime). Caller holds mu.
func (l *Log) recordProducers(base, next, nowMs, appendTime int64) error {
	ps := &l.producers
	ps.changed = true
	ps.setCovered(next)
	var txnErr error
	for i := range ps.pending {
		p := &ps.pending[i]
		e := ps.entries[p.pid]
		switch {
		case e == nil:
			if ps.entries == nil {
				ps.entries = make(map[int64]*producerEntry)
			}
			e = newProducerEntry()
			ps.entries[p.pid] = e
		case l.producerExpired(e, nowMs):
			*e = *newProducerEntry()
		}
		ts := p.maxTs
		if appendTime >= 0 {
			ts = appendTime
		}
		first := base + p.rel
		if m := p.marker; m != nil {
			if err := l.applyMarker(e, p.pid, m.epoch, m.coordinatorEpoch, m.commit, first); err != nil && txnErr == nil {
				txnErr = err
			}
			e.lastMs = nowMs
			continue
		}
		if p.txn {
			l.txnData(e, p.pid, first)
		}
		e.add(p.epoch, producerBatch{
			firstSeq: p.firstSeq, lastSeq: p.lastSeq,
			firstOffset: first, lastOffset: first + int64(p.lastDelta), maxTimestamp: ts,
		})
		e.lastMs = nowMs
	}
	ps.pending = ps.pending[:0]
	if nowMs >= ps.nextSweepMs {
		l.sweepProducers(nowMs)
	}
	// Logs without producers snapshot too (an empty snapshot is 18 bytes):
	// the snapshot bounds what Open replays after a crash, and without one
	// Open would read the whole log to learn there is nothing to rebuild.
	if nowMs-ps.snapMs >= producerSnapshotIntervalMs {
		l.snapshotProducers() // at next: the state covers exactly [0, next)
	}
	return txnErr
}

// sweepProducers removes expired producers. Caller holds mu (or is opening).
func (l *Log) sweepProducers(nowMs int64) {
	ps := &l.producers
	for pid, e := range ps.entries {
		if l.producerExpired(e, nowMs) {
			delete(ps.entries, pid)
			ps.changed = true
		}
	}
	ps.nextSweepMs = nowMs + min(int64(producerExpiryCheckMs), l.producerExpiryMs())
}

// Producers returns the live producers of the partition, by producer id
// (DescribeProducers).
func (l *Log) Producers() []ProducerState {
	l.mu.Lock()
	defer l.mu.Unlock()
	nowMs := l.syncedProducers()
	out := make([]ProducerState, 0, len(l.producers.entries))
	for pid, e := range l.producers.entries {
		if !l.producerExpired(e, nowMs) {
			out = append(out, producerStateOf(pid, e))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// Producer is Producers for one producer id: its state, false if the log
// has none (or it expired).
func (l *Log) Producer(pid int64) (ProducerState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nowMs := l.syncedProducers()
	e := l.producers.entries[pid]
	if e == nil || l.producerExpired(e, nowMs) {
		return ProducerState{}, false
	}
	return producerStateOf(pid, e), true
}

// syncedProducers brings the producer state up to the log end (follower
// appends since the last sync) and returns the time it used. Caller holds mu.
func (l *Log) syncedProducers() int64 {
	nowMs := l.e.nowMs()
	if l.producers.coveredEnd != l.logEnd.Load() && !l.closed && l.active != nil && l.e.Offline() == nil {
		l.syncProducers(nowMs)
	}
	return nowMs
}

func producerStateOf(pid int64, e *producerEntry) ProducerState {
	st := ProducerState{
		ProducerID: pid, ProducerEpoch: e.epoch, LastSequence: e.lastSeq(),
		LastTimestamp: -1, CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnStartOffset: e.txnFirstOffset,
		FirstOffset: -1, LastOffset: -1,
	}
	if b := e.newest(); b != nil {
		st.LastTimestamp, st.LastOffset, st.FirstOffset = b.maxTimestamp, b.lastOffset, e.at(0).firstOffset
	}
	return st
}

// ---- snapshots ----

func (l *Log) snapshotPath(offset int64) string {
	return segmentFileName(l.dir, offset, snapshotSuffix)
}

// encodeProducerSnapshot encodes entries as a version-1 snapshot at offset,
// producers sorted by id so equal states give equal bytes.
func encodeProducerSnapshot(offset int64, entries map[int64]*producerEntry) []byte {
	pids := make([]int64, 0, len(entries))
	size := snapshotHeaderBytes
	for pid, e := range entries {
		pids = append(pids, pid)
		size += snapshotEntryBytes + int(e.n)*snapshotBatchBytes
	}
	slices.Sort(pids)
	b := make([]byte, 0, size)
	b = binary.BigEndian.AppendUint16(b, snapshotVersion)
	b = binary.BigEndian.AppendUint32(b, 0) // CRC, filled below
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(pids)))
	for _, pid := range pids {
		e := entries[pid]
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastMs))
		b = binary.BigEndian.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.txnFirstOffset))
		b = append(b, e.n)
		for i := 0; i < int(e.n); i++ {
			x := e.at(i)
			b = binary.BigEndian.AppendUint32(b, uint32(x.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(x.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(x.firstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(x.lastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(x.maxTimestamp))
		}
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], snapshotCRCTable))
	return b
}

var snapshotCRCTable = crc32.MakeTable(crc32.Castagnoli)

var errBadSnapshot = errors.New("engine: bad producer snapshot")

// decodeProducerSnapshot parses a snapshot; every count is checked against
// the bytes left before anything is allocated, and every entry must be
// consistent (batch count <= 5, sequences and offsets ordered within a
// batch, offsets below the snapshot offset and increasing across batches).
func decodeProducerSnapshot(b []byte) (offset int64, entries map[int64]*producerEntry, err error) {
	if len(b) < snapshotHeaderBytes {
		return 0, nil, fmt.Errorf("%w: %d bytes", errBadSnapshot, len(b))
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != snapshotVersion {
		return 0, nil, fmt.Errorf("%w: version %d", errBadSnapshot, v)
	}
	if crc32.Checksum(b[6:], snapshotCRCTable) != binary.BigEndian.Uint32(b[2:]) {
		return 0, nil, fmt.Errorf("%w: CRC mismatch", errBadSnapshot)
	}
	offset = int64(binary.BigEndian.Uint64(b[6:]))
	count := int64(binary.BigEndian.Uint32(b[14:]))
	rest := b[snapshotHeaderBytes:]
	if offset < 0 || count > int64(len(rest))/snapshotEntryBytes {
		return 0, nil, fmt.Errorf("%w: offset %d, %d producers in %d bytes", errBadSnapshot, offset, count, len(rest))
	}
	entries = make(map[int64]*producerEntry, count)
	for i := int64(0); i < count; i++ {
		if len(rest) < snapshotEntryBytes {
			return 0, nil, fmt.Errorf("%w: truncated producer %d", errBadSnapshot, i)
		}
		pid := int64(binary.BigEndian.Uint64(rest))
		e := newProducerEntry()
		e.epoch = int16(binary.BigEndian.Uint16(rest[8:]))
		e.lastMs = int64(binary.BigEndian.Uint64(rest[10:]))
		e.coordinatorEpoch = int32(binary.BigEndian.Uint32(rest[18:]))
		e.txnFirstOffset = int64(binary.BigEndian.Uint64(rest[22:]))
		n := int(rest[30])
		rest = rest[snapshotEntryBytes:]
		if pid < 0 || n > producerBatchesRetained || len(rest) < n*snapshotBatchBytes || entries[pid] != nil ||
			e.txnFirstOffset < -1 || e.txnFirstOffset >= offset {
			return 0, nil, fmt.Errorf("%w: producer %d (%d batches)", errBadSnapshot, pid, n)
		}
		prevLast := int64(-1)
		for j := 0; j < n; j++ {
			x := producerBatch{
				firstSeq:     int32(binary.BigEndian.Uint32(rest)),
				lastSeq:      int32(binary.BigEndian.Uint32(rest[4:])),
				firstOffset:  int64(binary.BigEndian.Uint64(rest[8:])),
				lastOffset:   int64(binary.BigEndian.Uint64(rest[16:])),
				maxTimestamp: int64(binary.BigEndian.Uint64(rest[24:])),
			}
			rest = rest[snapshotBatchBytes:]
			if x.firstSeq < 0 || x.lastSeq < 0 || x.firstOffset <= prevLast || x.lastOffset < x.firstOffset ||
				x.lastOffset >= offset || x.lastOffset-x.firstOffset > math.MaxInt32 {
				return 0, nil, fmt.Errorf("%w: producer %d batch %d", errBadSnapshot, pid, j)
			}
			prevLast = x.lastOffset
			e.add(e.epoch, x)
		}
		entries[pid] = e
	}
	if len(rest) != 0 {
		return 0, nil, fmt.Errorf("%w: %d trailing bytes", errBadSnapshot, len(rest))
	}
	return offset, entries, nil
}

// snapshotDueFrom is what a log created or opened at nowMs takes for the
// time of its last snapshot: its first periodic snapshot is then due some
// time within the next producerSnapshotIntervalMs, by partition, so the
// logs of a topic, all created or opened at once, do not all write their
// files on the append path of the same produce request. (They did, at
// the first append of a new topic: a snapshot file made under Log.mu for
// each partition, 0.15-1.6 ms each, docs/performance.md, "Session 43".)
func snapshotDueFrom(nowMs int64, part int32) int64 {
	return nowMs - int64(part)*snapshotPhaseStepMs%producerSnapshotIntervalMs
}

// snapshotProducers writes the state as <log end>.snapshot (after a roll or
// at Close) and keeps the newest snapshotsKept files. Failures are logged,
// not fatal: a missing snapshot only lengthens the next Open's replay.
// Caller holds mu.
func (l *Log) snapshotProducers() {
	ps := &l.producers
	if l.e.Offline() != nil {
		return
	}
	end := l.logEnd.Load()
	if ps.coveredEnd != end {
		l.syncProducers(l.e.nowMs())
	}
	if !ps.changed && ps.snapOffset == end {
		return
	}
	path := l.snapshotPath(end)
	data := encodeProducerSnapshot(end, ps.entries)
	l.spares.take(l.e.fs, vfs.TmpPath(path)) // written over a spare inode (spare.go)
	if err := vfs.ReplaceFileNoSyncFS(l.e.fs, path, data); err != nil {
		l.e.logger.Warn("writing producer snapshot", "path", path, "err", err)
		return
	}
	ps.snapOffset, ps.changed, ps.snapMs = end, false, l.e.nowMs()
	if i, found := slices.BinarySearch(ps.snapshots, end); !found {
		ps.snapshots = slices.Insert(ps.snapshots, i, end)
	}
	if n := len(ps.snapshots) - snapshotsKept; n > 0 {
		pending := l.uploadPendingSnapshot()
		kept := ps.snapshots[:0]
		for i, off := range ps.snapshots {
			if i < n && !pending(off) {
				l.removeSnapshot(off)
				continue
			}
			kept = append(kept, off)
		}
		ps.snapshots = kept
	}
}

// uploadPendingSnapshot returns whether the snapshot at an offset is the
// producer state at the end of a local segment the remote log manager
// has yet to copy (KIP-405 copies each segment with the snapshot taken at
// its end): for a log with remote.storage.enable (not compacted: those
// are not copied), a snapshot at a local segment's end that lies past
// the hook's CopiedEnd. Such snapshots are kept beyond the newest
// snapshotsKept until the segment is copied (or leaves the log), so a
// copy backlog or a restart does not copy a segment without its
// producer state. Caller holds mu.
func (l *Log) uploadPendingSnapshot() func(off int64) bool {
	cfg := l.config()
	if cfg == nil || !cfg.RemoteStorageEnable || strings.Contains(cfg.CleanupPolicy, "compact") {
		return func(int64) bool { return false }
	}
	copied := l.e.remoteCopiedEnd(l)
	segs := *l.segs.Load()
	return func(off int64) bool {
		i := floorSegment(segs, off)
		return off > copied && i >= 1 && segs[i].base == off
	}
}

func (l *Log) removeSnapshot(offset int64) {
	if l.spares.put(l.e.fs, l.snapshotPath(offset)) {
		return // a spare for the next snapshot's file (spare.go)
	}
	if err := l.e.fs.Remove(l.snapshotPath(offset)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		l.e.logger.Warn("removing producer snapshot", "log", l.String(), "offset", offset, "err", err)
	}
}

// closeProducers writes the final snapshot at a clean Close. Caller holds mu.
func (l *Log) closeProducers() {
	if l.active != nil {
		l.snapshotProducers()
	}
}

// listSnapshots returns the offsets of the snapshot files in the partition
// directory, ascending.
func (l *Log) listSnapshots() ([]int64, error) {
	ents, err := l.e.fs.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var offs []int64
	for _, ent := range ents {
		if off, ok := parseSegmentFileName(ent.Name(), snapshotSuffix); ok && !ent.IsDir() {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	return offs, nil
}

// loadProducers rebuilds the producer state of an installed log: the newest
// usable snapshot at or below the log end, then the batches from its offset
// to the log end. Snapshots above the log end or that fail to decode are
// deleted. A directory or log that cannot be read is logged and the state
// kept as far as it got: a broker that cannot rebuild deduplication state
// still serves (as Kafka does when producer state is lost). Caller holds mu
// or has the log to itself (Open).
func (l *Log) loadProducers() {
	ps := &l.producers
	nowMs := l.e.nowMs()
	end := l.logEnd.Load()
	ps.entries, ps.snapshots, ps.snapOffset, ps.coveredEnd, ps.changed = nil, nil, -1, end, true
	ps.setCovered(end)
	ps.snapMs = snapshotDueFrom(nowMs, l.part)
	l.loadTxnIndexes(end) // txnindex.go: every segment's aborted transactions, cut at the log end
	entries, from := l.loadNewestSnapshot(end)
	ps.entries = entries
	if from < 0 {
		segs := *l.segs.Load()
		from = segs[0].base
	} else {
		ps.snapOffset = from
	}
	l.rebuildOpenTxns() // txn.go: the snapshot's open transactions; the replay adds the rest
	if err := l.replayProducers(from, end, nowMs); err != nil {
		l.e.logger.Warn("rebuilding producer state", "log", l.String(), "err", err)
	}
	ps.changed = from != end
	l.sweepProducers(nowMs)
}

// followProducers applies batches, just appended as a follower from
// base, to the producer state from memory when the state covers
// the log up to base (Kafka's follower updates its producer state on
// append too); otherwise syncProducers replays them from the segment
// later. Without it every follower read each segment back whole at its
// roll (snapshotProducers), a read of every replicated byte. Caller
// holds mu.
func (l *Log) followProducers(batches []byte, base, nowMs int64) {
	ps := &l.producers
	if ps.coveredEnd != base {
		return
	}
	done := base
	for rest := batches; len(rest) > 0; {
		b, r, h, err := record.Next(rest)
		if err != nil {
			break // validated by the caller: not expected; the replay catches up
		}
		rest = r
		if h.ProducerID >= 0 && h.Control() {
			if err := l.replayMarker(&h, b, nowMs); err != nil {
				l.e.logger.Warn("following producer state", "log", l.String(), "err", err)
				break
			}
		} else if h.ProducerID >= 0 {
			l.replayBatch(&h, nowMs)
		}
		done = h.LastOffset() + 1
	}
	ps.changed = ps.changed || done != base
	ps.setCovered(done)
}

// syncProducers brings the state to the log end after the log changed
// without Append: batches appended as a follower are replayed; a log end
// below what the state covers, or a log start above it (truncation, a log
// emptied and restarted), rebuilds the state from the snapshots and the log.
// Caller holds mu.
func (l *Log) syncProducers(nowMs int64) {
	ps := &l.producers
	end := l.logEnd.Load()
	if end < ps.coveredEnd || l.logStart.Load() > ps.coveredEnd {
		l.loadProducers()
		return
	}
	if err := l.replayProducers(ps.coveredEnd, end, nowMs); err != nil {
		l.e.logger.Warn("catching up producer state", "log", l.String(), "err", err)
	}
	ps.coveredEnd, ps.changed = end, true
	ps.setCovered(end)
}

// loadNewestSnapshot returns the state of the newest snapshot at or below
// end that reads back whole and its offset (nil, -1: none), and lists in
// ps.snapshots that one and the older files. Snapshots above end, below
// the first segment's base (the batches between it and the first segment
// were deleted: replaying from it would leave the state of those batches
// out, a stale sequence or an open transaction long ended), and the newer
// ones that do not decode (a crash can leave a snapshot missing, empty or
// torn: it was never synced), are deleted. Caller holds mu.
func (l *Log) loadNewestSnapshot(end int64) (map[int64]*producerEntry, int64) {
	ps := &l.producers
	ps.snapshots = nil
	offs, err := l.listSnapshots()
	if err != nil {
		l.e.logger.Warn("listing producer snapshots", "log", l.String(), "err", err)
	}
	first := int64(0)
	if segs := *l.segs.Load(); len(segs) > 0 {
		first = segs[0].base
	}
	var entries map[int64]*producerEntry
	from := int64(-1)
	for i := len(offs) - 1; i >= 0; i-- {
		off := offs[i]
		if off > end || off < first {
			l.removeSnapshot(off)
			continue
		}
		if from >= 0 {
			ps.snapshots = append(ps.snapshots, off)
			continue
		}
		got, err := l.readSnapshot(off)
		if err != nil {
			l.e.logger.Warn("ignoring producer snapshot", "log", l.String(), "offset", off, "err", err)
			l.removeSnapshot(off)
			continue
		}
		entries, from = got, off
		ps.snapshots = append(ps.snapshots, off)
	}
	slices.Sort(ps.snapshots)
	return entries, from
}

func (l *Log) readSnapshot(off int64) (map[int64]*producerEntry, error) {
	path := l.snapshotPath(off)
	data, err := vfs.ReadFileLimit(l.e.fs, path, maxSnapshotBytes)
	if errors.Is(err, vfs.ErrTooLarge) {
		return nil, fmt.Errorf("%w: larger than %d bytes", errBadSnapshot, maxSnapshotBytes)
	}
	if err != nil {
		return nil, err
	}
	got, entries, err := decodeProducerSnapshot(data)
	if err != nil {
		return nil, err
	}
	if got != off {
		return nil, fmt.Errorf("%w: file %s holds offset %d", errBadSnapshot, filepath.Base(path), got)
	}
	return entries, nil
}

// replayProducers applies the batches with a producer id in [from, end) to
// the state, without checks (they were checked when appended). A batch the
// state already holds (at or below a producer's newest offset) is skipped.
func (l *Log) replayProducers(from, end, nowMs int64) error {
	if from >= end {
		return nil
	}
	segs := *l.segs.Load()
	i := max(floorSegment(segs, from), 0)
	var buf []byte
	for ; i < len(segs) && segs[i].base < end; i++ {
		s := segs[i]
		pos := int64(0)
		if s.base < from {
			l.idxMu.RLock()
			_, pos = s.offLookup(from)
			l.idxMu.RUnlock()
		}
		limit := s.end.Load()
		if s.seg.Written() < limit {
			// A ring-backed segment holds its newest bytes in memory
			// until flushed; the caller holds mu, as Flush requires.
			if err := s.seg.Flush(); err != nil {
				return fmt.Errorf("replaying producer state of %s: %w", s.seg.Path(), err)
			}
		}
		bufPos, bufLen := int64(0), 0
		for pos < limit {
			if pos < bufPos || pos+record.HeaderSize > bufPos+int64(bufLen) {
				if buf == nil {
					buf = make([]byte, replayReadBytes)
				}
				n, err := s.seg.ReadAt(buf[:min(int64(len(buf)), limit-pos)], pos)
				if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
					return fmt.Errorf("replaying producer state of %s at %d: %w", s.seg.Path(), pos, err)
				}
				bufPos, bufLen = pos, n
			}
			h, err := record.ParseHeader(buf[pos-bufPos : bufLen])
			if err != nil {
				return fmt.Errorf("replaying producer state of %s at %d: %w", s.seg.Path(), pos, err)
			}
			if h.BaseOffset >= end {
				return nil
			}
			if h.LastOffset() >= from && h.ProducerID >= 0 && h.Control() {
				// A transaction marker: its record is needed (txn.go).
				size := int64(h.Size())
				if pos+size > bufPos+int64(bufLen) && size <= int64(len(buf)) {
					n, err := s.seg.ReadAt(buf[:min(int64(len(buf)), limit-pos)], pos)
					if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
						return fmt.Errorf("replaying producer state of %s at %d: %w", s.seg.Path(), pos, err)
					}
					bufPos, bufLen = pos, n
				}
				var batch []byte
				if pos+size <= bufPos+int64(bufLen) {
					batch = buf[pos-bufPos : pos-bufPos+size]
				}
				if err := l.replayMarker(&h, batch, nowMs); err != nil {
					return err
				}
			} else if h.LastOffset() >= from && h.ProducerID >= 0 {
				l.replayBatch(&h, nowMs)
			}
			pos += int64(h.Size())
		}
	}
	return nil
}

// replayBatch applies one batch of the log to the state (Kafka's append with
// origin replication: no validation).
func (l *Log) replayBatch(h *record.Header, nowMs int64) {
	ps := &l.producers
	e := ps.entries[h.ProducerID]
	if e == nil {
		if ps.entries == nil {
			ps.entries = make(map[int64]*producerEntry)
		}
		e = newProducerEntry()
		ps.entries[h.ProducerID] = e
	} else if b := e.newest(); b != nil && h.LastOffset() <= b.lastOffset {
		return
	}
	ps.replayed++
	first := h.BaseOffset
	if h.Transactional() {
		l.txnData(e, h.ProducerID, first) // txn.go
	}
	if h.BaseSequence < 0 {
		e.epoch, e.lastMs = h.ProducerEpoch, nowMs
		return
	}
	e.add(h.ProducerEpoch, producerBatch{
		firstSeq: h.BaseSequence, lastSeq: incrementSequence(h.BaseSequence, h.LastOffsetDelta),
		firstOffset: first, lastOffset: h.LastOffset(), maxTimestamp: h.MaxTimestamp,
	})
	e.lastMs = nowMs
}

// producersTruncated tells the producer state that the log was truncated
// (its end moved backwards, or it was emptied and restarted): snapshots
// above the new end are deleted and the state is rebuilt as at Open.
// Caller holds mu. TruncateTo and TruncateFullyAndStartAt
// (replication.go) call it. Without it a truncation would still be caught
// by the next Append or roll when the log end is below the state's
// (syncProducers), but not when follower appends refilled the log first.
func (l *Log) producersTruncated() {
	if end := l.logEnd.Load(); end == l.logStart.Load() {
		// Emptied (TruncateFullyAndStartAt): no snapshot describes the new
		// log, whose history lives on the leader; start with no producers,
		// as Kafka does.
		offs, err := l.listSnapshots()
		if err != nil {
			l.e.logger.Warn("listing producer snapshots", "log", l.String(), "err", err)
		}
		for _, off := range offs {
			l.removeSnapshot(off)
		}
		ps := &l.producers
		ps.entries, ps.snapshots, ps.snapOffset, ps.coveredEnd, ps.changed = nil, nil, -1, end, true
		ps.setCovered(end)
		l.loadTxnIndexes(end)
		l.rebuildOpenTxns()
		return
	}
	l.loadProducers()
}
