package engine

import (
	"runtime"
	"testing"
	"time"
)

// A pool's mappings are unmapped once nothing reaches the pool, and not
// before: a tail buffer holds its pool, so it holds the memory.
func TestSlabsUnmappedWithTheirPool(t *testing.T) {
	p := newTailPool(0)
	m := p.get()
	buf := &tailBuf{b: m.b, idx: m.idx, pool: p}
	maps := p.mem.maps
	p = nil
	for range 3 {
		runtime.GC()
	}
	time.Sleep(10 * time.Millisecond)
	if maps.mapped() != 1 {
		t.Fatalf("%d slabs mapped while a buffer holds the pool, want 1", maps.mapped())
	}
	buf.b[len(buf.b)-1] = 7 // still mapped: this would fault
	runtime.KeepAlive(buf)
	buf = nil
	// The cleanup runs on the runtime's cleanup goroutine after a GC cycle
	// finds the pool unreachable; bounded by count, not by a time target.
	for i := 0; maps.mapped() != 0; i++ {
		if i == 500 {
			t.Fatalf("%d slabs still mapped after the pool became unreachable", maps.mapped())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// With PrefaultTailCache each log hosted maps its share of the tail cache
// ahead (tailBufsPerLog buffers, within the budget) before any log is read,
// and a log reopened by Open counts as one created; without it nothing is
// mapped until a log caches, and one log caching maps at most its own
// share ahead, not the budget.
func TestTailCachePrefault(t *testing.T) {
	per := slabBytes / tailBufBytes
	mapped := func(e *Engine) int { return e.tails.mem.maps.mapped() }
	settle := func(e *Engine, want int, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // deadlock guard, not a timing assertion
		for {
			e.tails.mem.ahead.mu.Lock()
			running := e.tails.mem.ahead.running
			e.tails.mem.ahead.mu.Unlock()
			if n := mapped(e); !running && n >= want {
				if n != want {
					t.Fatalf("%s: %d slabs mapped, want %d", what, n, want)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d slabs mapped after 30 s, want %d", what, mapped(e), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	budget := 10 * tailBufsPerLog * tailBufBytes // ten logs' shares
	dir := t.TempDir()
	e := openEngine(t, dir, func(o *Options) {
		o.TailCacheBytes = int64(budget)
		o.PrefaultTailCache = true
	})
	settle(e, 0, "no logs")
	mustTopic(t, e, "a", 3, nil)
	settle(e, 3*tailBufsPerLog/per, "three logs")
	mustTopic(t, e, "b", 20, nil)
	settle(e, 10*tailBufsPerLog/per, "23 logs over a budget of ten shares")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, dir, func(o *Options) {
		o.TailCacheBytes = int64(budget)
		o.PrefaultTailCache = true
	})
	settle(e, 10*tailBufsPerLog/per, "23 logs reopened")
	e.Close()

	// Without prefault: a log that caches maps ahead what one log's share
	// needs (the pool's first buffers with no other log caching), not the
	// budget.
	e = openEngine(t, t.TempDir(), func(o *Options) { o.TailCacheBytes = int64(budget) })
	defer e.Close()
	mustTopic(t, e, "c", 4, nil)
	settle(e, 0, "four logs, no prefault, none read")
	for range per/2 + 1 { // past half of the first slab's buffers
		e.tails.get()
	}
	settle(e, tailBufsPerLog/per, "one log's buffers taken")
}
