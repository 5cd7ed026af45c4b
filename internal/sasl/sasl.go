package sasl

import (
	"errors"
	"slices"
	"strings"
)

// Mechanism names, as Kafka spells them.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Supported reports whether mech is a mechanism this package serves.
func Supported(mech string) bool {
	switch mech {
	case Plain, ScramSHA256, ScramSHA512, OAuthBearer:
		return true
	}
	return false
}

// MaxTokenBytes bounds a SASL token before authentication: Kafka's
// sasl.server.max.receive.size default (524288). A larger frame on an
// unauthenticated SASL connection closes it.
const MaxTokenBytes = 524288

// Config is what one SASL listener accepts.
type Config struct {
	// Mechanisms are the enabled mechanisms (sasl.enabled.mechanisms), in
	// the order SaslHandshake reports them.
	Mechanisms []string
	// PlainUsers are PLAIN's static users (user_<name>="<password>" of the
	// listener's PlainLoginModule).
	PlainUsers map[string]string
	// Scram holds the SCRAM credentials (nil: no SCRAM user exists).
	Scram *Store
	// OAuth validates OAUTHBEARER tokens (nil: every token fails).
	OAuth *OAuth
	// ReauthMs is connections.max.reauth.ms (KIP-368): when > 0 a session
	// lasts that long (SaslAuthenticate v1+ tells the client), the client
	// re-authenticates on its connection before it ends, and a request
	// after the end closes the connection. 0: sessions never expire.
	ReauthMs int64
	// FailedAuthDelayMs is connection.failed.authentication.delay.ms
	// (KIP-306): the answer to a failed authentication, and the close
	// after it, wait this long. 0: at once.
	FailedAuthDelayMs int64
}

// Enabled reports whether mech is enabled (case-sensitive, as Kafka).
func (c *Config) Enabled(mech string) bool { return slices.Contains(c.Mechanisms, mech) }

// Exchange is one server-side authentication in progress.
type Exchange interface {
	// Step takes the client's next token and returns the server's answer.
	// done reports that authentication succeeded (resp is then the last
	// token to send). An *AuthError means the client failed to
	// authenticate; any error ends the exchange.
	Step(token []byte) (resp []byte, done bool, err error)
	// Principal is the authenticated principal ("User:alice") once done.
	Principal() string
}

// Start begins an exchange of mechanism mech, which must be enabled.
func (c *Config) Start(mech string) (Exchange, error) {
	if !c.Enabled(mech) {
		return nil, &AuthError{Msg: "Unsupported SASL mechanism " + mech}
	}
	switch mech {
	case Plain:
		return &plainServer{users: c.PlainUsers}, nil
	case ScramSHA256, ScramSHA512:
		return &scramServer{mech: mech, store: c.Scram}, nil
	case OAuthBearer:
		return &oauthServer{cfg: c.OAuth}, nil
	}
	return nil, &AuthError{Msg: "Unsupported SASL mechanism " + mech}
}

// AuthError is a failed authentication; Msg is what the client is told
// (SaslAuthenticate's error message), never a password.
type AuthError struct{ Msg string }

func (e *AuthError) Error() string { return e.Msg }

// IsAuthError reports whether err is an *AuthError.
func IsAuthError(err error) bool {
	var ae *AuthError
	return errors.As(err, &ae)
}

// ParseMechanisms parses a sasl.enabled.mechanisms value: a
// comma-separated list. Unknown mechanisms are an error naming them.
func ParseMechanisms(v string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(v, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			continue
		}
		if !Supported(m) {
			return nil, errors.New("mechanism " + m + " is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)")
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no mechanism")
	}
	return out, nil
}
