package engine

import (
	"runtime"
	"sync"

	"github.com/stratalog/strata/internal/uring"
)

// Cache memory on huge pages: the tail cache's buffers (tailcache.go) and
// the copy cache's blocks (copycache.go) are 256 KiB pieces of 2 MiB
// mappings outside the Go heap (uring.MapMemory: aligned to 2 MiB, on a
// transparent huge page where the kernel grants one, faulted in when
// mapped), as the segments' chunk pools are, not slices of the Go heap.
//
// Why: every append of a log that a consumer reads at the head is copied
// into the tail cache, whose 64 MiB cycle through the CPU's caches far
// more slowly than the segments' few chunks: each copy writes cold memory,
// and on 4 KiB pages each page it touches may miss the TLB as well (a
// two-level page walk in a virtual machine). In target 2's run (keyed
// franz-go at 100,000 records/s with a kgo consumer; docs/performance.md,
// "Session 40") that copy took 0.52-0.72 s of the broker's ~13 s of CPU samples
// from Go heap buffers, 0.43 s from mapped 4 KiB pages and 0.23-0.30 s
// from huge pages (the segment chunk copy of the same bytes: 0.35 s). The
// copy cache fills up to 1 GiB on a fresh broker: its first tiered run
// took 13.8-14.2 s of broker CPU with huge pages against 17.8-22.2 s with
// Go heap blocks.
//
// Lifetime: a slabs value belongs to one pool (tailPool, copyPool), and
// whoever holds a block also holds its pool: a tail buffer its tailBuf
// (tailBuf.pool), a ReadResult its tailBufs, copy memory its copyMem
// (copyMem.pool). So the mappings are unmapped by a cleanup
// (runtime.AddCleanup) that runs once the pool is unreachable, never while
// a block can still be read. Where a mapping fails the block is Go heap
// memory, which the garbage collector owns as before.
//
// Mapping ahead: a new mapping is faulted in at once, which on the
// development VM took 3.7-4.0 ms for each 2 MiB (the guest's first touch
// of its memory; 128 mappings in a row, docs/performance.md, "Session
// 43"). Made when a block was wanted, that was a stall of the append
// that needed a tail-cache buffer, under its Log.mu: with a 256 MiB
// budget, 128 of them in the first seconds a consumer reads. So once
// half of the newest mapping's blocks are out and the pool may hand out
// more than are left, the next mapping is made on a goroutine of its own
// (one at a time; it ends when the mapping is made), and take uses it
// when it is ready.

// slabBytes is one mapping: one huge page.
const slabBytes = uring.HugePageBytes

// slabs hands out blocks of one size from mappings of slabBytes. Not safe
// for concurrent use: its pool's lock guards it (ahead and maps have their
// own). A pool maps whole slabs, so up to two slabs less one block may be
// mapped beyond the blocks its budget lets it hand out.
type slabs struct {
	block int
	spare [][]byte // the newest mapping's blocks not handed out yet
	maps  *slabMaps
	ahead *slabAhead
	mapFn func(n int) ([]byte, error) // uring.MapMemory (tests wrap it)
}

// slabAhead is the mapping made ahead of the blocks' need.
type slabAhead struct {
	mu      sync.Mutex
	running bool   // a goroutine is making it
	ready   []byte // made, not used yet
}

// slabMaps are the mappings of one pool, unmapped together by the pool's
// cleanup.
type slabMaps struct {
	mu   sync.Mutex
	m    [][]byte
	gone bool // unmapped: the owner is unreachable
}

// newSlabs returns the slabs of owner (the pool that holds them), blocks of
// block bytes, which must divide slabBytes.
func newSlabs[T any](owner *T, block int) slabs {
	if block <= 0 || slabBytes%block != 0 {
		panic("engine: slab block does not divide a slab")
	}
	s := slabs{block: block, maps: &slabMaps{}, ahead: &slabAhead{}, mapFn: uring.MapMemory}
	runtime.AddCleanup(owner, (*slabMaps).unmap, s.maps)
	return s
}

// take returns a block (len = cap = block): the newest mapping's next, or
// the first of a new one (the one mapped ahead if it is ready, else one
// mapped now). room is how many more blocks the pool may hand out after
// this one: when that is more than the newest mapping has left and half
// of them are out, the next mapping is started ahead.
func (s *slabs) take(room int) []byte {
	if len(s.spare) == 0 {
		m := s.ahead.take()
		if m == nil {
			var err error
			if m, err = s.mapFn(slabBytes); err != nil {
				return make([]byte, s.block)
			}
			s.maps.add(m) // the owner, our caller's, is reachable
		}
		for off := len(m) - s.block; off >= 0; off -= s.block {
			s.spare = append(s.spare, m[off:off+s.block:off+s.block])
		}
	}
	b := s.spare[len(s.spare)-1] // lowest address first
	s.spare[len(s.spare)-1] = nil
	s.spare = s.spare[:len(s.spare)-1]
	if left := len(s.spare); room > left && left <= slabBytes/s.block/2 {
		s.ahead.start(s.maps, s.mapFn)
	}
	return b
}

// take returns the mapping made ahead, nil if none is ready.
func (a *slabAhead) take() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.ready
	a.ready = nil
	return m
}

// start makes the next mapping on a goroutine of its own, unless one is
// being made or ready. The mapping joins maps (so the owner's cleanup
// unmaps it, used or not); a failed one is left to take, which maps
// (or falls back to heap memory) itself.
func (a *slabAhead) start(maps *slabMaps, mapFn func(int) ([]byte, error)) {
	a.mu.Lock()
	if a.running || a.ready != nil {
		a.mu.Unlock()
		return
	}
	a.running = true
	a.mu.Unlock()
	go func() {
		m, err := mapFn(slabBytes)
		if err != nil {
			m = nil
		} else if !maps.add(m) {
			_ = uring.UnmapMemory(m) // the owner is gone
			m = nil
		}
		a.mu.Lock()
		a.running, a.ready = false, m
		a.mu.Unlock()
	}()
}

// add records b, or reports false once the owner's cleanup has run (a
// mapping made ahead after that is the caller's to unmap).
func (m *slabMaps) add(b []byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return false
	}
	m.m = append(m.m, b)
	return true
}

// unmap unmaps every mapping: the owner's cleanup, when no block can be
// reached any more.
func (m *slabMaps) unmap() {
	m.mu.Lock()
	maps := m.m
	m.m, m.gone = nil, true
	m.mu.Unlock()
	for _, b := range maps {
		_ = uring.UnmapMemory(b)
	}
}
