package loadgen

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Kafka's security protocols (security.protocol), as loadgen's clients
// speak them.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// Security is how loadgen's clients (producers, consumers, the admin
// client) connect, named as Kafka's client properties name it:
// security.protocol, ssl.truststore.location (PEM), a client certificate
// and key (mTLS), sasl.mechanism and the user's name and password.
type Security struct {
	Protocol string `json:"security_protocol"` // "" = PLAINTEXT
	TLSCA    string `json:"tls_ca,omitempty"`  // PEM trust store; "" = the system's roots
	TLSCert  string `json:"tls_cert,omitempty"`
	TLSKey   string `json:"tls_key,omitempty"`
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	SASLMechanism string `json:"sasl_mechanism,omitempty"`
	SASLUsername  string `json:"sasl_username,omitempty"`
	SASLPassword  string `json:"sasl_password,omitempty"` // never in the report (configJSON)
}

// protocol is s.Protocol, PLAINTEXT when unset.
func (s *Security) protocol() string {
	if s.Protocol == "" {
		return ProtocolPlaintext
	}
	return strings.ToUpper(s.Protocol)
}

func (s *Security) useTLS() bool {
	p := s.protocol()
	return p == ProtocolSSL || p == ProtocolSASLSSL
}

func (s *Security) useSASL() bool {
	p := s.protocol()
	return p == ProtocolSASLPlaintext || p == ProtocolSASLSSL
}

// secured says whether the clients speak anything but PLAINTEXT.
func (s *Security) secured() bool { return s.protocol() != ProtocolPlaintext }

// validate checks the combination of the flags.
func (s *Security) validate(bad func(format string, args ...any)) {
	switch s.protocol() {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
	default:
		bad("--security-protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", s.Protocol)
		return
	}
	if !s.useTLS() && (s.TLSCA != "" || s.TLSCert != "" || s.TLSKey != "") {
		bad("--tls-ca, --tls-cert and --tls-key need --security-protocol SSL or SASL_SSL (not %s)", s.protocol())
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		bad("--tls-cert and --tls-key go together (a client certificate and its key)")
	}
	if !s.useSASL() {
		if s.SASLMechanism != "" || s.SASLUsername != "" || s.SASLPassword != "" {
			bad("--sasl-mechanism, --sasl-username and --sasl-password need --security-protocol SASL_PLAINTEXT or SASL_SSL (not %s)", s.protocol())
		}
		return
	}
	switch strings.ToUpper(s.SASLMechanism) {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	case "":
		bad("--security-protocol %s needs --sasl-mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", s.protocol())
	default:
		bad("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.SASLMechanism)
	}
	if s.SASLUsername == "" {
		bad("--security-protocol %s needs --sasl-username", s.protocol())
	}
	if s.SASLPassword == "" {
		bad("--security-protocol %s needs --sasl-password (or $STRATA_SASL_PASSWORD)", s.protocol())
	}
}

// kgoOpts are the franz-go options of s: a TLS dialer and a SASL
// mechanism, none for PLAINTEXT.
func (s *Security) kgoOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.useTLS() {
		cfg, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s.useSASL() {
		switch strings.ToUpper(s.SASLMechanism) {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf("loadgen: --sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.SASLMechanism)
		}
	}
	return opts, nil
}

// tlsConfig is the clients' TLS configuration: the trust store's CAs (the
// system's without --tls-ca) and the client certificate, if given.
func (s *Security) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.TLSCA != "" {
		pem, err := os.ReadFile(s.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("loadgen: --tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("loadgen: --tls-ca %s: no PEM certificate in it", s.TLSCA)
		}
		cfg.RootCAs = pool
	}
	if s.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(s.TLSCert, s.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("loadgen: --tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// clientOpts are cfg's security options for a kgo client, appended to
// base. A file that cannot be read was already an error when the run
// started (Run checks them), so here it is returned as one too.
func (c *Config) clientOpts(base ...kgo.Opt) ([]kgo.Opt, error) {
	sec, err := c.Security.kgoOpts()
	if err != nil {
		return nil, err
	}
	return append(base, sec...), nil
}

// describe names the clients' security in the workload line ("" for
// PLAINTEXT).
func (s *Security) describe() string {
	switch {
	case !s.secured():
		return ""
	case s.useSASL():
		return fmt.Sprintf(", %s %s as %s", s.protocol(), strings.ToUpper(s.SASLMechanism), s.SASLUsername)
	}
	return ", " + s.protocol()
}
