//go:build !linux

package segment

import "os"

// fdatasync falls back to a full fsync where fdatasync is not available.
func fdatasync(f *os.File) error { return f.Sync() }

// fallocateKeepSize is not available here; appends allocate blocks as they go.
func fallocateKeepSize(*os.File, int64) (bool, error) { return false, nil }

// dirSyncSupported is false where fsync on a directory may be refused
// (Windows, some BSD setups); errors from it are then ignored.
const dirSyncSupported = false
