package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// aclProps is saslProps with Kafka's StandardAuthorizer on and the
// broker's own user admin (SCRAM-SHA-512, the inter-broker mechanism) a
// super user.
func aclProps(addr string) string {
	return saslProps("SASL_PLAINTEXT", addr) +
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n" +
		"super.users=User:admin\n"
}

// runACLs runs `strata acls` as admin against b.
func runACLs(t *testing.T, b *broker, args ...string) string {
	t.Helper()
	cmd := exec.Command(strataBin, append(append([]string{"acls"}, args...),
		"--brokers", b.addr, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "admin")...)
	cmd.Env = append(os.Environ(), "STRATA_SASL_PASSWORD=admin-secret")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("strata acls %q: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// TestACLsWithTheBinary: `strata serve` with authorizer.class.name and
// super.users from its properties file refuses alice's writes, `strata
// acls add` lets her write (and auto-create) one topic, the ACLs are in
// the data directory's acls.json and survive a restart, and the super
// user's transaction commits (the broker's markers authenticate as the
// super user admin).
func TestACLsWithTheBinary(t *testing.T) {
	addr := freeAddr(t)
	b := startBrokerProps(t, addr, aclProps(addr))
	ctx := testCtx(t, 2*time.Minute)
	aliceOpts := []kgo.Opt{kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.AllowAutoTopicCreation(), kgo.DisableIdempotentWrite(), kgo.RecordRetries(2)}
	alice := b.client(aliceOpts...)
	err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	out := runACLs(t, b, "add", "--allow-principal", "User:alice", "--topic", "orders", "--operation", "Write", "--operation", "Create")
	if strings.Count(out, "created ") != 2 {
		t.Fatalf("strata acls add:\n%s", out)
	}
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("alice with Write and Create: %v", err)
	}
	stored, err := os.ReadFile(filepath.Join(b.dataDir, "acls.json"))
	if err != nil || !strings.Contains(string(stored), `"User:alice"`) {
		t.Fatalf("acls.json: %v\n%s", err, stored)
	}

	b.restart()
	out = runACLs(t, b, "list", "--principal", "User:alice")
	if !strings.Contains(out, "orders") || !strings.Contains(out, "WRITE") || !strings.Contains(out, "CREATE") {
		t.Fatalf("strata acls list after restart:\n%s", out)
	}
	alice2 := b.client(aliceOpts...)
	if err := alice2.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("w")}).FirstErr(); err != nil {
		t.Fatalf("alice after restart: %v", err)
	}
	if err := alice2.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice to another topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	txn := b.client(kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()),
		kgo.TransactionalID("acl-txn"), kgo.DefaultProduceTopic("acl-txn"), kgo.AllowAutoTopicCreation())
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("t")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the super user's commit: %v\n%s", err, b.logs)
	}

	out = runACLs(t, b, "remove", "--topic", "orders")
	if !strings.Contains(out, "2 ACL(s) deleted") {
		t.Fatalf("strata acls remove:\n%s", out)
	}
	if err := alice2.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice after remove: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}
