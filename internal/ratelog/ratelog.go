// Package ratelog limits repeated log lines: a client that sends bad
// frames in a loop must not flood the broker's log.
package ratelog

import (
	"sync"
	"time"
)

// Limiter lets at most Burst log lines through per Window and counts the
// rest, so a client sending bad frames in a loop costs one line per frame
// only until the burst is spent. A pure state machine: the caller passes
// the time. Not safe for concurrent use (the caller holds a lock).
type Limiter struct {
	Window     time.Duration
	Burst      int
	start      time.Time // the current window's start
	n          int       // lines let through in it
	suppressed int       // lines held back since the last one let through
}

// Allow reports whether a line may be logged at now, and how many were
// held back before it (to say so in that line).
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed int) {
	if now.Sub(l.start) >= l.Window || now.Before(l.start) {
		l.start, l.n = now, 0
	}
	if l.n >= l.Burst {
		l.suppressed++
		return false, 0
	}
	l.n++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// Shared is a Limiter safe for concurrent use.
type Shared struct {
	mu sync.Mutex
	l  Limiter
}

// NewShared is a Shared letting burst lines through per window.
func NewShared(window time.Duration, burst int) *Shared {
	return &Shared{l: Limiter{Window: window, Burst: burst}}
}

// Allow is Limiter.Allow under the lock.
func (s *Shared) Allow(now time.Time) (ok bool, suppressed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l.Allow(now)
}
