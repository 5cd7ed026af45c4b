//go:build linux

package netpoll

import (
	"errors"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// maxSendfileChunk keeps each sendfile(2) call below Linux's per-call limit
// (0x7ffff000 bytes).
const maxSendfileChunk = 1 << 30

// sendfileState is the writer's in-progress sendfile, kept on the Conn so the
// RawConn callback (c.sfStep, bound once) needs no closure per call.
type sendfileState struct {
	in      int   // source file descriptor
	off     int64 // next file offset; sendfile advances it, not the file's offset
	remain  int64
	written int64
	err     error
}

// sendFile writes f[off : off+n] to the socket with sendfile(2), waiting on
// the runtime poller when the socket buffer is full. handled is false when
// sendfile cannot be used here (no raw socket, or the kernel refuses this
// file before writing anything); the caller then copies. written counts the
// bytes sent either way.
func (c *Conn) sendFile(f *os.File, off, n int64) (written int64, handled bool, err error) {
	if c.raw == nil || c.noSendfile {
		return 0, false, nil
	}
	st := &c.sf
	*st = sendfileState{in: int(f.Fd()), off: off, remain: n}
	werr := c.raw.Write(c.sfStep)
	runtime.KeepAlive(f)
	written, err = st.written, st.err
	st.err = nil
	if err == nil {
		err = werr
	}
	if written == 0 && sendfileUnsupported(err) {
		c.noSendfile = true
		return 0, false, nil
	}
	return written, true, err
}

// sendfileStep is the RawConn.Write callback: it reports false to wait for
// the socket to become writable, true when done or failed.
func (c *Conn) sendfileStep(fd uintptr) bool {
	st := &c.sf
	for st.remain > 0 {
		n, err := unix.Sendfile(int(fd), st.in, &st.off, int(min(st.remain, maxSendfileChunk)))
		if n > 0 {
			st.remain -= int64(n)
			st.written += int64(n)
		}
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			return false
		case err != nil:
			st.err = os.NewSyscallError("sendfile", err)
			return true
		case n == 0:
			st.err = errShortFile
			return true
		}
	}
	return true
}

func sendfileUnsupported(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)
}
