package server

// Test harness shared by every handler's tests: an in-process broker on a
// real loopback socket over an engine in t.TempDir, franz-go clients bound to
// it, and raw-socket helpers for hand-made frames.

import (
	"github.com/stratalog/strata/internal/stratatest"

	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testTimeout bounds every network wait in these tests. It is a hang guard,
// not a performance threshold: nothing asserts on how long anything took.
const testTimeout = 60 * time.Second

// logBuffer collects a broker's log lines; startBroker prints them when the
// test fails.
type logBuffer = stratatest.LogBuffer

// brokerLogs maps a Server started by startBroker to its log buffer.
var brokerLogs sync.Map // *Server -> *logBuffer

// logsOf returns what the broker s has logged so far.
func logsOf(s *Server) string {
	if lb, ok := brokerLogs.Load(s); ok {
		return lb.(*logBuffer).String()
	}
	return ""
}

// startBroker opens an engine in t.TempDir() and serves it on 127.0.0.1:0.
// opts may change the server Config and engine Options before anything
// starts (the defaults: node 0, auto-create on, 1 partition, Kafka's log
// defaults). Everything is closed by t.Cleanup, in reverse order: the
// server (waiting for Serve to return), then the engine.
func startBroker(t *testing.T, opts ...func(*Config, *engine.Options)) (addr string, s *Server, eng *engine.Engine) {
	t.Helper()
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := Config{
		NodeID:           0,
		ClusterID:        "strata-test-cluster",
		NumPartitions:    1,
		AutoCreateTopics: true,
		Logger:           logger,
	}
	eopts := engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig(), Logger: logger}
	for _, o := range opts {
		o(&cfg, &eopts)
	}
	cfg.LogDefaults = eopts.Log
	eng, err := engine.Open(eopts)
	if err != nil {
		t.Fatalf("engine.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Errorf("engine.Close: %v", err)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s = New(cfg, eng)
	brokerLogs.Store(s, logs)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("Server.Close: %v", err)
		}
		select {
		case err := <-served:
			if err != nil && !errors.Is(err, net.ErrClosed) {
				t.Errorf("Server.Serve: %v", err)
			}
		case <-time.After(testTimeout):
			t.Errorf("Server.Serve did not return after Close")
		}
		brokerLogs.Delete(s)
		if t.Failed() {
			t.Logf("broker logs:\n%s", logs)
		}
	})
	return ln.Addr().String(), s, eng
}

// newClient returns a franz-go client seeded with addr, closed on cleanup.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns a kadm client over a new franz-go client.
func newAdmin(t *testing.T, addr string, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, addr, opts...))
}

// testCtx is a context canceled at cleanup or after testTimeout.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// issue sends req through cl (at the highest version both sides support) and
// returns the response, failing the test on a transport error.
func issue[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.Request(testCtx(t), req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	r, ok := resp.(R)
	if !ok {
		t.Fatalf("%s: response type %T", kmsg.NameForKey(req.Key()), resp)
	}
	return r
}

// rawConn is a plain TCP connection for hand-made frames.
type rawConn struct {
	t *testing.T
	net.Conn
}

// dialRaw connects to addr; the connection is closed on cleanup.
func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(testTimeout))
	return &rawConn{t: t, Conn: c}
}

// writeFrame writes payload with its 4-byte size prefix.
func (c *rawConn) writeFrame(payload []byte) {
	c.t.Helper()
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	if _, err := c.Write(append(frame, payload...)); err != nil {
		c.t.Fatalf("write frame: %v", err)
	}
}

// readFrame reads one size-prefixed response and returns it without the prefix.
func (c *rawConn) readFrame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("response of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(c, b)
	return b, err
}

// expectClosed asserts the broker closes the connection without answering.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	b, err := c.readFrame()
	if err == nil {
		c.t.Fatalf("expected the broker to close the connection, got a %d-byte response", len(b))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open after %v", testTimeout)
	}
}

// encodeRequest frames req (version already set) as a client would: header
// v1 (or v2 with an empty tag section for flexible versions), then the body.
func encodeRequest(req kmsg.Request, corrID int32, clientID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corrID))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

// roundTrip sends req on c and decodes the response into resp (whose
// version it sets to req's), checking the correlation id and the response
// header's tag section.
func (c *rawConn) roundTrip(req kmsg.Request, corrID int32, resp kmsg.Response) {
	c.t.Helper()
	c.writeFrame(encodeRequest(req, corrID, "raw-test"))
	b, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("%s v%d: reading response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	resp.SetVersion(req.GetVersion())
	decodeResponse(c.t, b, corrID, resp)
}

// decodeResponse checks the response header of b and decodes the body into
// resp at resp's version.
func decodeResponse(t *testing.T, b []byte, corrID int32, resp kmsg.Response) {
	t.Helper()
	if len(b) < 4 {
		t.Fatalf("response of %d bytes", len(b))
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corrID {
		t.Fatalf("correlation id %d, want %d", got, corrID)
	}
	b = b[4:]
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		if len(b) == 0 || b[0] != 0 {
			t.Fatalf("flexible response header without an empty tag section")
		}
		b = b[1:]
	}
	if err := resp.ReadFrom(b); err != nil {
		t.Fatalf("decoding %s v%d response: %v", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
}

// waitLog waits (bounded) until the broker's logs contain substr.
func waitLog(t *testing.T, s *Server, substr string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !strings.Contains(logsOf(s), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("broker never logged %q; logs:\n%s", substr, logsOf(s))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
