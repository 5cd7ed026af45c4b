package e2e

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratalog/strata/internal/sasl"
)

// startController runs a controller-only node (process.roles=controller)
// whose quorum address is addr: start waits until addr accepts
// connections, as it does for a broker's Kafka listener.
func startController(t *testing.T, id int, addr, quorum, props string) *broker {
	t.Helper()
	b := &broker{t: t, addr: addr, dataDir: t.TempDir(), ownListeners: true,
		args: []string{"--node-id", strconv.Itoa(id), "--process-roles", "controller",
			"--controller-quorum", quorum, "--config", props}}
	b.start()
	t.Cleanup(b.stop)
	return b
}

// controllerQuorum picks free quorum addresses for n controller-only
// nodes (ids 0..n-1) and returns them with the controller.quorum.voters
// value naming them.
func controllerQuorum(t *testing.T, n int) (addrs []string, quorum string) {
	addrs = make([]string, n)
	voters := make([]string, n)
	for i := range addrs {
		addrs[i] = freeAddr(t)
		voters[i] = fmt.Sprintf("%d@%s", i, addrs[i])
	}
	return addrs, strings.Join(voters, ",")
}

var leadingRe = regexp.MustCompile(`msg="leading the metadata quorum[^"]*".* term=(\d+)`)

// activeController is the index of the controller that logged leading the
// quorum in the highest term, and that term (-1, 0: none yet).
func activeController(ctls []*broker) (int, int) {
	best, bestTerm := -1, 0
	for i, c := range ctls {
		if c.cmd == nil {
			continue
		}
		for _, m := range leadingRe.FindAllStringSubmatch(c.logs.String(), -1) {
			if term, _ := strconv.Atoi(m[1]); term > bestTerm {
				best, bestTerm = i, term
			}
		}
	}
	return best, bestTerm
}

// TestClusterControllerOnlyNodes: Kafka's separate controllers. Three
// controller-only nodes (process.roles=controller) form the metadata
// quorum, two broker-only nodes (process.roles=broker) serve clients.
// Metadata and DescribeCluster list the two brokers only and name one of
// them as the controller; a topic with replication factor 2 is created, written and
// read back with franz-go; the active controller is SIGKILLed and
// CreateTopics still works through the two that remain (a new leader is
// elected among them, the brokers forward to it), and the new topic is
// written and read too.
func TestClusterControllerOnlyNodes(t *testing.T) {
	ctx := testCtx(t, 4*time.Minute)
	props := writeProps(t, clusterProps)
	ctlAddrs, quorum := controllerQuorum(t, 3)
	var ctls []*broker
	for i := range ctlAddrs {
		ctls = append(ctls, startController(t, i, ctlAddrs[i], quorum, props))
	}
	c := &testCluster{t: t}
	for id := 3; id < 5; id++ {
		c.brokers = append(c.brokers, startBroker(t, "", "--node-id", strconv.Itoa(id),
			"--process-roles", "broker", "--controller-quorum", quorum, "--config", props))
	}
	dump := func() string {
		var sb strings.Builder
		for i, b := range ctls {
			fmt.Fprintf(&sb, "--- controller %d:\n%s\n", i, b.logs)
		}
		return sb.String() + c.warnings()
	}
	cl := c.client()
	adm := kadm.NewClient(cl)
	waitFor(t, 60*time.Second, func() string {
		for id := int32(3); id < 5; id++ {
			md, err := metadataFrom(ctx, cl, id)
			if err != nil {
				return fmt.Sprintf("metadata from %d: %v", id, err)
			}
			var ids []int32
			for _, b := range md.Brokers {
				ids = append(ids, b.NodeID)
			}
			if len(ids) != 2 || !containsInt32(ids, 3) || !containsInt32(ids, 4) {
				return fmt.Sprintf("broker %d lists brokers %v, want [3 4]", id, ids)
			}
			if md.ControllerID != 3 && md.ControllerID != 4 {
				return fmt.Sprintf("broker %d names controller %d, not a broker", id, md.ControllerID)
			}
			dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl.Broker(int(id)))
			if err != nil {
				return fmt.Sprintf("DescribeCluster from %d: %v", id, err)
			}
			if len(dc.Brokers) != 2 || (dc.ControllerID != 3 && dc.ControllerID != 4) {
				return fmt.Sprintf("broker %d: DescribeCluster lists %d brokers, controller %d", id, len(dc.Brokers), dc.ControllerID)
			}
		}
		return ""
	})
	for _, b := range ctls {
		if strings.Contains(b.logs.String(), "strata broker listening") {
			t.Fatalf("a controller-only node started a broker:\n%s", b.logs)
		}
	}

	produceAndRead := func(topic string) {
		t.Helper()
		pcl := c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
		const n = 200
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			pcl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%03d", topic, i))}, func(_ *kgo.Record, err error) { errs <- err })
		}
		if err := pcl.Flush(ctx); err != nil {
			t.Fatalf("%s: flush: %v\n%s", topic, err, dump())
		}
		for i := 0; i < n; i++ {
			if err := <-errs; err != nil {
				t.Fatalf("%s: produce: %v\n%s", topic, err, dump())
			}
		}
		if r := pcl.ProduceSync(ctx, &kgo.Record{Value: []byte(topic + "-last")}); r.FirstErr() != nil {
			t.Fatalf("%s: produce: %v\n%s", topic, r.FirstErr(), dump())
		}
		got := consumeAll(t, ctx, c.seeds(), topic, n+1)
		seen := map[string]bool{}
		for _, r := range got {
			seen[string(r.Value)] = true
		}
		for i := 0; i < n; i++ {
			if v := fmt.Sprintf("%s-%03d", topic, i); !seen[v] {
				t.Fatalf("%s: %s not read back (%d records read)\n%s", topic, v, len(got), dump())
			}
		}
		if !seen[topic+"-last"] || len(got) != n+1 {
			t.Fatalf("%s: read %d records, want %d", topic, len(got), n+1)
		}
	}

	create := func(topic string) {
		t.Helper()
		waitFor(t, 60*time.Second, func() string {
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			r, err := adm.CreateTopic(cctx, 2, 2, nil, topic)
			if err == nil {
				err = r.Err
			}
			if err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
				return fmt.Sprintf("create %s: %v", topic, err)
			}
			for id := int32(3); id < 5; id++ {
				md, err := metadataFrom(ctx, cl, id)
				if err != nil {
					return err.Error()
				}
				mt := topicOf(md, topic)
				if mt == nil || len(mt.Partitions) != 2 {
					return fmt.Sprintf("broker %d: %s missing", id, topic)
				}
				for _, p := range mt.Partitions {
					if len(p.Replicas) != 2 || p.Leader < 3 || p.Leader > 4 || len(p.ISR) != 2 {
						return fmt.Sprintf("broker %d: %s partition %d replicas %v leader %d isr %v", id, topic, p.Partition, p.Replicas, p.Leader, p.ISR)
					}
				}
			}
			return ""
		})
	}

	create("before")
	produceAndRead("before")

	// A leader logs "leading the metadata quorum" once its session-reset
	// tick commits, which may come after it committed the topic above.
	var active, term int
	waitFor(t, 30*time.Second, func() string {
		if active, term = activeController(ctls); active < 0 {
			return "no controller logged leading the quorum\n" + dump()
		}
		return ""
	})
	t.Logf("killing controller %d (leader in term %d)", active, term)
	ctls[active].kill()

	create("after")
	produceAndRead("after")
	// The new leader commits the topic as soon as raft elects it; its
	// "leading the metadata quorum" line may come a little after.
	var next, nextTerm int
	waitFor(t, 30*time.Second, func() string {
		if next, nextTerm = activeController(ctls); next < 0 || next == active || nextTerm <= term {
			return fmt.Sprintf("after the kill: controller %d leads in term %d (was %d in term %d)\n%s", next, nextTerm, active, term, dump())
		}
		return ""
	})
	t.Logf("controller %d leads in term %d", next, nextTerm)
	// The topics created before and after the kill are both described.
	topics, err := adm.ListTopics(ctx, "before", "after")
	if err != nil || len(topics) != 2 || topics.Error() != nil {
		t.Fatalf("list: %v %v", err, topics)
	}
}

// TestSASLControllerOnlyNodes: with a SASL_PLAINTEXT inter-broker
// listener, three controller-only nodes and two broker-only nodes form
// the cluster over the SASL controller port (the brokers authenticate to
// the controllers as the inter-broker user, admin, a super user under the
// authorizer). A SCRAM user created through a broker afterwards (carol)
// reaches the controllers' stores, which check their port's peers: carol
// authenticates to a controller-only node's port, and is then closed for
// lacking ClusterAction. Without the controllers following the replicated
// credentials she would fail to authenticate.
func TestSASLControllerOnlyNodes(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	const secured = "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:admin\n"
	ctlAddrs, quorum := controllerQuorum(t, 3)
	var ctls []*broker
	for i := range ctlAddrs {
		// The listener is never bound on a controller-only node; it
		// carries the inter-broker SASL settings of the controller port.
		props := writeProps(t, saslProps("SASL_PLAINTEXT", freeAddr(t))+clusterProps+secured)
		ctls = append(ctls, startController(t, i, ctlAddrs[i], quorum, props))
	}
	var brokers []*broker
	for id := 3; id < 5; id++ {
		addr := freeAddr(t)
		brokers = append(brokers, startBrokerProps(t, addr, saslProps("SASL_PLAINTEXT", addr)+clusterProps+secured,
			"--node-id", strconv.Itoa(id), "--process-roles", "broker", "--controller-quorum", quorum))
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].addr, brokers[1].addr),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	waitReplicatedTopic(t, ctx, admin, "formed") // brokers registered through the SASL port

	res, err := kadm.NewClient(admin).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-secret"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("AlterUserSCRAMs: %v", err)
	}
	var conn net.Conn
	waitFor(t, 30*time.Second, func() string {
		c, err := net.DialTimeout("tcp", ctlAddrs[0], 5*time.Second)
		if err != nil {
			return err.Error()
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := sasl.Authenticate(actx, c, sasl.ClientCredentials{Mechanism: sasl.ScramSHA512, User: "carol", Password: "carol-secret"}); err != nil {
			c.Close()
			return "carol on controller 0's port: " + err.Error()
		}
		conn = c
		return ""
	})
	controllerPortRefuses(t, conn, nil, ctls[0], "controller port: peer not authorized")
}
