package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/stratalog/strata/internal/vfs"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/index"
	"github.com/stratalog/strata/record"
)

// The log cleaner: compaction of logs whose cleanup.policy contains
// "compact", as Kafka's LogCleaner does it.
//
// # What a pass does
//
// One goroutine owned by the Engine (started by Open, stopped by Close
// before any log closes) picks, every pass, the compacted log with the
// largest dirty ratio and cleans it:
//
//  1. The cleanable range is [logStart, firstUncleanable): sealed segments
//     wholly below the high watermark and the durable offset (the active
//     segment is never cleaned), stopping at the first segment whose largest
//     timestamp is younger than min.compaction.lag.ms. The dirty part starts
//     at the clean point (cleaner-offset-checkpoint: the end of the last
//     cleaned range). A log is cleaned when dirty/(clean+dirty) bytes >=
//     min.cleanable.dirty.ratio, or when its first dirty segment's largest
//     timestamp is older than max.compaction.lag.ms.
//  2. It builds key -> latest offset over the dirty part (keys are copied
//     once per distinct key; at most maxOffsetMapKeys keys, the dirty part is
//     cut at a segment boundary beyond that).
//  3. The cleanable range is rewritten in groups of consecutive segments
//     whose sizes add up to at most segment.bytes (and whose offsets fit the
//     index's 31-bit relative offsets), each group into one segment named
//     after its first, without the records the map supersedes: a record stays
//     when no later offset of its key is in the map (the map covers the dirty
//     part, so every key updated there keeps only its latest record, and
//     clean-part keys never updated since stay). Keyless records go.
//     Tombstones (null value) stay while now - the segment's largest timestamp
//     <= delete.retention.ms, then go. Control batches are kept as they are.
//     A batch whose records all stay is copied byte for byte; one that lost
//     some is re-encoded with the same base offset, lastOffsetDelta, base
//     timestamp, producer fields, attributes and codec (recompressed), its
//     max timestamp recomputed (kept for LogAppendTime) and a new CRC; one
//     that lost all is dropped. Offsets never change; batches stay whole.
//     A group of one segment losing nothing is not rewritten; groups of
//     several are merged even so (segments emptied by cleaning disappear).
//  4. The clean point moves to firstUncleanable and is checkpointed.
//
// # Crash safety (the swap)
//
// A group's new segment is written to <base>.log.cleaned, .index.cleaned
// and .timeindex.cleaned (and .txnindex.cleaned when it carries aborted
// transactions) and fsynced. The index files are renamed to .swap and the
// directory fsynced. Then, under Log.mu (after checking the group is still
// in the list: retention or DeleteRecords may have removed a segment
// meanwhile, then the new files are dropped): the .log.cleaned is renamed
// to .log.swap and the directory fsynced (the commit point); the old
// segments' files are renamed to .deleted (readers that pinned them keep
// their descriptors); the index .swap files are renamed to their final
// names, the directory fsynced, the .log.swap renamed to its final name
// and the directory fsynced again; the new segment replaces the group in
// the list. Open (scanPartitionDir -> promoteSwapFiles) completes a swap
// whose .log.swap exists the same way (indexes first), removes old
// segments whose base lies inside the promoted segment's offsets, removes
// index .swap files without a .log.swap (a swap that never committed) and
// .cleaned and .deleted leftovers: after a crash at any step the log is
// the old group or the new segment, and both hold every latest value. The
// directory syncs between the renames make this hold on a file system
// that keeps unsynced renames in any order, not only on one with an
// ordered metadata journal (TestCrashMidCompaction crashes both ways).
//
// Before the first swap of a pass the recovery-point checkpoint is written:
// every cleaned segment lies below it, so Open trusts them rather than
// walking them (a walked segment that ends before its successor's base
// would look like a torn write).
//
// # Throttle
//
// Bytes read and written are charged to a token bucket of
// log.cleaner.io.max.bytes.per.second (default 64 MiB/s here): the cleaner
// sleeps when it runs ahead, so it never takes the disk from produce. Its
// Log.mu critical section is the swap of one segment (renames and three
// directory fsyncs), never the copying.
//
// Concurrency: cleaner.mu guards the clean points; cleaner.runMu serializes
// passes (the goroutine's and Topic.Compact's). A pass reads sealed segments
// only (immutable), pinned by reference counts, without Log.mu; lock order
// runMu -> Log.mu -> Log.idxMu, and runMu -> cleaner.mu.

const (
	cleanerCheckpointFile = "cleaner-offset-checkpoint"
	cleanedSuffix         = ".cleaned"
	swapSuffix            = ".swap"

	defaultCleanerIORate  = 64 << 20
	defaultCleanerBackoff = 15 * time.Second
	// maxOffsetMapKeys bounds the key -> offset map of one pass (Kafka's
	// log.cleaner.dedupe.buffer.size, counted in keys).
	maxOffsetMapKeys = 4 << 20
)

// CleanerOptions configures the log cleaner (compaction), named after
// Kafka's broker keys. The zero value is Kafka's defaults with a bounded
// I/O rate.
type CleanerOptions struct {
	Disabled            bool          // log.cleaner.enable=false
	IOMaxBytesPerSecond int64         // log.cleaner.io.max.bytes.per.second; 0 = 64 MiB/s, < 0 = unthrottled
	Backoff             time.Duration // log.cleaner.backoff.ms: pause when nothing needs cleaning; 0 = 15 s
}

// cleaner is the Engine's compaction goroutine state.
type cleaner struct {
	opts CleanerOptions
	stop chan struct{}
	done chan struct{}
	kick chan struct{}

	mu          sync.Mutex
	points      map[topicPartition]int64 // first dirty offset per log (loaded lazily)
	loaded      bool
	uncleanable map[*Log]bool // a pass failed on it (not an abort): skipped until restart

	// runMu serializes cleaning passes (the goroutine and Topic.Compact)
	// and guards the token bucket.
	runMu sync.Mutex
	// Token bucket, guarded by runMu.
	tokens  float64
	lastRef time.Time

	cleanedBytes atomic.Int64 // bytes of segments read by cleaning passes (benchmarks)

	// ioRate and backoffNs are opts.IOMaxBytesPerSecond and opts.Backoff
	// in force: SetCleanerThrottle changes them while the cleaner runs.
	ioRate, backoffNs atomic.Int64

	// hook, when set (tests), runs at each step of a swap ("cleaned",
	// "swap", "deleted"); an error aborts the clean right there, leaving
	// the files as a crash would.
	hook func(step string) error
}

func (e *Engine) startCleaner(opts CleanerOptions) {
	c := &e.cl
	c.opts = opts
	if c.opts.Backoff <= 0 {
		c.opts.Backoff = defaultCleanerBackoff
	}
	if c.opts.IOMaxBytesPerSecond == 0 {
		c.opts.IOMaxBytesPerSecond = defaultCleanerIORate
	}
	c.ioRate.Store(c.opts.IOMaxBytesPerSecond)
	c.backoffNs.Store(int64(c.opts.Backoff))
	c.stop = make(chan struct{})
	c.done = make(chan struct{})
	c.kick = make(chan struct{}, 1)
	c.uncleanable = map[*Log]bool{}
	if opts.Disabled {
		close(c.done)
		return
	}
	go e.runCleaner()
}

// SetCleanerThrottle changes the cleaner's I/O rate and backoff while it
// runs (log.cleaner.io.max.bytes.per.second and log.cleaner.backoff.ms
// changed as dynamic broker configs), with CleanerOptions' meanings: a
// rate of 0 is 64 MiB/s and below 0 unthrottled, a backoff of 0 is 15 s.
// The next throttled read and the next pause use them.
func (e *Engine) SetCleanerThrottle(ioMaxBytesPerSecond int64, backoff time.Duration) {
	if ioMaxBytesPerSecond == 0 {
		ioMaxBytesPerSecond = defaultCleanerIORate
	}
	if backoff <= 0 {
		backoff = defaultCleanerBackoff
	}
	e.cl.ioRate.Store(ioMaxBytesPerSecond)
	e.cl.backoffNs.Store(int64(backoff))
}

// CleanerThrottle returns the cleaner's I/O rate and backoff in force.
func (e *Engine) CleanerThrottle() (ioMaxBytesPerSecond int64, backoff time.Duration) {
	return e.cl.ioRate.Load(), time.Duration(e.cl.backoffNs.Load())
}

func (e *Engine) stopCleaner() {
	c := &e.cl
	if c.stop == nil {
		return
	}
	close(c.stop)
	<-c.done
}

// kickCleaner asks for a cleaning pass now.
func (e *Engine) kickCleaner() {
	select {
	case e.cl.kick <- struct{}{}:
	default:
	}
}

func (e *Engine) stopping() bool {
	select {
	case <-e.cl.stop:
		return true
	default:
		return false
	}
}

func (e *Engine) runCleaner() {
	c := &e.cl
	defer close(c.done)
	for {
		cleaned := false
		if e.Offline() == nil {
			if l := e.pickLogToClean(); l != nil {
				start := e.now()
				st, err := e.cleanLog(l)
				switch {
				case err == nil:
					cleaned = true
					e.logger.Info("cleaned log", "log", l.String(), "segments", st.SegmentsRewritten,
						"read", st.BytesRead, "written", st.BytesWritten, "recordsRemoved", st.RecordsRemoved,
						"cleanedTo", st.CleanedTo, "took", e.now().Sub(start))
				case errors.Is(err, errCleanAborted):
				default:
					// Kafka marks such a partition uncleanable rather than
					// failing on it forever; so does this, until restart.
					c.mu.Lock()
					c.uncleanable[l] = true
					c.mu.Unlock()
					e.logger.Error("log cleaner: partition marked uncleanable until restart", "log", l.String(), "err", err)
				}
			}
		}
		if cleaned {
			if e.stopping() {
				return
			}
			continue
		}
		t := time.NewTimer(time.Duration(c.backoffNs.Load()))
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-c.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

var errCleanAborted = errors.New("engine: cleaning aborted")

// cleanPoint returns l's first dirty offset (0 if never cleaned).
func (e *Engine) cleanPoint(l *Log) int64 {
	c := &e.cl
	c.mu.Lock()
	defer c.mu.Unlock()
	e.loadCleanPointsLocked()
	return c.points[topicPartition{l.topic, l.part}]
}

// loadCleanPointsLocked reads cleaner-offset-checkpoint once. Caller holds cleaner.mu.
func (e *Engine) loadCleanPointsLocked() {
	c := &e.cl
	if c.loaded {
		return
	}
	c.loaded = true
	m, err := e.readCheckpoint(cleanerCheckpointFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		e.logger.Warn("ignoring cleaner checkpoint: logs will be cleaned from the start", "err", err)
	}
	if m == nil {
		m = map[topicPartition]int64{}
	}
	c.points = m
}

// setCleanPoint records and checkpoints l's new first dirty offset.
func (e *Engine) setCleanPoint(l *Log, off int64) error {
	c := &e.cl
	c.mu.Lock()
	defer c.mu.Unlock()
	e.loadCleanPointsLocked()
	c.points[topicPartition{l.topic, l.part}] = off
	live := make(map[topicPartition]int64, len(c.points))
	for _, x := range e.allLogs() {
		tp := topicPartition{x.topic, x.part}
		if p, ok := c.points[tp]; ok {
			live[tp] = p
		}
	}
	c.points = live
	return e.writeCheckpoint(cleanerCheckpointFile, live)
}

// forgetCleanPoints drops the clean points of a deleted topic and rewrites
// the checkpoint, so a topic re-created with the same name is not taken for
// clean. A write failure is logged: a stale point only delays compaction.
func (e *Engine) forgetCleanPoints(topic string) {
	c := &e.cl
	c.mu.Lock()
	defer c.mu.Unlock()
	e.loadCleanPointsLocked()
	removed := false
	for tp := range c.points {
		if tp.Topic == topic {
			delete(c.points, tp)
			removed = true
		}
	}
	if !removed {
		return
	}
	if err := e.writeCheckpoint(cleanerCheckpointFile, c.points); err != nil {
		e.logger.Warn("rewriting "+cleanerCheckpointFile, "err", err)
	}
}

// cleanable describes the cleanable range of a log.
type cleanable struct {
	segs       []*logSegment // snapshot
	firstDirty int64         // offset
	dirtyFrom  int           // index of the first dirty segment
	end        int           // index of the first uncleanable segment (segs[end].base = end offset)
	cleanBytes int64
	dirtyBytes int64
	overdue    bool // max.compaction.lag.ms passed for the first dirty segment
}

func (c *cleanable) ratio() float64 {
	if c.dirtyBytes == 0 {
		return 0
	}
	return float64(c.dirtyBytes) / float64(c.cleanBytes+c.dirtyBytes)
}

// cleanableRange computes l's cleanable range at nowMs.
func (e *Engine) cleanableRange(l *Log, cfg *LogConfig, nowMs int64) cleanable {
	lso := l.LastStableOffset() // never past an undecided transaction (txn.go)
	segs := *l.segs.Load()
	hw, durable, start := l.hw.Load(), l.durable.Load(), l.logStart.Load()
	c := cleanable{segs: segs, firstDirty: max(e.cleanPoint(l), start)}
	l.idxMu.RLock()
	defer l.idxMu.RUnlock()
	for c.end < len(segs)-1 {
		s, next := segs[c.end], segs[c.end+1]
		if !s.sealed || next.base > hw || next.base > durable || next.base > lso {
			break
		}
		if ts := segmentLargestTimestamp(s); cfg.MinCompactionLagMs > 0 && nowMs-ts < cfg.MinCompactionLagMs {
			break
		}
		c.end++
	}
	c.dirtyFrom = c.end
	for i := 0; i < c.end; i++ {
		s := segs[i]
		if segs[i+1].base <= c.firstDirty {
			c.cleanBytes += s.end.Load()
			continue
		}
		if c.dirtyFrom == c.end {
			c.dirtyFrom = i
			if cfg.MaxCompactionLagMs < math.MaxInt64 && nowMs-segmentLargestTimestamp(s) > cfg.MaxCompactionLagMs {
				c.overdue = true
			}
		}
		c.dirtyBytes += s.end.Load()
	}
	return c
}

// pickLogToClean returns the compacted log most in need of cleaning, nil if none.
func (e *Engine) pickLogToClean() *Log {
	now := e.nowMs()
	var best *Log
	bestRatio := -1.0
	for _, t := range e.Topics() {
		cfg := t.cfg.Load()
		if !cfg.compacted() || t.Deleted() {
			continue
		}
		for _, l := range t.hostedLogs() {
			e.cl.mu.Lock()
			skip := e.cl.uncleanable[l]
			e.cl.mu.Unlock()
			if skip {
				continue
			}
			c := e.cleanableRange(l, cfg, now)
			if c.dirtyBytes == 0 {
				continue
			}
			r := c.ratio()
			if c.overdue {
				r = 2 // before any log merely above its ratio
			} else if r < cfg.MinCleanableDirtyRatio {
				continue
			}
			if r > bestRatio {
				best, bestRatio = l, r
			}
		}
	}
	return best
}

// CleanStats describes one cleaning pass.
type CleanStats struct {
	SegmentsRewritten int
	BytesRead         int64
	BytesWritten      int64
	RecordsRemoved    int64
	CleanedTo         int64 // the new clean point (first dirty offset)
}

// Compact cleans partition p of a compacted topic now, regardless of
// min.cleanable.dirty.ratio (admin tools and tests).
func (t *Topic) Compact(p int32) (CleanStats, error) {
	l, err := t.partition(p)
	if err != nil {
		return CleanStats{}, err
	}
	if !t.cfg.Load().compacted() {
		return CleanStats{}, fmt.Errorf("%w: %s is not compacted (cleanup.policy=%s)", ErrInvalidConfig, t.name, t.cfg.Load().CleanupPolicy)
	}
	return t.e.cleanLog(l)
}

// offsetMap maps keys to their latest offset in the dirty range; lookups do
// not allocate, a new key is copied once.
type offsetMap struct {
	idx  map[string]int32
	offs []int64
}

func (m *offsetMap) put(key []byte, off int64) {
	if i, ok := m.idx[string(key)]; ok {
		if off > m.offs[i] {
			m.offs[i] = off
		}
		return
	}
	m.idx[string(key)] = int32(len(m.offs))
	m.offs = append(m.offs, off)
}

func (m *offsetMap) get(key []byte) (int64, bool) {
	i, ok := m.idx[string(key)]
	if !ok {
		return 0, false
	}
	return m.offs[i], true
}

// cleanLog runs one cleaning pass over l (see the file comment).
func (e *Engine) cleanLog(l *Log) (CleanStats, error) {
	e.cl.runMu.Lock()
	defer e.cl.runMu.Unlock()
	var st CleanStats
	cfg := l.config()
	now := e.nowMs()
	c := e.cleanableRange(l, cfg, now)
	if c.end == 0 || c.dirtyFrom >= c.end {
		st.CleanedTo = c.firstDirty
		return st, nil
	}
	// Pin the range for the pass.
	pinned := c.segs[:0:0]
	defer func() {
		for _, s := range pinned {
			s.release()
		}
	}()
	for _, s := range c.segs[:c.end] {
		if !s.acquire() {
			return st, errCleanAborted
		}
		pinned = append(pinned, s)
	}

	// Records of aborted transactions never supersede and are removed (txnindex.go).
	ab := l.abortedSet()
	// Key -> latest offset over the dirty part.
	m := offsetMap{idx: make(map[string]int32)}
	end := c.end
	for i := c.dirtyFrom; i < c.end; i++ {
		if len(m.offs) >= maxOffsetMapKeys {
			end = i
			break
		}
		s := c.segs[i]
		n, err := e.eachBatch(s, func(h *record.Header, batch []byte) error {
			if h.Control() || ab.batchAborted(h) {
				return nil
			}
			return record.Iterate(batch, func(h *record.Header, r *record.Record) error {
				if r.Key != nil {
					m.put(r.Key, h.BaseOffset+int64(r.OffsetDelta))
				}
				return nil
			})
		})
		st.BytesRead += n
		if err != nil {
			return st, err
		}
	}
	endOffset := c.segs[end].base

	// Recovery treats a walked segment that ends before its successor's
	// base, at or past the recovery point, as a torn write and cuts the log
	// there; a cleaned segment legitimately ends early. Every segment below
	// endOffset is durable (cleanableRange), so checkpointing the recovery
	// point now makes Open trust them (and never take a gap for a tear).
	if err := e.writeRecoveryCheckpoint(); err != nil {
		return st, e.ioFailure("writing "+recoveryPointFile, err)
	}

	// Rewrite [0, end), in groups of consecutive segments that fit one.
	w := segmentRewriter{e: e, l: l, cfg: cfg, m: &m, now: now, ab: ab}
	for _, g := range groupSegments(c.segs[:end+1], cfg) {
		if e.stopping() || e.Offline() != nil {
			return st, errCleanAborted
		}
		changed, err := w.rewrite(g, &st)
		if err != nil {
			return st, err
		}
		if changed {
			st.SegmentsRewritten += len(g)
		}
	}
	e.cl.cleanedBytes.Add(st.BytesRead)
	st.CleanedTo = endOffset
	if err := e.setCleanPoint(l, endOffset); err != nil {
		return st, e.ioFailure("writing "+cleanerCheckpointFile, err)
	}
	return st, nil
}

// eachBatch calls fn for every batch of sealed segment s, reading it in
// chunks, and returns the bytes read (throttled).
func (e *Engine) eachBatch(s *logSegment, fn func(h *record.Header, batch []byte) error) (int64, error) {
	size := s.readEnd()
	r := bufio.NewReaderSize(io.NewSectionReader(s.seg, 0, size), 1<<20)
	var hdr [record.HeaderSize]byte
	var buf []byte
	var pos int64
	for pos < size {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return pos, fmt.Errorf("reading %s at %d: %w", s.seg.Path(), pos, err)
		}
		h, err := record.ParseHeader(hdr[:])
		if err != nil {
			return pos, fmt.Errorf("%s at %d: %w", s.seg.Path(), pos, err)
		}
		n := h.Size()
		if int64(n) > size-pos {
			return pos, fmt.Errorf("%s at %d: batch of %d bytes past the segment end", s.seg.Path(), pos, n)
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		copy(buf, hdr[:])
		if _, err := io.ReadFull(r, buf[record.HeaderSize:]); err != nil {
			return pos, fmt.Errorf("reading %s at %d: %w", s.seg.Path(), pos, err)
		}
		if err := fn(&h, buf); err != nil {
			return pos, fmt.Errorf("%s at %d: %w", s.seg.Path(), pos, err)
		}
		pos += int64(n)
		if !e.throttle(int64(n)) {
			return pos, errCleanAborted
		}
	}
	return pos, nil
}

// throttle charges n bytes to the token bucket, sleeping while it is empty;
// false if the cleaner is stopping.
func (e *Engine) throttle(n int64) bool {
	c := &e.cl
	rate := float64(c.ioRate.Load())
	if rate <= 0 {
		return true
	}
	now := e.now() // the engine's clock (Options.Now)
	if c.lastRef.IsZero() {
		c.lastRef, c.tokens = now, rate/10
	}
	c.tokens = min(c.tokens+now.Sub(c.lastRef).Seconds()*rate, rate/10) // burst: 100 ms of I/O
	c.lastRef = now
	c.tokens -= float64(n)
	if c.tokens >= 0 {
		return true
	}
	wait := time.Duration(-c.tokens / rate * float64(time.Second))
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.stop:
		return false
	case <-t.C:
		return true
	}
}

// segmentRewriter rewrites segments of one log for one pass.
type segmentRewriter struct {
	e   *Engine
	l   *Log
	cfg *LogConfig
	m   *offsetMap
	now int64
	ab  abortedSet // aborted transactions of the log (txnindex.go)

	out  []byte       // encoded output of the current batch
	recs []keptRecord // records kept from the current batch
	raw  []byte       // uncompressed record bytes being built
}

// keptRecord is one record that survives, with copies of its bytes.
type keptRecord struct {
	attrs    int8
	tsDelta  int64
	offDelta int32
	key      []byte
	value    []byte
	headers  []record.RecordHeader
}

// groupSegments splits segs[:len(segs)-1] (segs' last element is the
// first segment not cleaned: its base ends the range) into runs of
// consecutive segments to rewrite as one, as Kafka's cleaner does: a run's
// segments together hold at most segment.bytes (before cleaning) and
// offsets that fit the index's 31-bit relative offsets.
func groupSegments(segs []*logSegment, cfg *LogConfig) [][]*logSegment {
	var groups [][]*logSegment
	for i := 0; i < len(segs)-1; {
		j := i + 1
		size := segs[i].end.Load()
		for j < len(segs)-1 {
			next := segs[j].end.Load()
			if size+next > cfg.SegmentBytes || size+next > math.MaxInt32 ||
				segs[j+1].base-1-segs[i].base > math.MaxInt32 {
				break
			}
			size += next
			j++
		}
		groups = append(groups, segs[i:j])
		i = j
	}
	return groups
}

// rewrite writes the segments of group, without the records that go, as one
// segment (named after the first) in .cleaned files and swaps it in. A group
// of one segment from which nothing would go is left alone (false).
func (w *segmentRewriter) rewrite(group []*logSegment, st *CleanStats) (bool, error) {
	e, l := w.e, w.l
	drop := make([]bool, len(group)) // tombstones of segment i may go
	l.idxMu.RLock()
	for i, s := range group {
		drop[i] = segmentLargestTimestamp(s) < w.now-w.cfg.DeleteRetentionMs
	}
	l.idxMu.RUnlock()
	if len(group) == 1 {
		removes := false
		n, err := e.eachBatch(group[0], func(h *record.Header, batch []byte) error {
			if h.Control() {
				return nil
			}
			if w.ab.batchAborted(h) {
				removes = true
				return errStopIter
			}
			return record.Iterate(batch, func(h *record.Header, r *record.Record) error {
				if !w.keep(h, r, drop[0]) {
					removes = true
					return errStopIter
				}
				return nil
			})
		})
		st.BytesRead += n
		if err != nil && !errors.Is(err, errStopIter) {
			return false, err
		}
		if !removes {
			return false, nil
		}
	}
	first := group[0]
	if first.deleting.Load() {
		return false, errCleanAborted
	}
	ns := newLogSegment(l.dir, first.base, e.logger)
	clog, coff, ctim := ns.logPath+cleanedSuffix, ns.offPath+cleanedSuffix, ns.timPath+cleanedSuffix
	cleanup := func() {
		for _, p := range []string{clog, coff, ctim, ns.txnPath + cleanedSuffix} {
			e.fs.Remove(p)
		}
	}
	f, err := e.fs.OpenFile(clog, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return false, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var pos int64
	var iopts index.Options // heap-backed on a file system other than the OS's (logSegment.indexOptions)
	if e.fs != vfs.OS {
		iopts.FS = e.fs
	}
	off, err := index.OpenOffsetWith(coff, first.base, w.cfg.offsetIndexBytes(), iopts)
	if err != nil {
		f.Close()
		cleanup()
		return false, err
	}
	tim, err := index.OpenTimeWith(ctim, first.base, w.cfg.timeIndexBytes(), iopts)
	if err != nil {
		off.Close()
		f.Close()
		cleanup()
		return false, err
	}
	ns.off, ns.tim = off, tim
	fail := func(err error) (bool, error) {
		ns.closeIndexes()
		f.Close()
		cleanup()
		return false, err
	}
	for i, s := range group {
		n, err := e.eachBatch(s, func(h *record.Header, batch []byte) error {
			out, removed, err := w.filterBatch(h, batch, drop[i])
			if err != nil {
				return err
			}
			st.RecordsRemoved += removed
			if len(out) == 0 {
				return nil
			}
			if _, err := bw.Write(out); err != nil {
				return err
			}
			oh, _ := record.ParseHeader(out)
			w.l.indexBatchCfg(ns, w.cfg, oh.MaxTimestamp, oh.LastOffset(), pos, int64(len(out)))
			pos += int64(len(out))
			st.BytesWritten += int64(len(out))
			if !e.throttle(int64(len(out))) {
				return errCleanAborted
			}
			return nil
		})
		st.BytesRead += n
		if err != nil {
			return fail(err)
		}
	}
	if ns.maxTs > -1 {
		if err := ns.tim.Append(ns.maxTs, ns.maxTsOff); err != nil && !errors.Is(err, index.ErrFull) {
			return fail(err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	syncErr := e.syncFile(clog, f.Sync)
	if cerr := f.Close(); syncErr == nil {
		syncErr = cerr
	}
	if syncErr == nil {
		syncErr = e.syncFile(coff, ns.off.Sync)
	}
	if syncErr == nil {
		syncErr = e.syncFile(ctim, ns.tim.Sync)
	}
	if err := errors.Join(syncErr, ns.closeIndexes()); err != nil {
		cleanup()
		return false, err
	}
	if err := w.carryTxnIndex(group, ns); err != nil { // txnindex.go
		cleanup()
		return false, err
	}
	if err := w.hook("cleaned"); err != nil {
		return false, err
	}
	return true, w.swap(group, ns, pos)
}

var errStopIter = errors.New("stop")

func (w *segmentRewriter) hook(step string) error {
	if h := w.e.cl.hook; h != nil {
		if err := h(step); err != nil {
			return fmt.Errorf("%w: %s: %v", errCleanAborted, step, err)
		}
	}
	return nil
}

// keep decides whether record r of batch h survives.
func (w *segmentRewriter) keep(h *record.Header, r *record.Record, dropTombstones bool) bool {
	if r.Key == nil {
		return false
	}
	off := h.BaseOffset + int64(r.OffsetDelta)
	if latest, ok := w.m.get(r.Key); ok && latest > off {
		return false
	}
	if r.Value == nil && dropTombstones {
		return false
	}
	return true
}

// filterBatch returns batch without the records that go: batch itself when
// all stay, nil when none does, else a re-encoded batch (see the file
// comment). removed counts the records that went.
func (w *segmentRewriter) filterBatch(h *record.Header, batch []byte, dropTombstones bool) (out []byte, removed int64, err error) {
	if h.Control() {
		return batch, 0, nil
	}
	if w.ab.batchAborted(h) {
		return nil, int64(h.NumRecords), nil
	}
	w.recs = w.recs[:0]
	total := 0
	err = record.Iterate(batch, func(h *record.Header, r *record.Record) error {
		total++
		if !w.keep(h, r, dropTombstones) {
			return nil
		}
		kr := keptRecord{attrs: r.Attributes, tsDelta: r.TimestampDelta, offDelta: r.OffsetDelta,
			key: r.Key, value: r.Value}
		if len(r.Headers) > 0 {
			kr.headers = append([]record.RecordHeader(nil), r.Headers...)
		}
		w.recs = append(w.recs, kr)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	removed = int64(total - len(w.recs))
	switch {
	case removed == 0:
		return batch, 0, nil
	case len(w.recs) == 0:
		return nil, removed, nil
	}
	out, err = w.encode(h, batch)
	return out, removed, err
}

// encode builds a batch from the header of the original and the kept records.
func (w *segmentRewriter) encode(h *record.Header, orig []byte) ([]byte, error) {
	raw := w.raw[:0]
	maxTs := int64(math.MinInt64)
	for i := range w.recs {
		r := &w.recs[i]
		maxTs = max(maxTs, h.BaseTimestamp+r.tsDelta)
		body := 1 + record.VarintLen(r.tsDelta) + record.VarintLen(int64(r.offDelta)) +
			record.NullableBytesLen(r.key) + record.NullableBytesLen(r.value) + record.VarintLen(int64(len(r.headers)))
		for _, hd := range r.headers {
			body += record.VarintLen(int64(len(hd.Key))) + len(hd.Key) + record.NullableBytesLen(hd.Value)
		}
		raw = binary.AppendVarint(raw, int64(body))
		raw = append(raw, byte(r.attrs))
		raw = binary.AppendVarint(raw, r.tsDelta)
		raw = binary.AppendVarint(raw, int64(r.offDelta))
		raw = record.AppendNullableBytes(raw, r.key)
		raw = record.AppendNullableBytes(raw, r.value)
		raw = binary.AppendVarint(raw, int64(len(r.headers)))
		for _, hd := range r.headers {
			raw = binary.AppendVarint(raw, int64(len(hd.Key)))
			raw = append(raw, hd.Key...)
			raw = record.AppendNullableBytes(raw, hd.Value)
		}
	}
	w.raw = raw
	if h.LogAppendTime() {
		maxTs = h.MaxTimestamp
	}
	out := append(w.out[:0], orig[:record.HeaderSize]...)
	var err error
	if out, err = record.Compress(h.Codec(), out, raw); err != nil {
		return nil, err
	}
	if len(out)-record.LogOverhead > math.MaxInt32 {
		return nil, fmt.Errorf("cleaned batch at %d too large", h.BaseOffset)
	}
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-record.LogOverhead)) // batchLength
	binary.BigEndian.PutUint64(out[35:], uint64(maxTs))                      // maxTimestamp
	binary.BigEndian.PutUint32(out[57:], uint32(len(w.recs)))                // recordCount
	binary.BigEndian.PutUint32(out[record.OffsetCRC:], crc32.Checksum(out[record.OffsetAttrs:], castagnoliTable))
	w.out = out
	return out, nil
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// swap installs ns (whose files are at <final>.cleaned, closed) in place of
// the segments of group: see "Crash safety" in the file comment.
func (w *segmentRewriter) swap(group []*logSegment, ns *logSegment, size int64) error {
	e, l := w.e, w.l
	indexes := []string{ns.offPath, ns.timPath} // renamed before the .log, promoted before it
	if len(ns.aborted) > 0 {
		indexes = append(indexes, ns.txnPath) // carried aborted transactions (txnindex.go)
	}
	finals := append(slices.Clone(indexes), ns.logPath)
	drop := func() {
		for _, p := range finals {
			e.fs.Remove(p + cleanedSuffix)
			e.fs.Remove(p + swapSuffix)
		}
	}
	syncDir := func() error { return e.syncFile(l.dir, func() error { return e.fs.SyncDir(l.dir) }) }
	// The indexes' .swap files are durable before the .log's exists: a
	// .log.swap after a crash means the whole set is there, whatever
	// order the file system kept unsynced renames in (promoteSwapFiles).
	for _, p := range indexes {
		if err := e.fs.Rename(p+cleanedSuffix, p+swapSuffix); err != nil {
			drop()
			return err
		}
	}
	if err := syncDir(); err != nil {
		drop()
		return e.ioFailure("syncing "+l.dir, err)
	}
	l.mu.Lock()
	segs := *l.segs.Load()
	i := floorSegment(segs, group[0].base)
	intact := !l.closed && i >= 0 && i+len(group) < len(segs) // never the active segment
	for k := 0; intact && k < len(group); k++ {
		intact = segs[i+k] == group[k] && !group[k].deleting.Load()
	}
	if !intact {
		l.mu.Unlock()
		drop()
		return errCleanAborted
	}
	if j := e.jnl; j != nil {
		if err := j.barrier(l, true); err != nil { // journal.go: no replay into the cleaned files
			l.mu.Unlock()
			drop()
			return e.ioFailure("journal barrier for "+l.String(), err)
		}
	}
	if err := e.fs.Rename(ns.logPath+cleanedSuffix, ns.logPath+swapSuffix); err != nil {
		l.mu.Unlock()
		drop()
		return err
	}
	if err := syncDir(); err != nil {
		l.mu.Unlock()
		return e.ioFailure("syncing "+l.dir, err)
	}
	// Committed: from here a crash completes the swap on Open.
	if err := w.hook("swap"); err != nil {
		l.mu.Unlock()
		return err
	}
	for _, s := range group {
		s.markDeleted(&l.idxMu, true)
	}
	if err := w.hook("deleted"); err != nil {
		l.mu.Unlock()
		return err
	}
	// The indexes reach their final names durably before the .log leaves
	// its .swap name (promoteSwapFiles's order).
	for k, p := range finals {
		if k == len(indexes) {
			if err := syncDir(); err != nil {
				l.mu.Unlock()
				return e.ioFailure("syncing "+l.dir, err)
			}
		}
		if err := e.fs.Rename(p+swapSuffix, p); err != nil {
			l.mu.Unlock()
			return e.ioFailure("renaming "+p+swapSuffix, err)
		}
	}
	if err := syncDir(); err != nil {
		l.mu.Unlock()
		return e.ioFailure("syncing "+l.dir, err)
	}
	seg, grp, err := e.io.open(ns.logPath, false, false) // sealed: a plain read-only segment
	if err == nil {
		ns.seg, ns.io, ns.grp = seg, e.io, grp
		if _, err = ns.openSealedIndexes(); err != nil {
			ns.closeFiles()
		}
	}
	if err != nil {
		l.mu.Unlock()
		return e.ioFailure("opening cleaned "+ns.logPath, err)
	}
	ns.sealed = true
	ns.end.Store(size)
	if ns.tim != nil {
		if ts, off, ok := ns.tim.Last(); ok {
			ns.maxTs, ns.maxTsOff = ts, off
		}
	}
	next := make([]*logSegment, 0, len(segs)-len(group)+1)
	next = append(append(append(next, segs[:i]...), ns), segs[i+len(group):]...)
	l.segs.Store(&next)
	l.mu.Unlock()
	e.delayRelease(group, e.nowMs()+w.cfg.FileDeleteDelayMs)
	return nil
}

// indexBatchCfg is indexBatch with an explicit config (the rewriter's).
func (l *Log) indexBatchCfg(s *logSegment, cfg *LogConfig, maxTs, lastOffset, pos, size int64) {
	if maxTs > s.maxTs {
		s.maxTs, s.maxTsOff = maxTs, lastOffset
	}
	if s.bytesSince >= int64(cfg.IndexIntervalBytes) && pos <= math.MaxInt32 {
		if s.off.Entries() < cfg.maxOffsetEntries() {
			_ = s.off.Append(lastOffset, pos)
		}
		if s.maxTs > -1 && s.tim.Entries() < cfg.maxTimeEntries() {
			_ = s.tim.Append(s.maxTs, s.maxTsOff)
		}
		s.bytesSince = 0
	}
	s.bytesSince += size
}

// promoteSwapFiles completes interrupted swaps in a partition directory.
// A segment's swap is committed once its <base>.log.swap exists (swap
// makes the index files' .swap names durable first): then every .swap
// file of that base is renamed to its final name (replacing the old file),
// the indexes first and, after a directory sync, the .log, and the files
// of old segments the promoted .log subsumed (a base inside its offset
// range: a group swap interrupted before they were renamed to .deleted)
// are removed. Index .swap files without a .log.swap belong to a swap that
// never committed (the old files are intact) and are removed. Called by
// Open before leftovers are removed and segments listed. Everything goes
// through fsys, the engine's file system.
func promoteSwapFiles(fsys vfs.FS, dir string) error {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	swaps := map[int64][]string{} // base -> final names of its .swap files, the .log last
	committed, seen := map[int64]bool{}, map[int64]bool{}
	var bases []int64
	for _, ent := range ents {
		name := ent.Name()
		if ent.IsDir() || filepath.Ext(name) != swapSuffix {
			continue
		}
		final := name[:len(name)-len(swapSuffix)]
		base, isLog := int64(-1), false
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if b, ok := parseSegmentFileName(final, suf); ok {
				base, isLog = b, suf == logSuffix
				break
			}
		}
		if base < 0 { // not a segment's file: nothing to wait for
			if err := fsys.Rename(filepath.Join(dir, name), filepath.Join(dir, final)); err != nil {
				return err
			}
			continue
		}
		if !seen[base] {
			seen[base] = true
			bases = append(bases, base)
		}
		if isLog {
			committed[base] = true
			continue
		}
		swaps[base] = append(swaps[base], final)
	}
	if len(bases) == 0 {
		return nil
	}
	var promoted []string // final .log paths
	for _, base := range bases {
		if !committed[base] {
			for _, final := range swaps[base] {
				if err := fsys.Remove(filepath.Join(dir, final+swapSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			continue
		}
		for _, final := range swaps[base] {
			if err := fsys.Rename(filepath.Join(dir, final+swapSuffix), filepath.Join(dir, final)); err != nil {
				return err
			}
		}
		if len(swaps[base]) > 0 {
			if err := fsys.SyncDir(dir); err != nil {
				return err
			}
		}
		log := segmentFileName(dir, base, logSuffix)
		if err := fsys.Rename(log+swapSuffix, log); err != nil {
			return err
		}
		promoted = append(promoted, log)
	}
	for _, path := range promoted {
		base, ok := parseSegmentFileName(filepath.Base(path), logSuffix)
		if !ok {
			continue
		}
		last, err := lastOffsetOf(fsys, path)
		if err != nil {
			return err
		}
		for _, ent := range ents {
			b, ok := parseSegmentFileName(ent.Name(), logSuffix)
			if !ok || b <= base || b > last {
				continue
			}
			for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
				if err := fsys.Remove(segmentFileName(dir, b, suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
		}
	}
	return fsys.SyncDir(dir)
}

// lastOffsetOf walks the batch headers of a complete (synced) segment file
// and returns the last offset it holds, -1 if none.
func lastOffsetOf(fsys vfs.FS, path string) (int64, error) {
	f, err := vfs.Open(fsys, path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	last := int64(-1)
	var hdr [record.HeaderSize]byte
	for pos := int64(0); pos+record.HeaderSize <= fi.Size(); {
		if _, err := f.ReadAt(hdr[:], pos); err != nil {
			return 0, err
		}
		h, err := record.ParseHeader(hdr[:])
		if err != nil || h.Size() < record.HeaderSize {
			break
		}
		last = max(last, h.LastOffset())
		pos += int64(h.Size())
	}
	return last, nil
}

// validateKeys refuses batches holding a record without a key (compacted
// topics): ErrInvalidRecord, as Kafka answers INVALID_RECORD.
func validateKeys(batches []byte) error {
	for rest := batches; len(rest) > 0; {
		b, r, h, err := record.Next(rest)
		if err != nil {
			return classifyRecordErr(err, 0)
		}
		rest = r
		if h.Control() {
			continue
		}
		err = record.Iterate(b, func(h *record.Header, r *record.Record) error {
			if r.Key == nil {
				return fmt.Errorf("%w: compacted topic: record at offset delta %d has no key", ErrInvalidRecord, r.OffsetDelta)
			}
			return nil
		})
		if err != nil {
			if errors.Is(err, ErrInvalidRecord) {
				return err
			}
			return classifyRecordErr(err, 0)
		}
	}
	return nil
}
