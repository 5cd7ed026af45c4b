// Package clocks owns the wall clock. Everything else in the module takes
// time as an input (state machines take now) or a Clock (shells and their
// constructors); this package holds the one real Clock, Wall, which a
// constructor uses when it is given none (Or), and Since, the monotonic
// elapsed time a per-record measurement reads. Outside cmd/strata and
// tests no other package calls time.Now, time.Since or time.Until
// (internal/layers TestWallClockReadsOnlyShrink).
//
// Files: clocks.go (all of it).
package clocks

import "time"

// Clock reads the time. It is a plain func() time.Time, so a constructor
// field of this type takes time.Now, Wall, a test's manual clock or a
// method value alike.
type Clock = func() time.Time

// Wall is the wall clock (time.Now, with its monotonic reading): the one
// real Clock. Socket deadlines and anything compared with another
// process's time must use it, whatever clock a test injects elsewhere.
func Wall() time.Time { return time.Now() }

// Or returns c, or Wall when c is nil: a constructor's default clock.
func Or(c Clock) Clock {
	if c == nil {
		return Wall
	}
	return c
}

// Since is the time elapsed since t by the monotonic clock when t has a
// monotonic reading (time.Since): a measurement's clock, read per record,
// where Wall().Sub(t) would read both clocks.
func Since(t time.Time) time.Duration { return time.Since(t) }
