package loadgen

import (
	"bytes"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/tlstest"
)

func TestSecurityFlagsValidated(t *testing.T) {
	base := func() Config {
		c := smallRun(EngineKgo)
		c.SpawnConfig = "/nonexistent.properties"
		c.Security = Security{Protocol: "SASL_SSL", TLSCA: "ca.pem", SASLMechanism: "SCRAM-SHA-512", SASLUsername: "u", SASLPassword: "p"}
		return c
	}
	if c := base(); c.Validate() != nil {
		t.Fatalf("a valid SASL_SSL config refused: %v", c.Validate())
	}
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"protocol", func(c *Config) { c.Security.Protocol = "TLS" }, `--security-protocol "TLS"`},
		{"mechanism", func(c *Config) { c.Security.SASLMechanism = "GSSAPI" }, `--sasl-mechanism "GSSAPI"`},
		{"no mechanism", func(c *Config) { c.Security.SASLMechanism = "" }, "needs --sasl-mechanism"},
		{"no user", func(c *Config) { c.Security.SASLUsername = "" }, "needs --sasl-username"},
		{"no password", func(c *Config) { c.Security.SASLPassword = "" }, "$STRATA_SASL_PASSWORD"},
		{"sasl without SASL", func(c *Config) { c.Security.Protocol = "SSL" }, "--sasl-mechanism, --sasl-username and --sasl-password need --security-protocol SASL_PLAINTEXT or SASL_SSL"},
		{"tls without TLS", func(c *Config) { c.Security.Protocol = "SASL_PLAINTEXT" }, "--tls-ca, --tls-cert and --tls-key need --security-protocol SSL or SASL_SSL"},
		{"cert without key", func(c *Config) { c.Security.TLSCert = "c.pem" }, "--tls-cert and --tls-key go together"},
		{"native producer", func(c *Config) { c.Engine = EngineNative; c.ConsumerEngine = EngineKgo }, "--engine native and --consumer-engine native speak PLAINTEXT only"},
		{"native consumer", func(c *Config) { c.ConsumerEngine = EngineNative }, "--engine native and --consumer-engine native speak PLAINTEXT only"},
		{"faults", func(c *Config) { c.Faults = []string{FaultKill} }, "--faults runs its clients and proxies in PLAINTEXT"},
		{"listener without spawn config", func(c *Config) { c.SpawnConfig, c.SpawnListener = "", "SASL_SSL" }, "--spawn-listener names a listener"},
		{"plaintext compare, plaintext clients", func(c *Config) { c.Security = Security{}; c.ComparePlaintext = true }, "--compare-plaintext compares a secured listener"},
		{"plaintext compare without spawn config", func(c *Config) { c.SpawnConfig, c.ComparePlaintext = "", true }, "--compare-plaintext needs --spawn and a --spawn-config"},
		{"plaintext and blackhole", func(c *Config) { c.ComparePlaintext, c.CompareBlackhole = true, true }, "exclusive"},
	} {
		c := base()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	c := base()
	c.ComparePlaintext, c.CompareRounds = true, 2
	if err := c.Validate(); err != nil {
		t.Errorf("--compare-plaintext --compare-rounds 2: %v", err)
	}
}

func TestClientListener(t *testing.T) {
	props := []byte("listeners=SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0, INTERNAL://127.0.0.1:0\nlistener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:PLAINTEXT\n")
	for _, tc := range []struct {
		opts       SpawnOptions
		want, fail string
	}{
		{SpawnOptions{Protocol: "SASL_SSL"}, "SASL_SSL", ""},
		{SpawnOptions{Protocol: "PLAINTEXT"}, "", "are all PLAINTEXT: choose the clients' with --spawn-listener"},
		{SpawnOptions{Protocol: "PLAINTEXT", Listener: "internal"}, "INTERNAL", ""},
		{SpawnOptions{Protocol: "SSL"}, "", "have no SSL listener"},
		{SpawnOptions{Listener: "EXTERNAL"}, "", "--spawn-listener EXTERNAL: not among"},
	} {
		l, err := clientListener(props, tc.opts)
		if tc.fail != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fail) {
				t.Errorf("%+v: %v, want %q", tc.opts, err, tc.fail)
			}
			continue
		}
		if err != nil || l.client != tc.want || strings.Join(l.names, ",") != "SASL_SSL,PLAINTEXT,INTERNAL" {
			t.Errorf("%+v: %+v, %v; want client %s", tc.opts, l, err, tc.want)
		}
	}
	if _, err := clientListener(nil, SpawnOptions{Protocol: "SASL_SSL"}); err == nil || !strings.Contains(err.Error(), "needs a --spawn-config whose listeners has a SASL_SSL listener") {
		t.Errorf("SASL_SSL without listeners: %v", err)
	}
	if _, err := clientListener(append(props, "advertised.listeners=SASL_SSL://h:1\n"...), SpawnOptions{Protocol: "SASL_SSL"}); err == nil || !strings.Contains(err.Error(), "advertised.listeners") {
		t.Errorf("advertised.listeners: %v", err)
	}
}

// securedSpawnConfig writes a broker properties file with a SASL_SSL
// listener (SCRAM-SHA-512, user loadgen created at start-up) and a
// PLAINTEXT one, and returns it with the CA's PEM file.
func securedSpawnConfig(t *testing.T) (props, ca string) {
	dir := t.TempDir()
	authority := tlstest.NewCA(t, dir, "loadgen-test")
	server := authority.Server(t, dir, "broker")
	props = filepath.Join(dir, "server.properties")
	text := fmt.Sprintf(`listeners=SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL
inter.broker.listener.name=PLAINTEXT
ssl.keystore.location=%s
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
strata.scram.credentials=SCRAM-SHA-512=[name=loadgen,password=loadgen-secret]
`, server.Path)
	if err := os.WriteFile(props, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return props, authority.Path
}

// TestSecuredSpawnComparePlaintext: against a spawned broker whose
// clients' listener is SASL_SSL (SCRAM-SHA-512), a run without the
// security flags fails (the broker does not speak plaintext there) and so
// does one with a wrong password, while one with them produces and
// consumes (consumers in their own process) every record, and
// --compare-plaintext runs the same workload, consumers too, over the
// PLAINTEXT listener of the same properties (its clients have no TLS or
// SASL, which the first case shows the SASL_SSL listener refuses).
func TestSecuredSpawnComparePlaintext(t *testing.T) {
	props, ca := securedSpawnConfig(t)
	secured := func() Config {
		cfg := smallRun(EngineKgo)
		cfg.Duration, cfg.DrainTimeout = time.Second, 10*time.Second
		cfg.SpawnConfig = props
		cfg.Security = Security{Protocol: ProtocolSASLSSL, TLSCA: ca, SASLMechanism: "SCRAM-SHA-512", SASLUsername: "loadgen", SASLPassword: "loadgen-secret"}
		return cfg
	}

	plain := secured()
	plain.Security, plain.SpawnListener = Security{}, "SASL_SSL"
	plain.Consumers = 0
	if _, err := Run(testCtx(t, time.Minute), plain); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Fatalf("a PLAINTEXT client on the SASL_SSL listener: %v, want the client's TLS error", err)
	}

	wrong := secured()
	wrong.Security.SASLPassword, wrong.Consumers = "not-the-password", 0
	if _, err := Run(testCtx(t, time.Minute), wrong); err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	cfg := secured()
	cfg.ComparePlaintext = true
	var log bytes.Buffer
	cfg.Log = &log
	rep, err := Run(testCtx(t, 3*time.Minute), cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	checkClean(t, rep, 2000)
	if rep.Config.SecurityProtocol != ProtocolSASLSSL || rep.Config.SASLUsername != "loadgen" {
		t.Fatalf("config %+v", rep.Config)
	}
	bl := rep.Baseline
	if bl == nil || bl.Mode != BaselinePlaintext || bl.Result.RecordsAcked != 2000 || bl.Result.RecordsConsumed != 2000 || bl.Ratio <= 0 {
		t.Fatalf("plaintext baseline %+v", bl)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PLAINTEXT listener", "ratio secured / plaintext", "SASL_SSL SCRAM-SHA-512 as loadgen"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("table without %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "loadgen-secret") {
		t.Fatalf("the password is in the table")
	}
	t.Logf("table:\n%s", out.String())
}

// TestSpawnedClusterMutualTLS: two spawned brokers (one cluster, the
// brokers between them on PLAINTEXT) whose clients' listener is SSL with
// ssl.client.auth=required: a run without a client certificate fails, one
// with --tls-cert/--tls-key (here one file holding both, as a PEM
// keystore does) produces and consumes every record with replication
// factor 2, the spawn's own cluster check going through the same
// listener.
func TestSpawnedClusterMutualTLS(t *testing.T) {
	dir := t.TempDir()
	authority := tlstest.NewCA(t, dir, "loadgen-mtls")
	server := authority.Server(t, dir, "broker")
	client := authority.Client(t, dir, pkix.Name{CommonName: "loadgen"})
	props := filepath.Join(dir, "server.properties")
	text := fmt.Sprintf(`listeners=INTERNAL://127.0.0.1:0,CLIENTS://127.0.0.1:0
listener.security.protocol.map=INTERNAL:PLAINTEXT,CLIENTS:SSL
inter.broker.listener.name=INTERNAL
ssl.keystore.location=%s
ssl.truststore.location=%s
ssl.client.auth=required
`, server.Path, authority.Path)
	if err := os.WriteFile(props, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := smallRun(EngineKgo)
	cfg.Spawn, cfg.ReplicationFactor = 2, 2
	cfg.Duration, cfg.DrainTimeout = time.Second, 10*time.Second
	cfg.SpawnConfig = props
	cfg.Security = Security{Protocol: ProtocolSSL, TLSCA: authority.Path}

	noCert := cfg
	noCert.Consumers = 0
	if _, err := Run(testCtx(t, 2*time.Minute), noCert); err == nil || !strings.Contains(err.Error(), "tls: certificate required") {
		t.Fatalf("a client without a certificate under ssl.client.auth=required: %v, want the TLS alert", err)
	}

	cfg.Security.TLSCert, cfg.Security.TLSKey = client.Path, client.Path
	rep, err := Run(testCtx(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, rep, 2000)
	if len(rep.Target.Brokers) != 2 || !rep.Config.TLSClientCert {
		t.Fatalf("target %+v, config %+v", rep.Target, rep.Config)
	}
}
