package engine

import (
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stratalog/strata/internal/uring"
)

// The blocks of one slab are distinct, block-sized and capped pieces of one
// aligned mapping (on Linux; elsewhere heap memory), handed out lowest
// address first; a new slab is mapped only when the last one's blocks are
// all out.
func TestSlabsHandOutBlocks(t *testing.T) {
	type owner struct{ s slabs }
	o := &owner{}
	o.s = newSlabs(o, tailBufBytes, 1)
	per := slabBytes / tailBufBytes
	seen := map[uintptr]bool{}
	var first uintptr
	for i := range 2 * per {
		b := o.s.take(0)
		if len(b) != tailBufBytes || cap(b) != tailBufBytes {
			t.Fatalf("block %d: len %d cap %d, want %d", i, len(b), cap(b), tailBufBytes)
		}
		a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if seen[a] {
			t.Fatalf("block %d at %#x handed out twice", i, a)
		}
		seen[a] = true
		switch {
		case i%per == 0:
			first = a
			if runtime.GOOS == "linux" && a%slabBytes != 0 {
				t.Fatalf("slab %d starts at %#x, not on a %d-byte boundary", i/per, a, slabBytes)
			}
		case a != first+uintptr(i%per*tailBufBytes):
			t.Fatalf("block %d at %#x, want %#x (its slab's blocks in order)", i, a, first+uintptr(i%per*tailBufBytes))
		}
		b[0], b[len(b)-1] = 1, 2 // writable end to end
		if want := i/per + 1; runtime.GOOS == "linux" && o.s.maps.mapped() != want {
			t.Fatalf("after block %d: %d slabs mapped, want %d", i, o.s.maps.mapped(), want)
		}
	}
	runtime.KeepAlive(o)
}

// A pool that may hand out more blocks than its newest mapping has left
// maps the next one ahead, off the caller's path, once half of the
// newest's blocks are out, and the take that needs a new mapping uses it;
// a pool at its budget (room 0) maps nothing ahead.
func TestSlabsMapAhead(t *testing.T) {
	type owner struct{ s slabs }
	o := &owner{}
	o.s = newSlabs(o, tailBufBytes, 1)
	gate := make(chan struct{})
	var log mapLog
	log.wrap(&o.s, func(k int) {
		if k == 1 {
			<-gate // the mapping ahead waits until the test lets it go
		}
	})
	mappings := log.count
	per := slabBytes / tailBufBytes
	for range per / 2 { // the first mapping, made by take; half its blocks out
		o.s.take(100)
	}
	if n := mappings(); n != 1 {
		t.Fatalf("%d mappings after the first take's, want 1", n)
	}
	close(gate)
	deadline := time.Now().Add(30 * time.Second) // deadlock guard, not a timing assertion
	for mappings() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no mapping made ahead once half of the first one's blocks were out")
		}
		time.Sleep(time.Millisecond)
	}
	for range per - per/2 {
		o.s.take(100)
	}
	b := o.s.take(100) // the first block of the mapping made ahead
	second := log.at(1)
	if a := uintptr(unsafe.Pointer(unsafe.SliceData(b))); a != second {
		t.Fatalf("the take after the first mapping's blocks got %#x, want %#x (the mapping made ahead)", a, second)
	}

	// At the budget: nothing ahead.
	p := &owner{}
	p.s = newSlabs(p, tailBufBytes, 1)
	for range per - 1 {
		p.s.take(0)
	}
	p.s.ahead.mu.Lock()
	started := p.s.ahead.running || len(p.s.ahead.ready) > 0 // start sets running before its goroutine runs
	p.s.ahead.mu.Unlock()
	if started {
		t.Fatal("a pool at its budget maps ahead")
	}
	runtime.KeepAlive(o)
	runtime.KeepAlive(p)
}

// mapped is how many mappings m holds (tests only).
func (m *slabMaps) mapped() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}

// A pool of depth d maps up to d mappings ahead (one at a time, on its own
// goroutine), as many as room more blocks need and no more; takes use them
// oldest first; after stopAhead nothing more is mapped ahead.
func TestSlabsMapAheadDepth(t *testing.T) {
	type owner struct{ s slabs }
	o := &owner{}
	o.s = newSlabs(o, tailBufBytes, 3)
	var log mapLog
	log.wrap(&o.s, nil)
	mappings := log.count
	waitFor := func(want int, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // deadlock guard, not a timing assertion
		for mappings() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d mappings, want %d: %s", mappings(), want, what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	idle := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			o.s.ahead.mu.Lock()
			running := o.s.ahead.running
			o.s.ahead.mu.Unlock()
			if !running {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the goroutine mapping ahead did not end")
			}
			time.Sleep(time.Millisecond)
		}
	}
	per := slabBytes / tailBufBytes
	// Room for two more mappings' blocks: two made ahead, not three.
	for range per / 2 {
		o.s.take(2*per + per/2)
	}
	waitFor(3, "two mappings ahead for two mappings' room")
	idle()
	if n := mappings(); n != 3 {
		t.Fatalf("%d mappings for room of two ahead, want 3 (the first and two ahead)", n)
	}
	// Room for many: depth bounds it at three ahead.
	o.s.take(100 * per)
	waitFor(4, "a third mapping ahead")
	idle()
	if n := mappings(); n != 4 {
		t.Fatalf("%d mappings with depth 3, want 4", n)
	}
	for range per - per/2 - 1 {
		o.s.take(0)
	}
	for k := 1; k <= 3; k++ { // the mappings made ahead, oldest first
		b := o.s.take(0)
		want := log.at(k)
		if a := uintptr(unsafe.Pointer(unsafe.SliceData(b))); a != want {
			t.Fatalf("mapping %d's first block at %#x, want %#x (made ahead, oldest first)", k, a, want)
		}
		for range per - 1 {
			o.s.take(0)
		}
	}
	o.s.stopAhead()
	o.s.take(100 * per) // maps its own, starts nothing
	idle()
	if n := mappings(); n != 5 {
		t.Fatalf("%d mappings after stopAhead and one take, want 5 (the take's own)", n)
	}
	runtime.KeepAlive(o)
}

// mapLog records where each mapping a slabs' mapFn made starts, in order.
type mapLog struct {
	mu   sync.Mutex
	made []uintptr
}

// wrap makes s map through l, calling before(k) (when set) ahead of its
// k-th mapping, counted from 0.
func (l *mapLog) wrap(s *slabs, before func(k int)) {
	s.mapFn = func(n int) ([]byte, error) {
		if before != nil {
			before(l.count())
		}
		b, err := uring.MapMemory(n)
		if err == nil {
			l.mu.Lock()
			l.made = append(l.made, uintptr(unsafe.Pointer(unsafe.SliceData(b))))
			l.mu.Unlock()
		}
		return b, err
	}
}

// count is how many mappings were made.
func (l *mapLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.made)
}

// at is where the k-th mapping starts.
func (l *mapLog) at(k int) uintptr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.made[k]
}
