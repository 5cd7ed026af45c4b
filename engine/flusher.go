package engine

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// checkpointIntervalMs bounds how often the flusher rewrites
// recovery-point-offset-checkpoint.
const checkpointIntervalMs = 5000

// enqueueFlush puts l in the flusher's dirty set (once) and wakes the
// flusher when l was newly added or kick is set. Caller holds l.mu.
func (e *Engine) enqueueFlush(l *Log, kick bool) {
	if !l.queued {
		l.queued = true
		e.flushMu.Lock()
		e.dirty = append(e.dirty, l)
		e.flushMu.Unlock()
		kick = true
	}
	if kick {
		e.kickFlusher()
	}
}

func (e *Engine) kickFlusher() {
	select {
	case e.flushKick <- struct{}{}:
	default:
	}
}

// runFlusher is the engine's one flusher goroutine (started by Open, stopped
// by Close): each round syncs the dirty logs and advances their HWs.
func (e *Engine) runFlusher() {
	defer close(e.flushDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-e.flushKick:
		case <-timer.C:
		case <-e.flushStop:
			e.flushRound(true)
			return
		}
		next := e.flushRound(false)
		timer.Stop()
		if next >= 0 {
			d := time.Duration(next-e.nowMs()) * time.Millisecond
			timer.Reset(min(max(d, time.Millisecond), time.Hour))
		}
	}
}

// flushRound processes every queued log (every log when closing) and returns
// the next clock time (ms) the flusher must wake by itself, -1 for none.
func (e *Engine) flushRound(closing bool) int64 {
	e.flushMu.Lock()
	work := append(e.flushWork[:0], e.dirty...)
	clear(e.dirty)
	e.dirty = e.dirty[:0]
	e.flushMu.Unlock()
	work = append(work, e.deferred...)
	clear(e.deferred)
	e.deferred = e.deferred[:0]
	if closing {
		work = work[:0]
		e.mu.RLock()
		for _, t := range e.topics {
			work = append(work, t.logs()...)
		}
		e.mu.RUnlock()
	}
	next := int64(-1)
	// No log appears twice: enqueueFlush adds a log only when it is not
	// queued, and a deferred log stays queued. The logs are synced by up to
	// flushParallelism goroutines at once: fdatasyncs of different files
	// share the filesystem journal's commits, so N partitions synced
	// together cost about one commit, where one after another they cost N
	// (96 partitions in turn stalled acks=all produces by ~300 ms).
	results := e.flushLogs(work, closing)
	for i, l := range work {
		r := results[i]
		if r.advanced {
			e.ckptDirty = true
		}
		if r.deferred {
			e.deferred = append(e.deferred, l)
			if r.deadline >= 0 && (next < 0 || r.deadline < next) {
				next = r.deadline
			}
		}
	}
	clear(work)
	e.flushWork = work[:0]

	now := e.nowMs()
	if e.ckptDirty && e.Offline() == nil && !closing {
		due := e.lastCkptMs + checkpointIntervalMs
		if now >= due {
			e.ckptDirty = false
			e.lastCkptMs = now
			if err := e.writeRecoveryCheckpoint(); err != nil {
				e.ioFailure("writing "+recoveryPointFile, err)
			}
		} else if next < 0 || due < next {
			next = due
		}
	}
	return next
}

// flushParallelism bounds the fdatasyncs one flush round runs at once.
const flushParallelism = 16

// flushResult is what flushLog reports for one log.
type flushResult struct {
	deadline int64 // write caching: when the deferred data must be synced; -1 none
	deferred bool  // write caching: unsynced data remains
	advanced bool  // the durable offset moved (the recovery checkpoint is stale)
}

// flushLogs runs flushLog for every log in work, in parallel when there is
// more than one, and returns the results by index. The goroutines are owned
// by this call: it returns after all of them end.
func (e *Engine) flushLogs(work []*Log, force bool) []flushResult {
	results := e.flushResults[:0]
	for range work {
		results = append(results, flushResult{})
	}
	e.flushResults = results
	workers := min(len(work), flushParallelism)
	if workers <= 1 {
		for i, l := range work {
			results[i] = e.flushLog(l, force, &e.flushScratch[0])
		}
		return results
	}
	var (
		nextIdx atomic.Int64
		wg      sync.WaitGroup
	)
	wg.Add(workers)
	for w := 0; w < workers; w++ {
		go func(scratch *[]*logSegment) {
			defer wg.Done()
			for {
				i := int(nextIdx.Add(1) - 1)
				if i >= len(work) {
					return
				}
				results[i] = e.flushLog(work[i], force, scratch)
			}
		}(&e.flushScratch[w])
	}
	wg.Wait()
	return results
}

// flushLog syncs one log: capture what must be synced under l.mu, fdatasync
// outside it (appends continue meanwhile and are covered by the next round),
// then advance the durable offset and, without write caching, the HW.
// deferred reports that write-caching data remains unsynced until deadline
// (-1: no deadline).
func (e *Engine) flushLog(l *Log, force bool, scratch *[]*logSegment) (r flushResult) {
	nowMs := e.nowMs()
	cfg := &l.cfg
	l.mu.Lock()
	if l.deleted || l.active == nil {
		l.queued = false
		l.mu.Unlock()
		return flushResult{deadline: -1}
	}
	full := force || !cfg.WriteCaching || l.unflushed >= cfg.FlushMessages || nowMs-l.lastFlushMs >= cfg.FlushMs
	segs := (*scratch)[:0]
	for _, s := range l.pending {
		if s.acquire() {
			segs = append(segs, s)
		}
	}
	clear(l.pending)
	l.pending = l.pending[:0]
	sealedN := len(segs)
	var end int64
	if full {
		end = l.logEnd.Load()
		if l.activeDirty && l.active.acquire() {
			segs = append(segs, l.active)
		}
		l.activeDirty = false
		l.unflushed = 0
		l.lastFlushMs = nowMs
	} else {
		end = l.active.base
	}
	syncDirNow := l.dirDirty
	l.dirDirty = false
	r.deferred = l.activeDirty
	l.queued = r.deferred
	if r.deferred && cfg.FlushMs < math.MaxInt64-l.lastFlushMs {
		r.deadline = l.lastFlushMs + cfg.FlushMs
	} else {
		r.deadline = -1
	}
	l.mu.Unlock()

	var err error
	for i, s := range segs {
		if err == nil {
			err = e.syncSegment(s, i < sealedN)
			if err != nil && s.deleting.Load() {
				err = nil // DeleteRecords renamed it meanwhile: nothing to keep
			}
		}
		s.release()
		segs[i] = nil
	}
	*scratch = segs[:0]
	if err == nil && syncDirNow {
		err = e.syncFile(l.dir, func() error { return syncDir(l.dir) })
	}
	if err != nil {
		l.mu.Lock()
		gone := l.deleted
		l.mu.Unlock()
		if !gone { // a topic deleted meanwhile has no files left to sync
			e.ioFailure(fmt.Sprintf("syncing %s", l), err)
		}
		return flushResult{deadline: -1}
	}
	if end > l.durable.Load() {
		l.durable.Store(end)
		r.advanced = true
	}
	if !cfg.WriteCaching {
		l.advanceHW(end)
	}
	return r
}

// syncSegment fdatasyncs a segment's data and, for a sealed segment, its
// trimmed index files.
func (e *Engine) syncSegment(s *logSegment, sealed bool) error {
	e.syncs.Add(1)
	logPath, offPath, timPath := s.paths()
	if err := e.syncFile(logPath, s.seg.Sync); err != nil {
		return err
	}
	if !sealed {
		return nil
	}
	for _, p := range []string{offPath, timPath} {
		if err := e.syncFile(p, func() error { return syncPath(p) }); err != nil {
			return err
		}
	}
	return nil
}

// syncFile runs one sync, through the test hook when set.
func (e *Engine) syncFile(path string, sync func() error) error {
	if h := e.syncHook; h != nil {
		if err := h(path); err != nil {
			return err
		}
	}
	return sync()
}

// ioFailure takes the engine offline after a failed write or sync (never
// retried: after a failed fsync the page cache state is unknown) and returns
// the offline error.
func (e *Engine) ioFailure(what string, cause error) error {
	err := fmt.Errorf("%w: %s: %v", ErrOffline, what, cause)
	if !e.offline.CompareAndSwap(nil, &err) {
		return *e.offline.Load()
	}
	e.logger.Error("log directory offline: I/O failed, not retrying", "dir", e.dir, "op", what, "err", cause)
	for _, l := range e.allLogs() {
		l.fail(err)
	}
	return err
}

// Offline returns a non-nil error (wrapping ErrOffline) once a write or an
// fsync has failed.
func (e *Engine) Offline() error {
	if p := e.offline.Load(); p != nil {
		return *p
	}
	return nil
}
