package segment

import (
	"errors"
	"fmt"
	"github.com/stratalog/strata/internal/uring"
	"github.com/stratalog/strata/internal/vfs"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
)

var (
	// ErrClosed is returned by operations on a closed segment.
	ErrClosed = errors.New("segment: closed")
	// ErrFailed wraps the first write or sync error; the segment refuses
	// further Appends and Syncs after it (see the package doc).
	ErrFailed = errors.New("segment: earlier write or sync failed")
	// ErrCorrupt is returned by Scan for a batch header that does not parse.
	ErrCorrupt = errors.New("segment: corrupt batch")
	// ErrRange is returned for positions or sizes outside the segment.
	ErrRange = errors.New("segment: position out of range")
	// ErrReserve wraps running out of space, memory or descriptors while
	// reserving room for an append (a fallocate or zero-fill step): nothing
	// was written, the segment stays usable and a later append tries again.
	ErrReserve = errors.New("segment: reserving space failed")
)

// Segment is one .log file. Appends are serialized by the caller (engine holds
// the partition lock); ReadAt/File are safe concurrently with Append.
type Segment struct {
	file File
	osf  *os.File // nil unless the File is backed by an *os.File
	fsys vfs.FS   // where the name lives (FileOf's file system); nil: vfs.OS

	path   atomic.Pointer[string]
	size   atomic.Int64 // valid end; published after the bytes are written
	closed atomic.Bool
	cuts   atomic.Uint64 // truncations below the end (TruncateTo, Recover): see Truncations

	// Writer-only state (caller serializes).
	prealloc int64 // the most to reserve (the segment's size limit); 0 = none
	reserved int64 // bytes reserved so far: [0, reserved)
	sealed   bool
	failed   atomic.Pointer[error] // first write/sync error, sticky (Sync may run beside Append)

	w       *ringWriter   // non-nil for a ring-backed segment (CreateWith/OpenWith)
	readEnd *atomic.Int64 // readers' limit when below size (Direct: written watermark); nil = size
}

// PreallocStepBytes is the largest step a segment's reservation grows by.
// Reserving the whole segment.bytes up front would hold 1 GiB of disk per
// partition (96 GiB for 96 partitions) before any data arrives; steps keep
// the reservation close to the data while still avoiding block allocation on
// most appends.
const PreallocStepBytes = 16 << 20

// PreallocFirstStepBytes is the first step: each later one is as large as
// the reservation so far (it doubles) up to PreallocStepBytes, so an idle
// partition's segment holds 256 KiB of reserved disk instead of 16 MiB
// (10,000 partitions: 2.5 GB instead of 160 GB; a Direct segment raises
// i_size by the step), while a busy one reaches 16 MiB steps after six
// fallocate calls.
const PreallocFirstStepBytes = 256 << 10

// preallocStep is the step after a reservation of reserved bytes.
func preallocStep(reserved int64) int64 {
	return min(max(reserved, PreallocFirstStepBytes), PreallocStepBytes)
}

// Create makes a new empty segment file at path (truncating any file already
// there); if prealloc > 0 it reserves space with fallocate(FALLOC_FL_KEEP_SIZE)
// so i_size stays the real end (fallback: none, if the filesystem refuses):
// PreallocFirstStepBytes now, and a further, doubling step (at most
// PreallocStepBytes) each time appends reach the end of the reservation,
// never past prealloc. The parent directory is fsynced so
// the new file survives a crash.
//
// Create uses the Options set by SetDefaultOptions (the pwrite path unless
// set); CreateWith takes them explicitly.
func Create(path string, prealloc int64) (*Segment, error) {
	return CreateWith(path, prealloc, currentOptions())
}

func createPwrite(path string, prealloc int64) (*Segment, error) {
	return CreateFS(vfs.OS, path, prealloc)
}

// Open opens an existing segment; Size() is the file's i_size. It uses the
// Options set by SetDefaultOptions; OpenWith takes them explicitly.
func Open(path string) (*Segment, error) {
	return OpenWith(path, currentOptions())
}

func openPwrite(path string) (*Segment, error) { return OpenFS(vfs.OS, path) }

// New makes a segment over an already open File (a real file from NewOSFile
// or FileOf, an io_uring file, or a segmenttest fake); Size() starts at
// f.Size(). path is what Path reports and what Rename moves, on the file
// system FileOf was given (vfs.OS for any other File). The segment owns f.
func New(path string, f File) (*Segment, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, fmt.Errorf("%w: file size %d", ErrRange, size)
	}
	s := &Segment{file: f}
	if of, ok := f.(osFiler); ok {
		s.osf = of.OSFile() // File's answer for Files other than osFile
	}
	if n, ok := f.(namedOn); ok {
		s.fsys = n.fileSystem()
	}
	s.path.Store(&path)
	s.size.Store(size)
	return s, nil
}

// Path is the segment's current file path.
func (s *Segment) Path() string { return *s.path.Load() }

// Size is the number of valid bytes: the end of the last Append, or the valid
// end found by Recover.
func (s *Segment) Size() int64 { return s.size.Load() }

// File returns the underlying *os.File for sendfile by offset (never seek or
// close it), or nil when the segment is not backed by an *os.File. A
// segment given a FileCache may have its descriptor closed while idle: hold
// Pin from before File until the last use of the returned file.
func (s *Segment) File() *os.File {
	if o, ok := s.file.(*osFile); ok {
		return o.OSFile()
	}
	return s.osf
}

// SetFileCache lets c close the segment's descriptor while it is unused
// and synced, and reopen it by path at its next use (see FileCache); nil
// keeps it open from its next use on. Meant for sealed segments: an
// active one would be reopened after every Sync. Segments not backed by
// an *os.File (test files) ignore it; so do a Direct segment's ring writes
// (they go through the ring's fixed-file slot).
func (s *Segment) SetFileCache(c *FileCache) error {
	o, ok := s.file.(*osFile)
	if !ok {
		return nil
	}
	return o.setCache(c, s.Path)
}

// Pin keeps the segment's descriptor open (reopening it if parked) until
// the matching Unpin, so File's result stays valid in between. A failed
// reopen still counts as a pin (call Unpin); File is then nil and reads
// return the error.
func (s *Segment) Pin() {
	o, ok := s.file.(*osFile)
	if !ok {
		return
	}
	if _, err := o.get(false); err != nil {
		o.mu.Lock()
		o.pins++ // nothing open to hold; keeps Pin/Unpin balanced
		o.mu.Unlock()
	}
}

// Unpin ends a Pin.
func (s *Segment) Unpin() {
	if o, ok := s.file.(*osFile); ok {
		o.put()
	}
}

// Append writes b at Size() with one positional write and advances Size by
// len(b); it returns the position b was written at. The caller serializes
// Appends. Data is durable only after Sync.
func (s *Segment) Append(b []byte) (pos int64, err error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if s.failed.Load() != nil {
		return 0, s.stickyErr()
	}
	pos = s.size.Load()
	if len(b) == 0 {
		return pos, nil
	}
	if s.w != nil {
		if err := s.w.append(s, b, pos); err != nil {
			return 0, err
		}
		s.size.Store(pos + int64(len(b)))
		return pos, nil
	}
	if end := pos + int64(len(b)); end > s.reserved && s.prealloc > 0 && !s.sealed && s.reserved < s.prealloc {
		// Best effort, like the first reservation: appends work without it.
		_ = s.reserve(end)
	}
	n, err := s.file.WriteAt(b, pos)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		e := err // err is the named result, rewritten by the return
		s.failed.CompareAndSwap(nil, &e)
		return 0, s.stickyErr()
	}
	s.size.Store(pos + int64(n))
	return pos, nil
}

// Span is memory of a Direct segment's chunk that holds bytes an
// AppendSpans call appended: Mem[Skip:Skip+Len] are those bytes, and Mem
// is widened to the segment's O_DIRECT alignment at both ends (its address
// and length are multiples of Align), so that it can be written with
// O_DIRECT elsewhere (the engine's journal) without a copy. The bytes
// around the appended ones are other bytes of the chunk: those before are
// earlier appends; those after may change while the span is held. The
// chunk stays out of its pool until Release.
type Span struct {
	Mem       []byte
	Skip, Len int
	pool      *uring.Pool
}

// Release lets the span's chunk go back to its pool.
func (sp Span) Release() {
	if sp.pool != nil {
		sp.pool.Unpin(sp.Mem)
	}
}

// AppendSpans is Append that also returns, appended to dst, the spans of
// chunk memory now holding b, each pinned (the caller releases every one).
// It returns no spans (dst unchanged) when the segment is not Direct or
// when pinning would hold more than maxPins of a pool's chunks: the caller
// then copies b as it would without spans. align is the alignment of every
// span (a multiple of the segment's O_DIRECT alignment, at most
// uring.Alignment).
func (s *Segment) AppendSpans(b []byte, dst []Span, align int64, maxPins int) (pos int64, spans []Span, err error) {
	if s.w == nil || !s.w.direct || len(b) == 0 || align < s.w.dioAlign || align > uring.Alignment {
		pos, err = s.Append(b)
		return pos, dst, err
	}
	if s.closed.Load() {
		return 0, dst, ErrClosed
	}
	if s.failed.Load() != nil {
		return 0, dst, s.stickyErr()
	}
	pos = s.size.Load()
	spans, err = s.w.appendSpans(s, b, pos, dst, align, maxPins)
	if err != nil {
		return 0, dst, err
	}
	s.size.Store(pos + int64(len(b)))
	return pos, spans, nil
}

// ReadAt reads from the valid bytes of the segment only: a read crossing
// Size() returns the bytes below it and io.EOF. Safe concurrently with Append.
func (s *Segment) ReadAt(p []byte, off int64) (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if off < 0 {
		return 0, fmt.Errorf("%w: read at %d", ErrRange, off)
	}
	size := s.readable()
	if off >= size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	short := false
	if int64(len(p)) > size-off {
		p = p[:size-off]
		short = true
	}
	n, err := s.file.ReadAt(p, off)
	if err == nil && short {
		err = io.EOF
	}
	if err == io.EOF && n == len(p) && !short {
		err = nil
	}
	return n, err
}

// Sync makes every appended byte durable (fdatasync). A failure is sticky.
func (s *Segment) Sync() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.w != nil {
		o, plain := s.file.(*osFile) // a Direct segment's read side
		var gen uint64
		if plain {
			gen = o.writes()
		}
		err := s.w.sync()
		if err == nil && plain {
			o.syncedAt(gen)
		}
		return err
	}
	if s.failed.Load() != nil {
		return s.stickyErr()
	}
	if err := s.file.Sync(); err != nil {
		s.failed.CompareAndSwap(nil, &err)
		return s.stickyErr()
	}
	return nil
}

// SyncShared is Sync for a segment whose unsynced bytes are made durable
// by a flush of the device's volatile write cache alone: a Direct ring
// segment with PreWrite, not sealed, synced once by Sync since it was
// opened or last truncated. Its appends overwrite blocks that the
// zero-fill already allocated, wrote and fdatasynced with the file's
// metadata (i_size, extents), so nothing but the data is unsynced, and the
// data of a completed O_DIRECT write is in the device or its cache; any
// flush of that cache issued after the write completed makes it durable
// (on Linux, an fdatasync of any file of the filesystem sends the device
// a cache flush even when the file itself has nothing to write).
//
// SyncShared submits the partial tail, waits until every appended byte is
// written and calls flush, which must issue such a cache flush after it
// was called (a batch of segments can share one: engine's group flush);
// then the durable watermark covers the appended bytes. When the segment
// does not qualify it does nothing and returns shared false: call Sync. A
// failure (of a write or of flush) is sticky, as for Sync.
func (s *Segment) SyncShared(flush func() error) (shared bool, err error) {
	target, shared, err := s.StartShared()
	if !shared || err != nil {
		return shared, err
	}
	if err := s.WaitWritten(target); err != nil {
		return true, err
	}
	if s.Durable() >= target {
		return true, nil
	}
	if err := flush(); err != nil {
		return true, s.w.fail(err)
	}
	return true, s.MarkDurable(target)
}

// StartShared, WaitWritten and MarkDurable are SyncShared in three steps,
// so that one device cache flush can serve many segments: StartShared on
// each (it submits the partial tail and returns the appended end it
// covers), WaitWritten on each, then one flush that starts after the last
// WaitWritten returned (or, with Options.FlushEpoch, one numbered above
// every WrittenEpoch), then MarkDurable(target) on each. A segment that
// does not qualify (see SyncShared) returns shared false from StartShared:
// call Sync. Errors are sticky, as for Sync.
func (s *Segment) StartShared() (target int64, shared bool, err error) {
	if s.closed.Load() {
		return 0, false, ErrClosed
	}
	if s.w == nil || !s.w.shareable() {
		return 0, false, nil
	}
	target, err = s.w.submitOut()
	return target, true, err
}

// WaitWritten waits until every byte below target (from StartShared) is
// written. See StartShared.
func (s *Segment) WaitWritten(target int64) error { return s.w.waitWritten(target) }

// WriteBehind starts the write of the appended bytes still in a Direct
// segment's partial tail chunk now, instead of at the next StartShared,
// Sync or Flush, if that needs no waiting: no earlier write of the chunk's
// first page in flight, no fdatasync holding new writes, a free write op
// and a spare pool chunk. At most one such write per segment is in flight;
// appends meanwhile go with the next. A caller whose appends wait for
// durability calls it after each append so the write reaches the device
// before the flusher gets to the segment. No-op for other segments.
func (s *Segment) WriteBehind() {
	if s.w == nil || !s.w.direct || s.closed.Load() {
		return
	}
	s.w.writeBehind()
}

// WrittenEpoch reports, after WaitWritten(target) returned, a value of
// Options.FlushEpoch read after the writes below target completed: a
// device cache flush numbered above it started after them, so it may
// serve MarkDurable(target) even if it started before WaitWritten
// returned. ok is false without FlushEpoch (then only a flush that starts
// after WaitWritten returned qualifies).
func (s *Segment) WrittenEpoch() (epoch uint64, ok bool) {
	if s.w == nil || s.w.epochFn == nil {
		return 0, false
	}
	return s.w.wepoch.Load(), true
}

// MarkDurable raises the durable watermark to target after a device cache
// flush that started once WaitWritten(target) had returned. See
// StartShared.
func (s *Segment) MarkDurable(target int64) error {
	w := s.w
	w.syncMu.Lock()
	if w.durable.Load() < target {
		w.durable.Store(target)
	}
	w.syncMu.Unlock()
	return w.sticky()
}

// TruncateTo drops every byte at or past size (ftruncate). size must be
// between 0 and Size(). A segment created with preallocation gets its
// reservation back (ftruncate releases blocks past i_size).
func (s *Segment) TruncateTo(size int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	cur := s.size.Load()
	if size < 0 || size > cur {
		return fmt.Errorf("%w: truncate to %d, size %d", ErrRange, size, cur)
	}
	if s.w != nil {
		if err := s.w.drain(); err != nil {
			return err
		}
		s.w.settlePrewrite()
	}
	// Publish the smaller size first so concurrent readers stop short of the
	// bytes being dropped.
	s.size.Store(size)
	if size < cur {
		s.cuts.Add(1)
	}
	if err := s.file.Truncate(size); err != nil {
		return err
	}
	if s.w != nil {
		s.w.truncated(size)
		if s.w.direct {
			return nil // the next Append raises i_size again
		}
	}
	if s.prealloc > 0 && !s.sealed {
		// Best effort: the reservation only saves block allocation later;
		// appends work without it, so a refusal (ENOSPC) is not an error here.
		reserved := s.reserved
		s.reserved = 0
		_ = s.reserve(min(size, reserved))
	}
	return nil
}

// Seal releases preallocated space past Size() (ftruncate to Size) when the
// segment stops being the active one. Appending after Seal still works but
// allocates blocks as it goes.
func (s *Segment) Seal() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.w != nil {
		if err := s.w.drain(); err != nil {
			return err
		}
		s.w.settlePrewrite()
	}
	if err := s.file.Truncate(s.size.Load()); err != nil {
		return err
	}
	if s.w != nil && s.w.direct {
		s.w.noShare.Store(true)
		s.w.truncated(s.size.Load())
		if s.w.noReadahead.Swap(false) {
			adviseNormal(s.w.rf) // i_size is the end now: the kernel's readahead stops there
		}
	}
	s.sealed = true
	return nil
}

// prefetchBytes is how far ahead of a read Prefetch brings a Direct
// segment's bytes into the page cache (at least the read itself).
const prefetchBytes = 2 << 20

// Prefetch starts reading [pos, pos+max(n, 2 MiB)) into the page cache,
// bounded by Written, without waiting, for a Direct segment whose
// descriptor has the kernel's readahead off (see openRing): the reads
// that follow (ReadAt, a sendfile of File) then find their pages, or wait
// for one read instead of many. Other segments rely on the kernel's
// readahead and ignore it.
func (s *Segment) Prefetch(pos, n int64) {
	if s.w == nil || !s.w.noReadahead.Load() || s.closed.Load() {
		return
	}
	end := min(pos+max(n, prefetchBytes), s.readable())
	if end > pos {
		adviseWillNeed(s.w.rf, pos, end-pos)
	}
}

// Close closes the file. Unsynced data is not flushed: call Sync first.
func (s *Segment) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	var werr error
	if s.w != nil {
		werr = s.w.close(s)
		if !s.w.direct {
			return werr // s.file is the ring's File, closed by w.close
		}
	}
	if err := s.file.Close(); err != nil {
		return err
	}
	return werr
}

// Rename moves the segment's file to newPath (which must be on the same
// filesystem) and fsyncs the parent directory, through the file system its
// name lives on (see New). It works on closed segments too (for example to
// mark a deleted segment).
func (s *Segment) Rename(newPath string) error {
	old := s.Path()
	if err := s.RenameNoSync(newPath); err != nil {
		return err
	}
	fsys := s.fileSystem()
	dir := filepath.Dir(newPath)
	if err := fsys.SyncDir(dir); err != nil {
		return err
	}
	if od := filepath.Dir(old); od != dir {
		return fsys.SyncDir(od)
	}
	return nil
}

// RenameNoSync is Rename without the directory syncs: after a crash the
// file may be found under either name.
func (s *Segment) RenameNoSync(newPath string) error {
	if err := s.fileSystem().Rename(s.Path(), newPath); err != nil {
		return err
	}
	s.path.Store(&newPath)
	return nil
}

// reserve asks the file to reserve [0, n) without changing i_size, where n
// covers need plus one step (preallocStep), capped at s.prealloc.
func (s *Segment) reserve(need int64) error {
	p, ok := s.file.(preallocator)
	if !ok {
		return nil
	}
	n := min(max(need, s.reserved)+preallocStep(s.reserved), s.prealloc)
	if n <= s.reserved {
		return nil
	}
	if _, err := p.Preallocate(n); err != nil {
		return err
	}
	s.reserved = n
	return nil
}

// readable is the end of the bytes readers may see: Size, or for a Direct
// segment the written watermark (bytes appended but still in chunks are not
// in the file yet).
func (s *Segment) readable() int64 {
	if s.readEnd != nil {
		return min(s.readEnd.Load(), s.size.Load())
	}
	return s.size.Load()
}

// Written is the end of the bytes readers can see through ReadAt, Scan and
// File: equal to Size except for a Direct ring segment, whose appends are
// written behind (see Options). Fetches served by sendfile from File must
// stay below it; a high watermark that waits for Durable always does.
func (s *Segment) Written() int64 { return s.readable() }

// Flush makes every appended byte visible to readers (Written == Size)
// without making it durable: a Direct ring segment submits its partial tail
// and waits for the writes in flight. Other segments are always flushed.
// Serialized with Append by the caller.
func (s *Segment) Flush() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.w == nil || !s.w.direct {
		return nil
	}
	_, err := s.w.writeOut()
	return err
}

// Truncations counts the truncations that dropped bytes (TruncateTo below
// Size, Recover cutting a tail): a copy of the segment's bytes taken while
// it was unchanged is stale once the count moved (bytes past the cut may be
// rewritten with different data).
func (s *Segment) Truncations() uint64 { return s.cuts.Load() }

// Durable is the end of the bytes covered by the last successful Sync of a
// ring-backed segment, or -1 when unknown (pwrite segments, and after a
// truncation until the next Sync).
func (s *Segment) Durable() int64 {
	if s.w == nil {
		return -1
	}
	return s.w.durable.Load()
}

func (s *Segment) stickyErr() error { return fmt.Errorf("%w: %w", ErrFailed, *s.failed.Load()) }

// isResourceErr reports errors that running out of a resource returns
// (descriptors, memory or mappings, space).
func isResourceErr(err error) bool {
	for _, no := range [...]syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.ENOSPC, syscall.EDQUOT} {
		if errors.Is(err, no) {
			return true
		}
	}
	return false
}
