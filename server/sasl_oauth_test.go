package server

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

func jwtPart(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// oauthListener serves a SASL_PLAINTEXT listener with OAUTHBEARER
// validated by o (its clock set here) on a fresh broker.
func oauthListener(t *testing.T, o *sasl.OAuth) (string, *Server) {
	t.Helper()
	_, s, _ := startBroker(t, func(*Config, *engine.Options) {})
	o.Now = time.Now
	l := Listener{Name: "SASL", SASL: &sasl.Config{Mechanisms: []string{sasl.OAuthBearer}, OAuth: o}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(ln, l) }()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String(), s
}

// franz-go's OAUTHBEARER mechanism with an unsecured token (Kafka's
// default validator) and with an ES256 token checked against a key set:
// each authenticates as the token's subject and produces and consumes; an
// expired or badly signed token fails with SASL_AUTHENTICATION_FAILED and
// the reason.
func TestSaslOAuthBearerClients(t *testing.T) {
	exp := time.Now().Add(time.Hour).Unix()
	t.Run("unsecured", func(t *testing.T) {
		addr, s := oauthListener(t, &sasl.OAuth{Unsecured: true})
		tok := jwtPart(map[string]string{"alg": "none"}) + "." + jwtPart(map[string]any{"sub": "erin", "exp": exp}) + "."
		produceConsume(t, addr, "oauth-unsecured", kgo.SASL(oauth.Auth{Token: tok}.AsMechanism()))
		waitLog(t, s, "mechanism=OAUTHBEARER principal=User:erin")

		old := jwtPart(map[string]string{"alg": "none"}) + "." + jwtPart(map[string]any{"sub": "erin", "exp": time.Now().Add(-time.Hour).Unix()}) + "."
		cl := newClient(t, addr, kgo.SASL(oauth.Auth{Token: old}.AsMechanism()), kgo.RequestRetries(0))
		_, err := cl.Request(testCtx(t), kmsg.NewPtrMetadataRequest())
		if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("an expired token: %v, want SASL_AUTHENTICATION_FAILED saying it expired", err)
		}
	})
	t.Run("signed", func(t *testing.T) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		addr, s := oauthListener(t, &sasl.OAuth{Keys: map[string]crypto.PublicKey{"k1": &key.PublicKey},
			Audience: []string{"strata"}, ClockSkew: 30 * time.Second})
		sign := func(k *ecdsa.PrivateKey, claims map[string]any) string {
			signed := jwtPart(map[string]string{"alg": "ES256", "kid": "k1"}) + "." + jwtPart(claims)
			d := sha256.Sum256([]byte(signed))
			r, ss, err := ecdsa.Sign(rand.Reader, k, d[:])
			if err != nil {
				t.Fatal(err)
			}
			return signed + "." + base64.RawURLEncoding.EncodeToString(append(r.FillBytes(make([]byte, 32)), ss.FillBytes(make([]byte, 32))...))
		}
		tok := sign(key, map[string]any{"sub": "frank", "exp": exp, "aud": "strata"})
		produceConsume(t, addr, "oauth-signed", kgo.SASL(oauth.Auth{Token: tok}.AsMechanism()))
		waitLog(t, s, "mechanism=OAUTHBEARER principal=User:frank")

		other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		for name, bad := range map[string]string{
			"another key": sign(other, map[string]any{"sub": "frank", "exp": exp, "aud": "strata"}),
			"audience":    sign(key, map[string]any{"sub": "frank", "exp": exp, "aud": "elsewhere"}),
		} {
			cl := newClient(t, addr, kgo.SASL(oauth.Auth{Token: bad}.AsMechanism()), kgo.RequestRetries(0))
			if _, err := cl.Request(testCtx(t), kmsg.NewPtrMetadataRequest()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
			}
		}
	})
}
