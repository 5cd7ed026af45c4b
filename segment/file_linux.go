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

// openDirect opens path for O_DIRECT writes (the ring appender's write
// descriptor); create makes and truncates it.
func openDirect(path string, create bool) (*os.File, error) {
	flags := os.O_RDWR | unix.O_DIRECT
	if create {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	return os.OpenFile(path, flags, 0o644)
}

// fallocateSize allocates [0, size) and raises i_size to cover it (mode 0,
// blocks left unwritten). Refusals (EOPNOTSUPP) fall back to ftruncate, which
// raises i_size without allocating.
func fallocateSize(f *os.File, size int64) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) {
		for {
			serr = unix.Fallocate(int(fd), 0, 0, size)
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if errors.Is(serr, unix.EOPNOTSUPP) || errors.Is(serr, unix.ENOSYS) {
		return f.Truncate(size)
	}
	if serr != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: serr}
	}
	return nil
}

// directSupported: O_DIRECT can be requested on this platform.
const directSupported = true
