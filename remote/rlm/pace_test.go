package rlm

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/remote/objstore"
)

// pacedClock is a manager clock that moves only when the manager sleeps:
// every wait the throttles decide is added to it, so the clock's advance
// is the time the copies or reads took.
type pacedClock struct{ ns atomic.Int64 }

func (c *pacedClock) now() time.Time { return time.Unix(0, c.ns.Load()) }

func (c *pacedClock) sleep(ctx context.Context, d time.Duration) error {
	c.ns.Add(int64(d))
	return ctx.Err()
}

// within reports whether got is want, give or take a nanosecond for each
// of n charges (each rounds its bytes' time down to a nanosecond).
func within(got, want time.Duration, n int) bool {
	return got >= want-time.Duration(n) && got <= want
}

// copyOnPacedClock copies a fixture's 12 produced batches' rolled
// segments (at least 3) in one pass under the options set and returns how
// long the pass took on a clock that moves only by the manager's waits.
func copyOnPacedClock(t *testing.T, set func(*Options)) (time.Duration, Stats) {
	t.Helper()
	f := newFixture(t, tieredConfig)
	f.produce(12)
	var c pacedClock
	c.ns.Store(t0 * int64(time.Millisecond))
	start := c.now()
	m := f.manager(f.store, func(o *Options) {
		set(o)
		o.Now, o.Sleep = c.now, c.sleep
	})
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	m.Close()
	f.eng.Close()
	if st.SegmentsCopied < 3 {
		t.Fatalf("%d segments copied", st.SegmentsCopied)
	}
	return c.now().Sub(start), st
}

// remote.log.manager.copy.max.bytes.per.second: copies of N bytes take
// N/rate on the manager's clock, the throttle's waits; without it they
// take none.
func TestCopyThrottlePaces(t *testing.T) {
	const rate = 20_000
	for _, throttled := range []bool{true, false} {
		took, st := copyOnPacedClock(t, func(o *Options) {
			if throttled {
				o.CopyMaxBytesPerSecond = rate
			}
		})
		want := time.Duration(0)
		if throttled {
			want = time.Duration(float64(st.BytesCopied) / rate * float64(time.Second))
		}
		objects := int(st.SegmentsCopied) * len(allKinds)
		if !within(took, want, objects) || st.CopyThrottleTime != took {
			t.Fatalf("throttled %v: %d bytes copied in %v on the clock (throttle time %v), want %v", throttled, st.BytesCopied, took, st.CopyThrottleTime, want)
		}
	}
}

// remote.log.manager.fetch.max.bytes.per.second: a consumer reading N
// bytes of remote data read by read waits, before each read, for what
// the reads before it returned: N minus the last read's bytes over the
// rate on the manager's clock. Without it no read waits.
func TestFetchThrottlePaces(t *testing.T) {
	const rate = 10_000
	for _, throttled := range []bool{true, false} {
		f := newFixture(t, tieredConfig)
		f.produce(12)
		var c pacedClock
		c.ns.Store(t0 * int64(time.Millisecond))
		m := f.manager(f.store, func(o *Options) {
			if throttled {
				o.FetchMaxBytesPerSecond = rate
			}
			o.Now, o.Sleep = c.now, c.sleep
			o.ReadAheadBytes = -1
		})
		if err := m.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		id := f.log.TopicID()
		segs := m.Segments(id, 0)
		f.waitLocalStart(segs[len(segs)-1].End)
		start := c.now()
		var total, last int64
		reads := 0
		for off := int64(0); off < segs[len(segs)-1].End; reads++ {
			before := c.now()
			b, err := m.Read(context.Background(), id, 0, off, 1000)
			if err != nil || len(b) == 0 {
				t.Fatalf("read at %d: %d bytes, %v", off, len(b), err)
			}
			// The wait before this read is the previous read's bytes
			// over the rate (the clock moves only by waits).
			want := time.Duration(0)
			if throttled {
				want = time.Duration(float64(last) / rate * float64(time.Second))
			}
			if waited := c.now().Sub(before); !within(waited, want, 1) {
				t.Fatalf("throttled %v: read %d at %d waited %v after %d bytes, want %v", throttled, reads, off, waited, last, want)
			}
			last = int64(len(b))
			total += last
			off = lastOffsetOfBatches(t, b) + 1
		}
		took := c.now().Sub(start)
		st := m.Stats()
		m.Close()
		f.eng.Close()
		want := time.Duration(0)
		if throttled {
			want = time.Duration(float64(total-last) / rate * float64(time.Second))
		}
		if reads < 5 || !within(took, want, reads) || st.FetchThrottleTime != took {
			t.Fatalf("throttled %v: %d reads of %d bytes took %v on the clock (throttle time %v), want %v", throttled, reads, total, took, st.FetchThrottleTime, want)
		}
	}
}

// A throttle wait longer than the read's context allows fails the read
// as a transient store error, not a hang.
func TestFetchThrottleBoundedByContext(t *testing.T) {
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	f.produce(12)
	m := f.manager(f.store, func(o *Options) {
		o.FetchMaxBytesPerSecond = 1 // every byte a second
		o.Now = func() time.Time { return time.UnixMilli(t0) }
		o.Sleep = sleepCtx
		o.ReadAheadBytes = -1
	})
	defer m.Close()
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := f.log.TopicID()
	segs := m.Segments(id, 0)
	f.waitLocalStart(segs[len(segs)-1].End)
	if _, err := m.Read(context.Background(), id, 0, 0, 1000); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := m.Read(ctx, id, 0, 0, 1000); err == nil || !objstore.IsTransient(err) {
		t.Fatalf("read over the throttle: %v, want a transient error", err)
	}
}

// lastOffsetOfBatches is the last offset of the last batch in b.
func lastOffsetOfBatches(t *testing.T, b []byte) int64 {
	t.Helper()
	last := int64(-1)
	for len(b) > 0 {
		batch, rest, _, err := record.Next(b)
		if err != nil {
			t.Fatal(err)
		}
		h, err := record.ParseHeader(batch)
		if err != nil {
			t.Fatal(err)
		}
		last, b = h.LastOffset(), rest
	}
	return last
}

// remote.log.manager.copy.spread.ms: the pace is the backlog over the
// spread, at least minSpreadRate; off (0) it is no pace at all.
func TestCopySpreadRate(t *testing.T) {
	for _, c := range []struct {
		backlog int64
		spread  time.Duration
		want    int64
	}{
		{1 << 30, 0, 0},
		{1 << 30, 5 * time.Second, (1 << 30) / 5},
		{1 << 30, 500 * time.Millisecond, 2 << 30},
		{1 << 20, 5 * time.Second, minSpreadRate},
		{0, time.Second, minSpreadRate},
	} {
		if got := copySpreadRate(c.backlog, c.spread); got != c.want {
			t.Fatalf("copySpreadRate(%d, %v) = %d, want %d", c.backlog, c.spread, got, c.want)
		}
	}
}

// With a spread, copies are paced by their backlog: a backlog too small
// for the spread goes at minSpreadRate (each byte waited for on the
// manager's clock), a copy throttle below that pace wins, and a spread
// short enough for the backlog to set a pace above minSpreadRate takes
// less time than the floor would.
func TestCopySpreadPaces(t *testing.T) {
	run := func(spread time.Duration, throttle int64) (time.Duration, Stats) {
		return copyOnPacedClock(t, func(o *Options) { o.CopySpread, o.CopyMaxBytesPerSecond = spread, throttle })
	}
	secs := func(bytes, rate int64) time.Duration {
		return time.Duration(float64(bytes) / float64(rate) * float64(time.Second))
	}
	// Every read charges its bytes, rounded down to a nanosecond: allow
	// one per KiB copied.
	slack := func(st Stats) int { return int(st.BytesCopied/1024) + 1 }

	floor, st := run(time.Hour, 0)
	if want := secs(st.BytesCopied, minSpreadRate); !within(floor, want, slack(st)) || st.CopyThrottleTime != floor {
		t.Fatalf("spread 1h: %d bytes took %v (throttle time %v), want %v at %d B/s", st.BytesCopied, floor, st.CopyThrottleTime, want, minSpreadRate)
	}
	capped, st := run(time.Hour, 20_000)
	if want := secs(st.BytesCopied, 20_000); !within(capped, want, slack(st)) {
		t.Fatalf("spread 1h, throttle 20,000 B/s: %d bytes took %v, want %v", st.BytesCopied, capped, want)
	}
	fast, st := run(time.Nanosecond, 0)
	if fast >= floor/2 {
		t.Fatalf("spread 1ns: %d bytes took %v, the floor's pace took %v", st.BytesCopied, fast, floor)
	}
}
