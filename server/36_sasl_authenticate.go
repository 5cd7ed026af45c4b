package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate v0..v2 (KIP-152): one SASL token each way, after a v1
// SaslHandshake (17_sasl_handshake.go describes the exchange). A failure
// answers SASL_AUTHENTICATION_FAILED with Kafka's message and closes the
// connection; success sets the connection's principal. Session lifetimes
// (v1's SessionLifetimeMillis, KIP-368 re-authentication) are 0: the
// session does not expire.
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
	out, done, err := st.ex.Step(req.SASLAuthBytes)
	if err != nil {
		st.phase, st.ex = saslFailed, nil
		msg := err.Error()
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = &msg
		s.saslLog(sp, "SASL authentication failed; closing connection", "mechanism", st.mech, "reason", msg)
		rc.respondThenClose(resp)
		return
	}
	resp.SASLAuthBytes = out
	if done {
		s.saslAuthenticated(sp, st)
	}
	rc.respond(resp)
}
