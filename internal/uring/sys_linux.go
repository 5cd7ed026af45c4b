//go:build linux

package uring

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// rawFd returns f's descriptor without switching it to blocking mode (as
// (*os.File).Fd would).
func rawFd(f *os.File) (int, error) {
	sc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := sc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return -1, err
	}
	return fd, nil
}

// datasync is fdatasync(2), EINTR retried.
func datasync(f *os.File) error {
	fd, err := rawFd(f)
	if err != nil {
		return err
	}
	for {
		err = unix.Fdatasync(fd)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}

// fallocateKeepSize reserves [0, size) without changing i_size; filesystems
// that cannot are reported as not handled.
func fallocateKeepSize(f *os.File, size int64) (bool, error) {
	if size <= 0 {
		return true, nil
	}
	fd, err := rawFd(f)
	if err != nil {
		return false, err
	}
	for {
		err = unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, size)
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		return false, nil
	}
	return false, &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
}

// mapAnon returns n bytes of page-aligned anonymous memory outside the Go
// heap, faulted in now (MAP_POPULATE) so first use does not pay for it.
func mapAnon(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, &os.SyscallError{Syscall: "mmap", Err: err}
	}
	return b, nil
}

func unmapAnon(b []byte) error { return unix.Munmap(b) }
