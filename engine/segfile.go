package engine

import (
	"os"
	"path/filepath"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/segment"
)

// segmentFileOf makes a segment.File of a file opened through the
// engine's file system: the operating system's file as segment.NewOSFile
// makes it (pread/pwrite, fdatasync), any other (a vfs.MemFS's, in tests)
// through vfsSegmentFile.
func segmentFileOf(f vfs.File) segment.File {
	if osf, ok := f.(*os.File); ok {
		return segment.NewOSFile(osf)
	}
	return vfsSegmentFile{f}
}

// vfsSegmentFile is a segment.File over a vfs.File without a descriptor.
type vfsSegmentFile struct{ vfs.File }

func (f vfsSegmentFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Fd returns ^uintptr(0): no descriptor (as segmenttest.MemFile).
func (f vfsSegmentFile) Fd() uintptr { return ^uintptr(0) }

// renameLog renames the segment's data file to newPath and syncs the
// directory: through the segment (os.Rename) on the operating system's
// file system, through the engine's file system on any other, where a
// test file layer (Options.files) keeps the segments' files. The
// segment's own Path keeps the old name there: only a FileCache reopens by
// it, and a file layer's segments have none.
func (s *logSegment) renameLog(newPath string) error {
	fsys := s.fsys()
	if fsys == vfs.OS {
		return s.seg.Rename(newPath)
	}
	if err := fsys.Rename(s.logPath, newPath); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(newPath))
}

// fsFiles is the file layer (fileLayer) over the engine's file system
// when that is not the operating system's (tests over a vfs.MemFS): the
// segments' data lives there with every other file, renamed, removed,
// listed and crashed with them.
type fsFiles struct{ fs vfs.FS }

func (f fsFiles) Create(path string) (segment.File, error) {
	h, err := f.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return segmentFileOf(h), nil
}

func (f fsFiles) Open(path string) (segment.File, error) {
	h, err := f.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return segmentFileOf(h), nil
}
