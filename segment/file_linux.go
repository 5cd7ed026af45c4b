//go:build linux

package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SyncFS makes every dirty page and every metadata change of the
// filesystem holding f durable (syncfs(2)) and flushes the device's cache:
// the shared flush of Options.SharedMeta segments.
func SyncFS(f *os.File) error { return fdCall(f, "syncfs", unix.Syncfs) }

// Fdatasync flushes file data and the metadata needed to read it back.
func Fdatasync(f *os.File) error { return fdCall(f, "fdatasync", unix.Fdatasync) }

// fdCall runs call on f's descriptor, again while it is interrupted
// (EINTR); a failure is an *os.PathError naming op.
func fdCall(f *os.File, op string, call func(fd int) error) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) {
		for {
			serr = call(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: op, Path: f.Name(), Err: serr}
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

// zeroBytes is the size of the shared zero-fill buffer (PreWrite).
const zeroBytes = 1 << 20

var zeroBuf struct {
	sync.Once
	b []byte
}

// zeroChunk returns one page-aligned, read-only mapping of zeros that every
// PreWrite segment's zero-fill writes share (O_DIRECT needs the alignment;
// the device only reads it). A failed mapping falls back to the heap
// (8-byte aligned only: the zero-fill writes then fail and so does the
// segment, as for any failed write).
func zeroChunk() []byte {
	zeroBuf.Do(func() {
		b, err := unix.Mmap(-1, 0, zeroBytes, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			b = make([]byte, zeroBytes)
		}
		zeroBuf.b = b
	})
	return zeroBuf.b
}

// adviseRandom turns the kernel's readahead off for f's open file (each
// read brings in what it asks for; Prefetch reads ahead instead), and
// adviseNormal turns it back on. Errors are ignored: readahead is a
// performance hint.
func adviseRandom(f *os.File) { fadvise(f, 0, 0, unix.FADV_RANDOM) }

func adviseNormal(f *os.File) { fadvise(f, 0, 0, unix.FADV_NORMAL) }

// adviseWillNeed starts reading [off, off+n) of f into the page cache
// without waiting for it.
func adviseWillNeed(f *os.File, off, n int64) { fadvise(f, off, n, unix.FADV_WILLNEED) }

func fadvise(f *os.File, off, n int64, advice int) {
	sc, err := f.SyscallConn()
	if err != nil {
		return
	}
	sc.Control(func(fd uintptr) { unix.Fadvise(int(fd), off, n, advice) })
}

// dioAlign is the smallest offset, length and memory alignment that f's
// filesystem accepts for O_DIRECT writes (statx STATX_DIOALIGN: the
// device's logical block size on ext4 and XFS, 512 bytes on this VM's
// virtio disk), as a power of two between 512 and uring.Alignment; the
// page size where the kernel does not say.
func dioAlign(f *os.File) int64 {
	var stx unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &stx); err != nil || stx.Mask&unix.STATX_DIOALIGN == 0 {
		return pageBytes
	}
	a := int64(max(stx.Dio_offset_align, stx.Dio_mem_align))
	if a < 512 || a > pageBytes || a&(a-1) != 0 {
		return pageBytes
	}
	return a
}

// directReader reads [0, size) of a file opened O_DIRECT of its own, in
// reads of up to seqChunk into a page-aligned anonymous mapping
// (Segment.SequentialReader).
type directReader struct {
	f        *os.File
	buf      []byte // mapped, seqChunk bytes
	pos, n   int    // unread bytes are buf[pos:n]
	off      int64  // file offset of the next read
	size     int64
	err      error
	unmapped bool
}

// openDirectReader opens f's file again (through /proc/self/fd, so a
// renamed or unlinked segment still reads) with O_DIRECT.
func openDirectReader(f *os.File, size int64) (*directReader, error) {
	df, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return nil, err
	}
	buf, err := unix.Mmap(-1, 0, seqChunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		df.Close()
		return nil, err
	}
	return &directReader{f: df, buf: buf, size: size}, nil
}

func (r *directReader) Read(p []byte) (int, error) {
	if r.pos == r.n {
		if r.err != nil {
			return 0, r.err
		}
		if r.off >= r.size {
			r.err = io.EOF
			return 0, io.EOF
		}
		if k, ok, err := r.readInto(p); ok {
			if k == 0 {
				return 0, err
			}
			return k, nil // err, if any, is kept for the next Read
		}
		k, err := r.fill(r.buf, int64(seqChunk))
		r.pos, r.n = 0, k
		if k == 0 {
			return 0, err
		}
	}
	c := copy(p, r.buf[r.pos:r.n])
	r.pos += c
	return c, nil
}

// readInto reads straight into p when p is page-aligned and holds at
// least a page (a copy loop's 1 MiB buffer: Go allocates large objects
// on page boundaries), sparing the copy out of the reader's own buffer
// (~9 % of a broker's CPU during uploads). ok false: p does not qualify.
// The read fits in p: it is whole pages of p, or the file's last bytes,
// fewer than those pages, rounded up to a page.
func (r *directReader) readInto(p []byte) (k int, ok bool, err error) {
	if len(p) < pageBytes || uintptr(unsafe.Pointer(unsafe.SliceData(p)))%pageBytes != 0 {
		return 0, false, nil
	}
	k, err = r.fill(p, min(int64(len(p))/pageBytes*pageBytes, int64(seqChunk)))
	return k, true, err
}

// fill reads want bytes at r.off into buf (its length rounded up to a
// page: O_DIRECT), moves r.off past them and keeps an error for the next
// Read (io.ErrUnexpectedEOF for a file shorter than size).
func (r *directReader) fill(buf []byte, want int64) (int, error) {
	want = min(want, r.size-r.off)
	k, err := r.f.ReadAt(buf[:(want+pageBytes-1)/pageBytes*pageBytes], r.off)
	if int64(k) >= want {
		k, err = int(want), nil
	} else if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF // the file is shorter than size
	}
	r.off += int64(k)
	r.err = err
	return k, err
}

func (r *directReader) Close() error {
	if !r.unmapped {
		r.unmapped = true
		unix.Munmap(r.buf)
		r.buf = nil
		r.pos, r.n, r.err = 0, 0, io.ErrClosedPipe
	}
	return r.f.Close()
}
