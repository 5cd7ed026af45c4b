package sasl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"
)

var oauthNow = time.Unix(1_800_000_000, 0)

func b64(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// unsecuredToken is an alg-none JWT with claims.
func unsecuredToken(claims map[string]any) string {
	return b64(map[string]string{"alg": "none"}) + "." + b64(claims) + "."
}

func claims(sub string, exp time.Time, extra ...any) map[string]any {
	c := map[string]any{"sub": sub, "exp": exp.Unix(), "iat": oauthNow.Add(-time.Minute).Unix()}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

type signer struct {
	kid, alg string
	key      crypto.Signer
}

func (s signer) token(t *testing.T, c map[string]any) string {
	t.Helper()
	signed := b64(map[string]string{"alg": s.alg, "kid": s.kid, "typ": "JWT"}) + "." + b64(c)
	d := sha256.Sum256([]byte(signed))
	var sig []byte
	switch k := s.key.(type) {
	case *rsa.PrivateKey:
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:]); err != nil {
			t.Fatal(err)
		}
	case *ecdsa.PrivateKey:
		r, ss, err := ecdsa.Sign(rand.Reader, k, d[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = append(r.FillBytes(make([]byte, 32)), ss.FillBytes(make([]byte, 32))...)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// jwks renders the signers' public keys as a JSON Web Key Set.
func jwks(ss ...signer) []byte {
	var keys []map[string]string
	enc := func(b *big.Int) string { return base64.RawURLEncoding.EncodeToString(b.Bytes()) }
	for _, s := range ss {
		switch k := s.key.(type) {
		case *rsa.PrivateKey:
			keys = append(keys, map[string]string{"kty": "RSA", "kid": s.kid, "use": "sig", "n": enc(k.N), "e": enc(big.NewInt(int64(k.E)))})
		case *ecdsa.PrivateKey:
			keys = append(keys, map[string]string{"kty": "EC", "kid": s.kid, "crv": "P-256", "x": enc(k.X), "y": enc(k.Y)})
		}
	}
	b, _ := json.Marshal(map[string]any{"keys": keys})
	return b
}

func testSigners(t *testing.T) (signer, signer) {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: "r1", alg: "RS256", key: rk}, signer{kid: "e1", alg: "ES256", key: ek}
}

func TestOAuthUnsecuredValidator(t *testing.T) {
	o := &OAuth{Unsecured: true, RequiredScope: []string{"kafka"}, Now: func() time.Time { return oauthNow }}
	exp := oauthNow.Add(time.Hour)
	for _, c := range []struct {
		name, token, err string
	}{
		{"valid", unsecuredToken(claims("alice", exp, "scope", "kafka other")), ""},
		{"scope as an array", unsecuredToken(claims("alice", exp, "scope", []string{"kafka"})), ""},
		{"expired", unsecuredToken(claims("alice", oauthNow.Add(-time.Second), "scope", "kafka")), "expired"},
		{"no exp", unsecuredToken(map[string]any{"sub": "alice", "scope": "kafka"}), "no exp"},
		{"no sub", unsecuredToken(claims("", exp, "scope", "kafka")), "no sub claim"},
		{"missing scope", unsecuredToken(claims("alice", exp, "scope", "other")), `lacks "kafka"`},
		{"signed alg", b64(map[string]string{"alg": "RS256"}) + "." + b64(claims("alice", exp, "scope", "kafka")) + ".", "only alg none"},
		{"a signature", unsecuredToken(claims("alice", exp, "scope", "kafka")) + "c2ln", "no signature"},
		{"not a JWT", "abc", "three"},
		{"bad base64", "!!.!!.", "header"},
	} {
		sub, _, err := o.Validate(c.token)
		switch {
		case c.err == "" && (err != nil || sub != "alice"):
			t.Errorf("%s: sub %q, err %v", c.name, sub, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v, want %q", c.name, err, c.err)
		}
	}
}

func TestOAuthSignedValidator(t *testing.T) {
	rs, es := testSigners(t)
	keys, err := ParseJWKS(jwks(rs, es))
	if err != nil {
		t.Fatal(err)
	}
	o := &OAuth{Keys: keys, Audience: []string{"strata"}, Issuer: "https://idp", ClockSkew: 30 * time.Second,
		Now: func() time.Time { return oauthNow }}
	exp := oauthNow.Add(time.Hour)
	good := claims("bob", exp, "aud", "strata", "iss", "https://idp")
	for _, s := range []signer{rs, es} {
		if sub, _, err := o.Validate(s.token(t, good)); err != nil || sub != "bob" {
			t.Errorf("%s: sub %q, err %v", s.alg, sub, err)
		}
	}
	other, _ := testSigners(t)
	other.kid = "r1" // same kid, another key: the signature fails
	tampered := rs.token(t, good)
	parts := strings.Split(tampered, ".")
	parts[1] = b64(claims("mallory", exp, "aud", "strata", "iss", "https://idp"))
	for _, c := range []struct {
		name, token, err string
	}{
		{"another key", other.token(t, good), "does not verify"},
		{"changed claims", strings.Join(parts, "."), "does not verify"},
		{"unknown kid", signer{kid: "zz", alg: "RS256", key: rs.key}.token(t, good), `key with id "zz"`},
		{"unsigned", unsecuredToken(good), "not signed"},
		{"audience", rs.token(t, claims("bob", exp, "aud", []string{"other"}, "iss", "https://idp")), "audience"},
		{"issuer", rs.token(t, claims("bob", exp, "aud", "strata", "iss", "https://evil")), "issuer"},
		{"expired past the skew", rs.token(t, claims("bob", oauthNow.Add(-31*time.Second), "aud", "strata", "iss", "https://idp")), "expired"},
		{"not yet valid", rs.token(t, claims("bob", exp, "aud", "strata", "iss", "https://idp", "nbf", oauthNow.Add(time.Minute).Unix())), "nbf"},
		{"wrong alg for the key", signer{kid: "e1", alg: "RS256", key: es.key}.token(t, good), "does not fit the EC key"},
	} {
		if _, _, err := o.Validate(c.token); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.err)
		}
	}
	// Within the skew an expired token still passes.
	if _, _, err := o.Validate(rs.token(t, claims("bob", oauthNow.Add(-10*time.Second), "aud", "strata", "iss", "https://idp"))); err != nil {
		t.Errorf("expired 10 s ago with a 30 s skew: %v", err)
	}
}

func TestParseJWKSRefusesBadSets(t *testing.T) {
	for _, in := range []string{`{}`, `not json`, `{"keys":[{"kty":"RSA","kid":"a","n":"","e":"AQAB"}]}`,
		`{"keys":[{"kty":"EC","kid":"a","crv":"P-256","x":"AQ","y":"AQ"}]}`, `{"keys":[{"kty":"oct","kid":"a","k":"AQ"}]}`} {
		if _, err := ParseJWKS([]byte(in)); err == nil {
			t.Errorf("ParseJWKS(%s) accepted it", in)
		}
	}
}

func oauthInitial(authz, token string) []byte {
	h := "n,"
	if authz != "" {
		h += "a=" + authz
	}
	return []byte(h + ",\x01auth=Bearer " + token + "\x01\x01")
}

func TestOAuthExchange(t *testing.T) {
	c := &Config{Mechanisms: []string{OAuthBearer}, OAuth: &OAuth{Unsecured: true, Now: func() time.Time { return oauthNow }}}
	good := unsecuredToken(claims("carol", oauthNow.Add(time.Hour)))
	ex, err := c.Start(OAuthBearer)
	if err != nil {
		t.Fatal(err)
	}
	resp, done, err := ex.Step(oauthInitial("", good))
	if err != nil || !done || len(resp) != 0 || ex.Principal() != "User:carol" {
		t.Fatalf("good token: resp %q done %v err %v principal %q", resp, done, err, ex.Principal())
	}
	// A bad token gets RFC 7628's error challenge, then fails with the
	// reason once the client acknowledges it.
	ex, _ = c.Start(OAuthBearer)
	resp, done, err = ex.Step(oauthInitial("", unsecuredToken(claims("carol", oauthNow.Add(-time.Hour)))))
	if err != nil || done || !strings.Contains(string(resp), `"status":"invalid_token"`) {
		t.Fatalf("expired token: resp %q done %v err %v", resp, done, err)
	}
	if _, _, err = ex.Step([]byte{0x01}); !IsAuthError(err) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("after the challenge: %v", err)
	}
	for name, tok := range map[string][]byte{
		"authz differs":    oauthInitial("dave", good),
		"no bearer":        []byte("n,,\x01auth=Basic abc\x01\x01"),
		"channel binding":  []byte("p=tls-unique,,\x01auth=Bearer " + good + "\x01\x01"),
		"unterminated":     []byte("n,,\x01auth=Bearer " + good),
		"no separator":     []byte("n,,"),
		"malformed authz":  []byte("n,b=x,\x01auth=Bearer " + good + "\x01\x01"),
		"malformed kvpair": []byte("n,,\x01novalue\x01\x01"),
	} {
		ex, _ := c.Start(OAuthBearer)
		if _, done, err := ex.Step(tok); !IsAuthError(err) || done {
			t.Errorf("%s: done %v err %v", name, done, err)
		}
	}
	if _, _, err := (&OAuth{Unsecured: true}).Validate(good); err == nil {
		t.Error("a validator without a clock accepted a token")
	}
}
