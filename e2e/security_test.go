package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/tlstest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startBrokerProps runs `strata serve --config props` (listeners from the
// file, no --listen flag) and waits until addr accepts TCP connections.
func startBrokerProps(t *testing.T, addr, props string, extraArgs ...string) *broker {
	t.Helper()
	b := &broker{t: t, addr: addr, dataDir: t.TempDir(), ownListeners: true,
		args: append([]string{"--config", writeProps(t, props)}, extraArgs...)}
	b.start()
	t.Cleanup(b.stop)
	return b
}

// tlsClient is a franz-go client of the SSL listener at addr.
func tlsClient(t *testing.T, addr string, cfg *tls.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTLSConfig(cfg),
		kgo.RequestRetries(1), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceConsume writes n records to a new topic through cl and reads
// them back in order.
func produceConsume(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, n int) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	value := bytes.Repeat([]byte("v"), 1000)
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.AddConsumeTopics(topic)
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume %s after %d: %v", topic, got, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != strconv.Itoa(got) || !bytes.Equal(r.Value, value) {
				t.Fatalf("record %d: key %q, %d value bytes", got, r.Key, len(r.Value))
			}
			got++
		})
	}
	cl.PurgeTopicsFromConsuming(topic)
}

// metadataBroker asks the broker cl is connected to for its own address.
func metadataBroker(t *testing.T, ctx context.Context, cl *kgo.Client) string {
	t.Helper()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || len(resp.Brokers) != 1 {
		t.Fatalf("metadata: %v %+v", err, resp)
	}
	return net.JoinHostPort(resp.Brokers[0].Host, strconv.Itoa(int(resp.Brokers[0].Port)))
}

// TestSSLListenerClients: one broker with a PLAINTEXT and an SSL
// listener. franz-go and kcat produce and consume over SSL; Metadata,
// FindCoordinator and DescribeCluster on each port answer with that
// listener's address; a plaintext client on the SSL port is closed with
// one log line.
func TestSSLListenerClients(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: scripts/test installs it (apt-get install kcat)")
	}
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")
	plain, ssl := freeAddr(t), freeAddr(t)
	b := startBrokerProps(t, ssl, fmt.Sprintf("listeners=PLAINTEXT://%s,SSL://%s\nssl.keystore.location=%s\n", plain, ssl, srv.Path))
	ctx := testCtx(t, 2*time.Minute)

	cl := tlsClient(t, ssl, tlstest.ClientConfig(ca, nil), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	produceConsume(t, ctx, cl, "over-tls", 2000)
	if got := metadataBroker(t, ctx, cl); got != ssl {
		t.Fatalf("Metadata on the SSL listener advertises %s, want %s", got, ssl)
	}
	pl, err := kgo.NewClient(kgo.SeedBrokers(plain))
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	if got := metadataBroker(t, ctx, pl); got != plain {
		t.Fatalf("Metadata on the PLAINTEXT listener advertises %s, want %s", got, plain)
	}
	for _, c := range []struct {
		cl   *kgo.Client
		want string
	}{{cl, ssl}, {pl, plain}} {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "g"
		fr, err := fc.RequestWith(ctx, c.cl)
		if err != nil || net.JoinHostPort(fr.Host, strconv.Itoa(int(fr.Port))) != c.want {
			t.Fatalf("FindCoordinator: %v %s:%d, want %s", err, fr.Host, fr.Port, c.want)
		}
		dr, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, c.cl)
		if err != nil || len(dr.Brokers) != 1 || net.JoinHostPort(dr.Brokers[0].Host, strconv.Itoa(int(dr.Brokers[0].Port))) != c.want {
			t.Fatalf("DescribeCluster: %v %+v, want %s", err, dr, c.want)
		}
	}

	// kcat (librdkafka) over SSL, verifying the broker's certificate.
	var in bytes.Buffer
	const n = 500
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "k%d:%d\n", i%7, i)
	}
	sslArgs := []string{"-b", ssl, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + ca.Path}
	prod := exec.CommandContext(ctx, kcat, append(sslArgs, "-P", "-t", "kcat-tls", "-K:", "-X", "acks=all")...)
	prod.Stdin = &in
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce over SSL: %v\n%s\nbroker:\n%s", err, out, b.logs)
	}
	out, err := exec.CommandContext(ctx, kcat, append(sslArgs, "-C", "-t", "kcat-tls", "-o", "beginning", "-e", "-f", "%s\n")...).Output()
	if err != nil {
		t.Fatalf("kcat consume over SSL: %v\n%s", err, out)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != n || lines[0] != "0" || lines[n-1] != strconv.Itoa(n-1) {
		t.Fatalf("kcat consumed %d lines over SSL", len(lines))
	}
	// kcat set up for SSL against an untrusted CA fails.
	other := tlstest.NewCA(t, dir, "other")
	bad := exec.CommandContext(ctx, kcat, "-b", ssl, "-X", "security.protocol=ssl", "-X", "ssl.ca.location="+other.Path, "-L", "-m", "5")
	if out, err := bad.CombinedOutput(); err == nil {
		t.Fatalf("kcat trusted a certificate of another CA:\n%s", out)
	}

	// A plaintext Kafka client on the SSL port.
	before := strings.Count(b.logs.String(), "not a TLS handshake")
	c, err := net.DialTimeout("tcp", ssl, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	apiVersions := kmsg.NewPtrApiVersionsRequest()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("plain-client")).AppendRequest(nil, apiVersions, 1)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 64)); err == nil {
		t.Fatalf("a plaintext client read %d bytes from the SSL listener", n)
	}
	waitFor(t, 10*time.Second, func() string {
		if got := strings.Count(b.logs.String(), "not a TLS handshake"); got != before+1 {
			return fmt.Sprintf("%d lines about a plaintext client, want %d", got, before+1)
		}
		return ""
	})
}

// TestSSLClientAuthRequired: with ssl.client.auth=required a client
// without a certificate, or with one another CA signed, is refused; one
// with a certificate the trust store's CA signed produces and consumes
// (franz-go and kcat).
func TestSSLClientAuthRequired(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: scripts/test installs it (apt-get install kcat)")
	}
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	other := tlstest.NewCA(t, dir, "other")
	srv := ca.Server(t, dir, "broker")
	alice := ca.Client(t, dir, pkix.Name{CommonName: "alice", Organization: []string{"Strata"}})
	addr := freeAddr(t)
	b := startBrokerProps(t, addr, fmt.Sprintf("listeners=EXTERNAL://%s\nlistener.security.protocol.map=EXTERNAL:SSL\n"+
		"ssl.keystore.location=%s\nssl.truststore.location=%s\nlistener.name.external.ssl.client.auth=required\n",
		addr, srv.Path, ca.Path))
	ctx := testCtx(t, 2*time.Minute)

	for name, cfg := range map[string]*tls.Config{
		"no certificate":      tlstest.ClientConfig(ca, nil),
		"another CA's client": tlstest.ClientConfig(ca, other.Client(t, dir, pkix.Name{CommonName: "mallory"})),
	} {
		cl := tlsClient(t, addr, cfg)
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		cancel()
		if err == nil {
			t.Fatalf("%s: served", name)
		}
		cl.Close()
	}
	if !strings.Contains(b.logs.String(), "TLS handshake failed") {
		t.Fatalf("no log line for the refused handshakes:\n%s", b.logs)
	}

	cl := tlsClient(t, addr, tlstest.ClientConfig(ca, alice), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	produceConsume(t, ctx, cl, "mtls", 500)

	keyPath := filepath.Join(dir, "alice.key")
	if err := os.WriteFile(keyPath, alice.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	certPath := filepath.Join(dir, "alice.crt")
	if err := os.WriteFile(certPath, alice.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	mtls := []string{"-b", addr, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + ca.Path,
		"-X", "ssl.certificate.location=" + certPath, "-X", "ssl.key.location=" + keyPath}
	prod := exec.CommandContext(ctx, kcat, append(mtls, "-P", "-t", "kcat-mtls")...)
	prod.Stdin = strings.NewReader("one\ntwo\nthree\n")
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce with a client certificate: %v\n%s\nbroker:\n%s", err, out, b.logs)
	}
	out, err := exec.CommandContext(ctx, kcat, append(mtls, "-C", "-t", "kcat-mtls", "-o", "beginning", "-e")...).Output()
	if err != nil || strings.TrimSpace(string(out)) != "one\ntwo\nthree" {
		t.Fatalf("kcat consume with a client certificate: %v %q", err, out)
	}
	noCert := exec.CommandContext(ctx, kcat, "-b", addr, "-X", "security.protocol=ssl", "-X", "ssl.ca.location="+ca.Path, "-L", "-m", "5")
	if out, err := noCert.CombinedOutput(); err == nil {
		t.Fatalf("kcat without a client certificate was served:\n%s", out)
	}
}

// TestSSLCertificateReload: replacing the keystore file changes the
// certificate new connections get, without a restart; connections
// already open keep working.
func TestSSLCertificateReload(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	first := ca.Server(t, dir, "first")
	second := ca.Server(t, dir, "second")
	ks := filepath.Join(dir, "keystore.pem")
	copyTo(t, first.Path, ks)
	addr := freeAddr(t)
	b := startBrokerProps(t, addr, fmt.Sprintf("listeners=SSL://%s\nssl.keystore.location=%s\n", addr, ks))
	ctx := testCtx(t, time.Minute)

	leaf := func() string {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, tlstest.ClientConfig(ca, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := leaf(); got != "first" {
		t.Fatalf("serving %s", got)
	}
	cl := tlsClient(t, addr, tlstest.ClientConfig(ca, nil), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	produceConsume(t, ctx, cl, "before-reload", 10)

	tmp := ks + ".new"
	copyTo(t, second.Path, tmp)
	if err := os.Rename(tmp, ks); err != nil { // as cert-manager and certbot replace files
		t.Fatal(err)
	}
	if got := leaf(); got != "second" {
		t.Fatalf("after replacing the keystore: serving %s\n%s", got, b.logs)
	}
	// The broker's log reaches the test through a pipe: the line may come
	// after the handshake that the reload served.
	waitFor(t, 10*time.Second, func() string {
		if !strings.Contains(b.logs.String(), "TLS key, certificates and trust store reloaded") {
			return "no reload line:\n" + b.logs.String()
		}
		return ""
	})
	produceConsume(t, ctx, cl, "after-reload", 10) // the open connection still works
}

func copyTo(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSecurityConfigRefusedAtStart: `strata serve` exits with an error
// naming the key for a listener or key it cannot honour.
func TestSecurityConfigRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")
	addr := freeAddr(t)
	for _, c := range []struct{ props, want string }{
		{"listeners=SASL_SSL://" + addr + "\n", "SASL_SSL"},
		{"listeners=SASL_PLAINTEXT://" + addr + "\nsasl.enabled.mechanisms=PLAIN\n", "listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		{"listeners=CLIENT://" + addr + "\n", "listener.security.protocol.map"},
		{"listeners=SSL://" + addr + "\n", "ssl.keystore.location"},
		{"listeners=SSL://" + addr + "\nssl.keystore.location=" + filepath.Join(dir, "missing.pem") + "\n", "ssl.keystore.location"},
		{"listeners=SSL://" + addr + "\nssl.keystore.type=JKS\nssl.keystore.location=" + srv.Path + "\n", "ssl.keystore.type"},
		{"sasl.enabled.mechanisms=GSSAPI\n", "sasl.enabled.mechanisms"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, strataBin, "serve", "--data-dir", t.TempDir(), "--config", writeProps(t, c.props))
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%q: %v, want an error naming %s:\n%s", c.props, err, c.want, out)
		}
	}
}

// TestSSLClusterReplicates: two brokers whose only listener is SSL with
// client certificates required. Followers fetch from the leader, and the
// transaction coordinator sends its markers, over TLS with the broker's
// own certificate (the inter-broker listener's ssl.* keys): an acks=all
// produce to a partition with two in-sync replicas succeeds, and a
// transaction commits.
func TestSSLClusterReplicates(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")
	client := ca.Client(t, dir, pkix.Name{CommonName: "client"})
	voters := []string{"0@" + freeAddr(t), "1@" + freeAddr(t)}
	var brokers []*broker
	for i := range voters {
		addr := freeAddr(t)
		props := fmt.Sprintf("listeners=SSL://%s\nssl.keystore.location=%s\nssl.truststore.location=%s\nssl.client.auth=required\n%s",
			addr, srv.Path, ca.Path, clusterProps)
		brokers = append(brokers, startBrokerProps(t, addr, props, "--node-id", strconv.Itoa(i),
			"--controller-quorum", strings.Join(voters, ",")))
	}
	ctx := testCtx(t, 2*time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].addr, brokers[1].addr),
		kgo.DialTLSConfig(tlstest.ClientConfig(ca, client)), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.TransactionalID("tls-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitReplicatedTopic(t, ctx, cl, "replicated")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "replicated", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce over TLS replication: %v\n%s\n%s", err, brokers[0].logs, brokers[1].logs)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit (markers over TLS): %v", err)
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].addr, brokers[1].addr),
		kgo.DialTLSConfig(tlstest.ClientConfig(ca, client)), kgo.ConsumeTopics("replicated"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	got := 0
	for got < 100 {
		fs := rd.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("read_committed after %d: %v", got, err)
		}
		got += fs.NumRecords()
	}
	for i, b := range brokers {
		if strings.Contains(b.logs.String(), "TLS handshake failed") {
			t.Errorf("broker %d refused a handshake:\n%s", i, b.logs)
		}
	}

	// The controller port (Raft and the controller RPC) is mutual TLS too:
	// the quorum above formed over it, and a plain TCP peer sending a
	// controller request is closed unanswered with one log line.
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(voters[0], "0@"), 5*time.Second)
	controllerPortRefuses(t, conn, err, brokers[0], "controller port: TLS handshake failed")
}

// controllerPortRefuses sends a controller request (magic 0xC7, version 1,
// a 1-byte frame: propose with no command) on conn, a connection to b's
// controller port (dialErr: its dial's error; a refused TLS handshake may
// fail the dial itself), and fails unless nothing comes back and b logs
// logLine.
func controllerPortRefuses(t *testing.T, conn net.Conn, dialErr error, b *broker, logLine string) {
	t.Helper()
	if dialErr == nil {
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
		if _, err := conn.Write([]byte{0xC7, 1, 0, 0, 0, 1, 1}); err == nil {
			if n, err := conn.Read(make([]byte, 64)); err == nil {
				t.Errorf("the controller port answered a refused peer (%d bytes)", n)
			}
		}
	}
	waitFor(t, 15*time.Second, func() string {
		if !strings.Contains(b.logs.String(), logLine) {
			return "no log line " + strconv.Quote(logLine)
		}
		return ""
	})
}

// TestSSLClusterControllerPortAuthorized: with an authorizer, the
// controller port's mutual TLS also asks the authorizer: the brokers
// (super.users) form the quorum, and a client certificate of the same CA
// without ClusterAction is closed with one log line.
func TestSSLClusterControllerPortAuthorized(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")
	app := ca.Client(t, dir, pkix.Name{CommonName: "app"})
	voters := []string{"0@" + freeAddr(t), "1@" + freeAddr(t)}
	var brokers []*broker
	for i := range voters {
		addr := freeAddr(t)
		props := fmt.Sprintf("listeners=SSL://%s\nssl.keystore.location=%s\nssl.truststore.location=%s\nssl.client.auth=required\n"+
			"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:CN=broker\n%s",
			addr, srv.Path, ca.Path, clusterProps)
		brokers = append(brokers, startBrokerProps(t, addr, props, "--node-id", strconv.Itoa(i),
			"--controller-quorum", strings.Join(voters, ",")))
	}
	ctx := testCtx(t, 2*time.Minute)
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].addr, brokers[1].addr),
		kgo.DialTLSConfig(tlstest.ClientConfig(ca, srv))) // a super user
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	waitReplicatedTopic(t, ctx, admin, "formed") // the quorum formed over the authorized port

	conn, err := tls.Dial("tcp", strings.TrimPrefix(voters[0], "0@"), tlstest.ClientConfig(ca, app))
	controllerPortRefuses(t, conn, err, brokers[0], "controller port: peer not authorized")
}

// waitReplicatedTopic creates topic (one partition, replication factor 2,
// min.insync.replicas 2) through cl, retrying until the cluster's metadata
// shows it with both brokers in sync.
func waitReplicatedTopic(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) {
	t.Helper()
	waitFor(t, time.Minute, func() string {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 2
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = "min.insync.replicas", kmsg.StringPtr("2")
		rt.Configs = append(rt.Configs, c)
		req.Topics = append(req.Topics, rt)
		if resp, err := req.RequestWith(ctx, cl); err != nil {
			return err.Error()
		} else if code := resp.Topics[0].ErrorCode; code != 0 && code != kerr.TopicAlreadyExists.Code {
			return kerr.ErrorForCode(code).Error()
		}
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			return err.Error()
		}
		for _, tp := range md.Topics {
			if tp.Topic != nil && *tp.Topic == topic && len(tp.Partitions) == 1 && len(tp.Partitions[0].ISR) == 2 {
				return ""
			}
		}
		return "ISR not yet both brokers"
	})
}
