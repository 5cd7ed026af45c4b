package e2e

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestSASLClusterControllerPort: with a SASL_PLAINTEXT inter-broker
// listener the controller port (Raft and the controller RPC) needs SASL
// too: two strata serve brokers authenticate to each other's port as the
// inter-broker user (admin, SCRAM-SHA-512, a super user under the
// authorizer), form the quorum and replicate. A raw TCP peer sending a
// controller request gets nothing back and the broker logs one line; so
// does a peer with a wrong password; a user whose password is right but
// who lacks ClusterAction (bob) is closed after authenticating.
func TestSASLClusterControllerPort(t *testing.T) {
	voters := []string{"0@" + freeAddr(t), "1@" + freeAddr(t)}
	var brokers []*broker
	for i := range voters {
		addr := freeAddr(t)
		props := saslProps("SASL_PLAINTEXT", addr) + clusterProps +
			"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:admin\n"
		brokers = append(brokers, startBrokerProps(t, addr, props,
			"--node-id", strconv.Itoa(i), "--controller-quorum", strings.Join(voters, ",")))
	}
	ctx := testCtx(t, 2*time.Minute)
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].addr, brokers[1].addr),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	waitReplicatedTopic(t, ctx, admin, "formed") // the quorum formed over the SASL port
	for i, b := range brokers {
		if strings.Contains(b.logs.String(), "controller port:") {
			t.Fatalf("broker %d refused a connection of its own cluster:\n%s", i, b.logs)
		}
	}

	port := strings.TrimPrefix(voters[0], "0@")
	const failed = "controller port: authentication failed"
	conn, err := net.DialTimeout("tcp", port, 5*time.Second)
	controllerPortRefuses(t, conn, err, brokers[0], failed)
	if n := strings.Count(brokers[0].logs.String(), failed); n != 1 {
		t.Fatalf("%d lines for one refused connection:\n%s", n, brokers[0].logs)
	}

	dialAs := func(user, pass string) (net.Conn, error) {
		c, err := net.DialTimeout("tcp", port, 5*time.Second)
		if err != nil {
			return nil, err
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := sasl.Authenticate(actx, c, sasl.ClientCredentials{Mechanism: sasl.ScramSHA512, User: user, Password: pass}); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	if c, err := dialAs("admin", "wrong-secret"); err == nil {
		c.Close()
		t.Fatal("the controller port accepted a wrong password")
	} else if !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("a wrong password: %v", err)
	}
	waitFor(t, 15*time.Second, func() string {
		if n := strings.Count(brokers[0].logs.String(), failed); n != 2 {
			return strconv.Itoa(n) + " refusal lines, want 2"
		}
		return ""
	})

	conn, err = dialAs("bob", "bob-secret") // authenticates; not a broker
	controllerPortRefuses(t, conn, err, brokers[0], "controller port: peer not authorized")
	noSecrets(t, brokers[0])
}
