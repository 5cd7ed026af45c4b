package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestControllerListenersKIP919: three controller-only nodes, each with a
// CONTROLLER listener (listeners + controller.listener.names), and one
// broker-only node. A franz-go client whose seed is one controller
// listener gets DescribeCluster(EndpointType=2) listing the three
// controllers at their controller listeners with the active controller
// (the node that logged leading the quorum) and DescribeQuorum listing
// the three voters (log end offsets, fetch times) with that leader and
// the broker as an observer; EndpointType=1 is MISMATCHED_ENDPOINT_TYPE
// there. `strata cluster quorum --bootstrap-controller` prints the same,
// and `strata cluster quorum --brokers` gets it through the broker.
func TestControllerListenersKIP919(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	ctlAddrs, quorum := controllerQuorum(t, 3)
	kafkaAddrs := make([]string, 3)
	var ctls []*broker
	for i := range ctlAddrs {
		kafkaAddrs[i] = freeAddr(t)
		props := writeProps(t, clusterProps+fmt.Sprintf("listeners=CONTROLLER://%s\ncontroller.listener.names=CONTROLLER\n", kafkaAddrs[i]))
		ctls = append(ctls, startController(t, i, ctlAddrs[i], quorum, props))
	}
	b := startBroker(t, "", "--node-id", "3", "--process-roles", "broker", "--controller-quorum", quorum, "--config", writeProps(t, clusterProps))
	dump := func() string {
		var sb strings.Builder
		for i, c := range ctls {
			fmt.Fprintf(&sb, "--- controller %d:\n%s\n", i, c.logs)
		}
		return sb.String() + "--- broker 3:\n" + b.logs.String()
	}
	for i, c := range ctls {
		if !strings.Contains(c.logs.String(), "strata controller listener") || !strings.Contains(c.logs.String(), "listen="+kafkaAddrs[i]) {
			t.Fatalf("controller %d did not log its controller listener on %s:\n%s", i, kafkaAddrs[i], c.logs)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddrs[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seed := cl.SeedBrokers()[0]
	var leader int32 = -1
	waitFor(t, 60*time.Second, func() string {
		idx, _ := activeController(ctls)
		if idx < 0 {
			return "no controller logged leading the quorum"
		}
		dc := kmsg.NewPtrDescribeClusterRequest()
		dc.EndpointType = 2
		dcr, err := dc.RequestWith(ctx, seed)
		if err != nil {
			return fmt.Sprintf("DescribeCluster: %v", err)
		}
		if dcr.ErrorCode != 0 || dcr.EndpointType != 2 || dcr.ClusterID == "" || dcr.ControllerID != int32(idx) || len(dcr.Brokers) != 3 {
			return fmt.Sprintf("DescribeCluster: %+v (active controller %d)", dcr, idx)
		}
		for i, c := range dcr.Brokers {
			if c.NodeID != int32(i) || net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))) != kafkaAddrs[i] {
				return fmt.Sprintf("controller %d listed as %+v, its listener is %s", i, c, kafkaAddrs[i])
			}
		}
		dq := kmsg.NewPtrDescribeQuorumRequest()
		dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
		dqr, err := dq.RequestWith(ctx, seed)
		if err != nil {
			return fmt.Sprintf("DescribeQuorum: %v", err)
		}
		if dqr.ErrorCode != 0 || len(dqr.Topics) != 1 || len(dqr.Topics[0].Partitions) != 1 {
			return fmt.Sprintf("DescribeQuorum: %+v", dqr)
		}
		p := dqr.Topics[0].Partitions[0]
		if p.LeaderID != int32(idx) || p.LeaderEpoch < 1 || len(p.CurrentVoters) != 3 || len(p.Observers) != 1 || p.Observers[0].ReplicaID != 3 {
			return fmt.Sprintf("DescribeQuorum partition: %+v (active controller %d)", p, idx)
		}
		for i, v := range p.CurrentVoters {
			if v.ReplicaID != int32(i) || v.LogEndOffset < 1 || v.LastFetchTimestamp <= 0 {
				return fmt.Sprintf("voter %d: %+v", i, v)
			}
		}
		leader = p.LeaderID
		return ""
	})
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.EndpointType = 1
	dcr, err := dc.RequestWith(ctx, seed)
	if err != nil || dcr.ErrorCode != kerr.MismatchedEndpointType.Code {
		t.Fatalf("DescribeCluster for brokers on a controller listener: %+v, %v", dcr, err)
	}

	run := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, strataBin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("strata %s: %v\n%s\n%s", strings.Join(args, " "), err, out, dump())
		}
		return string(out)
	}
	out := run("cluster", "quorum", "--bootstrap-controller", kafkaAddrs[2])
	t.Logf("strata cluster quorum --bootstrap-controller %s:\n%s", kafkaAddrs[2], out)
	var ctlList []string
	for i, a := range kafkaAddrs {
		ctlList = append(ctlList, fmt.Sprintf("%d@%s", i, a))
	}
	for _, want := range []string{
		fmt.Sprintf("LeaderId:         %d\n", leader),
		"CurrentVoters:    [0,1,2]\n",
		"CurrentObservers: [3]\n",
		"Controllers:      " + strings.Join(ctlList, ",") + "\n",
		"ClusterId:",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("cluster quorum --bootstrap-controller: no %q in\n%s", want, out)
		}
	}
	var q struct {
		LeaderID int32 `json:"leader_id"`
		Voters   []struct {
			ID           int32  `json:"id"`
			Status       string `json:"status"`
			LogEndOffset int64  `json:"log_end_offset"`
		} `json:"voters"`
		Controllers []struct {
			ID int32 `json:"id"`
		} `json:"controllers"`
	}
	js := run("cluster", "quorum", "--bootstrap-controller", kafkaAddrs[0]+","+kafkaAddrs[2], "--format", "json")
	if err := json.Unmarshal([]byte(js), &q); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	var ids []int32
	for _, v := range q.Voters {
		ids = append(ids, v.ID)
		if (v.Status == "Leader") != (v.ID == leader) || v.LogEndOffset < 1 {
			t.Fatalf("voter %+v (leader %d)", v, leader)
		}
	}
	if q.LeaderID != leader || !slices.Equal(ids, []int32{0, 1, 2}) || len(q.Controllers) != 3 {
		t.Fatalf("json: %s", js)
	}
	out = run("cluster", "quorum", "--brokers", b.addr)
	if !strings.Contains(out, fmt.Sprintf("LeaderId:         %d\n", leader)) || !strings.Contains(out, "CurrentVoters:    [0,1,2]\n") ||
		strings.Contains(out, "Controllers:") {
		t.Fatalf("cluster quorum --brokers:\n%s", out)
	}
}

// TestCombinedNodeControllerListener: a combined node (broker and the
// only voter) with a PLAINTEXT and a CONTROLLER listener serves clients
// on the first and controller clients on the second: Metadata lists the
// broker at its PLAINTEXT address only, DescribeCluster(EndpointType=2)
// on the controller listener names the node at the controller listener,
// DescribeQuorum there and on the broker listener name it the leader,
// and the controller listener closes the connection on Metadata.
func TestCombinedNodeControllerListener(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	brokerAddr, ctlAddr, raftAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	b := startBrokerProps(t, brokerAddr, clusterProps+fmt.Sprintf(
		"listeners=PLAINTEXT://%s,CONTROLLER://%s\ncontroller.listener.names=CONTROLLER\n", brokerAddr, ctlAddr),
		"--node-id", "0", "--controller-quorum", "0@"+raftAddr)
	bcl, err := kgo.NewClient(kgo.SeedBrokers(brokerAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer bcl.Close()
	ccl, err := kgo.NewClient(kgo.SeedBrokers(ctlAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer ccl.Close()
	seed := ccl.SeedBrokers()[0]
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	waitFor(t, 60*time.Second, func() string {
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, bcl)
		if err != nil {
			return fmt.Sprintf("Metadata: %v", err)
		}
		if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(int(md.Brokers[0].Port))) != brokerAddr {
			return fmt.Sprintf("Metadata brokers %+v, want the one at %s", md.Brokers, brokerAddr)
		}
		dc := kmsg.NewPtrDescribeClusterRequest()
		dc.EndpointType = 2
		dcr, err := dc.RequestWith(ctx, seed)
		if err != nil {
			return fmt.Sprintf("DescribeCluster: %v", err)
		}
		if dcr.ErrorCode != 0 || dcr.ControllerID != 0 || len(dcr.Brokers) != 1 ||
			net.JoinHostPort(dcr.Brokers[0].Host, strconv.Itoa(int(dcr.Brokers[0].Port))) != ctlAddr {
			return fmt.Sprintf("DescribeCluster controllers: %+v", dcr)
		}
		for _, r := range []kmsg.Requestor{seed, bcl} {
			dqr, err := dq.RequestWith(ctx, r)
			if err != nil {
				return fmt.Sprintf("DescribeQuorum: %v", err)
			}
			if dqr.ErrorCode != 0 || len(dqr.Topics) != 1 || dqr.Topics[0].Partitions[0].LeaderID != 0 ||
				len(dqr.Topics[0].Partitions[0].CurrentVoters) != 1 {
				return fmt.Sprintf("DescribeQuorum: %+v", dqr)
			}
		}
		return ""
	})
	if !strings.Contains(b.logs.String(), "listener=CONTROLLER protocol=PLAINTEXT listen="+ctlAddr) {
		t.Fatalf("no CONTROLLER listener logged:\n%s", b.logs)
	}
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, seed); err == nil {
		t.Fatal("Metadata answered on the controller listener")
	}
}
