package segment

import (
	"container/list"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/internal/vfs"
)

// File is the I/O a segment needs from its backing file. Implementations use
// positional I/O only; the segment never seeks. WriteAt and ReadAt follow the
// io.WriterAt and io.ReaderAt contracts. Sync makes written data durable
// (fdatasync for a real file). Size reports the current file size (i_size).
// Fd returns the OS descriptor, or ^uintptr(0) for files without one.
type File interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
	Close() error
	Fd() uintptr
}

// osFiler is implemented by Files backed by an *os.File (for sendfile).
type osFiler interface {
	OSFile() *os.File
}

// preallocator is implemented by Files that can reserve blocks past i_size
// without changing it. handled is false if the platform or filesystem cannot.
type preallocator interface {
	Preallocate(size int64) (handled bool, err error)
}

// osFile is the File for a real file: pread/pwrite, fdatasync, fallocate.
//
// Parking (FileCache, Segment.SetFileCache): a sealed segment's descriptor
// may be closed while nothing uses it and reopened by path at the next
// use. Every operation pins the descriptor for its duration (pins), and
// Segment.Pin holds it for a reader that sends from File later (sendfile);
// only an unpinned, clean file is parked. Clean means synced since its
// last write or truncation: Linux reports a writeback error only to
// descriptors open when it happened, so a file with unsynced changes keeps
// its descriptor until a Sync succeeded on it.
type osFile struct {
	mu      sync.Mutex
	f       *os.File // nil while parked
	pins    int
	wgen    uint64 // writes and truncations so far
	synced  uint64 // wgen covered by the last successful Sync
	closed  bool
	reopErr error // the last failed reopen, for File users

	// Parking state: cache is set by SetFileCache; elem (under cache.mu)
	// is the file's place in the cache's LRU while it holds a descriptor.
	cache *FileCache
	elem  *list.Element
	path  func() string // the segment's current path (it follows Rename)
	id    os.FileInfo   // the file, to recognise it when reopened by path

	fsys vfs.FS // the file system its name lives on (FileOf); nil: vfs.OS
}

// NewOSFile wraps f as a File. The segment takes ownership of f.
func NewOSFile(f *os.File) File { return &osFile{f: f} }

func (o *osFile) fileSystem() vfs.FS { return o.fsys }

// get pins the descriptor, reopening a parked file; put unpins it.
func (o *osFile) get(write bool) (*os.File, error) {
	o.mu.Lock()
	f := o.f
	if f == nil {
		if o.closed {
			o.mu.Unlock()
			return nil, os.ErrClosed
		}
		var err error
		if f, err = o.reopen(); err != nil {
			o.reopErr = err
			o.mu.Unlock()
			return nil, err
		}
		o.f = f
	}
	o.pins++
	if write {
		o.wgen++
	}
	c := o.cache
	o.mu.Unlock()
	if c != nil {
		c.touch(o)
	}
	return f, nil
}

func (o *osFile) put() {
	o.mu.Lock()
	o.pins--
	o.mu.Unlock()
}

// reopen opens the parked file by its current path and checks it is the
// same file. Caller holds mu.
func (o *osFile) reopen() (*os.File, error) {
	if o.path == nil || o.id == nil {
		return nil, os.ErrClosed
	}
	f, err := os.OpenFile(o.path(), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !os.SameFile(st, o.id) {
		err = fmt.Errorf("segment: %s is no longer the segment's file", f.Name())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if o.cache != nil {
		o.cache.reopens.Add(1)
	}
	return f, nil
}

func (o *osFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := o.get(false)
	if err != nil {
		return 0, err
	}
	defer o.put()
	return f.ReadAt(p, off)
}

func (o *osFile) WriteAt(p []byte, off int64) (int, error) {
	f, err := o.get(true)
	if err != nil {
		return 0, err
	}
	defer o.put()
	return f.WriteAt(p, off)
}

func (o *osFile) Sync() error {
	o.mu.Lock()
	gen := o.wgen
	o.mu.Unlock()
	f, err := o.get(false)
	if err != nil {
		return err
	}
	defer o.put()
	if err := Fdatasync(f); err != nil {
		return err
	}
	o.mu.Lock()
	o.synced = max(o.synced, gen)
	o.mu.Unlock()
	return nil
}

func (o *osFile) Truncate(size int64) error {
	f, err := o.get(true)
	if err != nil {
		return err
	}
	defer o.put()
	return f.Truncate(size)
}

func (o *osFile) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return os.ErrClosed
	}
	o.closed = true
	f := o.f
	o.f = nil
	c := o.cache
	o.mu.Unlock()
	if c != nil {
		c.remove(o)
	}
	if f == nil {
		return nil // parked: nothing open
	}
	return f.Close()
}

// Fd is the descriptor while the file is open, ^uintptr(0) while parked.
func (o *osFile) Fd() uintptr {
	if f := o.OSFile(); f != nil {
		return f.Fd()
	}
	return ^uintptr(0)
}

// OSFile is the open *os.File, nil while parked (Segment.Pin first).
func (o *osFile) OSFile() *os.File {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.f
}

func (o *osFile) Size() (int64, error) {
	f, err := o.get(false)
	if err != nil {
		return 0, err
	}
	defer o.put()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (o *osFile) Preallocate(size int64) (bool, error) {
	f, err := o.get(true)
	if err != nil {
		return false, err
	}
	defer o.put()
	return fallocateKeepSize(f, size)
}

// writes returns the write generation; synced records that a sync which
// started at generation gen succeeded through another descriptor of the
// same file (a Direct segment's fdatasync through the ring: its O_DIRECT
// open stays open in the ring, so it reports the file's writeback errors).
func (o *osFile) writes() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.wgen
}

func (o *osFile) syncedAt(gen uint64) {
	o.mu.Lock()
	o.synced = max(o.synced, gen)
	o.mu.Unlock()
}

// parkable reports whether the descriptor may be closed now. Caller holds
// mu.
func (o *osFile) parkable() bool {
	return o.f != nil && o.pins == 0 && o.synced == o.wgen && !o.closed
}

// FileCache bounds how many sealed segments keep their descriptor open:
// segments given one by Segment.SetFileCache hold their descriptor while
// in use and up to max of them while idle (least recently used first to
// go); a parked segment reopens its file by path at its next use. A
// partition's old segments then cost no descriptor until read, so the
// descriptor budget is one per partition (its active segment) plus max.
// Safe for concurrent use.
type FileCache struct {
	mu      sync.Mutex
	max     int
	lru     list.List // *osFile holding a descriptor, most recently used first
	parks   atomic.Int64
	reopens atomic.Int64
}

// NewFileCache returns a cache keeping at most max idle descriptors open
// (at least 1).
func NewFileCache(idle int) *FileCache { return &FileCache{max: max(idle, 1)} }

// Open is how many descriptors the cache's files hold now (in use or idle).
func (c *FileCache) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// Stats reports how many times files were parked and reopened.
func (c *FileCache) Stats() (parks, reopens int64) { return c.parks.Load(), c.reopens.Load() }

// touch marks o (pinned, so holding a descriptor) as just used and parks
// idle files beyond max, oldest first. Lock order: FileCache.mu ->
// osFile.mu (no osFile method holds its mu while taking the cache's).
func (c *FileCache) touch(o *osFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o.elem == nil {
		o.elem = c.lru.PushFront(o)
	} else {
		c.lru.MoveToFront(o.elem)
	}
	c.evictLocked()
}

func (c *FileCache) evictLocked() {
	for e := c.lru.Back(); e != nil && c.lru.Len() > c.max; {
		prev := e.Prev()
		v := e.Value.(*osFile)
		v.mu.Lock()
		if v.parkable() {
			v.f.Close() // unused and clean: a close error has nothing to report
			v.f = nil
			c.lru.Remove(e)
			v.elem = nil
			c.parks.Add(1)
		}
		v.mu.Unlock()
		e = prev
	}
}

// remove forgets o (closed, or no longer parkable).
func (c *FileCache) remove(o *osFile) {
	c.mu.Lock()
	if o.elem != nil {
		c.lru.Remove(o.elem)
		o.elem = nil
	}
	c.mu.Unlock()
}

func (o *osFile) setCache(c *FileCache, path func() string) error {
	o.mu.Lock()
	old := o.cache
	if c == old {
		o.mu.Unlock()
		return nil
	}
	if c != nil && o.id == nil && o.f != nil {
		st, err := o.f.Stat()
		if err != nil {
			o.mu.Unlock()
			return err
		}
		o.id = st
	}
	if c != nil && o.f == nil && o.id == nil {
		o.mu.Unlock()
		return os.ErrClosed
	}
	o.cache, o.path = c, path
	open := o.f != nil && !o.closed
	o.mu.Unlock()
	if old != nil {
		old.remove(o)
	}
	if c != nil && open {
		c.mu.Lock()
		// o may have been closed meanwhile: then it must not be listed.
		o.mu.Lock()
		if o.f != nil && o.elem == nil && o.cache == c {
			o.elem = c.lru.PushFront(o)
		}
		o.mu.Unlock()
		c.evictLocked()
		c.mu.Unlock()
	}
	return nil
}
