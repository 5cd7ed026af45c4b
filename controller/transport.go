package controller

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// One TCP port per node carries both Raft and the controller's own RPC
// (forwarding proposals to the leader, observers joining). hashicorp/raft's
// NetworkTransport opens every connection by writing its RPC type, a byte
// in 0..4; the controller RPC opens with rpcMagic. The mux reads the first
// byte of each accepted connection and hands Raft's connections (with the
// byte put back) to the transport's Accept, and serves the others itself.
//
// Controller RPC, after the magic byte and rpcVersion:
//
//	request   u32 length (BE, of what follows) | u8 kind | payload
//	response  u32 length | u8 status | payload
//
//	kind 1 propose  payload: an encoded Command
//	kind 2 join     payload: node id (zigzag varint), raft address (string)
//	kind 3 describe payload: empty; answer: this node's Raft figures and
//	                controller listeners (describe.go), whatever its role
//	status 0 ok           payload: an encoded Result (propose), empty (join) or a nodeInfo (describe)
//	status 1 not leader   the receiver is not the leader: try again elsewhere
//	status 2 unknown      the proposal may or may not have been applied; payload: message
//	status 3 failed       not applied; payload: message
//
// One request per connection: a client dials, sends, reads, closes. That
// keeps "was it sent?" unambiguous (a dial or write failure means not
// applied) at the cost of a connect per proposal, which the proposal rate
// (registrations, heartbeats, admin changes) affords.
const (
	rpcMagic   byte = 0xC7
	rpcVersion byte = 1

	rpcPropose  byte = 1
	rpcJoin     byte = 2
	rpcDescribe byte = 3

	statusOK        byte = 0
	statusNotLeader byte = 1
	statusUnknown   byte = 2
	statusFailed    byte = 3

	maxRPCFrame      = 16 << 20
	firstByteTimeout = 10 * time.Second
)

// mux is the raft.StreamLayer over the node's listener.
type mux struct {
	ln        net.Listener // a tls.Listener under mutual TLS
	sec       peerSecurity // how peers are authenticated, both ways
	log       *slog.Logger
	advertise net.Addr
	raftConns chan net.Conn
	serve     func(net.Conn) // controller RPC handler; owns and closes the conn
	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{} // controller RPC conns being served, closed on Close
	// Raft's accepted conns, from Accept until the transport's handler
	// closes them. Close closes them and waits for that: the handler may
	// be running Raft's heartbeat fast path, which writes the stable store
	// (a new term) outside Raft's own goroutines, so the store must stay
	// open until every handler has returned.
	raft     map[*prefixConn]struct{}
	raftLive sync.WaitGroup
}

func newMux(ln net.Listener, advertise net.Addr, serve func(net.Conn), sec peerSecurity, log *slog.Logger) *mux {
	m := &mux{ln: ln, sec: sec, log: log, advertise: advertise, raftConns: make(chan net.Conn), serve: serve,
		closed: make(chan struct{}), conns: make(map[net.Conn]struct{}), raft: make(map[*prefixConn]struct{})}
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

func (m *mux) acceptLoop() {
	defer m.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failure (e.g. out of descriptors): back off, bounded.
			t := time.NewTimer(backoff)
			select {
			case <-m.closed:
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		m.wg.Add(1)
		go m.classify(conn)
	}
}

// classify authenticates an accepted connection (TLS handshake, SASL
// exchange: whichever the node's Config asks for, in that order), then
// reads its first byte and routes it.
func (m *mux) classify(conn net.Conn) {
	defer m.wg.Done()
	// The handshakes and the first byte under one deadline, reads and
	// writes (the SASL answers): a peer that stalls is dropped.
	_ = conn.SetDeadline(wallClock().Add(firstByteTimeout)) // the wall clock: controller.go wallClock
	if tc, ok := conn.(*tls.Conn); ok {
		// The handshake under the same deadline; a peer without a
		// certificate the trust store verifies never gets further.
		if err := tc.Handshake(); err != nil {
			m.log.Warn("controller port: TLS handshake failed, connection closed", "remote", conn.RemoteAddr().String(), "err", err)
			conn.Close()
			return
		}
		if m.sec.authorizeTLS != nil {
			if err := m.sec.authorizeTLS(conn.RemoteAddr(), tc.ConnectionState()); err != nil {
				m.log.Warn("controller port: peer not authorized, connection closed", "remote", conn.RemoteAddr().String(), "err", err)
				conn.Close()
				return
			}
		}
	}
	if m.sec.authenticatePeer != nil && !m.authenticate(conn) { // sasl.go
		conn.Close()
		return
	}
	var first [1]byte
	if _, err := io.ReadFull(conn, first[:]); err != nil {
		conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	if first[0] == rpcMagic {
		if !m.track(conn) {
			conn.Close()
			return
		}
		m.serve(conn)
		m.untrack(conn)
		return
	}
	pc := &prefixConn{Conn: conn, first: first[0], pending: true}
	if !m.trackRaft(pc) {
		conn.Close()
		return
	}
	select {
	case m.raftConns <- pc:
	case <-m.closed:
		pc.Close()
	}
}

// trackRaft registers a Raft conn until its Close; false once the mux is
// closed.
func (m *mux) trackRaft(pc *prefixConn) bool {
	return m.whileOpen(func() {
		m.raft[pc] = struct{}{}
		m.raftLive.Add(1)
		pc.onClose = func() {
			m.mu.Lock()
			delete(m.raft, pc)
			m.mu.Unlock()
			m.raftLive.Done()
		}
	})
}

// track registers a controller RPC conn being served; false once the mux
// is closed.
func (m *mux) track(c net.Conn) bool {
	return m.whileOpen(func() { m.conns[c] = struct{}{} })
}

// whileOpen runs fn under mu unless the mux is closed (then false), so
// that Close, which closes what is registered under mu, misses nothing.
func (m *mux) whileOpen(fn func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.closed:
		return false
	default:
	}
	fn()
	return true
}

func (m *mux) untrack(c net.Conn) {
	m.mu.Lock()
	delete(m.conns, c)
	m.mu.Unlock()
}

// Accept returns the next Raft connection (raft.StreamLayer).
func (m *mux) Accept() (net.Conn, error) {
	select {
	case c := <-m.raftConns:
		return c, nil
	case <-m.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting, closes the controller RPC connections being
// served and Raft's accepted connections, and waits for the mux's
// goroutines and for the transport's handlers to close the Raft ones
// (bounded by raftHandlerWait: a handler stuck past it is logged).
func (m *mux) Close() error {
	var err error
	m.closeOnce.Do(func() {
		m.mu.Lock()
		close(m.closed)
		for c := range m.conns {
			c.Close()
		}
		for pc := range m.raft {
			pc.Conn.Close() // the handler's read fails; its deferred Close untracks
		}
		m.mu.Unlock()
		err = m.ln.Close()
		m.wg.Wait()
		done := make(chan struct{})
		go func() { m.raftLive.Wait(); close(done) }()
		t := time.NewTimer(raftHandlerWait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			m.log.Warn("controller port: a Raft connection handler did not return", "waited", raftHandlerWait)
		}
	})
	return err
}

// raftHandlerWait bounds Close's wait for Raft's connection handlers,
// whose sockets it has closed: they return as soon as their current
// command is handled.
const raftHandlerWait = 10 * time.Second

func (m *mux) Addr() net.Addr { return m.advertise }

// Dial connects to a Raft peer (raft.StreamLayer).
func (m *mux) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return dialPeer(ctx, m.sec, string(address))
}

// dialPeer connects to the node at addr: plain TCP, or mutual TLS when
// sec.clientTLS is set (the handshake done before it returns, the peer's
// name checked against addr's host as the configuration says); then, with
// sec.authenticateSelf, authenticates (SASL: sasl.go) before it returns.
func dialPeer(ctx context.Context, sec peerSecurity, addr string) (net.Conn, error) {
	var d net.Dialer
	var conn net.Conn
	var err error
	if sec.clientTLS == nil {
		conn, err = d.DialContext(ctx, "tcp", addr)
	} else {
		host, _, herr := net.SplitHostPort(addr)
		if herr != nil {
			return nil, herr
		}
		td := tls.Dialer{NetDialer: &d, Config: sec.clientTLS(host)}
		conn, err = td.DialContext(ctx, "tcp", addr)
	}
	if err != nil || sec.authenticateSelf == nil {
		return conn, err
	}
	if err := sec.authenticate(ctx, conn); err != nil { // sasl.go
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// requireClientCert returns cfg, or the configurations it hands out per
// connection (GetConfigForClient), with client certificates required and
// verified: the controller port is mutual TLS whatever the listener it
// borrows its files from asks of clients.
func requireClientCert(cfg *tls.Config) *tls.Config {
	if cfg.GetConfigForClient == nil {
		c := cfg.Clone()
		c.ClientAuth = tls.RequireAndVerifyClientCert
		return c
	}
	inner := cfg.GetConfigForClient
	c := cfg.Clone()
	c.ClientAuth = tls.RequireAndVerifyClientCert
	c.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		got, err := inner(h)
		if err != nil || got == nil {
			return got, err
		}
		got = got.Clone()
		got.ClientAuth = tls.RequireAndVerifyClientCert
		return got, nil
	}
	return c
}

// prefixConn replays the byte the mux consumed, and tells the mux when
// the transport closes it.
type prefixConn struct {
	net.Conn
	first     byte
	pending   bool
	onClose   func() // set by trackRaft
	closeOnce sync.Once
}

func (c *prefixConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		if c.onClose != nil {
			c.onClose()
		}
	})
	return err
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if c.pending && len(p) > 0 {
		p[0] = c.first
		c.pending = false
		return 1, nil
	}
	return c.Conn.Read(p)
}

// errNotSent marks RPC failures that certainly did not reach the server's
// handler: the proposal was not applied and may be retried.
var errNotSent = errors.New("controller: request not sent")

// rpcCall dials addr, sends one request and returns the response status and
// payload. Errors wrap errNotSent when the request was not fully written.
func rpcCall(ctx context.Context, sec peerSecurity, addr string, kind byte, payload []byte) (byte, []byte, error) {
	conn, err := dialPeer(ctx, sec, addr)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %v", errNotSent, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := make([]byte, 0, 7+len(payload))
	req = append(req, rpcMagic, rpcVersion)
	req = binary.BigEndian.AppendUint32(req, uint32(1+len(payload)))
	req = append(req, kind)
	req = append(req, payload...)
	if _, err := conn.Write(req); err != nil {
		return 0, nil, fmt.Errorf("%w: %v", errNotSent, err)
	}
	status, body, err := readFrame(bufio.NewReader(conn))
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return 0, nil, err
	}
	return status, body, nil
}

// readFrame reads u32 length | u8 tag | payload, refusing oversized frames.
func readFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 1 || n > maxRPCFrame {
		return 0, nil, fmt.Errorf("%w: rpc frame of %d bytes", ErrCorrupt, n)
	}
	body := make([]byte, n-1)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return hdr[4], body, nil
}

func writeFrame(w io.Writer, tag byte, payload []byte) error {
	b := make([]byte, 0, 5+len(payload))
	b = binary.BigEndian.AppendUint32(b, uint32(1+len(payload)))
	b = append(b, tag)
	b = append(b, payload...)
	_, err := w.Write(b)
	return err
}
