package index

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/stratalog/strata/internal/vfs"
)

var (
	// ErrFull is returned by Append when the index has no room left.
	ErrFull = errors.New("index: full")
	// ErrClosed is returned by operations on a closed index.
	ErrClosed = errors.New("index: closed")
	// ErrCorrupt is returned by Check for entries that are out of order or
	// out of range.
	ErrCorrupt = errors.New("index: corrupt")
	// ErrOrder is returned by Append for an entry that does not follow the
	// last one, or whose offset or position is out of range.
	ErrOrder = errors.New("index: entry out of order or range")
)

// optimisticTries is how many lock-free attempts a reader makes before it
// takes the mutex (only a reader racing TruncateTo ever retries).
const optimisticTries = 4

// warmBytes is the tail of an index searched first (Kafka's warm section:
// 8 KiB, two pages, covering the recent data most fetches ask for).
const warmBytes = 8192

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// file is the memory-mapped, fixed-width entry file both indexes share.
type file struct {
	base      int64
	entrySize int // bytes: 8 or 12
	words     int // entrySize / 4

	// n is the number of published entries; gen counts truncations (the
	// sequence lock readers check, see the package doc).
	n   atomic.Int64
	gen atomic.Uint64

	// mu serializes TruncateTo, Close, Rename and Check with readers that
	// fell back from the lock-free path.
	mu       sync.Mutex
	f        *os.File    // nil where the mapping is the file (linux): see withFile
	id       os.FileInfo // the mapped file, to recognise it when reopened by path
	length   int64       // the file's length as set at open (the mapping's)
	path     string
	data     []byte   // the mapping
	mem      []uint32 // data as words, for atomic access
	capacity int      // entries the mapping holds
	reserved int      // bytes of the file with blocks allocated: [0, reserved)
	closed   bool

	// private: the mapping is copy-on-write (Options.Private), or a heap
	// buffer (heap); entries reach the file by writeBack, which has
	// written [0, flushed) of them.
	private bool
	flushed int
	// outErr is the first error of a write-out (writeBackLocked with
	// out): the device refused pages the next sync would otherwise take
	// for written; sync and close return it.
	outErr error
	// outTo: entries [0, outTo) were written out (writeBackLocked with
	// out) and nothing was written back since; a write-out with nothing
	// new skips the file (an idle partition's indexes cost nothing).
	outTo int
	backs uint64 // write-backs and truncations: one came during a write-out

	// heap: the file is on Options.FS, kept open (hf), and data is a heap
	// buffer read from it at open (see Options.FS); length then follows
	// the file's size as write-backs grow it.
	heap bool
	fsys vfs.FS
	hf   vfs.File

	// tail is the last entry Append wrote and tailN the entry count it
	// was the last of (the single writer's own copy): the next Append's
	// order check reads it instead of the mapping, whose line is cold by
	// then when many partitions append in turn (a cache and TLB miss per
	// append: 3-4 % of a keyed broker's CPU). A truncation leaves
	// n != tailN, and the check reads the mapping again.
	tailN int
	tail  [3]uint32
}

// Options are an index's opening options (OpenOffsetWith, OpenTimeWith).
type Options struct {
	// Private maps the file copy-on-write (MAP_PRIVATE) instead of shared:
	// appended entries stay in the process's memory and reach the file
	// only at WriteBack, Sync and Close (one pwrite of the entries added
	// since the last). The index's pages are then never dirty in the page
	// cache, so a filesystem-wide sync (syncfs, the engine's shared flush
	// for segments on unwritten extents) does not write them back with
	// every flush. After a crash of the process the file holds the entries
	// of the last write-back, followed by zeros: fewer entries, never wrong
	// ones, as after a power loss with a shared mapping. Linux only (other
	// systems write every entry through at once).
	Private bool
	// FS, when set, holds the file instead of the operating system, and
	// the index is not mapped: its entries live in a heap buffer read
	// from the file at open and reach the file as Private's do, at
	// WriteBack, Sync and Close (one write of the entries added since the
	// last), so after a crash of FS the file holds the entries of the
	// last write-back that FS kept, or a torn part of the next one. The
	// file is not grown to maxBytes; Close trims it to the entries. For
	// an engine running over a memory file system (vfs.MemFS) in tests;
	// nil keeps the mapping.
	FS vfs.FS
}

// ReserveStepBytes is how much of an index file gets real blocks at a time.
// The file's length is the whole mapping (segment.index.bytes) so the mapping
// never extends past it, but it stays sparse past the reservation: blocks
// for 10 MiB per index, twice per partition, would hold gigabytes of disk
// for a broker with thousands of mostly idle partitions. Entries are only
// written inside the reservation, so a full disk surfaces as an Append error
// instead of a SIGBUS from a page fault on a hole.
const ReserveStepBytes = 64 << 10

func openFile(path string, base int64, maxBytes, entrySize int, o Options) (*file, error) {
	if base < 0 {
		return nil, fmt.Errorf("index: %s: negative base offset %d", path, base)
	}
	maxEntries := maxBytes / entrySize
	if maxEntries < 1 {
		return nil, fmt.Errorf("index: %s: maxBytes %d below one %d-byte entry", path, maxBytes, entrySize)
	}
	if o.FS != nil {
		return openHeap(o.FS, path, base, maxEntries, entrySize)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	x, err := mapIndex(f, path, base, maxEntries, entrySize, o.Private && privateMaps)
	if err != nil {
		f.Close()
		return nil, err
	}
	if keepDescriptor {
		return x, nil
	}
	// The mapping keeps the file; the descriptor is not needed for
	// lookups, appends or msync, so it does not count against the
	// process's descriptor limit (10,000 partitions, two indexes each).
	x.f = nil
	if err := f.Close(); err != nil {
		unmapFile(nil, x.data)
		return nil, err
	}
	return x, nil
}

// withFile runs fn on a descriptor of the index file: the one kept open
// where there is no mapping, else one opened by path for this call and
// checked to be the mapped file (same device and inode; the path follows
// Rename). Caller holds mu. Used at reservation steps (every
// ReserveStepBytes of entries) and at Close (trimming).
func (x *file) withFile(fn func(f *os.File) error) error {
	if x.f != nil {
		return fn(x.f)
	}
	f, err := x.openMapped()
	if err != nil {
		return err
	}
	defer f.Close()
	return fn(f)
}

// openMapped opens the index file by path and checks that it is the mapped
// file; the caller closes it. Caller holds mu.
func (x *file) openMapped() (*os.File, error) {
	f, err := os.OpenFile(x.path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !os.SameFile(st, x.id) {
		err = fmt.Errorf("index: %s is no longer the mapped file", x.path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func mapIndex(f *os.File, path string, base int64, maxEntries, entrySize int, private bool) (*file, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size > int64(1<<31-1) {
		return nil, fmt.Errorf("%w: %s: %d bytes", ErrCorrupt, path, size)
	}
	entries := int(size) / entrySize
	capacity := max(entries, maxEntries)
	mapLen := capacity * entrySize
	if int64(mapLen) != size { // grow sparse, or drop a torn partial entry
		err = f.Truncate(int64(mapLen))
	}
	if err != nil {
		return nil, err
	}
	reserved := min(entries*entrySize+ReserveStepBytes, mapLen)
	if err := allocate(f, int64(reserved)); err != nil {
		return nil, err
	}
	data, err := mapFile(f, mapLen, private)
	if err != nil {
		return nil, err
	}
	x := &file{
		base:      base,
		entrySize: entrySize,
		words:     entrySize / 4,
		f:         f,
		id:        st,
		length:    int64(mapLen),
		path:      path,
		data:      data,
		mem:       unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(data))), mapLen/4),
		capacity:  capacity,
		reserved:  reserved,
		private:   private,
		flushed:   entries,
	}
	x.n.Store(int64(entries))
	return x, nil
}

// openHeap opens path on fsys as a heap-backed index (Options.FS).
func openHeap(fsys vfs.FS, path string, base int64, maxEntries, entrySize int) (*file, error) {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	size := st.Size()
	if size > int64(1<<31-1) {
		f.Close()
		return nil, fmt.Errorf("%w: %s: %d bytes", ErrCorrupt, path, size)
	}
	entries := int(size) / entrySize
	capacity := max(entries, maxEntries)
	mapLen := capacity * entrySize
	words := make([]uint32, mapLen/4)
	data := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), mapLen)
	if _, err := f.ReadAt(data[:entries*entrySize], 0); err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, err
	}
	x := &file{
		base:      base,
		entrySize: entrySize,
		words:     entrySize / 4,
		length:    size,
		path:      path,
		data:      data,
		mem:       words,
		capacity:  capacity,
		reserved:  mapLen,
		private:   true,
		flushed:   entries,
		heap:      true,
		fsys:      fsys,
		hf:        f,
	}
	x.n.Store(int64(entries))
	return x, nil
}

// word loads word w of entry i (a big-endian uint32 on disk).
func (x *file) word(i, w int) uint32 {
	v := atomic.LoadUint32(&x.mem[i*x.words+w])
	if littleEndian {
		v = bits.ReverseBytes32(v)
	}
	return v
}

// lastWord is word w of entry n-1, the last of n (n > 0): the writer's
// copy when it is current, the mapping otherwise.
func (x *file) lastWord(n, w int) uint32 {
	if x.tailN == n {
		return x.tail[w]
	}
	return x.word(n-1, w)
}

// published is publish, and then the writer's copy of the entry (its
// words v) becomes the last.
func (x *file) published(i int, v [3]uint32) error {
	if err := x.publish(i); err != nil {
		return err
	}
	x.tail, x.tailN = v, i+1
	return nil
}

// setWord stores word w of entry i big-endian.
func (x *file) setWord(i, w int, v uint32) {
	if littleEndian {
		v = bits.ReverseBytes32(v)
	}
	atomic.StoreUint32(&x.mem[i*x.words+w], v)
}

// reserve makes sure entry i lies in allocated blocks before it is written
// through the mapping (the single writer calls it).
func (x *file) reserve(i int) error {
	end := (i + 1) * x.entrySize
	if end <= x.reserved {
		return nil
	}
	n := min(end+ReserveStepBytes, len(x.data))
	x.mu.Lock()
	err := x.withFile(func(f *os.File) error { return allocate(f, int64(n)) })
	x.mu.Unlock()
	if err != nil {
		return err
	}
	x.reserved = n
	return nil
}

// publish makes entry i (just written) visible: it is written through where
// there is no real mapping, then counted.
func (x *file) publish(i int) error {
	if !x.heap {
		if err := wrote(x.f, x.data, i*x.entrySize, x.entrySize); err != nil {
			return err
		}
	}
	x.n.Store(int64(i + 1))
	return nil
}

// truncate drops entries at or past keep.
func (x *file) truncate(keep int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if int64(keep) >= x.n.Load() {
		return
	}
	x.n.Store(int64(keep))
	x.gen.Add(1) // readers holding the old count retry
	x.flushed = min(x.flushed, keep)
	x.outTo = min(x.outTo, keep)
	x.backs++
}

// writeBack writes the entries a private mapping added since the last
// write-back to the file (a no-op for a shared mapping, whose stores are
// the file's pages). Caller holds mu.
func (x *file) writeBack() error { return x.writeBackWith(nil, int(x.n.Load())) }

// writeBackWith is writeBack of the entries below n through f, a
// descriptor of the mapped file the caller opened (nil: withFile's).
// Caller holds mu.
func (x *file) writeBackWith(f *os.File, n int) error {
	if !x.private || x.flushed >= n {
		return nil
	}
	from, to := x.flushed*x.entrySize, n*x.entrySize
	if x.heap {
		if _, err := x.hf.WriteAt(x.data[from:to], int64(from)); err != nil {
			return err
		}
		x.flushed, x.length = n, max(x.length, int64(to))
		return nil
	}
	write := func(f *os.File) error {
		_, err := f.WriteAt(x.data[from:to], int64(from))
		return err
	}
	var err error
	if f != nil {
		err = write(f)
	} else {
		err = x.withFile(write)
	}
	if err != nil {
		return err
	}
	x.flushed = n
	x.backs++
	return nil
}

func (x *file) entries() int { return int(x.n.Load()) }

func (x *file) full() bool { return int(x.n.Load()) >= x.capacity }

func (x *file) sync() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	if x.private {
		if err := x.writeBack(); err != nil {
			return err
		}
		if x.outErr != nil {
			return x.outErr
		}
		if x.heap {
			return x.hf.Sync()
		}
		return x.withFile(func(f *os.File) error { return f.Sync() })
	}
	return syncFile(x.f, x.path, x.data)
}

// pageBytes is the page size: the unit of a private mapping's copies and
// of the page cache's writes.
var pageBytes = os.Getpagesize()

// writeBackLocked is writeBack for callers outside the lock; with out it
// then has the device write the file's dirty pages and waits for them
// (see WriteOut), without holding mu while it waits: an Append that needs
// its next reservation step takes mu.
func (x *file) writeBackLocked(out bool) error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return ErrClosed
	}
	if !out || !x.private || x.heap {
		err := x.writeBack()
		x.mu.Unlock()
		return err
	}
	// Whole pages only: the entries that end in the last page the
	// entries fill, unless a WriteBack wrote more. The last page's
	// entries wait for the next write-out after it fills (or for Sync and
	// Close), so each page is written once, not once a second while it
	// fills (an active partition's index fills a page in seconds).
	up := max(int(x.n.Load())*x.entrySize/pageBytes*pageBytes/x.entrySize, x.flushed)
	if up == 0 || up == x.outTo && x.flushed == x.outTo {
		x.mu.Unlock()
		return nil
	}
	// One descriptor for the write and the write-out (opened by path
	// where the mapping holds none: once a second per active index).
	f, own, err := x.f, false, error(nil)
	if f == nil {
		f, err = x.openMapped()
		own = err == nil
	}
	if err == nil {
		err = x.writeBackWith(f, up)
	}
	to, backs := int64(x.flushed*x.entrySize), x.backs // > 0: flushed >= up > 0
	x.mu.Unlock()
	if err != nil {
		if own {
			f.Close()
		}
		return err
	}
	// From the file's start: pages an earlier WriteBack left dirty go
	// too (clean ones cost nothing).
	err = writeOut(f, 0, to)
	if own {
		f.Close()
	}
	x.mu.Lock()
	if err != nil {
		err = &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: err}
		x.outErr = cmp.Or(x.outErr, err)
	} else if x.backs == backs {
		x.outTo = x.flushed // else a truncation or write-back came between
	}
	x.mu.Unlock()
	return err
}

// close trims the file to the entries written, unmaps and closes it.
func (x *file) close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	werr := cmp.Or(x.writeBack(), x.outErr)
	x.closed = true
	n := x.n.Load()
	if werr != nil {
		n = int64(x.flushed) // trim to what the file holds
	}
	x.n.Store(0)
	x.gen.Add(1)
	if x.heap {
		return x.closeHeap(n, werr)
	}
	err := unmapFile(x.f, x.data)
	if err == nil {
		err = werr
	}
	x.data, x.mem, x.capacity = nil, nil, 0
	if keep := n * int64(x.entrySize); keep != x.length {
		terr := x.withFile(func(f *os.File) error { return f.Truncate(keep) })
		if errors.Is(terr, os.ErrNotExist) {
			terr = nil // deleted with its directory: nothing left to trim
		}
		if err == nil {
			err = terr
		}
	}
	if x.f != nil {
		if cerr := x.f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// closeHeap is close for a heap-backed index: trim the file to the n
// entries it holds and close it. Caller holds mu.
func (x *file) closeHeap(n int64, werr error) error {
	err := werr
	x.data, x.mem, x.capacity = nil, nil, 0
	if keep := n * int64(x.entrySize); keep != x.length {
		if terr := x.hf.Truncate(keep); err == nil {
			err = terr
		}
	}
	if cerr := x.hf.Close(); err == nil {
		err = cerr
	}
	return err
}

func (x *file) rename(newPath string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	rename := os.Rename
	if x.heap {
		rename = x.fsys.Rename
	}
	if err := rename(x.path, newPath); err != nil {
		return err
	}
	x.path = newPath
	return nil
}

func (x *file) pathName() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.path
}

// relative converts an absolute offset to one an entry can hold.
func (x *file) relative(offset int64) (uint32, bool) {
	rel := offset - x.base
	if offset < x.base || rel > 1<<31-1 {
		return 0, false
	}
	return uint32(rel), true
}
