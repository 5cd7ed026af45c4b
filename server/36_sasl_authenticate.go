package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate v0..v2 (KIP-152): one SASL token each way, after a v1
// SaslHandshake (17_sasl_handshake.go describes the exchange). A failure
// answers SASL_AUTHENTICATION_FAILED with Kafka's message and closes the
// connection; success sets the connection's principal. With
// connections.max.reauth.ms > 0, v1+ answers the session's lifetime
// (session_lifetime_ms) with the last token, and a re-authentication
// (17_sasl_handshake.go) that changes the mechanism or the principal
// fails and closes the connection. With
// connection.failed.authentication.delay.ms (KIP-306, Kafka's default 100)
// the failure's answer and the close wait that long.
func init() { register(36, 0, 2, handleSaslAuthenticate) }

func handleSaslAuthenticate(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	st, sp := saslStateOf(rc.conn)
	if st == nil || st.phase != saslAuthenticating {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate request received after successful authentication"
		if st == nil {
			msg = "SaslAuthenticate request received on a listener without SASL"
		}
		resp.ErrorMessage = &msg
		rc.respond(resp)
		return
	}
	fail := func(msg string) {
		st.phase, st.ex = saslFailed, nil
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = &msg
		s.saslLog(sp, "SASL authentication failed; closing connection", "mechanism", st.mech, "reason", msg, "reauthentication", st.reauth)
		if d := st.cfg.FailedAuthDelayMs; d > 0 {
			// KIP-306: the answer waits, and frames the client sends
			// meanwhile are refused behind it (the session failed).
			s.cfg.AfterFunc(time.Duration(d)*time.Millisecond, func() { rc.respondThenClose(resp) })
			return
		}
		rc.respondThenClose(resp)
	}
	if st.badMech != "" {
		fail(st.badMech)
		return
	}
	out, done, err := st.ex.Step(req.SASLAuthBytes)
	if err != nil {
		fail(err.Error())
		return
	}
	resp.SASLAuthBytes = out
	if done {
		if msg := s.saslAuthenticated(sp, st); msg != "" {
			fail(msg)
			return
		}
		st.v1 = true
		if rc.version >= 1 {
			resp.SessionLifetimeMillis = st.lifetime
		}
	}
	rc.respond(resp)
}
