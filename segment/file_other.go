//go:build !linux

package segment

import (
	"errors"
	"io"
	"os"
)

// dioAlign: no O_DIRECT segments here.
func dioAlign(*os.File) int64 { return pageBytes }

// SyncFS has no filesystem-wide sync here: the file's own fsync.
func SyncFS(f *os.File) error { return f.Sync() }

// Fdatasync falls back to a full fsync where fdatasync is not available.
func Fdatasync(f *os.File) error { return f.Sync() }

// fallocateKeepSize is not available here; appends allocate blocks as they go.
func fallocateKeepSize(*os.File, int64) (bool, error) { return false, nil }

// openDirect is not available here: O_DIRECT is Linux-only.
func openDirect(path string, create bool) (*os.File, error) {
	return nil, errors.ErrUnsupported
}

// fallocateSize raises i_size (no block allocation available here).
func fallocateSize(f *os.File, size int64) error { return f.Truncate(size) }

// directSupported: O_DIRECT cannot be requested on this platform.
const directSupported = false

// zeroChunk is never used here (no Direct segments, so no PreWrite).
func zeroChunk() []byte { return make([]byte, 1<<20) }

// Readahead hints are Linux-only (Direct segments are too).
func adviseRandom(*os.File)                 {}
func adviseNormal(*os.File)                 {}
func adviseWillNeed(*os.File, int64, int64) {}

// openDirectReader: no O_DIRECT here (SequentialReader reads through
// ReadAt).
func openDirectReader(*os.File, int64) (io.ReadCloser, error) {
	return nil, errors.New("segment: no O_DIRECT on this platform")
}
