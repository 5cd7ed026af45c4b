package engine

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/segment"
)

// endsLayer is the file layer (sharedFiles) of the ends-mode crash test:
// segment files on a vfs.MemFS whose device cache is on
// (MemFS.SetDeviceCache), zero-filled ahead of their appends and synced
// as segment.Options.PreWrite does through the ring, so that appends
// overwrite durable blocks and a device cache flush (any file's Sync,
// the journal's fdatasync among them) makes them durable. Which writes
// really were such overwrites is the MemFS's call at the crash, not the
// layer's: a claim of Shareable the zero-fill did not back would lose
// acknowledged bytes there.
//
// Segment files are renamed and removed through fs (the engine's file
// system in the test), which keeps the layer's map of files by path.
type endsLayer struct {
	mfs  *vfs.MemFS
	fs   *endsFS
	step int64 // the zero-fill step: a segment's reservation grows by it
	// stale: the reservation is filled with old bytes instead of zeros,
	// as a recycled segment file (a deleted segment's) would hold them
	// (the case the ends mode is for: a lost write leaves those bytes, not
	// a zeroed header); still written and synced ahead.
	stale bool

	mu     sync.Mutex
	files  map[string]*endsFile
	anchor vfs.File // the device flush: its Sync

	// What the layer's own operations met when the power went off.
	zeroCut atomic.Int64 // a zero-fill write or its sync refused
	dataCut atomic.Int64 // a segment data write refused
	zeroes  atomic.Int64 // zero-fill steps done
}

// endsFS is the MemFS with renames and removals followed by the layer.
type endsFS struct {
	*vfs.MemFS
	l *endsLayer
}

func newEndsLayer(mfs *vfs.MemFS, dir string, step int64) (*endsLayer, error) {
	l := &endsLayer{mfs: mfs, step: step, files: map[string]*endsFile{}}
	l.fs = &endsFS{MemFS: mfs, l: l}
	a, err := mfs.OpenFile(filepath.Join(dir, devFlushAnchor), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	l.anchor = a
	return l, nil
}

func (f *endsFS) Rename(oldpath, newpath string) error {
	if err := f.MemFS.Rename(oldpath, newpath); err != nil {
		return err
	}
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if ef := l.files[oldpath]; ef != nil {
		delete(l.files, oldpath)
		l.files[newpath] = ef
	}
	return nil
}

func (f *endsFS) Remove(name string) error {
	if err := f.MemFS.Remove(name); err != nil {
		return err
	}
	f.l.forget(name)
	return nil
}

func (f *endsFS) RemoveAll(name string) error {
	if err := f.MemFS.RemoveAll(name); err != nil {
		return err
	}
	f.l.forget(name)
	return nil
}

// forget drops the files at name or under it from the map.
func (l *endsLayer) forget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prefix := filepath.Clean(name) + string(filepath.Separator)
	for p := range l.files {
		if p == name || strings.HasPrefix(p, prefix) {
			delete(l.files, p)
		}
	}
}

// Create makes a new segment file and zero-fills its first step, synced,
// as CreateWith with PreWrite does.
func (l *endsLayer) Create(path string) (segment.File, error) {
	h, err := l.mfs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	f := &endsFile{l: l, f: h}
	if err := f.reserve(1); err != nil {
		h.Close()
		return nil, err
	}
	l.register(path, f)
	return segment.FileOf(l.fs, f), nil
}

// Open opens an existing segment file; its size is the file's (a zero
// tail included after a crash, as i_size is for a ring segment).
func (l *endsLayer) Open(path string) (segment.File, error) {
	h, err := l.mfs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	fi, err := h.Stat()
	if err != nil {
		h.Close()
		return nil, err
	}
	n := fi.Size()
	f := &endsFile{l: l, f: h, size: n, reserved: n, end: n, durable: n}
	l.register(path, f)
	return segment.FileOf(l.fs, f), nil
}

func (l *endsLayer) register(path string, f *endsFile) {
	l.mu.Lock()
	l.files[path] = f
	l.mu.Unlock()
}

func (l *endsLayer) file(path string) *endsFile {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.files[path]
}

// Flush is the device cache flush: a Sync of the anchor file.
func (l *endsLayer) Flush() error { return l.anchor.Sync() }

func (l *endsLayer) Shareable(path string, size int64) bool {
	f := l.file(path)
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shareable && size <= f.reserved
}

func (l *endsLayer) MarkDurable(path string, end int64) {
	if f := l.file(path); f != nil {
		f.mu.Lock()
		f.durable = max(f.durable, end)
		f.mu.Unlock()
	}
}

func (l *endsLayer) Durable(path string) int64 {
	f := l.file(path)
	if f == nil {
		return -1
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.durable
}

// endsFile is a segment file of the layer (a vfs.File for segment.FileOf).
type endsFile struct {
	l *endsLayer
	f vfs.File

	mu        sync.Mutex
	size      int64 // the file's size
	reserved  int64 // zero-filled and synced up to here
	end       int64 // the segment's bytes end here (what Stat reports)
	durable   int64 // covered by the last own Sync or shared flush; -1 after a truncation
	shareable bool  // an own Sync since the last truncation
}

// reserve zero-fills [size, the next step boundary at or past need) and
// syncs the file: the step's blocks are then written and durable with the
// file's size, so writes below reserved need no metadata. Caller holds
// f.mu (or owns f).
func (f *endsFile) reserve(need int64) error {
	to := max(f.reserved+f.l.step, (need+f.l.step-1)/f.l.step*f.l.step)
	if to > f.size {
		up := !f.l.mfs.PoweredOff()
		fill := make([]byte, to-f.size)
		if f.l.stale {
			staleBytes(fill, f.size)
		}
		if _, err := f.f.WriteAt(fill, f.size); err != nil {
			f.l.cut(&f.l.zeroCut, up, err)
			return err
		}
		f.size = to
	}
	up := !f.l.mfs.PoweredOff()
	if err := f.f.Sync(); err != nil {
		f.l.cut(&f.l.zeroCut, up, err)
		return err
	}
	f.reserved = to
	f.l.zeroes.Add(1)
	return nil
}

// cut counts an operation of the layer that the power loss refused when
// the power was still on as it began (up): most likely the cut itself.
func (l *endsLayer) cut(c *atomic.Int64, up bool, err error) {
	if up && errors.Is(err, vfs.ErrCrashed) {
		c.Add(1)
	}
}

func (f *endsFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := off + int64(len(p))
	if end > f.reserved {
		if err := f.reserve(end); err != nil {
			return 0, err
		}
	}
	up := !f.l.mfs.PoweredOff()
	n, err := f.f.WriteAt(p, off)
	if err != nil {
		f.l.cut(&f.l.dataCut, up, err)
		return n, err
	}
	f.end = max(f.end, end)
	f.size = max(f.size, end)
	return n, nil
}

func (f *endsFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.end
	if err := f.f.Sync(); err != nil {
		return err
	}
	f.durable, f.shareable = end, true
	return nil
}

func (f *endsFile) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.f.Truncate(size); err != nil {
		return err
	}
	f.size, f.end = size, size
	f.reserved = min(f.reserved, size)
	f.durable, f.shareable = -1, false
	return nil
}

// Close cuts the file back to the segment's end (made durable when the
// segment was wholly durable), as a ring segment's close does.
func (f *endsFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.size > f.end && !f.l.mfs.PoweredOff() {
		if err := f.f.Truncate(f.end); err == nil {
			f.size = f.end
			if f.durable >= f.end {
				_ = f.f.Sync()
			}
		}
	}
	return f.f.Close()
}

// Stat reports the segment's end as the size: the bytes past it are the
// zero-filled reservation (segment.New takes Size from here).
func (f *endsFile) Stat() (fs.FileInfo, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return endsInfo{fi, f.end}, nil
}

type endsInfo struct {
	fs.FileInfo
	size int64
}

func (i endsInfo) Size() int64 { return i.size }

func (f *endsFile) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }
func (f *endsFile) Read(p []byte) (int, error)              { return f.f.Read(p) }
func (f *endsFile) Write(p []byte) (int, error)             { return 0, errors.ErrUnsupported }
func (f *endsFile) Name() string                            { return f.f.Name() }

// staleBytes fills b, which lies at off of a file, with the bytes a
// recycled file holds there: not zeros, not batches (a function of the
// position, so a crash's mix of old and new is reproducible).
func staleBytes(b []byte, off int64) {
	for i := range b {
		x := uint64(off+int64(i)) * 0x9e3779b97f4a7c15
		b[i] = byte(x>>56) | 1
	}
}
