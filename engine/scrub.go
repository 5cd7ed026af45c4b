package engine

// The scrubber: a throttled background check of every sealed segment's
// batch CRCs (log.scrub.bytes.per.second; docs/reliability.md, "The
// scrubber").
//
// Open's recovery checks only what follows the recovery point (and, with
// log.recovery.verify, everything once at start-up), and reads check the
// bytes recovery trusted as they send them (corrupt.go): a sealed segment
// nobody reads could rot for months unseen, and be found only when a late
// consumer or a new replica needs it. The scrubber walks the sealed
// segments of every hosted log, in (topic, partition) order and segment
// order, reading them through the segment's own read path
// (segment.Segment.VerifyRange: the same header and CRC checks as
// recovery) in chunks of at most scrubChunkBytes, at most
// Options.ScrubBytesPerSecond bytes a second on average (a token bucket
// refilled from the engine's clock, holding at most one second of bytes).
// Its place (log, segment, position) is kept between steps, so each step
// goes on where the last stopped (and, through scrubPositionFile, a
// restart goes on from the segment it was in); a pass ends after the last log's last
// sealed segment and the next starts from the first again, at least
// scrubPassGapMs (an hour) after the last one started, so a small data
// directory is not read over and over. The throttle's unit is bytes
// checked: a batch larger than the chunk the throttle can grant is
// checked when the bucket is full and borrowed ahead. The active
// segment is not scrubbed: its bytes were checked on the way in and, until
// it seals, recovery walks them after a crash.
//
// A batch that fails its checks is confirmed under Log.mu (the segment is
// still a sealed member of the log, the same bytes fail again), so a
// segment changed under the scrubber (a follower's truncation, the
// cleaner's swap, retention) is not taken for corruption. A confirmed bad
// batch marks the partition corrupt exactly as a read that meets it does
// (Log.markCorrupt: every later call fails with ErrLogCorrupt, which the
// server answers with KAFKA_STORAGE_ERROR for that partition only; one
// ERROR line; the log-corrupt marker, so every later Open verifies the
// whole log; nothing truncated), and is counted in ScrubStats.Corrupt.
//
// One goroutine owned by the Engine runs the steps (started by Open unless
// the scrubber is off, stopped by Close before any log closes); Close
// waits for the step in progress, which checks for the stop between
// chunks. Tests drive steps directly (scrubStep) with the time they
// choose.

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/segment"
)

const (
	// DefaultScrubBytesPerSecond is log.scrub.bytes.per.second's default:
	// 16 MiB/s, a 1 TiB data directory every ~18 hours.
	DefaultScrubBytesPerSecond = 16 << 20
	// scrubChunkBytes bounds one VerifyRange call (its read buffer).
	scrubChunkBytes = 1 << 20
	// scrubInterval is how often the scrubber's goroutine takes a step.
	scrubInterval = 200 * time.Millisecond
	// scrubPassGapMs is the least time from one pass's start to the
	// next's: a small data directory is not read again and again.
	scrubPassGapMs = int64(time.Hour / time.Millisecond)
	// scrubSaveMs is how often (engine clock) the scrubber's place is
	// written to scrubPositionFile; Close writes it too.
	scrubSaveMs = 60_000
)

// scrubPositionFile holds the scrubber's place across restarts: the
// partition and the base offset of the segment it was in, "v1 <topic>
// <partition> <base>" ("v1 - 0 0": a pass's start). Open resumes at the
// start of that segment (a position inside it might not be a batch
// boundary any more: the cleaner may have rewritten it), so a restart
// costs at most one segment of progress. A missing or unreadable file
// starts a pass from the first partition.
const scrubPositionFile = "scrub-position"

// ScrubStats counts the scrubber's work since Open (for metrics and
// admin output).
type ScrubStats struct {
	BytesPerSecond int64 // the throttle; 0: the scrubber is off
	BytesVerified  int64 // bytes of sealed segments whose batches passed their checks
	Passes         int64 // complete walks over every sealed segment of every log
	Corrupt        int64 // partitions the scrubber found corrupt (marked as corrupt.go does)
	ReadErrors     int64 // chunks skipped because reading them failed (the segment is retried next pass)
}

// scrubber is the Engine's scrubber state.
type scrubber struct {
	rate  int64 // bytes per second; 0: off
	stop  chan struct{}
	done  chan struct{}
	ticks <-chan time.Time // Options.scrubTicks (tests); nil: a ticker every scrubInterval

	mu     sync.Mutex // one step at a time; guards the fields below
	tokens float64    // bytes the throttle allows now (negative: a large batch borrowed ahead)
	lastMs int64      // engine clock of the last refill; -1 before the first step
	cur    scrubCursor
	// passStartMs is when the current pass started, -1 before the first;
	// passEnded: the pass is over and the next waits for scrubPassGapMs.
	passStartMs int64
	passEnded   bool
	savedMs     int64  // engine clock of the last write of scrubPositionFile
	saved       string // what it holds
	saveWarned  bool   // a failed write was logged (once until one succeeds)

	bytes, passes, corrupt, readErrs atomic.Int64
}

// scrubCursor is where the scrubber stands: the log (topic, part: the next
// log at or after this key), the segment (the first sealed segment whose
// base is >= base) and, when that segment is seg itself, the position pos
// (a batch boundary) and next, one past the last offset checked in it.
// Keys, not pointers, name the log: a log deleted or re-created is simply
// found or not at the next step.
type scrubCursor struct {
	topic string
	part  int32
	base  int64
	seg   *logSegment
	pos   int64
	next  int64
}

// startScrubber starts the scrubber's goroutine (nothing when off).
// Called by Open after the flusher started.
func (e *Engine) startScrubber(opts Options) {
	sc := &e.scrub
	sc.rate = max(opts.ScrubBytesPerSecond, 0)
	sc.lastMs, sc.passStartMs = -1, -1
	sc.cur.base = -1
	if sc.rate == 0 {
		return
	}
	e.loadScrubPosition()
	if sc.cur.topic != "" {
		e.logger.Info("scrubber: checking sealed segments' CRCs in the background, resuming its pass",
			"bytes_per_second", sc.rate, "log", fmt.Sprintf("%s-%d", sc.cur.topic, sc.cur.part), "segment_base", sc.cur.base)
	} else {
		e.logger.Info("scrubber: checking sealed segments' CRCs in the background", "bytes_per_second", sc.rate)
	}
	if opts.scrubManual {
		return
	}
	sc.stop = make(chan struct{})
	sc.done = make(chan struct{})
	sc.ticks = opts.scrubTicks
	var ticker *time.Ticker
	if sc.ticks == nil {
		ticker = time.NewTicker(scrubInterval)
		sc.ticks = ticker.C
	}
	go func() {
		defer close(sc.done)
		if ticker != nil {
			defer ticker.Stop()
		}
		for {
			select {
			case <-sc.stop:
				return
			case <-sc.ticks:
				e.scrubStep(e.now())
			}
		}
	}()
}

// stopScrubber stops the goroutine and waits for its step in progress.
// Called by Close before logs close. Idempotent.
func (e *Engine) stopScrubber() {
	sc := &e.scrub
	if sc.stop != nil {
		select {
		case <-sc.stop:
		default:
			close(sc.stop)
		}
		<-sc.done
	}
	if sc.rate > 0 && e.Offline() == nil {
		sc.mu.Lock()
		e.saveScrubPosition(e.nowMs(), true)
		sc.mu.Unlock()
	}
}

// loadScrubPosition sets the cursor from scrubPositionFile (see there).
func (e *Engine) loadScrubPosition() {
	data, err := readSmallFileFS(e.fs, filepath.Join(e.dir, scrubPositionFile))
	if err != nil {
		return
	}
	var topic string
	var part int32
	var base int64
	if _, err := fmt.Sscanf(string(data), "v1 %s %d %d", &topic, &part, &base); err != nil || part < 0 || base < 0 {
		e.logger.Warn("scrubber: ignoring its position file; the pass starts from the first partition",
			"path", filepath.Join(e.dir, scrubPositionFile), "err", err)
		return
	}
	sc := &e.scrub
	if topic != "-" {
		sc.cur = scrubCursor{topic: topic, part: part, base: base}
		sc.saved = string(data)
	}
}

// saveScrubPosition writes the cursor to scrubPositionFile when scrubSaveMs
// passed since the last write (or force) and it changed. Caller holds
// scrub.mu.
func (e *Engine) saveScrubPosition(nowMs int64, force bool) {
	sc := &e.scrub
	if !force && nowMs-sc.savedMs < scrubSaveMs && nowMs >= sc.savedMs {
		return
	}
	sc.savedMs = nowMs
	line := "v1 - 0 0\n"
	if sc.cur.topic != "" {
		line = fmt.Sprintf("v1 %s %d %d\n", sc.cur.topic, sc.cur.part, max(sc.cur.base, 0))
	}
	if line == sc.saved {
		return
	}
	if err := vfs.WriteFileAtomicFS(e.fs, filepath.Join(e.dir, scrubPositionFile), []byte(line)); err != nil {
		if !sc.saveWarned {
			sc.saveWarned = true
			e.logger.Warn("scrubber: writing its position failed; a restart would start the pass again", "err", err)
		}
		return
	}
	sc.saved, sc.saveWarned = line, false
}

// stopping reports whether Close asked the scrubber to stop.
func (sc *scrubber) stopping() bool {
	if sc.stop == nil {
		return false
	}
	select {
	case <-sc.stop:
		return true
	default:
		return false
	}
}

// ScrubStats returns the scrubber's counters.
func (e *Engine) ScrubStats() ScrubStats {
	sc := &e.scrub
	return ScrubStats{
		BytesPerSecond: sc.rate,
		BytesVerified:  sc.bytes.Load(),
		Passes:         sc.passes.Load(),
		Corrupt:        sc.corrupt.Load(),
		ReadErrors:     sc.readErrs.Load(),
	}
}

// scrubStep refills the throttle for the time since the last step (now is
// the engine's clock; a clock set backwards adds nothing) and verifies
// whole batches of sealed segments while it has bytes for them, going on
// from the cursor. It stops at the end of a pass (the next step starts the
// next one). Returns the bytes verified.
func (e *Engine) scrubStep(now time.Time) int64 {
	sc := &e.scrub
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.rate <= 0 || e.Offline() != nil {
		return 0
	}
	nowMs := now.UnixMilli()
	if sc.lastMs >= 0 && nowMs > sc.lastMs {
		sc.tokens += float64(sc.rate) * float64(nowMs-sc.lastMs) / 1000
	}
	if sc.lastMs < 0 || nowMs > sc.lastMs {
		sc.lastMs = nowMs
	}
	burst := float64(sc.rate) // at most one second of bytes saved up
	sc.tokens = min(sc.tokens, burst)
	// A batch larger than any chunk the throttle could grant is verified
	// once the tokens are at that maximum, and borrowed ahead.
	ceiling := min(burst, scrubChunkBytes)
	if sc.passEnded {
		if nowMs-sc.passStartMs < scrubPassGapMs && nowMs >= sc.passStartMs {
			return 0
		}
		sc.passEnded = false
	}
	if sc.passStartMs < 0 || sc.cur == (scrubCursor{base: -1}) {
		sc.passStartMs = nowMs
	}
	logs := e.sortedLogs()
	var total int64
	for sc.tokens >= 1 && !sc.stopping() {
		budget := min(sc.tokens, scrubChunkBytes)
		used, more := e.scrubChunk(logs, int64(budget), budget >= ceiling)
		sc.tokens -= float64(used)
		total += used
		if !more {
			break
		}
	}
	e.saveScrubPosition(nowMs, false)
	return total
}

// scrubChunk verifies up to budget bytes (whole batches; one larger batch
// if force) at the cursor and moves it. more is false when the step should
// end: the pass ended, or the next batch needs more tokens than budget.
func (e *Engine) scrubChunk(logs []*Log, budget int64, force bool) (used int64, more bool) {
	sc := &e.scrub
	l := scrubLog(logs, &sc.cur)
	if l == nil { // past the last log: the pass is over
		sc.passes.Add(1)
		sc.passEnded = true
		sc.cur = scrubCursor{base: -1}
		return 0, false
	}
	if l.topic != sc.cur.topic || l.part != sc.cur.part {
		sc.cur = scrubCursor{topic: l.topic, part: l.part, base: -1}
	}
	s := scrubSegment(l, sc.cur.base)
	if s == nil || l.Corruption() != nil {
		sc.cur = scrubCursor{topic: l.topic, part: l.part + 1, base: -1}
		return 0, true
	}
	if s != sc.cur.seg { // a new segment, or one the cleaner replaced
		sc.cur.base, sc.cur.seg, sc.cur.pos, sc.cur.next = s.base, s, 0, s.base
	}
	if !s.acquire() {
		sc.cur.base, sc.cur.seg = s.base+1, nil
		return 0, true
	}
	defer s.release()
	end := s.readEnd()
	pos := sc.cur.pos
	// A segment sealed by a roll whose tail the write-behind (O_DIRECT,
	// the journal's 128 KiB chunks) has not all written yet: its readable
	// end may cut a batch. Its bytes were checked on the way in; it is
	// scrubbed in a later pass.
	if pos >= end || end < s.end.Load() {
		sc.cur.base, sc.cur.seg = s.base+1, nil
		return 0, true
	}
	to := min(end, pos+budget)
	next := sc.cur.next
	validEnd, err := s.seg.VerifyRange(pos, to, func(b segment.BatchInfo) {
		if b.BaseOffset >= next {
			next = b.LastOffset + 1
		}
	})
	if err == nil && validEnd < to {
		// The batch at validEnd: running past the chunk (not bad), bigger
		// than the whole budget (verified alone when force), or bad.
		var big int64
		big, err = batchRunningPast(s, validEnd, to, end)
		switch {
		case err != nil:
		case big > 0 && validEnd > pos:
			to = validEnd // the next chunk starts with it
		case big > 0 && !force:
			return 0, false // wait for the tokens it needs
		case big > 0:
			to = validEnd + big
			validEnd, err = s.seg.VerifyRange(pos, to, func(b segment.BatchInfo) {
				if b.BaseOffset >= next {
					next = b.LastOffset + 1
				}
			})
		}
	}
	if err != nil {
		if !errors.Is(err, segment.ErrClosed) {
			sc.readErrs.Add(1)
			e.logger.Warn("scrubber: reading a sealed segment failed; skipped until the next pass",
				"log", l.String(), "segment", s.logPath, "pos", pos, "err", err)
		}
		sc.cur.base, sc.cur.seg = s.base+1, nil
		return 0, true
	}
	if validEnd < to {
		if first, bad := e.scrubConfirm(l, s, validEnd, to, end, next); bad {
			c, err := l.corruptionAt(s, validEnd, first, "batch fails its CRC or header checks (found by the scrubber)")
			if err == nil {
				_ = l.markCorrupt(c, false) // logs the one ERROR line
				if l.Corruption() == c {
					sc.corrupt.Add(1)
				}
			}
		}
		sc.bytes.Add(validEnd - pos)
		// Corrupt, or changed under the scrubber: the next log either way
		// (a changed segment is seen again next pass).
		sc.cur = scrubCursor{topic: l.topic, part: l.part + 1, base: -1}
		return validEnd - pos, true
	}
	n := to - pos
	sc.bytes.Add(n)
	sc.cur.pos, sc.cur.next = to, next
	// Reads need not check these bytes again (corrupt.go, checkChunk):
	// the checked mark moves over them when they continue it.
	for {
		cur := s.checked.Load()
		if pos > cur || to <= cur || s.checked.CompareAndSwap(cur, to) {
			break
		}
	}
	return n, true
}

// batchRunningPast reads the header of the batch at pos of s (the first
// one VerifyRange did not pass in [.., to)) and returns its size when it is
// a sane header of a batch that ends past to but within end: a batch the
// chunk cut, to verify in the next one. 0: the batch is bad where it is.
func batchRunningPast(s *logSegment, pos, to, end int64) (int64, error) {
	if end-pos < record.HeaderSize {
		return 0, nil
	}
	var hb [record.HeaderSize]byte
	if _, err := s.seg.ReadAt(hb[:], pos); err != nil {
		return 0, err
	}
	if !segment.SaneHeader(hb[:]) {
		return 0, nil
	}
	h, _ := record.ParseHeader(hb[:])
	size := int64(h.Size())
	if pos+size > to && pos+size <= end {
		return size, nil
	}
	return 0, nil
}

// scrubConfirm decides whether the batch at pos of s, which failed
// VerifyRange over [.., to), is corruption: under Log.mu (no truncation,
// roll or swap meanwhile) s must still be a sealed segment of l with the
// same readable end, and the bytes must fail again. first is the offset
// the damage starts at (one past the last good batch before it, or the
// bad batch's own base offset when its header still parses).
func (e *Engine) scrubConfirm(l *Log, s *logSegment, pos, to, end, next int64) (first int64, bad bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || s == l.active || s.readEnd() != end || end != s.end.Load() || !containsSegment(*l.segs.Load(), s) {
		return 0, false
	}
	validEnd, err := s.seg.VerifyRange(pos, to, nil)
	if err != nil || validEnd != pos {
		return 0, false
	}
	if big, err := batchRunningPast(s, pos, to, end); err != nil || big > 0 {
		return 0, false
	}
	first = next
	var hb [record.HeaderSize]byte
	if _, err := s.seg.ReadAt(hb[:], pos); err == nil {
		if h, err := record.ParseHeader(hb[:]); err == nil && h.BaseOffset >= next {
			first = h.BaseOffset
		}
	}
	return first, true
}

// sortedLogs returns the hosted logs in (topic, partition) order.
func (e *Engine) sortedLogs() []*Log {
	logs := e.allLogs()
	slices.SortFunc(logs, func(a, b *Log) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return cmp.Compare(a.part, b.part)
	})
	return logs
}

// scrubLog returns the first of logs (sorted) at or after the cursor's
// key, nil past the last.
func scrubLog(logs []*Log, c *scrubCursor) *Log {
	i := sort.Search(len(logs), func(i int) bool {
		l := logs[i]
		return l.topic > c.topic || l.topic == c.topic && l.part >= c.part
	})
	if i == len(logs) {
		return nil
	}
	return logs[i]
}

// scrubSegment returns the first sealed segment of l whose base is >=
// base, nil if none (the last segment is the active one).
func scrubSegment(l *Log, base int64) *logSegment {
	segs := *l.segs.Load()
	for i := 0; i < len(segs)-1; i++ {
		if segs[i].base >= base {
			return segs[i]
		}
	}
	return nil
}

// String describes the scrubber's state for logs.
func (s ScrubStats) String() string {
	if s.BytesPerSecond == 0 {
		return "scrubber off"
	}
	return fmt.Sprintf("scrubber at %d B/s: %d bytes verified, %d passes, %d corrupt, %d read errors",
		s.BytesPerSecond, s.BytesVerified, s.Passes, s.Corrupt, s.ReadErrors)
}
