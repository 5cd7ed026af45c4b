// Package kframe reads and writes Kafka's wire frames: an int32 big-endian
// size, then that many bytes. It is the one frame reader of everything in
// the module that speaks Kafka: the broker's connections (netpoll, which
// shares the size check and the payload read but keeps its own loop: it
// admits a frame against the request budget between the prefix and the
// payload), the follower fetcher (replica), the transaction coordinator's
// client (broker/txnhost), inter-broker SASL (internal/sasl) and the load
// generator. It also splits a response payload's header (correlation id and,
// for flexible responses, tagged fields) from its body.
//
// Files:
//
//	kframe.go     the size prefix: Size, CheckSize, ReadFrame, ReadPayload, AppendFrame
//	response.go   SplitResponseHeader
//
// Tests: kframe_test.go holds FuzzReadFrame (every stream, limit and buffer
// against a plain reference: negative, oversize, truncated prefixes and
// bodies), the errors, buffer reuse without allocation and the growth of a
// large payload; response_test.go and FuzzSplitResponseHeader the header.
package kframe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/stratalog/strata/internal/crcsum"
)

// HeaderBytes is the size of a frame's length prefix.
const HeaderBytes = 4

// Errors for a frame size prefix that is out of range.
var (
	ErrTooLarge     = errors.New("kframe: frame larger than the maximum")
	ErrNegativeSize = errors.New("kframe: negative frame size")
)

// Size returns the frame size a length prefix announces (negative when its
// top bit is set).
func Size(hdr [HeaderBytes]byte) int32 {
	return int32(binary.BigEndian.Uint32(hdr[:]))
}

// CheckSize reports whether a frame of size bytes may be read with the
// limit maxBytes: ErrNegativeSize or ErrTooLarge (unwrapped) when not. It is
// the only place sizes are judged, by ReadFrame and by netpoll's connection
// reader.
func CheckSize(size, maxBytes int32) error {
	switch {
	case size < 0:
		return ErrNegativeSize
	case size > maxBytes:
		return ErrTooLarge
	}
	return nil
}

// ReadFrame reads one frame (int32 big-endian size, then size bytes) from r
// and returns its payload. The payload is read into buf when it fits in
// cap(buf); otherwise into a new buffer of exactly size bytes. A size that is
// negative or larger than maxBytes is refused after reading only the 4-byte
// prefix, without allocating: the error wraps ErrNegativeSize or
// ErrTooLarge. A stream that ends before the first byte returns io.EOF; one
// that ends inside a frame returns io.ErrUnexpectedEOF. On error the
// returned slice is buf[:0].
func ReadFrame(r io.Reader, maxBytes int32, buf []byte) ([]byte, error) {
	return ReadFrameSummed(r, maxBytes, buf, nil)
}

// ReadFrameSummed is ReadFrame that, given s and a payload that fits in
// cap(buf), reads it with ReadPayloadSummed, so s covers the frame
// returned; a larger payload is read by ReadPayload and s covers nothing.
func ReadFrameSummed(r io.Reader, maxBytes int32, buf []byte, s *crcsum.Sums) ([]byte, error) {
	var hdr []byte
	if cap(buf) >= HeaderBytes {
		hdr = buf[:HeaderBytes]
	} else {
		hdr = make([]byte, HeaderBytes)
	}
	if s != nil {
		s.Reset(nil)
	}
	if _, err := io.ReadFull(r, hdr); err != nil {
		return buf[:0], err
	}
	size := Size([HeaderBytes]byte(hdr))
	if err := CheckSize(size, maxBytes); err != nil {
		return buf[:0], fmt.Errorf("%w: size %d, max %d", err, size, maxBytes)
	}
	var frame []byte
	var err error
	if s != nil && int(size) <= cap(buf) {
		frame, err = ReadPayloadSummed(r, buf, int(size), s)
	} else {
		frame, err = ReadPayload(r, buf, int(size))
	}
	if err != nil {
		if s != nil {
			s.Reset(nil)
		}
		return buf[:0], err
	}
	return frame, nil
}

// growStartBytes is where ReadPayload starts when it must allocate a large
// payload: it grows the buffer (doubling, capped at the size) as bytes
// arrive, so a peer that announces a large frame and sends little of it does
// not cost the whole size in memory.
const growStartBytes = 1 << 20

// ReadPayload reads exactly size bytes (0 <= size, already checked with
// CheckSize) from r into buf when they fit in cap(buf), else into a new
// buffer of capacity exactly size, built up as the bytes arrive. A stream
// that ends early returns io.ErrUnexpectedEOF.
func ReadPayload(r io.Reader, buf []byte, size int) ([]byte, error) {
	if size < 0 {
		return nil, ErrNegativeSize
	}
	if size <= cap(buf) || size <= growStartBytes {
		var frame []byte
		if size <= cap(buf) {
			frame = buf[:size]
		} else {
			frame = make([]byte, size)
		}
		if _, err := io.ReadFull(r, frame); err != nil {
			return nil, unexpectedEOF(err)
		}
		return frame, nil
	}
	frame := make([]byte, growStartBytes)
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, unexpectedEOF(err)
	}
	for len(frame) < size {
		grown := make([]byte, min(size, 2*len(frame)))
		n := copy(grown, frame)
		frame = grown
		if _, err := io.ReadFull(r, frame[n:]); err != nil {
			return nil, unexpectedEOF(err)
		}
	}
	return frame, nil
}

// sumPieceBytes is the most ReadPayloadSummed reads before it sums what
// it read: small enough to be still in the core's L2 cache then.
const sumPieceBytes = 128 << 10

// ReadPayloadSummed is ReadPayload for a payload that fits in cap(buf),
// read at most sumPieceBytes at a time, each piece's whole blocks summed
// into s right after it arrives (package crcsum): s then covers the frame
// returned.
func ReadPayloadSummed(r io.Reader, buf []byte, size int, s *crcsum.Sums) ([]byte, error) {
	if size < 0 {
		return nil, ErrNegativeSize
	}
	if size > cap(buf) {
		return nil, fmt.Errorf("kframe: a %d byte payload in a %d byte buffer", size, cap(buf))
	}
	frame := buf[:size]
	s.Reset(frame)
	for at := 0; at < size; {
		n, err := r.Read(frame[at:min(size, at+sumPieceBytes)])
		at += n
		s.Cover(at)
		if err != nil && at < size {
			return nil, unexpectedEOF(err)
		}
	}
	return frame, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendFrame appends a frame holding payload (size prefix, payload) to dst.
// It panics if payload is longer than math.MaxInt32, which no frame can be
// (a caller's bug, not input).
func AppendFrame(dst, payload []byte) []byte {
	if int64(len(payload)) > 1<<31-1 {
		panic("kframe: payload too large for a frame")
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}
