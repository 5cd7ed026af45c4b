package server

import "time"

// logLimiter lets at most burst log lines through per window and counts
// the rest, so a client sending bad frames in a loop costs one line per
// frame only until the burst is spent (Kafka logs each; a loop of them
// would flood the log). A pure state machine: the caller passes the time.
// Not safe for concurrent use (the caller holds a lock).
type logLimiter struct {
	window     time.Duration
	burst      int
	start      time.Time // the current window's start
	n          int       // lines let through in it
	suppressed int       // lines held back since the last one let through
}

// allow reports whether a line may be logged at now, and how many were
// held back before it (to say so in that line).
func (l *logLimiter) allow(now time.Time) (ok bool, suppressed int) {
	if now.Sub(l.start) >= l.window || now.Before(l.start) {
		l.start, l.n = now, 0
	}
	if l.n >= l.burst {
		l.suppressed++
		return false, 0
	}
	l.n++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}
