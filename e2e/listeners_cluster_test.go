package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterTwoListeners: three brokers of one cluster serve an INTERNAL
// listener (the inter-broker one) and brokers 0 and 1 also an EXTERNAL
// one, as a Kafka cluster with separate client and replication networks
// does. Every broker registers each of its listeners with the controller,
// and a client is told the brokers' addresses on the listener it
// connected to: an EXTERNAL client sees brokers 0 and 1 at their EXTERNAL
// ports (broker 2, with no EXTERNAL listener, is left out and a partition
// it leads answers LISTENER_NOT_FOUND), produces with acks=all to a
// partition replicated over INTERNAL to all three, and reads it back; an
// INTERNAL client sees all three at their INTERNAL ports.
func TestClusterTwoListeners(t *testing.T) {
	voters := []string{"0@" + freeAddr(t), "1@" + freeAddr(t), "2@" + freeAddr(t)}
	internal := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	external := []string{freeAddr(t), freeAddr(t), ""}
	var brokers []*broker
	for i := range voters {
		listeners := "INTERNAL://" + internal[i]
		proto := "INTERNAL:PLAINTEXT"
		addr := internal[i]
		if external[i] != "" {
			listeners += ",EXTERNAL://" + external[i]
			proto += ",EXTERNAL:PLAINTEXT"
			addr = external[i]
		}
		props := fmt.Sprintf("listeners=%s\nlistener.security.protocol.map=%s\ninter.broker.listener.name=INTERNAL\n%s",
			listeners, proto, clusterProps)
		brokers = append(brokers, startBrokerProps(t, addr, props, "--node-id", strconv.Itoa(i),
			"--controller-quorum", strings.Join(voters, ",")))
	}
	ctx := testCtx(t, 2*time.Minute)
	ext, err := kgo.NewClient(kgo.SeedBrokers(external[0]), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Close()
	in, err := kgo.NewClient(kgo.SeedBrokers(internal[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()

	port := func(addr string) int32 {
		_, p, _ := strings.Cut(addr, ":")
		n, _ := strconv.Atoi(p)
		return int32(n)
	}
	brokersOf := func(md *kmsg.MetadataResponse) map[int32]int32 {
		m := map[int32]int32{}
		for _, b := range md.Brokers {
			m[b.NodeID] = b.Port
		}
		return m
	}
	// Each listener's clients are told that listener's ports, once every
	// broker has registered.
	waitFor(t, time.Minute, func() string {
		req := kmsg.NewPtrMetadataRequest()
		mi, err := req.RequestWith(ctx, in.Broker(0))
		if err != nil {
			return "internal metadata: " + err.Error()
		}
		got := brokersOf(mi)
		for i, a := range internal {
			if got[int32(i)] != port(a) {
				return fmt.Sprintf("INTERNAL client told %v, want broker %d at port %d%s", got, i, port(a), warningsOf(brokers))
			}
		}
		me, err := req.RequestWith(ctx, ext.Broker(0))
		if err != nil {
			return "external metadata: " + err.Error()
		}
		got = brokersOf(me)
		if len(got) != 2 || got[0] != port(external[0]) || got[1] != port(external[1]) {
			return fmt.Sprintf("EXTERNAL client told %v, want brokers 0 and 1 at %s and %s", got, external[0], external[1])
		}
		return ""
	})

	// Partition 0 led by broker 0, partition 1 by broker 2 (reachable on
	// INTERNAL only); every partition replicated to all three.
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "two-listeners", -1, -1
	for p, replicas := range [][]int32{{0, 1, 2}, {2, 0, 1}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	create.Topics = append(create.Topics, rt)
	if resp, err := create.RequestWith(ctx, ext); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	waitFor(t, time.Minute, func() string {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("two-listeners")
		req.Topics = append(req.Topics, rt)
		me, err := req.RequestWith(ctx, ext.Broker(1))
		if err != nil {
			return err.Error()
		}
		tp := topicOf(me, "two-listeners")
		if tp == nil || len(tp.Partitions) != 2 {
			return fmt.Sprintf("EXTERNAL metadata: %+v", me.Topics)
		}
		p0, p1 := tp.Partitions[0], tp.Partitions[1]
		if p0.ErrorCode != 0 || p0.Leader != 0 || len(p0.ISR) != 3 {
			return fmt.Sprintf("partition 0 over EXTERNAL: error %d leader %d ISR %v", p0.ErrorCode, p0.Leader, p0.ISR)
		}
		if p1.ErrorCode != kerr.ListenerNotFound.Code || p1.Leader != -1 {
			return fmt.Sprintf("partition 1 (led by broker 2, no EXTERNAL listener) over EXTERNAL: error %d leader %d, want LISTENER_NOT_FOUND and -1",
				p1.ErrorCode, p1.Leader)
		}
		mi, err := req.RequestWith(ctx, in.Broker(1))
		if err != nil {
			return err.Error()
		}
		if ti := topicOf(mi, "two-listeners"); ti == nil || len(ti.Partitions) != 2 || ti.Partitions[1].ErrorCode != 0 || ti.Partitions[1].Leader != 2 {
			return fmt.Sprintf("INTERNAL metadata: %+v", mi.Topics)
		}
		return ""
	})

	// acks=all over EXTERNAL, replicated over INTERNAL, read back.
	const n = 200
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: "two-listeners", Partition: 0, Value: []byte(strconv.Itoa(i))}
		if err := ext.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d over EXTERNAL: %v%s", i, err, warningsOf(brokers))
		}
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(external[1]), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"two-listeners": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for got := 0; got < n; {
		fs := rd.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume over EXTERNAL after %d: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != strconv.Itoa(got) {
				t.Fatalf("record %d holds %q", got, r.Value)
			}
			got++
		})
	}

	// FindCoordinator names a coordinator by its address on the asking
	// client's listener, or COORDINATOR_NOT_AVAILABLE when it has none
	// there (broker 2 over EXTERNAL).
	extPorts := map[int32]bool{port(external[0]): true, port(external[1]): true}
	coordinator := func(resp *kmsg.FindCoordinatorResponse) (code int16, node, port int32) {
		if len(resp.Coordinators) > 0 { // v4+
			c := resp.Coordinators[0]
			return c.ErrorCode, c.NodeID, c.Port
		}
		return resp.ErrorCode, resp.NodeID, resp.Port
	}
	found := 0
	for i := 0; i < 12; i++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = fmt.Sprintf("group-%d", i)
		req.CoordinatorKeys = []string{req.CoordinatorKey}
		waitFor(t, time.Minute, func() string {
			resp, err := req.RequestWith(ctx, ext.Broker(0))
			if err != nil {
				return err.Error()
			}
			code, node, p := coordinator(resp)
			switch {
			case code == 0 && extPorts[p] && node != 2:
				found++
				return ""
			case code == kerr.CoordinatorNotAvailable.Code && node == -1:
				ri, err := req.RequestWith(ctx, in.Broker(0))
				if err != nil {
					return err.Error()
				}
				icode, inode, iport := coordinator(ri)
				if icode != 0 {
					return fmt.Sprintf("%s over INTERNAL: error %d", req.CoordinatorKey, icode) // still loading: retry
				}
				if inode != 2 || iport != port(internal[2]) {
					return fmt.Sprintf("%s: not available over EXTERNAL, but INTERNAL names broker %d port %d", req.CoordinatorKey, inode, iport)
				}
				return ""
			default:
				return fmt.Sprintf("%s over EXTERNAL: error %d node %d port %d", req.CoordinatorKey, code, node, p)
			}
		})
	}
	if found == 0 {
		t.Fatal("no coordinator found over EXTERNAL among 12 groups")
	}
}

// warningsOf is the brokers' WARN and ERROR lines, for failure messages.
func warningsOf(brokers []*broker) string {
	c := &testCluster{brokers: brokers}
	if w := c.warnings(); w != "" {
		return "\n" + w
	}
	return ""
}
