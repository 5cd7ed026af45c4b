//go:build linux

package uring

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"unsafe"

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
// heap, faulted in now so first use does not pay for it.
//
// A mapping that is a whole number of huge pages (hugePageBytes) is aligned
// to hugePageBytes and asks for transparent huge pages (MADV_HUGEPAGE;
// granted where THP is "madvise" or "always", best effort) before it is
// faulted in; other sizes keep 4 KiB pages rather than waste the rounding.
// A huge page is physically contiguous, so an O_DIRECT request from it is
// one segment instead of one per 4 KiB page: on a virtio disk without
// indirect descriptors (this VM's) each segment takes a slot of the
// 256-entry queue, and a 1 MiB write from 4 KiB pages took all of them (two
// requests, since max_segments is 254), holding every other request back
// until it completed (BenchmarkBufferPages: 1 MiB writes 1,015-1,043 MB/s
// from 4 KiB pages, 1,343-1,404 from huge pages).
func mapAnon(n int) ([]byte, error) { return mapAnonPaged(n, false) }

// mapAnonPaged is mapAnon; with late, a mapping of whole huge pages is
// faulted in on 4 KiB pages (MADV_NOHUGEPAGE while it is) and asks for
// huge pages only after (MADV_HUGEPAGE), which khugepaged grants in the
// background by collapsing them (MapMemoryHugeLater).
func mapAnonPaged(n int, late bool) ([]byte, error) {
	if n%hugePageBytes != 0 {
		b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
		if err != nil {
			return nil, &os.SyscallError{Syscall: "mmap", Err: err}
		}
		return b, nil
	}
	// Raw mmap/munmap: x/sys/unix's Munmap only unmaps whole mappings it
	// made, and the slack around the aligned range goes back now.
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n+hugePageBytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, &os.SyscallError{Syscall: "mmap", Err: err}
	}
	addr := uintptr(p)
	skip := (hugePageBytes - addr%hugePageBytes) % hugePageBytes
	if skip > 0 {
		_ = unix.MunmapPtr(p, skip)
	}
	if tail := hugePageBytes - skip; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(p, skip+uintptr(n)), tail)
	}
	b := unsafe.Slice((*byte)(unsafe.Add(p, skip)), n)
	if late {
		_ = unix.Madvise(b, unix.MADV_NOHUGEPAGE) // THP "always" would fault huge pages in
	} else {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // EINVAL without THP: 4 KiB pages then
	}
	if err := unix.Madvise(b, unix.MADV_POPULATE_WRITE); err != nil {
		for i := 0; i < len(b); i += os.Getpagesize() { // before Linux 5.14
			b[i] = 0
		}
	}
	if late {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	}
	return b, nil
}

// unmapAnon unmaps a mapAnon mapping.
func unmapAnon(b []byte) error {
	if len(b)%hugePageBytes != 0 {
		return unix.Munmap(b)
	}
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}

// hugeBacked reports whether b lies in a mapping wholly backed by
// transparent huge pages (AnonHugePages equal to its size in
// /proc/self/smaps), false when that cannot be read.
func hugeBacked(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return false
	}
	in := false
	var size uint64
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				if in {
					return false // no AnonHugePages line in our mapping
				}
				in = addr >= l && addr < h
				continue
			}
		}
		if !in || len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "Size:":
			size = v
		case "AnonHugePages:":
			return size > 0 && v == size
		}
	}
	return false
}

// fallocate is fallocate(2) of [off, off+n) with mode 0 (size raised),
// EINTR retried: OpFallocate on the pwrite backend.
func fallocate(f *os.File, off, n int64) error {
	fd, err := rawFd(f)
	if err != nil {
		return err
	}
	for {
		err = unix.Fallocate(fd, 0, off, n)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}
