package netpoll

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stratalog/strata/internal/kframe"
)

// readBufBytes is the per-connection read buffer: several pipelined small
// requests arrive in one read(2); a larger frame's tail is read straight into
// its frame buffer.
const readBufBytes = 16 << 10

// maxIovecs caps the buffers gathered before a writev (Linux IOV_MAX).
const maxIovecs = 1024

// copyBufBytes is the pread + write fallback's buffer size.
const copyBufBytes = 64 << 10

// Slot states; see the package doc.
const (
	slotFree    uint8 = iota // in the ring, not holding a request
	slotPending              // handed to Serve, not completed
	slotReady                // completed, waiting for the writer
	slotDone                 // completed after the connection died; never reused
)

// Conn is one client connection.
type Conn struct {
	s      *Server
	id     uint64
	nc     net.Conn
	remote net.Addr
	ip     string        // remote's address, as the connection limits count it
	done   chan struct{} // closed by Close
	// active is when a frame last arrived (unix nanos, Config.Now): the
	// least recently active connection is closed first (limits.go).
	active atomic.Int64

	// raw is the socket for sendfile; nil when nc is not a syscall.Conn
	// (a TLS connection: file parts are copied through it).
	raw syscall.RawConn

	// The listener (listener.go). On a TLS listener nc is tc, closer the
	// socket under it, and tw coalesces small responses into records.
	l         *Listener
	tc        *tls.Conn
	tw        *bufio.Writer
	closer    net.Conn
	principal atomic.Pointer[string] // Anonymous or the certificate's before the first Serve; SASL sets it later (Authenticated)
	tlsState  *tls.ConnectionState   // set by the reader before the first Serve

	// preAuthMax caps frames until Authenticated (Listener.UnauthenticatedMaxFrameBytes; 0: no cap).
	preAuthMax atomic.Int32
	// muteUntil (unix nanos of the server's clock, 0 none) holds the next
	// frame's read back: a throttled client's channel muted (MuteFor).
	muteUntil atomic.Int64
	// session is the handler's state for the connection (SetSession);
	// only the reader's goroutine (Handler.Serve) touches it.
	session any

	mu            sync.Mutex
	canWrite      sync.Cond // signalled when the head slot becomes ready, or on close
	canRead       sync.Cond // signalled when a slot frees, on close, or on closing
	slots         []Reply   // ring; slot for sequence number q is slots[q%len]
	head          uint64    // next sequence number to write (writer advances)
	tail          uint64    // next sequence number to read (reader advances)
	dead          bool      // closed: no more reads, writes or slots
	closing       bool      // a Reply.Close is queued: the reader stops
	writerWaiting bool
	readerWaiting bool
	queuedBytes   int64 // payload bytes of the frames read and not yet released

	// admitW and growW are this connection's places in the broker-wide
	// budget's queues: the reader waits in admitW for a new frame's bytes,
	// Reply.Reserve in growW (both only on the reader's goroutine).
	admitW, growW budgetWaiter

	// Reader-owned.
	br     *bufio.Reader
	hdr    [FrameHeaderBytes]byte
	rArmed time.Time // when the read deadline was last pushed

	// Writer-owned.
	iov        [][]byte
	bufs       net.Buffers
	wArmed     time.Time
	noSendfile bool
	sf         sendfileState
	sfStep     func(fd uintptr) bool // c.sendfileStep, bound once
}

func newConn(s *Server, nc net.Conn, l *Listener) *Conn {
	c := &Conn{
		s:      s,
		l:      l,
		id:     s.nextID.Add(1),
		nc:     nc,
		remote: nc.RemoteAddr(),
		done:   make(chan struct{}),
		slots:  make([]Reply, s.cfg.MaxInFlight),
		br:     bufio.NewReaderSize(nc, readBufBytes),
		iov:    make([][]byte, 0, 64),

		noSendfile: s.cfg.copyFiles,
	}
	c.canWrite.L = &c.mu
	c.canRead.L = &c.mu
	if s.budget != nil {
		c.admitW.ready = make(chan struct{}, 1)
		c.growW.ready = make(chan struct{}, 1)
	}
	for i := range c.slots {
		c.slots[i].c = c
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
		}
	}
	c.sfStep = c.sendfileStep
	c.active.Store(s.cfg.Now().UnixNano())
	c.secure(nc)
	return c
}

// ID returns the connection's id, unique within its Server.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr returns the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// Done returns a channel closed when the connection closes.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close closes the connection now, without waiting for queued responses
// (use Reply.Close for that). Safe from any goroutine, more than once.
func (c *Conn) Close() {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return
	}
	c.dead = true
	c.mu.Unlock()
	c.canWrite.Broadcast()
	c.canRead.Broadcast()
	close(c.done)
	c.closer.Close()
	c.s.removeConn(c)
	if cc, ok := c.s.h.(ConnCloseHandler); ok {
		cc.ConnClosed(c)
	}
}

func (c *Conn) slot(seq uint64) *Reply { return &c.slots[seq%uint64(len(c.slots))] }

// ---- reader ----

// readLoop reads frames and calls the handler until the connection fails,
// closes, or a Reply.Close is queued.
func (c *Conn) readLoop() {
	defer c.s.wg.Done()
	if !c.handshake() {
		return
	}
	maxBytes := c.s.cfg.MaxFrameBytes
	for {
		if !c.waitFreeSlot() || !c.waitMuted() {
			return
		}
		size, err := c.readHeader()
		if err != nil {
			c.readFailed(err)
			return
		}
		c.active.Store(c.s.cfg.Now().UnixNano())
		if capped := c.preAuthMax.Load(); capped > 0 && size > capped {
			if ok, held := c.s.refused.Allow(c.s.cfg.Now()); ok {
				c.s.log.Warn("netpoll: frame larger than allowed before authentication; closing connection",
					"remote", c.remote.String(), "listener", c.l.Name, "size", size, "max", capped,
					"similar_lines_suppressed", held)
			}
			c.Close()
			return
		}
		if err := c.s.checkFrame(size); err != nil {
			if ok, held := c.s.refused.Allow(c.s.cfg.Now()); ok {
				if what := foreignProtocol(c.hdr); what != "" {
					c.s.log.Warn("netpoll: "+what+" on a Kafka PLAINTEXT listener; closing connection",
						"remote", c.remote.String(), "listener", c.l.Name, "similar_lines_suppressed", held)
				} else {
					c.s.log.Warn("netpoll: refusing frame; closing connection",
						"remote", c.remote.String(), "size", size, "max", maxBytes,
						"max_queued", c.s.cfg.MaxQueuedBytes, "err", err,
						"similar_lines_suppressed", held)
				}
			}
			c.Close()
			return
		}
		if !c.waitQueued(int64(size)) {
			return
		}
		if !c.admit(int64(size)) {
			return
		}
		c.armRead()
		fb := pooledFrame(int(size), int(maxBytes))
		var frame []byte
		switch {
		case fb != nil && c.s.cfg.SumFramesFrom > 0 && int(size) >= c.s.cfg.SumFramesFrom:
			frame, err = kframe.ReadPayloadSummed(c.br, fb.b, int(size), &fb.sums)
		case fb != nil:
			fb.sums.Reset(nil)
			frame, err = kframe.ReadPayload(c.br, fb.b, int(size))
		default:
			frame, err = kframe.ReadPayload(c.br, nil, int(size))
		}
		if err != nil {
			putFrame(fb)
			c.s.giveBack(int64(size))
			c.readFailed(err)
			return
		}
		frame = frame[:size:size]
		r := c.publish(fb, int64(size))
		if r == nil {
			putFrame(fb)
			c.s.giveBack(int64(size))
			return
		}
		c.s.h.Serve(c, frame, r)
	}
}

// MuteFor stops reading the connection's next requests for d (what is
// already read is served): Kafka mutes a throttled client's channel for
// its throttle time (KIP-219). A later call can only extend it.
func (c *Conn) MuteFor(d time.Duration) {
	if d <= 0 {
		return
	}
	until := c.s.cfg.Now().Add(d).UnixNano()
	for {
		cur := c.muteUntil.Load()
		if cur >= until || c.muteUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// muteRecheck bounds one sleep of waitMuted.
const muteRecheck = 100 * time.Millisecond

// waitMuted waits out a MuteFor; false when the connection closed
// meanwhile.
func (c *Conn) waitMuted() bool {
	for {
		until := c.muteUntil.Load()
		if until == 0 {
			return true
		}
		d := time.Duration(until - c.s.cfg.Now().UnixNano())
		if d <= 0 {
			c.muteUntil.CompareAndSwap(until, 0)
			return true
		}
		// A bounded sleep, then the clock again: the clock is the
		// server's (tests move it), the timer the runtime's.
		t := time.NewTimer(min(d, muteRecheck))
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return false
		}
	}
}

// waitFreeSlot blocks while every slot is in flight. It reports false when
// the reader should stop: the connection is dead or closing.
func (c *Conn) waitFreeSlot() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.dead && !c.closing && c.tail-c.head >= uint64(len(c.slots)) {
		c.readerWaiting = true
		c.canRead.Wait()
		c.readerWaiting = false
	}
	return !c.dead && !c.closing
}

// waitQueued blocks while admitting a frame of size bytes would take the
// connection's queued request bytes past QueuedMaxRequestBytes (a frame is
// always admitted when nothing is queued), then reserves them; release gives
// them back. It reports false when the reader should stop.
func (c *Conn) waitQueued(size int64) bool {
	limit := c.s.cfg.QueuedMaxRequestBytes
	c.mu.Lock()
	defer c.mu.Unlock()
	for limit > 0 && !c.dead && !c.closing && c.queuedBytes > 0 && c.queuedBytes+size > limit {
		c.readerWaiting = true
		c.canRead.Wait()
		c.readerWaiting = false
	}
	c.queuedBytes += size
	return !c.dead && !c.closing
}

// admit takes size bytes of the broker-wide budget for the next frame,
// waiting (without reading the socket) while they do not fit. It reports
// false when the connection closed meanwhile.
func (c *Conn) admit(size int64) bool {
	b := c.s.budget
	if b == nil {
		return true
	}
	return b.acquire(&c.admitW, size, 0, false, c.done)
}

// publish hands the tail slot, now holding fb (size payload bytes, already
// reserved by waitQueued), to the writer's view of the ring; nil when the
// connection died or is closing meanwhile.
func (c *Conn) publish(fb *frameBuf, size int64) *Reply {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead || c.closing {
		return nil
	}
	r := c.slot(c.tail)
	if r.state != slotFree {
		panic("netpoll: reusing a slot that was not released")
	}
	r.seq = c.tail
	r.state = slotPending
	r.frame = fb
	r.bytes = size
	c.tail++
	return r
}

// readHeader reads a frame's size prefix. With an idle timeout, a deadline
// that expires between frames closes the connection only when no request is
// in flight (a slow handler or a long poll is not idleness).
func (c *Conn) readHeader() (int32, error) {
	for {
		c.armRead()
		n, err := io.ReadFull(c.br, c.hdr[:])
		if err == nil {
			return kframe.Size(c.hdr), nil
		}
		if n == 0 && isTimeout(err) && c.inFlight() {
			c.rArmed = time.Time{}
			continue
		}
		return 0, err
	}
}

// armRead pushes the read deadline IdleTimeout ahead, at most every
// IdleTimeout/16 so a busy connection does not touch its timer per frame.
func (c *Conn) armRead() {
	idle := c.s.cfg.IdleTimeout
	if idle <= 0 {
		return
	}
	now := c.s.cfg.Now() // the wall clock unless a test injects one: a deadline is a wall-clock instant
	if now.Sub(c.rArmed) < idle/16 {
		return
	}
	c.rArmed = now
	c.nc.SetReadDeadline(now.Add(idle))
}

func (c *Conn) inFlight() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tail != c.head
}

func (c *Conn) readFailed(err error) {
	switch {
	case err == io.EOF:
		// Client closed between frames: normal.
	case isTimeout(err):
		c.s.log.Info("netpoll: closing idle connection", "remote", c.remote.String(),
			"idle", c.s.cfg.IdleTimeout)
	case !c.isDead():
		c.s.log.Debug("netpoll: read failed; closing connection", "remote", c.remote.String(), "err", err)
	}
	c.Close()
}

func (c *Conn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ---- writer ----

// writeLoop writes completed replies in sequence order until the connection
// dies, then drops what is left.
func (c *Conn) writeLoop() {
	defer c.s.wg.Done()
	defer c.drain()
	for {
		start, end, ok := c.waitReady()
		if !ok {
			return
		}
		err, closeAfter := c.writeRun(start, end)
		c.release(start, end)
		if err != nil {
			if !c.isDead() {
				c.s.log.Debug("netpoll: write failed; closing connection", "remote", c.remote.String(), "err", err)
			}
			c.Close()
			return
		}
		if closeAfter {
			c.Close()
			return
		}
	}
}

// waitReady blocks until the head slot is ready and returns the run of
// consecutive ready slots [start, end), ending early after a Close slot.
// ok is false when the connection died.
func (c *Conn) waitReady() (start, end uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.dead && (c.head == c.tail || c.slot(c.head).state != slotReady) {
		c.writerWaiting = true
		c.canWrite.Wait()
		c.writerWaiting = false
	}
	if c.dead {
		return 0, 0, false
	}
	start, end = c.head, c.head
	for end != c.tail {
		r := c.slot(end)
		if r.state != slotReady {
			break
		}
		end++
		if r.kind == kindClose {
			break
		}
	}
	return start, end, true
}

// writeRun writes the responses of slots [start, end), which are ready and
// owned by the writer until release. closeAfter reports a Close slot.
func (c *Conn) writeRun(start, end uint64) (err error, closeAfter bool) {
	for seq := start; seq < end; seq++ {
		r := c.slot(seq)
		switch r.kind {
		case kindSkip:
		case kindClose:
			return c.flush(), true
		case kindSend:
			binary.BigEndian.PutUint32(r.hdr[:], uint32(len(r.resp)))
			c.iov = append(c.iov, r.hdr[:], r.resp)
		case kindParts:
			binary.BigEndian.PutUint32(r.hdr[:], uint32(r.size))
			c.iov = append(c.iov, r.hdr[:])
			for i := range r.parts {
				p := &r.parts[i]
				if p.File == nil {
					if len(p.Buf) > 0 {
						c.iov = append(c.iov, p.Buf)
					}
				} else if p.Len > 0 {
					if err := c.flush(); err != nil {
						return err, false
					}
					if err := c.writeFile(p.File, p.Off, p.Len); err != nil {
						return err, false
					}
				}
				if len(c.iov) >= maxIovecs {
					if err := c.flush(); err != nil {
						return err, false
					}
				}
			}
		}
		if len(c.iov) >= maxIovecs {
			if err := c.flush(); err != nil {
				return err, false
			}
		}
	}
	return c.flush(), false
}

// flush writes the gathered buffers with writev.
func (c *Conn) flush() error {
	if len(c.iov) == 0 {
		return nil
	}
	c.armWrite()
	var err error
	if c.tw != nil {
		for _, b := range c.iov {
			if _, err = c.tw.Write(b); err != nil {
				break
			}
		}
		if err == nil {
			err = c.tw.Flush()
		}
	} else {
		c.bufs = c.iov
		_, err = c.bufs.WriteTo(c.nc)
	}
	clear(c.iov)
	c.iov = c.iov[:0]
	c.bufs = nil
	return err
}

// armWrite pushes the write deadline IdleTimeout ahead (lazily, as armRead).
func (c *Conn) armWrite() {
	idle := c.s.cfg.IdleTimeout
	if idle <= 0 {
		return
	}
	now := c.s.cfg.Now() // the wall clock unless a test injects one: a deadline is a wall-clock instant
	if now.Sub(c.wArmed) < idle/16 {
		return
	}
	c.wArmed = now
	c.nc.SetWriteDeadline(now.Add(idle))
}

// errShortFile: a file part extends past the end of its file. The size
// prefix is already on the wire, so the frame cannot be finished.
var errShortFile = errors.New("netpoll: file part extends past end of file")

// writeFile writes f[off : off+n]: sendfile when it can, else pread + write.
func (c *Conn) writeFile(f *os.File, off, n int64) error {
	c.armWrite()
	written, handled, err := c.sendFile(f, off, n)
	c.s.sendfileBytes.Add(written)
	if handled {
		return err
	}
	return c.copyFile(f, off+written, n-written)
}

// copyFile is the fallback: pread into a pooled buffer, write to the socket.
func (c *Conn) copyFile(f *os.File, off, n int64) error {
	fb := pooledFrame(copyBufBytes, copyBufBytes)
	defer putFrame(fb)
	buf := fb.b[:copyBufBytes]
	for n > 0 {
		chunk := buf[:min(n, int64(len(buf)))]
		m, err := f.ReadAt(chunk, off)
		if m < len(chunk) {
			if err == nil || err == io.EOF {
				err = errShortFile
			}
			return err
		}
		w, err := c.nc.Write(chunk)
		c.s.copiedBytes.Add(int64(w))
		if err != nil {
			return err
		}
		off += int64(m)
		n -= int64(m)
	}
	return nil
}

// release frees slots [start, end) after their write: done callbacks run,
// frame buffers return to their pools, and the reader may reuse the slots.
func (c *Conn) release(start, end uint64) {
	for seq := start; seq < end; seq++ {
		r := c.slot(seq)
		done, fb := r.done, r.frame
		r.resp, r.parts, r.done, r.frame = nil, nil, nil, nil
		if done != nil {
			done()
		}
		putFrame(fb)
	}
	c.mu.Lock()
	var budgeted int64
	for seq := start; seq < end; seq++ {
		r := c.slot(seq)
		r.state = slotFree
		c.queuedBytes -= r.bytes
		budgeted += r.bytes + r.extra
		r.bytes, r.extra = 0, 0
	}
	c.head = end
	wake := c.readerWaiting
	c.mu.Unlock()
	c.s.giveBack(budgeted)
	if wake {
		c.canRead.Signal()
	}
}

// drain runs when the writer stops (the connection is dead): replies that
// completed but were not written are dropped; pending ones are dropped by
// whoever completes them.
func (c *Conn) drain() {
	var dropped []*Reply
	var budgeted int64
	c.mu.Lock()
	for seq := c.head; seq != c.tail; seq++ {
		if r := c.slot(seq); r.state == slotReady {
			r.state = slotDone
			budgeted += r.bytes + r.extra
			r.bytes, r.extra = 0, 0
			dropped = append(dropped, r)
		}
	}
	c.mu.Unlock()
	c.s.giveBack(budgeted)
	for _, r := range dropped {
		done, fb := r.done, r.frame
		r.resp, r.parts, r.done, r.frame = nil, nil, nil, nil
		if done != nil {
			done()
		}
		putFrame(fb)
	}
}
