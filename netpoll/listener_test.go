package netpoll

import (
	"bytes"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/kframe"
	"github.com/stratalog/strata/internal/tlstest"
)

// startTLSServer serves h on a 127.0.0.1 listener named SSL with cfg.
func startTLSServer(tb testing.TB, cfg Config, h Handler, l Listener) (*Server, string) {
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
	go func() { served <- s.ServeListener(ln, l) }()
	tb.Cleanup(func() {
		s.Close()
		if err := <-served; err != nil {
			tb.Errorf("ServeListener returned %v after Close", err)
		}
	})
	return s, ln.Addr().String()
}

func dialTLS(tb testing.TB, addr string, cfg *tls.Config) (*tls.Conn, error) {
	tb.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: ioTimeout}, "tcp", addr, cfg)
	if err == nil {
		tb.Cleanup(func() { c.Close() })
	}
	return c, err
}

// Frames, and file parts (copied, since sendfile cannot encrypt), travel
// through TLS; each connection knows its listener and principal.
func TestTLSListenerServesFramesAndFiles(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")
	alice := ca.Client(t, dir, pkix.Name{CommonName: "alice", Organization: []string{"Strata"}})
	const fileBytes = 1<<20 + 77
	f, data := tempFile(t, fileBytes, 3)
	type seen struct{ listener, principal string }
	conns := make(chan seen, 4)
	h := handlerFunc(func(c *Conn, frame []byte, r *Reply) {
		conns <- seen{c.Listener(), c.Principal()}
		if string(frame) == "file" {
			r.SendParts([]Part{{Buf: []byte("<")}, {File: f, Off: 0, Len: fileBytes}, {Buf: []byte(">")}}, nil)
			return
		}
		r.Send(frame)
	})
	s, addr := startTLSServer(t, Config{}, h, Listener{Name: "SSL", TLS: &tls.Config{
		Certificates: []tls.Certificate{srv.TLS}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool}})

	c, err := dialTLS(t, addr, tlstest.ClientConfig(ca, nil))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // several small responses coalesce into records
		writeFrame(t, c, []byte{byte(i), 'x'})
	}
	for i := range 3 {
		if got := readFrame(t, c); !bytes.Equal(got, []byte{byte(i), 'x'}) {
			t.Fatalf("echo %d: %q", i, got)
		}
	}
	writeFrame(t, c, []byte("file"))
	got := readFrame(t, c)
	if len(got) != fileBytes+2 || got[0] != '<' || got[len(got)-1] != '>' || !bytes.Equal(got[1:len(got)-1], data) {
		t.Fatalf("file response: %d bytes", len(got))
	}
	if s.sendfileBytes.Load() != 0 || s.copiedBytes.Load() != fileBytes {
		t.Fatalf("sendfile %d, copied %d bytes: a TLS connection must copy", s.sendfileBytes.Load(), s.copiedBytes.Load())
	}
	if w := <-conns; w != (seen{"SSL", Anonymous}) {
		t.Fatalf("without a client certificate: %+v", w)
	}

	m, err := dialTLS(t, addr, tlstest.ClientConfig(ca, alice))
	if err != nil {
		t.Fatal(err)
	}
	writeFrame(t, m, []byte("hi"))
	readFrame(t, m)
	for w := range conns {
		if w.principal != Anonymous {
			if w != (seen{"SSL", "User:CN=alice,O=Strata"}) {
				t.Fatalf("with a client certificate: %+v", w)
			}
			break
		}
	}
}

// ssl.client.auth=required: a client without a certificate is refused
// with one log line; one with a certificate the CA signed is served.
func TestTLSClientAuthRequired(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	other := tlstest.NewCA(t, dir, "other")
	srv := ca.Server(t, dir, "broker")
	logger, logs := newLogger(t)
	s, addr := startTLSServer(t, Config{Logger: logger}, echo, Listener{Name: "SSL", TLS: &tls.Config{
		Certificates: []tls.Certificate{srv.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool}})

	refused := func(cfg *tls.Config) {
		t.Helper()
		c, err := dialTLS(t, addr, cfg)
		if err == nil { // TLS 1.3: the client learns of the refusal on its first read
			writeFrame(t, c, []byte("x"))
			c.SetReadDeadline(time.Now().Add(ioTimeout))
			_, err = kframe.ReadFrame(c, 1<<20, nil)
		}
		if err == nil {
			t.Fatal("served without an acceptable client certificate")
		}
	}
	refused(tlstest.ClientConfig(ca, nil))
	eventually(t, "the refusal line", func() bool {
		return strings.Contains(logs.String(), "TLS handshake failed") && strings.Contains(logs.String(), "listener=SSL")
	})
	refused(tlstest.ClientConfig(ca, other.Client(t, dir, pkix.Name{CommonName: "mallory"})))
	eventually(t, "two refusal lines", func() bool { return strings.Count(logs.String(), "TLS handshake failed") == 2 })

	c, err := dialTLS(t, addr, tlstest.ClientConfig(ca, ca.Client(t, dir, pkix.Name{CommonName: "bob"})))
	if err != nil {
		t.Fatal(err)
	}
	writeFrame(t, c, []byte("hello"))
	if got := readFrame(t, c); string(got) != "hello" {
		t.Fatalf("echo %q", got)
	}
	eventually(t, "refused connections removed", func() bool { return s.NumConns() == 1 })
}

// A PLAINTEXT Kafka client on the SSL listener: closed, nothing served,
// one line that says what happened.
func TestPlaintextClientOnTLSListener(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")
	logger, logs := newLogger(t)
	s, addr := startTLSServer(t, Config{Logger: logger}, handlerFunc(func(_ *Conn, _ []byte, r *Reply) {
		t.Error("a plaintext frame was served on the TLS listener")
		r.Skip()
	}), Listener{Name: "EXTERNAL", TLS: &tls.Config{Certificates: []tls.Certificate{srv.TLS}}})
	c := dial(t, addr)
	writeFrame(t, c, request(1, 30)) // an ApiVersions-sized frame
	expectClosed(t, c)
	eventually(t, "the line", func() bool {
		return strings.Count(logs.String(), "not a TLS handshake (a PLAINTEXT client?) on a Kafka SSL listener") == 1
	})
	if !strings.Contains(logs.String(), "listener=EXTERNAL") {
		t.Fatalf("the line does not name the listener:\n%s", logs.String())
	}
	eventually(t, "connection removed", func() bool { return s.NumConns() == 0 })
}

// A peer that connects and never completes the handshake is closed after
// HandshakeTimeout (the clock is the Config's: here it says the deadline
// has already passed).
func TestTLSHandshakeTimeout(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")
	past := func() time.Time { return time.Unix(0, 0) }
	s, addr := startTLSServer(t, Config{Now: past}, echo, Listener{Name: "SSL", TLS: &tls.Config{Certificates: []tls.Certificate{srv.TLS}}})
	c := dial(t, addr)
	expectClosed(t, c)
	eventually(t, "connection removed", func() bool { return s.NumConns() == 0 })
}

// Authenticated replaces the principal and lifts the frame cap that
// Listener.UnauthenticatedMaxFrameBytes sets before it: a frame over the
// cap closes an unauthenticated connection, and passes after.
func TestAuthenticatedLiftsFrameCap(t *testing.T) {
	type seen struct {
		principal, ctx string
		size           int
	}
	frames := make(chan seen, 4)
	_, addr := startTLSServer(t, Config{}, handlerFunc(func(c *Conn, frame []byte, r *Reply) {
		ctx, _ := c.ListenerContext().(string)
		frames <- seen{c.Principal(), ctx, len(frame)}
		if string(frame[:4]) == "auth" {
			c.Authenticated("User:alice")
		}
		r.Send([]byte("ok"))
	}), Listener{Name: "SASL", Context: "sasl-config", UnauthenticatedMaxFrameBytes: 64})

	frame := func(payload []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
	}
	read := func(c net.Conn) error {
		var b [6]byte
		_, err := io.ReadFull(c, b[:])
		return err
	}
	big := make([]byte, 100)
	copy(big, "data")

	// Unauthenticated: a 100-byte frame is refused unread.
	c1, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c1.SetDeadline(time.Now().Add(30 * time.Second))
	c1.Write(frame(big))
	if err := read(c1); err == nil {
		t.Fatal("a frame over the cap was answered before authentication")
	}

	// Authenticated: the same frame is served, with the new principal.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(30 * time.Second))
	c2.Write(frame([]byte("auth")))
	if err := read(c2); err != nil {
		t.Fatal(err)
	}
	if got := <-frames; got.principal != Anonymous || got.ctx != "sasl-config" {
		t.Fatalf("before: %+v", got)
	}
	c2.Write(frame(big))
	if err := read(c2); err != nil {
		t.Fatalf("a frame over the cap after authentication: %v", err)
	}
	if got := <-frames; got.principal != "User:alice" || got.size != 100 {
		t.Fatalf("after: %+v", got)
	}
}
