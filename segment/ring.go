package segment

import (
	"errors"
	"fmt"
	"github.com/stratalog/strata/internal/vfs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/internal/uring"
)

// Options selects how a segment writes. The zero value is the pwrite path
// (Create/Open use the package default, see SetDefaultOptions).
type Options struct {
	// Ring, when non-nil, carries Append's writes and Sync's fdatasync
	// through the ring (io_uring, or the ring's own pwrite fallback). The
	// ring must outlive every segment using it.
	Ring *uring.Ring
	// Direct writes with O_DIRECT through Ring (Linux only), write-behind:
	// Append copies its bytes once into aligned chunks of Pool and returns;
	// full chunks are written at once, DirectDepth at a time, the partially
	// filled one by Sync, Flush, StartShared or WriteBehind (its last page
	// is kept in memory and rewritten by the next write). Readers (ReadAt,
	// Scan, File) see only [0, Written()), and Written() may trail Size()
	// until one of those wrote the tail.
	// i_size is raised ahead of the writes in doubling steps, so
	// after a crash the valid end is found by Recover (a zero tail stops the
	// walk); Close and Seal cut i_size back to Size.
	Direct bool
	// Pool supplies the aligned chunks for Direct (chunk size a multiple of
	// uring.Alignment). An open Direct segment holds one chunk (its tail),
	// one more during a Sync, and one per write in flight; Pool.Get
	// blocking is the back-pressure. A shared Pool must hold at least 3
	// chunks per open Direct segment. nil: the segment maps its
	// own pool of DirectDepth+1 chunks of DirectChunkBytes.
	Pool *uring.Pool
	// PreWrite (Direct only) makes each reservation step written blocks
	// before appends reach it: the next step is zero-filled through the ring
	// (from one shared read-only buffer of zeros) and fdatasynced in the
	// background once appends enter the last half of the current one, so
	// appends are pure overwrites: no unwritten-extent conversion for their
	// fdatasync to commit, no metadata at all once synced, which lets
	// SyncShared replace the per-file fdatasync with a shared device cache
	// flush. It doubles the bytes written to the device.
	PreWrite bool
	// SharedMeta (Direct, instead of PreWrite) says the caller's shared
	// flush (StartShared, WaitWritten, flush, MarkDurable) makes the
	// filesystem's metadata durable as well as the device's cache: a
	// syncfs(2), not an fdatasync of another file. Appends then land in
	// unwritten extents (written once, no zero-fill), and what makes them
	// durable besides the data — each write's extent conversion, the
	// reservation's fallocate, a truncation — is metadata that flush
	// writes, so the segment shares it from the start.
	SharedMeta bool
	// CapLead (PreWrite): the zero-fill running ahead of the appends stops
	// at the prealloc CreateWith was given (the segment's size limit, where
	// it rolls: zeros past it would only be cut again by Seal) instead of
	// going a step past it; an append past it still reserves what it needs.
	// RecycleWith always caps it.
	CapLead bool
	// Zeros, when set, is the buffer of zeros PreWrite writes from: page
	// aligned, a multiple of uring.Alignment long, never written by anyone
	// (a chunk of a pool registered with Ring, so the zero-fill writes are
	// WRITE_FIXED too). nil: a process-wide read-only mapping of 1 MiB.
	Zeros []byte
	// FlushEpoch, when set (Direct only), numbers the device cache flushes
	// a caller of StartShared runs: it returns how many had been started.
	// Each time the written watermark advances it is read after the
	// write's completion and kept with the watermark (WrittenEpoch), so a
	// flush numbered above that value started after every byte below
	// Written had been written. Must be cheap and safe from any goroutine.
	FlushEpoch func() uint64
}

const (
	// DirectChunkBytes is the chunk size of a segment's own Direct pool.
	DirectChunkBytes = 64 << 10
	// DirectDepth is the most writes a Direct segment keeps in flight.
	DirectDepth = 32
)

var defaultOptions atomic.Pointer[Options]

// SetDefaultOptions sets the Options Create and Open use from now on (the
// zero Options restores the pwrite path). Segments already open keep theirs.
func SetDefaultOptions(o Options) {
	defaultOptions.Store(&o)
}

func currentOptions() Options {
	if o := defaultOptions.Load(); o != nil {
		return *o
	}
	return Options{}
}

// CreateWith is Create with explicit Options.
func CreateWith(path string, prealloc int64, o Options) (*Segment, error) {
	if o.Ring == nil {
		return createPwrite(path, prealloc)
	}
	s, err := openRing(path, true, o)
	if err != nil {
		return nil, err
	}
	s.prealloc = prealloc
	if o.CapLead {
		s.w.leadCap = prealloc
	}
	if prealloc > 0 || o.Direct {
		if err := s.w.reserveFor(s, 0); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := vfs.SyncDir(filepath.Dir(path)); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// RecycleWith opens the existing file at path, without truncating it, as a
// new empty segment (Size 0) that appends overwrite: a recycled segment
// file, whose blocks up to its size are allocated, written and durable
// with the file's metadata (a sealed, synced segment of the same
// filesystem, renamed to path by the caller). Direct PreWrite segments
// only. The bytes [0, the file's size aligned down to a page) count as
// reserved: appends there need no fallocate and no zero-fill, and since
// they are pure overwrites the segment shares device cache flushes
// (StartShared) from its first append, with Durable 0. Past them the
// zero-fill runs ahead as for CreateWith, but not past prealloc (when > 0)
// ahead of the appends. The file's old bytes past Size are never read
// (reads stop at Written, Recover and Verify at Size), and Seal, Close and
// TruncateTo cut i_size back to Size; after a crash they are still there,
// for the caller's recovery to tell from the segment's own. The parent
// directory is fsynced so the new name survives a crash.
func RecycleWith(path string, prealloc int64, o Options) (*Segment, error) {
	if o.Ring == nil || !o.Direct || !o.PreWrite {
		return nil, fmt.Errorf("segment: RecycleWith needs a Direct PreWrite segment: %w", errors.ErrUnsupported)
	}
	s, err := openRing(path, false, o)
	if err != nil {
		return nil, err
	}
	w := s.w
	old := s.size.Load()
	s.size.Store(0)
	s.prealloc = prealloc
	w.reset(0)
	w.reserved, w.leadCap = alignDown(old), prealloc
	w.recycledEnd.Store(old)
	w.durable.Store(0)
	w.cleanGen.Store(w.metaGen.Load() + 1) // nothing but data to make durable: shareable
	if err := vfs.SyncDir(filepath.Dir(path)); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// ZeroFilled is how many bytes of zeros the segment's PreWrite zero-fill
// wrote so far (0 for other segments).
func (s *Segment) ZeroFilled() int64 {
	if s.w == nil {
		return 0
	}
	return s.w.zeroed.Load()
}

// walkEnd is where a walk of the file (Recover, Verify, NextValidBatch)
// stops: the file's size, or Size for a recycled file whose old bytes lie
// past it (RecycleWith).
func (s *Segment) walkEnd() (int64, error) {
	end, err := s.file.Size()
	if err == nil && s.w != nil && s.w.recycledEnd.Load() > 0 {
		end = min(end, s.size.Load())
	}
	return end, err
}

// OpenWith is Open with explicit Options. For a Direct segment that was not
// closed cleanly, Size() is i_size, which may include a zero tail: call
// Recover (which truncates it) before appending.
func OpenWith(path string, o Options) (*Segment, error) {
	if o.Ring == nil {
		return openPwrite(path)
	}
	return openRing(path, false, o)
}

// ringWriter is the write side of a segment backed by a uring.Ring.
//
// Buffered (Direct false): Append submits one write of the caller's bytes
// and waits for it — a synchronous write through the ring.
//
// Direct: write-behind. Append copies into cur, the aligned chunk covering
// file [curBase, curBase+len(cur)), and returns; a full chunk is submitted as
// one write and replaced by a fresh one from the pool (Pool.Get blocks when
// every chunk is in flight: back-pressure). Sync submits the partially filled
// chunk up to the end of its last page and carries that last page over into
// a fresh chunk (curBase moves to the page), so the next write rewrites it.
// A write that starts with such a carried page waits until every earlier
// write has completed (written >= curLo), so two writes of one page are
// never in flight together. Readers see [0, written).
type ringWriter struct {
	ring *uring.Ring
	wf   *uring.File // write descriptor (O_DIRECT when direct; no fd of its own once registered)
	rf   *os.File    // direct: the segment's buffered descriptor, for fallocate and reads
	// noReadahead: rf's readahead is off (adviseRandom) while i_size runs
	// ahead of the written end; Segment.Prefetch reads ahead instead.
	noReadahead atomic.Bool
	direct      bool
	pool        *uring.Pool
	ownPool     bool
	prewrite    bool
	sharedMeta  bool  // Options.SharedMeta
	dioAlign    int64 // Direct: O_DIRECT offset alignment (dioAlign), <= pageBytes

	// mu guards the tail (cur...appended); Append holds it while copying,
	// Sync while submitting the tail. The other writer state (reserved,
	// preBusy, zero) is the segment caller's (serialized) and Append's.
	mu       sync.Mutex
	cur      []byte // nil = not loaded
	curBase  int64  // file position of cur[0], page aligned
	curLo    int64  // first byte of cur not yet submitted (>= curBase)
	appended int64  // end of the appended bytes
	reserved int64  // direct: i_size raised to here (RecycleWith: written blocks up to here)
	preBusy  bool   // a zero-fill of [reserved, preEnd) is running
	zero     []byte
	// leadCap (RecycleWith, CapLead: the segment's prealloc) stops the zero-fill
	// running ahead of the appends at that size: a recycled segment rolls
	// there, so zeros past it would only be cut again by Seal. 0 = no cap.
	leadCap int64
	// recycledEnd is the size of a recycled file (RecycleWith) while its
	// old bytes lie past Size: Close cuts i_size back to Size, walks stop
	// at Size. 0 once truncated, or for any other segment.
	recycledEnd atomic.Int64
	zeroed      atomic.Int64 // bytes of zeros written (PreWrite; ZeroFilled)

	// wmu guards the op free list, the in-flight count and wm; wcond is
	// signalled from Done callbacks (which never block on it).
	wmu      sync.Mutex
	wcond    sync.Cond
	ops      []*wop
	free     []*wop
	inflight int
	wm       uring.Watermark // logical bytes whose writes completed
	syncing  bool            // an fdatasync is in flight: new writes wait (Direct)

	// Ring-goroutine zero-fill state, see startPrewrite.
	preOp    uring.Op
	preNext  int64
	preEnd   int64
	preErr   error
	preSync  uring.Op
	preAlloc uring.Op    // the step's fallocate (startPrewrite)
	preHeld  bool        // preSync holds a zeroFills slot (prewriteSync)
	preDone  chan error  // cap 1
	urgent   atomic.Bool // an append waits for this zero-fill: its writes go first
	preMu    sync.Mutex  // guards preNext, preEnd and preErr

	written atomic.Int64  // wm.Value(): readers' limit
	wepoch  atomic.Uint64 // FlushEpoch() read when written last advanced; stored before written
	epochFn func() uint64
	durable atomic.Int64 // end covered by the last fdatasync; -1 after a truncate
	failed  atomic.Pointer[error]

	syncMu   sync.Mutex
	syncOp   uring.Op
	syncDone chan struct{}

	// Shared syncs (Segment.SyncShared): metaGen counts the metadata
	// changes (truncations, Seal) that an fdatasync of this file must make
	// durable; cleanGen is metaGen+1 of the last successful own fdatasync
	// that started after the change, 0 before the first. noShare is set by
	// Seal for good (appends after it allocate blocks).
	metaGen  atomic.Uint64
	cleanGen atomic.Uint64
	noShare  atomic.Bool
}

// wop is one append write and the logical byte range it carries.
type wop struct {
	op     uring.Op
	lo, n  int64
	putBuf []byte // pool chunk to return once the write completed
	// twin is the other half of a split write (submitSplit) while it is
	// in flight: the half completing last returns putBuf.
	twin *wop
}

func openRing(path string, create bool, o Options) (s *Segment, err error) {
	if o.Direct && !directSupported {
		return nil, fmt.Errorf("segment: O_DIRECT: %w", errors.ErrUnsupported)
	}
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	rf, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, err
	}
	wosf := rf
	if o.Direct {
		if wosf, err = openDirect(path, false); err != nil {
			rf.Close()
			return nil, err
		}
	}
	wf, err := o.Ring.RegisterFile(wosf)
	if err != nil {
		if wosf != rf {
			wosf.Close()
		}
		rf.Close()
		return nil, err
	}
	w := &ringWriter{ring: o.Ring, wf: wf, direct: o.Direct, pool: o.Pool, prewrite: o.Direct && o.PreWrite, sharedMeta: o.Direct && o.SharedMeta && !o.PreWrite, zero: o.Zeros}
	if o.Direct {
		w.epochFn = o.FlushEpoch
	}
	var f File = wf
	if o.Direct {
		f = NewOSFile(rf)
		w.rf = rf
		w.dioAlign = dioAlign(rf)
		// i_size runs ahead of the written end (zero-filled or unwritten
		// blocks): the kernel's readahead (8 MiB windows here) would read
		// past Written, and pages of zero-filled blocks read that way are
		// dropped again when the data's O_DIRECT write lands, so a
		// catch-up reader read them twice. Reads ahead come from Prefetch,
		// bounded by Written, until Seal cuts i_size to the end.
		adviseRandom(rf)
		w.noReadahead.Store(true)
		// Writes reach the O_DIRECT file through its fixed-file slot; its
		// descriptor would only count against RLIMIT_NOFILE (fallocate and
		// ftruncate go through rf). Unregistered (table full): kept.
		if _, err := wf.DropDescriptor(); err != nil {
			wf.Close()
			rf.Close()
			return nil, err
		}
	}
	closeAll := func() {
		wf.Close()
		if o.Direct {
			rf.Close()
		}
		if w.ownPool {
			w.pool.Close()
		}
	}
	if o.Direct && w.pool == nil {
		if w.pool, err = uring.NewPool(DirectChunkBytes, DirectDepth+1); err != nil {
			closeAll()
			return nil, err
		}
		w.ownPool = true
	}
	if need := 2; o.Direct && w.pool.Chunks() < need {
		closeAll()
		return nil, fmt.Errorf("segment: pool of %d chunks, a Direct segment needs at least %d", w.pool.Chunks(), need)
	}
	if n := len(o.Zeros); o.Zeros != nil && (n == 0 || n%uring.Alignment != 0) {
		closeAll()
		return nil, fmt.Errorf("segment: Zeros of %d bytes is not a positive multiple of %d", n, uring.Alignment)
	}
	if w.pool != nil && w.pool.ChunkBytes()%uring.Alignment != 0 {
		closeAll()
		return nil, fmt.Errorf("segment: pool chunk %d is not a multiple of %d", w.pool.ChunkBytes(), uring.Alignment)
	}
	s, err = New(path, f)
	if err != nil {
		closeAll()
		return nil, err
	}
	depth := 1
	if o.Direct {
		depth = DirectDepth
	}
	w.wcond.L = &w.wmu
	w.ops = make([]*wop, depth)
	w.free = make([]*wop, 0, depth)
	for i := range w.ops {
		wo := &wop{}
		wo.op.Tag = uint64(i)
		wo.op.Done = w.onWrite
		w.ops[i] = wo
		w.free = append(w.free, wo)
	}
	w.syncDone = make(chan struct{}, 1)
	w.syncOp.Done = w.onSync
	w.preDone = make(chan error, 1)
	w.preSync.Done = w.onPreSync
	w.preAlloc.Done = w.onPreAlloc
	w.preOp.Done = w.onPrewrite
	size := s.Size()
	w.reserved = size
	w.reset(size)
	w.durable.Store(size)
	s.readEnd = &w.written
	s.w = w
	return s, nil
}

// reset forgets the tail and restarts the watermarks at size (after Open,
// Recover, TruncateTo). No write is in flight.
func (w *ringWriter) reset(size int64) {
	w.mu.Lock()
	if w.cur != nil {
		w.pool.Put(w.cur)
		w.cur = nil
	}
	w.appended, w.curLo = size, size
	w.mu.Unlock()
	w.wmu.Lock()
	w.wm.Reset(size)
	if w.epochFn != nil {
		w.wepoch.Store(w.epochFn())
	}
	w.written.Store(size)
	w.wmu.Unlock()
}

func (w *ringWriter) fail(err error) error {
	w.failed.CompareAndSwap(nil, &err)
	return fmt.Errorf("%w: %w", ErrFailed, *w.failed.Load())
}

func (w *ringWriter) sticky() error {
	if e := w.failed.Load(); e != nil {
		return fmt.Errorf("%w: %w", ErrFailed, *e)
	}
	return nil
}

// onWrite is the Done of append writes (ring goroutine).
func (w *ringWriter) onWrite(op *uring.Op) {
	w.wmu.Lock()
	wo := w.ops[op.Tag]
	err := op.Err
	if err == nil {
		var v int64
		if v, err = w.wm.Complete(wo.lo, wo.n); err == nil {
			if w.epochFn != nil {
				// Read after the write completed and stored before
				// written: whoever sees the new written sees this
				// epoch or a later one.
				w.wepoch.Store(w.epochFn())
			}
			w.written.Store(v)
		}
	}
	if err != nil {
		e := err // escapes only on this path: no allocation per write
		w.failed.CompareAndSwap(nil, &e)
	}
	if wo.putBuf != nil {
		if t := wo.twin; t != nil {
			t.twin, wo.twin = nil, nil // t returns the chunk
		} else {
			w.pool.Put(wo.putBuf)
		}
		wo.putBuf = nil
	}
	wo.op.Buf = nil
	w.free = append(w.free, wo)
	w.inflight--
	w.wcond.Broadcast()
	w.wmu.Unlock()
}

func (w *ringWriter) onSync(*uring.Op) {
	w.wmu.Lock()
	w.syncing = false
	w.wcond.Broadcast()
	w.wmu.Unlock()
	w.syncDone <- struct{}{}
}

// submit sends one write of buf at off carrying logical bytes [lo, lo+n);
// put is returned to the pool when it completes. It waits for a free op.
func (w *ringWriter) submit(buf []byte, off, lo, n int64, put []byte, bg bool) error {
	wo, _, err := w.takeOps(1, put)
	if err != nil {
		return err
	}
	wo.lo, wo.n, wo.putBuf = lo, n, put
	wo.op.Code, wo.op.File, wo.op.Buf, wo.op.Off = uring.OpWrite, w.wf, buf, off
	wo.op.Background = bg
	if err := w.ring.Submit(&wo.op); err != nil {
		w.wmu.Lock()
		w.giveBack(wo)
		w.wmu.Unlock()
		if put != nil {
			w.pool.Put(put)
		}
		return w.fail(err)
	}
	return nil
}

// takeOps waits until k (1 or 2) write ops are free and no sync is in
// flight, and takes them (b is nil for k == 1; two are each other's
// twin). If the writer has failed it returns put, if any, to the pool
// and the error.
func (w *ringWriter) takeOps(k int, put []byte) (a, b *wop, err error) {
	w.wmu.Lock()
	for (len(w.free) < k || w.syncing) && w.failed.Load() == nil {
		w.wcond.Wait()
	}
	if err := w.sticky(); err != nil {
		w.wmu.Unlock()
		if put != nil {
			w.pool.Put(put)
		}
		return nil, nil, err
	}
	a = w.free[len(w.free)-1]
	if k == 2 {
		b = w.free[len(w.free)-2]
		a.twin, b.twin = b, a // under wmu: onWrite reads twin there
	}
	w.free = w.free[:len(w.free)-k]
	w.inflight += k
	w.wmu.Unlock()
	return a, b, nil
}

// giveBack returns a write op that was taken but not submitted. Caller
// holds wmu.
func (w *ringWriter) giveBack(wo *wop) {
	wo.twin, wo.putBuf, wo.op.Buf = nil, nil, nil
	w.free = append(w.free, wo)
	w.inflight--
	w.wcond.Broadcast()
}

// waitWritten waits until the written watermark reaches target or a write
// failed.
func (w *ringWriter) waitWritten(target int64) error {
	w.wmu.Lock()
	for w.written.Load() < target && w.failed.Load() == nil {
		w.wcond.Wait()
	}
	w.wmu.Unlock()
	return w.sticky()
}

// waitIdle waits until no append write is in flight.
func (w *ringWriter) waitIdle() {
	w.wmu.Lock()
	for w.inflight > 0 {
		w.wcond.Wait()
	}
	w.wmu.Unlock()
}

// append writes b at pos. Buffered: returns once written. Direct: returns
// once b is copied into chunks (see ringWriter).
func (w *ringWriter) append(s *Segment, b []byte, pos int64) error {
	if err := w.sticky(); err != nil {
		return err
	}
	end := pos + int64(len(b))
	if !w.direct {
		if end > s.reserved && s.prealloc > 0 && !s.sealed && s.reserved < s.prealloc {
			_ = s.reserve(end) // best effort, as on the pwrite path
		}
		w.mu.Lock()
		w.appended = end
		w.mu.Unlock()
		if err := w.submit(b, pos, pos, int64(len(b)), nil, false); err != nil {
			return err
		}
		return w.waitWritten(end)
	}
	if err := w.reserveFor(s, end); err != nil {
		if isResourceErr(err) {
			return fmt.Errorf("%w: %w", ErrReserve, err) // nothing written: a later append tries again
		}
		return w.fail(err)
	}
	_, err := w.copyIn(s, b, pos, nil, 0, 0)
	return err
}

// appendSpans is append for a Direct segment that also returns the spans
// of chunk memory holding b (Segment.AppendSpans); when the pool refuses a
// pin, it returns dst as it was (spans already pinned are released).
func (w *ringWriter) appendSpans(s *Segment, b []byte, pos int64, dst []Span, align int64, maxPins int) ([]Span, error) {
	if err := w.sticky(); err != nil {
		return dst, err
	}
	if err := w.reserveFor(s, pos+int64(len(b))); err != nil {
		if isResourceErr(err) {
			return dst, fmt.Errorf("%w: %w", ErrReserve, err)
		}
		return dst, w.fail(err)
	}
	return w.copyIn(s, b, pos, dst, align, maxPins)
}

// copyIn copies b into chunks at pos, submitting each chunk it fills.
// With align > 0 it also pins and returns the spans holding b (appended
// to dst), or dst unchanged when a pin is refused. Caller reserved room.
func (w *ringWriter) copyIn(s *Segment, b []byte, pos int64, dst []Span, align int64, maxPins int) ([]Span, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.loadTail(s, pos); err != nil {
		return dst, w.fail(err)
	}
	first, pinning := len(dst), align > 0
	c := int64(len(w.cur))
	for len(b) > 0 {
		off := pos - w.curBase
		n := int64(uring.CopyNT(w.cur[off:], b)) // the device reads it by DMA, the CPU does not
		if pinning {
			lo, hi := off&^(align-1), (off+n+align-1)&^(align-1)
			mem := w.cur[lo:hi:hi]
			if w.pool.TryPin(mem, maxPins) {
				dst = append(dst, Span{Mem: mem, Skip: int(off - lo), Len: int(n), pool: w.pool})
			} else {
				for _, sp := range dst[first:] {
					sp.Release()
				}
				dst, pinning = dst[:first], false
			}
		}
		b = b[n:]
		pos += n
		w.appended = pos
		if off+n < c {
			continue
		}
		if err := w.submitCur(c, true); err != nil {
			for _, sp := range dst[first:] {
				sp.Release()
			}
			return dst[:first], err
		}
		w.cur = w.pool.Get()
		w.curBase += c
		w.curLo = w.curBase
	}
	return dst, nil
}

// writeBehind submits the appended bytes not yet submitted (flushTail) if
// that cannot block: the page a partial chunk carries is not still being
// written by the previous partial write, no fdatasync holds new writes, a
// write op and a spare chunk are free. So a partial chunk's write goes to
// the device when it is appended rather than when the flusher gets to the
// log (a worker wake-up later, milliseconds when every worker waits on the
// device), and at most one partial write per segment is in flight: appends
// arriving meanwhile go out together with the next one. Errors are left to
// the next submit to report (sticky).
func (w *ringWriter) writeBehind() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur == nil || w.curLo >= w.appended || w.failed.Load() != nil {
		return
	}
	if w.curLo > w.curBase && w.written.Load() < w.curLo {
		return // the carried page's last write is in flight
	}
	w.wmu.Lock()
	ok := len(w.free) > 0 && !w.syncing
	w.wmu.Unlock()
	if !ok {
		return
	}
	next, ok := w.pool.TryGet()
	if !ok {
		return
	}
	if err := w.flushTailInto(next); err != nil {
		_ = w.fail(err)
	}
}

// submitCur submits cur[:hi] (hi page aligned, cur zeroed from appended to
// hi) at curBase; cur goes back to the pool when it completes. If cur starts
// with a page an earlier write also covered, that write must finish first,
// and the write starts at the last dioAlign boundary at or below curLo
// instead of at the page: the bytes before it are on the file already (on
// a 512-byte-sector disk a carried page costs 0-511 bytes again instead of
// 0-4095, about 1.8 KiB less per partition and flush on average).
func (w *ringWriter) submitCur(hi int64, bg bool) error {
	skip := int64(0)
	if w.curLo > w.curBase {
		if err := w.waitWritten(w.curLo); err != nil {
			return err
		}
		if w.dioAlign > 0 {
			skip = (w.curLo - w.curBase) &^ (w.dioAlign - 1)
		}
	}
	cur := w.cur
	w.cur = nil
	if split := alignDown(w.curLo-w.curBase) + pageBytes; w.sharedMeta && w.curLo > w.curBase && split < hi && split < w.appended-w.curBase {
		// The carried page is written blocks (the last write wrote all
		// of it), the pages after it unwritten extents: to ext4 a write
		// over both is not an overwrite, which it refuses to start
		// without blocking, so io_uring handed every such write to one
		// of its worker threads (a block trace showed each flush's
		// writes issued from iou-wrk). Two writes, each within one kind
		// of extent, are issued inline, and the block layer merges them
		// back into one request.
		return w.submitSplit(cur[skip:hi], w.curBase+skip, split-skip, w.curLo, w.appended-w.curLo, cur, bg)
	}
	return w.submit(cur[skip:hi], w.curBase+skip, w.curLo, w.appended-w.curLo, cur, bg)
}

// submitSplit is submit as two writes, buf[:at] and buf[at:], carrying
// logical bytes [lo, off+at) and [off+at, lo+n); put goes back to the pool
// once both completed.
func (w *ringWriter) submitSplit(buf []byte, off, at, lo, n int64, put []byte, bg bool) error {
	a, b, err := w.takeOps(2, put)
	if err != nil {
		return err
	}
	mid := off + at
	a.lo, a.n, a.putBuf = lo, mid-lo, put
	b.lo, b.n, b.putBuf = mid, lo+n-mid, put
	a.op.Code, a.op.File, a.op.Buf, a.op.Off, a.op.Background = uring.OpWrite, w.wf, buf[:at], off, bg
	b.op.Code, b.op.File, b.op.Buf, b.op.Off, b.op.Background = uring.OpWrite, w.wf, buf[at:], mid, bg
	if err := w.ring.Submit(&a.op); err != nil {
		w.wmu.Lock()
		w.giveBack(a)
		w.giveBack(b)
		w.wmu.Unlock()
		w.pool.Put(put)
		return w.fail(err)
	}
	if err := w.ring.Submit(&b.op); err != nil {
		w.wmu.Lock()
		if b.twin != nil {
			a.twin = nil // a is still in flight: it returns the chunk
		} else {
			w.pool.Put(put)
		}
		w.giveBack(b)
		w.wmu.Unlock()
		return w.fail(err)
	}
	return nil
}

// flushTail submits the appended bytes not yet submitted; the last partial
// page is carried into a fresh chunk. Caller holds mu.
func (w *ringWriter) flushTail() error {
	if w.cur == nil || w.curLo >= w.appended {
		return nil
	}
	return w.flushTailInto(w.pool.Get())
}

// flushTailInto is flushTail with next, a chunk from the pool, as the
// fresh chunk.
func (w *ringWriter) flushTailInto(next []byte) error {
	fill := w.appended - w.curBase
	hi := alignUp(fill)
	clear(w.cur[fill:hi])
	keep := alignDown(fill)
	copy(next, w.cur[keep:fill])
	if err := w.submitCur(hi, false); err != nil {
		w.pool.Put(next)
		return err
	}
	w.cur = next
	w.curBase += keep
	w.curLo = w.appended
	return nil
}

// loadTail loads cur when it is not in memory: a chunk at alignDown(pos)
// holding the partial page below pos, read back from the file. Caller holds
// mu.
func (w *ringWriter) loadTail(s *Segment, pos int64) error {
	if w.cur != nil {
		return nil
	}
	w.cur = w.pool.Get()
	w.curBase, w.curLo, w.appended = alignDown(pos), pos, pos
	if k := pos - w.curBase; k > 0 {
		if err := readFull(s.file, w.cur[:k], w.curBase); err != nil {
			w.pool.Put(w.cur)
			w.cur = nil
			return err
		}
	}
	return nil
}

// drain submits the tail and waits for every write (Direct), for Close,
// TruncateTo, Seal and Recover.
func (w *ringWriter) drain() error {
	w.mu.Lock()
	err := w.flushTail()
	w.mu.Unlock()
	w.waitIdle()
	if err != nil {
		return err
	}
	return w.sticky()
}

// reserveFor raises i_size so that [0, end) is below it (Direct), in
// doubling steps (preallocStep) capped at the segment's prealloc (when set and not
// yet exceeded), by fallocate or by the background zero-fill.
func (w *ringWriter) reserveFor(s *Segment, end int64) error {
	if !w.direct {
		if s.prealloc > 0 {
			return s.reserve(end)
		}
		return nil
	}
	if s.sealed {
		return nil // appends after Seal extend the file as they go
	}
	for end > w.reserved || (end == 0 && w.reserved == 0) {
		if w.preBusy {
			if err := w.waitPrewrite(); err != nil {
				return err
			}
			continue
		}
		if err := w.startPrewrite(w.nextStep(s, end)); err != nil {
			return err
		}
	}
	if w.preBusy {
		// Take a finished step now, not when an append reaches its end:
		// the next step then starts with the whole lead (up to 3/4 of a
		// step ahead) instead of one step, so a zero-fill has the
		// time of several steps of appends to finish.
		select {
		case err := <-w.preDone:
			if err := w.endPrewrite(err); err != nil {
				return err
			}
		default:
		}
	}
	if !w.preBusy && (w.leadCap <= 0 || w.reserved < alignUp(w.leadCap)) && end > w.reserved-3*preallocStep(w.reserved)/4 {
		return w.startPrewrite(w.nextStep(s, w.reserved+1))
	}
	return nil
}

// nextStep is the reservation end covering end plus one step (capped at
// prealloc while end is below it), page aligned.
func (w *ringWriter) nextStep(s *Segment, end int64) int64 {
	step := preallocStep(w.reserved)
	if w.prewrite {
		step = min(step, prewriteStepBytes)
	}
	n := alignUp(max(end, w.reserved) + step)
	if s.prealloc > 0 && end <= s.prealloc {
		n = max(min(n, alignUp(s.prealloc)), alignUp(end))
	}
	return n
}

// prewriteStepBytes caps a PreWrite reservation step (below
// PreallocStepBytes): an append that catches up with a zero-fill waits for
// the rest of its step, and partitions at the same rate cross their steps
// together, so with 16 MiB steps a few appends waited 60-100 ms behind
// 96 partitions' zeros; with 4 MiB steps and the waiting segment first
// (urgent) the rest of one step is at most four writes.
const prewriteStepBytes = 4 << 20

// startPrewrite raises i_size to n, then (prewrite) zero-fills [reserved, n)
// and fdatasyncs it, in the background; reserved becomes n when it
// finishes (waitPrewrite). The writes go one at a time per segment, and
// through zeroFills engine-wide. Without prewrite (log.io.zero.fill=false)
// the step is the fallocate alone: the shared flush's syncfs makes it
// durable.
func (w *ringWriter) startPrewrite(n int64) error {
	start := n
	if w.prewrite {
		if w.zero == nil {
			w.zero = zeroChunk()
		}
		// Zero from the first page boundary at or past reserved: the page
		// holding reserved may hold data (reserved == Size after a reopen).
		start = alignUp(w.reserved)
	}
	w.preMu.Lock()
	w.preNext, w.preEnd, w.preErr = start, n, nil
	w.preMu.Unlock()
	op := &w.preAlloc
	op.Code, op.File, op.Off, op.Len = uring.OpFallocate, w.wf, 0, n
	if err := w.ring.Submit(op); err != nil {
		return err
	}
	w.preBusy = true
	return nil
}

// onPreAlloc is the Done of a step's fallocate (raising i_size to the
// step's end): the zero-fill writes follow. The fallocate is asynchronous
// because it waits for the segment's direct writes in flight (ext4 waits
// for them under the inode lock): done synchronously in Append, 96
// partitions crossing their steps within one produce request held it
// 50-100 ms.
func (w *ringWriter) onPreAlloc(op *uring.Op) {
	if op.Err != nil {
		w.preDone <- op.Err
		return
	}
	w.preMu.Lock()
	more := w.preNext < w.preEnd
	w.preMu.Unlock()
	switch {
	case !w.prewrite:
		w.preDone <- nil
		return
	case !more:
		w.prewriteSync(false)
		return
	}
	if zeroFills.acquire(w) {
		w.submitZero()
	}
}

// submitZero submits the next zero-fill write; the caller holds one of
// zeroFills' slots, which onPrewrite passes on.
func (w *ringWriter) submitZero() {
	w.preMu.Lock()
	op := &w.preOp
	op.Code, op.File, op.Off = uring.OpWrite, w.wf, w.preNext
	op.Buf = w.zero[:min(int64(len(w.zero)), w.preEnd-w.preNext)]
	w.preNext += int64(len(op.Buf))
	w.preMu.Unlock()
	if err := w.ring.Submit(op); err != nil {
		op.Err = err
		w.onPrewrite(op)
	}
}

// onPrewrite is the Done of a zero-fill write: it passes the slot on, chains
// the segment's next write and issues the fdatasync after the last.
func (w *ringWriter) onPrewrite(op *uring.Op) {
	w.preMu.Lock()
	if op.Err != nil && w.preErr == nil {
		w.preErr = op.Err
	}
	if op.Err == nil {
		w.zeroed.Add(int64(len(op.Buf)))
	}
	more := w.preErr == nil && w.preNext < w.preEnd
	perr := w.preErr
	w.preMu.Unlock()
	if more || perr != nil {
		passZeroSlot()
	}
	switch {
	case more:
		if zeroFills.acquire(w) {
			w.submitZero()
		}
	case perr != nil:
		w.preDone <- perr
	default:
		w.prewriteSync(true)
	}
}

// passZeroSlot gives a zeroFills slot back, or hands it to the next
// waiting segment and submits that segment's write.
func passZeroSlot() {
	if next := zeroFills.release(); next != nil {
		next.submitZero()
	}
}

// prewriteSync fdatasyncs the zero-filled step (its extents and i_size).
// held: the caller holds a zeroFills slot, which the sync keeps until it
// completes, so steps' syncs run one at a time, like their writes. On this
// VM's disk every flush pays for all the bytes written before it: 96
// partitions crossing their steps together queued 96 syncs at once, each
// behind the others' zeros, and the appends' shared flushes behind them
// (shared fdatasyncs of 17-70 ms, a produce p99 of 100-290 ms in the
// seconds of those crossings against 25-55 ms between them).
func (w *ringWriter) prewriteSync(held bool) {
	w.preHeld = held
	w.preSync.Code, w.preSync.File, w.preSync.Datasync = uring.OpFsync, w.wf, true
	if err := w.ring.Submit(&w.preSync); err != nil {
		w.preHeld = false
		if held {
			passZeroSlot()
		}
		w.preDone <- err
	}
}

// zeroFills bounds the zero-fill writes in flight across every segment of
// the process. They share the device with the appends' writes: partitions
// at the same rate cross their reservation steps together, and unthrottled
// 96 of them queued ~1.5 GB of zeros at once ahead of the appends (produce
// p99 60-225 ms in those seconds against 3 ms between them).
//
// Tried and not kept: pacing the zero-fill of steps with a long lead by
// the appends (a write allowed per 5/4 of its bytes appended), so each
// flush carries about as many zeros as records instead of a burst. The
// zeros went out flat, but the closed-loop keyed run lost 10-15 % of its
// throughput (234,000-263,000 against 280,000-295,000 records/s without
// pacing, alternated) and target 2's slow seconds stayed: they are the
// load generator's, not the steps' (docs/performance.md, "Session 12").
var zeroFills = zeroScheduler{free: zeroFillDepth}

// zeroFillDepth is how many zero-fill writes (of at most 1 MiB) may be in
// flight at once, process-wide. One: with four, a 64 KiB append write
// queued behind up to 4 MiB of zeros, and 12 % of the flushes of a
// 200,000 records/s kgo run took 4-8 ms (produce p99 16-23 ms); with one,
// 0.5-0.9 % did (p99 11.4-11.6 ms), and one 1 MiB write at a time still
// zero-fills ahead of 640,000 records/s (closed loop, 96 partitions).
const zeroFillDepth = 1

// zeroScheduler hands zeroFillDepth slots to segments in FIFO order: a
// segment holds one while its zero-fill write (or its step's closing
// fdatasync) is in flight; the completion passes it to the next waiting
// segment.
type zeroScheduler struct {
	mu      sync.Mutex
	free    int
	waiting []*ringWriter
}

// acquire takes a slot for w, or queues w (it gets the slot from a later
// release, which submits its write) and returns false.
func (z *zeroScheduler) acquire(w *ringWriter) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.free > 0 {
		z.free--
		return true
	}
	z.waiting = append(z.waiting, w)
	if w.urgent.Load() {
		z.toFront(len(z.waiting) - 1)
	}
	return false
}

// hurry marks w urgent (an append, a truncation or a close waits for its
// zero-fill) until its step ends: its writes go before those of segments
// filling ahead of need.
func (z *zeroScheduler) hurry(w *ringWriter) {
	w.urgent.Store(true)
	z.mu.Lock()
	defer z.mu.Unlock()
	for i, x := range z.waiting {
		if x == w {
			z.toFront(i)
			return
		}
	}
}

// toFront moves waiting[i] to the head of the list. Caller holds mu.
func (z *zeroScheduler) toFront(i int) {
	w := z.waiting[i]
	copy(z.waiting[1:i+1], z.waiting[:i])
	z.waiting[0] = w
}

// release gives a slot back, or returns the waiting segment it passes to.
func (z *zeroScheduler) release() *ringWriter {
	z.mu.Lock()
	defer z.mu.Unlock()
	if len(z.waiting) > 0 {
		w := z.waiting[0]
		z.waiting[0] = nil
		z.waiting = z.waiting[1:]
		if len(z.waiting) == 0 {
			z.waiting = nil
		}
		return w
	}
	z.free++
	return nil
}

func (w *ringWriter) onPreSync(op *uring.Op) {
	if w.preHeld {
		w.preHeld = false
		passZeroSlot()
	}
	w.preDone <- op.Err
}

// waitPrewrite waits for the running zero-fill, hurried first (its writes
// go before those of segments filling ahead of need); reserved then covers
// it.
func (w *ringWriter) waitPrewrite() error {
	zeroFills.hurry(w)
	return w.endPrewrite(<-w.preDone)
}

// endPrewrite records the end of the running step: reserved covers it
// unless it failed.
func (w *ringWriter) endPrewrite(err error) error {
	w.urgent.Store(false)
	w.preBusy = false
	if err != nil {
		return err
	}
	w.reserved = w.preEnd
	return nil
}

// writeOut submits the appended bytes not yet submitted and waits until
// they are written; target is the appended end it covered (sync, Flush).
func (w *ringWriter) writeOut() (target int64, err error) {
	if target, err = w.submitOut(); err != nil {
		return 0, err
	}
	return target, w.waitWritten(target)
}

// submitOut submits the appended bytes not yet submitted; target is the
// appended end they reach.
func (w *ringWriter) submitOut() (target int64, err error) {
	if err := w.sticky(); err != nil {
		return 0, err
	}
	w.mu.Lock()
	target = w.appended
	err = w.flushTail()
	w.mu.Unlock()
	if err != nil {
		return 0, w.fail(err)
	}
	return target, nil
}

// sync makes every appended byte durable: it submits the tail, waits until
// the written watermark covers the appended end, then issues one fdatasync
// through the ring. Safe concurrently with append (it covers what was
// appended before it started); concurrent syncs are serialized, and one that
// finds the durable watermark already past its target returns at once.
func (w *ringWriter) sync() error {
	target, err := w.writeOut()
	if err != nil {
		return err
	}
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	if w.durable.Load() >= target {
		return nil
	}
	w.syncOp.Code, w.syncOp.File, w.syncOp.Datasync = uring.OpFsync, w.wf, true
	if w.direct {
		// Writes submitted while the fdatasync runs lengthen it (package
		// uring measured p99 7-73 ms -> 2-3 ms when held back): new writes
		// wait in submit until it completes. Copies into chunks go on.
		w.wmu.Lock()
		w.syncing = true
		w.wmu.Unlock()
	}
	gen := w.metaGen.Load()
	if err := w.ring.Submit(&w.syncOp); err != nil {
		w.wmu.Lock()
		w.syncing = false
		w.wcond.Broadcast()
		w.wmu.Unlock()
		return w.fail(err)
	}
	<-w.syncDone
	if err := w.syncOp.Err; err != nil {
		return w.fail(err)
	}
	w.durable.Store(target)
	if w.prewrite {
		w.cleanGen.Store(gen + 1)
	}
	return w.sticky()
}

// shareable reports whether every byte appended from now on overwrites
// blocks that are allocated, written and durable with the file's metadata,
// so that a device cache flush makes it durable (see Segment.SyncShared):
// PreWrite (appends stay below the zero-filled, fdatasynced reservation),
// not sealed, and an own fdatasync since the last truncation. With
// SharedMeta the shared flush writes the metadata too: not sealed is enough.
func (w *ringWriter) shareable() bool {
	if w.sharedMeta {
		return !w.noShare.Load()
	}
	return w.prewrite && !w.noShare.Load() && w.cleanGen.Load() == w.metaGen.Load()+1
}

// settlePrewrite waits for the running zero-fill step, if any, before the
// file is cut (Seal, TruncateTo): its fallocate and zero writes raise
// i_size as they land, so one still running when the file is cut grew it
// again afterwards, and a sealed segment kept a tail of zeros past its
// last batch (a reader of the file, and a restart, took them for the
// segment's bytes). Its error is the step's, which the cut makes moot.
func (w *ringWriter) settlePrewrite() {
	if w.direct && w.preBusy {
		_ = w.waitPrewrite()
	}
}

// truncated updates the writer after the file was cut to size (drain and
// settlePrewrite were called before the cut).
func (w *ringWriter) truncated(size int64) {
	w.metaGen.Add(1)
	w.recycledEnd.Store(0) // i_size is size: the old bytes past it are gone
	w.reset(size)
	w.durable.Store(-1)
	if w.direct {
		w.settlePrewrite()
		w.reserved = size
	}
}

// close drains, waits for background work, releases chunks and closes the
// write descriptor. For Direct, i_size is cut back to the appended end (and
// made durable when the segment was fully synced) so a clean reopen sees the
// valid end.
func (w *ringWriter) close(s *Segment) error {
	first := w.drain()
	if errors.Is(first, ErrFailed) {
		first = nil // already reported by Append/Sync
	}
	if w.preBusy {
		if err := w.waitPrewrite(); err != nil && first == nil && w.failed.Load() == nil {
			first = err
		}
	}
	w.mu.Lock()
	if w.cur != nil {
		w.pool.Put(w.cur)
		w.cur = nil
	}
	size := w.appended
	w.mu.Unlock()
	w.zero = nil
	if w.direct && w.failed.Load() == nil && (w.reserved > size || w.recycledEnd.Load() > size) {
		if err := s.file.Truncate(size); err != nil && first == nil {
			first = err
		}
		if w.durable.Load() >= size {
			if err := s.file.Sync(); err != nil && first == nil {
				first = err
			}
		}
	}
	if err := w.wf.Close(); err != nil && first == nil {
		first = err
	}
	if w.ownPool {
		if err := w.pool.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// pageBytes is the page (and chunk write) alignment of Direct writes.
const pageBytes = uring.Alignment

func alignDown(n int64) int64 { return n &^ (uring.Alignment - 1) }
func alignUp(n int64) int64   { return (n + uring.Alignment - 1) &^ (uring.Alignment - 1) }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
