package kframe

import (
	"encoding/binary"
	"errors"
)

// ErrResponseHeader is returned by SplitResponseHeader for a response body
// too short for its header or with malformed tagged fields.
var ErrResponseHeader = errors.New("kframe: malformed response header")

// SplitResponseHeader splits a Kafka response frame's payload (ReadFrame)
// into its correlation id and the message after the header, skipping the
// header's tagged fields when the response is flexible (header v1). Every
// client inside the broker (follower fetches, transaction markers) and the
// load generator read responses through it.
func SplitResponseHeader(b []byte, flexible bool) (rest []byte, corr int32, err error) {
	if len(b) < 4 {
		return nil, 0, errors.Join(ErrResponseHeader, errors.New("shorter than its correlation id"))
	}
	corr = int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	if !flexible {
		return b, corr, nil
	}
	ntags, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, 0, errors.Join(ErrResponseHeader, errors.New("bad tag count"))
	}
	b = b[k:]
	for i := uint64(0); i < ntags; i++ {
		_, k := binary.Uvarint(b) // tag key
		if k <= 0 {
			return nil, 0, errors.Join(ErrResponseHeader, errors.New("bad tag"))
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, 0, errors.Join(ErrResponseHeader, errors.New("bad tag size"))
		}
		b = b[k+int(size):]
	}
	return b, corr, nil
}
