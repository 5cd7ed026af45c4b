package engine

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/internal/crcsum"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/segment"
)

// Log is one partition: an ordered set of segments [logStart, logEnd), with a
// high watermark <= logEnd. All methods are safe for concurrent use.
type Log struct {
	spanBuf []segment.Span // appendSegment's scratch (l.mu)
	e       *Engine
	topic   string
	topicID [16]byte // names the partition in journal records (journal.go)
	part    int32
	dir     string
	cfg     atomic.Pointer[LogConfig] // current config, replaced whole by setConfig; read with config()

	// mu serializes appends, rolls, DeleteRecords and the flusher's capture.
	mu         sync.Mutex
	rollQueued bool // queued for the roller (rollahead.go; mu)
	active     *logSegment
	closed     bool       // Close or DeleteTopic: Append fails
	deleted    bool       // DeleteTopic: the flusher skips the log
	flushState flushState // where the log stands in the flush pipeline
	flushTails int        // rounds handed back early (releaseRound) still publishing their end
	heldEnd    int64      // an end later rounds left for the last of flushTails to publish (complete)
	// lastEnd is the last end record staged for the log (ends mode,
	// journal.stageEnds), guarded by the journal's mu.
	lastEnd     stagedEnd
	deferListed bool          // in the coordinator's deferred list (write caching)
	pending     []*logSegment // sealed by a roll, not yet synced
	activeDirty bool          // the active segment has unsynced bytes
	// activeOwn: some of them are not in the journal (an append the
	// journal did not take, a truncation): a flush job must sync the
	// active segment itself. Journaled bytes need no flush job: their
	// group made them durable and a checkpoint writes them (capture).
	activeOwn   bool
	dirDirty    bool  // a segment file was created since the last dir sync
	unflushed   int64 // records appended since the last full flush (write.caching)
	lastFlushMs int64 // clock time of the last full flush

	segs atomic.Pointer[[]*logSegment] // immutable snapshot, replaced under mu

	// epochMu guards epochs (writers also hold mu) and epochsDirty, and
	// serializes the writes of leader-epoch-checkpoint; epoch mirrors its
	// newest epoch (0 if empty) for the per-request LeaderEpoch calls.
	// epochsDirty: an append changed the cache since the file was last
	// written (epochsAssigned); the next recovery-point checkpoint writes
	// it (saveDirtyEpochs).
	epochMu     sync.Mutex
	epochs      epochCache
	epoch       atomic.Int32
	epochsDirty bool

	// idxMu guards the indexes and per-segment timestamp bookkeeping.
	idxMu sync.RWMutex

	logEnd   atomic.Int64
	logStart atomic.Int64
	hw       atomic.Int64 // written under hwMu
	durable  atomic.Int64 // synced end = recovery point; raised by noteDurable, lowered by truncations (under lockIdle)

	hwMu    sync.Mutex
	waiters []durableWaiter // sorted by offset
	waitCh  chan struct{}   // closed when the HW advances; nil until Wait asks
	failErr error           // set once: offline or closed

	fireMu sync.Mutex
	firing []durableWaiter // reused buffer, guarded by fireMu

	producers producerState // idempotent producers (producers.go), guarded by mu

	repl replState // replication.go: role, handler, log-end waiters, damage mark

	tail tailCache // recent batches in memory (tailcache.go); appended to under mu
	copy copyStage // the active segment's bytes for its remote copy (copycache.go); under mu

	corrupt atomic.Pointer[Corruption] // set once: the log is corrupt and serves nothing (corrupt.go)

	pool   segPool   // recycled segment files (recycle.go)
	spares sparePool // deleted segments' files, emptied, for the next rolls (spare.go)

	// Recovery statistics of the last Open (tests): bases of walked segments
	// and bytes the walk covered.
	recoveredBases []int64
	recoveredBytes int64
}

type durableWaiter struct {
	offset int64
	fn     func(error)
}

// closedChan is returned by Wait when the condition already holds.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// AppendInfo describes a successful Append.
type AppendInfo struct {
	BaseOffset     int64 // offset of the first record appended
	LastOffset     int64 // offset of the last record appended
	LogAppendTime  int64 // ms; -1 unless message.timestamp.type=LogAppendTime
	LogStartOffset int64
	Duplicate      bool // a retried batch of an idempotent producer: the original offsets, nothing written
}

// ReadResult is the answer to Read. Release it when the chunks' bytes have
// been sent.
type ReadResult struct {
	HighWatermark    int64
	LastStableOffset int64 // <= HighWatermark: the first offset of an undecided transaction (txn.go)
	LogStartOffset   int64
	Chunks           []Chunk
	Bytes            int64 // sum of chunk lengths

	seg   *logSegment           // the pinned segment; nil once released
	tail  [maxTailRefs]*tailBuf // tail-cache buffers holding Buf chunks
	ntail int
}

// Release unpins the chunks' files and buffers. Idempotent; safe on a zero
// ReadResult.
func (r *ReadResult) Release() {
	if r.seg != nil {
		s := r.seg
		r.seg = nil
		s.seg.Unpin()
		s.release()
	}
	for i := range r.ntail {
		r.tail[i].unref()
		r.tail[i] = nil
	}
	r.ntail = 0
}

// Chunk is a byte range of a segment holding whole record batches: either
// in the segment file (File, Pos, Len: send with sendfile at Pos) or, from
// ReadMem only, in memory (Buf, with File nil and Len == len(Buf); Pos is
// then the bytes' position in the segment, informational). Buf stays
// valid and unchanged until ReadResult.Release.
type Chunk struct {
	File *os.File
	Pos  int64
	Len  int64
	Buf  []byte
}

// String returns "<topic>-<partition>".
func (l *Log) String() string { return fmt.Sprintf("%s-%d", l.topic, l.part) }

func (l *Log) HighWatermark() int64  { return l.hw.Load() }
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }
func (l *Log) LogEndOffset() int64   { return l.logEnd.Load() }

// LeaderEpoch returns the newest epoch in the leader-epoch cache, 0 if none
// was ever recorded (a single broker appends with epoch 0).
func (l *Log) LeaderEpoch() int32 { return l.epoch.Load() }

// epochsChanged republishes the newest epoch and persists the cache.
// Caller holds mu and epochMu.
func (l *Log) epochsChanged() error {
	l.mirrorEpoch()
	return l.saveEpochs()
}

// epochsAssigned is epochsChanged for an append, a leader's or a
// follower's, whose batches started a new epoch at the log end: the
// cache's file is written later, by the next recovery-point checkpoint
// (Engine.writeRecoveryCheckpoint, which writes it before it lets a
// recovery point pass the new entry), not here under Log.mu. Until then a
// crash loses nothing: recovery walks the log from below the recovery
// point and rebuilds the cache from the batches it walks (walkSegment),
// and every entry below the recovery point is in the file. Writing it
// here (a file, its fsync, a rename and a directory fsync) held the
// append for about a millisecond: a new topic's first produce request
// over 96 partitions took 96 of them in a row, each appended alone into
// a journal group of its own (docs/performance.md, "Session 43"). Kafka
// likewise flushes this file off the append path (KAFKA-15046). Caller
// holds mu and epochMu.
func (l *Log) epochsAssigned() {
	l.mirrorEpoch()
	l.epochsDirty = true
}

// mirrorEpoch stores the cache's newest epoch (0 if empty) in l.epoch.
// Caller holds epochMu.
func (l *Log) mirrorEpoch() {
	e, ok := l.epochs.latest()
	if !ok {
		e = 0
	}
	l.epoch.Store(e)
}

// EndOffsetForEpoch returns the largest epoch <= epoch and its end offset
// (OffsetForLeaderEpoch); (-1, -1) if unknown.
func (l *Log) EndOffsetForEpoch(epoch int32) (leaderEpoch int32, endOffset int64) {
	l.epochMu.Lock()
	defer l.epochMu.Unlock()
	return l.epochs.endOffsetFor(epoch, l.logEnd.Load())
}

// validateBatches checks every batch of an append request and returns the
// number of offsets it needs.
func validateBatches(batches []byte, maxMessageBytes int32, sums *crcsum.Sums, sumsAt int) (records int64, err error) {
	if len(batches) == 0 {
		return 0, fmt.Errorf("%w: empty request", ErrInvalidRecord)
	}
	at := 0
	for rest := batches; len(rest) > 0; {
		b, r, h, err := record.Next(rest)
		if err != nil {
			return 0, classifyRecordErr(err, at)
		}
		if len(b) > int(maxMessageBytes) {
			return 0, fmt.Errorf("%w: batch at byte %d is %d bytes, max.message.bytes is %d", ErrMessageTooLarge, at, len(b), maxMessageBytes)
		}
		if sums == nil || len(b) < record.HeaderSize {
			h, err = record.Validate(b)
		} else {
			h, err = record.ValidateCRC(b, sums.Checksum(b[record.OffsetAttrs:], sumsAt+at+record.OffsetAttrs))
		}
		if err != nil {
			return 0, classifyRecordErr(err, at)
		}
		records += int64(h.LastOffsetDelta) + 1
		at += len(b)
		rest = r
	}
	if records > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %d records in one request", ErrInvalidRecord, records)
	}
	return records, nil
}

func classifyRecordErr(err error, at int) error {
	if errors.Is(err, record.ErrCorrupt) {
		return fmt.Errorf("%w: batch at byte %d: %v", ErrCorruptMessage, at, err)
	}
	return fmt.Errorf("%w: batch at byte %d: %v", ErrInvalidRecord, at, err)
}

// usable returns the error Append, Read and the admin calls fail with.
func (l *Log) usable() error {
	if err := l.e.Offline(); err != nil {
		return err
	}
	l.hwMu.Lock()
	err := l.failErr
	l.hwMu.Unlock()
	return err
}

// Append validates batches (one or more concatenated RecordBatch v2, as a
// producer sent them), assigns offsets under the partition lock by patching
// baseOffset and partitionLeaderEpoch in place (bytes otherwise stored as
// received; buf is not retained after return), writes them to the active
// segment (rolling as needed), updates the indexes, and returns once written
// (not yet durable: see WhenDurable). On any validation error the log is
// unchanged. A write error takes the engine offline.
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendInfo, error) {
	return l.appendBatches(batches, leaderEpoch, nil, nil, 0)
}

// AppendSummed is Append for batches that lie at offset at of a buffer
// whose block checksums sums holds (a produce request's frame, summed by
// its connection's reader as it arrived: crcsum): the batches' CRC check
// combines those sums and reads only each batch's ends, instead of every
// byte again. A nil sums, or batches not at that offset, are checked from
// their bytes. The buffer's bytes must be as they were when summed (a
// change would be taken for corruption or, worse, missed): Append's own
// patching of baseOffset, partitionLeaderEpoch and LogAppendTime comes
// after the check.
func (l *Log) AppendSummed(batches []byte, leaderEpoch int32, sums *crcsum.Sums, at int) (AppendInfo, error) {
	return l.appendBatches(batches, leaderEpoch, nil, sums, at)
}

// appendBatches is Append; m != nil appends the transaction marker batch m
// built (txn.go) instead of client batches; sums, when not nil, takes the
// client batches' CRCs, batches being at offset sumsAt of its buffer
// (AppendSummed).
func (l *Log) appendBatches(batches []byte, leaderEpoch int32, m *txnMarker, sums *crcsum.Sums, sumsAt int) (AppendInfo, error) {
	cfg := l.config()
	records := int64(1) // a marker batch holds one control record
	if m == nil {
		var err error
		if records, err = validateBatches(batches, cfg.MaxMessageBytes, sums, sumsAt); err != nil {
			return AppendInfo{}, err
		}
		if cfg.compacted() { // a compacted topic refuses keyless records (cleaner.go)
			if err := validateKeys(batches); err != nil {
				return AppendInfo{}, err
			}
		}
	}
	n := int64(len(batches))
	if err := l.e.noSpace(l.topic); err != nil && m == nil {
		return AppendInfo{}, err // below the free-space floor (diskfloor.go)
	}

	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return AppendInfo{}, l.closedErr()
	}
	if err := l.e.Offline(); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	base := l.logEnd.Load()
	if base > math.MaxInt64-records {
		l.mu.Unlock()
		return AppendInfo{}, fmt.Errorf("%w: offsets exhausted", ErrInvalidRecord)
	}
	last := base + records - 1
	nowMs := l.e.nowMs()
	appendTime := int64(-1)
	if cfg.logAppendTime() {
		appendTime = nowMs
	}
	// Idempotent producers (producers.go): a retried batch is answered with
	// its original offsets and not written; a sequence or epoch error fails.
	if info, done, err := l.checkProducers(batches, nowMs, m); done {
		l.mu.Unlock()
		return info, err
	}
	next := base
	for rest := batches; len(rest) > 0; {
		b, r, h, _ := record.Next(rest) // validated above
		record.SetBaseOffset(b, next)
		record.SetPartitionLeaderEpoch(b, leaderEpoch)
		if appendTime >= 0 {
			record.SetLogAppendTime(b, appendTime)
		}
		next += int64(h.LastOffsetDelta) + 1
		rest = r
	}

	if l.shouldRoll(l.active, n, last, nowMs) {
		if err := l.roll(); err != nil {
			l.mu.Unlock()
			if errors.Is(err, errCreateSegment) {
				return AppendInfo{}, l.e.createFailure(fmt.Sprintf("rolling %s", l), err)
			}
			return AppendInfo{}, l.e.ioFailure(fmt.Sprintf("rolling %s", l), err)
		}
	}
	s := l.active
	caching := cfg.WriteCaching
	pos, spans, err := l.appendSegment(s, batches, caching)
	if err != nil {
		l.mu.Unlock()
		if errors.Is(err, segment.ErrReserve) {
			return AppendInfo{}, l.e.createFailure(fmt.Sprintf("reserving space in %s", s.seg.Path()), err)
		}
		return AppendInfo{}, l.e.ioFailure(fmt.Sprintf("writing %s", s.seg.Path()), err)
	}
	l.tail.add(l.e.tails, s, pos, batches, base, nowMs)
	l.copy.add(l, cfg, s, pos, batches)
	if s.firstAppendMs < 0 {
		s.firstAppendMs = nowMs
	}
	l.idxMu.Lock()
	p := pos
	for rest := batches; len(rest) > 0; {
		b, r, h, _ := record.Next(rest)
		l.indexBatch(s, h.MaxTimestamp, h.LastOffset(), p, int64(len(b)))
		p += int64(len(b))
		rest = r
	}
	l.idxMu.Unlock()
	s.end.Store(pos + n)
	l.logEnd.Store(next)
	l.maybeRollAhead(s, cfg)                                   // rollahead.go
	txnErr := l.recordProducers(base, next, nowMs, appendTime) // producers.go, txn.go: open transactions, aborted index

	if leaderEpoch >= 0 && (leaderEpoch != l.epoch.Load() || len(l.epochs.entries) == 0) {
		l.epochMu.Lock()
		if l.epochs.assign(leaderEpoch, base) {
			l.epochsAssigned()
		}
		l.epochMu.Unlock()
	}
	l.activeDirty = true
	l.unflushed += records
	// With the journal (journal.go) the batches become durable with the
	// journal's next group; the segment's chunk is written when full.
	journaled := !caching && l.e.jnl != nil && !l.e.jnlEnds && l.e.jnl.stageAppend(l, s.base, pos, batches, next, spans)
	l.activeOwn = l.activeOwn || !journaled
	// With write.caching the log waits (deferred) until flush.ms or
	// flush.messages is reached; without, it is queued for a flush worker.
	urgent := !journaled && (!caching || l.unflushed >= cfg.FlushMessages || nowMs-l.lastFlushMs >= cfg.FlushMs)
	l.e.markDirty(l, urgent)
	if urgent {
		s.seg.WriteBehind() // the write goes out now, not when a flush worker takes the log
	}
	logStart := l.logStart.Load()
	l.mu.Unlock()

	if txnErr != nil {
		return AppendInfo{}, txnErr
	}
	l.appended(next, caching) // replication.go: log-end waiters; the HW under write.caching
	return AppendInfo{BaseOffset: base, LastOffset: last, LogAppendTime: appendTime, LogStartOffset: logStart}, nil
}

// appendSegment appends batches to s. When the journal will take them
// (not write caching) and they are large enough, it asks the segment for
// the spans of chunk memory holding them, so that the journal writes them
// from there instead of copying them (stageAppend takes the spans over).
// Caller holds l.mu.
func (l *Log) appendSegment(s *logSegment, batches []byte, caching bool) (int64, []segment.Span, error) {
	if caching || l.e.jnl == nil || l.e.jnlEnds || len(batches) < journalSpanMin {
		pos, err := s.seg.Append(batches)
		return pos, nil, err
	}
	pos, spans, err := s.seg.AppendSpans(batches, l.spanBuf[:0], journalSpanAlign, journalMaxPins)
	l.spanBuf = spans[:0]
	return pos, spans, err
}

func (l *Log) closedErr() error {
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	if l.failErr != nil {
		return l.failErr
	}
	return ErrClosed
}

// indexBatch does the per-batch bookkeeping of an append or a recovery walk:
// the largest timestamp and, every index.interval.bytes, an offset index
// entry (batch last offset -> batch position) and a time index entry.
// Caller holds idxMu (and mu, or is recovering).
func (l *Log) indexBatch(s *logSegment, maxTs, lastOffset, pos, size int64) {
	if maxTs > s.maxTs {
		s.maxTs, s.maxTsOff = maxTs, lastOffset
	}
	if s.bytesSince >= int64(l.config().IndexIntervalBytes) && s.off != nil && pos <= math.MaxInt32 {
		// Errors are ignored on purpose: the indexes are sparse hints, full
		// ones trigger a roll before the next append.
		if s.off.Entries() < l.config().maxOffsetEntries() {
			_ = s.off.Append(lastOffset, pos)
		}
		if s.tim != nil && s.maxTs > -1 && s.tim.Entries() < l.config().maxTimeEntries() {
			_ = s.tim.Append(s.maxTs, s.maxTsOff)
		}
		s.bytesSince = 0
	}
	s.bytesSince += size
}

// shouldRoll reports whether an append of n bytes ending at lastOffset must
// go to a new segment. An empty segment takes any append.
func (l *Log) shouldRoll(s *logSegment, n, lastOffset, nowMs int64) bool {
	size := s.end.Load()
	if size == 0 {
		return false
	}
	cfg := l.config()
	return size > cfg.SegmentBytes-n ||
		size+n > math.MaxInt32 ||
		(s.firstAppendMs >= 0 && nowMs-s.firstAppendMs >= cfg.SegmentMs) ||
		s.offEntries() >= cfg.maxOffsetEntries() ||
		s.timEntries() >= cfg.maxTimeEntries() ||
		lastOffset-s.base > math.MaxInt32
}

// roll seals the active segment and starts a new one at the log end. Caller
// holds mu. The flush it queues syncs the old segment and its indexes.
func (l *Log) roll() error {
	old := l.active
	// In the ends mode the roll syncs the new file and the sealed segment
	// itself; where the journal holds the records, the new file's creation
	// made its directory entry durable and the sealed segment is synced
	// later (see below).
	rollSyncs := l.e.jnl != nil && l.e.jnlEnds
	// The old segment's tail goes to the device now, so that seal's wait
	// for it overlaps the new segment's creation (a directory fsync):
	// seal waited 3.4 ms on average for that write after it.
	old.seg.WriteBehind()
	ns, err := l.newSegment(l.logEnd.Load(), rollSyncs)
	if err != nil {
		return fmt.Errorf("%w: %w", errCreateSegment, err)
	}
	l.idxMu.Lock()
	err = old.seal()
	l.idxMu.Unlock()
	if err != nil {
		ns.release()
		return err
	}
	l.copy.sealed(old, l.e.nowMs()) // copycache.go: its bytes in memory go with it
	if rollSyncs {
		// The ends mode: journal records name their segment's bytes, so
		// the sealed one's are made durable now. Where the journal holds
		// the records, the sealed segment is synced by the flush the roll
		// queues (l.pending), and a checkpoint syncs it first if it comes
		// before (journal.go, checkpoint: every sealed segment still
		// idxUnsynced), so the roll does not wait for it: a roll of a 64
		// MiB segment held the partition, and with it the produce
		// request's append loop, 12.7 ms on average, 2.1 of them this sync
		// and 5-6 the new file's (docs/performance.md, session 29).
		if err := l.e.syncFile(old.logPath, old.seg.Sync); err != nil {
			ns.release()
			return err
		}
	}
	// No directory sync here nor in the roll's flush job: making the new
	// segment's files synced the directory (newSegment), which is what
	// journal records naming the new segment need, and the roll's other
	// change to the directory, the producer snapshot, is written without
	// a sync (Open rebuilds a lost or torn one). A roll made three
	// directory fsyncs before, where one does (docs/performance.md,
	// "Session 36").
	l.pending = append(l.pending, old)
	segs := *l.segs.Load()
	next := make([]*logSegment, len(segs), len(segs)+1)
	copy(next, segs)
	next = append(next, ns)
	l.segs.Store(&next)
	l.active = ns
	l.e.markDirty(l, true)
	l.snapshotProducers() // <new base>.snapshot (producers.go)
	return nil
}

// createSegment makes a new empty active segment at base.
func (l *Log) createSegment(base int64) (*logSegment, error) {
	return l.newSegment(base, true)
}

// newSegment is createSegment; making the data file fsyncs the directory
// (ioBackend.create), and with the journal syncNew also fsyncs the new
// file itself.
func (l *Log) newSegment(base int64, syncNew bool) (*logSegment, error) {
	s := newLogSegment(l.dir, base, l.e.logger)
	s.txnLoaded = true // a new segment has no aborted transactions (txnindex.go)
	if err := removeSegmentPaths(l.e.fs, s.logPath, s.offPath, s.timPath, s.txnPath); err != nil {
		return nil, err
	}
	// The index files over spare inodes when l has them (spare.go); the
	// data file's is taken in newSegmentFile, after the recycled pool.
	l.spares.take(l.segmentFS(), s.offPath)
	l.spares.take(l.segmentFS(), s.timPath)
	prealloc := int64(0)
	if l.config().Preallocate || (l.e.jnlEnds && l.e.io.direct()) { // ends mode: the zero-fill's cap (recycle.go)
		prealloc = l.config().SegmentBytes
	}
	// The index files first, then the data file: making the data file
	// (create or recycle, every backend) fsyncs the directory, which makes
	// the three entries durable at once. A crash between the two leaves
	// index files without a .log, which Open removes.
	s.io = l.e.io
	if err := s.openActiveIndexes(l.config()); err != nil {
		s.removeFiles(l.e.fs)
		return nil, err
	}
	seg, grp, err := l.newSegmentFile(s.logPath, base, prealloc) // a recycled file, if l has one (recycle.go)
	if err != nil {
		_ = s.closeIndexes()
		s.removeFiles(l.e.fs)
		return nil, err
	}
	s.seg, s.grp, s.grpOut = seg, grp, grp != nil
	if l.e.jnl != nil && syncNew {
		// Journal records name this file: it must exist after a crash
		// (its directory entry was synced as it was made).
		if err := l.e.syncFile(s.logPath, seg.Sync); err != nil {
			s.release()
			return nil, err
		}
	}
	return s, nil
}

// errCreateSegment marks a failure to create the next segment (roll): the
// log is unchanged, its active segment stays, and the next append tries
// again.
var errCreateSegment = errors.New("creating the next segment")

// removeFiles removes what a failed createSegment left (best effort: a
// leftover empty segment at the log end is recovered as an empty active
// segment, and the next roll removes it first).
func (s *logSegment) removeFiles(fsys vfs.FS) {
	_ = removeSegmentPaths(fsys, s.logPath, s.offPath, s.timPath, s.txnPath)
}

// WhenDurable calls fn exactly once, from a flush worker or inline,
// when every offset <= offset is below the HW (durable unless write.caching),
// fn(nil), or when the log goes offline or closes, fn(err). fn must not block
// or call Append.
func (l *Log) WhenDurable(offset int64, fn func(error)) {
	l.hwMu.Lock()
	if err := l.failErr; err != nil {
		l.hwMu.Unlock()
		fn(err)
		return
	}
	if l.hw.Load() > offset {
		l.hwMu.Unlock()
		fn(nil)
		return
	}
	i := len(l.waiters)
	for i > 0 && l.waiters[i-1].offset > offset {
		i--
	}
	l.waiters = append(l.waiters, durableWaiter{})
	copy(l.waiters[i+1:], l.waiters[i:])
	l.waiters[i] = durableWaiter{offset: offset, fn: fn}
	l.hwMu.Unlock()
}

// Wait returns a channel that is already closed if the HW is past offset
// (HW > offset) or the log closed or went offline, and otherwise is closed
// the next time the HW advances, past offset or not: callers check the HW
// again (long-poll fetches select on it). WhenDurable waits for one offset.
func (l *Log) Wait(offset int64) <-chan struct{} {
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	if l.hw.Load() > offset || l.failErr != nil {
		return closedChan
	}
	if l.waitCh == nil {
		l.waitCh = make(chan struct{})
	}
	return l.waitCh
}

// advanceHW moves the HW to hw (never backwards), wakes Wait callers and runs
// the WhenDurable callbacks it satisfies.
func (l *Log) advanceHW(hw int64) {
	l.hwMu.Lock()
	if hw <= l.hw.Load() {
		l.hwMu.Unlock()
		return
	}
	l.hw.Store(hw)
	if l.waitCh != nil {
		close(l.waitCh)
		l.waitCh = nil
	}
	ready := len(l.waiters) > 0 && l.waiters[0].offset < hw
	l.hwMu.Unlock()
	if ready {
		l.fireReady()
	}
}

// fail makes every pending and future waiter get err, and wakes Wait callers.
func (l *Log) fail(err error) {
	l.hwMu.Lock()
	if l.failErr == nil {
		l.failErr = err
	}
	if l.waitCh != nil {
		close(l.waitCh)
		l.waitCh = nil
	}
	l.hwMu.Unlock()
	l.fireReady()
}

// fireReady runs the callbacks whose offset is below the HW (all of them,
// with the error, once the log failed), outside hwMu.
func (l *Log) fireReady() {
	l.fireMu.Lock()
	defer l.fireMu.Unlock()
	l.hwMu.Lock()
	hw, err := l.hw.Load(), l.failErr
	n := 0
	if err != nil {
		n = len(l.waiters)
	} else {
		for n < len(l.waiters) && l.waiters[n].offset < hw {
			n++
		}
	}
	l.firing = append(l.firing[:0], l.waiters[:n]...)
	m := copy(l.waiters, l.waiters[n:])
	clear(l.waiters[m:])
	l.waiters = l.waiters[:m]
	l.hwMu.Unlock()
	for i := range l.firing {
		l.firing[i].fn(err)
		l.firing[i] = durableWaiter{}
	}
	l.firing = l.firing[:0]
}

// floorSegment returns the index of the last segment with base <= offset, -1 if none.
func floorSegment(segs []*logSegment, offset int64) int {
	return sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
}

// Read returns whole batches starting with the batch containing offset, up to
// maxBytes total, never past the HW and never from more than one segment; if
// minOneBatch and the first batch is larger than maxBytes it is returned
// whole. offset == HW returns no chunks. offset < logStart or > logEnd:
// ErrOffsetOutOfRange. The chunk's file stays open until Release is called.
func (l *Log) Read(offset int64, maxBytes int32, minOneBatch bool) (ReadResult, error) {
	return l.readUpTo(offset, maxBytes, minOneBatch, -1)
}

// readUpTo is Read with the visible end upTo instead of the HW (-1: the HW;
// never past the log end): follower fetches read to the log end
// (ReadReplica, replication.go).
func (l *Log) readUpTo(offset int64, maxBytes int32, minOneBatch bool, upTo int64) (ReadResult, error) {
	return l.read(offset, maxBytes, minOneBatch, upTo, false)
}

// ReadMem is Read that may answer from the tail cache (tailcache.go): the
// result's chunks are then memory chunks (Chunk.Buf set, File nil), valid
// until Release. Consumers at the head of a partition are served without
// reading the segment file (which, written with O_DIRECT, is not in the
// page cache). Callers that can only send file ranges use Read.
func (l *Log) ReadMem(offset int64, maxBytes int32, minOneBatch bool) (ReadResult, error) {
	return l.read(offset, maxBytes, minOneBatch, -1, true)
}

// ReadReplicaMem is ReadReplica (a follower fetch, up to the log end) that
// may answer from the tail cache, as ReadMem.
func (l *Log) ReadReplicaMem(offset int64, maxBytes int32, minOneBatch bool) (ReadResult, error) {
	return l.read(offset, maxBytes, minOneBatch, math.MaxInt64, true)
}

// read is Read, readUpTo and ReadMem: mem allows memory chunks.
//
// File chunks never reach past the segment's Written() end (bytes a Direct
// segment has appended but not yet written are not in the file). A batch
// below the visible end but above Written (write.caching, or a follower
// read to the log end) is made readable by flushing the segment's tail
// (Segment.Flush, under Log.mu), once per read, when the tail cache cannot
// serve it.
func (l *Log) read(offset int64, maxBytes int32, minOneBatch bool, upTo int64, mem bool) (ReadResult, error) {
	if err := l.usable(); err != nil {
		return ReadResult{}, err
	}
	if mem {
		l.tail.markRead(l.e.nowMs()) // before the HW check: a consumer waiting at the head wants the cache
	}
	hw, start, end := l.hw.Load(), l.logStart.Load(), l.logEnd.Load()
	res := ReadResult{HighWatermark: hw, LastStableOffset: l.lastStableOffset(hw), LogStartOffset: start}
	if offset < start || offset > end {
		return res, fmt.Errorf("%w: offset %d not in [%d, %d] of %s", ErrOffsetOutOfRange, offset, start, end, l)
	}
	bound := hw
	if upTo >= 0 {
		bound = min(upTo, end)
	}
	if offset >= bound {
		return res, nil
	}
	limit := int64(max(maxBytes, 0))
	// A segment can be deleted between loading the snapshot and pinning it;
	// then the snapshot is reloaded. DeleteRecords only moves forward, so two
	// tries suffice unless it keeps racing; more fail as out of range.
	for attempt := 0; attempt < 8; attempt++ {
		segs := *l.segs.Load()
		i := floorSegment(segs, offset)
		if i < 0 {
			break
		}
		retry := false
		for ; i < len(segs); i++ {
			s := segs[i]
			if !s.acquire() {
				retry = true
				break
			}
			if mem && l.tailRead(s, offset, bound, limit, minOneBatch, &res) { // tailcache_stats.go: counts hits and misses
				s.release()
				return res, nil
			}
			pos, n, done, err := l.scanRead(s, offset, bound, limit, minOneBatch)
			if errors.Is(err, errUnwritten) {
				if err = l.flushForRead(s); err == nil {
					pos, n, done, err = l.scanRead(s, offset, bound, limit, minOneBatch)
				}
			}
			if err != nil {
				err = l.readCorruption(s, offset, err) // a header that does not parse: never sent (corrupt.go)
				s.release()
				return res, err
			}
			if n > 0 {
				if err := l.checkChunk(s, pos, n); err != nil { // bytes recovery trusted: CRCs checked first (corrupt.go)
					s.release()
					return res, err
				}
				// The file stays open until Release (a sealed segment's
				// descriptor may be parked while idle: logsegment.go).
				s.seg.Pin()
				res.Chunks = []Chunk{{File: s.seg.File(), Pos: pos, Len: n}}
				res.Bytes = n
				res.seg = s
				return res, nil
			}
			s.release()
			if done {
				return res, nil
			}
		}
		if !retry {
			return res, nil
		}
	}
	return res, fmt.Errorf("%w: offset %d of %s was deleted", ErrOffsetOutOfRange, offset, l)
}

// scanRead finds the batches of s to return for a read at offset. done is
// true when the read must not continue into the next segment (a batch was
// found, or the HW or maxBytes stopped it).
//
// Cost: a header scan from the index floor to the first batch, then a jump
// through the offset index to the last indexed batch that still fits
// maxBytes, then a header scan of what follows it: about two index
// intervals of headers however large maxBytes is.
func (l *Log) scanRead(s *logSegment, offset, hw, maxBytes int64, minOneBatch bool) (pos, n int64, done bool, err error) {
	l.idxMu.RLock()
	_, from := s.offLookup(offset)
	l.idxMu.RUnlock()
	limit := s.readEnd()
	// One read ahead for the header scan and the send that follow (an
	// active Direct segment has the kernel's readahead off: segment.Prefetch).
	s.seg.Prefetch(from, maxBytes)
	var first segment.BatchInfo
	found := false
	err = s.seg.Scan(from, limit, func(b segment.BatchInfo) bool {
		if b.LastOffset < offset {
			return true
		}
		first, found = b, true
		return false
	})
	if err != nil {
		return 0, 0, true, fmt.Errorf("reading %s: %w", s.seg.Path(), err)
	}
	if !found {
		if limit < s.end.Load() {
			return 0, 0, true, errUnwritten // appended, not yet in the file
		}
		return 0, 0, false, nil // nothing at or after offset here: next segment
	}
	if first.BaseOffset >= hw {
		return 0, 0, true, nil
	}
	start, end := first.Pos, first.Pos+int64(first.Size)
	if end-start > maxBytes {
		if !minOneBatch {
			return 0, 0, true, nil
		}
		return start, end - start, true, nil
	}
	budgetEnd := start + maxBytes
	if next := first.LastOffset + 1; next < hw {
		l.idxMu.RLock()
		// Index entries are added at append, before a Direct segment's
		// write-behind has put the bytes in the file: never jump past limit.
		if p := indexJump(s, next, hw-1, min(budgetEnd, limit)); p > end {
			end = p // [start, p) is whole batches below the HW and limit, within budget
		}
		l.idxMu.RUnlock()
	}
	err = s.seg.Scan(end, limit, func(b segment.BatchInfo) bool {
		if b.BaseOffset >= hw || b.Pos+int64(b.Size) > budgetEnd {
			return false
		}
		end = b.Pos + int64(b.Size)
		return true
	})
	if err != nil {
		return 0, 0, true, fmt.Errorf("reading %s: %w", s.seg.Path(), err)
	}
	return start, end - start, true, nil
}

// errUnwritten: the batch a read wants is appended but not yet written to
// the segment file (scanRead).
var errUnwritten = errors.New("engine: batch not yet written")

// flushForRead makes every appended byte of s readable from its file
// (Segment.Flush). Readers take Log.mu only here.
func (l *Log) flushForRead(s *logSegment) error {
	l.mu.Lock()
	err := s.seg.Flush()
	l.mu.Unlock()
	if err != nil && !errors.Is(err, segment.ErrClosed) {
		return l.e.ioFailure(fmt.Sprintf("writing %s", s.seg.Path()), err)
	}
	return nil
}

// indexJump returns the position of the last offset index entry with an
// offset in [lo, hi] and a position <= maxPos, -1 if none. Index entries
// point at batch starts and positions grow with offsets, so a binary search
// over offsets finds it. Caller holds idxMu.
func indexJump(s *logSegment, lo, hi, maxPos int64) int64 {
	best := int64(-1)
	for lo <= hi {
		mid := lo + (hi-lo)/2
		eo, p := s.offLookup(mid)
		if p > maxPos {
			hi = mid - 1
			continue
		}
		if eo >= s.base && p > 0 {
			best = max(best, p)
		}
		// No entry in (eo, mid] lies within budget beyond p; look higher.
		lo = mid + 1
	}
	return best
}

// readBatch reads the whole batch described by b from s.
func readBatch(s *logSegment, b segment.BatchInfo) ([]byte, error) {
	buf := make([]byte, b.Size)
	if _, err := s.seg.ReadAt(buf, b.Pos); err != nil {
		return nil, fmt.Errorf("reading %s at %d: %w", s.seg.Path(), b.Pos, err)
	}
	return buf, nil
}

// OffsetForTimestamp returns the first offset whose record timestamp >= ts
// (via the time index then a short scan), with that record's timestamp;
// found false if none below the HW (the caller answers with the log end
// offset, timestamp -1).
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, found bool) {
	if l.usable() != nil {
		return -1, -1, false
	}
	hw, start := l.hw.Load(), l.logStart.Load()
	segs := *l.segs.Load()
	for _, s := range segs {
		if !s.acquire() {
			continue
		}
		l.idxMu.RLock()
		segMax := s.maxTs
		var from int64
		if segMax >= ts {
			_, off := s.timLookup(ts)
			_, from = s.offLookup(off)
		}
		l.idxMu.RUnlock()
		if segMax < ts || s.base >= hw {
			s.release()
			if s.base >= hw {
				break
			}
			continue
		}
		off, t, ok, stop := l.searchTimestamp(s, from, ts, start, hw)
		s.release()
		if ok {
			return off, t, true
		}
		if stop {
			break
		}
	}
	return -1, -1, false
}

// searchTimestamp scans s from position from for the first record at or
// above minOffset with timestamp >= ts, below hw. stop is set when the scan
// reached the HW.
func (l *Log) searchTimestamp(s *logSegment, from, ts, minOffset, hw int64) (offset, timestamp int64, found, stop bool) {
	if s.readEnd() < s.end.Load() {
		// Batches below the HW may still be in the appender's tail (the
		// journal writes segment chunks only when full: journal.go).
		_ = l.flushForRead(s)
	}
	var hit segment.BatchInfo
	have := false
	err := s.seg.Scan(from, s.readEnd(), func(b segment.BatchInfo) bool {
		if b.BaseOffset >= hw {
			stop = true
			return false
		}
		if b.LastOffset < minOffset || b.MaxTimestamp < ts {
			return true
		}
		hit, have = b, true
		return false
	})
	if err != nil || !have {
		return -1, -1, false, stop
	}
	buf, err := readBatch(s, hit)
	if err != nil {
		l.e.logger.Warn("timestamp lookup", "log", l.String(), "err", err)
		return -1, -1, false, true
	}
	offset, timestamp = -1, -1
	errStop := errors.New("stop")
	err = record.Iterate(buf, func(h *record.Header, r *record.Record) error {
		off := h.BaseOffset + int64(r.OffsetDelta)
		t := h.BaseTimestamp + r.TimestampDelta
		if h.LogAppendTime() {
			t = h.MaxTimestamp
		}
		if off >= minOffset && off < hw && t >= ts {
			offset, timestamp = off, t
			return errStop
		}
		return nil
	})
	if offset >= 0 {
		return offset, timestamp, true, false
	}
	if err != nil {
		l.e.logger.Warn("timestamp lookup: decoding batch", "log", l.String(), "pos", hit.Pos, "err", err)
	}
	// The batch's max timestamp promised a match (it is outside the CRC only
	// for LogAppendTime, which is handled above): keep looking after it.
	next := hit.Pos + int64(hit.Size)
	if next < s.end.Load() {
		return l.searchTimestamp(s, next, ts, minOffset, hw)
	}
	return -1, -1, false, stop
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (ListOffsets -3); (-1, -1) if empty.
func (l *Log) MaxTimestamp() (offset int64, timestamp int64) {
	if l.usable() != nil {
		return -1, -1
	}
	segs := *l.segs.Load()
	var best *logSegment
	bestTs, bestOff := int64(-1), int64(-1)
	l.idxMu.RLock()
	for _, s := range segs {
		if s.maxTs > bestTs {
			best, bestTs, bestOff = s, s.maxTs, s.maxTsOff
		}
	}
	l.idxMu.RUnlock()
	if best == nil || !best.acquire() {
		return -1, -1
	}
	defer best.release()
	l.idxMu.RLock()
	_, from := best.offLookup(bestOff)
	l.idxMu.RUnlock()
	if best.readEnd() < best.end.Load() {
		_ = l.flushForRead(best) // the batch may still be in the appender's tail
	}
	var hit segment.BatchInfo
	have := false
	_ = best.seg.Scan(from, best.readEnd(), func(b segment.BatchInfo) bool {
		if b.LastOffset < bestOff {
			return true
		}
		hit, have = b, true
		return false
	})
	if !have {
		return bestOff, bestTs
	}
	buf, err := readBatch(best, hit)
	if err != nil {
		return bestOff, bestTs
	}
	offset = -1
	errStop := errors.New("stop")
	_ = record.Iterate(buf, func(h *record.Header, r *record.Record) error {
		t := h.BaseTimestamp + r.TimestampDelta
		if h.LogAppendTime() || t == bestTs {
			offset = h.BaseOffset + int64(r.OffsetDelta)
			return errStop
		}
		return nil
	})
	if offset < 0 {
		return bestOff, bestTs
	}
	return offset, bestTs
}

// DeleteRecords moves the log start offset to before (<= HW, else
// ErrOffsetOutOfRange; -1 means the HW, as in Kafka's DeleteRecords) and
// deletes whole segments that lie entirely below it. Offsets of the remaining
// records never change. Returns the new log start.
func (l *Log) DeleteRecords(before int64) (int64, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, l.closedErr()
	}
	if err := l.e.Offline(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	hw := l.hw.Load()
	if before == -1 {
		before = hw
	}
	if before < 0 || before > hw {
		l.mu.Unlock()
		return 0, fmt.Errorf("%w: delete before %d, high watermark %d", ErrOffsetOutOfRange, before, hw)
	}
	cur := l.logStart.Load()
	if before <= cur {
		l.mu.Unlock()
		return cur, nil
	}
	l.logStart.Store(before)
	if before == l.logEnd.Load() && l.active.end.Load() > 0 {
		if err := l.roll(); err != nil {
			l.logStart.Store(cur)
			l.mu.Unlock()
			if errors.Is(err, errCreateSegment) {
				return 0, l.e.createFailure(fmt.Sprintf("rolling %s", l), err)
			}
			return 0, l.e.ioFailure(fmt.Sprintf("rolling %s", l), err)
		}
	}
	segs := *l.segs.Load()
	k := 0
	for k < len(segs)-1 && segs[k+1].base <= before {
		k++
	}
	victims := segs[:k:k]
	if k > 0 {
		rest := append([]*logSegment(nil), segs[k:]...)
		l.segs.Store(&rest)
		l.poolVictims(victims) // recycle.go
		kept := l.pending[:0]
		for _, p := range l.pending {
			if !containsSegment(victims, p) {
				kept = append(kept, p)
			}
		}
		clear(l.pending[len(kept):])
		l.pending = kept
	}
	var epochErr error
	l.epochMu.Lock()
	if l.epochs.truncateFromStart(before) {
		epochErr = l.epochsChanged()
	}
	l.epochMu.Unlock()
	l.mu.Unlock()

	for _, v := range victims {
		v.markDeleted(&l.idxMu, true)
		v.release()
	}
	if err := l.startTrimmedEpochs(epochErr); err != nil {
		return 0, err
	}
	if err := l.e.writeLogStartCheckpoint(); err != nil {
		return 0, err
	}
	return before, nil
}

// startTrimmedEpochs handles the result of rewriting the leader-epoch
// checkpoint after the log start moved (DeleteRecords, retention): out of
// space or descriptors it only logs, since a file that still holds
// entries below the log start is trimmed again at the next write or at
// restart; any other failure takes the engine offline.
func (l *Log) startTrimmedEpochs(err error) error {
	switch {
	case err == nil:
		return nil
	case isResourceErr(err):
		l.e.logger.Warn("leader-epoch checkpoint not trimmed to the log start: out of a resource; trimmed at the next write or restart", "log", l.String(), "err", err)
		return nil
	}
	return l.e.ioFailure("writing "+epochCheckpoint, err)
}

func containsSegment(segs []*logSegment, s *logSegment) bool {
	for _, x := range segs {
		if x == s {
			return true
		}
	}
	return false
}

// shutdown closes the log: Append fails, waiters get err, and the log's
// references on its segments are dropped (files close once readers release).
// The active segment's time index gets its final entry first so a clean
// restart knows the segment's largest timestamp.
func (l *Log) shutdown(err error, deleted bool) {
	l.pool.close()   // pooled files stay for the next Open, or go with a deleted directory
	l.spares.close() // the same
	l.mu.Lock()
	l.closed = true
	l.deleted = l.deleted || deleted
	if !l.deleted && err == ErrClosed && l.corrupt.Load() == nil { // a corrupt log's files stay as they are
		l.closeProducers() // <log end>.snapshot (producers.go)
	}
	var segs []*logSegment
	if p := l.segs.Load(); p != nil {
		segs = *p
	}
	empty := []*logSegment{}
	l.segs.Store(&empty)
	l.tail.reset(nil) // buffers back to the Engine's pool (those read return at Release)
	l.copy.drop()
	l.pending = nil
	if a := l.active; a != nil && !deleted {
		l.idxMu.Lock()
		if a.tim != nil && a.maxTs > -1 {
			_ = a.tim.Append(a.maxTs, a.maxTsOff)
		}
		l.idxMu.Unlock()
	}
	l.mu.Unlock()
	l.fail(err)
	for _, s := range segs {
		s.release()
	}
}
