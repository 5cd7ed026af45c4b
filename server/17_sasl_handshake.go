package server

import (
	"encoding/binary"
	"time"

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
// Re-authentication (KIP-368): with connections.max.reauth.ms > 0
// (sasl.Config.ReauthMs) a session lasts that long from its last
// authentication (no later than an OAUTHBEARER token's expiry), and
// SaslAuthenticate v1+ tells the client (session_lifetime_ms). A connection authenticated through
// SaslAuthenticate may send SaslHandshake v1 again, with the same
// mechanism, then SaslAuthenticate: the same principal starts a new
// session (another mechanism, or another principal, fails
// authentication and closes the connection, as in Kafka). Any other
// request read after the session ended closes the connection, with one
// log line (Kafka's "expired channel"); a handshake still begins
// re-authentication then, as in Kafka. The time is the server's clock.
//
// On a listener without SASL, or once authenticated when sessions do not
// expire, SaslHandshake and SaslAuthenticate answer ILLEGAL_SASL_STATE,
// as Kafka's request handler does.
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

	principal string    // once authenticated: re-authentication must keep it
	expiry    time.Time // the session's end (zero: it does not end)
	lifetime  int64     // ms from the last authentication to expiry (SaslAuthenticate v1+ says it)
	v1        bool      // authenticated through SaslAuthenticate: may re-authenticate
	reauth    bool      // the exchange in progress re-authenticates
	badMech   string    // re-authentication asked for another mechanism: why it fails
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
		if st.expiry.IsZero() || len(frame) < 2 || binary.BigEndian.Uint16(frame) == 17 || !s.now().After(st.expiry) {
			return false // in session, or a handshake beginning re-authentication
		}
		st.phase = saslFailed
		s.saslLog(sp, "SASL session expired without re-authentication (connections.max.reauth.ms); closing connection",
			"principal", st.principal, "mechanism", st.mech, "api", kmsg.NameForKey(int16(binary.BigEndian.Uint16(frame))))
		r.Close()
		return true
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
		if d := st.cfg.FailedAuthDelayMs; d > 0 {
			s.cfg.AfterFunc(time.Duration(d)*time.Millisecond, r.Close) // KIP-306
			return
		}
		r.Close()
		return
	}
	if done {
		s.saslAuthenticated(sp, st) // never a re-authentication: v0 cannot
	}
	r.Send(append([]byte(nil), out...))
}

// saslAuthenticated ends st's exchange: the connection's principal is
// the one it authenticated, and its session starts now. A
// re-authentication as another principal fails: the message to answer
// with (the connection is to be closed).
func (s *Server) saslAuthenticated(sp saslPeer, st *saslState) (failed string) {
	p := st.ex.Principal()
	var tokenExpiry time.Time // an OAUTHBEARER token's exp
	if e, ok := st.ex.(interface{ Expiry() time.Time }); ok {
		tokenExpiry = e.Expiry()
	}
	if st.reauth && p != st.principal {
		st.phase, st.ex = saslFailed, nil
		return "Cannot change principals during re-authentication from " + st.principal + ": " + p
	}
	st.phase, st.ex, st.principal = saslComplete, nil, p
	if ms := st.cfg.ReauthMs; ms > 0 {
		now, life := s.now(), time.Duration(ms)*time.Millisecond
		if !tokenExpiry.IsZero() { // no later than the token, as Kafka
			life = min(life, max(tokenExpiry.Sub(now), 0))
		}
		st.expiry, st.lifetime = now.Add(life), life.Milliseconds()
	}
	if st.reauth {
		st.reauth = false
		s.log.Debug("SASL re-authenticated", "remote", remoteAddr(sp), "listener", sp.Listener(), "mechanism", st.mech, "principal", p)
		return ""
	}
	sp.Authenticated(p)
	s.log.Debug("SASL authenticated", "remote", remoteAddr(sp), "listener", sp.Listener(), "mechanism", st.mech, "principal", p)
	return ""
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
	if st != nil && st.phase == saslComplete && !st.expiry.IsZero() && st.v1 && rc.version >= 1 {
		// KIP-368: re-authentication of a session, with its mechanism.
		resp.SupportedMechanisms = st.cfg.Mechanisms
		st.reauth, st.phase, st.ex, st.badMech = true, saslAuthenticating, nil, ""
		if req.Mechanism != st.mech {
			st.badMech = "SASL mechanism '" + req.Mechanism + "' requested by client is not supported for re-authentication of mechanism '" + st.mech + "'"
		} else if ex, err := st.cfg.Start(st.mech); err != nil {
			st.badMech = err.Error()
		} else {
			st.ex = ex
		}
		rc.respond(resp)
		return
	}
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
