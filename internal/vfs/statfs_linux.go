package vfs

import (
	"os"
	"syscall"
)

// FreeSpace returns the bytes of dir's filesystem available to an
// unprivileged writer (f_bavail: the root reserve is not the broker's) and
// the filesystem's size.
func FreeSpace(dir string) (usable, total int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	bsize := int64(st.Bsize) //nolint:unconvert // int32 on 32-bit platforms
	return int64(st.Bavail) * bsize, int64(st.Blocks) * bsize, nil
}
