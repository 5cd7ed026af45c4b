package uring

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Alignment is the address, length and file-offset alignment that O_DIRECT
// I/O needs on the filesystems Strata runs on (4 KiB logical blocks; 512-byte
// devices accept it too).
const Alignment = 4096

// maxPoolBytes keeps a pool within one registered-buffer iovec (the kernel
// takes at most 1 GiB per IORING_REGISTER_BUFFERS iovec).
const maxPoolBytes = 1 << 30

// Pool is a fixed set of equal chunks carved from one anonymous memory
// mapping outside the Go heap: every chunk starts on an Alignment boundary
// (usable for O_DIRECT), never moves, and is faulted in at NewPool so the
// first write does not pay page faults; a pool of whole 2 MiB pages asks
// for transparent huge pages (HugePages). Passed in Config.Pools, the whole
// mapping is registered with the ring and I/O on chunks uses READ_FIXED and
// WRITE_FIXED (no per-I/O page pinning).
//
// Get, TryGet and Put are safe for concurrent use and do not allocate. A
// caller that sizes its queue depth by the pool (one chunk per in-flight
// write) gets back-pressure from Get for free; Get must not be called from a
// Done callback (it may wait for a chunk that only a later callback returns).
type Pool struct {
	mem   []byte
	chunk int
	free  chan int32     // indexes of chunks not handed out
	out   []atomic.Int32 // chunk i's holders: 0 free, 1 handed out, more pinned (Pin)
	pins  atomic.Int32   // pins not yet released (TryPin's bound)
	regs  atomic.Int32   // rings that registered the pool and are not closed
	shut  atomic.Bool
	// starve, if set (SetStarveHook, before the pool is used), runs when
	// Get finds no free chunk, before it waits.
	starve func()
}

// NewPool maps chunks chunks of chunkBytes each. chunkBytes must be a
// positive multiple of Alignment and the pool at most 1 GiB.
func NewPool(chunkBytes, chunks int) (*Pool, error) {
	if chunkBytes <= 0 || chunkBytes%Alignment != 0 {
		return nil, fmt.Errorf("uring: pool chunk size %d is not a positive multiple of %d", chunkBytes, Alignment)
	}
	if chunks <= 0 || chunks > maxPoolBytes/chunkBytes {
		return nil, fmt.Errorf("uring: pool of %d chunks of %d bytes is outside (0, %d bytes]", chunks, chunkBytes, maxPoolBytes)
	}
	mem, err := mapAnon(chunkBytes * chunks)
	if err != nil {
		return nil, err
	}
	p := &Pool{mem: mem, chunk: chunkBytes, free: make(chan int32, chunks), out: make([]atomic.Int32, chunks)}
	for i := range chunks {
		p.free <- int32(i)
	}
	return p, nil
}

// HugePages reports whether the kernel backs the whole pool with
// transparent huge pages (asked for when the pool is a whole number of
// 2 MiB pages, see mapAnon): each chunk's I/O is then one device segment.
func (p *Pool) HugePages() bool { return hugeBacked(p.mem) }

// ChunkBytes is the size of every chunk.
func (p *Pool) ChunkBytes() int { return p.chunk }

// Chunks is the number of chunks.
func (p *Pool) Chunks() int { return len(p.out) }

// Free is the number of chunks not handed out.
func (p *Pool) Free() int { return len(p.free) }

// Get returns a chunk (len = cap = ChunkBytes), waiting for a Put when all
// are handed out (after calling the starve hook, if any).
func (p *Pool) Get() []byte {
	select {
	case i := <-p.free:
		return p.take(i)
	default:
	}
	if p.starve != nil {
		p.starve()
	}
	return p.take(<-p.free)
}

// SetStarveHook sets f to run whenever Get must wait for a chunk: its
// owner's chance to release chunks it holds back (the engine's journal
// writes a group it was holding open, releasing the chunks that group's
// spans pin). Call it before the pool is used; f must not call Get.
func (p *Pool) SetStarveHook(f func()) { p.starve = f }

// TryGet returns a chunk, or ok == false when all are handed out.
func (p *Pool) TryGet() (b []byte, ok bool) {
	select {
	case i := <-p.free:
		return p.take(i), true
	default:
		return nil, false
	}
}

func (p *Pool) take(i int32) []byte {
	if !p.out[i].CompareAndSwap(0, 1) {
		panic(fmt.Sprintf("uring: pool chunk %d handed out twice", i))
	}
	off := int(i) * p.chunk
	return p.mem[off : off+p.chunk : off+p.chunk]
}

// Put returns the chunk b starts in (b may be a reslice of a chunk). It
// panics for memory that is not a handed-out chunk of this pool: a double Put
// would let two writers share one buffer. A pinned chunk (TryPin) goes back
// to the free list only once its pins are released too.
func (p *Pool) Put(b []byte) {
	i, ok := p.index(b)
	if !ok {
		panic("uring: Put of a buffer that is not from this pool")
	}
	p.release(i)
}

func (p *Pool) release(i int) {
	switch n := p.out[i].Add(-1); {
	case n == 0:
		p.free <- int32(i) // never blocks: capacity is the number of chunks
	case n < 0:
		panic(fmt.Sprintf("uring: pool chunk %d returned twice", i))
	}
}

// TryPin adds a holder to the handed-out chunk b lies in, so that the
// chunk's memory stays as it is (not handed out again) after its owner's
// Put, until Unpin(b). It refuses (false) when max pins of this pool are
// already held or b is not a handed-out chunk of this pool: a bound on
// pins keeps chunks free for Get, whose callers may hold locks that the
// pins' holder needs before it can release them.
func (p *Pool) TryPin(b []byte, max int) bool {
	i, ok := p.index(b)
	if !ok {
		return false
	}
	if p.pins.Add(1) > int32(max) {
		p.pins.Add(-1)
		return false
	}
	for {
		n := p.out[i].Load()
		if n <= 0 {
			p.pins.Add(-1)
			return false
		}
		if p.out[i].CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Unpin releases a pin TryPin took on the chunk b lies in.
func (p *Pool) Unpin(b []byte) {
	i, ok := p.index(b)
	if !ok {
		panic("uring: Unpin of a buffer that is not from this pool")
	}
	p.pins.Add(-1)
	p.release(i)
}

// Pins is the number of pins held.
func (p *Pool) Pins() int { return int(p.pins.Load()) }

// index finds the chunk b's first byte lies in.
func (p *Pool) index(b []byte) (int, bool) {
	if cap(b) == 0 || len(p.mem) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(p.mem)))
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if addr < base || addr >= base+uintptr(len(p.mem)) {
		return 0, false
	}
	return int((addr - base) / uintptr(p.chunk)), true
}

// span returns the mapping's address range [base, end).
func (p *Pool) span() (base, end uintptr) {
	base = uintptr(unsafe.Pointer(unsafe.SliceData(p.mem)))
	return base, base + uintptr(len(p.mem))
}

// RegisterPool registers p's mapping with r as one more fixed buffer, as
// Config.Pools does at setup, so reads and writes on its chunks use
// READ_FIXED/WRITE_FIXED. Best effort (the table holds 1,024 pools and
// needs Linux 5.19; an unprivileged user's RLIMIT_MEMLOCK may refuse):
// unregistered chunks use plain reads and writes, with a log line. p must
// outlive r (Pool.Close fails with ErrBusy until r is closed). RegisterPool
// waits for the ring owner, so it must not be called from a Done callback.
func (r *Ring) RegisterPool(p *Pool) error {
	if p == nil || p.shut.Load() {
		return fmt.Errorf("%w: nil or closed pool", ErrInvalid)
	}
	done := make(chan struct{})
	op := &Op{Code: opRegisterPool, pool: p, Done: func(*Op) { close(done) }}
	if err := r.eng.control(op); err != nil {
		return err
	}
	<-done
	return nil
}

// Close unmaps the pool. It fails with ErrBusy while chunks are handed out or
// a Ring that registered the pool is open.
func (p *Pool) Close() error {
	if p.regs.Load() != 0 || len(p.free) != len(p.out) {
		return ErrBusy
	}
	if !p.shut.CompareAndSwap(false, true) {
		return ErrClosed
	}
	mem := p.mem
	p.mem = nil
	return unmapAnon(mem)
}

// hugePageBytes is the size of a transparent huge page (x86-64, arm64 with
// 4 KiB pages).
const hugePageBytes = 2 << 20

// HugePageBytes is the size of the memory MapMemory puts on one transparent
// huge page: a mapping of a multiple of it is aligned to it and asks for
// huge pages (on Linux).
const HugePageBytes = hugePageBytes

// MapMemory returns n bytes of page-aligned anonymous memory outside the Go
// heap, faulted in now, on transparent huge pages where n is a multiple of
// HugePageBytes and the kernel grants them (as a Pool's chunks are). Go's
// garbage collector neither scans nor frees it: the caller unmaps it with
// UnmapMemory once nothing can touch it. Elsewhere than on Linux it is Go
// heap memory and UnmapMemory does nothing.
func MapMemory(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalid, n)
	}
	return mapAnon(n)
}

// MapMemoryHugeLater is MapMemory for memory that is wanted at once and
// on huge pages in the long run: where n is a multiple of HugePageBytes
// it is aligned to it and faulted in on 4 KiB pages now, then asks for
// huge pages, which the kernel's khugepaged makes of it in the background
// (at its own pace: by default 16 MiB every 10 s). Why: in a virtual
// machine whose freed memory goes back to the host (virtio-balloon's free
// page reporting, as on the development VM), faulting in a fresh huge
// page took 4.5-6.7 ms, 0.9-1.3 ms on 4 KiB pages (docs/performance.md,
// "Session 53"); a cache filling 256 MiB in its first second paid the
// difference on the broker's busiest second. Unmap it with UnmapMemory.
func MapMemoryHugeLater(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalid, n)
	}
	return mapAnonPaged(n, true)
}

// UnmapMemory unmaps what MapMemory returned (the whole of it).
func UnmapMemory(b []byte) error { return unmapAnon(b) }
