package netpoll

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
)

// FrameHeaderBytes is the size of a frame's length prefix.
const FrameHeaderBytes = 4

// Errors for a frame size prefix that is out of range.
var (
	ErrFrameTooLarge     = errors.New("netpoll: frame larger than the maximum")
	ErrNegativeFrameSize = errors.New("netpoll: negative frame size")
	// ErrFrameOverBudget: a frame larger than the whole broker-wide request
	// budget (Config.MaxQueuedBytes) could never be admitted.
	ErrFrameOverBudget = errors.New("netpoll: frame larger than the request budget")
)

// checkFrameSize reports whether a size prefix may be read into a buffer.
// It is the only place sizes are judged, shared by ReadFrame and the
// connection reader.
func checkFrameSize(size, maxBytes int32) error {
	switch {
	case size < 0:
		return ErrNegativeFrameSize
	case size > maxBytes:
		return ErrFrameTooLarge
	}
	return nil
}

// ReadFrame reads one frame (int32 big-endian size, then size bytes) from r
// and returns its payload. The payload is read into buf when it fits in
// cap(buf); otherwise into a new buffer of exactly size bytes. A size that is
// negative or larger than maxBytes is refused after reading only the 4-byte
// prefix, without allocating: the error wraps ErrNegativeFrameSize or
// ErrFrameTooLarge. A stream that ends before the first byte returns io.EOF;
// one that ends inside a frame returns io.ErrUnexpectedEOF. On error the
// returned slice is buf[:0].
//
// The connection reader applies the same size check (it reads payloads into
// pooled buffers instead of buf); ReadFrame is the fuzzed entry point and a
// helper for clients and tests.
func ReadFrame(r io.Reader, maxBytes int32, buf []byte) ([]byte, error) {
	var hdr []byte
	if cap(buf) >= FrameHeaderBytes {
		hdr = buf[:FrameHeaderBytes]
	} else {
		hdr = make([]byte, FrameHeaderBytes)
	}
	if _, err := io.ReadFull(r, hdr); err != nil {
		return buf[:0], err
	}
	size := int32(binary.BigEndian.Uint32(hdr))
	if err := checkFrameSize(size, maxBytes); err != nil {
		return buf[:0], fmt.Errorf("%w: size %d, max %d", err, size, maxBytes)
	}
	frame, err := readPayload(r, buf, int(size))
	if err != nil {
		return buf[:0], err
	}
	return frame, nil
}

// growStartBytes is where readPayload starts when it must allocate a large
// payload: it grows the buffer (doubling, capped at the size) as bytes
// arrive, so a peer that announces a large frame and sends little of it does
// not cost the whole size in memory.
const growStartBytes = 1 << 20

// readPayload reads exactly size bytes (0 <= size) from r into buf when they
// fit in cap(buf), else into a new buffer of capacity exactly size, built up
// as the bytes arrive. A stream that ends early returns io.ErrUnexpectedEOF.
func readPayload(r io.Reader, buf []byte, size int) ([]byte, error) {
	if size <= cap(buf) || size <= growStartBytes {
		frame := buf[:0]
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

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendFrame appends a frame holding payload (size prefix, payload) to dst.
// It panics if payload is longer than math.MaxInt32, which no frame can be.
func AppendFrame(dst, payload []byte) []byte {
	if int64(len(payload)) > 1<<31-1 {
		panic("netpoll: payload too large for a frame")
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

// Frame buffer pool: one sync.Pool per power-of-two size class.
const (
	minClassShift = 9  // 512 B, the smallest class
	maxClassShift = 24 // 16 MiB, the largest pooled class
	numClasses    = maxClassShift - minClassShift + 1
)

// frameBuf is a pooled buffer. Pools hold pointers so Get and Put do not
// allocate.
type frameBuf struct {
	b     []byte
	class int8 // index into framePools
}

var framePools [numClasses]sync.Pool

// sizeClass returns the class whose buffers hold n bytes; numClasses or more
// when n is larger than the largest pooled class.
func sizeClass(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// pooledFrame returns a pooled buffer of at least n bytes (0 <= n), rounded
// up to its size class, or nil when n is larger than the largest class or
// the class is larger than limit (the connection's MaxFrameBytes; the 512 B
// class is always allowed). Such frames get an exact buffer from readPayload.
func pooledFrame(n, limit int) *frameBuf {
	cls := sizeClass(n)
	if cls >= numClasses || (cls > 0 && 1<<(cls+minClassShift) > limit) {
		return nil
	}
	if fb, ok := framePools[cls].Get().(*frameBuf); ok {
		return fb
	}
	return &frameBuf{b: make([]byte, 1<<(cls+minClassShift)), class: int8(cls)}
}

// putFrame returns fb to its pool; nil is ignored.
func putFrame(fb *frameBuf) {
	if fb == nil {
		return
	}
	framePools[fb.class].Put(fb)
}

// foreignProtocol names what a refused frame's first four bytes are when
// they are not a Kafka size at all: a TLS handshake record (a client set up
// for SSL or SASL_SSL talking to a plaintext listener; as a size it reads
// 369 MB) or an HTTP request. "" otherwise.
func foreignProtocol(hdr [4]byte) string {
	switch {
	case hdr[0] == 0x16 && hdr[1] == 0x03 && hdr[2] <= 0x04:
		return "TLS handshake (the client uses SSL or SASL_SSL)"
	case string(hdr[:]) == "GET " || string(hdr[:]) == "POST" || string(hdr[:]) == "HEAD" || string(hdr[:]) == "PUT ":
		return "HTTP request"
	}
	return ""
}
