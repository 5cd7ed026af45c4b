package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/tlstest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saslProps is a server.properties whose only listener is listener
// (SASL_PLAINTEXT or SASL_SSL) at addr, configured as Apache Kafka is:
// PLAIN's static user alice, SCRAM users bob (both mechanisms) and admin
// (SCRAM-SHA-512, what the broker itself presents: the listener is the
// inter-broker one, so transaction markers and followers authenticate).
func saslProps(listener, addr string) string {
	l := strings.ToLower(listener)
	return "listeners=" + listener + "://" + addr + "\n" +
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n" +
		"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n" +
		"listener.name." + l + ".plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";\n" +
		"listener.name." + l + ".scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"admin-secret\";\n" +
		"strata.scram.credentials=SCRAM-SHA-512=[name=admin,password=admin-secret];SCRAM-SHA-256=[name=bob,password=bob-secret];SCRAM-SHA-512=[name=bob,password=bob-secret,iterations=8192]\n"
}

var saslSecrets = []string{"alice-secret", "bob-secret", "admin-secret", "wrong-secret"}

func saslMechanisms() []struct {
	name string
	mech kgosasl.Mechanism
} {
	return []struct {
		name string
		mech kgosasl.Mechanism
	}{
		{"PLAIN", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()},
		{"SCRAM-SHA-256", scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()},
		{"SCRAM-SHA-512", scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()},
	}
}

// noSecrets fails if a password reached the broker's output or its SCRAM
// credential file.
func noSecrets(t *testing.T, b *broker) {
	t.Helper()
	stored, err := os.ReadFile(filepath.Join(b.dataDir, "scram-credentials.json"))
	if err != nil {
		t.Fatalf("the SCRAM credential file: %v", err)
	}
	for _, s := range saslSecrets {
		if strings.Contains(b.logs.String(), s) || strings.Contains(string(stored), s) {
			t.Fatalf("password %q in the broker's logs or credential file", s)
		}
	}
	if !strings.Contains(string(stored), `"bob"`) {
		t.Fatalf("credential file without bob:\n%s", stored)
	}
}

// TestSASLPlaintextClients: franz-go with PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512 produces and consumes on a SASL_PLAINTEXT listener; a
// wrong password fails with SASL_AUTHENTICATION_FAILED; a request before
// authentication closes the connection; a transaction commits (the
// coordinator's markers authenticate to the broker's own SASL listener as
// admin with SCRAM-SHA-512); no password reaches the logs.
func TestSASLPlaintextClients(t *testing.T) {
	addr := freeAddr(t)
	b := startBrokerProps(t, addr, saslProps("SASL_PLAINTEXT", addr))
	ctx := testCtx(t, 2*time.Minute)
	for _, m := range saslMechanisms() {
		t.Run(m.name, func(t *testing.T) {
			cl := b.client(kgo.SASL(m.mech), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			produceConsume(t, ctx, cl, "sasl-"+strings.ToLower(m.name), 50)
		})
	}
	for _, mech := range []kgosasl.Mechanism{
		plain.Auth{User: "alice", Pass: "wrong-secret"}.AsMechanism(),
		scram.Auth{User: "bob", Pass: "wrong-secret"}.AsSha512Mechanism(),
	} {
		cl := b.client(kgo.SASL(mech), kgo.RequestRetries(0))
		_, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest())
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("%s with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", mech.Name(), err)
		}
	}

	// Metadata without authenticating: the broker closes the connection.
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	body := md.AppendTo([]byte{0, 3, 0, 4, 0, 0, 0, 1, 0, 0})
	if _, err := c.Write(append([]byte{0, 0, 0, byte(len(body))}, body...)); err != nil {
		t.Fatal(err)
	}
	var buf [4]byte
	if n, err := c.Read(buf[:]); err == nil {
		t.Fatalf("Metadata before authentication answered (%d bytes)", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("connection still open 30s after a request before authentication")
	}

	txn := b.client(kgo.SASL(saslMechanisms()[2].mech), kgo.TransactionalID("sasl-txn"), kgo.DefaultProduceTopic("sasl-txn"),
		kgo.AllowAutoTopicCreation())
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit (markers through the SASL listener): %v\n%s", err, b.logs)
	}
	rd := b.client(kgo.SASL(saslMechanisms()[0].mech), kgo.ConsumeTopics("sasl-txn"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < 10; {
		fs := rd.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("read_committed after %d: %v", got, err)
		}
		got += fs.NumRecords()
	}
	noSecrets(t, b)
}

// saslPythonResult is the JSON line confluent/sasl.py prints.
type saslPythonResult struct {
	Produced  int      `json:"produced"`
	Values    []string `json:"values"`
	AuthError string   `json:"auth_error"`
}

func runSASLPython(t *testing.T, b *broker, args ...string) saslPythonResult {
	t.Helper()
	python := confluentPython(t)
	script, err := filepath.Abs(filepath.Join("confluent", "sasl.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 2*time.Minute)
	var res saslPythonResult
	runClientScript(t, b, pythonCommand(ctx, python, append([]string{script, b.addr}, args...)...), &res)
	return res
}

func checkPythonValues(t *testing.T, res saslPythonResult) {
	t.Helper()
	if res.AuthError != "" || res.Produced != 100 || len(res.Values) != 100 {
		t.Fatalf("sasl.py: %+v", res)
	}
	for i, v := range res.Values {
		if v != strconv.Itoa(i) {
			t.Fatalf("record %d is %q", i, v)
		}
	}
}

// TestSASLConfluentPython: confluent-kafka-python (librdkafka) with
// security.protocol=SASL_PLAINTEXT, sasl.mechanism, sasl.username and
// sasl.password produces and consumes with PLAIN and SCRAM-SHA-512, and a
// wrong password is refused with librdkafka's authentication error.
func TestSASLConfluentPython(t *testing.T) {
	addr := freeAddr(t)
	b := startBrokerProps(t, addr, saslProps("SASL_PLAINTEXT", addr))
	checkPythonValues(t, runSASLPython(t, b, "py-plain", "SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"))
	checkPythonValues(t, runSASLPython(t, b, "py-scram", "SASL_PLAINTEXT", "SCRAM-SHA-512", "bob", "bob-secret"))
	res := runSASLPython(t, b, "py-wrong", "SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "wrong-secret")
	if !strings.Contains(res.AuthError, "_AUTHENTICATION") || !strings.Contains(res.AuthError, "Authentication failed") {
		t.Fatalf("wrong password: %+v", res)
	}
	noSecrets(t, b)
}

// TestSASLSSLClients: a SASL_SSL listener with internal/tlstest
// certificates: franz-go (SCRAM-SHA-512 over TLS) and confluent-kafka-python
// (SCRAM-SHA-256, security.protocol=SASL_SSL with ssl.ca.location).
func TestSASLSSLClients(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "broker")
	addr := freeAddr(t)
	props := saslProps("SASL_SSL", addr) + "ssl.keystore.location=" + srv.Path + "\n"
	b := startBrokerProps(t, addr, props)
	ctx := testCtx(t, 2*time.Minute)
	cl := tlsClient(t, addr, tlstest.ClientConfig(ca, nil), kgo.SASL(saslMechanisms()[2].mech),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	produceConsume(t, ctx, cl, "sasl-ssl", 50)

	// Without TLS the SASL_SSL port answers nothing.
	plainCl := b.client(kgo.SASL(saslMechanisms()[2].mech), kgo.RequestRetries(0), kgo.DialTimeout(5*time.Second))
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := plainCl.Request(rctx, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("a client without TLS was served on the SASL_SSL listener")
	}
	checkPythonValues(t, runSASLPython(t, b, "py-sasl-ssl", "SASL_SSL", "SCRAM-SHA-256", "bob", "bob-secret", ca.Path))
	noSecrets(t, b)
}

// TestSASLClusterReplicates: two brokers whose only listener is
// SASL_PLAINTEXT. Followers and the transaction coordinator's markers
// authenticate to the other broker as admin with SCRAM-SHA-512
// (sasl.mechanism.inter.broker.protocol): an acks=all produce to a
// partition with two in-sync replicas succeeds and a transaction commits.
func TestSASLClusterReplicates(t *testing.T) {
	voters := []string{"0@" + freeAddr(t), "1@" + freeAddr(t)}
	var brokers []*broker
	for i := range voters {
		addr := freeAddr(t)
		brokers = append(brokers, startBrokerProps(t, addr, saslProps("SASL_PLAINTEXT", addr)+clusterProps,
			"--node-id", strconv.Itoa(i), "--controller-quorum", strings.Join(voters, ",")))
	}
	ctx := testCtx(t, 2*time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].addr, brokers[1].addr), kgo.SASL(saslMechanisms()[1].mech),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.TransactionalID("sasl-cluster-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitReplicatedTopic(t, ctx, cl, "replicated")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "replicated", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce over SASL replication: %v\n%s\n%s", err, brokers[0].logs, brokers[1].logs)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit (markers over SASL): %v", err)
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].addr, brokers[1].addr), kgo.SASL(saslMechanisms()[0].mech),
		kgo.ConsumeTopics("replicated"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got []string
	for len(got) < 50 {
		fs := rd.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("read_committed after %d: %v", len(got), err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got[:3], []string{"0", "1", "2"}) {
		t.Fatalf("read %v", got[:3])
	}
	for _, b := range brokers {
		if strings.Contains(b.logs.String(), "authenticating to broker") {
			t.Fatalf("an inter-broker connection failed to authenticate:\n%s", b.logs)
		}
	}
}

// TestSASLClusterReauthenticates: with connections.max.reauth.ms on a
// SASL_PLAINTEXT cluster, the brokers' own connections (the replica
// fetcher, the marker client) re-authenticate before their sessions end:
// acks=all produces keep succeeding over several lifetimes and no broker
// closes an inter-broker connection for an expired session.
func TestSASLClusterReauthenticates(t *testing.T) {
	voters := []string{"0@" + freeAddr(t), "1@" + freeAddr(t)}
	var brokers []*broker
	for i := range voters {
		addr := freeAddr(t)
		brokers = append(brokers, startBrokerProps(t, addr, saslProps("SASL_PLAINTEXT", addr)+clusterProps+"connections.max.reauth.ms=1000\n",
			"--node-id", strconv.Itoa(i), "--controller-quorum", strings.Join(voters, ",")))
	}
	ctx := testCtx(t, 2*time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].addr, brokers[1].addr), kgo.SASL(saslMechanisms()[1].mech),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitReplicatedTopic(t, ctx, cl, "reauth")
	for i := 0; i < 20; i++ { // 20 x 200 ms: four session lifetimes
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d: %v\n%s\n%s", i, err, brokers[0].logs, brokers[1].logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i, b := range brokers {
		if strings.Contains(b.logs.String(), "SASL session expired") {
			t.Errorf("broker %d closed a connection whose session expired:\n%s", i, b.logs)
		}
	}
}
