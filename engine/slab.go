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

// slabBytes is one mapping: one huge page.
const slabBytes = uring.HugePageBytes

// slabs hands out blocks of one size from mappings of slabBytes. Not safe
// for concurrent use: its pool's lock guards it. A pool maps whole slabs,
// so up to one slab less one block (1.75 MiB) may be mapped beyond the
// blocks its budget lets it hand out.
type slabs struct {
	block int
	spare [][]byte // the newest mapping's blocks not handed out yet
	maps  *slabMaps
}

// slabMaps are the mappings of one pool, unmapped together by the pool's
// cleanup.
type slabMaps struct {
	mu sync.Mutex
	m  [][]byte
}

// newSlabs returns the slabs of owner (the pool that holds them), blocks of
// block bytes, which must divide slabBytes.
func newSlabs[T any](owner *T, block int) slabs {
	if block <= 0 || slabBytes%block != 0 {
		panic("engine: slab block does not divide a slab")
	}
	s := slabs{block: block, maps: &slabMaps{}}
	runtime.AddCleanup(owner, (*slabMaps).unmap, s.maps)
	return s
}

// take returns a block (len = cap = block), mapping a new slab when the
// last one's blocks are all out.
func (s *slabs) take() []byte {
	if len(s.spare) == 0 {
		m, err := uring.MapMemory(slabBytes)
		if err != nil {
			return make([]byte, s.block)
		}
		s.maps.add(m)
		for off := len(m) - s.block; off >= 0; off -= s.block {
			s.spare = append(s.spare, m[off:off+s.block:off+s.block])
		}
	}
	b := s.spare[len(s.spare)-1] // lowest address first
	s.spare[len(s.spare)-1] = nil
	s.spare = s.spare[:len(s.spare)-1]
	return b
}

func (m *slabMaps) add(b []byte) {
	m.mu.Lock()
	m.m = append(m.m, b)
	m.mu.Unlock()
}

// unmap unmaps every mapping: the owner's cleanup, when no block can be
// reached any more.
func (m *slabMaps) unmap() {
	m.mu.Lock()
	maps := m.m
	m.m = nil
	m.mu.Unlock()
	for _, b := range maps {
		_ = uring.UnmapMemory(b)
	}
}
