//go:build !linux

package netpoll

import "os"

// sendfileState is unused where sendfile is not implemented.
type sendfileState struct{}

// sendFile reports that it did not handle the call; the caller copies with
// pread + write.
func (c *Conn) sendFile(f *os.File, off, n int64) (written int64, handled bool, err error) {
	return 0, false, nil
}

func (c *Conn) sendfileStep(fd uintptr) bool { return true }
