package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// maxFrameSlack is what a response frame may exceed
// replica.fetch.response.max.bytes by: framing, plus the one batch a
// leader returns whole even when it is larger than the budget (KIP-74).
// A frame length beyond the budget plus this is refused before anything is
// allocated for it.
const maxFrameSlack = 64 << 20

var errFrameTooLarge = errors.New("replica: response frame too large")

// readFrame reads one size-prefixed frame from r into buf (grown as needed)
// and returns the body. The length is checked against max before the
// buffer grows.
func readFrame(r io.Reader, buf []byte, max int64) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return buf[:0], err
	}
	n := int32(binary.BigEndian.Uint32(hdr[:]))
	if n < 4 {
		return buf[:0], fmt.Errorf("replica: response frame of %d bytes", n)
	}
	if int64(n) > max {
		return buf[:0], fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, n, max)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return buf[:0], err
	}
	return buf, nil
}

// parseResponseHeader splits a response body into its correlation id and
// the message, skipping the header's tagged fields when flexible.
func parseResponseHeader(b []byte, flexible bool) (rest []byte, corr int32, err error) {
	if len(b) < 4 {
		return nil, 0, errors.New("replica: response shorter than its header")
	}
	corr = int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	if !flexible {
		return b, corr, nil
	}
	ntags, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, 0, errors.New("replica: bad tag count in response header")
	}
	b = b[k:]
	for i := uint64(0); i < ntags; i++ {
		_, k := binary.Uvarint(b) // tag key
		if k <= 0 {
			return nil, 0, errors.New("replica: bad tag in response header")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, 0, errors.New("replica: bad tag size in response header")
		}
		b = b[k+int(size):]
	}
	return b, corr, nil
}
