package server

import (
	"encoding/binary"

	"github.com/stratalog/strata/internal/sasl"
	"github.com/stratalog/strata/netpoll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake v0..v1 (issue 20). On a SASL_PLAINTEXT or SASL_SSL
// listener a connection authenticates before anything else is served, as
// in Kafka's SaslServerAuthenticator:
//
//   - before the handshake, only ApiVersions and SaslHandshake are served;
//   - SaslHandshake names the mechanism: one the listener does not enable
//     answers UNSUPPORTED_SASL_MECHANISM with the enabled list and closes
//     the connection; otherwise the answer lists the enabled mechanisms;
//   - after a v1 handshake only SaslAuthenticate (36_sasl_authenticate.go)
//     is served until the exchange ends; after a v0 handshake (clients
//     before Kafka 1.0, sarama up to 1.40 by default) the SASL tokens come
//     as bare size-prefixed frames without a request header (pre-KIP-152),
//     answered the same way, as Kafka 3.x does (4.0 dropped v0);
//   - any other request before authentication closes the connection (one
//     rate-limited log line), and so does a frame larger than Kafka's
//     sasl.server.max.receive.size (512 KiB, before it is read);
//   - a failed authentication answers SASL_AUTHENTICATION_FAILED with
//     Kafka's message and closes the connection; on success the principal
//     (User:<name>) replaces the connection's (netpoll.Conn.Authenticated),
//     as the TLS client certificate's does on an SSL listener.
//
// On a listener without SASL, or once authenticated (re-authentication,
// KIP-368, is not built), SaslHandshake and SaslAuthenticate answer
// ILLEGAL_SASL_STATE, as Kafka's request handler does.
func init() { register(17, 0, 1, handleSaslHandshake) }

// SASL phases of a connection on a SASL listener.
const (
	saslStart          uint8 = iota // ApiVersions and SaslHandshake only
	saslAuthenticating              // after a v1 handshake: SaslAuthenticate only
	saslRaw                         // after a v0 handshake: bare tokens
	saslComplete                    // authenticated: everything is served
	saslFailed                      // every frame closes the connection
)

// saslState is a connection's authentication (netpoll.Conn.Session),
// touched only on its reader's goroutine: the gate and the two handlers
// run inline in dispatch.
type saslState struct {
	cfg   *sasl.Config
	phase uint8
	mech  string
	ex    sasl.Exchange
}

// saslPeer is what the gate needs of a connection (*netpoll.Conn).
type saslPeer interface {
	peer
	ListenerContext() any
	Session() any
	SetSession(any)
	Authenticated(principal string)
	Listener() string
}

// saslStateOf returns the SASL state of c; nil when c is not on a SASL
// listener.
func saslStateOf(c peer) (*saslState, saslPeer) {
	sp, ok := c.(saslPeer)
	if !ok {
		return nil, nil
	}
	cfg, _ := sp.ListenerContext().(*sasl.Config)
	if cfg == nil {
		return nil, sp
	}
	st, _ := sp.Session().(*saslState)
	if st == nil {
		st = &saslState{cfg: cfg}
		sp.SetSession(st)
	}
	return st, sp
}

// saslGate runs before a frame is decoded. It reports whether it handled
// the frame (completed r): a bare token after a v0 handshake, or a frame
// that closes an unauthenticated connection. Frames it lets through are
// dispatched as usual.
func (s *Server) saslGate(c peer, frame []byte, r replySink) bool {
	st, sp := saslStateOf(c)
	if st == nil {
		return false
	}
	switch st.phase {
	case saslComplete:
		return false
	case saslFailed:
		r.Close()
		return true
	case saslRaw:
		s.saslRawToken(sp, st, frame, r)
		return true
	}
	if len(frame) < 4 {
		return false // the decoder refuses it and closes the connection
	}
	key := int16(binary.BigEndian.Uint16(frame))
	switch {
	case st.phase == saslStart && (key == apiVersionsKey || key == 17):
		return false
	case st.phase == saslAuthenticating && key == 36:
		return false
	}
	st.phase = saslFailed
	s.saslLog(sp, "request before SASL authentication; closing connection", "api", kmsg.NameForKey(key))
	r.Close()
	return true
}

// saslRawToken serves one bare token after a v0 handshake. A failure
// closes the connection without an answer (a bare token has no error
// field), as Kafka does.
func (s *Server) saslRawToken(sp saslPeer, st *saslState, frame []byte, r replySink) {
	out, done, err := st.ex.Step(frame)
	if err != nil {
		st.phase, st.ex = saslFailed, nil
		s.saslLog(sp, "SASL authentication failed; closing connection", "mechanism", st.mech, "reason", err.Error())
		r.Close()
		return
	}
	if done {
		s.saslAuthenticated(sp, st)
	}
	r.Send(append([]byte(nil), out...))
}

// saslAuthenticated ends st's exchange: the connection's principal is
// the one it authenticated.
func (s *Server) saslAuthenticated(sp saslPeer, st *saslState) {
	p := st.ex.Principal()
	st.phase, st.ex = saslComplete, nil
	sp.Authenticated(p)
	s.log.Debug("SASL authenticated", "remote", remoteAddr(sp), "listener", sp.Listener(), "mechanism", st.mech, "principal", p)
}

// saslLog logs a refused or failed authentication, rate-limited with the
// bad-request lines. Never a password: messages are sasl.AuthError's.
func (s *Server) saslLog(sp saslPeer, msg string, args ...any) {
	ok, held := s.badFrames.Allow(s.now())
	if !ok {
		return
	}
	args = append([]any{"remote", remoteAddr(sp), "listener", sp.Listener()}, args...)
	s.log.Warn(msg, append(args, "similar_lines_suppressed", held)...)
}

func handleSaslHandshake(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	st, sp := saslStateOf(rc.conn)
	if st == nil || st.phase != saslStart {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		rc.respond(resp)
		return
	}
	resp.SupportedMechanisms = st.cfg.Mechanisms
	ex, err := st.cfg.Start(req.Mechanism)
	if err != nil {
		st.phase = saslFailed
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		s.saslLog(sp, "unsupported SASL mechanism; closing connection", "mechanism", req.Mechanism, "enabled", st.cfg.Mechanisms)
		rc.respondThenClose(resp)
		return
	}
	st.ex, st.mech = ex, req.Mechanism
	st.phase = saslAuthenticating
	if rc.version == 0 {
		st.phase = saslRaw
	}
	rc.respond(resp)
}

// respondThenClose sends resp and closes the connection once it is
// written (Kafka's answer to a failed authentication).
func (rc *reqCtx) respondThenClose(resp kmsg.Response) {
	resp.SetVersion(rc.version)
	if !rc.complete() {
		return
	}
	ob := getOutBuf()
	b := rc.appendResponseHeader(ob.b[:0])
	b = resp.AppendTo(b)
	ob.b = b
	ob.parts[0] = netpoll.Part{Buf: b}
	rc.meter(resp, false)
	conn := rc.conn
	rc.reply.SendParts(ob.parts[:], func() {
		ob.put()
		conn.Close()
	})
}
