package engine

import (
	"errors"
	"fmt"
	"github.com/stratalog/strata/internal/vfs"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The durable pipeline (see "Durability and the high watermark" in doc.go).
//
// Appends mark their log dirty; a fixed pool of flush workers takes dirty
// logs from a FIFO queue as soon as each worker is free (one at a time, or
// with shared device flushes every queued log as one batch: flushBatch),
// fdatasyncs the log's dirty files and advances its durable offset and HW. A log is in the
// queue at most once and is never flushed by two workers at once (except
// in the ends mode once a round's end records are staged: releaseRound): appends
// that arrive while it is being flushed mark it to be queued again when that
// flush ends. A coordinator goroutine owns the clock-driven work: the
// recovery-point checkpoint and write-caching deadlines (flush.ms).

const (
	// checkpointIntervalMs bounds how often the coordinator rewrites
	// recovery-point-offset-checkpoint. Recovery after a crash walks what
	// was appended after the checkpointed recovery point (from the index
	// entry below it), so this bounds the walk to about one second of
	// appends per partition; the rewrite is one small file and four
	// fsyncs.
	checkpointIntervalMs = 1000

	// defaultFlushWorkers is the size of the flush worker pool: at most
	// this many fdatasyncs run at once. Concurrent fdatasyncs of different
	// files share the filesystem journal's commits, so more workers cover
	// more logs per commit; each one blocked in the kernel holds an OS
	// thread.
	defaultFlushWorkers = 16
	// sharedFlushWorkers is the pool size with shared device flushes. Each
	// worker takes every queued log (up to maxFlushBatch) and makes them
	// durable with one device flush (flushBatch); a second worker gathers
	// the logs queued meanwhile and shares the next flush.
	sharedFlushWorkers = 8
	// endsFlushWorkers is the pool size in the ends mode
	// (Options.JournalEnds), where a round's worker waits for a journal
	// group (one write and fdatasync at a time, ~3 ms under keyed load)
	// after handing its logs back (releaseRound): rounds overlap more
	// (six or so busy at once keyed closed loop, measured), and a log
	// dirtied while every worker waits is not written until one is free.
	endsFlushWorkers = 16
	// maxFlushBatch bounds the logs one worker takes at once.
	maxFlushBatch = 256
)

// flushState is where a Log stands in the pipeline; guarded by Log.mu.
type flushState uint8

const (
	flushIdle         flushState = iota // nothing unsynced the pipeline must act on
	flushQueued                         // in Engine.flushQ, exactly once
	flushRunning                        // a worker is syncing it; nothing urgent since its capture
	flushRunningAgain                   // a worker is syncing it; queue it again afterwards
	flushDeferred                       // write caching: unsynced data waits for flush.ms/flush.messages
)

// logQueue is a FIFO ring of logs. Each log is in it at most once (flushState
// guarantees it), so it never holds more entries than the engine has logs.
type logQueue struct {
	buf  []*Log
	head int
	n    int
}

func (q *logQueue) len() int { return q.n }

func (q *logQueue) push(l *Log) {
	if q.n == len(q.buf) {
		grown := make([]*Log, max(2*len(q.buf), 64))
		for i := 0; i < q.n; i++ {
			grown[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = l
	q.n++
}

func (q *logQueue) pop() *Log {
	l := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return l
}

// flushPipeline is the Engine's flusher state.
type flushPipeline struct {
	workers int // pool size, fixed at Open

	mu       sync.Mutex // guards the fields below; taken after Log.mu
	cond     sync.Cond  // signalled on push and on stop
	queue    logQueue
	deferred []*Log // write-caching logs with a flush.ms deadline (may hold stale entries)
	stopping bool   // workers exit once the queue is empty
	batch    bool   // workers take batches (shared device flushes): wake one at a time
	idle     int    // workers waiting in cond
	waking   int    // workers signalled that have not taken their batch yet
	wg       sync.WaitGroup

	closing   atomic.Bool   // Close started: every flush is a full one
	ckptDirty atomic.Bool   // a durable offset moved since the last checkpoint
	kick      chan struct{} // wakes the coordinator
	stop      chan struct{} // closed by stopFlusher
	done      chan struct{} // closed when the coordinator returned
}

// startFlusher starts the workers and the coordinator. Called by Open after
// recovery.
func (e *Engine) startFlusher() {
	p := &e.fl
	p.cond.L = &p.mu
	p.kick = make(chan struct{}, 1)
	p.stop = make(chan struct{})
	p.done = make(chan struct{})
	p.batch = e.io.dev != nil
	if p.workers <= 0 {
		p.workers = defaultFlushWorkers
		if p.batch {
			p.workers = sharedFlushWorkers
			if e.jnlEnds {
				p.workers = endsFlushWorkers
			}
		}
	}
	p.wg.Add(p.workers)
	for i := 0; i < p.workers; i++ {
		go e.runFlushWorker()
	}
	go e.runCoordinator()
}

// stopFlusher makes every log durable and stops the pipeline. Caller
// (Close) has marked every log closed, so no append can dirty a log again.
func (e *Engine) stopFlusher() {
	p := &e.fl
	p.closing.Store(true)
	close(p.stop)
	<-p.done // the coordinator queues nothing after this
	for _, l := range e.allLogs() {
		l.mu.Lock()
		switch l.flushState {
		case flushRunning:
			l.flushState = flushRunningAgain // a partial (write-caching) flush may be running
		case flushIdle, flushDeferred:
			if l.activeDirty || len(l.pending) > 0 || l.dirDirty {
				l.flushState = flushQueued
				e.pushFlush(l)
			} else {
				l.flushState = flushIdle
			}
		}
		l.mu.Unlock()
	}
	p.mu.Lock()
	p.stopping = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait() // the workers drained the queue, requeues included
}

// markDirty tells the pipeline that l has unsynced data (or a sealed segment
// or a new file). urgent queues it for a worker now; otherwise (write
// caching below its thresholds) it waits for its flush.ms deadline. Caller
// holds l.mu.
func (e *Engine) markDirty(l *Log, urgent bool) {
	switch l.flushState {
	case flushIdle:
		if urgent {
			l.flushState = flushQueued
			e.pushFlush(l)
		} else {
			l.flushState = flushDeferred
			e.deferLog(l)
		}
	case flushDeferred:
		if urgent {
			l.flushState = flushQueued // its deferred-list entry is dropped lazily
			e.pushFlush(l)
		}
	case flushRunning:
		if urgent {
			l.flushState = flushRunningAgain
		}
	}
}

// pushFlush appends l to the queue and wakes a worker. Caller holds l.mu
// and has set l.flushState = flushQueued. Batch workers are woken one at a
// time: a produce request dirties several logs in a row, and the worker
// woken by the first takes the ones queued before it runs (context switches
// cost more here than the batching delays).
func (e *Engine) pushFlush(l *Log) {
	p := &e.fl
	p.mu.Lock()
	p.queue.push(l)
	if !p.batch {
		p.cond.Signal()
	} else if p.idle > 0 && p.waking == 0 {
		p.waking++
		p.cond.Signal()
	}
	p.mu.Unlock()
}

// deferLog registers a write-caching log with the coordinator when it has a
// flush.ms deadline. Caller holds l.mu.
func (e *Engine) deferLog(l *Log) {
	if l.deferListed || flushDeadline(l) < 0 {
		return
	}
	l.deferListed = true
	p := &e.fl
	p.mu.Lock()
	p.deferred = append(p.deferred, l)
	p.mu.Unlock()
	e.kickFlusher()
}

// flushDeadline is the clock time (ms) by which l's unsynced write-caching
// data must be synced, -1 for never. Caller holds l.mu.
func flushDeadline(l *Log) int64 {
	if l.config().FlushMs >= math.MaxInt64-l.lastFlushMs {
		return -1
	}
	return l.lastFlushMs + l.config().FlushMs
}

// kickFlusher wakes the coordinator to re-check deadlines now.
func (e *Engine) kickFlusher() {
	select {
	case e.fl.kick <- struct{}{}:
	default:
	}
}

// nextFlush blocks until a log is queued and returns it, or returns nil
// once the pipeline is stopping and the queue is drained.
func (e *Engine) nextFlush() *Log {
	p := &e.fl
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.queue.len() == 0 && !p.stopping {
		p.cond.Wait()
	}
	if p.queue.len() == 0 {
		return nil
	}
	return p.queue.pop()
}

// nextFlushBatch blocks until a log is queued and returns up to
// maxFlushBatch of them appended to dst, or dst unchanged once the pipeline
// is stopping and the queue is drained.
func (e *Engine) nextFlushBatch(dst []*Log) []*Log {
	p := &e.fl
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.queue.len() == 0 && !p.stopping {
		p.idle++
		p.cond.Wait()
		p.idle--
		if p.waking > 0 {
			p.waking--
		}
	}
	for p.queue.len() > 0 && len(dst) < maxFlushBatch {
		dst = append(dst, p.queue.pop())
	}
	if p.queue.len() > 0 && p.idle > 0 && p.waking == 0 {
		p.waking++
		p.cond.Signal()
	}
	return dst
}

// runFlushWorker is one of the Engine's flush workers (started by Open,
// stopped by Close once the queue drained).
func (e *Engine) runFlushWorker() {
	defer e.fl.wg.Done()
	if e.fl.batch {
		var b flushBatch // reused
		for {
			b.logs = e.nextFlushBatch(b.logs[:0])
			if len(b.logs) == 0 {
				return
			}
			e.flushBatch(&b)
		}
	}
	var j flushJob // reused: its segment list keeps its storage
	for {
		l := e.nextFlush()
		if l == nil {
			return
		}
		e.flushOne(l, &j)
	}
}

// flushJob is what a worker captured of one log under Log.mu.
type flushJob struct {
	l       *Log
	skip    bool          // nothing to do (deleted, closed or offline)
	segs    []*logSegment // pinned segments to fdatasync; sealed ones first
	sealedN int
	end     int64 // durable offset once the syncs succeed
	syncDir bool

	// flushBatch: the active segment's share of the batch's device flush.
	err    error // the first sync error
	own    int   // segs[:own] sync themselves (syncSegs)
	shared bool  // segs[len(segs)-1] is made durable by the batch's flush
	target int64 // its StartShared target
	// released: the log went back to the pipeline before the job's flush
	// completed (releaseRound); complete only publishes the end.
	released bool
}

// capture records under l.mu what flushing l must sync (pinning the
// segments), and marks l running. Appends continue once it returns and are
// covered by the next flush of l.
func (e *Engine) capture(l *Log, j *flushJob, nowMs int64) {
	segs := j.segs[:0]
	*j = flushJob{l: l}
	cfg := l.config()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.flushState != flushQueued {
		panic(fmt.Sprintf("engine: flushing %s in state %d", l, l.flushState))
	}
	if l.deleted || l.active == nil || e.Offline() != nil {
		l.flushState = flushIdle
		j.skip = true
		j.segs = segs
		return
	}
	l.flushState = flushRunning
	full := e.fl.closing.Load() || !cfg.WriteCaching ||
		l.unflushed >= cfg.FlushMessages || nowMs-l.lastFlushMs >= cfg.FlushMs
	for _, s := range l.pending {
		if s.acquire() {
			segs = append(segs, s)
		}
	}
	clear(l.pending)
	l.pending = l.pending[:0]
	j.sealedN = len(segs)
	switch {
	case full && l.activeDirty && !l.activeOwn && e.jnl != nil && !e.jnlEnds && !e.fl.closing.Load():
		// Only journaled bytes in the active segment (a roll's job): their
		// journal groups made them durable and the next checkpoint writes
		// them; syncing the segment here too cost every roll of a keyed
		// burst a tail write and a device flush beside the journal's.
		// The job syncs the sealed segments (and the directory if a
		// truncation or a new transaction index dirtied it); the active
		// one stays dirty (deferred) for the checkpoint and Close.
		// The flush.messages and flush.ms counts restart as after a full
		// flush (a deferred log past them would be queued again at once).
		j.end = l.active.base
		l.unflushed = 0
		l.lastFlushMs = nowMs
	case full:
		j.end = l.logEnd.Load()
		if l.activeDirty && l.active.acquire() {
			segs = append(segs, l.active)
		}
		l.activeDirty, l.activeOwn = false, false
		l.unflushed = 0
		l.lastFlushMs = nowMs
	default:
		j.end = l.active.base
	}
	j.syncDir = l.dirDirty
	l.dirDirty = false
	j.segs = segs
}

// flushOne makes one log durable: fdatasync of its dirty segments (and the
// index files of sealed ones, and its directory after a roll), outside
// l.mu, then complete.
func (e *Engine) flushOne(l *Log, j *flushJob) {
	e.capture(l, j, e.nowMs())
	if j.skip {
		return
	}
	j.err = nil
	e.syncSegs(j, len(j.segs))
	e.finishJob(j)
}

// syncSegs syncs j.segs[:n] one by one until the first error (j.err); an
// error of a segment DeleteRecords renamed meanwhile is ignored.
func (e *Engine) syncSegs(j *flushJob, n int) {
	for i := 0; i < n && j.err == nil; i++ {
		s := j.segs[i]
		j.err = e.syncSegment(s, i < j.sealedN)
		if j.err != nil && s.deleting.Load() {
			j.err = nil // DeleteRecords renamed it meanwhile: nothing to keep
		}
	}
}

// finishJob releases j's segments, fsyncs the log directory after a roll,
// takes the engine offline on an error and completes the flush.
func (e *Engine) finishJob(j *flushJob) {
	l := j.l
	for i, s := range j.segs {
		s.release()
		j.segs[i] = nil
	}
	j.segs = j.segs[:0]
	err := j.err
	if err == nil && j.syncDir {
		err = e.syncFile(l.dir, func() error { return e.syncDir(l.dir) })
	}
	if err != nil {
		l.mu.Lock()
		gone := l.deleted
		l.mu.Unlock()
		if !gone { // a topic deleted meanwhile has no files left to sync
			e.ioFailure(fmt.Sprintf("syncing %s", l), err)
		}
	}
	j.err = nil
	e.complete(j, err == nil)
}

// flushBatch is a batch worker's reusable state.
type flushBatch struct {
	logs []*Log
	jobs []flushJob
	ends []endRecord // Options.JournalEnds: the round's segment ends
}

// flushBatch makes a batch of logs durable with one shared device flush
// (see "Shared device flushes" in doc.go): active segments that can share
// (segment.StartShared) submit their tails, wait for their writes, and are
// made durable by one flush that starts after the last of those writes
// completed; logs with nothing else to sync complete then. Sealed segments
// and active ones that cannot share sync afterwards as in flushOne (a roll's
// fsyncs do not hold up the other logs' acknowledgements), then their logs
// complete.
func (e *Engine) flushBatch(b *flushBatch) {
	if cap(b.jobs) < len(b.logs) {
		b.jobs = append(b.jobs[:cap(b.jobs)], make([]flushJob, len(b.logs)-cap(b.jobs))...)
	}
	jobs := b.jobs[:len(b.logs)]
	now := e.nowMs()
	for i, l := range b.logs {
		e.capture(l, &jobs[i], now)
		b.logs[i] = nil
	}
	anyShared := false
	for i := range jobs {
		j := &jobs[i]
		j.own = len(j.segs)
		if j.skip || j.own == j.sealedN {
			continue
		}
		s := j.segs[j.own-1] // the active segment is last
		target, shared, err := e.io.startShared(s.seg)
		switch {
		case err != nil:
			if !s.deleting.Load() {
				j.err = err
			}
			j.own--
		case shared:
			j.shared, j.target = true, target
			anyShared = true
			j.own--
		}
	}
	if anyShared {
		b.ends = e.shareFlush(jobs, b.ends[:0])
		clear(b.ends)
	}
	for pass := 0; pass < 2; pass++ {
		for i := range jobs {
			j := &jobs[i]
			if j.skip || (j.own == 0 || j.err != nil) != (pass == 0) {
				continue
			}
			if pass == 1 {
				e.syncSegs(j, j.own)
			}
			j.own = 0 // finished: not taken by the second pass
			e.finishJob(j)
		}
	}
}

// shareFlush waits for the writes of the jobs' shared active segments, runs
// (or joins) one device flush that starts after them, and marks them
// durable. The sync hook sees each segment as if it had synced alone.
// With Options.JournalEnds the flush is the journal's: the segments' new
// ends are staged there (in ends, reusable storage returned) and the
// journal group's fdatasync makes writes and ends durable at once.
func (e *Engine) shareFlush(jobs []flushJob, ends []endRecord) []endRecord {
	waiting := 0
	var need uint64  // the first device flush that covers every job's writes
	noEpoch := false // a segment without flush numbers: only a flush starting now covers it
	for i := range jobs {
		j := &jobs[i]
		if !j.shared || j.err != nil {
			continue
		}
		s := j.segs[len(j.segs)-1]
		path, _, _ := s.paths()
		e.syncs.Add(1)
		if err := e.io.waitWritten(s.seg, j.target); err != nil {
			j.err = err
		} else if ep, ok := e.io.writtenEpoch(s.seg); ok {
			need = max(need, ep+1)
		} else {
			noEpoch = true
		}
		if h := e.syncHook; h != nil && j.err == nil {
			j.err = h(path)
		}
		if j.err != nil {
			if s.deleting.Load() {
				j.err = nil
			}
			j.shared = false
			continue
		}
		waiting++
	}
	if waiting == 0 {
		return ends
	}
	if noEpoch {
		need = 0
	}
	var ferr error
	if e.jnlEnds && e.jnl != nil {
		for i := range jobs {
			j := &jobs[i]
			if !j.shared || j.err != nil {
				continue
			}
			s := j.segs[len(j.segs)-1]
			ends = append(ends, endRecord{l: j.l, base: s.base, from: e.io.durable(s.seg), end: j.target, endOffset: j.end})
		}
		var done <-chan error
		if done, ferr = e.jnl.stageEnds(ends); ferr == nil {
			for i := range jobs {
				if j := &jobs[i]; j.shared && j.err == nil && j.own == 0 && !j.syncDir {
					e.releaseRound(j)
				}
			}
			ferr = <-done
		}
	} else {
		ferr = e.io.dev.waitFor(need)
	}
	for i := range jobs {
		j := &jobs[i]
		if !j.shared || j.err != nil {
			continue
		}
		if ferr != nil {
			j.err = ferr
			continue
		}
		s := j.segs[len(j.segs)-1]
		if err := e.io.markDurable(s.seg, j.target); err != nil {
			j.err = err
		}
	}
	return ends
}

// releaseRound hands j's log back to the pipeline before j's flush
// completes (ends mode): its segment writes completed and its end
// records are staged, so a round that captures the log from here on
// stages its own end records after these, into the same journal group or
// a later one, and waits for writes that include j's. Appends made while
// j ran then go into the next round at once instead of waiting for j's
// group (with several produce requests in flight, each touching nearly
// every partition, nearly every append found its log running and waited
// for two rounds). Only a job with nothing to sync but its shared active
// segment is released (a sealed segment or a directory is synced after
// the shared flush, and a later round must not publish an end past them
// first). Durable ends and HWs only rise (noteDurable, advanceHW,
// MarkDurable), so the rounds may publish in either order; flushTails
// keeps lockIdle waiting until j published.
func (e *Engine) releaseRound(j *flushJob) {
	l := j.l
	l.mu.Lock()
	e.handBack(l)
	l.flushTails++
	j.released = true
	l.mu.Unlock()
}

// handBack moves a log whose flush ended (or was released) out of the
// running states: queued again if it was dirtied urgently meanwhile,
// deferred if write-caching data remains, else idle. Caller holds l.mu.
func (e *Engine) handBack(l *Log) {
	switch {
	case l.flushState == flushRunningAgain:
		l.flushState = flushQueued
		e.pushFlush(l)
	case l.activeDirty:
		l.flushState = flushDeferred // write caching below its thresholds
		e.deferLog(l)
	default:
		l.flushState = flushIdle
	}
}

// complete publishes a finished flush of j.l (ok: its syncs succeeded) and
// hands the log back to the pipeline (handBack), unless releaseRound did.
//
// While rounds released early (releaseRound) are still waiting for their
// journal groups, a round that completes without one (nothing left to
// write, or segments it synced itself) must not publish its end: that end
// covers the released rounds' bytes, which are durable only once their
// groups are (seen in TestJournalEndsCrash: an empty round published the
// end of a released round whose group the power cut, and the
// acknowledged batch was lost). It leaves its end in l.heldEnd for the
// last released round to publish. Publishing happens outside l.mu (it runs
// acknowledgement callbacks) but before the log is idle again, so lockIdle
// never lets a truncation in between a captured end and its publication.
func (e *Engine) complete(j *flushJob, ok bool) {
	l := j.l
	ok = ok && e.Offline() == nil
	if j.released {
		e.completeTail(j, ok)
		return
	}
	l.mu.Lock()
	if ok && l.flushTails > 0 {
		l.heldEnd = max(l.heldEnd, j.end)
		e.handBack(l)
		l.mu.Unlock()
		j.l = nil
		return
	}
	l.mu.Unlock()
	if ok {
		e.publish(l, j.end)
	}
	l.mu.Lock()
	if !ok {
		l.flushState = flushIdle // offline: nothing is synced again
	} else {
		e.handBack(l)
	}
	l.mu.Unlock()
	j.l = nil
}

// completeTail completes a round releaseRound handed back: it publishes
// its own end and, if it is the last released round still out, the ends
// later rounds held for it (complete), then stops counting in flushTails.
func (e *Engine) completeTail(j *flushJob, ok bool) {
	l := j.l
	var done int64 = -1
	if ok {
		e.publish(l, j.end)
		done = j.end
	}
	l.mu.Lock()
	for ok && l.flushTails == 1 && l.heldEnd > done {
		done = l.heldEnd
		l.mu.Unlock()
		e.publish(l, done)
		l.mu.Lock()
	}
	l.flushTails--
	if l.flushTails == 0 {
		l.heldEnd = 0
	}
	j.released = false
	l.mu.Unlock()
	j.l = nil
}

// publish makes end l's durable offset and, without write caching, its HW
// (or the replica manager's durable end).
func (e *Engine) publish(l *Log, end int64) {
	e.noteDurable(l, end)
	if !l.config().WriteCaching {
		l.flushedTo(end) // replication.go: the HW, or the replica manager
	}
}

// noteDurable raises l's durable offset to end (never lowers it) and has
// the coordinator write the recovery-point checkpoint.
func (e *Engine) noteDurable(l *Log, end int64) {
	for {
		cur := l.durable.Load()
		if end <= cur {
			return
		}
		if l.durable.CompareAndSwap(cur, end) { // released rounds complete concurrently
			break
		}
	}
	if !e.fl.ckptDirty.Load() && e.fl.ckptDirty.CompareAndSwap(false, true) {
		e.kickFlusher()
	}
}

// runCoordinator is the Engine's clock goroutine (started by Open, stopped
// by Close): it queues write-caching logs whose flush.ms passed, writes
// the recovery-point checkpoint at most every checkpointIntervalMs and
// checks the free-space floor every floorCheckMs.
func (e *Engine) runCoordinator() {
	p := &e.fl
	defer close(p.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	lastCkptMs := e.nowMs()
	var deferred []*Log
	for {
		select {
		case <-p.kick:
		case <-timer.C:
		case <-p.stop:
			return
		}
		now := e.nowMs()
		var next int64
		deferred, next = e.queueDueLogs(deferred, now)
		if due := e.floorDue(now); due >= 0 && (next < 0 || due < next) {
			next = due // the free-space floor's statfs (diskfloor.go)
		}
		if p.ckptDirty.Load() && e.Offline() == nil {
			if due := lastCkptMs + checkpointIntervalMs; now >= due {
				p.ckptDirty.Store(false)
				lastCkptMs = now
				e.writeBackIndexes()
				e.recoveryCheckpointWritten(e.writeRecoveryCheckpoint()) // diskfloor.go
				if e.logStartPending.Load() {
					_ = e.writeLogStartCheckpoint() // logs and re-arms itself on failure
				}
			} else if next < 0 || due < next {
				next = due
			}
		}
		timer.Stop()
		if next >= 0 {
			d := time.Duration(next-now) * time.Millisecond
			timer.Reset(min(max(d, time.Millisecond), time.Hour))
		}
	}
}

// queueDueLogs queues the deferred write-caching logs whose deadline passed
// (or that reached flush.messages), drops entries that left the deferred
// state, and returns the earliest remaining deadline (-1 none). keep is
// reusable storage.
func (e *Engine) queueDueLogs(keep []*Log, now int64) ([]*Log, int64) {
	p := &e.fl
	p.mu.Lock()
	keep = append(keep[:0], p.deferred...)
	clear(p.deferred)
	p.deferred = p.deferred[:0]
	p.mu.Unlock()
	next := int64(-1)
	n := 0
	for _, l := range keep {
		l.mu.Lock()
		deadline := flushDeadline(l)
		switch {
		case l.flushState != flushDeferred:
			l.deferListed = false
		case l.unflushed >= l.config().FlushMessages || (deadline >= 0 && now >= deadline):
			l.deferListed = false
			l.flushState = flushQueued
			e.pushFlush(l)
		case deadline < 0:
			l.deferListed = false
		default:
			keep[n] = l
			n++
			if next < 0 || deadline < next {
				next = deadline
			}
		}
		l.mu.Unlock()
	}
	clear(keep[n:])
	if n > 0 {
		p.mu.Lock()
		p.deferred = append(p.deferred, keep[:n]...)
		p.mu.Unlock()
	}
	return keep[:0], next
}

// syncSegment fdatasyncs a segment's data and, for a sealed segment, its
// trimmed index files, with an fdatasync of its own (an active segment that
// can share a device flush goes through flushBatch instead).
func (e *Engine) syncSegment(s *logSegment, sealed bool) error {
	e.syncs.Add(1)
	if !sealed {
		e.ownSyncs.Add(1)
	}
	logPath, offPath, timPath := s.paths()
	if err := e.syncFile(logPath, s.seg.Sync); err != nil {
		return err
	}
	if !sealed {
		return nil
	}
	for _, p := range []string{offPath, timPath} {
		if err := e.syncFile(p, func() error { return vfs.SyncPathFS(e.fs, p) }); err != nil {
			return err
		}
	}
	s.idxUnsynced.Store(false)
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

// ErrResource is what creating a topic, a partition or a segment fails
// with when the process or the filesystem runs out of something it can get
// back (descriptors, memory or mappings, space): that creation fails with
// KAFKA_STORAGE_ERROR (retriable) and the directory stays online.
var ErrResource = errors.New("engine: out of a resource")

// createFailure is ioFailure for creating a topic, partition or segment:
// running out of descriptors (EMFILE, ENFILE), memory or mappings (ENOMEM,
// which mmap returns past vm.max_map_count) or space (ENOSPC, EDQUOT)
// fails that creation only and logs it; anything else takes the directory
// offline, as a failed write of data does.
func (e *Engine) createFailure(what string, cause error) error {
	if !isResourceErr(cause) {
		return e.ioFailure(what, cause)
	}
	e.logger.Warn("out of a resource: the request fails, the log directory stays online", "dir", e.dir, "op", what, "err", cause)
	return fmt.Errorf("%w: %s: %v", ErrResource, what, cause)
}

// isResourceErr reports errors that running out of a resource returns.
func isResourceErr(err error) bool {
	for _, no := range [...]syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.ENOSPC, syscall.EDQUOT} {
		if errors.Is(err, no) {
			return true
		}
	}
	return false
}

// Offline returns a non-nil error (wrapping ErrOffline) once a write or an
// fsync has failed.
func (e *Engine) Offline() error {
	if p := e.offline.Load(); p != nil {
		return *p
	}
	return nil
}
