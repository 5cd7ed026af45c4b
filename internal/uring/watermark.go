package uring

import (
	"errors"
	"fmt"
	"math"
)

// ErrOverlap is returned by Watermark.Complete for a range that overlaps one
// already completed: a write reported twice, or ranges not issued back to
// back.
var ErrOverlap = errors.New("uring: completed ranges overlap")

// Watermark tracks the end of the contiguous completed prefix of byte ranges
// that were issued back to back from a start position but complete in any
// order — the "written" watermark of an appender whose writes finish out of
// order through a ring:
//
//	issued:    [0,64K) [64K,128K) [128K,192K) [192K,256K)
//	completed:         [64K,128K)             [192K,256K)   Value() == 0
//	completed: [0,64K)                                       Value() == 128K
//	completed:                    [128K,192K)                Value() == 256K
//
// Completed ranges above the watermark are kept as merged spans, so memory is
// bounded by the number of gaps (at most the number of writes in flight) and
// Complete does not allocate once that many spans have been seen. A Watermark
// is not safe for concurrent use; Done callbacks of one Ring never run
// concurrently, so a Watermark updated only from them needs no lock.
type Watermark struct {
	end   int64
	spans []span // completed, above end, sorted, disjoint, not adjacent
}

type span struct{ off, end int64 }

// Reset sets the watermark to start and forgets completed ranges.
func (w *Watermark) Reset(start int64) {
	w.end = start
	w.spans = w.spans[:0]
}

// Value is the end of the contiguous completed prefix.
func (w *Watermark) Value() int64 { return w.end }

// Pending is the number of completed spans waiting for a gap below them.
func (w *Watermark) Pending() int { return len(w.spans) }

// Complete records that [off, off+n) completed and returns the new Value. A
// range below Value or overlapping a completed one fails with ErrOverlap and
// changes nothing.
func (w *Watermark) Complete(off, n int64) (int64, error) {
	if off < 0 || n < 0 || n > math.MaxInt64-off {
		return w.end, fmt.Errorf("uring: watermark range [%d, +%d) is invalid", off, n)
	}
	if n == 0 {
		return w.end, nil
	}
	end := off + n
	if off < w.end {
		return w.end, fmt.Errorf("%w: [%d, %d) is below the watermark %d", ErrOverlap, off, end, w.end)
	}
	// i is the first span starting after off.
	i := 0
	for i < len(w.spans) && w.spans[i].off <= off {
		i++
	}
	if i > 0 && w.spans[i-1].end > off {
		return w.end, fmt.Errorf("%w: [%d, %d) overlaps [%d, %d)", ErrOverlap, off, end, w.spans[i-1].off, w.spans[i-1].end)
	}
	if i < len(w.spans) && w.spans[i].off < end {
		return w.end, fmt.Errorf("%w: [%d, %d) overlaps [%d, %d)", ErrOverlap, off, end, w.spans[i].off, w.spans[i].end)
	}
	if off == w.end {
		// Advance, then absorb the first span if it now touches.
		w.end = end
		if len(w.spans) > 0 && w.spans[0].off == w.end {
			w.end = w.spans[0].end
			n := copy(w.spans, w.spans[1:])
			w.spans = w.spans[:n]
		}
		return w.end, nil
	}
	joinPrev := i > 0 && w.spans[i-1].end == off
	joinNext := i < len(w.spans) && w.spans[i].off == end
	switch {
	case joinPrev && joinNext:
		w.spans[i-1].end = w.spans[i].end
		w.spans = append(w.spans[:i], w.spans[i+1:]...)
	case joinPrev:
		w.spans[i-1].end = end
	case joinNext:
		w.spans[i].off = off
	default:
		w.spans = append(w.spans, span{})
		copy(w.spans[i+1:], w.spans[i:])
		w.spans[i] = span{off: off, end: end}
	}
	return w.end, nil
}
