package txnhost

import (
	"sync"
	"time"
)

// fakeClock is a Clock whose timers fire at once (After) and whose
// tickers never tick unless a test sends on them.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Tick(time.Duration) (<-chan time.Time, func()) {
	return make(chan time.Time), func() {}
}

// After advances the clock by d and fires at once.
func (c *fakeClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.sleeps = append(c.sleeps, d)
	now := c.now
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- now
	return ch, func() bool { return false }
}
