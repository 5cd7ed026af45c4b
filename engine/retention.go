package engine

import (
	"math"
	"strings"
	"sync"
	"time"
)

// Retention: time- and size-based deletion of whole sealed segments.
//
// One goroutine owned by the Engine (started by Open, stopped first by
// Close) wakes every Options.RetentionCheckInterval
// (log.retention.check.interval.ms, default 5 minutes) and, for every log
// whose cleanup.policy contains "delete", deletes a prefix of its sealed
// segments:
//
//   - by time: a segment goes when now - largestTimestamp > retention.ms
//     (retention.ms < 0: never). largestTimestamp is the segment's largest
//     record timestamp (its time index's last entry); a segment without any
//     timestamp (all -1) is judged by the file's modification time, as Kafka
//     does. now comes from Options.Now, so a clock set backwards deletes
//     less, never more, and a segment holding a timestamp in the future is
//     kept until that timestamp is retention.ms old: nothing younger than
//     retention.ms is ever deleted.
//   - by size: while the partition's bytes minus the oldest segment's
//     size stay >= retention.bytes (retention.bytes < 0: never), the oldest
//     segment goes, so a partition ends at most retention.bytes plus the
//     active segment.
//
// With remote.storage.enable, local.retention.ms/bytes take the place of
// retention.ms/bytes here and a segment must also lie below the remote
// log manager's CopiedEnd (remote.go): an uncopied segment is never
// deleted locally.
//
// Only sealed segments wholly below the high watermark are candidates; the
// active segment is never deleted (Kafka rolls an expired active segment
// first; here segment.ms bounds its age). Deleting moves the log start
// offset to the first surviving segment's base (never backwards) and
// renames the files to *.deleted; the pass then writes
// log-start-offset-checkpoint once for every log it deleted from (a start
// at a segment's base is also what Open finds from the files). The Log's
// own reference to a deleted segment is held for file.delete.delay.ms and
// then dropped; the files are unlinked when the last reference goes, so a
// reader that pinned the segment (ReadResult, sendfile in progress) keeps
// reading after the delay too. Offsets of the surviving records never
// change. A fetch below the new start fails with
// ErrOffsetOutOfRange (OFFSET_OUT_OF_RANGE on the wire) and the client
// applies its reset policy.
//
// Lock order: retention takes Log.mu to cut the segment list (the same
// critical section as DeleteRecords and the cleaner's swap), then Log.idxMu
// (markDeleted) without Log.mu. maintenance.mu guards the delayed-release
// list and is taken with nothing else held.

// defaultRetentionCheckInterval is log.retention.check.interval.ms's default.
const defaultRetentionCheckInterval = 5 * time.Minute

// maintenance is the Engine's retention goroutine state.
type maintenance struct {
	interval time.Duration // <= 0 after Open means: never wake on a timer
	stop     chan struct{}
	done     chan struct{}
	kick     chan struct{} // a retention pass now
	wake     chan struct{} // recompute the next delayed-release deadline

	mu      sync.Mutex
	delayed []delayedRelease // deleted segments whose Log reference is still held
}

// delayedRelease is a deleted segment whose Log reference is dropped at dueMs.
type delayedRelease struct {
	seg   *logSegment
	dueMs int64
}

// startMaintenance starts the retention goroutine and the cleaner. Called by
// Open after the flusher started.
func (e *Engine) startMaintenance(opts Options) {
	m := &e.maint
	m.interval = opts.RetentionCheckInterval
	if m.interval == 0 {
		m.interval = defaultRetentionCheckInterval
	}
	m.stop = make(chan struct{})
	m.done = make(chan struct{})
	m.kick = make(chan struct{}, 1)
	m.wake = make(chan struct{}, 1)
	go e.runRetention()
	e.startCleaner(opts.Cleaner)
}

// stopMaintenance stops the cleaner and the retention goroutine and drops the
// delayed references (files of deleted segments are unlinked once their last
// reader releases them). Called by Close before logs are closed.
func (e *Engine) stopMaintenance() {
	m := &e.maint
	if m.stop == nil {
		return
	}
	e.stopCleaner()
	close(m.stop)
	<-m.done
	m.mu.Lock()
	delayed := m.delayed
	m.delayed = nil
	m.mu.Unlock()
	for _, d := range delayed {
		d.seg.release()
	}
}

// kickRetention asks the retention goroutine for a pass now (after a config change).
func (e *Engine) kickRetention() {
	select {
	case e.maint.kick <- struct{}{}:
	default:
	}
}

func (e *Engine) runRetention() {
	m := &e.maint
	defer close(m.done)
	var tick <-chan time.Time
	if m.interval > 0 {
		t := time.NewTicker(m.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		// A delayed release due before the next tick shortens the wait.
		var due <-chan time.Time
		var timer *time.Timer
		if d, ok := e.nextDelayedRelease(); ok {
			wait := time.Duration(min(max(d-e.nowMs(), 1), 3600_000)) * time.Millisecond
			timer = time.NewTimer(wait)
			due = timer.C
		}
		select {
		case <-m.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		case <-tick:
			e.enforceRetention()
		case <-m.kick:
			e.enforceRetention()
		case <-m.wake:
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		e.releaseDue(e.nowMs())
	}
}

// enforceRetention runs one retention pass over every log and returns the
// number of segments deleted. Errors are logged (an I/O failure has already
// taken the engine offline).
func (e *Engine) enforceRetention() int {
	if e.Offline() != nil {
		return 0
	}
	n := 0
	for _, t := range e.Topics() {
		if t.Deleted() {
			continue
		}
		for _, l := range t.hostedLogs() {
			select {
			case <-e.maint.stop:
				return n
			default:
			}
			k, err := l.deleteRetainedSegments(e.nowMs())
			n += k
			if err != nil {
				e.logger.Warn("retention", "log", l.String(), "err", err)
			}
		}
	}
	// One log-start checkpoint for the pass: it holds every log's start,
	// and a pass that deleted from each of 192 logs wrote it (a temporary
	// file, its fsync, a rename and a directory fsync) 192 times, each
	// time with every log's entry.
	if n > 0 {
		if err := e.writeLogStartCheckpoint(); err != nil {
			e.logger.Warn("retention: log-start checkpoint", "err", err)
		}
	}
	return n
}

// deleteRetainedSegments deletes the prefix of l's sealed segments that
// retention.ms or retention.bytes let go (see the file comment) and returns
// how many it deleted.
func (l *Log) deleteRetainedSegments(nowMs int64) (int, error) {
	cfg := l.config()
	// With remote storage, local retention applies, and only to segments
	// copied to the object store (remote.go).
	retMs, retBytes, copied := cfg.RetentionMs, cfg.RetentionBytes, int64(math.MaxInt64)
	if cfg.RemoteStorageEnable {
		retMs, retBytes = cfg.LocalRetention()
		copied = l.e.remoteCopiedEnd(l)
	}
	if !strings.Contains(cfg.CleanupPolicy, "delete") || (retMs < 0 && retBytes < 0) {
		return 0, nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, nil
	}
	segs := *l.segs.Load()
	hw := l.hw.Load()
	var total int64
	for _, s := range segs {
		total += s.end.Load()
	}
	excess := int64(-1)
	if retBytes >= 0 {
		excess = total - retBytes
	}
	k := 0
	l.idxMu.RLock()
	for ; k < len(segs)-1; k++ {
		s, next := segs[k], segs[k+1]
		if next.base > hw || !s.sealed || next.base > copied {
			break
		}
		size := s.end.Load()
		expired := retMs >= 0 && nowMs-segmentLargestTimestamp(s) > retMs
		oversize := excess >= 0 && excess-size >= 0
		if !expired && !oversize {
			break
		}
		excess -= size
	}
	l.idxMu.RUnlock()
	if k == 0 {
		l.mu.Unlock()
		return 0, nil
	}
	victims, epochErr := l.cutSegmentsLocked(k)
	l.poolVictims(victims)
	l.mu.Unlock()

	// No directory sync for these renames (Kafka makes none either): a
	// crash may bring such a segment back under its old name; Open starts
	// the log at the checkpointed start (or at that segment, if the pass's
	// checkpoint was lost too) and the next pass deletes it again. One
	// fsync of the partition directory per deleted segment made a pass
	// over 96 partitions of 4 MiB segments 789 device flushes
	// (docs/performance.md, "Session 36").
	for _, v := range victims {
		v.markDeleted(&l.idxMu, false)
	}
	l.e.delayRelease(victims, nowMs+cfg.FileDeleteDelayMs)
	if err := l.startTrimmedEpochs(epochErr); err != nil {
		return len(victims), err
	}
	l.e.logger.Info("deleted segments past retention", "log", l.String(), "segments", len(victims),
		"logStartOffset", l.logStart.Load())
	// The log-start checkpoint is written once per pass (enforceRetention),
	// not here: a start moved by retention is a segment's base, which Open
	// finds from the files anyway (recover.go: the larger of the two).
	return len(victims), nil
}

// cutSegmentsLocked removes the first k segments (never the active one) from
// the segment list, moves the log start offset to the first survivor's base
// (never backwards) and trims the leader-epoch cache. The caller holds mu and
// owns the returned segments' Log references.
func (l *Log) cutSegmentsLocked(k int) (victims []*logSegment, epochErr error) {
	segs := *l.segs.Load()
	if k <= 0 || k >= len(segs) {
		return nil, nil
	}
	victims = append([]*logSegment(nil), segs[:k]...)
	rest := append([]*logSegment(nil), segs[k:]...)
	start := max(l.logStart.Load(), rest[0].base)
	l.logStart.Store(start)
	l.segs.Store(&rest)
	kept := l.pending[:0]
	for _, p := range l.pending {
		if !containsSegment(victims, p) {
			kept = append(kept, p)
		}
	}
	clear(l.pending[len(kept):])
	l.pending = kept
	l.epochMu.Lock()
	if l.epochs.truncateFromStart(start) {
		epochErr = l.epochsChanged()
	}
	l.epochMu.Unlock()
	return victims, epochErr
}

// segmentLargestTimestamp is the largest record timestamp of s, or the
// .log file's modification time when no record carried one. Caller holds
// idxMu (read).
func segmentLargestTimestamp(s *logSegment) int64 {
	if s.maxTs >= 0 {
		return s.maxTs
	}
	if fi, err := s.seg.File().Stat(); err == nil {
		return fi.ModTime().UnixMilli()
	}
	return math.MaxInt64 // unknown: never old enough
}

// delayRelease keeps the Log references of deleted segments until dueMs
// (file.delete.delay.ms from now), then drops them.
func (e *Engine) delayRelease(segs []*logSegment, dueMs int64) {
	if len(segs) == 0 {
		return
	}
	m := &e.maint
	m.mu.Lock()
	if m.stop == nil || e.isClosing() {
		m.mu.Unlock()
		for _, s := range segs {
			s.release()
		}
		return
	}
	for _, s := range segs {
		m.delayed = append(m.delayed, delayedRelease{seg: s, dueMs: dueMs})
	}
	m.mu.Unlock()
	select { // recompute the next deadline
	case m.wake <- struct{}{}:
	default:
	}
}

// nextDelayedRelease is the earliest due time of a delayed release.
func (e *Engine) nextDelayedRelease() (int64, bool) {
	m := &e.maint
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.delayed) == 0 {
		return 0, false
	}
	d := m.delayed[0].dueMs
	for _, x := range m.delayed[1:] {
		d = min(d, x.dueMs)
	}
	return d, true
}

// releaseDue drops the Log references whose delay has passed.
func (e *Engine) releaseDue(nowMs int64) {
	m := &e.maint
	m.mu.Lock()
	var due []*logSegment
	kept := m.delayed[:0]
	for _, d := range m.delayed {
		if d.dueMs <= nowMs {
			due = append(due, d.seg)
		} else {
			kept = append(kept, d)
		}
	}
	clear(m.delayed[len(kept):])
	m.delayed = kept
	m.mu.Unlock()
	for _, s := range due {
		s.release()
	}
}

// isClosing reports whether Close has started.
func (e *Engine) isClosing() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.closed
}

// SizeBytes returns the bytes of the log's segment files in use (the
// partition's size as retention.bytes counts it).
func (l *Log) SizeBytes() int64 {
	var n int64
	for _, s := range *l.segs.Load() {
		n += s.end.Load()
	}
	return n
}

// SegmentCount returns the number of segments in the log (the active one included).
func (l *Log) SegmentCount() int { return len(*l.segs.Load()) }
