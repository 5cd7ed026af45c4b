package sasl

import (
	"bytes"
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"time"
)

// OAuthBearer is the OAUTHBEARER mechanism (RFC 7628, KIP-255).
const OAuthBearer = "OAUTHBEARER"

// OAuthBearerLoginModule is the JAAS login module of OAUTHBEARER.
const OAuthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

// OAuth is how a listener validates OAUTHBEARER tokens: Kafka's
// OAuthBearerValidatorCallbackHandler (a JWT signed by one of Keys, with
// exp, the subject claim and, when set, the expected audience and issuer)
// or, with Unsecured, Kafka's default OAuthBearerUnsecuredValidatorCallbackHandler
// (an unsigned JWT, alg "none": for tests and development only, as Kafka
// says of it).
type OAuth struct {
	Unsecured bool
	// Keys are the verification keys by key id (a JWKS,
	// sasl.oauthbearer.jwks.endpoint.url). A token whose header names no
	// kid is checked against the only key when there is one.
	Keys map[string]crypto.PublicKey
	// Audience (sasl.oauthbearer.expected.audience): when set, the
	// token's aud must name one of them. Issuer
	// (sasl.oauthbearer.expected.issuer): when set, iss must equal it.
	Audience []string
	Issuer   string
	// SubClaim names the principal's claim (sasl.oauthbearer.sub.claim.name,
	// unsecuredValidatorPrincipalClaimName; default "sub"); ScopeClaim the
	// scope's (default "scope").
	SubClaim, ScopeClaim string
	// RequiredScope (unsecuredValidatorRequiredScope) must all be in the
	// token's scope.
	RequiredScope []string
	// ClockSkew is allowed on exp, nbf and iat
	// (sasl.oauthbearer.clock.skew.seconds, default 30 s;
	// unsecuredValidatorAllowableClockSkewMs, default 0).
	ClockSkew time.Duration
	// Now is the clock; required.
	Now func() time.Time
}

// oauthServer is Kafka's OAuthBearerSaslServer: the client's first
// message carries the token; a token that fails validation is answered
// with RFC 7628's error challenge and the exchange then fails with the
// reason once the client acknowledges it (a single %x01).
type oauthServer struct {
	cfg       *OAuth
	principal string
	expiry    time.Time // the token's exp, once done
	failed    string    // the validation failure already sent as a challenge
	done      bool
}

func (s *oauthServer) Step(token []byte) ([]byte, bool, error) {
	switch {
	case s.done:
		return nil, false, &AuthError{Msg: "Authentication failed: OAUTHBEARER exchange already complete"}
	case s.failed != "":
		s.done = true
		if !bytes.Equal(token, []byte{0x01}) {
			return nil, false, &AuthError{Msg: "Authentication failed: the client did not acknowledge the error challenge"}
		}
		return nil, false, &AuthError{Msg: s.failed}
	}
	authz, bearer, err := parseOAuthInitial(token)
	if err != nil {
		s.done = true
		return nil, false, &AuthError{Msg: "Authentication failed: " + err.Error()}
	}
	if s.cfg == nil {
		s.done = true
		return nil, false, &AuthError{Msg: "Authentication failed: OAUTHBEARER has no token validation configured"}
	}
	sub, scope, exp, err := s.cfg.validate(bearer)
	if err != nil {
		s.failed = "Authentication failed: " + err.Error()
		challenge, _ := json.Marshal(map[string]string{"status": "invalid_token", "scope": strings.Join(scope, " ")})
		return challenge, false, nil
	}
	if authz != "" && authz != sub {
		s.done = true
		return nil, false, &AuthError{Msg: "Authentication failed: Authorization ID (" + authz + ") is not the token's principal"}
	}
	s.done = true
	s.principal, s.expiry = "User:"+sub, exp
	return []byte{}, true, nil
}

func (s *oauthServer) Principal() string { return s.principal }

// Expiry is when the authenticated token expires (its exp claim): a
// session that ends (connections.max.reauth.ms) ends no later, as in
// Kafka.
func (s *oauthServer) Expiry() time.Time { return s.expiry }

// parseOAuthInitial parses RFC 7628's initial client response:
// gs2-header %x01 *(kvpair %x01) %x01, one pair being auth=Bearer <token>.
func parseOAuthInitial(b []byte) (authz, token string, err error) {
	gs2, rest, ok := bytes.Cut(b, []byte{0x01})
	if !ok {
		return "", "", errors.New("invalid OAUTHBEARER initial response: no key-value separator")
	}
	// gs2-header: "n," or "y," then [ "a=" authzid ] ","
	h := string(gs2)
	if !strings.HasPrefix(h, "n,") && !strings.HasPrefix(h, "y,") {
		return "", "", errors.New("invalid OAUTHBEARER initial response: channel binding is not supported")
	}
	a, ok := strings.CutSuffix(h[2:], ",")
	if !ok || strings.Contains(a, ",") {
		return "", "", errors.New("invalid OAUTHBEARER initial response: malformed GS2 header")
	}
	if a != "" {
		var has bool
		if authz, has = strings.CutPrefix(a, "a="); !has || authz == "" {
			return "", "", errors.New("invalid OAUTHBEARER initial response: malformed authorization id")
		}
	}
	// rest: *(key=value %x01) %x01
	body, ok := bytes.CutSuffix(rest, []byte{0x01})
	if !ok || (len(body) > 0 && body[len(body)-1] != 0x01) {
		return "", "", errors.New("invalid OAUTHBEARER initial response: not terminated")
	}
	if len(body) > 0 {
		body = body[:len(body)-1]
	}
	for _, kv := range bytes.Split(body, []byte{0x01}) {
		k, v, ok := bytes.Cut(kv, []byte{'='})
		if !ok || len(k) == 0 {
			return "", "", errors.New("invalid OAUTHBEARER initial response: malformed key-value pair")
		}
		if string(k) == "auth" {
			t, ok := strings.CutPrefix(string(v), "Bearer ")
			if !ok || strings.TrimSpace(t) == "" {
				return "", "", errors.New("invalid OAUTHBEARER initial response: auth is not a bearer token")
			}
			token = strings.TrimSpace(t)
		}
	}
	if token == "" {
		return "", "", errors.New("invalid OAUTHBEARER initial response: no auth=Bearer token")
	}
	return authz, token, nil
}

// Validate checks a JWT as the configured validator does and returns its
// principal (the subject claim) and scope. A failure's error says why
// (never the token).
func (o *OAuth) Validate(jwt string) (sub string, scope []string, err error) {
	sub, scope, _, err = o.validate(jwt)
	return sub, scope, err
}

// validate is Validate that also returns the token's expiry.
func (o *OAuth) validate(jwt string) (sub string, scope []string, expiry time.Time, err error) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return "", nil, time.Time{}, errors.New("the token is not a compact JWS (three dot-separated parts)")
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodeSegment(parts[0], &hdr); err != nil {
		return "", nil, time.Time{}, fmt.Errorf("the token's header: %w", err)
	}
	var claims map[string]any
	if err := decodeSegment(parts[1], &claims); err != nil {
		return "", nil, time.Time{}, fmt.Errorf("the token's claims: %w", err)
	}
	if o.Unsecured {
		if hdr.Alg != "none" {
			return "", nil, time.Time{}, fmt.Errorf("the unsecured validator takes only alg none, not %q", hdr.Alg)
		}
		if parts[2] != "" {
			return "", nil, time.Time{}, errors.New("an unsecured token carries no signature")
		}
	} else if err := o.verify(hdr.Alg, hdr.Kid, parts[0]+"."+parts[1], parts[2]); err != nil {
		return "", nil, time.Time{}, err
	}
	if o.Now == nil {
		return "", nil, time.Time{}, errors.New("the validator has no clock")
	}
	t := o.Now()
	exp, ok := numericClaim(claims, "exp")
	if !ok {
		return "", nil, time.Time{}, errors.New("the token has no exp claim")
	}
	if !t.Before(exp.Add(o.ClockSkew)) {
		return "", nil, time.Time{}, errors.New("the token expired")
	}
	if nbf, ok := numericClaim(claims, "nbf"); ok && t.Add(o.ClockSkew).Before(nbf) {
		return "", nil, time.Time{}, errors.New("the token is not valid yet (nbf)")
	}
	if iat, ok := numericClaim(claims, "iat"); ok && t.Add(o.ClockSkew).Before(iat) {
		return "", nil, time.Time{}, errors.New("the token was issued in the future (iat)")
	}
	subClaim := cmp.Or(o.SubClaim, "sub")
	sub, _ = claims[subClaim].(string)
	if strings.TrimSpace(sub) == "" {
		return "", nil, time.Time{}, fmt.Errorf("the token has no %s claim (the principal)", subClaim)
	}
	scope = stringsClaim(claims[cmp.Or(o.ScopeClaim, "scope")], true)
	for _, s := range o.RequiredScope {
		if !slices.Contains(scope, s) {
			return "", scope, time.Time{}, fmt.Errorf("the token's scope lacks %q", s)
		}
	}
	if len(o.Audience) > 0 {
		aud := stringsClaim(claims["aud"], false)
		if !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(o.Audience, a) }) {
			return "", scope, time.Time{}, errors.New("the token's audience is not an expected one")
		}
	}
	if o.Issuer != "" {
		if iss, _ := claims["iss"].(string); iss != o.Issuer {
			return "", scope, time.Time{}, errors.New("the token's issuer is not the expected one")
		}
	}
	return sub, scope, exp, nil
}

// verify checks a JWS signature (RS*, PS*, ES* at 256/384/512).
func (o *OAuth) verify(alg, kid, signed, sig64 string) error {
	if alg == "" || alg == "none" {
		return errors.New("the token is not signed")
	}
	key, ok := o.Keys[kid]
	if !ok && kid == "" && len(o.Keys) == 1 {
		for _, k := range o.Keys {
			key, ok = k, true
		}
	}
	if !ok {
		return fmt.Errorf("no verification key with id %q", kid)
	}
	sig, err := base64.RawURLEncoding.DecodeString(sig64)
	if err != nil {
		return errors.New("the token's signature is not base64url")
	}
	var h crypto.Hash
	switch alg[2:] {
	case "256":
		h = crypto.SHA256
	case "384":
		h = crypto.SHA384
	case "512":
		h = crypto.SHA512
	default:
		return fmt.Errorf("signature algorithm %q is not supported", alg)
	}
	digest := hashOf(h, []byte(signed))
	switch k := key.(type) {
	case *rsa.PublicKey:
		switch alg[:2] {
		case "RS":
			err = rsa.VerifyPKCS1v15(k, h, digest, sig)
		case "PS":
			err = rsa.VerifyPSS(k, h, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		default:
			err = fmt.Errorf("algorithm %q does not fit an RSA key", alg)
		}
	case *ecdsa.PublicKey:
		n := (k.Curve.Params().BitSize + 7) / 8
		if alg[:2] != "ES" || len(sig) != 2*n {
			return fmt.Errorf("algorithm %q or its signature does not fit the EC key", alg)
		}
		r, s := new(big.Int).SetBytes(sig[:n]), new(big.Int).SetBytes(sig[n:])
		if !ecdsa.Verify(k, digest, r, s) {
			err = errors.New("bad signature")
		}
	default:
		err = errors.New("unsupported key type")
	}
	if err != nil {
		return errors.New("the token's signature does not verify")
	}
	return nil
}

func hashOf(h crypto.Hash, b []byte) []byte {
	switch h {
	case crypto.SHA384:
		d := sha512.Sum384(b)
		return d[:]
	case crypto.SHA512:
		d := sha512.Sum512(b)
		return d[:]
	}
	d := sha256.Sum256(b)
	return d[:]
}

func decodeSegment(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return errors.New("not base64url")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errors.New("not a JSON object")
	}
	return nil
}

// numericClaim reads a NumericDate claim (seconds since the epoch).
func numericClaim(c map[string]any, name string) (time.Time, bool) {
	f, ok := c[name].(float64)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

// stringsClaim reads a claim that is a string or an array of strings;
// split: a string is space-separated (scope).
func stringsClaim(v any, split bool) []string {
	switch x := v.(type) {
	case string:
		if split {
			return strings.Fields(x)
		}
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// ParseJWKS parses a JSON Web Key Set's RSA and EC (P-256/384/521)
// public keys by key id.
func ParseJWKS(data []byte) (map[string]crypto.PublicKey, error) {
	var set struct {
		Keys []struct {
			Kty, Kid, Use, Crv string
			N, E, X, Y         string
		} `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("a JSON Web Key Set: %w", err)
	}
	out := map[string]crypto.PublicKey{}
	b := func(s string) (*big.Int, error) {
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
		if err != nil || len(raw) == 0 {
			return nil, errors.New("a key parameter is not base64url")
		}
		return new(big.Int).SetBytes(raw), nil
	}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Kty {
		case "RSA":
			n, err := b(k.N)
			if err != nil {
				return nil, fmt.Errorf("key %q: %w", k.Kid, err)
			}
			e, err := b(k.E)
			if err != nil || !e.IsInt64() || e.Int64() < 3 || e.Int64() > math.MaxInt32 {
				return nil, fmt.Errorf("key %q: bad exponent", k.Kid)
			}
			out[k.Kid] = &rsa.PublicKey{N: n, E: int(e.Int64())}
		case "EC":
			var c elliptic.Curve
			switch k.Crv {
			case "P-256":
				c = elliptic.P256()
			case "P-384":
				c = elliptic.P384()
			case "P-521":
				c = elliptic.P521()
			default:
				continue
			}
			x, err := b(k.X)
			if err != nil {
				return nil, fmt.Errorf("key %q: %w", k.Kid, err)
			}
			y, err := b(k.Y)
			if err != nil {
				return nil, fmt.Errorf("key %q: %w", k.Kid, err)
			}
			pk := &ecdsa.PublicKey{Curve: c, X: x, Y: y}
			if !c.IsOnCurve(x, y) {
				return nil, fmt.Errorf("key %q: the point is not on %s", k.Kid, k.Crv)
			}
			out[k.Kid] = pk
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the key set holds no RSA or EC signing key")
	}
	return out, nil
}
