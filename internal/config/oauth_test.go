package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A JSON Web Key Set with one EC P-256 key ("k1").
const testJWKS = `{"keys":[{"kty":"EC","kid":"k1","use":"sig","crv":"P-256",
 "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`

// OAUTHBEARER's keys: Kafka's unsecured default with the login module's
// options, the JWT validator with a key set read from a file, and the
// start-up errors naming the key.
func TestOAuthBearerListeners(t *testing.T) {
	base := map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b" user_a="b";`,
		"sasl.mechanism.inter.broker.protocol":                `PLAIN`}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	b, err := finish(with("listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
		`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorPrincipalClaimName="user" unsecuredValidatorRequiredScope="kafka,admin" unsecuredValidatorAllowableClockSkewMs="1500";`))
	if err != nil {
		t.Fatal(err)
	}
	o := b.Listeners[0].SASL.OAuth
	if o == nil || !o.Unsecured || o.SubClaim != "user" || strings.Join(o.RequiredScope, " ") != "kafka admin" || o.ClockSkew != 1500*time.Millisecond {
		t.Fatalf("unsecured: %+v", o)
	}

	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, []byte(testJWKS), 0o600); err != nil {
		t.Fatal(err)
	}
	const handler = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
	const validator = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
	b, err = finish(with(handler, validator, "sasl.oauthbearer.jwks.endpoint.url", "file://"+jwks,
		"sasl.oauthbearer.expected.audience", "strata, other", "sasl.oauthbearer.expected.issuer", "https://idp",
		"sasl.oauthbearer.clock.skew.seconds", "5"))
	if err != nil {
		t.Fatal(err)
	}
	o = b.Listeners[0].SASL.OAuth
	if o == nil || o.Unsecured || o.Keys["k1"] == nil || strings.Join(o.Audience, ",") != "strata,other" || o.Issuer != "https://idp" || o.ClockSkew != 5*time.Second {
		t.Fatalf("secured: %+v", o)
	}

	for _, c := range []struct {
		props map[string]string
		want  string
	}{
		{with(handler, validator), "sasl.oauthbearer.jwks.endpoint.url"},
		{with(handler, validator, "sasl.oauthbearer.jwks.endpoint.url", filepath.Join(t.TempDir(), "missing.json")), "sasl.oauthbearer.jwks.endpoint.url"},
		{with(handler, "com.example.MyHandler"), handler},
		{with("sasl.oauthbearer.clock.skew.seconds", "-1"), "sasl.oauthbearer.clock.skew.seconds"},
		{with("sasl.mechanism.inter.broker.protocol", "OAUTHBEARER"), "sasl.mechanism.inter.broker.protocol"},
		{with("listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required;`), "OAuthBearerLoginModule"},
		{with("sasl.oauthbearer.token.endpoint.url", "https://idp/token"), "sasl.oauthbearer.token.endpoint.url"},
	} {
		if _, err := finish(c.props); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want one naming %s", c.props, err, c.want)
		}
	}
}
