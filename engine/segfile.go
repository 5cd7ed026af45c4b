package engine

import (
	"os"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/segment"
)

// segmentFileOf makes a segment.File of a file opened through the
// operating system's file system (journal replay's, without a file layer):
// segment.FileOf.
func segmentFileOf(f vfs.File) segment.File { return segment.FileOf(vfs.OS, f) }

// renameLog renames the segment's data file to newPath and syncs the
// directory, through the file system the segment's name lives on: the
// engine's for segments on vfs.OS and on fsFiles (segment.FileOf), the
// operating system's for a test file layer's (memFiles keeps an empty
// file at each path there).
func (s *logSegment) renameLog(newPath string, syncDir bool) error {
	if !syncDir {
		return s.seg.RenameNoSync(newPath)
	}
	return s.seg.Rename(newPath)
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
	return segment.FileOf(f.fs, h), nil
}

func (f fsFiles) Open(path string) (segment.File, error) {
	h, err := f.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return segment.FileOf(f.fs, h), nil
}
