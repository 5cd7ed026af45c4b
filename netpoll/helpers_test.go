package netpoll

import (
	"github.com/stratalog/strata/internal/stratatest"

	"encoding/binary"
	"errors"
	"github.com/stratalog/strata/internal/kframe"
	"io"
	"log/slog"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// ioTimeout bounds every blocking step of a test so a bug fails the test
// instead of hanging it. It is a hang detector, never a performance claim.
const ioTimeout = 10 * time.Second

// handlerFunc adapts a function to Handler.
type handlerFunc func(c *Conn, frame []byte, r *Reply)

func (f handlerFunc) Serve(c *Conn, frame []byte, r *Reply) { f(c, frame, r) }

// echo answers every frame with itself.
var echo = handlerFunc(func(_ *Conn, frame []byte, r *Reply) { r.Send(frame) })

// logBuffer is a goroutine-safe log sink.
type logBuffer = stratatest.LogBuffer

func newLogger(tb testing.TB) (*slog.Logger, *logBuffer) {
	lb := &logBuffer{}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// startServer runs a Server for h on a fresh 127.0.0.1 listener. Cleanup
// closes it and checks Serve returned nil.
func startServer(tb testing.TB, cfg Config, h Handler) (*Server, string) {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger, _ = newLogger(tb)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := NewServer(cfg, h)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
		select {
		case err := <-served:
			if err != nil {
				tb.Errorf("Serve returned %v after Close, want nil", err)
			}
		case <-time.After(ioTimeout):
			tb.Errorf("Serve did not return after Close")
		}
	})
	return s, ln.Addr().String()
}

func dial(tb testing.TB, addr string) *net.TCPConn {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func writeFrame(tb testing.TB, c net.Conn, payload []byte) {
	tb.Helper()
	c.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.Write(kframe.AppendFrame(nil, payload)); err != nil {
		tb.Fatalf("write frame: %v", err)
	}
}

func readFrame(tb testing.TB, c net.Conn) []byte {
	tb.Helper()
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	b, err := kframe.ReadFrame(c, 1<<30, nil)
	if err != nil {
		tb.Fatalf("read frame: %v", err)
	}
	return b
}

// expectClosed reads from c until the server's close shows: EOF or a reset.
// Bytes read before that are returned.
func expectClosed(tb testing.TB, c net.Conn) []byte {
	tb.Helper()
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err == nil {
			continue
		}
		if err == io.EOF || errors.Is(err, syscall.ECONNRESET) {
			return got
		}
		tb.Fatalf("waiting for the server to close the connection: %v", err)
	}
}

// eventually polls cond until it holds, failing after a bounded number of
// tries. For state that changes asynchronously, never for timing claims.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	const tries = 1000
	for range tries {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("timed out waiting for %s", what)
}

// settleGoroutines waits until the goroutine count drops to at most base.
func settleGoroutines(tb testing.TB, base int) {
	tb.Helper()
	n := 0
	for range 1000 {
		if n = runtime.NumGoroutine(); n <= base {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	tb.Fatalf("goroutines did not settle: %d, want <= %d\n%s", n, base, buf)
}

// request builds a payload carrying a sequence number and filler.
func request(seq uint32, fill int) []byte {
	b := make([]byte, 4+fill)
	binary.BigEndian.PutUint32(b, seq)
	for i := 4; i < len(b); i++ {
		b[i] = byte(seq) ^ byte(i)
	}
	return b
}
