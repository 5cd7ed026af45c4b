package config

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratalog/strata/internal/tlstest"
)

// WithDynamic applies dynamic configs over a finished configuration
// without changing it: they win over the file's values, are checked as the
// file's are, and rebuild the listeners in an array of their own.
func TestWithDynamic(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")
	b, err := finish(map[string]string{"listeners": "SSL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092", "ssl.keystore.location": srv.Path,
		"max.connections": "100", "log.retention.hours": "5"})
	if err != nil {
		t.Fatal(err)
	}
	live := b.Listeners[0].SSL
	next, err := b.WithDynamic(map[string]string{"max.connections": "7", "log.retention.ms": "1000",
		"listener.name.plaintext.max.connections": "3", "max.connections.per.ip.overrides": "127.0.0.2:1"})
	if err != nil {
		t.Fatal(err)
	}
	if next.MaxConnections != 7 || next.TopicDefaults["retention.ms"] != "1000" || next.Listeners[1].MaxConnections != 3 || next.MaxConnectionsPerIPOvr["127.0.0.2"] != 1 {
		t.Fatalf("dynamic values not applied: %d %v %d %v", next.MaxConnections, next.TopicDefaults, next.Listeners[1].MaxConnections, next.MaxConnectionsPerIPOvr)
	}
	if b.MaxConnections != 100 || b.TopicDefaults["retention.ms"] != "18000000" || b.Listeners[0].SSL != live || b.Listeners[1].MaxConnections != 2147483647 || len(b.MaxConnectionsPerIPOvr) != 0 {
		t.Fatalf("the original changed: %d %v %v", b.MaxConnections, b.TopicDefaults, b.Listeners)
	}
	for dyn, want := range map[string]string{
		"max.connections=-1":                                   "max.connections",
		"listener.name.nosuch.max.connections=1":               "nosuch",
		"listener.name.plaintext.ssl.keystore.location=/x.pem": "PLAINTEXT",
	} {
		k, v, _ := strings.Cut(dyn, "=")
		if _, err := b.WithDynamic(map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", dyn, err, want)
		}
	}
}

// SetStores switches a listener's keystore at runtime: the next handshake
// serves the new certificate; stores that do not load are refused and the
// old ones stay.
func TestSetStores(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	first := ca.Server(t, dir, "first")
	second := ca.Server(t, dir, "second")
	b, err := finish(map[string]string{"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.location": first.Path})
	if err != nil {
		t.Fatal(err)
	}
	ssl := b.Listeners[0].SSL
	cfg := ssl.ServerTLS(nil)
	leaf := func() string {
		c, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		x, _ := x509.ParseCertificate(c.Certificates[0].Certificate[0])
		return x.Subject.CommonName
	}
	if got := leaf(); got != "first" {
		t.Fatalf("serving %s", got)
	}
	if err := ssl.SetStores(ca.Path, ""); err == nil || !strings.Contains(err.Error(), "ssl.keystore.location") {
		t.Fatalf("a keystore without a key: %v", err)
	}
	if err := ssl.SetStores(dir+"/missing.pem", ""); err == nil {
		t.Fatal("a missing keystore was accepted")
	}
	if got := leaf(); got != "first" {
		t.Fatalf("after refused stores: serving %s", got)
	}
	if err := ssl.SetStores(second.Path, ca.Path); err != nil {
		t.Fatal(err)
	}
	if got := leaf(); got != "second" {
		t.Fatalf("after SetStores: serving %s", got)
	}
	if ks, ts := ssl.Locations(); ks != second.Path || ts != ca.Path {
		t.Fatalf("Locations = %s %s", ks, ts)
	}
}

// WithDynamic does not resolve the SASL settings again: a listener's
// OAUTHBEARER key set, read from its endpoint at start-up, is not fetched
// again (here the file is gone and the rebuild still succeeds, with the
// same settings).
func TestWithDynamicKeepsSASL(t *testing.T) {
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, []byte(testJWKS), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := finish(map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config":                         `org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b" user_a="b";`,
		"sasl.mechanism.inter.broker.protocol":                                        `PLAIN`,
		"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
		"sasl.oauthbearer.jwks.endpoint.url":                                          "file://" + jwks})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(jwks); err != nil {
		t.Fatal(err)
	}
	next, err := b.WithDynamic(map[string]string{"max.connections": "9"})
	if err != nil {
		t.Fatalf("WithDynamic fetched the key set again: %v", err)
	}
	if next.Listeners[0].SASL != b.Listeners[0].SASL || next.MaxConnections != 9 {
		t.Fatalf("SASL %p, want %p; max.connections %d", next.Listeners[0].SASL, b.Listeners[0].SASL, next.MaxConnections)
	}
}
