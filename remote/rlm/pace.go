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
	rate int64 // 0: chargeAt only
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
	return p.chargeAt(now, n, p.rate)
}

// chargeAt is charge at the given rate (> 0) instead of p's: the copy
// pacer's rate changes with the backlog (copySpreadRate).
func (p *pacer) chargeAt(now time.Time, n, rate int64) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(time.Duration(float64(n) / float64(rate) * float64(time.Second)))
	return p.next.Sub(now)
}

// minSpreadRate is the slowest pace copySpreadRate sets: a backlog of a
// few small segments is copied within a second or two, not over the
// whole spread.
const minSpreadRate = 16 << 20

// lagRefresh is how often at most a copy's start recomputes the backlog
// (Manager.Lag) the spread's pace is set by; between, the backlog is the
// last one less the bytes read since.
const lagRefresh = time.Second

// copySpreadRate is the copy pace remote.log.manager.copy.spread.ms
// sets for a backlog of that many bytes: the backlog over the spread, so
// that a burst of rolled segments (every partition of a keyed topic
// rolls within seconds of the others) is read, hashed and sent at a
// steady rate over about that long instead of at the device's full
// speed beside the produce path; at least minSpreadRate. 0 when spread
// is 0 (off).
func copySpreadRate(backlog int64, spread time.Duration) int64 {
	if spread <= 0 {
		return 0
	}
	return max(int64(float64(backlog)/spread.Seconds()), minSpreadRate)
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
