//go:build linux

package index

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// allocate gives [0, size) of f real blocks (fallocate mode 0, growing the
// file if it is shorter), so stores into the mapping there cannot fault on a
// full disk; filesystems without fallocate only get the file grown (sparse).
func allocate(f *os.File, size int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, 0, size)
		switch {
		case err == nil:
			return nil
		case err == unix.EINTR:
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return growTo(f, size)
		default:
			return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
		}
	}
}

// mapFile maps the first size bytes of f read-write, shared or
// copy-on-write (private).
func mapFile(f *os.File, size int, private bool) ([]byte, error) {
	flags := unix.MAP_SHARED
	if private {
		flags = unix.MAP_PRIVATE
	}
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	// Index pages are touched one at a time (appends at the end, binary
	// search on lookup). Without MADV_RANDOM the first fault on a fresh,
	// mostly sparse index reads ahead the device's whole readahead window
	// (8 MiB here): ~1.5 GB of page zeroing in the first second of a
	// 96-partition produce run, 300-400 ms produce p99.
	if err := unix.Madvise(b, unix.MADV_RANDOM); err != nil {
		unix.Munmap(b)
		return nil, &os.PathError{Op: "madvise", Path: f.Name(), Err: err}
	}
	return b, nil
}

func unmapFile(_ *os.File, b []byte) error { return unix.Munmap(b) }

// keepDescriptor: the mapping is the file; its descriptor is closed once
// mapped (reopened by path for fallocate and the trim at Close).
const keepDescriptor = false

// privateMaps: Options.Private takes effect (a copy-on-write mapping).
const privateMaps = true

// syncFile writes the mapping's dirty pages back and waits (msync MS_SYNC).
func syncFile(_ *os.File, path string, b []byte) error {
	if err := unix.Msync(b, unix.MS_SYNC); err != nil {
		return &os.PathError{Op: "msync", Path: path, Err: err}
	}
	return nil
}

// wrote tells the mapping that b[off:off+n] changed; with mmap the kernel
// sees the stores directly.
func wrote(*os.File, []byte, int, int) error { return nil }

// growTo extends f to size with a sparse ftruncate; it never shrinks f.
func growTo(f *os.File, size int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() >= size {
		return nil
	}
	return f.Truncate(size)
}

// writeOut has the device write f's dirty pages in [off, off+n) and waits
// for them (sync_file_range: data only, no metadata, no cache flush).
func writeOut(f *os.File, off, n int64) error {
	return unix.SyncFileRange(int(f.Fd()), off, n,
		unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}
