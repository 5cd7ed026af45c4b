package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// Authentication on the controller port beyond mutual TLS
// (Config.AuthenticatePeer, AuthenticateSelf, AuthorizePrincipal): the
// broker plugs in SASL when its inter-broker listener is SASL_PLAINTEXT,
// as Kafka's controller listener can be SASL_PLAINTEXT
// (sasl.mechanism.controller.protocol). The package keeps to hooks (it
// imports nothing of the module); cmd/strata's controllerSecurity fills
// them with internal/sasl.
//
// Framing: the peer opens every connection, Raft's and the controller
// RPC's alike, with Kafka's own SaslHandshake v1 and SaslAuthenticate
// v0-v1 frames (KIP-152: size-prefixed requests with header v1, responses
// with header v0), exactly as it authenticates to another broker's SASL
// listener: the client is sasl.Authenticate, the one the replica fetcher
// and the transaction marker client use, with the inter-broker mechanism
// and credentials, and the server sasl.Serve, which runs the listeners'
// own exchanges (the PLAIN users, the SCRAM store). No new wire format and
// no new crypto: the frames are ones the broker already parses, fuzzed
// (sasl.FuzzServe), and bounded before allocation (sasl.MaxTokenBytes).
// Both stop exactly at the end of the exchange (sized frames, no read
// ahead), so the mux then reads its type byte (Raft's 0..4, the RPC's
// 0xC7) from the same connection. Nothing needs telling apart: a peer
// that skips authentication is refused at its first bytes (read as a
// frame size they are negative or past the bound, or the frame is not a
// SaslHandshake v1), without an answer; one whose exchange fails is
// answered with Kafka's error (SASL_AUTHENTICATION_FAILED,
// UNSUPPORTED_SASL_MECHANISM) and closed, whatever it sends next.
//
// What it does not give: SASL_PLAINTEXT authenticates each connection, it
// does not encrypt or integrity-protect what follows (as in Kafka); a peer
// on the path can read, and could alter, Raft traffic. Sessions do not
// expire on this port (no KIP-368 re-authentication): Raft's pooled
// connections live until closed; a credential deleted later keeps the
// connections it opened and fails at the next dial.

// peerSecurity is how a node authenticates its peers and itself.
type peerSecurity struct {
	clientTLS          func(serverName string) *tls.Config       // nil: plain TCP
	authorizeTLS       func(net.Addr, tls.ConnectionState) error // Config.AuthorizePeer
	authenticatePeer   func(net.Conn) (string, error)            // nil: accepted connections do not authenticate
	authenticateSelf   func(context.Context, net.Conn) error     // nil: dials do not authenticate
	authorizePrincipal func(net.Addr, string) error              // Config.AuthorizePrincipal
}

func (c *Config) peerSecurity() peerSecurity {
	return peerSecurity{clientTLS: c.ClientTLS, authorizeTLS: c.AuthorizePeer,
		authenticatePeer: c.AuthenticatePeer, authenticateSelf: c.AuthenticateSelf, authorizePrincipal: c.AuthorizePrincipal}
}

func (c *Config) checkPeerAuth() error {
	if (c.AuthenticatePeer == nil) != (c.AuthenticateSelf == nil) {
		return errors.New("controller: AuthenticatePeer and AuthenticateSelf go together")
	}
	if c.AuthenticatePeer == nil && c.AuthorizePrincipal != nil {
		return errors.New("controller: AuthorizePrincipal without AuthenticatePeer")
	}
	return nil
}

// authenticate runs the server side of an accepted connection's
// authentication and the principal's authorization, under the caller's
// deadline. false: the connection is refused (one WARN line said why) and
// the caller closes it.
func (m *mux) authenticate(conn net.Conn) bool {
	remote := conn.RemoteAddr()
	principal, err := m.sec.authenticatePeer(conn)
	if err != nil {
		m.log.Warn("controller port: authentication failed, connection closed", "remote", remote.String(), "err", err)
		return false
	}
	if m.sec.authorizePrincipal != nil {
		if err := m.sec.authorizePrincipal(remote, principal); err != nil {
			m.log.Warn("controller port: peer not authorized, connection closed", "remote", remote.String(), "principal", principal, "err", err)
			return false
		}
	}
	return true
}

// authenticate is the client side on a connection dialPeer opened.
func (s peerSecurity) authenticate(ctx context.Context, conn net.Conn) error {
	if err := s.authenticateSelf(ctx, conn); err != nil {
		return fmt.Errorf("controller port %s: %w", conn.RemoteAddr(), err)
	}
	return nil
}
