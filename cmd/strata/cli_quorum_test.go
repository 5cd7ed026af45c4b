package main

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/stratalog/strata/internal/tlstest"
	"github.com/stratalog/strata/server"
)

// TestPrintQuorum: the text form names the leader, the voters and
// observers, the largest voter lag, the controllers when known, and one
// row per member with its lag and how long ago it fetched.
func TestPrintQuorum(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	q := quorumJSON{ClusterID: "c1", LeaderID: 1, LeaderEpoch: 4, HighWatermark: 90,
		Voters: []quorumMemberJSON{
			{ID: 0, Status: "Follower", LogEndOffset: 95, Lag: 5, LastFetchTimestamp: 999_000, LastCaughtUpTimestamp: 998_000},
			{ID: 1, Status: "Leader", LogEndOffset: 100, LastFetchTimestamp: 1_000_000, LastCaughtUpTimestamp: 1_000_000},
		},
		Observers:   []quorumMemberJSON{{ID: 7, Status: "Observer", LogEndOffset: -1, LastFetchTimestamp: -1, LastCaughtUpTimestamp: -1}},
		Controllers: []brokerJSON{{ID: 0, Host: "127.0.0.1", Port: 9193}, {ID: 1, Host: "127.0.0.1", Port: 9194}},
	}
	var sb strings.Builder
	if err := printQuorum(&sb, q, now); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	for _, want := range []string{"ClusterId:        c1\n", "LeaderId:         1\n", "LeaderEpoch:      4\n", "HighWatermark:    90\n",
		"MaxFollowerLag:   5\n", "CurrentVoters:    [0,1]\n", "CurrentObservers: [7]\n",
		"Controllers:      0@127.0.0.1:9193,1@127.0.0.1:9194\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if _, err := strconv.Atoi(f[0]); err == nil && len(f) > 3 {
				rows[f[0]] = f
			}
		}
	}
	if r := rows["0"]; strings.Join(r, " ") != "0 95 5 1000 ms ago 2000 ms ago Follower" {
		t.Fatalf("row 0: %q\n%s", r, out)
	}
	if r := rows["7"]; strings.Join(r, " ") != "7 -1 0 unknown unknown Observer" {
		t.Fatalf("row 7: %q\n%s", r, out)
	}
}

// TestNodeRolesControllerListener: a controller listener needs the
// controller role and a quorum.
func TestNodeRolesControllerListener(t *testing.T) {
	const quorum = "0@127.0.0.1:19090"
	for _, c := range []struct {
		props map[string]string
		err   string
	}{
		{map[string]string{"node.id": "0", "process.roles": "controller", "controller.quorum.voters": quorum}, ""},
		{map[string]string{"node.id": "0", "controller.quorum.voters": quorum, "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"}, ""},
		{map[string]string{"node.id": "3", "process.roles": "broker", "controller.quorum.voters": quorum,
			"listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"}, "controller.listener.names: a broker-only node"},
		{map[string]string{"node.id": "3", "controller.quorum.voters": quorum,
			"listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"}, "controller.listener.names: node id 3 is not a voter"},
		{map[string]string{"node.id": "0", "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"}, "controller.listener.names: a controller listener needs controller.quorum.voters"},
	} {
		c.props["controller.listener.names"] = "CONTROLLER"
		if c.props["listeners"] == "" {
			c.props["listeners"] = "CONTROLLER://127.0.0.1:19093"
		}
		cfg := config.Defaults()
		if err := cfg.Apply(c.props); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Finish(); err != nil {
			t.Fatal(err)
		}
		_, err := nodeRoles(cfg)
		if (c.err == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), c.err)) {
			t.Errorf("%v: error %v, want %q", c.props, err, c.err)
		}
	}
}

// securedQuorum is a controller-only node (a quorum of one) serving an
// SSL and a SASL_SSL controller listener, and a single broker serving an
// SSL listener, all with a certificate of one test CA.
type securedQuorum struct {
	ssl, saslSSL string // the controller listeners
	broker       string // the broker's SSL listener
	caPath       string // the CA's PEM file
}

func startSecuredQuorum(t *testing.T) securedQuorum {
	t.Helper()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	cert := ca.Server(t, dir, "node")
	serverTLS := func() *tls.Config { return &tls.Config{Certificates: []tls.Certificate{cert.TLS}} }
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	raftLn := listen()
	ctl, err := controller.New(controller.Config{NodeID: 0, Voters: map[int32]string{0: raftLn.Addr().String()},
		DataDir: t.TempDir(), Listener: raftLn, Logger: logger,
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sslLn, saslLn := listen(), listen()
	var eps []controller.Endpoint
	for name, ln := range map[string]net.Listener{"CONTROLLER": sslLn, "CONTROLLER_SASL": saslLn} {
		host, port := server.AdvertisedEndpoint("", 0, ln.Addr())
		eps = append(eps, controller.Endpoint{Name: name, Host: host, Port: port})
	}
	ctl.SetKafkaEndpoints(eps)
	cs := server.New(server.Config{NodeID: 0, ClusterID: "quorum-tls", ControllerOnly: true, Logger: logger,
		Cluster: server.ClusterConfig{Controller: ctl}}, nil)

	eng, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	bs := server.New(server.Config{NodeID: 0, ClusterID: "broker-tls", Logger: logger}, eng)
	brokerLn := listen()

	var served []chan error
	serve := func(s *server.Server, ln net.Listener, l server.Listener) {
		done := make(chan error, 1)
		served = append(served, done)
		go func() { done <- s.ServeListener(ln, l) }()
	}
	serve(cs, sslLn, server.Listener{Name: "CONTROLLER", Protocol: "SSL", Controller: true, TLS: serverTLS()})
	serve(cs, saslLn, server.Listener{Name: "CONTROLLER_SASL", Protocol: "SASL_SSL", Controller: true, TLS: serverTLS(),
		SASL: &sasl.Config{Mechanisms: []string{sasl.Plain}, PlainUsers: map[string]string{"admin": "admin-pw"}}})
	serve(bs, brokerLn, server.Listener{Name: "SSL", Protocol: "SSL", TLS: serverTLS()})
	t.Cleanup(func() {
		cs.Close()
		bs.Close()
		for _, done := range served {
			select {
			case <-done:
			case <-time.After(groupsTestTimeout):
				t.Error("ServeListener did not return")
			}
		}
		ctl.Close()
		eng.Close()
	})
	for i := 0; ; i++ { // the quorum of one elects itself
		if id, ok := ctl.Leader(); ok && id == 0 {
			break
		}
		if i == 500 {
			t.Fatal("no quorum leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return securedQuorum{ssl: sslLn.Addr().String(), saslSSL: saslLn.Addr().String(), broker: brokerLn.Addr().String(), caPath: ca.Path}
}

// TestClusterQuorumTLS: strata cluster quorum --bootstrap-controller
// reaches an SSL controller listener with --tls-ca and a SASL_SSL one with
// --sasl-* too (the password from $STRATA_SASL_PASSWORD), and prints the
// cluster id, the leader, the voter and the controller endpoint of the
// listener asked; without TLS, with TLS but not the CA, or with a wrong
// password it fails. The brokers' path and cluster describe reach an SSL
// broker listener the same way.
func TestClusterQuorumTLS(t *testing.T) {
	q := startSecuredQuorum(t)
	cluster := func(env map[string]string, args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := clusterMainEnv(append(args, "--timeout", "20s"), &out, &errb, func(k string) string { return env[k] })
		return out.String() + errb.String(), err
	}
	status := func(ep string) []string {
		return []string{"ClusterId:        quorum-tls\n", "LeaderId:         0\n", "CurrentVoters:    [0]\n",
			"CurrentObservers: []\n", "Controllers:      0@" + ep + "\n"}
	}
	check := func(what, out string, err error, want []string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("%s: no %q in\n%s", what, w, out)
			}
		}
	}

	out, err := cluster(nil, "quorum", "--bootstrap-controller", q.ssl, "--tls-ca", q.caPath)
	check("SSL controller listener", out, err, status(q.ssl))
	if !regexpLine(out, `^0\s+\d+\s+0\s+\d+ ms ago\s+\d+ ms ago\s+Leader$`) {
		t.Fatalf("no leader row in\n%s", out)
	}
	out, err = cluster(nil, "quorum", "--bootstrap-controller", q.ssl, "--tls", "--tls-ca", q.caPath, "--format", "json")
	j := decodeJSON[quorumJSON](t, out)
	if err != nil || j.ClusterID != "quorum-tls" || j.LeaderID != 0 || len(j.Voters) != 1 || len(j.Controllers) != 1 ||
		net.JoinHostPort(j.Controllers[0].Host, strconv.Itoa(int(j.Controllers[0].Port))) != q.ssl {
		t.Fatalf("--format json: %v\n%s", err, out)
	}
	env := map[string]string{"STRATA_SASL_PASSWORD": "admin-pw"}
	out, err = cluster(env, "quorum", "--bootstrap-controller", q.saslSSL, "--tls-ca", q.caPath,
		"--sasl-mechanism", "PLAIN", "--sasl-username", "admin")
	check("SASL_SSL controller listener", out, err, status(q.saslSSL))

	for _, c := range []struct {
		what string
		env  map[string]string
		args []string
	}{
		{"no TLS", nil, []string{"--bootstrap-controller", q.ssl}},
		{"TLS without the CA", nil, []string{"--bootstrap-controller", q.ssl, "--tls"}},
		{"SASL_SSL without SASL", nil, []string{"--bootstrap-controller", q.saslSSL, "--tls-ca", q.caPath}},
		{"a wrong password", map[string]string{"STRATA_SASL_PASSWORD": "nope"},
			[]string{"--bootstrap-controller", q.saslSSL, "--tls-ca", q.caPath, "--sasl-mechanism", "PLAIN", "--sasl-username", "admin"}},
	} {
		out, err := cluster(c.env, append([]string{"quorum"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), "no controller answered") {
			t.Errorf("%s: error %v\n%s", c.what, err, out)
		}
	}
	if _, err := cluster(nil, "quorum", "--bootstrap-controller", q.ssl, "--tls-ca", q.caPath+".missing"); err == nil ||
		!strings.Contains(err.Error(), "--tls-ca") {
		t.Errorf("a missing --tls-ca file: %v", err)
	}

	// The brokers' path: a single broker is its own quorum.
	benv := map[string]string{brokersEnv: q.broker}
	out, err = cluster(benv, "quorum", "--tls-ca", q.caPath)
	check("quorum from an SSL broker listener", out, err, []string{"LeaderId:         0\n", "CurrentVoters:    [0]\n"})
	if strings.Contains(out, "ClusterId:") || strings.Contains(out, "Controllers:") {
		t.Fatalf("the brokers' path printed the controllers' lines:\n%s", out)
	}
	out, err = cluster(benv, "describe", "--tls-ca", q.caPath)
	_, port, _ := net.SplitHostPort(q.broker)
	check("describe over SSL", out, err, []string{"Cluster broker-tls: controller 0, 1 brokers"})
	if !regexpLine(out, `^0\s+127\.0\.0\.1\s+`+port+`\s+-\s+yes$`) {
		t.Fatalf("describe over SSL: no broker row in\n%s", out)
	}
}

// TestClusterVerbsSecurityFlags: every strata cluster verb lists the
// security flags in its --help, and a mechanism it does not speak is a
// usage error naming the flag, before any connection.
func TestClusterVerbsSecurityFlags(t *testing.T) {
	for _, v := range clusterVerbs {
		code, out, errOut := runCLI("cluster", v.verb, "--help")
		if code != 0 {
			t.Errorf("cluster %s --help: exit %d\n%s", v.verb, code, errOut)
		}
		for _, want := range []string{"-sasl-mechanism", "-sasl-username", "-sasl-password", "$STRATA_SASL_PASSWORD", "-tls\n", "-tls-ca"} {
			if !strings.Contains(out, want) {
				t.Errorf("cluster %s --help: no %q in\n%s", v.verb, want, out)
			}
		}
		args := []string{"cluster", v.verb, "--brokers", "127.0.0.1:1", "--sasl-mechanism", "GSSAPI"}
		if v.verb == "alter-config" {
			args = append(args, "--set", "k=v")
		}
		code, _, errOut = runCLI(args...)
		if lines := strings.Split(errOut, "\n"); code != 1 || !strings.HasPrefix(lines[0], `strata cluster `+v.verb+`: --sasl-mechanism "GSSAPI": want PLAIN`) {
			t.Errorf("cluster %s --sasl-mechanism GSSAPI: exit %d\n%s", v.verb, code, errOut)
		}
	}
	if code, out, _ := runCLI("cluster", "--help"); code != 0 || !strings.Contains(out, "--tls and --tls-ca") {
		t.Errorf("cluster --help: exit %d\n%s", code, out)
	}
}
