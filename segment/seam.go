package segment

import (
	"os"
	"path/filepath"

	"github.com/stratalog/strata/internal/vfs"
)

// The file-system seam: a segment file opened, created and renamed
// through an internal/vfs file system. On vfs.OS the file is a real one
// (NewOSFile: pread/pwrite, fdatasync, fallocate, sendfile, FileCache);
// on any other (a vfs.MemFS in crash tests) it is that file system's
// file, with no descriptor. Either way the segment's name lives on that
// file system: Rename and the directory syncs of Create and Rename go
// through it. The io_uring paths (CreateWith and OpenWith with a Ring)
// open O_DIRECT descriptors of their own and stay on the operating
// system.

// namedOn is implemented by Files made by FileOf: the file system the
// file's name lives on, for Segment.Rename.
type namedOn interface {
	fileSystem() vfs.FS
}

// FileOf makes a File of f, a file opened read-write on fsys (nil:
// vfs.OS). An *os.File becomes the File NewOSFile makes; any other file
// one without a descriptor (Fd is ^uintptr(0)) whose Sync is f's. A
// segment made with New over the result renames through fsys. The
// segment takes ownership of f.
func FileOf(fsys vfs.FS, f vfs.File) File {
	if fsys == vfs.OS {
		fsys = nil
	}
	if osf, ok := f.(*os.File); ok {
		return &osFile{f: osf, fsys: fsys}
	}
	if fsys == nil {
		fsys = vfs.OS
	}
	return &vfsFile{File: f, fsys: fsys}
}

// vfsFile is a File over a vfs.File without a descriptor.
type vfsFile struct {
	vfs.File
	fsys vfs.FS
}

func (f *vfsFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Fd returns ^uintptr(0): no descriptor (as segmenttest.MemFile).
func (f *vfsFile) Fd() uintptr { return ^uintptr(0) }

func (f *vfsFile) fileSystem() vfs.FS { return f.fsys }

// CreateFS is Create's pwrite path on fsys: it creates (or truncates) the
// segment file at path through fsys, reserves space as Create does when
// the file is a real one (prealloc; other files ignore it) and syncs the
// parent directory through fsys, so the new name survives a crash.
func CreateFS(fsys vfs.FS, path string, prealloc int64) (*Segment, error) {
	h, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	s, err := New(path, FileOf(fsys, h))
	if err != nil {
		h.Close()
		return nil, err
	}
	if prealloc > 0 {
		s.prealloc = prealloc
		if err := s.reserve(0); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// OpenFS is Open's pwrite path on fsys: it opens the existing segment file
// at path through fsys; Size() is the file's size.
func OpenFS(fsys vfs.FS, path string) (*Segment, error) {
	h, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	s, err := New(path, FileOf(fsys, h))
	if err != nil {
		h.Close()
		return nil, err
	}
	return s, nil
}

// fileSystem is the file system the segment's name lives on: its File's
// (FileOf), else the operating system's.
func (s *Segment) fileSystem() vfs.FS {
	if s.fsys != nil {
		return s.fsys
	}
	return vfs.OS
}
