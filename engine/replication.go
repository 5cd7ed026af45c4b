package engine

// Replicated mode (the replica package drives it; see replica/doc.go).
//
// A Log starts standalone: its flush pipeline advances the high watermark
// (HW) to the durable end after each fdatasync (or at append under
// write.caching). SetLeader and SetFollower put it in replicated mode: the
// pipeline then reports the durable end to a ReplicationHandler instead
// (Durable, called from a flush worker, or inline in Append under
// write.caching), and the HW moves only through AdvanceHighWatermark, which
// never moves it backwards nor past the durable end. SetStandalone returns
// to the standalone rule (the HW catches up with the durable end at once).
//
// Leader side: FollowerFetch hands a follower's fetch (replica id, offset)
// to the handler; ReadReplica reads up to the log end rather than the HW;
// WaitEnd is the long-poll channel of follower fetches (closed when the log
// end passes an offset); AssignLeaderEpoch starts a new leader epoch at the
// log end.
//
// Follower side: AppendAsFollower appends batches exactly as the leader
// wrote them (offsets and partition leader epochs kept; CRCs checked;
// offsets increasing but not necessarily contiguous: a compacted leader's
// log has gaps), updating the leader-epoch cache from the batches' epochs.
// TruncateTo cuts a divergent tail (segments, indexes, epoch cache, durable
// offset, HW, producer state (producers.go), recovery checkpoint, then the
// truncate hook); TruncateFullyAndStartAt empties the log and
// restarts it at an offset (a follower below the leader's log start).
//
// Damage: a replica whose log lost data below its recovery point (middle
// corruption rather than a torn unsynced tail) must not lead until it has
// re-fetched. noteRecovery (called by Open's recovery) and MarkDamaged set a
// flag persisted as <partition dir>/replica-damaged; ClearDamaged (the
// follower caught up past the damage) removes it; Damaged reads it.
//
// Concurrency: the role and handler are atomics read on the append and
// flush paths (one atomic load each when standalone). TruncateTo and
// TruncateFullyAndStartAt take Log.mu, after waiting for a running flush of
// this log to complete (so a flush captured before the truncation cannot
// publish a durable end past it); readers that pinned a segment keep their
// file but may see fewer bytes (a sendfile of a truncated range fails and
// the connection closes). endMu guards the log-end waiters and is taken with
// nothing else held.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/internal/crcsum"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/segment"
)

// Role is what a Log is in replication.
type Role int32

const (
	RoleStandalone Role = iota // not replicated: the HW is the durable end
	RoleLeader                 // replicated, leader: the HW comes from AdvanceHighWatermark
	RoleFollower               // replicated, follower: the HW comes from AdvanceHighWatermark
)

func (r Role) String() string {
	switch r {
	case RoleStandalone:
		return "standalone"
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return fmt.Sprintf("Role(%d)", int32(r))
}

// ErrNotReplicated is returned by FollowerFetch when the log has no leader
// handler (the server answers NOT_LEADER_OR_FOLLOWER).
var ErrNotReplicated = errors.New("engine: partition is not led here")

// damagedFile marks a partition whose log lost data below its recovery point.
const damagedFile = "replica-damaged"

// ReplicationHandler receives a replicated Log's events. Its methods must
// not block and must not call Append, AppendAsFollower or the truncations.
type ReplicationHandler interface {
	// Durable reports that everything below end is durable on this broker
	// (written, under write.caching). Called from a flush worker, or inline
	// in Append under write.caching; calls may overlap and ends may arrive
	// out of order (keep the max), and an end may exceed the log end after a
	// truncation raced with it (DurableEnd is the authority).
	Durable(end int64)
	// FollowerFetch is a Fetch from replica replicaID at fetchOffset; an
	// error refuses it (its kerr code goes to the follower).
	FollowerFetch(replicaID int32, fetchOffset int64) error
}

type handlerBox struct{ h ReplicationHandler }

// replState is the Log's replication part (Log.repl).
type replState struct {
	role    atomic.Int32
	handler atomic.Pointer[handlerBox]

	endWaiting atomic.Bool // someone waits in WaitEnd or NotifyEnd
	endMu      sync.Mutex
	endCh      chan struct{} // closed when the log end moves; nil until WaitEnd asks
	endRegs    []*endReg     // NotifyEnd registrations

	damaged   atomic.Int32 // 0 not loaded yet, 1 clean, 2 damaged
	damagedMu sync.Mutex   // serializes loading and changing the marker

	truncHook atomic.Pointer[func(logEnd int64)]
}

// Role returns the log's replication role.
func (l *Log) Role() Role { return Role(l.repl.role.Load()) }

// SetLeader puts the log in replicated mode as the partition leader, with h
// receiving durable ends and follower fetches.
func (l *Log) SetLeader(h ReplicationHandler) {
	l.repl.handler.Store(&handlerBox{h})
	l.repl.role.Store(int32(RoleLeader))
}

// SetFollower puts the log in replicated mode as a follower; h receives
// durable ends (FollowerFetch is refused by the handler).
func (l *Log) SetFollower(h ReplicationHandler) {
	l.repl.handler.Store(&handlerBox{h})
	l.repl.role.Store(int32(RoleFollower))
}

// SetStandalone leaves replicated mode: the HW moves to the durable end now
// and follows it afterwards.
func (l *Log) SetStandalone() {
	l.repl.role.Store(int32(RoleStandalone))
	l.repl.handler.Store(nil)
	l.advanceHW(l.DurableEnd())
}

func (l *Log) replHandler() ReplicationHandler {
	if b := l.repl.handler.Load(); b != nil {
		return b.h
	}
	return nil
}

// DurableEnd is the offset below which the log is durable on this broker:
// the flushed end, or the log end under write.caching (as the HW is then).
func (l *Log) DurableEnd() int64 {
	end := l.logEnd.Load()
	if l.config().WriteCaching {
		return end
	}
	return min(l.durable.Load(), end)
}

// FollowerFetch passes a follower's fetch to the leader handler;
// ErrNotReplicated when the log has none.
func (l *Log) FollowerFetch(replicaID int32, fetchOffset int64) error {
	if l.Role() != RoleLeader {
		return ErrNotReplicated
	}
	h := l.replHandler()
	if h == nil {
		return ErrNotReplicated
	}
	return h.FollowerFetch(replicaID, fetchOffset)
}

// AdvanceHighWatermark moves the HW to min(hw, DurableEnd()) unless that is
// below the current HW, and returns the HW after the call. It wakes Wait
// callers and runs the WhenDurable callbacks it satisfies (inline).
func (l *Log) AdvanceHighWatermark(hw int64) int64 {
	l.advanceHW(min(hw, l.DurableEnd()))
	return l.hw.Load()
}

// flushedTo is the flush pipeline's hook (flusher.go complete, not under
// write.caching): standalone logs advance the HW, replicated ones report.
func (l *Log) flushedTo(end int64) {
	if h := l.replHandler(); h != nil && l.Role() != RoleStandalone {
		h.Durable(end)
		return
	}
	l.advanceHW(end)
}

// appended is Append's hook after the lock is released: wakes log-end
// waiters and, under write.caching, moves the HW (standalone) or reports the
// new end (replicated).
func (l *Log) appended(next int64, caching bool) {
	if l.repl.endWaiting.Load() {
		l.wakeEnd()
	}
	if !caching {
		return
	}
	if h := l.replHandler(); h != nil && l.Role() != RoleStandalone {
		h.Durable(next)
		return
	}
	l.advanceHW(next)
}

// WaitEnd returns a channel closed when the log end moves past offset
// (LogEndOffset > offset), or the log closes or truncates. Follower fetches
// long-poll on it.
func (l *Log) WaitEnd(offset int64) <-chan struct{} {
	l.repl.endMu.Lock()
	defer l.repl.endMu.Unlock()
	if l.logEnd.Load() > offset || l.usable() != nil {
		return closedChan
	}
	if l.repl.endCh == nil {
		l.repl.endCh = make(chan struct{})
	}
	l.repl.endWaiting.Store(true)
	// Re-check: an append may have stored the end before the flag was set.
	if l.logEnd.Load() > offset {
		close(l.repl.endCh)
		l.repl.endCh = nil
		l.repl.endWaiting.Store(false)
		return closedChan
	}
	return l.repl.endCh
}

// endReg is one NotifyEnd registration.
type endReg struct {
	offset int64
	fn     func()
}

// NotifyEnd calls fn once, when the log end moves past offset (inline if it
// already has, or the log is unusable), from the appending goroutine; fn
// must not block. cancel removes the registration (a call already on its
// way may still happen). The follower-fetch long poll uses it.
func (l *Log) NotifyEnd(offset int64, fn func()) (cancel func()) {
	r := &endReg{offset: offset, fn: fn}
	l.repl.endMu.Lock()
	if l.logEnd.Load() > offset || l.usable() != nil {
		l.repl.endMu.Unlock()
		fn()
		return func() {}
	}
	l.repl.endRegs = append(l.repl.endRegs, r)
	l.repl.endWaiting.Store(true)
	// Re-check: an append may have stored the end before the flag was set.
	if l.logEnd.Load() > offset {
		l.removeEndReg(r)
		l.repl.endMu.Unlock()
		fn()
		return func() {}
	}
	l.repl.endMu.Unlock()
	return func() {
		l.repl.endMu.Lock()
		l.removeEndReg(r)
		l.repl.endMu.Unlock()
	}
}

// removeEndReg drops r if registered. Caller holds endMu.
func (l *Log) removeEndReg(r *endReg) {
	regs := l.repl.endRegs
	for i, x := range regs {
		if x == r {
			regs[i] = regs[len(regs)-1]
			regs[len(regs)-1] = nil
			l.repl.endRegs = regs[:len(regs)-1]
			break
		}
	}
	if len(l.repl.endRegs) == 0 && l.repl.endCh == nil {
		l.repl.endWaiting.Store(false)
	}
}

// wakeEnd wakes WaitEnd callers and the NotifyEnd registrations the log end
// passed.
func (l *Log) wakeEnd() {
	end := l.logEnd.Load()
	var fire []*endReg
	l.repl.endMu.Lock()
	if l.repl.endCh != nil {
		close(l.repl.endCh)
		l.repl.endCh = nil
	}
	kept := l.repl.endRegs[:0]
	for _, r := range l.repl.endRegs {
		if r.offset < end {
			fire = append(fire, r)
		} else {
			kept = append(kept, r)
		}
	}
	clear(l.repl.endRegs[len(kept):])
	l.repl.endRegs = kept
	l.repl.endWaiting.Store(len(kept) > 0)
	l.repl.endMu.Unlock()
	for _, r := range fire {
		r.fn()
	}
}

// ReadReplica is Read for a follower fetch: batches up to the log end
// instead of the HW.
func (l *Log) ReadReplica(offset int64, maxBytes int32, minOneBatch bool) (ReadResult, error) {
	return l.readUpTo(offset, maxBytes, minOneBatch, math.MaxInt64)
}

// AssignLeaderEpoch records that leader epoch epoch starts at the log end
// (a new leader does this before taking appends), so Append with
// LeaderEpoch() stamps it and OffsetForLeaderEpoch answers for it. An epoch
// not newer than the latest is a no-op. The file follows with the next
// recovery-point checkpoint, as for an epoch an append starts
// (epochsAssigned): a broker taking the lead of many partitions at once
// wrote one file with its syncs for each. A crash before it loses nothing
// a restart keeps: an entry at the log end with no batch after it is
// dropped by recovery anyway (truncateFromEnd at the recovered end), and
// the controller gives the restarted broker its epochs again.
func (l *Log) AssignLeaderEpoch(epoch int32) error {
	if epoch < 0 {
		return fmt.Errorf("%w: leader epoch %d", ErrInvalidRecord, epoch)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.closedErr()
	}
	l.epochMu.Lock()
	defer l.epochMu.Unlock()
	if latest, ok := l.epochs.latest(); ok && latest >= epoch {
		return nil
	}
	if l.epochs.assign(epoch, l.logEnd.Load()) {
		l.epochsAssigned()
	}
	return nil
}

// EpochStartOffset returns the start offset of the latest leader epoch, -1
// if the cache is empty.
func (l *Log) EpochStartOffset() int64 {
	l.epochMu.Lock()
	defer l.epochMu.Unlock()
	if n := len(l.epochs.entries); n > 0 {
		return l.epochs.entries[n-1].StartOffset
	}
	return -1
}

// AppendAsFollower appends batches fetched from the leader exactly as they
// are: offsets and partition leader epochs are kept. The first batch must
// start at or after the log end and each batch after the previous one ended
// (ErrOffsetOutOfRange below the log end, ErrInvalidRecord for offsets that
// do not increase): gaps are allowed, as in Kafka, because the cleaner of a
// compacted topic removes records but keeps the offsets of the survivors;
// the log end becomes the last batch's last offset + 1. Every CRC is checked
// (ErrCorruptMessage) and nothing is written unless all pass. A partial
// batch at the end of batches (a truncated fetch response) is ignored.
// Leader epochs taken from the batches update the leader-epoch cache (an
// epoch starts at the base offset of its first batch). Empty input is a
// no-op (zero AppendInfo with BaseOffset -1). The returned BaseOffset is the
// first batch's base offset.
func (l *Log) AppendAsFollower(batches []byte) (AppendInfo, error) {
	return l.AppendAsFollowerSummed(batches, nil, 0)
}

// AppendAsFollowerSummed is AppendAsFollower for batches that lie at offset
// at of a buffer whose block sums sums took as it was read (package
// crcsum; a fetch response read with kframe.ReadFrameSummed): the CRCs are
// combined from those sums instead of read again from bytes that have left
// the CPU's caches. A nil sums checks every byte, as AppendAsFollower does.
func (l *Log) AppendAsFollowerSummed(batches []byte, sums *crcsum.Sums, at int) (AppendInfo, error) {
	n, first, lastH, err := validateFollowerBatches(batches, sums, at)
	if err != nil {
		return AppendInfo{BaseOffset: -1}, err
	}
	if n == 0 {
		return AppendInfo{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}, nil
	}
	batches = batches[:n]

	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return AppendInfo{BaseOffset: -1}, l.closedErr()
	}
	if err := l.e.Offline(); err != nil {
		l.mu.Unlock()
		return AppendInfo{BaseOffset: -1}, err
	}
	end := l.logEnd.Load()
	if first.BaseOffset < end {
		l.mu.Unlock()
		return AppendInfo{BaseOffset: -1}, fmt.Errorf("%w: follower append at %d, log end of %s is %d", ErrOffsetOutOfRange, first.BaseOffset, l, end)
	}
	base := first.BaseOffset
	next := lastH.LastOffset() + 1
	nowMs := l.e.nowMs()
	// A gap so wide that the batches' offsets do not fit the active
	// segment's 32-bit relative index rolls a segment based at the first
	// batch (Kafka rolls at max(log end, first offset) for the same reason):
	// the log end moves over the gap first, which holds no batches.
	overflow := next-1-l.active.base > math.MaxInt32
	if overflow || l.shouldRoll(l.active, int64(n), next-1, nowMs) {
		if overflow {
			l.logEnd.Store(base)
		}
		if err := l.roll(); err != nil {
			l.logEnd.Store(end)
			l.mu.Unlock()
			if errors.Is(err, errCreateSegment) {
				return AppendInfo{BaseOffset: -1}, l.e.createFailure(fmt.Sprintf("rolling %s", l), err)
			}
			return AppendInfo{BaseOffset: -1}, l.e.ioFailure(fmt.Sprintf("rolling %s", l), err)
		}
	}
	s := l.active
	pos, spans, err := l.appendSegment(s, batches, l.config().WriteCaching)
	if err != nil {
		l.mu.Unlock()
		if errors.Is(err, segment.ErrReserve) {
			return AppendInfo{BaseOffset: -1}, l.e.createFailure(fmt.Sprintf("reserving space in %s", s.seg.Path()), err)
		}
		return AppendInfo{BaseOffset: -1}, l.e.ioFailure(fmt.Sprintf("writing %s", s.seg.Path()), err)
	}
	l.tail.add(l.e.tails, s, pos, batches, base, nowMs) // tailcache.go: a follower that becomes leader serves from it
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
	// Leader epochs from the batches (Kafka's appendAsFollower does the
	// same): the cache changes only where the epoch changes.
	changed := false
	l.epochMu.Lock()
	for rest := batches; len(rest) > 0; {
		_, r, h, _ := record.Next(rest)
		if h.PartitionLeaderEpoch >= 0 && l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset) {
			changed = true
		}
		rest = r
	}
	if changed {
		l.epochsAssigned() // written by the next recovery-point checkpoint
	}
	l.epochMu.Unlock()
	s.end.Store(pos + int64(n))
	l.logEnd.Store(next)
	l.maybeRollAhead(s, l.config()) // rollahead.go
	l.followProducers(batches, base, nowMs)
	l.activeDirty = true
	caching := l.config().WriteCaching
	l.unflushed += next - base // offsets spanned: records, or more across gaps
	// As in appendBatches: durable with the journal's next group.
	journaled := !caching && l.e.jnl != nil && !l.e.jnlEnds && l.e.jnl.stageAppend(l, s.base, pos, batches, next, spans)
	l.activeOwn = l.activeOwn || !journaled
	urgent := !journaled && (!caching || l.unflushed >= l.config().FlushMessages || nowMs-l.lastFlushMs >= l.config().FlushMs)
	l.e.markDirty(l, urgent)
	if urgent {
		s.seg.WriteBehind()
	}
	logStart := l.logStart.Load()
	l.mu.Unlock()

	l.appended(next, caching)
	return AppendInfo{BaseOffset: base, LastOffset: next - 1, LogAppendTime: -1, LogStartOffset: logStart}, nil
}

// validateFollowerBatches checks batches from a leader (untrusted bytes off
// the network) without allocating: whole batches, each CRC valid, offsets
// non-negative and increasing (gaps allowed: compaction). n is the length
// of the whole batches (a partial batch at the end is left out); first and
// last are the first and last batch headers (n == 0: none). sums, when
// not nil, holds the block sums of the buffer batches lie in at offset at
// (AppendAsFollowerSummed).
func validateFollowerBatches(batches []byte, sums *crcsum.Sums, at int) (n int, first, last record.Header, err error) {
	count := 0
	for rest := batches; len(rest) > 0; {
		b, r, h, err := record.Next(rest)
		if errors.Is(err, record.ErrShort) {
			break // a partial batch at the end of a size-limited response
		}
		if err != nil {
			return 0, first, last, classifyRecordErr(err, n)
		}
		var crcOK bool
		if sums != nil {
			// Only the CRC: a compacted leader's batches keep their
			// lastOffsetDelta over fewer records (record.Validate's
			// other checks are a producer's).
			crcOK = sums.Checksum(b[record.OffsetAttrs:], at+n+record.OffsetAttrs) == binary.BigEndian.Uint32(b[record.OffsetCRC:])
		} else {
			crcOK = record.CheckCRC(b)
		}
		if !crcOK {
			return 0, first, last, fmt.Errorf("%w: batch at byte %d fails its CRC", ErrCorruptMessage, n)
		}
		if h.LastOffsetDelta < 0 || h.BaseOffset < 0 || h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta)-1 {
			return 0, first, last, fmt.Errorf("%w: batch at byte %d: offsets %d+%d", ErrInvalidRecord, n, h.BaseOffset, h.LastOffsetDelta)
		}
		if count > 0 && h.BaseOffset <= last.LastOffset() {
			return 0, first, last, fmt.Errorf("%w: batch at byte %d starts at %d, previous ended at %d", ErrInvalidRecord, n, h.BaseOffset, last.LastOffset())
		}
		if count == 0 {
			first = h
		}
		last = h
		count++
		n += len(b)
		rest = r
	}
	return n, first, last, nil
}

// lockIdle takes l.mu once no flush of l is running (a running flush
// captured an end it would publish as durable after the truncation),
// including rounds that handed the log back early (flushTails). A flush
// takes one fdatasync, so this waits briefly.
func (l *Log) lockIdle() {
	for {
		l.mu.Lock()
		if l.flushState != flushRunning && l.flushState != flushRunningAgain && l.flushTails == 0 {
			return
		}
		l.mu.Unlock()
		time.Sleep(200 * time.Microsecond)
	}
}

// TruncateTo removes every batch at or after offset: the batch containing
// offset goes too, so the new log end is offset or the base of that batch
// (Kafka's truncateTo). offset >= log end is a no-op; offset below the log
// start empties the log and restarts it at offset (TruncateFullyAndStartAt).
// The HW and durable offset drop to the new end if they were past it; the
// leader-epoch cache loses entries starting at or after it; the recovery
// checkpoint is rewritten; then the truncate hook runs. Returns the new log
// end.
func (l *Log) TruncateTo(offset int64) (int64, error) {
	if offset < 0 {
		return 0, fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	if offset < l.logStart.Load() {
		if err := l.TruncateFullyAndStartAt(offset); err != nil {
			return 0, err
		}
		return offset, nil
	}
	l.lockIdle()
	if l.closed {
		l.mu.Unlock()
		return 0, l.closedErr()
	}
	if err := l.e.Offline(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	end := l.logEnd.Load()
	if offset >= end {
		l.mu.Unlock()
		return end, nil
	}
	if j := l.e.jnl; j != nil {
		if err := j.barrier(l, true); err != nil { // journal.go: the cut bytes never come back
			l.mu.Unlock()
			return 0, l.e.ioFailure(fmt.Sprintf("truncating %s", l), err)
		}
	}
	newEnd, victims, err := l.truncateLocked(offset)
	l.mu.Unlock()
	for _, v := range victims {
		v.markDeleted(&l.idxMu, true)
		v.release()
	}
	if err != nil {
		return 0, l.e.ioFailure(fmt.Sprintf("truncating %s", l), err)
	}
	return newEnd, l.afterTruncate(newEnd)
}

// truncateLocked cuts the log at offset (logStart <= offset < logEnd).
// Caller holds mu; the returned segments are out of the list and must be
// marked deleted and released by the caller outside mu.
func (l *Log) truncateLocked(offset int64) (int64, []*logSegment, error) {
	segs := *l.segs.Load()
	i := floorSegment(segs, offset)
	if i < 0 {
		i = 0
	}
	s := segs[i]
	// Every appended byte must be readable (a Direct ring segment writes
	// behind) before the scans below.
	if err := s.seg.Flush(); err != nil {
		return 0, nil, err
	}
	// Find the first batch with lastOffset >= offset: the cut position.
	l.idxMu.RLock()
	_, from := s.offLookup(offset)
	l.idxMu.RUnlock()
	cutPos, newEnd := s.end.Load(), int64(-1)
	err := s.seg.Scan(from, s.end.Load(), func(b segment.BatchInfo) bool {
		if b.LastOffset < offset {
			return true
		}
		cutPos, newEnd = b.Pos, b.BaseOffset
		return false
	})
	if err != nil {
		return 0, nil, err
	}
	if newEnd < 0 {
		// offset lies past this segment's batches: the cut is at the next
		// segment's start.
		newEnd = offset
		if i+1 < len(segs) {
			newEnd = segs[i+1].base
		}
	}
	if newEnd < s.base {
		newEnd = s.base
	}
	victims := append([]*logSegment(nil), segs[i+1:]...)
	keep := append([]*logSegment(nil), segs[:i+1]...)

	l.idxMu.Lock()
	s.end.Store(cutPos) // readers stop short of the dropped bytes first
	var terr error
	if s.sealed {
		terr = l.reopenActive(s)
	}
	if terr == nil {
		terr = s.seg.TruncateTo(cutPos)
	}
	if terr == nil {
		if s.off != nil {
			s.off.TruncateTo(newEnd)
		}
		if s.tim != nil {
			s.tim.TruncateTo(newEnd)
		}
		terr = l.rescanTimestamps(s, cutPos)
	}
	l.idxMu.Unlock()
	if terr != nil {
		return 0, victims, terr
	}
	l.segs.Store(&keep)
	l.active = s
	l.tail.reset(s) // tailcache.go: cached bytes past the cut are gone
	l.copy.drop()   // copycache.go: the same
	s.dropCopy()
	kept := l.pending[:0]
	for _, p := range l.pending {
		if p != s && !containsSegment(victims, p) {
			kept = append(kept, p)
		}
	}
	clear(l.pending[len(kept):])
	l.pending = kept
	l.logEnd.Store(newEnd)
	l.activeDirty, l.activeOwn = true, true
	l.dirDirty = l.dirDirty || len(victims) > 0
	if l.durable.Load() > newEnd {
		l.durable.Store(newEnd)
	}
	l.hwMu.Lock()
	if l.hw.Load() > newEnd {
		l.hw.Store(newEnd)
	}
	l.hwMu.Unlock()
	l.epochMu.Lock()
	var epochErr error
	if l.epochs.truncateFromEnd(newEnd) {
		epochErr = l.epochsChanged()
	}
	l.epochMu.Unlock()
	// The truncated file must reach disk before anything is appended past
	// the cut: queue a flush.
	l.e.markDirty(l, true)
	l.producersTruncated() // producers.go: rebuild producer state at the new end
	return newEnd, victims, epochErr
}

// rescanTimestamps recomputes s's largest timestamp and index spacing after
// a truncation to size. Caller holds idxMu and mu.
func (l *Log) rescanTimestamps(s *logSegment, size int64) error {
	s.maxTs, s.maxTsOff = -1, s.base
	s.bytesSince = 0
	return s.seg.Scan(0, size, func(b segment.BatchInfo) bool {
		if b.MaxTimestamp > s.maxTs {
			s.maxTs, s.maxTsOff = b.MaxTimestamp, b.LastOffset
		}
		return true
	})
}

// TruncateFullyAndStartAt deletes every segment and restarts the log, empty,
// at offset (log start = log end = HW = offset): a follower whose log lies
// wholly below the leader's log start, or diverges before its own start.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: start at %d", ErrOffsetOutOfRange, offset)
	}
	l.lockIdle()
	if l.closed {
		l.mu.Unlock()
		return l.closedErr()
	}
	if err := l.e.Offline(); err != nil {
		l.mu.Unlock()
		return err
	}
	if j := l.e.jnl; j != nil {
		if err := j.barrier(l, false); err != nil { // journal.go: the old bytes never come back
			l.mu.Unlock()
			return l.e.ioFailure(fmt.Sprintf("restarting %s at %d", l, offset), err)
		}
	}
	victims := append([]*logSegment(nil), *l.segs.Load()...)
	// The new segment's name may equal an old one's: move the old files
	// aside (to *.deleted) before creating it.
	for _, v := range victims {
		v.markDeleted(&l.idxMu, true)
	}
	ns, err := l.createSegment(offset)
	if err != nil {
		// Keep serving nothing rather than half a log: the engine goes offline.
		l.mu.Unlock()
		for _, v := range victims {
			v.release()
		}
		return l.e.ioFailure(fmt.Sprintf("restarting %s at %d", l, offset), err)
	}
	keep := []*logSegment{ns}
	l.segs.Store(&keep)
	l.active = ns
	l.tail.reset(ns)
	l.copy.drop()
	clear(l.pending)
	l.pending = l.pending[:0]
	l.logStart.Store(offset)
	l.logEnd.Store(offset)
	l.durable.Store(offset)
	l.activeDirty, l.activeOwn = true, true
	l.dirDirty = true
	l.hwMu.Lock()
	l.hw.Store(offset)
	l.hwMu.Unlock()
	l.epochMu.Lock()
	var epochErr error
	if len(l.epochs.entries) > 0 {
		l.epochs.entries = l.epochs.entries[:0]
		epochErr = l.epochsChanged()
	}
	l.epochMu.Unlock()
	l.e.markDirty(l, true)
	l.producersTruncated()
	l.mu.Unlock()
	for _, v := range victims {
		v.release()
	}
	if epochErr != nil {
		return l.e.ioFailure("writing "+epochCheckpoint, epochErr)
	}
	if err := l.e.writeLogStartCheckpoint(); err != nil {
		return err
	}
	return l.afterTruncate(offset)
}

// afterTruncate persists the lowered recovery point (a stale, higher one
// would make a restart trust bytes appended after the cut) and runs the
// truncate hook.
func (l *Log) afterTruncate(newEnd int64) error {
	if err := l.e.writeRecoveryCheckpoint(); err != nil {
		return l.e.ioFailure("writing "+recoveryPointFile, err)
	}
	if fn := l.repl.truncHook.Load(); fn != nil {
		(*fn)(newEnd)
	}
	return nil
}

// SetTruncateHook sets fn to run after every truncation with the new log
// end (producer state rebuilds from it); nil removes it.
func (l *Log) SetTruncateHook(fn func(logEnd int64)) {
	if fn == nil {
		l.repl.truncHook.Store(nil)
		return
	}
	l.repl.truncHook.Store(&fn)
}

// noteRecovery is called by Open's recovery with the recovery point it
// trusted and the log end it recovered: a log end below the recovery point
// means data that was durable is gone (middle corruption, not a torn
// unsynced tail), and the log is marked damaged.
func (l *Log) noteRecovery(rp, logEnd int64) {
	if logEnd < rp {
		l.e.logger.Warn("log lost durable data: not eligible to lead until re-fetched", "log", l.String(), "recoveryPoint", rp, "logEnd", logEnd)
		if err := l.MarkDamaged(); err != nil {
			l.e.logger.Warn("marking log damaged", "log", l.String(), "err", err)
		}
	}
}

// Damaged reports whether the log lost data below its recovery point and
// has not re-fetched it since (see MarkDamaged, ClearDamaged).
func (l *Log) Damaged() bool {
	if v := l.repl.damaged.Load(); v != 0 {
		return v == 2
	}
	l.repl.damagedMu.Lock()
	defer l.repl.damagedMu.Unlock()
	if v := l.repl.damaged.Load(); v != 0 {
		return v == 2
	}
	_, err := l.e.fs.Stat(filepath.Join(l.dir, damagedFile))
	v := int32(1)
	if err == nil {
		v = 2
	}
	l.repl.damaged.Store(v)
	return v == 2
}

// MarkDamaged records, durably, that the log is not eligible to lead.
func (l *Log) MarkDamaged() error {
	l.repl.damagedMu.Lock()
	defer l.repl.damagedMu.Unlock()
	l.repl.damaged.Store(2)
	return vfs.WriteFileAtomicFS(l.e.fs, filepath.Join(l.dir, damagedFile), []byte("damaged\n"))
}

// ClearDamaged removes the damaged mark (the replica re-fetched past the
// damage from a leader).
func (l *Log) ClearDamaged() error {
	l.repl.damagedMu.Lock()
	defer l.repl.damagedMu.Unlock()
	l.repl.damaged.Store(1)
	err := l.e.fs.Remove(filepath.Join(l.dir, damagedFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err == nil {
		return l.e.fs.SyncDir(l.dir)
	}
	return nil
}
