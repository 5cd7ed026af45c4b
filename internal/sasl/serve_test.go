package sasl

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

type serveResult struct {
	principal string
	err       error
}

// serveAgainst runs Authenticate(cc) against Serve(cfg) over a pipe.
func serveAgainst(t *testing.T, cfg *Config, cc ClientCredentials) (clientErr error, srv serveResult) {
	t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	got := make(chan serveResult, 1)
	go func() {
		defer s.Close() // as the controller port does after any error
		p, err := Serve(s, cfg)
		got <- serveResult{p, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clientErr = Authenticate(ctx, c, cc)
	select {
	case srv = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	return clientErr, srv
}

// TestServeWithClient: the broker's own client (Authenticate) against
// Serve, with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN; a wrong password,
// an unknown user and a mechanism not enabled fail on both sides with
// Kafka's error codes.
func TestServeWithClient(t *testing.T) {
	store := NewStore()
	for _, m := range []string{ScramSHA256, ScramSHA512} {
		c, err := NewCredential(m, "broker-secret", 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Set("broker", m, c); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &Config{Mechanisms: []string{ScramSHA512, ScramSHA256, Plain}, Scram: store, PlainUsers: map[string]string{"broker": "plain-secret"}}
	for _, cc := range []ClientCredentials{
		{ScramSHA512, "broker", "broker-secret"},
		{ScramSHA256, "broker", "broker-secret"},
		{Plain, "broker", "plain-secret"},
	} {
		cerr, srv := serveAgainst(t, cfg, cc)
		if cerr != nil || srv.err != nil || srv.principal != "User:broker" {
			t.Fatalf("%s: client %v, server %q %v", cc.Mechanism, cerr, srv.principal, srv.err)
		}
	}
	for _, c := range []struct {
		cc   ClientCredentials
		want string
	}{
		{ClientCredentials{ScramSHA512, "broker", "wrong"}, "SASL_AUTHENTICATION_FAILED"},
		{ClientCredentials{ScramSHA512, "nobody", "broker-secret"}, "SASL_AUTHENTICATION_FAILED"},
		{ClientCredentials{Plain, "broker", "wrong"}, "SASL_AUTHENTICATION_FAILED"},
	} {
		cerr, srv := serveAgainst(t, cfg, c.cc)
		if cerr == nil || !strings.Contains(cerr.Error(), c.want) || !IsAuthError(srv.err) || srv.principal != "" {
			t.Fatalf("%+v: client %v, server %q %v", c.cc, cerr, srv.principal, srv.err)
		}
		if strings.Contains(srv.err.Error(), c.cc.Password) {
			t.Fatalf("the server's error names the password: %v", srv.err)
		}
	}
	only := &Config{Mechanisms: []string{ScramSHA512}, Scram: store, PlainUsers: map[string]string{"broker": "plain-secret"}}
	cerr, srv := serveAgainst(t, only, ClientCredentials{Plain, "broker", "plain-secret"})
	if cerr == nil || !strings.Contains(cerr.Error(), "UNSUPPORTED_SASL_MECHANISM") || !IsAuthError(srv.err) {
		t.Fatalf("a mechanism not enabled: client %v, server %v", cerr, srv.err)
	}
}

// TestServeRefusesOtherTraffic: bytes that are not a SaslHandshake v1 (a
// controller RPC frame, another Kafka request, a v0 handshake) end Serve
// with ErrNotSASL and nothing written back.
func TestServeRefusesOtherTraffic(t *testing.T) {
	cfg := &Config{Mechanisms: []string{Plain}, PlainUsers: map[string]string{"u": "p"}}
	for name, in := range map[string][]byte{
		"controller rpc": {0xC7, 1, 0, 0, 0, 1, 1},
		"apiversions":    frameOf(18, 3, 1, "x"),
		"handshake v0":   frameOf(17, 0, 1, "x", 0, 5, 'P', 'L', 'A', 'I', 'N'),
		"empty":          nil,
		"short header":   {0, 0, 0, 3, 0, 17, 0},
		"oversized":      {0, 0x10, 0, 0},
	} {
		var out bytes.Buffer
		p, err := Serve(struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(in), &out}, cfg)
		if !errors.Is(err, ErrNotSASL) || p != "" || out.Len() != 0 {
			t.Errorf("%s: %q %v, %d bytes answered", name, p, err, out.Len())
		}
	}
}

// frameOf is a request frame: header v1 (key, version, corr, client id),
// then body.
func frameOf(key, version int16, corr int32, client string, body ...byte) []byte {
	p := []byte{byte(key >> 8), byte(key), byte(version >> 8), byte(version),
		byte(corr >> 24), byte(corr >> 16), byte(corr >> 8), byte(corr), 0, byte(len(client))}
	p = append(p, client...)
	p = append(p, body...)
	n := len(p)
	return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, p...)
}

// No byte stream makes Serve panic or authenticate without the password.
func FuzzServe(f *testing.F) {
	f.Add(frameOf(17, 1, 1, "strata-broker", 0, 5, 'P', 'L', 'A', 'I', 'N'))
	f.Add(append(frameOf(17, 1, 1, "", 0, 5, 'P', 'L', 'A', 'I', 'N'),
		frameOf(36, 1, 2, "", 0, 0, 0, 5, 0, 'u', 0, 'x', 'x')...))
	f.Add([]byte{0xC7, 1, 0, 0, 0, 1, 1})
	cfg := &Config{Mechanisms: []string{Plain, ScramSHA256}, PlainUsers: map[string]string{"u": "p"}, Scram: NewStore()}
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := Serve(struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(in), io.Discard}, cfg)
		if err == nil && !bytes.Contains(in, []byte("u\x00p")) {
			t.Fatalf("authenticated as %q without the password", p)
		}
	})
}
