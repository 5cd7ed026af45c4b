package netpoll

import (
	"math"
	"os"
	"unsafe"

	"github.com/stratalog/strata/internal/crcsum"
)

// Reply kinds.
const (
	kindSend  uint8 = iota + 1 // resp
	kindParts                  // parts, done
	kindSkip                   // nothing on the wire
	kindClose                  // nothing on the wire; close after earlier responses
)

// Reply is the response slot for one request; responses are written in
// request order whatever order replies complete in. A Reply must be completed
// exactly once, by Send, SendParts, Skip or Close; completing it twice panics
// (while netpoll can still tell), and a Reply must not be touched after it is
// completed: its slot is reused for a later request.
type Reply struct {
	c     *Conn
	seq   uint64 // request sequence number on c
	state uint8  // slot*, guarded by c.mu

	// Set by the completer before the state becomes ready; read by the writer
	// after it observed ready (both under c.mu, so the fields need no lock).
	kind  uint8
	size  int64 // kindParts: the sum of the parts' lengths
	resp  []byte
	parts []Part
	done  func()
	frame *frameBuf              // nil for a frame too large to pool
	bytes int64                  // the request payload's size, counted in Conn.queuedBytes and the budget
	extra int64                  // bytes taken from the budget by Reserve
	hdr   [FrameHeaderBytes]byte // the size prefix, filled by the writer
}

// Sums are the block checksums of the request's frame taken as it was
// read (Config.SumFramesFrom), or nil: valid until the reply is completed,
// for checking CRCs of the frame's bytes (crcsum.Sums.Checksum, with the
// bytes' offset in the frame: FrameOffset).
func (r *Reply) Sums() *crcsum.Sums {
	if r.frame == nil {
		return nil
	}
	return &r.frame.sums
}

// FrameOffset is the offset of p in the request's frame buffer, false when
// p is empty or does not lie in it (a copy, another buffer).
func (r *Reply) FrameOffset(p []byte) (int, bool) {
	if r.frame == nil || len(p) == 0 {
		return 0, false
	}
	buf := r.frame.b
	start := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	base := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	if start < base || start-base > uintptr(len(buf)-len(p)) {
		return 0, false
	}
	return int(start - base), true
}

// Part is one piece of a SendParts response: Buf, or when File is non-nil
// the range File[Off : Off+Len] (Buf is then ignored).
type Part struct {
	Buf  []byte
	File *os.File // if non-nil: write File[Off : Off+Len] with sendfile
	Off  int64
	Len  int64
}

// Send completes the reply with resp, the response without its size prefix;
// netpoll adds the prefix. resp is written later, in request order: the
// caller must not modify it afterwards, and netpoll does not retain it after
// the write.
func (r *Reply) Send(resp []byte) {
	if int64(len(resp)) > math.MaxInt32 {
		r.c.s.log.Error("netpoll: response larger than a frame can carry; closing connection",
			"remote", r.c.remote.String(), "bytes", len(resp))
		r.complete(kindClose, nil, nil, 0, nil)
		return
	}
	r.complete(kindSend, resp, nil, 0, nil)
}

// SendParts completes the reply with a response assembled from parts, written
// in order behind a size prefix equal to the sum of their lengths: Buf parts
// with writev, File parts with sendfile(2) at their offset (the file's own
// offset never moves). parts, the bytes it references and the files must stay
// unmodified and open until done is called; done (nil ok) runs once, after
// the parts were written or the connection failed or closed. A part with a
// negative offset or length, or parts summing past math.MaxInt32, are a
// caller bug: logged, and the connection is closed after the earlier
// responses.
func (r *Reply) SendParts(parts []Part, done func()) {
	var total int64
	for i := range parts {
		p := &parts[i]
		n := int64(len(p.Buf))
		if p.File != nil {
			if p.Off < 0 || p.Len < 0 || p.Off > math.MaxInt64-p.Len {
				r.c.s.log.Error("netpoll: invalid file part; closing connection",
					"remote", r.c.remote.String(), "part", i, "off", p.Off, "len", p.Len)
				r.complete(kindClose, nil, nil, 0, done)
				return
			}
			n = p.Len
		}
		total += n
		if total > math.MaxInt32 {
			r.c.s.log.Error("netpoll: response larger than a frame can carry; closing connection",
				"remote", r.c.remote.String(), "parts", len(parts))
			r.complete(kindClose, nil, nil, 0, done)
			return
		}
	}
	r.complete(kindParts, nil, parts, total, done)
}

// Reserve takes n more bytes of the broker-wide request budget
// (Config.MaxQueuedBytes) for this request, for memory the handler derives
// from the frame (a decoded request), and holds them until the reply's slot
// is freed, like the frame's own bytes. It waits, ahead of frames not yet
// admitted, while they do not fit (see budget for the one case it is granted
// past the limit). It returns false without waiting when the frame and n
// together could never fit, and false when the connection closes while
// waiting; the handler should then not allocate and should Close the reply.
// With an unbounded budget it returns true at once. Reserve must be called
// before the reply is completed, on the goroutine running Handler.Serve for
// it (the connection's reader).
func (r *Reply) Reserve(n int64) bool {
	c := r.c
	b := c.s.budget
	if b == nil || n <= 0 {
		return true
	}
	c.mu.Lock()
	if r.state != slotPending {
		c.mu.Unlock()
		panic("netpoll: Reserve on a completed Reply")
	}
	held := r.bytes + r.extra
	c.mu.Unlock()
	if held+n > b.limit {
		return false
	}
	if !b.acquire(&c.growW, n, held, true, c.done) {
		return false
	}
	c.mu.Lock()
	r.extra += n
	c.mu.Unlock()
	return true
}

// Skip completes the reply with no response (acks=0).
func (r *Reply) Skip() { r.complete(kindSkip, nil, nil, 0, nil) }

// Close completes the reply with no response and closes the connection once
// every earlier response is written. The reader stops: requests after this
// one are not served.
func (r *Reply) Close() { r.complete(kindClose, nil, nil, 0, nil) }

func (r *Reply) complete(kind uint8, resp []byte, parts []Part, size int64, done func()) {
	c := r.c
	c.mu.Lock()
	if r.state != slotPending {
		c.mu.Unlock()
		panic("netpoll: Reply completed twice")
	}
	if c.dead {
		// Nobody will write it: drop it now, on the completer's goroutine.
		r.state = slotDone
		fb := r.frame
		r.frame = nil
		budgeted := r.bytes + r.extra
		r.bytes, r.extra = 0, 0
		c.mu.Unlock()
		if done != nil {
			done()
		}
		putFrame(fb)
		c.s.giveBack(budgeted)
		return
	}
	r.kind, r.resp, r.parts, r.size, r.done = kind, resp, parts, size, done
	r.state = slotReady
	wakeReader := false
	if kind == kindClose {
		c.closing = true
		wakeReader = c.readerWaiting
	}
	wakeWriter := c.writerWaiting && r.seq == c.head
	c.mu.Unlock()
	if wakeWriter {
		c.canWrite.Signal()
	}
	if wakeReader {
		c.canRead.Signal()
	}
}
