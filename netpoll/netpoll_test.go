package netpoll

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/kframe"
)

func TestEchoRoundTrip(t *testing.T) {
	_, addr := startServer(t, Config{}, echo)
	c := dial(t, addr)
	sizes := []int{0, 1, 100, 511, 512, 513, 4096, readBufBytes - 4, readBufBytes + 1, 70000, 1<<20 + 3}
	rng := rand.New(rand.NewPCG(1, 2))
	payloads := make([][]byte, len(sizes))
	for i, n := range sizes {
		payloads[i] = make([]byte, n)
		for j := range payloads[i] {
			payloads[i][j] = byte(rng.Uint32())
		}
	}
	// One at a time.
	for i, p := range payloads {
		writeFrame(t, c, p)
		if got := readFrame(t, c); !bytes.Equal(got, p) {
			t.Fatalf("size %d: echo differs (got %d bytes)", sizes[i], len(got))
		}
	}
	// All at once, pipelined, in one write.
	var all []byte
	for _, p := range payloads {
		all = kframe.AppendFrame(all, p)
	}
	go func() {
		c.SetWriteDeadline(time.Now().Add(ioTimeout))
		c.Write(all)
	}()
	for i, p := range payloads {
		if got := readFrame(t, c); !bytes.Equal(got, p) {
			t.Fatalf("pipelined size %d: echo differs (got %d bytes)", sizes[i], len(got))
		}
	}
}

// heldReply is a reply a test handler kept to complete later.
type heldReply struct {
	r     *Reply
	frame []byte
}

func TestPipelinedOutOfOrder(t *testing.T) {
	const n, batch = 96, 8
	held := make(chan heldReply, n)
	_, addr := startServer(t, Config{MaxInFlight: batch}, handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
		held <- heldReply{r, frame}
	}))
	c := dial(t, addr)

	// The completer answers each batch of requests in a shuffled order, from
	// its own goroutine (owned by this test, waited for below).
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 4))
		for done := 0; done < n; done += batch {
			hs := make([]heldReply, 0, batch)
			for range batch {
				select {
				case h := <-held:
					hs = append(hs, h)
				case <-time.After(ioTimeout):
					t.Error("handler not called")
					return
				}
			}
			rng.Shuffle(len(hs), func(i, j int) { hs[i], hs[j] = hs[j], hs[i] })
			for i, h := range hs {
				resp := append([]byte("re:"), h.frame...)
				switch i % 3 {
				case 0:
					h.r.Send(resp)
				case 1:
					h.r.SendParts([]Part{{Buf: resp[:3]}, {Buf: resp[3:]}}, nil)
				default:
					h.r.SendParts([]Part{{Buf: resp}}, func() {})
				}
			}
		}
	}()
	var reqs []byte
	for i := range n {
		reqs = kframe.AppendFrame(reqs, request(uint32(i), i%50))
	}
	go func() {
		c.SetWriteDeadline(time.Now().Add(ioTimeout))
		c.Write(reqs)
	}()
	for i := range n {
		got := readFrame(t, c)
		want := append([]byte("re:"), request(uint32(i), i%50)...)
		if !bytes.Equal(got, want) {
			t.Fatalf("response %d out of order or corrupt: got %x want %x", i, got, want)
		}
	}
	wg.Wait()
}

func TestSkipAndReplyClose(t *testing.T) {
	var served atomic.Int32
	held := make(chan *Reply, 1)
	_, addr := startServer(t, Config{}, handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
		served.Add(1)
		switch string(frame) {
		case "skip":
			r.Skip()
		case "hold":
			held <- r
		case "close":
			r.Close()
		default:
			r.Send(frame)
		}
	}))
	c := dial(t, addr)
	var reqs []byte
	for _, p := range []string{"skip", "a", "hold", "close", "never"} {
		reqs = kframe.AppendFrame(reqs, []byte(p))
	}
	c.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.Write(reqs); err != nil {
		t.Fatal(err)
	}
	if got := readFrame(t, c); string(got) != "a" {
		t.Fatalf("first response %q, want %q (skip writes nothing)", got, "a")
	}
	var r *Reply
	select {
	case r = <-held:
	case <-time.After(ioTimeout):
		t.Fatal("hold not served")
	}
	// Close completed before the held reply; the held response must still
	// be written before the connection closes.
	r.Send([]byte("held"))
	if got := readFrame(t, c); string(got) != "held" {
		t.Fatalf("got %q, want %q", got, "held")
	}
	if rest := expectClosed(t, c); len(rest) != 0 {
		t.Fatalf("bytes after the Close slot: %q", rest)
	}
	if got := served.Load(); got != 4 {
		t.Fatalf("served %d requests, want 4 (nothing after close)", got)
	}
}

func TestConnCloseAndDone(t *testing.T) {
	conns := make(chan *Conn, 2)
	_, addr := startServer(t, Config{}, handlerFunc(func(c *Conn, frame []byte, r *Reply) {
		conns <- c
		if string(frame) == "bad" {
			c.Close()
		}
		r.Skip()
	}))
	// The handler closes a connection on malformed input.
	c1 := dial(t, addr)
	writeFrame(t, c1, []byte("bad"))
	sc := <-conns
	expectClosed(t, c1)
	select {
	case <-sc.Done():
	case <-time.After(ioTimeout):
		t.Fatal("Done not closed after Conn.Close")
	}
	// The client goes away: Done closes too.
	c2 := dial(t, addr)
	writeFrame(t, c2, []byte("ok"))
	sc2 := <-conns
	if sc2.ID() == sc.ID() {
		t.Fatalf("two connections share id %d", sc.ID())
	}
	if sc2.RemoteAddr().String() != c2.LocalAddr().String() {
		t.Fatalf("RemoteAddr %v, want %v", sc2.RemoteAddr(), c2.LocalAddr())
	}
	c2.Close()
	select {
	case <-sc2.Done():
	case <-time.After(ioTimeout):
		t.Fatal("Done not closed after the client closed")
	}
}

func TestRefusedFrameSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int32
		size uint32
	}{
		{"oversize by one", 1024, 1025},
		{"oversize default max", 0, DefaultMaxFrameBytes + 1},
		{"max int32", 0, 0x7fffffff},
		{"negative one", 1024, 0xffffffff},
		{"min int32", 1024, 0x80000000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var served atomic.Int32
			logger, logs := newLogger(t)
			s, addr := startServer(t, Config{MaxFrameBytes: tc.max, Logger: logger},
				handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
					served.Add(1)
					r.Send(frame)
				}))
			c := dial(t, addr)
			// A good frame first, so the connection is known to work.
			writeFrame(t, c, []byte("ok"))
			if got := readFrame(t, c); string(got) != "ok" {
				t.Fatalf("got %q", got)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			var hdr [4]byte
			binary.BigEndian.PutUint32(hdr[:], tc.size)
			c.SetWriteDeadline(time.Now().Add(ioTimeout))
			if _, err := c.Write(append(hdr[:], "some body bytes"...)); err != nil {
				t.Fatal(err)
			}
			if rest := expectClosed(t, c); len(rest) != 0 {
				t.Fatalf("response bytes to a refused frame: %q", rest)
			}
			runtime.ReadMemStats(&after)
			if got := served.Load(); got != 1 {
				t.Fatalf("Serve called %d times, want 1 (the good frame only)", got)
			}
			// Refusal happens before allocating: allocating the claimed
			// size would add at least 100 MiB here (or 1 KiB for the small
			// max, covered by the Serve count).
			if grew := after.TotalAlloc - before.TotalAlloc; tc.max == 0 && grew > 32<<20 {
				t.Fatalf("allocated %d bytes while refusing a %d-byte frame", grew, tc.size)
			}
			eventually(t, "connection removed", func() bool { return s.NumConns() == 0 })
			log := logs.String()
			if !strings.Contains(log, "refusing frame") || !strings.Contains(log, c.LocalAddr().String()) {
				t.Fatalf("log lacks the refusal with the remote address %s:\n%s", c.LocalAddr(), log)
			}
		})
	}
}

func TestTruncatedFrameClosesQuietly(t *testing.T) {
	var served atomic.Int32
	s, addr := startServer(t, Config{}, handlerFunc(func(_ *Conn, _ []byte, r *Reply) {
		served.Add(1)
		r.Skip()
	}))
	c := dial(t, addr)
	c.Write([]byte{0, 0, 0, 10, 1, 2, 3})
	c.CloseWrite()
	expectClosed(t, c)
	eventually(t, "connection removed", func() bool { return s.NumConns() == 0 })
	if served.Load() != 0 {
		t.Fatal("a truncated frame was served")
	}
}

func TestManyConnections(t *testing.T) {
	const conns, perConn = 48, 150
	var async sync.WaitGroup
	_, addr := startServer(t, Config{MaxInFlight: 16}, handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
		// Half the replies complete on another goroutine, so completions
		// race the reader and the writer.
		if binary.BigEndian.Uint32(frame)%2 == 0 {
			r.Send(frame)
			return
		}
		async.Add(1)
		go func() {
			defer async.Done()
			r.SendParts([]Part{{Buf: frame[:2]}, {Buf: frame[2:]}}, nil)
		}()
	}))
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for ci := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, ioTimeout)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(ioTimeout))
			var reqs []byte
			for i := range perConn {
				reqs = kframe.AppendFrame(reqs, request(uint32(i), (ci*7+i)%300))
			}
			werr := make(chan error, 1)
			go func() { _, err := c.Write(reqs); werr <- err }()
			var buf []byte
			for i := range perConn {
				buf, err = kframe.ReadFrame(c, 1<<20, buf)
				if err != nil {
					errs <- fmt.Errorf("conn %d response %d: %w", ci, i, err)
					return
				}
				if !bytes.Equal(buf, request(uint32(i), (ci*7+i)%300)) {
					errs <- fmt.Errorf("conn %d response %d differs", ci, i)
					return
				}
			}
			if err := <-werr; err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	async.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestBackPressure(t *testing.T) {
	const maxInFlight, n = 3, 12
	var served, completed atomic.Int32
	var overLimit atomic.Bool
	held := make(chan heldReply, n)
	conns := make(chan *Conn, n)
	_, addr := startServer(t, Config{MaxInFlight: maxInFlight}, handlerFunc(func(c *Conn, frame []byte, r *Reply) {
		if served.Add(1)-completed.Load() > maxInFlight {
			overLimit.Store(true)
		}
		conns <- c
		held <- heldReply{r, frame}
	}))
	c := dial(t, addr)
	var reqs []byte
	for i := range n {
		reqs = kframe.AppendFrame(reqs, request(uint32(i), 10))
	}
	c.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.Write(reqs); err != nil {
		t.Fatal(err)
	}
	sc := <-conns
	readerBlocked := func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return sc.readerWaiting
	}
	// Every request is buffered server-side, yet the reader stops at
	// maxInFlight and resumes one frame per completed reply.
	for i := range n {
		want := int32(min(i+maxInFlight, n))
		eventually(t, fmt.Sprintf("%d requests served", want), func() bool { return served.Load() == want })
		if want < n {
			eventually(t, "reader blocked on a full window", readerBlocked)
			if got := served.Load(); got != want {
				t.Fatalf("served %d with %d completed, want %d", got, i, want)
			}
		}
		h := <-held
		completed.Add(1)
		h.r.Send(h.frame)
		if got := readFrame(t, c); !bytes.Equal(got, request(uint32(i), 10)) {
			t.Fatalf("response %d differs", i)
		}
	}
	if overLimit.Load() {
		t.Fatalf("more than %d requests in flight", maxInFlight)
	}
}

func TestCloseWithPendingReplies(t *testing.T) {
	base := runtime.NumGoroutine()
	const conns, perConn = 6, 4
	held := make(chan heldReply, conns*perConn)
	served := make(chan *Conn, conns*perConn)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logger, _ := newLogger(t)
	s := NewServer(Config{Logger: logger}, handlerFunc(func(c *Conn, frame []byte, r *Reply) {
		// Never completes on its own.
		held <- heldReply{r, frame}
		served <- c
	}))
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.Serve(ln) }()

	clients := make([]net.Conn, conns)
	for i := range clients {
		clients[i] = dial(t, ln.Addr().String())
		for j := range perConn {
			writeFrame(t, clients[i], request(uint32(j), 100))
		}
	}
	serverConns := map[*Conn]bool{}
	for range conns * perConn {
		select {
		case c := <-served:
			serverConns[c] = true
		case <-time.After(ioTimeout):
			t.Fatal("requests not served")
		}
	}
	// One reply completes out of order (not the head): it is ready but
	// cannot be written before Close.
	first := <-held
	second := <-held
	var dropped atomic.Int32
	second.r.SendParts([]Part{{Buf: []byte("late")}}, func() { dropped.Add(1) })

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(ioTimeout):
		t.Fatal("Close hung with replies pending")
	}
	if err := <-serveErr; err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
	if got := dropped.Load(); got != 1 {
		t.Fatalf("done of the ready-but-unwritten reply ran %d times, want 1", got)
	}
	for c := range serverConns {
		select {
		case <-c.Done():
		default:
			t.Fatalf("conn %d not done after Close", c.ID())
		}
	}
	for _, c := range clients {
		expectClosed(t, c)
	}
	// Replies completed after Close are dropped; done still runs, on the
	// completing goroutine.
	first.r.SendParts([]Part{{Buf: []byte("x")}}, func() { dropped.Add(1) })
	if got := dropped.Load(); got != 2 {
		t.Fatalf("done after Close ran %d times in total, want 2", got)
	}
	for range conns*perConn - 2 {
		h := <-held
		h.r.Send(h.frame)
	}
	// A reply completed twice still panics after close.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("second completion after close did not panic")
			}
		}()
		first.r.Skip()
	}()
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Serve(ln); err != nil {
		t.Fatalf("Serve on a closed Server: %v", err)
	}
	for _, c := range clients {
		c.Close()
	}
	settleGoroutines(t, base)
}

func TestDoubleCompletionPanics(t *testing.T) {
	panicked := make(chan bool, 1)
	_, addr := startServer(t, Config{}, handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
		r.Send(frame)
		defer func() { panicked <- recover() != nil }()
		r.Skip()
	}))
	c := dial(t, addr)
	writeFrame(t, c, []byte("x"))
	if got := readFrame(t, c); string(got) != "x" {
		t.Fatalf("got %q", got)
	}
	if !<-panicked {
		t.Fatal("second completion did not panic")
	}
}

func TestIdleTimeout(t *testing.T) {
	logger, logs := newLogger(t)
	s, addr := startServer(t, Config{IdleTimeout: 50 * time.Millisecond, Logger: logger}, echo)
	c := dial(t, addr)
	// Nothing is sent: the server closes the connection on its own.
	expectClosed(t, c)
	eventually(t, "connection removed", func() bool { return s.NumConns() == 0 })
	if !strings.Contains(logs.String(), "idle") {
		t.Fatalf("no idle log line:\n%s", logs.String())
	}
}

func TestInvalidPartsCloseConnection(t *testing.T) {
	var done atomic.Int32
	_, addr := startServer(t, Config{}, handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
		if string(frame) == "bad" {
			r.SendParts([]Part{{File: nil, Buf: []byte("a")}, {File: devNull(t), Off: -1, Len: 1}}, func() { done.Add(1) })
			return
		}
		r.Send(frame)
	}))
	c := dial(t, addr)
	c.Write(append(kframe.AppendFrame(nil, []byte("good")), kframe.AppendFrame(nil, []byte("bad"))...))
	if got := readFrame(t, c); string(got) != "good" {
		t.Fatalf("got %q", got)
	}
	if rest := expectClosed(t, c); len(rest) != 0 {
		t.Fatalf("bytes written for an invalid response: %q", rest)
	}
	eventually(t, "done called", func() bool { return done.Load() == 1 })
}

func TestFramePoolClasses(t *testing.T) {
	for _, tc := range []struct {
		n, limit int
		wantCap  int // 0: not pooled
	}{
		{0, 1 << 20, 512},
		{1, 100, 512},
		{512, 1 << 20, 512},
		{513, 1 << 20, 1024},
		{600, 700, 0}, // the 1 KiB class is larger than the limit
		{1<<24 - 1, 1 << 30, 1 << 24},
		{1 << 24, 1 << 30, 1 << 24},
		{1<<24 + 1, 1 << 30, 0},
	} {
		fb := pooledFrame(tc.n, tc.limit)
		got := 0
		if fb != nil {
			got = cap(fb.b)
			if len(fb.b) < tc.n {
				t.Errorf("pooledFrame(%d): len %d", tc.n, len(fb.b))
			}
		}
		if got != tc.wantCap {
			t.Errorf("pooledFrame(%d, %d): cap %d, want %d", tc.n, tc.limit, got, tc.wantCap)
		}
		putFrame(fb)
	}
}

// TestLargeFrame crosses the largest pooled class and readPayload's growth.
func TestLargeFrame(t *testing.T) {
	_, addr := startServer(t, Config{}, echo)
	c := dial(t, addr)
	p := request(1, 1<<24+12345)
	go func() {
		c.SetWriteDeadline(time.Now().Add(ioTimeout))
		c.Write(kframe.AppendFrame(nil, p))
	}()
	if got := readFrame(t, c); !bytes.Equal(got, p) {
		t.Fatalf("echo of %d bytes differs (got %d)", len(p), len(got))
	}
}

// TestQueuedBytesBound: with QueuedMaxRequestBytes of four frames and a
// handler that holds every reply, the server reads exactly four frames and
// stops reading the socket, so the client's writes block; completing the
// replies lets the reader resume and every frame is answered in order.
func TestQueuedBytesBound(t *testing.T) {
	const frameBytes, bound, n = 16 << 10, 4 * (16 << 10), 2048 // 32 MiB in all
	var served atomic.Int32
	var maxQueued atomic.Int64
	held := make(chan heldReply, n)
	conns := make(chan *Conn, n)
	_, addr := startServer(t, Config{MaxInFlight: n, QueuedMaxRequestBytes: bound},
		handlerFunc(func(c *Conn, frame []byte, r *Reply) {
			served.Add(1)
			c.mu.Lock()
			q := c.queuedBytes
			c.mu.Unlock()
			if q > maxQueued.Load() {
				maxQueued.Store(q)
			}
			conns <- c
			held <- heldReply{r, frame}
		}))
	c := dial(t, addr)
	var reqs []byte
	for i := range n {
		reqs = kframe.AppendFrame(reqs, request(uint32(i), frameBytes-4))
	}

	// Phase 1: the client writes everything; the server reads four frames
	// and stops, so the write cannot finish (it ends on its deadline, a
	// hang guard, with part of the bytes still unsent).
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	written, err := c.Write(reqs)
	if err == nil || !isTimeout(err) {
		t.Fatalf("write of %d bytes returned %d, %v; want a blocked write (timeout)", len(reqs), written, err)
	}
	if written >= len(reqs) {
		t.Fatalf("wrote all %d bytes while the server held %d replies", written, served.Load())
	}
	sc := <-conns
	eventually(t, "reader blocked on queued bytes", func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return sc.readerWaiting
	})
	if got := served.Load(); got != bound/frameBytes {
		t.Fatalf("served %d frames with %d bytes bound, want %d", got, bound, bound/frameBytes)
	}

	// Phase 2: answer as frames arrive; the reader resumes and the rest of
	// the bytes go through.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			h := <-held
			h.r.Send(h.frame[:4])
		}
	}()
	werr := make(chan error, 1)
	go func() {
		c.SetWriteDeadline(time.Now().Add(ioTimeout))
		_, err := c.Write(reqs[written:])
		werr <- err
	}()
	for i := range n {
		got := readFrame(t, c)
		if binary.BigEndian.Uint32(got) != uint32(i) {
			t.Fatalf("response %d carries %d", i, binary.BigEndian.Uint32(got))
		}
	}
	if err := <-werr; err != nil {
		t.Fatalf("write after the server resumed: %v", err)
	}
	<-done
	if got := maxQueued.Load(); got > bound {
		t.Fatalf("queued %d bytes, bound %d", got, bound)
	}
	// The writer releases a reply's bytes after its write returns, which
	// may be just after the client read it.
	eventually(t, "queued bytes back to 0 after every reply was written", func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return sc.queuedBytes == 0
	})
}

// TestQueuedBytesLargeFrame: a frame larger than the bound is still served
// when nothing else is queued.
func TestQueuedBytesLargeFrame(t *testing.T) {
	_, addr := startServer(t, Config{QueuedMaxRequestBytes: 1024}, echo)
	c := dial(t, addr)
	for i := range 3 {
		req := request(uint32(i), 64<<10)
		writeFrame(t, c, req)
		if got := readFrame(t, c); !bytes.Equal(got, req) {
			t.Fatalf("echo %d differs", i)
		}
	}
}

// closeRecorder is a Handler that also implements ConnCloseHandler.
type closeRecorder struct {
	held   chan *Reply
	closed chan *Conn
}

func (h *closeRecorder) Serve(_ *Conn, _ []byte, r *Reply) { h.held <- r }
func (h *closeRecorder) ConnClosed(c *Conn)                { h.closed <- c }

// TestConnClosedCallback: a handler implementing ConnCloseHandler hears of
// each connection's close once, whoever closed it, and a reply completed
// afterwards is dropped.
func TestConnClosedCallback(t *testing.T) {
	h := &closeRecorder{held: make(chan *Reply, 4), closed: make(chan *Conn, 4)}
	s, addr := startServer(t, Config{}, h)
	c := dial(t, addr)
	writeFrame(t, c, request(1, 8))
	var r *Reply
	select {
	case r = <-h.held:
	case <-time.After(ioTimeout):
		t.Fatal("request not served")
	}
	c.Close() // the client goes away while the reply is pending
	var sc *Conn
	select {
	case sc = <-h.closed:
	case <-time.After(ioTimeout):
		t.Fatal("ConnClosed not called after the client closed")
	}
	select {
	case <-sc.Done():
	default:
		t.Fatal("ConnClosed called before Done was closed")
	}
	r.Send([]byte("late")) // dropped, must not panic or block
	sc.Close()             // idempotent: no second callback
	s.Close()
	select {
	case c2 := <-h.closed:
		t.Fatalf("second ConnClosed for %d", c2.ID())
	default:
	}
}

// Refused frames in a loop log at most refusedLogBurst lines per window,
// and the first line of the next window counts those held back.
func TestRefusedFrameLogsAreLimited(t *testing.T) {
	logger, logs := newLogger(t)
	var mu sync.Mutex
	now := time.Unix(7000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	_, addr := startServer(t, Config{MaxFrameBytes: 1024, Logger: logger, Now: clock},
		handlerFunc(func(_ *Conn, _ []byte, r *Reply) { r.Skip() }))
	refuse := func() {
		c := dial(t, addr)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 1<<20)
		c.SetWriteDeadline(time.Now().Add(ioTimeout))
		if _, err := c.Write(hdr[:]); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c)
	}
	for range refusedLogBurst + 5 {
		refuse()
	}
	count := func() int { return strings.Count(logs.String(), "refusing frame") }
	eventually(t, "the burst logged", func() bool { return count() == refusedLogBurst })
	mu.Lock()
	now = now.Add(refusedLogWindow)
	mu.Unlock()
	refuse()
	eventually(t, "the next window's line", func() bool { return count() == refusedLogBurst+1 })
	if !strings.Contains(logs.String(), "similar_lines_suppressed=5") {
		t.Fatalf("the next window's line does not count the 5 held back:\n%s", logs.String())
	}
}
