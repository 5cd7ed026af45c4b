package vfs

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// iovMax is the most buffers one pwritev(2) takes (IOV_MAX).
const iovMax = 1024

// WriteVAt writes bufs one after another at off: pwritev(2) when f is an
// OS file (so an O_DIRECT file takes several aligned buffers in one
// request, without copying them together first; IOV_MAX buffers per call),
// WriteAt per buffer otherwise. It returns the bytes written; short only
// with an error. It may reslice bufs' elements.
func WriteVAt(f File, bufs [][]byte, off int64) (int, error) {
	of, ok := f.(*os.File)
	if !ok {
		return writeEachAt(f, bufs, off)
	}
	total := 0
	for len(bufs) > 0 {
		n, err := unix.Pwritev(int(of.Fd()), bufs[:min(len(bufs), iovMax)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, &os.PathError{Op: "pwritev", Path: of.Name(), Err: err}
		}
		if n == 0 {
			return total, io.ErrShortWrite
		}
		total += n
		off += int64(n)
		for n > 0 && len(bufs) > 0 { // a short write: go on after the bytes taken
			if n < len(bufs[0]) {
				bufs[0] = bufs[0][n:]
				n = 0
				break
			}
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
	}
	return total, nil
}
