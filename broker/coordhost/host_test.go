package coordhost

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"
)

// fakeView is one snapshot: led partitions, the topic's leaders, live
// brokers.
type fakeView struct {
	led     map[string]Leadership
	leaders map[string][]int32 // topic -> leader per partition
	live    int
	changed chan struct{}
}

func (v *fakeView) Led(topic string) Leadership { return maps.Clone(v.led[topic]) }
func (v *fakeView) Partitions(topic string) (int32, bool) {
	l, ok := v.leaders[topic]
	return int32(len(l)), ok
}
func (v *fakeView) Leader(topic string, p int32) int32 { return v.leaders[topic][p] }
func (v *fakeView) LiveBrokers() int                   { return v.live }
func (v *fakeView) Changed() <-chan struct{}           { return v.changed }

// fakeSource replaces its view the way the server's cluster state does:
// the new one is visible before the old one's changed is closed.
type fakeSource struct {
	mu sync.Mutex
	v  *fakeView
}

func (s *fakeSource) View() View {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.v == nil {
		return nil
	}
	return s.v
}

func (s *fakeSource) set(led Leadership) {
	nv := &fakeView{led: map[string]Leadership{"__t": led}, changed: make(chan struct{})}
	s.mu.Lock()
	old := s.v
	s.v = nv
	s.mu.Unlock()
	if old != nil {
		close(old.changed)
	}
}

// fakeClock hands out one tick channel per Tick call, driven by the test.
type fakeClock struct {
	now   time.Time
	mu    sync.Mutex
	ticks map[time.Duration]chan time.Time
	stops int
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_700_000_000, 0), ticks: map[time.Duration]chan time.Time{}}
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Tick(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.ticks[d]
	if !ok {
		ch = make(chan time.Time)
		c.ticks[d] = ch
	}
	return ch, func() {
		c.mu.Lock()
		c.stops++
		c.mu.Unlock()
	}
}

// fire delivers one tick of period d; it returns once a loop took it, so
// every action of the loop's previous wakeup is finished.
func (c *fakeClock) fire(t *testing.T, d time.Duration) {
	t.Helper()
	for {
		c.mu.Lock()
		ch, ok := c.ticks[d]
		c.mu.Unlock()
		if ok {
			ch <- c.now
			return
		}
		time.Sleep(time.Millisecond) // the loop has not asked for its ticker yet
	}
}

// recorder logs the load and unload callbacks; failLoads makes the next
// loads of a partition fail.
type recorder struct {
	mu        sync.Mutex
	events    chan string
	failLoads map[int32]int
}

func newRecorder() *recorder {
	return &recorder{events: make(chan string, 64), failLoads: map[int32]int{}}
}

func (r *recorder) load(p, epoch int32) error {
	r.mu.Lock()
	fail := r.failLoads[p] > 0
	if fail {
		r.failLoads[p]--
	}
	r.mu.Unlock()
	if fail {
		r.events <- fmt.Sprintf("load %d@%d failed", p, epoch)
		return errors.New("injected")
	}
	r.events <- fmt.Sprintf("load %d@%d", p, epoch)
	return nil
}

func (r *recorder) unload(p int32) { r.events <- fmt.Sprintf("unload %d", p) }

// expect reads the next events, in order.
func (r *recorder) expect(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		if got := <-r.events; got != w {
			t.Fatalf("event %q, want %q", got, w)
		}
	}
}

// quiet fails if an event is waiting.
func (r *recorder) quiet(t *testing.T) {
	t.Helper()
	select {
	case got := <-r.events:
		t.Fatalf("unexpected event %q", got)
	default:
	}
}

func newTestHost(rec *recorder, clk *fakeClock) *Host {
	return New(Config{
		Topic:  Topic{Name: "__t", Partitions: 4},
		Name:   "test",
		Load:   rec.load,
		Unload: rec.unload,
		Clock:  clk,
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

func TestFollowLoadsAndUnloadsOnViewChanges(t *testing.T) {
	rec, clk, src := newRecorder(), newFakeClock(), &fakeSource{}
	src.set(Leadership{0: 1, 9: 1}) // 9 is outside the topic's 4 partitions
	h := newTestHost(rec, clk)
	if !h.Follow(src) {
		t.Fatal("Follow refused on an open host")
	}
	rec.expect(t, "load 0@1")

	src.set(Leadership{0: 2, 1: 1}) // new epoch on 0, gained 1
	rec.expect(t, "load 0@2", "load 1@1")

	src.set(Leadership{1: 1})
	rec.expect(t, "unload 0")

	// Two ticks: the wakeup after the first has finished when the second
	// is taken; nothing changed, so nothing happens.
	clk.fire(t, DefaultRetry)
	clk.fire(t, DefaultRetry)
	rec.quiet(t)

	src.set(nil)
	rec.expect(t, "unload 1")

	h.Close()
	h.Close() // idempotent
	if clk.stops != 1 {
		t.Fatalf("ticker stopped %d times, want 1", clk.stops)
	}
	src.set(Leadership{2: 1}) // after Close: no loop follows
	rec.quiet(t)
	if h.Follow(src) {
		t.Fatal("Follow started a loop on a closed host")
	}
}

func TestFollowRetriesAFailedLoadOnTheTick(t *testing.T) {
	rec, clk, src := newRecorder(), newFakeClock(), &fakeSource{}
	rec.failLoads[2] = 2
	src.set(Leadership{2: 3})
	h := newTestHost(rec, clk)
	defer h.Close()
	h.Follow(src)
	rec.expect(t, "load 2@3 failed")
	clk.fire(t, DefaultRetry)
	rec.expect(t, "load 2@3 failed")
	clk.fire(t, DefaultRetry)
	rec.expect(t, "load 2@3")
	clk.fire(t, DefaultRetry)
	clk.fire(t, DefaultRetry)
	rec.quiet(t) // loaded now: no more loads at the same epoch
}

// A failed reload at a new epoch is forgotten, not unloaded: losing the
// partition afterwards does not call Unload, as before the host existed.
func TestFollowFailedReloadThenLoss(t *testing.T) {
	rec, clk, src := newRecorder(), newFakeClock(), &fakeSource{}
	src.set(Leadership{1: 1})
	h := newTestHost(rec, clk)
	defer h.Close()
	h.Follow(src)
	rec.expect(t, "load 1@1")
	rec.mu.Lock()
	rec.failLoads[1] = 1
	rec.mu.Unlock()
	src.set(Leadership{1: 2})
	rec.expect(t, "load 1@2 failed")
	src.set(Leadership{})
	clk.fire(t, DefaultRetry)
	clk.fire(t, DefaultRetry)
	rec.quiet(t)
}

func TestFollowWaitsForAView(t *testing.T) {
	rec, clk, src := newRecorder(), newFakeClock(), &fakeSource{}
	h := newTestHost(rec, clk)
	defer h.Close()
	h.Follow(src)
	clk.fire(t, DefaultRetry)
	clk.fire(t, DefaultRetry)
	rec.quiet(t)
	src.set(Leadership{3: 0}) // no changed channel to close yet: the tick finds it
	clk.fire(t, DefaultRetry)
	rec.expect(t, "load 3@0")
}

func TestEveryPassesTheClocksTime(t *testing.T) {
	rec, clk := newRecorder(), newFakeClock()
	h := newTestHost(rec, clk)
	got := make(chan time.Time, 4)
	if !h.Every(time.Second, func(now time.Time) { got <- now }) {
		t.Fatal("Every refused on an open host")
	}
	clk.fire(t, time.Second)
	if now := <-got; !now.Equal(clk.now) {
		t.Fatalf("callback got %v, want the clock's %v", now, clk.now)
	}
	h.Close()
	if clk.stops != 1 {
		t.Fatalf("ticker stopped %d times, want 1", clk.stops)
	}
	if h.Every(time.Second, func(time.Time) { t.Error("ran after Close") }) {
		t.Fatal("Every started a loop on a closed host")
	}
}
