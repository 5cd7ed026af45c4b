package engine

import (
	"runtime"
	"sync"

	"github.com/stratalog/strata/internal/uring"
)

// Cache memory on huge pages: the tail cache's buffers (tailcache.go) and
// the copy cache's blocks (copycache.go) are 256 KiB pieces of 2 MiB
// mappings outside the Go heap (uring.MapMemoryHugeLater: aligned to 2 MiB,
// faulted in when mapped, on a transparent huge page once khugepaged
// collapses it where the kernel grants one; see "Mapping ahead" below),
// as the segments' chunk pools are, not slices of the Go heap.
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
// Mapping ahead: a new mapping is faulted in at once. On the development
// VM a fresh 2 MiB huge page took 3.7-6.7 ms to fault in (the guest's
// first touch of memory the host backs only then; a huge page freed for
// a few seconds goes back to the host and is faulted in again), the same
// 2 MiB on 4 KiB pages 0.9-1.3 ms (docs/performance.md, "Session 43" and
// "Session 53"). So slabs are mapped with uring.MapMemoryHugeLater:
// faulted in on 4 KiB pages, then marked for huge pages, which khugepaged
// makes of them in the background. Made when a block was wanted, a
// mapping was a stall of the append that needed a tail-cache buffer,
// under its Log.mu. So once half of the newest mapping's blocks are out
// and the pool may hand out more than are left, the next mappings are
// made on a goroutine of its own (one at a time, up to the pool's depth,
// slabs.depth; it ends when they are made, at a failed mapping, or at
// stopAhead), and take uses them when they are ready. The copy cache
// maps one ahead; the tail cache as many as the logs that cache can use,
// or, in a broker (Options.PrefaultTailCache), as every log hosted can,
// from the moment the log is created or opened. A consumer started with
// a keyed producer over 96 partitions wants the tail cache's whole 256
// MiB in its first second: 128 huge-page mappings, ~0.6 s on this VM,
// which mapped as appends needed them held the connection's reader for
// up to 160 ms: a keyed producer at 200,000 records/s with a consumer
// and no warm-up (`strata loadgen --spawn 1 --engine kgo --idempotent
// --keys 100000 --rate 200000 --duration 20s --consumers 1
// --consumer-engine kgo`) had a produce p99 of 114-409 ms from its first
// two seconds, 22-38 ms with this (four rounds each, "Session 53").

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
	depth int                         // most mappings made ahead at once (at least 1)
	mapFn func(n int) ([]byte, error) // uring.MapMemoryHugeLater (tests wrap it)
}

// slabAhead is the mappings made ahead of the blocks' need.
type slabAhead struct {
	mu      sync.Mutex
	running bool     // a goroutine is making them
	want    int      // mappings wanted ahead (ready ones included)
	ready   [][]byte // made, not used yet, oldest first
	stopped bool     // stopAhead: make no more
}

// slabMaps are the mappings of one pool, unmapped together by the pool's
// cleanup.
type slabMaps struct {
	mu   sync.Mutex
	m    [][]byte
	gone bool // unmapped: the owner is unreachable
}

// newSlabs returns the slabs of owner (the pool that holds them), blocks of
// block bytes, which must divide slabBytes, mapping up to depth mappings
// ahead of their need.
func newSlabs[T any](owner *T, block, depth int) slabs {
	if block <= 0 || slabBytes%block != 0 {
		panic("engine: slab block does not divide a slab")
	}
	s := slabs{block: block, maps: &slabMaps{}, ahead: &slabAhead{}, depth: max(depth, 1), mapFn: uring.MapMemoryHugeLater}
	runtime.AddCleanup(owner, (*slabMaps).unmap, s.maps)
	return s
}

// take returns a block (len = cap = block): the newest mapping's next, or
// the first of a new one (the oldest mapped ahead if one is ready, else
// one mapped now). room is how many more blocks the pool may hand out
// after this one: when that is more than the newest mapping has left and
// half of them are out, the mappings those blocks need (at most depth)
// are made ahead.
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
	if left := len(s.spare); left <= slabBytes/s.block/2 {
		s.mapAhead(room)
	}
	return b
}

// mapAhead starts making the mappings that room more blocks need beyond
// the newest mapping's (at most depth), unless they are made or being
// made.
func (s *slabs) mapAhead(room int) {
	per := slabBytes / s.block
	if left := len(s.spare); room > left {
		s.ahead.start(s.maps, s.mapFn, min((room-left+per-1)/per, s.depth))
	}
}

// stopAhead ends the making of mappings ahead (the pool's owner closes):
// the goroutine, if one runs, ends after the mapping in hand, and none
// starts again. take still maps what it needs itself.
func (s *slabs) stopAhead() {
	s.ahead.mu.Lock()
	s.ahead.stopped = true
	s.ahead.mu.Unlock()
}

// take returns the oldest mapping made ahead, nil if none is ready.
func (a *slabAhead) take() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.ready) == 0 {
		return nil
	}
	m := a.ready[0]
	a.ready[0] = nil
	a.ready = a.ready[1:]
	if a.want > 0 {
		a.want--
	}
	return m
}

// start makes mappings on a goroutine of its own until want are ready,
// unless one runs already (it then goes on to the new want). Each mapping
// joins maps (so the owner's cleanup unmaps it, used or not); the
// goroutine ends at a failed mapping (take maps, or falls back to heap
// memory, itself), when the owner is gone, or at stopAhead.
func (a *slabAhead) start(maps *slabMaps, mapFn func(int) ([]byte, error), want int) {
	a.mu.Lock()
	a.want = want
	if a.running || a.stopped || len(a.ready) >= want {
		a.mu.Unlock()
		return
	}
	a.running = true
	a.mu.Unlock()
	go a.fill(maps, mapFn)
}

// fill is start's goroutine.
func (a *slabAhead) fill(maps *slabMaps, mapFn func(int) ([]byte, error)) {
	for {
		a.mu.Lock()
		if a.stopped || len(a.ready) >= a.want {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		m, err := mapFn(slabBytes)
		ok := err == nil
		if ok && !maps.add(m) {
			_ = uring.UnmapMemory(m) // the owner is gone
			ok = false
		}
		a.mu.Lock()
		if !ok {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.ready = append(a.ready, m)
		a.mu.Unlock()
	}
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
