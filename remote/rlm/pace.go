package rlm

import (
	"math"
	"sync"
	"time"
)

// pacer spreads bytes over time at rate bytes a second, the throttles
// remote.log.manager.copy.max.bytes.per.second and
// remote.log.manager.fetch.max.bytes.per.second: each byte counted takes
// 1/rate of a second from the later of the previous deadline and now (a
// token bucket that holds no burst: bytes not used in an idle second are
// not saved for the next). Time is an input, the manager's clock. A nil
// pacer (rate 0 or math.MaxInt64, Kafka's default) never waits. Safe for
// concurrent use.
type pacer struct {
	rate int64
	mu   sync.Mutex
	next time.Time // when the bytes counted so far fit the rate
}

func newPacer(rate int64) *pacer {
	if rate <= 0 || rate == math.MaxInt64 {
		return nil
	}
	return &pacer{rate: rate}
}

// charge counts n bytes at now and returns how long from now until the
// bytes counted so far, these included, fit the rate.
func (p *pacer) charge(now time.Time, n int64) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(time.Duration(float64(n) / float64(p.rate) * float64(time.Second)))
	return p.next.Sub(now)
}

// delay is how long from now until the bytes counted so far fit the
// rate (0: the next may go at once).
func (p *pacer) delay(now time.Time) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.next.Sub(now), 0)
}
