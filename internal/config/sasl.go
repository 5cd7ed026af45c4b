package config

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratalog/strata/internal/sasl"
)

// SASL listeners (issue 20), with Kafka's keys:
//
//	listeners=SASL_SSL://0.0.0.0:9094
//	sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512            (or listener.name.<l>.sasl.enabled.mechanisms)
//	listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
//	    username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";
//	listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
//	    username="admin" password="admin-secret";
//	sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
//
// PLAIN's users are the PlainLoginModule's user_<name> options; SCRAM's
// credentials are the broker's store (AlterUserScramCredentials, kept in
// the data directory) plus strata.scram.credentials, Kafka's
// `kafka-storage format --add-scram` syntax, which creates a credential
// the store does not have yet. The username and password options are what
// this broker presents to others when the inter-broker listener is SASL.
// OAUTHBEARER (RFC 7628, KIP-255/768): tokens are JWTs. With
//
//	listener.name.<l>.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
//	sasl.oauthbearer.jwks.endpoint.url=file:///etc/strata/jwks.json     (or https://...)
//	sasl.oauthbearer.expected.audience=strata   sasl.oauthbearer.expected.issuer=https://idp
//	sasl.oauthbearer.sub.claim.name=sub         sasl.oauthbearer.scope.claim.name=scope
//	sasl.oauthbearer.clock.skew.seconds=30
//
// a token must be signed by a key of the set (RS*, PS*, ES*), unexpired,
// and carry the subject claim (the principal) and the expected audience
// and issuer when set; the key set is read at start-up. Without the
// callback handler key, OAUTHBEARER takes Kafka's default, the unsecured
// validator (alg none, unsigned tokens: development and tests only; the
// broker logs a warning), with the options of the listener's
// OAuthBearerLoginModule (unsecuredValidatorPrincipalClaimName,
// unsecuredValidatorScopeClaimName, unsecuredValidatorRequiredScope,
// unsecuredValidatorAllowableClockSkewMs). A broker does not authenticate
// to another with OAUTHBEARER (sasl.mechanism.inter.broker.protocol).
// Kafka's other sasl.* keys (Kerberos, login and other callback classes)
// are a start-up error naming the key.

// Protocols with SASL.
const (
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// ScramCredentialsKey is the broker key that bootstraps SCRAM credentials.
const ScramCredentialsKey = "strata.scram.credentials"

// SASL is a SASL listener's settings, resolved.
type SASL struct {
	Mechanisms []string          // sasl.enabled.mechanisms, in order
	PlainUsers map[string]string // user_<name> of the PLAIN login module
	// OAuth validates OAUTHBEARER tokens when it is enabled; its clock
	// (Now) is the caller's to set. Unsecured is Kafka's default
	// validator: the caller should warn.
	OAuth *sasl.OAuth
	// Client is what this broker presents to another broker's listener of
	// this name (set on the inter-broker listener only).
	Client *sasl.ClientCredentials
}

// ScramBootstrap is one credential of strata.scram.credentials.
type ScramBootstrap struct {
	User, Mechanism string
	Credential      sasl.ScramCredential
}

// IsSASL reports whether protocol authenticates with SASL.
func IsSASL(protocol string) bool {
	return protocol == ProtocolSASLPlaintext || protocol == ProtocolSASLSSL
}

// saslMechanismKeys are the per-mechanism key prefixes of
// listener.name.<l>.<mechanism>.sasl.jaas.config.
var saslMechanismKeys = map[string]string{
	"plain":         sasl.Plain,
	"scram-sha-256": sasl.ScramSHA256,
	"scram-sha-512": sasl.ScramSHA512,
	"oauthbearer":   sasl.OAuthBearer,
}

// OAUTHBEARER's keys.
const (
	oauthJWKSKey     = "sasl.oauthbearer.jwks.endpoint.url"
	oauthAudienceKey = "sasl.oauthbearer.expected.audience"
	oauthIssuerKey   = "sasl.oauthbearer.expected.issuer"
	oauthSubKey      = "sasl.oauthbearer.sub.claim.name"
	oauthScopeKey    = "sasl.oauthbearer.scope.claim.name"
	oauthSkewKey     = "sasl.oauthbearer.clock.skew.seconds"
	oauthHandlerSub  = "oauthbearer.sasl.server.callback.handler.class"
)

// oauthValidatorClasses are the names Kafka has given its JWT validator.
var oauthValidatorClasses = []string{
	"org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
	"org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
}

// saslKey records a SASL key; handled reports that key is one.
func (b *Broker) saslKey(key, value string) (handled bool, err error) {
	record := func() (bool, error) {
		if b.sec.sasl == nil {
			b.sec.sasl = map[string]string{}
		}
		b.sec.sasl[key] = value
		return true, nil
	}
	switch key {
	case "sasl.enabled.mechanisms":
		if _, err := sasl.ParseMechanisms(value); err != nil {
			return true, fmt.Errorf("config: %s: %v", key, err)
		}
		return record()
	case oauthJWKSKey, oauthAudienceKey, oauthIssuerKey, oauthSubKey, oauthScopeKey:
		return record()
	case oauthSkewKey:
		if n, err := strconv.Atoi(strings.TrimSpace(value)); err != nil || n < 0 {
			return true, fmt.Errorf("config: %s=%s: want a number of seconds >= 0", key, value)
		}
		return record()
	case "sasl.mechanism.inter.broker.protocol":
		if v := strings.TrimSpace(value); v == sasl.OAuthBearer {
			return true, fmt.Errorf("config: %s=%s: a broker authenticates to another with PLAIN or SCRAM", key, value)
		}
		if !sasl.Supported(strings.TrimSpace(value)) {
			return true, fmt.Errorf("config: %s=%s: not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", key, value)
		}
		return record()
	case ScramCredentialsKey:
		if err := sasl.ParseScramCredentials(value, func(string, string, sasl.ScramCredential) {}); err != nil {
			return true, fmt.Errorf("config: %s: %v", key, err)
		}
		return record()
	case "sasl.jaas.config":
		return true, fmt.Errorf("config: %s: a broker takes its login modules per listener and mechanism: listener.name.<listener>.<mechanism>.sasl.jaas.config", key)
	}
	if strings.HasPrefix(key, "sasl.") {
		return true, fmt.Errorf("config: %s: not supported (Strata serves SASL PLAIN and SCRAM: sasl.enabled.mechanisms, sasl.mechanism.inter.broker.protocol, listener.name.<listener>.<mechanism>.sasl.jaas.config); refusing to start rather than ignore it", key)
	}
	rest, ok := strings.CutPrefix(key, "listener.name.")
	if !ok {
		return false, nil
	}
	_, sub, _ := strings.Cut(rest, ".")
	switch {
	case sub == "sasl.enabled.mechanisms":
		if _, err := sasl.ParseMechanisms(value); err != nil {
			return true, fmt.Errorf("config: %s: %v", key, err)
		}
		return record()
	case sub == oauthHandlerSub:
		if !slices.Contains(oauthValidatorClasses, strings.TrimSpace(value)) {
			return true, fmt.Errorf("config: %s=%s: Strata validates OAUTHBEARER tokens with %s (or, without this key, Kafka's unsecured default)", key, value, oauthValidatorClasses[0])
		}
		return record()
	case strings.HasSuffix(sub, ".sasl.jaas.config"):
		mech := strings.TrimSuffix(sub, ".sasl.jaas.config")
		if _, ok := saslMechanismKeys[mech]; !ok {
			return true, fmt.Errorf("config: %s: mechanism %q is not supported (plain, scram-sha-256, scram-sha-512, oauthbearer)", key, mech)
		}
		if _, err := sasl.ParseJAAS(value); err != nil {
			return true, fmt.Errorf("config: %s: %v", key, err)
		}
		return record()
	case strings.HasPrefix(sub, "sasl.") || strings.Contains(sub, ".sasl."):
		return true, fmt.Errorf("config: %s: not supported per listener (sasl.enabled.mechanisms and <mechanism>.sasl.jaas.config are); refusing to start rather than ignore it", key)
	}
	return false, nil
}

// saslFor resolves the SASL settings of listener name.
func (b *Broker) saslFor(name string) (*SASL, error) {
	lower := strings.ToLower(name)
	key := "listener.name." + lower + ".sasl.enabled.mechanisms"
	v, ok := b.sec.sasl[key]
	if !ok {
		key = "sasl.enabled.mechanisms"
		v, ok = b.sec.sasl[key]
	}
	if !ok {
		return nil, fmt.Errorf("config: listener %s: sasl.enabled.mechanisms is not set (Kafka's default, GSSAPI, is not supported: set PLAIN, SCRAM-SHA-256 and/or SCRAM-SHA-512)", name)
	}
	mechs, err := sasl.ParseMechanisms(v)
	if err != nil {
		return nil, fmt.Errorf("config: %s: %v", key, err)
	}
	out := &SASL{Mechanisms: mechs, PlainUsers: map[string]string{}}
	if slices.Contains(mechs, sasl.OAuthBearer) {
		o, err := b.oauthFor(lower)
		if err != nil {
			return nil, err
		}
		out.OAuth = o
	}
	for _, m := range mechs {
		jkey := "listener.name." + lower + "." + strings.ToLower(m) + ".sasl.jaas.config"
		jv, ok := b.sec.sasl[jkey]
		if !ok {
			if m == sasl.Plain {
				return nil, fmt.Errorf("config: listener %s enables PLAIN: set %s (PlainLoginModule with user_<name>=\"<password>\" options)", name, jkey)
			}
			continue
		}
		j, _ := sasl.ParseJAAS(jv) // checked by saslKey
		want := sasl.ScramLoginModule
		switch m {
		case sasl.Plain:
			want = sasl.PlainLoginModule
			out.PlainUsers = j.PlainUsers()
		case sasl.OAuthBearer:
			want = sasl.OAuthBearerLoginModule
		}
		if j.Module != want {
			return nil, fmt.Errorf("config: %s: login module %s, want %s", jkey, j.Module, want)
		}
		if j.Flag != "required" {
			return nil, fmt.Errorf("config: %s: control flag %s: only required is supported", jkey, j.Flag)
		}
	}
	return out, nil
}

// finishSASL checks the SASL keys against the listeners, and sets the
// inter-broker listener's client credentials when it is SASL.
func (b *Broker) finishSASL() error {
	for key := range b.sec.sasl {
		rest, ok := strings.CutPrefix(key, "listener.name.")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, ".")
		i := slices.IndexFunc(b.Listeners, func(l Listener) bool { return l.Name == strings.ToUpper(name) })
		if i < 0 || b.Listeners[i].SASL == nil {
			return fmt.Errorf("config: %s: %s is not a SASL listener in listeners", key, strings.ToUpper(name))
		}
		if mech, ok := strings.CutSuffix(strings.TrimPrefix(rest, name+"."), ".sasl.jaas.config"); ok {
			if !slices.Contains(b.Listeners[i].SASL.Mechanisms, saslMechanismKeys[mech]) {
				return fmt.Errorf("config: %s: %s is not enabled on listener %s (sasl.enabled.mechanisms)", key, saslMechanismKeys[mech], b.Listeners[i].Name)
			}
		}
	}
	if v, ok := b.sec.sasl[ScramCredentialsKey]; ok {
		b.ScramBootstrap = b.ScramBootstrap[:0]
		if err := sasl.ParseScramCredentials(v, func(u, m string, c sasl.ScramCredential) {
			b.ScramBootstrap = append(b.ScramBootstrap, ScramBootstrap{u, m, c})
		}); err != nil {
			return fmt.Errorf("config: %s: %v", ScramCredentialsKey, err)
		}
	}
	l := b.InterBroker()
	if l == nil || l.SASL == nil {
		return nil
	}
	key := "sasl.mechanism.inter.broker.protocol"
	mech, ok := b.sec.sasl[key]
	if !ok {
		if len(l.SASL.Mechanisms) != 1 {
			return fmt.Errorf("config: %s: the inter-broker listener %s is SASL: name the mechanism brokers use (Kafka's default, GSSAPI, is not supported)", key, l.Name)
		}
		mech = l.SASL.Mechanisms[0]
	}
	mech = strings.TrimSpace(mech)
	if !slices.Contains(l.SASL.Mechanisms, mech) {
		return fmt.Errorf("config: %s=%s: not enabled on the inter-broker listener %s", key, mech, l.Name)
	}
	jkey := "listener.name." + strings.ToLower(l.Name) + "." + strings.ToLower(mech) + ".sasl.jaas.config"
	j, _ := sasl.ParseJAAS(b.sec.sasl[jkey])
	user, pass := j.Options["username"], j.Options["password"]
	if user == "" || pass == "" {
		return fmt.Errorf("config: %s: the inter-broker listener %s authenticates with %s: set its username and password options (what this broker presents to the others)", jkey, l.Name, mech)
	}
	l.SASL.Client = &sasl.ClientCredentials{Mechanism: mech, User: user, Password: pass}
	return nil
}

// oauthFor resolves how listener lower (its lower-case name) validates
// OAUTHBEARER tokens: the JWT validator when its callback handler key
// names it (the key set read now), else Kafka's unsecured default with
// the login module's unsecuredValidator* options.
func (b *Broker) oauthFor(lower string) (*sasl.OAuth, error) {
	o := &sasl.OAuth{SubClaim: b.sec.sasl[oauthSubKey], ScopeClaim: b.sec.sasl[oauthScopeKey], ClockSkew: 30 * time.Second}
	if _, secure := b.sec.sasl["listener.name."+lower+"."+oauthHandlerSub]; !secure {
		o.Unsecured, o.ClockSkew = true, 0
		jv, ok := b.sec.sasl["listener.name."+lower+".oauthbearer.sasl.jaas.config"]
		if !ok {
			return o, nil
		}
		j, _ := sasl.ParseJAAS(jv)
		opt := j.Options
		o.SubClaim, o.ScopeClaim = opt["unsecuredValidatorPrincipalClaimName"], opt["unsecuredValidatorScopeClaimName"]
		o.RequiredScope = strings.Fields(strings.ReplaceAll(opt["unsecuredValidatorRequiredScope"], ",", " "))
		if v := opt["unsecuredValidatorAllowableClockSkewMs"]; v != "" {
			ms, err := strconv.Atoi(v)
			if err != nil || ms < 0 {
				return nil, fmt.Errorf("config: listener %s: unsecuredValidatorAllowableClockSkewMs=%s: want milliseconds >= 0", strings.ToUpper(lower), v)
			}
			o.ClockSkew = time.Duration(ms) * time.Millisecond
		}
		return o, nil
	}
	url := b.sec.sasl[oauthJWKSKey]
	if url == "" {
		return nil, fmt.Errorf("config: listener %s validates OAUTHBEARER tokens: set %s (the JSON Web Key Set's file:// or https:// URL)", strings.ToUpper(lower), oauthJWKSKey)
	}
	data, err := readJWKS(url)
	if err != nil {
		return nil, fmt.Errorf("config: %s=%s: %v", oauthJWKSKey, url, err)
	}
	if o.Keys, err = sasl.ParseJWKS(data); err != nil {
		return nil, fmt.Errorf("config: %s=%s: %v", oauthJWKSKey, url, err)
	}
	for _, a := range strings.Split(b.sec.sasl[oauthAudienceKey], ",") {
		if a = strings.TrimSpace(a); a != "" {
			o.Audience = append(o.Audience, a)
		}
	}
	o.Issuer = strings.TrimSpace(b.sec.sasl[oauthIssuerKey])
	if v, ok := b.sec.sasl[oauthSkewKey]; ok {
		n, _ := strconv.Atoi(strings.TrimSpace(v)) // checked by saslKey
		o.ClockSkew = time.Duration(n) * time.Second
	}
	return o, nil
}

// maxJWKSBytes bounds a key set.
const maxJWKSBytes = 1 << 20

// readJWKS reads a key set from a path, a file:// URL or an http(s)://
// URL (bounded in size and time).
func readJWKS(url string) ([]byte, error) {
	var r io.Reader
	switch {
	case strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://"):
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET: %s", resp.Status)
		}
		r = resp.Body
	default:
		f, err := os.Open(strings.TrimPrefix(url, "file://"))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxJWKSBytes {
		return nil, fmt.Errorf("a key set over %d bytes", maxJWKSBytes)
	}
	return data, nil
}
