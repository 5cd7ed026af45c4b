//go:build linux

package segment

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync flushes file data and the metadata needed to read it back.
func fdatasync(f *os.File) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) {
		for {
			serr = unix.Fdatasync(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

// fallocateKeepSize reserves [0, size) without changing i_size. Filesystems
// that cannot (EOPNOTSUPP, ENOSYS) are reported as not handled, not failed.
func fallocateKeepSize(f *os.File, size int64) (bool, error) {
	if size <= 0 {
		return true, nil
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) {
		for {
			serr = unix.Fallocate(int(fd), unix.FALLOC_FL_KEEP_SIZE, 0, size)
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	switch {
	case serr == nil:
		return true, nil
	case errors.Is(serr, unix.EOPNOTSUPP), errors.Is(serr, unix.ENOSYS):
		return false, nil
	default:
		return false, &os.PathError{Op: "fallocate", Path: f.Name(), Err: serr}
	}
}

// dirSyncSupported: fsync on a directory is meaningful and must succeed.
const dirSyncSupported = true
