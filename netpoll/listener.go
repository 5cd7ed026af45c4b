package netpoll

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"time"
)

// Listener says what a listener is called and how its connections are
// secured (Kafka's listeners: PLAINTEXT, or SSL with a TLS configuration).
type Listener struct {
	// Name is the listener's name (PLAINTEXT, SSL, INTERNAL...), reported
	// by Conn.Listener so a handler can answer with this listener's
	// advertised addresses.
	Name string
	// TLS, when non-nil, makes every connection a TLS server connection
	// (the listener's protocol is SSL). It may take its certificates per
	// handshake (GetConfigForClient) to reload them.
	TLS *tls.Config
	// Principal maps a verified client certificate to the connection's
	// principal (Kafka's "User:<name>"). An error fails the connection
	// (Kafka: no ssl.principal.mapping.rules rule applies). nil:
	// DefaultPrincipal.
	Principal func(cert *x509.Certificate) (string, error)
	// HandshakeTimeout bounds a TLS handshake; 0: DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// UnauthenticatedMaxFrameBytes, when positive, closes a connection
	// that sends a larger frame before the handler calls
	// Conn.Authenticated (a SASL listener: Kafka's
	// sasl.server.max.receive.size), before the frame is read.
	UnauthenticatedMaxFrameBytes int32
	// Context is the handler's value for the listener (Conn.ListenerContext):
	// a SASL listener's configuration.
	Context any
}

// DefaultHandshakeTimeout bounds a TLS handshake: a peer that connects and
// sends nothing, or only part of a handshake, is closed after it.
const DefaultHandshakeTimeout = 10 * time.Second

// Anonymous is the principal of a connection without a client
// certificate (Kafka's KafkaPrincipal.ANONYMOUS).
const Anonymous = "User:ANONYMOUS"

// DefaultPrincipal is "User:" and the certificate's subject.
func DefaultPrincipal(cert *x509.Certificate) (string, error) {
	return "User:" + cert.Subject.String(), nil
}

// ServeListener is Serve for a named, possibly TLS, listener.
func (s *Server) ServeListener(ln net.Listener, l Listener) error {
	if l.HandshakeTimeout <= 0 {
		l.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if l.Principal == nil {
		l.Principal = DefaultPrincipal
	}
	return s.serve(ln, &l)
}

// Listener returns the name of the listener the connection arrived on.
func (c *Conn) Listener() string { return c.l.Name }

// Principal returns the connection's authenticated principal: Anonymous
// on a PLAINTEXT listener or without a client certificate, else the
// certificate's principal (Listener.Principal). Set before the first
// frame is served.
func (c *Conn) Principal() string {
	if p := c.principal.Load(); p != nil {
		return *p
	}
	return Anonymous
}

// Authenticated sets the connection's principal after a SASL exchange and
// lifts Listener.UnauthenticatedMaxFrameBytes. Safe from any goroutine;
// the handler calls it from Serve so the next frame is read with it.
func (c *Conn) Authenticated(principal string) {
	c.principal.Store(&principal)
	c.preAuthMax.Store(0)
}

// ListenerContext returns the Listener.Context of the connection's listener.
func (c *Conn) ListenerContext() any { return c.l.Context }

// Session returns the value SetSession stored (nil at first). Only the
// reader's goroutine (Handler.Serve) may call Session and SetSession.
func (c *Conn) Session() any { return c.session }

// SetSession stores the handler's per-connection state (a SASL exchange).
func (c *Conn) SetSession(v any) { c.session = v }

// TLS returns the TLS connection state (nil on a PLAINTEXT listener). Set
// before the first frame is served.
func (c *Conn) TLS() *tls.ConnectionState { return c.tlsState }

// secure wraps nc in TLS when the listener says so: the Conn reads and
// writes through the TLS connection (file parts are then copied, since
// sendfile cannot encrypt) and closes the socket itself (no close_notify
// that could wait on a peer that does not read).
func (c *Conn) secure(nc net.Conn) {
	c.closer = nc
	if c.l.UnauthenticatedMaxFrameBytes > 0 {
		c.preAuthMax.Store(c.l.UnauthenticatedMaxFrameBytes)
	}
	if c.l.TLS == nil {
		return
	}
	tc := tls.Server(nc, c.l.TLS)
	c.tc = tc
	c.nc = tc
	c.raw = nil
	c.br = bufio.NewReaderSize(tc, readBufBytes)
	// Coalesce a run of small responses into full TLS records (writev
	// cannot gather through TLS: each Write is a record and a syscall).
	c.tw = bufio.NewWriterSize(tc, tlsWriteBufBytes)
}

// tlsWriteBufBytes is the TLS write buffer: one maximal TLS record.
const tlsWriteBufBytes = 16 << 10

// handshake runs the TLS handshake before the first frame and sets the
// principal. It reports false (after one log line and closing the
// connection) when it fails.
func (c *Conn) handshake() bool {
	if c.tc == nil {
		return true
	}
	c.nc.SetDeadline(c.s.cfg.Now().Add(c.l.HandshakeTimeout))
	err := c.tc.Handshake()
	c.nc.SetDeadline(time.Time{})
	if err == nil {
		st := c.tc.ConnectionState()
		c.tlsState = &st
		if len(st.PeerCertificates) > 0 {
			p, perr := c.l.Principal(st.PeerCertificates[0])
			if perr != nil {
				c.logHandshake("TLS client certificate has no principal; closing connection", perr)
				c.Close()
				return false
			}
			c.principal.Store(&p)
		}
		return true
	}
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &rh):
		what := "not a TLS handshake (a PLAINTEXT client?)"
		var hdr [FrameHeaderBytes]byte
		copy(hdr[:], rh.RecordHeader[:])
		if f := foreignProtocol(hdr); f != "" && f[0] == 'H' {
			what = f // HTTP
		}
		c.logHandshake(what+" on a Kafka SSL listener; closing connection", nil)
	case errors.Is(err, io.EOF) || c.isDead():
		// Connected and left (a port check), or closed by Close.
		c.s.log.Debug("netpoll: TLS handshake ended", "remote", c.remote.String(), "listener", c.l.Name, "err", err)
	default:
		c.logHandshake("TLS handshake failed; closing connection", err)
	}
	c.Close()
	return false
}

// logHandshake logs a refused connection, rate-limited like refused frames.
func (c *Conn) logHandshake(msg string, err error) {
	ok, held := c.s.refused.Allow(c.s.cfg.Now())
	if !ok {
		return
	}
	args := []any{"remote", c.remote.String(), "listener", c.l.Name}
	if err != nil {
		args = append(args, "err", err)
	}
	c.s.log.Warn("netpoll: "+msg, append(args, "similar_lines_suppressed", held)...)
}
