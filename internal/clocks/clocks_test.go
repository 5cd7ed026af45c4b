package clocks

import (
	"testing"
	"time"
)

func TestOrKeepsAGivenClock(t *testing.T) {
	fixed := time.Unix(1_700_000_000, 0)
	c := Or(func() time.Time { return fixed })
	if got := c(); !got.Equal(fixed) {
		t.Fatalf("Or(manual)() = %v, want %v", got, fixed)
	}
}

func TestOrDefaultsToWall(t *testing.T) {
	before := time.Now()
	got := Or(nil)()
	after := time.Now()
	if got.Before(before) || got.After(after) {
		t.Fatalf("Or(nil)() = %v, not between %v and %v", got, before, after)
	}
	// Wall keeps the monotonic reading, so Since measures by it.
	if got == got.Round(0) { // Round(0) strips the monotonic reading
		t.Fatalf("Wall() has no monotonic reading: %v", got)
	}
}

func TestSinceIsElapsedTime(t *testing.T) {
	start := Wall()
	later := start.Add(-time.Hour) // an hour earlier by both readings
	if d := Since(later); d < time.Hour {
		t.Fatalf("Since(an hour ago) = %v, want at least 1h", d)
	}
	if d := Since(start); d < 0 {
		t.Fatalf("Since(start) = %v, want >= 0", d)
	}
}
