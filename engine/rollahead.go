package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
)

// Rolling ahead (Options.RollAhead, log.roll.ahead.bytes): a roll makes the
// next segment's files and seals the old one (indexes trimmed, unmapped
// and reopened, the tail drained, a producer snapshot written): ~3.5 ms at
// the median on this project's test machine, ~1.9 ms of it CPU. Kafka
// rolls inside the append that does not fit, and so did Strata: under
// keyed traffic every partition fills at the same pace, and the one
// produce request carrying a batch for each of 96 partitions that all
// roll waited ~340 ms (docs/performance.md, "Session 33").
//
// With RollAhead, an append that leaves its active segment with less than
// the margin free (the smaller of RollAhead and an eighth of
// segment.bytes, when that is at least minRollAheadMargin) queues the
// partition for the engine's roller goroutine, which rolls it under
// Log.mu like any other roll (DeleteRecords' or a config change's),
// outside every produce request: an append to that partition meanwhile
// waits for one roll, not a request for all of them. The roller takes
// its queue in random order: one walking the partitions in the order a
// request appends to them would hold each just as the request reaches
// it. A partition whose segment fills before the roller reaches it rolls
// in its append as before, and the roller then finds it rolled and skips
// it. Segments end up to the margin short of segment.bytes, as Kafka's
// segments rolled by segment.ms or a full index are short of it.

// roller is the engine's roll-ahead goroutine's state.
type roller struct {
	margin int64 // Options.RollAhead (0: off)
	mu     sync.Mutex
	queue  []*Log
	wake   chan struct{} // cap 1
	stop   chan struct{}
	done   chan struct{}
}

// minRollAheadMargin: a log whose margin would be smaller (segments under
// 512 KiB, or a smaller RollAhead) rolls only in its appends, exactly
// where Kafka would: its rolls are cheap next to the segment's appends.
const minRollAheadMargin = 64 << 10

// due reports whether s, the active segment of a log with cfg, holds
// bytes and has less than the margin (the smaller of Options.RollAhead and
// an eighth of segment.bytes, when at least minRollAheadMargin) free.
func (r *roller) due(s *logSegment, cfg *LogConfig) bool {
	m := min(r.margin, cfg.SegmentBytes/8)
	end := s.end.Load()
	return m >= minRollAheadMargin && end > 0 && end >= cfg.SegmentBytes-m
}

func (e *Engine) startRoller(margin int64) {
	r := &e.roller
	if margin <= 0 {
		return
	}
	r.margin = margin
	r.wake = make(chan struct{}, 1)
	r.stop = make(chan struct{})
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stop:
				return
			case <-r.wake:
			}
			r.mu.Lock()
			q := r.queue
			r.queue = nil
			r.mu.Unlock()
			rand.Shuffle(len(q), func(i, j int) { q[i], q[j] = q[j], q[i] })
			for _, l := range q {
				select {
				case <-r.stop:
					return
				default:
				}
				l.rollAhead()
			}
		}
	}()
}

// stopRoller stops the goroutine and waits for the roll in progress.
func (e *Engine) stopRoller() {
	r := &e.roller
	if r.stop == nil {
		return
	}
	close(r.stop)
	<-r.done
	r.stop = nil
}

// maybeRollAhead queues l for the roller when s, its active segment after
// an append, has less than the margin free. Caller holds l.mu.
func (l *Log) maybeRollAhead(s *logSegment, cfg *LogConfig) {
	r := &l.e.roller
	if l.rollQueued || !r.due(s, cfg) {
		return
	}
	l.rollQueued = true
	r.mu.Lock()
	r.queue = append(r.queue, l)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// rollAhead rolls l if its active segment still has less than the margin
// free (an append may have rolled it meanwhile). A failure is the same as
// an append's roll's: out of a resource, the next append tries again;
// any other takes the log directory offline.
func (l *Log) rollAhead() {
	l.mu.Lock()
	l.rollQueued = false
	if l.closed || l.e.Offline() != nil || l.active == nil {
		l.mu.Unlock()
		return
	}
	if !l.e.roller.due(l.active, l.config()) {
		l.mu.Unlock()
		return
	}
	err := l.roll()
	l.mu.Unlock()
	if err == nil {
		return
	}
	if errors.Is(err, errCreateSegment) {
		l.e.createFailure(fmt.Sprintf("rolling %s ahead", l), err)
		return
	}
	l.e.ioFailure(fmt.Sprintf("rolling %s ahead", l), err)
}
