package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testCluster is n `strata serve` processes forming one cluster: every
// broker is a controller voter (combined mode) with its Raft port on
// loopback.
type testCluster struct {
	t       *testing.T
	brokers []*broker
}

// clusterProps makes failover quick: a broker that stops heartbeating is
// fenced after 3 s (Kafka's default is 9 s).
const clusterProps = "broker.session.timeout.ms=3000\nbroker.heartbeat.interval.ms=250\n"

func startCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	return startClusterProps(t, n, n, clusterProps)
}

// startClusterProps starts n brokers, the first nVoters of them controller
// voters (the others observers), with propsText as their config file.
func startClusterProps(t *testing.T, n, nVoters int, propsText string) *testCluster {
	t.Helper()
	voters := make([]string, nVoters)
	for i := range voters {
		voters[i] = fmt.Sprintf("%d@%s", i, freeAddr(t))
	}
	quorum := strings.Join(voters, ",")
	props := writeProps(t, propsText)
	c := &testCluster{t: t}
	for i := 0; i < n; i++ {
		c.brokers = append(c.brokers, startBroker(t, "", "--node-id", fmt.Sprint(i),
			"--controller-quorum", quorum, "--config", props))
	}
	return c
}

// warnings collects the WARN and ERROR lines of every broker's log (for
// failure messages).
func (c *testCluster) warnings() string {
	var sb strings.Builder
	for i, b := range c.brokers {
		for _, line := range strings.Split(b.logs.String(), "\n") {
			if (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || os.Getenv("STRATA_E2E_DEBUG") != "") &&
				!strings.Contains(line, "component=raft") {
				fmt.Fprintf(&sb, "broker %d: %s\n", i, line)
			}
		}
	}
	return sb.String()
}

// seeds lists the addresses of the brokers that are running.
func (c *testCluster) seeds() []string {
	var out []string
	for _, b := range c.brokers {
		if b.cmd != nil {
			out = append(out, b.addr)
		}
	}
	return out
}

func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	// MetadataMinAge: after a failover franz-go waits for a metadata
	// refresh before it retries, at most one per 5 s by default.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.MetadataMinAge(250 * time.Millisecond)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// metadataFrom asks broker id itself (not whichever broker the client
// picks) for the metadata of every topic.
func metadataFrom(ctx context.Context, cl *kgo.Client, id int32) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	return resp, err
}

// waitFor polls cond every 50 ms until it returns "" (success) or the
// deadline passes; the last complaint is the failure message.
func waitFor(t *testing.T, d time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitBrokers waits until broker id's Metadata lists exactly want live
// brokers.
func (c *testCluster) waitBrokers(ctx context.Context, cl *kgo.Client, id int32, want int) {
	c.t.Helper()
	waitFor(c.t, 60*time.Second, func() string {
		md, err := metadataFrom(ctx, cl, id)
		if err != nil {
			return fmt.Sprintf("metadata from %d: %v", id, err)
		}
		if len(md.Brokers) != want {
			return fmt.Sprintf("broker %d lists %d brokers, want %d", id, len(md.Brokers), want)
		}
		return ""
	})
}

func topicOf(md *kmsg.MetadataResponse, name string) *kmsg.MetadataResponseTopic {
	for i := range md.Topics {
		if md.Topics[i].Topic != nil && *md.Topics[i].Topic == name {
			return &md.Topics[i]
		}
	}
	return nil
}

// TestClusterLastVoterStops: a cluster's brokers stopped one at a time
// with SIGTERM each exit cleanly within stop's 30 s, the last voter too,
// whose controlled shutdown finds no quorum and gives up. (Other cluster
// tests end with the last broker killed instead: stopCluster.)
func TestClusterLastVoterStops(t *testing.T) {
	c := startCluster(t, 3)
	ctx := testCtx(t, time.Minute)
	cl := c.client()
	for id := int32(0); id < 3; id++ {
		c.waitBrokers(ctx, cl, id, 3)
	}
	cl.Close()
	for i := 2; i >= 0; i-- {
		b := c.brokers[i]
		b.stop()
		if !strings.Contains(b.logs.String(), "stopped cleanly") {
			t.Fatalf("broker %d did not stop cleanly on SIGTERM:\n%s", i, b.logs)
		}
	}
	if logs := c.brokers[0].logs.String(); !strings.Contains(logs, "the metadata quorum has no leader") {
		t.Fatalf("the last voter's controlled shutdown did not give up for want of a quorum:\n%s", logs)
	}
}

// TestClusterReplicatedTopicFailover: three brokers; a topic with
// replication factor 3 has its leaders spread evenly; SIGKILL of a leader's
// broker elects new leaders on the survivors after the session timeout and
// producers carry on; the killed broker comes back and is listed again;
// CreatePartitions and DeleteTopics act on every broker.
func TestClusterReplicatedTopicFailover(t *testing.T) {
	c := startCluster(t, 3)
	ctx := testCtx(t, 4*time.Minute)
	cl := c.client()
	adm := kadm.NewClient(cl)
	for id := int32(0); id < 3; id++ {
		c.waitBrokers(ctx, cl, id, 3)
	}

	// Every broker reports the same cluster id.
	ids := map[string]bool{}
	for id := int32(0); id < 3; id++ {
		md, err := metadataFrom(ctx, cl, id)
		if err != nil || md.ClusterID == nil {
			t.Fatalf("metadata from %d: %v", id, err)
		}
		ids[*md.ClusterID] = true
	}
	if len(ids) != 1 {
		t.Fatalf("brokers report different cluster ids: %v", ids)
	}

	// DescribeCluster lists the three brokers and a controller among them.
	bm, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bm.Brokers) != 3 || bm.Controller < 0 || bm.Controller > 2 {
		t.Fatalf("cluster: %d brokers, controller %d", len(bm.Brokers), bm.Controller)
	}

	const topic, partitions = "replicated", 6
	resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	// Every broker learns the topic promptly (the one that answered
	// CreateTopics already has it).
	var mt *kmsg.MetadataResponseTopic
	for id := int32(0); id < 3; id++ {
		waitFor(t, 10*time.Second, func() string {
			md, err := metadataFrom(ctx, cl, id)
			if err != nil {
				return err.Error()
			}
			if mt = topicOf(md, topic); mt == nil || len(mt.Partitions) != partitions {
				return fmt.Sprintf("broker %d: topic %s missing or with the wrong partition count", id, topic)
			}
			return ""
		})
	}
	if mt.TopicID != resp.ID {
		t.Fatalf("metadata topic id %x, CreateTopics answered %x", mt.TopicID, resp.ID)
	}
	leads := map[int32]int{}
	for _, p := range mt.Partitions {
		if p.ErrorCode != 0 || len(p.Replicas) != 3 || len(p.ISR) != 3 || p.Leader != p.Replicas[0] {
			t.Fatalf("partition %d: err %d leader %d replicas %v isr %v", p.Partition, p.ErrorCode, p.Leader, p.Replicas, p.ISR)
		}
		leads[p.Leader]++
	}
	for id := int32(0); id < 3; id++ {
		if leads[id] != partitions/3 {
			t.Fatalf("leaders not spread evenly: %v", leads)
		}
	}

	produce := func(cl *kgo.Client, from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("v%d", i))}
			err := cl.ProduceSync(pctx, r).FirstErr()
			cancel()
			if err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce(producer, 0, 60)

	// SIGKILL the leader of partition 0: its partitions move to the others.
	victim := mt.Partitions[0].Leader
	killed := time.Now()
	c.brokers[victim].kill()
	survivor := (victim + 1) % 3
	waitFor(t, 60*time.Second, func() string {
		md, err := metadataFrom(ctx, cl, survivor)
		if err != nil {
			return err.Error()
		}
		mt := topicOf(md, topic)
		if mt == nil {
			return "topic gone"
		}
		if len(md.Brokers) != 2 {
			return fmt.Sprintf("%d brokers listed after the kill", len(md.Brokers))
		}
		for _, p := range mt.Partitions {
			if p.Leader < 0 || p.Leader == victim {
				return fmt.Sprintf("partition %d still led by %d", p.Partition, p.Leader)
			}
			for _, r := range p.ISR {
				if r == victim {
					return fmt.Sprintf("partition %d: killed broker %d still in ISR %v", p.Partition, victim, p.ISR)
				}
			}
		}
		return ""
	})
	t.Logf("leaders moved off the killed broker %v after the kill (session timeout 3s)", time.Since(killed).Round(time.Millisecond))
	produce(producer, 60, 60) // the producer refreshes metadata and continues

	// Every acknowledged record is there, once, in order per key: the
	// records acknowledged by the killed leader survived on its followers.
	acked := map[string][]string{}
	for i := 0; i < 120; i++ {
		acked[fmt.Sprint(i)] = append(acked[fmt.Sprint(i)], fmt.Sprintf("v%d", i))
	}
	if rep := checkAcked(acked, consumeAll(t, ctx, c.seeds(), topic, 120)); !rep.ok() {
		t.Fatalf("after failover: %s", rep)
	}

	// The broker returns (new incarnation) and is listed again.
	c.brokers[victim].start()
	c.waitBrokers(ctx, cl, survivor, 3)
	c.waitBrokers(ctx, cl, victim, 3)

	// It catches up and rejoins every ISR; a preferred election gives it
	// back the partitions it led.
	waitFor(t, 60*time.Second, func() string {
		md, err := metadataFrom(ctx, cl, survivor)
		if err != nil {
			return err.Error()
		}
		for _, p := range topicOf(md, topic).Partitions {
			if len(p.ISR) != 3 {
				return fmt.Sprintf("partition %d: isr %v", p.Partition, p.ISR)
			}
		}
		return ""
	})
	ts := make(kadm.TopicsSet)
	for p := int32(0); p < partitions; p++ {
		ts.Add(topic, p)
	}
	er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, ts)
	if err != nil {
		t.Fatal(err)
	}
	for p, r := range er[topic] {
		if r.Err != nil && r.Err != kerr.ElectionNotNeeded {
			t.Fatalf("preferred election of partition %d: %v %s", p, r.Err, r.ErrMessage)
		}
	}
	for id := int32(0); id < 3; id++ {
		waitFor(t, 10*time.Second, func() string {
			md, err := metadataFrom(ctx, cl, id)
			if err != nil {
				return err.Error()
			}
			for _, p := range topicOf(md, topic).Partitions {
				if p.Leader != p.Replicas[0] {
					return fmt.Sprintf("broker %d: partition %d led by %d, preferred %d", id, p.Partition, p.Leader, p.Replicas[0])
				}
			}
			return ""
		})
	}

	// Reassign partition 0 to two replicas (completes at once: both are in
	// sync), then back to three (completes when the added one caught up
	// and joined the ISR).
	md, err := metadataFrom(ctx, cl, survivor)
	if err != nil {
		t.Fatal(err)
	}
	orig := append([]int32(nil), topicOf(md, topic).Partitions[0].Replicas...)
	reassign := func(replicas []int32) {
		t.Helper()
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(topic, 0, replicas)
		rs, err := adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			t.Fatalf("reassign to %v: %v", replicas, err)
		}
		waitFor(t, 60*time.Second, func() string {
			md, err := metadataFrom(ctx, cl, survivor)
			if err != nil {
				return err.Error()
			}
			p := topicOf(md, topic).Partitions[0]
			if fmt.Sprint(p.Replicas) != fmt.Sprint(replicas) || len(p.ISR) != len(replicas) {
				return fmt.Sprintf("replicas %v isr %v, want %v", p.Replicas, p.ISR, replicas)
			}
			lr, err := adm.ListPartitionReassignments(ctx, ts)
			if err != nil {
				return err.Error()
			}
			if len(lr[topic]) != 0 {
				return fmt.Sprintf("reassignment still listed: %+v", lr[topic])
			}
			return ""
		})
	}
	reassign(orig[:2])
	reassign(orig)

	// Grow the topic: every broker sees 9 partitions of 3 replicas.
	cp, err := adm.CreatePartitions(ctx, 3, topic)
	if err != nil || cp[topic].Err != nil {
		t.Fatalf("create partitions: %v %v", err, cp[topic].Err)
	}
	for id := int32(0); id < 3; id++ {
		waitFor(t, 30*time.Second, func() string {
			md, err := metadataFrom(ctx, cl, id)
			if err != nil {
				return err.Error()
			}
			mt := topicOf(md, topic)
			if mt == nil || len(mt.Partitions) != partitions+3 {
				return fmt.Sprintf("broker %d: topic not grown", id)
			}
			for _, p := range mt.Partitions[partitions:] {
				if len(p.Replicas) != 3 || p.Leader < 0 {
					return fmt.Sprintf("broker %d: new partition %d replicas %v leader %d", id, p.Partition, p.Replicas, p.Leader)
				}
			}
			return ""
		})
	}

	// Delete it: gone from every broker's metadata and data directory.
	dr, err := adm.DeleteTopics(ctx, topic)
	if err != nil || dr[topic].Err != nil {
		t.Fatalf("delete: %v %v", err, dr[topic].Err)
	}
	for id, b := range c.brokers {
		waitFor(t, 30*time.Second, func() string {
			md, err := metadataFrom(ctx, cl, int32(id))
			if err != nil {
				return err.Error()
			}
			if topicOf(md, topic) != nil {
				return fmt.Sprintf("broker %d still lists %s", id, topic)
			}
			dirs, _ := filepath.Glob(filepath.Join(b.dataDir, topic+"-*"))
			if len(dirs) != 0 {
				return fmt.Sprintf("broker %d still has %v", id, dirs)
			}
			return ""
		})
	}
	if _, err := os.Stat(filepath.Join(c.brokers[0].dataDir, "controller")); err != nil {
		t.Fatalf("controller directory: %v", err)
	}
}

// TestClusterControllerKillDuringTopicCreation kills the metadata quorum's
// leader while topics are being created through another broker. Afterwards
// the two survivors agree on every topic (same ids, same partitions, same
// leaders and epochs), every partition has exactly one leader among the
// live brokers, and creating the topics again yields each exactly once.
func TestClusterControllerKillDuringTopicCreation(t *testing.T) {
	c := startCluster(t, 3)
	ctx := testCtx(t, 4*time.Minute)
	cl := c.client()
	for id := int32(0); id < 3; id++ {
		c.waitBrokers(ctx, cl, id, 3)
	}
	adm := kadm.NewClient(cl)
	bm, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ctlID := bm.Controller
	if ctlID < 0 || ctlID > 2 {
		t.Fatalf("controller %d", ctlID)
	}

	const topics = 16
	name := func(i int) string { return fmt.Sprintf("t%02d", i) }
	var (
		mu      sync.Mutex
		outcome = map[string]error{}
	)
	created := make(chan struct{}, topics)
	// Four creators, so that creations are in flight when the controller
	// dies.
	var creators sync.WaitGroup
	for w := 0; w < 4; w++ {
		creators.Add(1)
		go func(w int) { // owner: this test; ends after its topics
			defer creators.Done()
			for i := w; i < topics; i += 4 {
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				r, err := adm.CreateTopic(cctx, 3, 3, nil, name(i))
				cancel()
				if err == nil {
					err = r.Err
				}
				mu.Lock()
				outcome[name(i)] = err
				mu.Unlock()
				created <- struct{}{}
			}
		}(w)
	}
	for i := 0; i < 5; i++ {
		<-created
	}
	c.brokers[ctlID].kill()
	creators.Wait()

	// Create every topic again: each is created now or already exists.
	for i := 0; i < topics; i++ {
		waitFor(t, 60*time.Second, func() string {
			r, err := adm.CreateTopic(ctx, 3, 3, nil, name(i))
			if err == nil {
				err = r.Err
			}
			if err == nil || err == kerr.TopicAlreadyExists {
				return ""
			}
			if err == kerr.InvalidReplicationFactor {
				// Only two brokers are live: a replication factor of 3 is
				// refused, so create what was not created with 2.
				r, err = adm.CreateTopic(ctx, 3, 2, nil, name(i))
				if err == nil {
					err = r.Err
				}
				if err == nil || err == kerr.TopicAlreadyExists {
					return ""
				}
			}
			return fmt.Sprintf("creating %s: %v", name(i), err)
		})
	}

	var live []int32
	for id := int32(0); id < 3; id++ {
		if id != ctlID {
			live = append(live, id)
		}
	}
	describe := func(id int32) (string, string) {
		md, err := metadataFrom(ctx, cl, id)
		if err != nil {
			return "", err.Error()
		}
		var lines []string
		ids := map[[16]byte]string{}
		n := 0
		for _, mt := range md.Topics {
			if strings.HasPrefix(*mt.Topic, "__") {
				continue // a coordinator's internal topic, local to each broker
			}
			n++
			n := *mt.Topic
			if other, dup := ids[mt.TopicID]; dup {
				return "", fmt.Sprintf("topics %s and %s share an id", n, other)
			}
			ids[mt.TopicID] = n
			for _, p := range mt.Partitions {
				ok := false
				for _, l := range live {
					ok = ok || p.Leader == l
				}
				if !ok {
					return "", fmt.Sprintf("broker %d: %s-%d led by %d", id, n, p.Partition, p.Leader)
				}
				lines = append(lines, fmt.Sprintf("%s %x %d leader=%d epoch=%d replicas=%v isr=%v",
					n, mt.TopicID, p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR))
			}
		}
		if n != topics {
			return "", fmt.Sprintf("broker %d lists %d topics, want %d", id, n, topics)
		}
		sort.Strings(lines)
		return strings.Join(lines, "\n"), ""
	}
	waitFor(t, 60*time.Second, func() string {
		a, msg := describe(live[0])
		if msg != "" {
			return msg
		}
		b, msg := describe(live[1])
		if msg != "" {
			return msg
		}
		if a != b {
			return fmt.Sprintf("brokers %d and %d disagree:\n%s\n---\n%s", live[0], live[1], a, b)
		}
		return ""
	})
	mu.Lock()
	defer mu.Unlock()
	failed := 0
	for _, err := range outcome {
		if err != nil {
			failed++
		}
	}
	t.Logf("controller %d killed during creation: %d of %d first attempts failed and were retried", ctlID, failed, topics)
}

// ackReport counts what a consumer read against what producers had
// acknowledged.
type ackReport struct {
	Acked, Read          int
	Lost, Dup, Reordered int
	Examples             []string // up to 10 offending records
}

func (r ackReport) ok() bool { return r.Lost == 0 && r.Dup == 0 && r.Reordered == 0 }

func (r ackReport) String() string {
	return fmt.Sprintf("acked %d, read %d: lost %d, duplicated %d, reordered %d %v",
		r.Acked, r.Read, r.Lost, r.Dup, r.Reordered, r.Examples)
}

// checkAcked is the no-loss checker: acked maps each key to the values
// acknowledged for it in send order (one entry per acknowledged send);
// read is what a consumer got, in partition order. A value acknowledged but
// never read is lost; read more often than acknowledged, duplicated; read
// before a value acknowledged earlier for the same key, reordered. Values
// read but never acknowledged (sends whose outcome the producer did not
// learn) are allowed.
func checkAcked(acked map[string][]string, read []*kgo.Record) ackReport {
	var r ackReport
	note := func(format string, args ...any) {
		if len(r.Examples) < 10 {
			r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
		}
	}
	pos := map[string]map[string]int{} // key -> value -> index in acked order
	for k, vs := range acked {
		r.Acked += len(vs)
		m := make(map[string]int, len(vs))
		for i, v := range vs {
			m[v] = i
		}
		pos[k] = m
	}
	seen := map[string]map[string]int{}
	last := map[string]int{}
	for _, rec := range read {
		r.Read++
		k, v := string(rec.Key), string(rec.Value)
		if seen[k] == nil {
			seen[k] = map[string]int{}
		}
		seen[k][v]++
		if seen[k][v] == 2 {
			r.Dup++
			note("dup %s=%s", k, v)
		}
		i, ok := pos[k][v]
		if !ok {
			continue
		}
		if prev, has := last[k]; has && i < prev {
			r.Reordered++
			note("reordered %s=%s", k, v)
		}
		last[k] = i
	}
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range acked[k] {
			if seen[k][v] == 0 {
				r.Lost++
				note("lost %s=%s", k, v)
			}
		}
	}
	return r
}

// consumeAll reads topic from the start until want records arrived (or a
// minute passed) and returns them.
func consumeAll(t *testing.T, ctx context.Context, seeds []string, topic string, want int) []*kgo.Record {
	t.Helper()
	// MetadataMinAge: after a failover franz-go waits for a metadata
	// refresh, at most one per 5 s by default.
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	deadline := time.Now().Add(time.Minute)
	for len(out) < want && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// partitionState asks broker id for topic's partition p.
func partitionState(ctx context.Context, cl *kgo.Client, id int32, topic string, p int32) (kmsg.MetadataResponseTopicPartition, error) {
	md, err := metadataFrom(ctx, cl, id)
	if err != nil {
		return kmsg.MetadataResponseTopicPartition{}, err
	}
	mt := topicOf(md, topic)
	if mt == nil || int(p) >= len(mt.Partitions) {
		return kmsg.MetadataResponseTopicPartition{}, fmt.Errorf("broker %d does not know %s-%d", id, topic, p)
	}
	return mt.Partitions[p], nil
}

// TestClusterISRAndControlledShutdown: SIGTERM moves a leader's partitions
// away before it exits (the session timeout is a minute, so nothing else
// could); with min.insync.replicas=2 and only the leader left in the ISR an
// acks=all produce fails with NOT_ENOUGH_REPLICAS instead of hanging or
// being acknowledged on one copy; the stopped brokers come back, catch up
// and rejoin the ISR, writes resume, and every acknowledged record is read
// back once.
func TestClusterISRAndControlledShutdown(t *testing.T) {
	// Four brokers, three of them controller voters: the partition's
	// replicas are 0, 1 and 3, so stopping two of them (0, a voter, and 3,
	// an observer) leaves the controller quorum (1, 2) able to shrink the
	// ISR.
	c := startClusterProps(t, 4, 3, "broker.session.timeout.ms=60000\nbroker.heartbeat.interval.ms=250\nreplica.lag.time.max.ms=2000\n")
	ctx := testCtx(t, 4*time.Minute)
	cl := c.client()
	for id := int32(0); id < 4; id++ {
		c.waitBrokers(ctx, cl, id, 4)
	}
	const topic = "isr"
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 30000
	rt0 := kmsg.NewCreateTopicsRequestTopic()
	rt0.Topic, rt0.NumPartitions, rt0.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{0, 1, 3}
	rt0.ReplicaAssignment = append(rt0.ReplicaAssignment, ra)
	cc := kmsg.NewCreateTopicsRequestTopicConfig()
	cc.Name, cc.Value = "min.insync.replicas", kmsg.StringPtr("2")
	rt0.Configs = append(rt0.Configs, cc)
	ct.Topics = append(ct.Topics, rt0)
	ctr, err := ct.RequestWith(ctx, cl)
	if err != nil || ctr.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, ctr)
	}
	for id := int32(0); id < 4; id++ { // every broker knows it
		waitFor(t, 10*time.Second, func() string {
			if _, err := partitionState(ctx, cl, id, topic, 0); err != nil {
				return err.Error()
			}
			return ""
		})
	}
	acked := map[string][]string{}
	produce := func(cl *kgo.Client, from, n int) error {
		for i := from; i < from+n; i++ {
			pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			k, v := fmt.Sprint(i%5), fmt.Sprintf("v%d", i)
			err := cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v)}).FirstErr()
			cancel()
			if err != nil {
				return err
			}
			acked[k] = append(acked[k], v)
		}
		return nil
	}
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := produce(producer, 0, 20); err != nil {
		t.Fatal(err)
	}

	st, err := partitionState(ctx, cl, 0, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	leader := st.Leader
	if leader != 0 || len(st.ISR) != 3 {
		t.Fatalf("leader %d isr %v, want 0 and [0 1 3]", leader, st.ISR)
	}
	c.brokers[leader].stop() // SIGTERM: controlled shutdown
	var next int32 = -1
	for _, id := range []int32{1, 2, 3} {
		waitFor(t, 10*time.Second, func() string {
			st, err := partitionState(ctx, cl, id, topic, 0)
			if err != nil {
				return err.Error()
			}
			if st.Leader == leader || st.Leader < 0 || containsInt32(st.ISR, leader) {
				return fmt.Sprintf("broker %d: leader %d isr %v after the old leader's controlled shutdown", id, st.Leader, st.ISR)
			}
			next = st.Leader
			return ""
		})
	}
	if err := produce(producer, 20, 20); err != nil {
		t.Fatalf("produce to the new leader %d: %v", next, err)
	}

	// Stop the other follower: the leader is alone in the ISR.
	follower := int32(3)
	if next != 1 {
		t.Fatalf("new leader %d, want 1 (the next in-sync replica)", next)
	}
	c.brokers[follower].stop()
	waitFor(t, 10*time.Second, func() string {
		st, err := partitionState(ctx, cl, next, topic, 0)
		if err != nil {
			return err.Error()
		}
		if len(st.ISR) != 1 {
			return fmt.Sprintf("isr %v after the follower's controlled shutdown", st.ISR)
		}
		return ""
	})
	// A raw acks=all Produce to the leader, so the answer is the broker's
	// error code, not a client's retry verdict.
	var bb record.Builder
	bb.Reset(record.CodecNone, time.Now().UnixMilli())
	bb.Add(time.Now().UnixMilli(), nil, []byte("refused"), nil)
	batch, err := bb.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = -1, 10000
	md, err := metadataFrom(ctx, cl, next)
	if err != nil {
		t.Fatal(err)
	}
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicOf(md, topic).TopicID // v13+ names topics by id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	preq.Topics = append(preq.Topics, rt)
	presp, err := preq.RequestWith(ctx, cl.Broker(int(next)))
	if err != nil {
		t.Fatal(err)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("produce with one in-sync replica of min.insync.replicas=2: error %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(code))
	}

	// Both come back, catch up and rejoin the ISR; writes resume.
	c.brokers[leader].start()
	c.brokers[follower].start()
	waitFor(t, 90*time.Second, func() string {
		st, err := partitionState(ctx, cl, next, topic, 0)
		if err != nil {
			return err.Error()
		}
		if len(st.ISR) != 3 {
			return fmt.Sprintf("isr %v; warnings:\n%s", st.ISR, c.warnings())
		}
		return ""
	})
	if err := produce(producer, 40, 20); err != nil {
		t.Fatal(err)
	}
	if rep := checkAcked(acked, consumeAll(t, ctx, c.seeds(), topic, 60)); !rep.ok() {
		t.Fatal(rep)
	}
}

func containsInt32(vs []int32, v int32) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// TestClusterLeaderKillLoopLosesNothing produces with acks=all and
// idempotence while the leader of partition 0 is killed with SIGKILL and
// restarted, three times; afterwards every acknowledged record is read
// back exactly once per acknowledged send, in order per key.
func TestClusterLeaderKillLoopLosesNothing(t *testing.T) {
	c := startCluster(t, 3)
	ctx := testCtx(t, 5*time.Minute)
	cl := c.client()
	adm := kadm.NewClient(cl)
	for id := int32(0); id < 3; id++ {
		c.waitBrokers(ctx, cl, id, 3)
	}
	const topic, partitions = "killloop", 3
	minISR := "2"
	resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &minISR}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordDeliveryTimeout(2*time.Minute))

	var (
		mu    sync.Mutex
		acked = map[string][]string{}
		sent  int
	)
	produceCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() { // owner: this test; bounded by count and by stop
		defer close(done)
		var wg sync.WaitGroup
		for i := 0; i < 200_000 && produceCtx.Err() == nil; i++ {
			k, v := fmt.Sprint(i%31), fmt.Sprintf("v%07d", i)
			wg.Add(1)
			producer.Produce(produceCtx, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err == nil {
					mu.Lock()
					acked[k] = append(acked[k], v) // callbacks of one partition run in order
					mu.Unlock()
				}
			})
			mu.Lock()
			sent++
			mu.Unlock()
			if i%200 == 199 {
				time.Sleep(5 * time.Millisecond) // pace: a few thousand records/s
			}
		}
		wg.Wait()
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, vs := range acked {
			n += len(vs)
		}
		return n
	}
	for round := 0; round < 3; round++ {
		base := count()
		waitFor(t, 60*time.Second, func() string {
			if n := count(); n < base+2000 {
				return fmt.Sprintf("round %d: only %d records acknowledged since the last kill", round, n-base)
			}
			return ""
		})
		var leader int32 = -1
		for _, id := range []int32{0, 1, 2} {
			if c.brokers[id].cmd == nil {
				continue
			}
			if st, err := partitionState(ctx, cl, id, topic, 0); err == nil && st.Leader >= 0 {
				leader = st.Leader
				break
			}
		}
		if leader < 0 {
			t.Fatalf("round %d: no leader for %s-0", round, topic)
		}
		c.brokers[leader].kill()
		c.brokers[leader].start()
		t.Logf("round %d: killed and restarted broker %d (leader of %s-0) after %d acknowledged records", round, leader, topic, count())
	}
	base := count()
	waitFor(t, 60*time.Second, func() string {
		if n := count(); n < base+2000 {
			return fmt.Sprintf("only %d records acknowledged since the last restart", n-base)
		}
		return ""
	})
	stop()
	<-done
	mu.Lock()
	total := 0
	for _, vs := range acked {
		total += len(vs)
	}
	mu.Unlock()
	rep := checkAcked(acked, consumeAll(t, ctx, c.seeds(), topic, total))
	t.Logf("sent %d: %s", sent, rep)
	if !rep.ok() {
		t.Fatal(rep)
	}
}
