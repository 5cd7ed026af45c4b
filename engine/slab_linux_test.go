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
