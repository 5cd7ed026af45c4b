package config

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratalog/strata/internal/configkeys"
	"github.com/stratalog/strata/internal/tlstest"
)

// finish applies props to the defaults and finishes them.
func finish(props map[string]string) (Broker, error) {
	b := Defaults()
	if err := b.Apply(props); err != nil {
		return b, err
	}
	return b, b.Finish()
}

// TestSecurityConfigErrorsNameTheKey: what Strata cannot honour (SASL,
// ACLs, JKS stores, old TLS versions, Java provider settings) and what
// cannot work (no key, a missing file, an unknown listener) is a start-up
// error naming the key or the listener, never a plaintext broker.
func TestSecurityConfigErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")
	ssl := func(kv ...string) map[string]string {
		m := map[string]string{"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.location": srv.Path}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	for _, c := range []struct {
		props map[string]string
		key   string // what the error must name
	}{
		{map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094"}, "SASL_SSL"},
		{map[string]string{"listeners": "CLIENT://127.0.0.1:9092", "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT"}, "CLIENT"},
		{map[string]string{"listeners": "CLIENT://127.0.0.1:9092"}, "listener.security.protocol.map"},
		{map[string]string{"listeners": "CLIENT://127.0.0.1:9092", "listener.security.protocol.map": "CLIENT:TLS"}, "listener.security.protocol.map"},
		{map[string]string{"listener.security.protocol.map": "bogus"}, "listener.security.protocol.map"},
		{map[string]string{"advertised.listeners": "SSL://h:9093"}, "advertised.listeners"},
		{map[string]string{"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"},
		{map[string]string{"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name"},
		{map[string]string{"sasl.jaas.config": "x"}, "sasl.jaas.config"},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:9092"}, "sasl.enabled.mechanisms"},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "PLAIN"}, "listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;"}, "listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\""}, "listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "SCRAM-SHA-256",
			"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;"}, "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";"}, "sasl.mechanism.inter.broker.protocol"},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";"}, "username and password"},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username=a password=b user_a=\"b\";",
			"listener.name.sasl_plaintext.sasl.login.class":       "x"}, "listener.name.sasl_plaintext.sasl.login.class"},
		{map[string]string{"strata.scram.credentials": "SCRAM-SHA-256=[name=a,password=b,iterations=10]"}, "strata.scram.credentials"},
		{map[string]string{"listeners": "SASL_SSL://127.0.0.1:9094", "sasl.enabled.mechanisms": "SCRAM-SHA-256"}, "ssl.keystore"},
		{map[string]string{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "authorizer.class.name"},
		{map[string]string{"security.protocol": "SSL"}, "security.protocol"},
		{map[string]string{"listener.name.client.plain.sasl.jaas.config": "x"}, "listener.name.client.plain.sasl.jaas.config"},
		{ssl("ssl.keystore.location", ""), "ssl.keystore.location"},
		{ssl("ssl.keystore.location", filepath.Join(dir, "missing.pem")), "ssl.keystore.location"},
		{ssl("ssl.keystore.location", ca.Path), "ssl.keystore.location"}, // no key in it
		{ssl("ssl.keystore.type", "JKS"), "ssl.keystore.type"},
		{ssl("ssl.truststore.type", "PKCS12"), "ssl.truststore.type"},
		{ssl("ssl.keystore.password", "changeit"), "ssl.keystore.password"},
		{ssl("ssl.truststore.location", ca.Path, "ssl.truststore.password", "changeit"), "ssl.truststore.password"},
		{ssl("ssl.keystore.key", string(srv.KeyPEM)), "ssl.keystore.location"}, // both ways at once
		{ssl("ssl.keystore.location", "", "ssl.keystore.key", string(srv.KeyPEM)), "ssl.keystore.key"},
		{ssl("ssl.enabled.protocols", "TLSv1.1,TLSv1.2"), "ssl.enabled.protocols"},
		{ssl("ssl.enabled.protocols", "TLSv1.3", "ssl.protocol", "TLSv1.2"), "ssl.protocol"},
		{ssl("ssl.protocol", "SSLv3"), "ssl.protocol"},
		{ssl("ssl.client.auth", "always"), "ssl.client.auth"},
		{ssl("ssl.client.auth", "required"), "ssl.client.auth"}, // no trust store
		{ssl("ssl.cipher.suites", "TLS_RSA_WITH_RC4_128_SHA"), "ssl.cipher.suites"},
		{ssl("ssl.keymanager.algorithm", "IbmX509"), "ssl.keymanager.algorithm"},
		{ssl("ssl.engine.factory.class", "com.example.Engine"), "ssl.engine.factory.class"},
		{ssl("ssl.principal.mapping.rules", "RULE:CN=(.*)/$1/X/Y"), "ssl.principal.mapping.rules"},
		{ssl("ssl.no.such.key", "1"), "ssl.no.such.key"},
		{ssl("listener.name.ssl.ssl.keystore.type", "PKCS12"), "listener.name.ssl.ssl.keystore.type"},
		{ssl("listener.name.other.ssl.client.auth", "required"), "listener.name.other"},
		{ssl("inter.broker.listener.name", "NOPE"), "inter.broker.listener.name"},
		{ssl("inter.broker.listener.name", "SSL", "security.inter.broker.protocol", "SSL"), "security.inter.broker.protocol"},
		{ssl("security.inter.broker.protocol", "SASL_SSL"), "security.inter.broker.protocol"},
		{ssl("listeners", "SSL://127.0.0.1:9093,EXTERNAL://127.0.0.1:9094", "listener.security.protocol.map", "SSL:SSL,EXTERNAL:SSL"), "inter.broker.listener.name"},
		{ssl("ssl.keystore.location", "testdata/encrypted-key.pem"), "ssl.key.password"},
		{ssl("ssl.keystore.location", "testdata/encrypted-key.pem", "ssl.key.password", "wrong"), "ssl.key.password"},
	} {
		_, err := finish(c.props)
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%v: %v, want a start-up error naming %s", c.props, err, c.key)
		}
	}
}

func TestListenersResolve(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")

	// Kafka's default map; PLAINTEXT is the inter-broker listener.
	b, err := finish(map[string]string{
		"listeners":             "PLAINTEXT://0.0.0.0:9092,SSL://127.0.0.1:9093",
		"advertised.listeners":  "SSL://kafka.example.com:19093",
		"ssl.keystore.location": srv.Path,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Listeners) != 2 || b.InterBrokerListener != "PLAINTEXT" || b.Listen != "0.0.0.0:9092" {
		t.Fatalf("%+v inter %s listen %s", b.Listeners, b.InterBrokerListener, b.Listen)
	}
	p, s := b.Listeners[0], b.Listeners[1]
	if p.Protocol != "PLAINTEXT" || p.SSL != nil || p.Advertised() != "127.0.0.1:9092" {
		t.Fatalf("plaintext %+v", p)
	}
	if s.Protocol != "SSL" || s.SSL == nil || s.Advertised() != "kafka.example.com:19093" || s.Listen != "127.0.0.1:9093" {
		t.Fatalf("ssl %+v", s)
	}
	if b.Static["ssl.keystore.location"] != srv.Path {
		t.Fatalf("static %v", b.Static)
	}

	// Custom names, a per-listener override, the inter-broker listener by
	// protocol, inline PEM as a properties file carries it.
	props, err := ParseProperties(strings.NewReader(
		"listeners=INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093\n" +
			"listener.security.protocol.map=INTERNAL:SSL,EXTERNAL:SSL\n" +
			"inter.broker.listener.name=internal\n" +
			"ssl.keystore.certificate.chain=" + continued(srv.ChainPEM) + "\n" +
			"ssl.keystore.key=" + continued(srv.KeyPEM) + "\n" +
			"ssl.truststore.certificates=" + continued(ca.CertPEM) + "\n" +
			"listener.name.external.ssl.client.auth=required\n" +
			"ssl.key.password=\n"))
	if err != nil {
		t.Fatal(err)
	}
	delete(props, "ssl.key.password")
	b, err = finish(props)
	if err != nil {
		t.Fatal(err)
	}
	if b.InterBrokerListener != "INTERNAL" || b.InterBroker().Listen != "127.0.0.1:9092" {
		t.Fatalf("inter %s", b.InterBrokerListener)
	}
	in, ex := b.Listeners[0].SSL, b.Listeners[1].SSL
	if in.ClientAuth != tls.NoClientCert || ex.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("client auth %v %v", in.ClientAuth, ex.ClientAuth)
	}
	if _, ok := b.Static["ssl.keystore.key"]; ok {
		t.Fatal("a password key is reported as a static config")
	}

	// security.inter.broker.protocol names the listener by protocol; a
	// lone SSL listener is the inter-broker one.
	b, err = finish(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
		"security.inter.broker.protocol": "SSL", "ssl.keystore.location": srv.Path})
	if err != nil || b.InterBrokerListener != "SSL" || b.AdvertisedPort != 9093 {
		t.Fatalf("%v %s %d", err, b.InterBrokerListener, b.AdvertisedPort)
	}
	b, err = finish(map[string]string{"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.location": srv.Path})
	if err != nil || b.InterBrokerListener != "SSL" {
		t.Fatalf("%v %s", err, b.InterBrokerListener)
	}
	// The --listen flag after a file: one plaintext listener.
	b = Defaults()
	if err := b.Apply(map[string]string{"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.location": srv.Path}); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(map[string]string{"listeners": "127.0.0.1:9999"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(); err != nil || len(b.Listeners) != 1 || b.Listeners[0].Name != "PLAINTEXT" || b.Listen != "127.0.0.1:9999" {
		t.Fatalf("%v %+v", err, b.Listeners)
	}
}

// continued renders PEM as a properties value with line continuations.
func continued(pemBytes []byte) string {
	return strings.ReplaceAll(strings.TrimSpace(string(pemBytes)), "\n", " \\\n  ")
}

// An encrypted PKCS#8 key written by openssl (pkcs8 -topk8 -v2 aes-256-cbc
// -v2prf hmacWithSHA256, password s3cret) loads with ssl.key.password.
func TestEncryptedKey(t *testing.T) {
	b, err := finish(map[string]string{"listeners": "SSL://127.0.0.1:9093",
		"ssl.keystore.location": "testdata/encrypted-key.pem", "ssl.key.password": "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := b.Listeners[0].SSL.load()
	if err != nil || m.cert.Leaf == nil || m.cert.Leaf.Subject.CommonName != "encrypted-key-test" {
		t.Fatalf("%v %+v", err, m)
	}
	if _, err := decryptPKCS8([]byte{0x30, 0}, []byte("x")); err == nil {
		t.Fatal("garbage decrypted")
	}
}

// Kafka's SslPrincipalMapperTest cases.
func TestPrincipalMappingRules(t *testing.T) {
	pm, err := parsePrincipalRules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, " +
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, " +
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT")
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":           "Duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US":    "duke@sme",
		"cn=duke,ou=JavaSoft,o=Sun Microsystems":       "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":          "OU=JavaSoft,O=Sun Microsystems,C=US",
		"CN=Duke,OU=JavaSoft,O=Sun Microsystems,C=US/": "DUKE",
	} {
		if got, err := pm.apply(dn); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", dn, got, err, want)
		}
	}
	for _, bad := range []string{"default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1", "RULE:CN=(.*?),OU=ServiceUsers.*/$1/L/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/L", "RULE:CN=(.*?),OU=ServiceUsers.*/U", "RULE:CN=(.*?),OU=ServiceUsers.*/LU"} {
		if _, err := parsePrincipalRules(bad); err == nil {
			t.Errorf("rule %q accepted", bad)
		}
	}
	only, err := parsePrincipalRules("RULE:^CN=([a-z]+),O=Strata$/$1/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := only.apply("CN=other,O=Elsewhere"); !errors.Is(err, errNoPrincipalRule) {
		t.Fatalf("no rule matched: %v", err)
	}
}

// The principal of a certificate is its subject as Java prints it, most
// specific attribute first, in the certificate's own order.
func TestCertificatePrincipal(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")
	cl := ca.Client(t, dir, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Strata"}, Country: []string{"US"}})
	b, err := finish(map[string]string{"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.location": srv.Path,
		"ssl.truststore.location": ca.Path, "ssl.client.auth": "required"})
	if err != nil {
		t.Fatal(err)
	}
	s := b.Listeners[0].SSL
	if p, err := s.Principal(cl.Cert); err != nil || p != "User:CN=alice,OU=eng,O=Strata,C=US" {
		t.Fatalf("%q %v", p, err)
	}
	s.principal, _ = parsePrincipalRules("RULE:^CN=([^,]+),.*$/$1/U")
	if p, _ := s.Principal(cl.Cert); p != "User:ALICE" {
		t.Fatalf("mapped %q", p)
	}
}

// Certificates are reloaded when the keystore file changes; a
// replacement that does not load keeps the previous one.
func TestServerTLSReloads(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	first := ca.Server(t, dir, "first")
	second := ca.Server(t, dir, "second")
	ks := filepath.Join(dir, "keystore.pem")
	copyFile(t, first.Path, ks)
	b, err := finish(map[string]string{"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.location": ks})
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.Listeners[0].SSL.ServerTLS(nil)
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
	copyFile(t, second.Path, ks)
	if got := leaf(); got != "second" {
		t.Fatalf("after replacing the file: serving %s", got)
	}
	if err := os.WriteFile(ks, []byte("half-written"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := leaf(); got != "second" {
		t.Fatalf("after a broken file: serving %s", got)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// SASL listeners resolve with Kafka's keys: per-listener mechanisms win
// over sasl.enabled.mechanisms, PLAIN users come from the JAAS options,
// the inter-broker listener gets its client credentials, and
// strata.scram.credentials is parsed and salted.
func TestSASLListenersResolve(t *testing.T) {
	b, err := finish(map[string]string{
		"listeners":                                      "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9094",
		"listener.security.protocol.map":                 "INTERNAL:SASL_PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
		"inter.broker.listener.name":                     "INTERNAL",
		"sasl.enabled.mechanisms":                        "SCRAM-SHA-512",
		"listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
		"sasl.mechanism.inter.broker.protocol":           "PLAIN",
		"listener.name.internal.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required
			username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`,
		"strata.scram.credentials": "SCRAM-SHA-512=[name=bob,password=bob-secret,iterations=8192]",
	})
	if err != nil {
		t.Fatal(err)
	}
	in, ex := b.Listeners[0], b.Listeners[1]
	if in.SASL == nil || !slices.Equal(in.SASL.Mechanisms, []string{"PLAIN"}) || in.SASL.PlainUsers["alice"] != "alice-secret" {
		t.Fatalf("INTERNAL: %+v", in.SASL)
	}
	if c := in.SASL.Client; c == nil || c.Mechanism != "PLAIN" || c.User != "admin" || c.Password != "admin-secret" {
		t.Fatalf("INTERNAL client: %+v", in.SASL.Client)
	}
	if ex.SASL == nil || !slices.Equal(ex.SASL.Mechanisms, []string{"SCRAM-SHA-512"}) || ex.SASL.Client != nil || ex.SSL != nil {
		t.Fatalf("EXTERNAL: %+v", ex)
	}
	if len(b.ScramBootstrap) != 1 || b.ScramBootstrap[0].User != "bob" || b.ScramBootstrap[0].Credential.Iterations != 8192 {
		t.Fatalf("bootstrap %+v", b.ScramBootstrap)
	}
	for _, k := range b.Unknown {
		t.Errorf("SASL key %s reported unknown", k)
	}
}

// The authorizer's keys (issue 20): Kafka's names and defaults.
func TestAuthorizerKeys(t *testing.T) {
	b, err := finish(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Authorizer != "" || b.SuperUsers != "" || b.AllowEveryoneIfNoACL {
		t.Fatalf("defaults: %q %q %v", b.Authorizer, b.SuperUsers, b.AllowEveryoneIfNoACL)
	}
	b, err = finish(map[string]string{
		"authorizer.class.name":          configkeys.StandardAuthorizer,
		"super.users":                    "User:admin;User:broker",
		"allow.everyone.if.no.acl.found": "TRUE",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Authorizer != configkeys.StandardAuthorizer || b.SuperUsers != "User:admin;User:broker" || !b.AllowEveryoneIfNoACL {
		t.Fatalf("set: %q %q %v", b.Authorizer, b.SuperUsers, b.AllowEveryoneIfNoACL)
	}
}
