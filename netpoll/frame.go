package netpoll

import (
	"errors"
	"math/bits"
	"sync"

	"github.com/stratalog/strata/internal/crcsum"
	"github.com/stratalog/strata/internal/kframe"
)

// FrameHeaderBytes is the size of a frame's length prefix.
const FrameHeaderBytes = kframe.HeaderBytes

// ErrFrameOverBudget: a frame larger than the whole broker-wide request
// budget (Config.MaxQueuedBytes) could never be admitted.
var ErrFrameOverBudget = errors.New("netpoll: frame larger than the request budget")

// The connection reader (Conn.readLoop) does not call kframe.ReadFrame: it
// is the same blocking read, but split in two around the broker's decisions
// between a frame's size prefix and its payload (the pre-authentication cap,
// the request budget's admission, a pooled buffer of the frame's size
// class). It shares the rest with every other Kafka reader in the module:
// the prefix's parsing (kframe.Size), its judgement (kframe.CheckSize) and
// the payload read (kframe.ReadPayload).

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
	class int8        // index into framePools
	sums  crcsum.Sums // of the frame in b when it was read summed; else empty
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
// class is always allowed). Such frames get an exact buffer from kframe.ReadPayload.
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
