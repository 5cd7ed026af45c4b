package sasl

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"strconv"
)

// plainServer is RFC 4616 as Kafka's PlainSaslServer: one token
// authzid NUL authcid NUL passwd, checked against the static users; an
// empty token answers success.
type plainServer struct {
	users     map[string]string
	principal string
	done      bool
}

// plainFailed is Kafka's message for a wrong user or password.
const plainFailed = "Authentication failed: Invalid username or password"

func (p *plainServer) Step(token []byte) ([]byte, bool, error) {
	if p.done {
		return nil, false, &AuthError{Msg: "Authentication failed: PLAIN exchange already complete"}
	}
	p.done = true
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return nil, false, &AuthError{Msg: "Invalid SASL/PLAIN response: expected 3 tokens, got " + strconv.Itoa(len(parts))}
	}
	authz, user, pass := string(parts[0]), string(parts[1]), parts[2]
	if user == "" {
		return nil, false, &AuthError{Msg: "Authentication failed: username not specified"}
	}
	if len(pass) == 0 {
		return nil, false, &AuthError{Msg: "Authentication failed: password not specified"}
	}
	want, ok := p.users[user]
	// Compare digests: constant time whatever the lengths, and an unknown
	// user costs what a known one does.
	got := sha256.Sum256(pass)
	exp := sha256.Sum256([]byte(want))
	if subtle.ConstantTimeCompare(got[:], exp[:]) != 1 || !ok {
		return nil, false, &AuthError{Msg: plainFailed}
	}
	if authz != "" && authz != user {
		return nil, false, &AuthError{Msg: "Authentication failed: Client requested an authorization id that is different from username"}
	}
	p.principal = "User:" + user
	return []byte{}, true, nil
}

func (p *plainServer) Principal() string { return p.principal }
