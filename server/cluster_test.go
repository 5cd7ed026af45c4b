package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/metrics"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// inCluster is one in-process broker of a test cluster: a Server over its
// engine, with its own controller (every broker a voter).
type inCluster struct {
	id      int32
	addr    string
	s       *Server
	eng     *engine.Engine
	ctl     *controller.Controller
	dataDir string
	ctlDir  string
	logs    *logBuffer
	served  chan error
	running bool
	tune    func(*controller.Config) // test-specific controller settings, or nil
	metrics *metrics.Broker          // the server's metrics, or nil (metrics_ops_test.go)
	cfg     func(*Config)            // test-specific server settings, or nil
}

// followerWaitMaxMs is the in-process brokers' replica.fetch.wait.max.ms,
// which their followers' fetches carry (TestClusterInProcess checks).
const followerWaitMaxMs = 321

// startInCluster starts n brokers on 127.0.0.1, each a controller voter.
func startInCluster(t *testing.T, n int) (brokers []*inCluster, voters map[int32]string) {
	t.Helper()
	return startInClusterWith(t, n, nil)
}

// startInClusterWith is startInCluster with tune applied to every
// controller's Config.
func startInClusterWith(t *testing.T, n int, tune func(*controller.Config)) (brokers []*inCluster, voters map[int32]string) {
	t.Helper()
	var lns map[int32]net.Listener
	voters, lns = quorumListeners(t, n)
	for i := int32(0); i < int32(n); i++ {
		b := &inCluster{id: i, dataDir: t.TempDir(), ctlDir: t.TempDir(), tune: tune}
		b.start(t, voters, lns[i])
		brokers = append(brokers, b)
	}
	return brokers, voters
}

func (b *inCluster) start(t *testing.T, voters map[int32]string, ln net.Listener) {
	t.Helper()
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ccfg := controller.Config{
		NodeID: b.id, Voters: voters, DataDir: b.ctlDir, Listener: ln,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		SessionTimeout: 3 * time.Second,
	}
	if b.tune != nil {
		b.tune(&ccfg)
	}
	ctl, err := controller.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Dir: b.dataDir, Log: engine.DefaultLogConfig(), Logger: logger,
		SyncFault: syncFaultOf(b.dataDir)}) // offlinedir_cluster_test.go
	if err != nil {
		ctl.Close()
		t.Fatal(err)
	}
	kln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scfg := Config{
		NodeID: b.id, ClusterID: "strata-test-cluster", NumPartitions: 1, AutoCreateTopics: true, Logger: logger,
		Cluster: ClusterConfig{Controller: ctl, HeartbeatInterval: 100 * time.Millisecond, ReplicaLagTimeMax: 2 * time.Second,
			ReplicaFetch: ReplicaFetchConfig{WaitMaxMs: followerWaitMaxMs}},
		Metrics: b.metrics,
	}
	if b.cfg != nil {
		b.cfg(&scfg)
	}
	s := New(scfg, eng)
	b.served = make(chan error, 1)
	go func(s *Server, ch chan error) { ch <- s.Serve(kln) }(s, b.served)
	b.addr, b.s, b.eng, b.ctl, b.logs, b.running = kln.Addr().String(), s, eng, ctl, logs, true
	t.Cleanup(func() {
		if t.Failed() && b.running {
			t.Logf("broker %d logs:\n%s", b.id, logs)
		}
		b.stop(t)
	})
}

// stop closes the server (waiting for Serve), the controller and the
// engine; it does nothing if the broker is not running.
func (b *inCluster) stop(t *testing.T) {
	if !b.running {
		return
	}
	b.running = false
	if err := b.s.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Errorf("broker %d: Server.Close: %v", b.id, err)
	}
	select {
	case <-b.served:
	case <-time.After(testTimeout):
		t.Errorf("broker %d: Serve did not return after Close", b.id)
	}
	if err := b.ctl.Close(); err != nil {
		t.Logf("broker %d: controller close: %v", b.id, err)
	}
	if err := b.eng.Close(); err != nil {
		t.Errorf("broker %d: engine.Close: %v", b.id, err)
	}
}

// waitMetadata polls broker b's Metadata until check returns "". Each poll
// goes over a new connection to b's current address, not through a client's
// broker table, which may hold the address of b's previous incarnation
// (a restarted broker's view lists its old registration until it has caught
// up). The client argument is not used.
func waitMetadata(t *testing.T, _ *kgo.Client, b *inCluster, check func(*kmsg.MetadataResponse) string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for corr := int32(1); ; corr++ {
		resp, err := metadataOf(b.addr, corr)
		msg := ""
		if err != nil {
			msg = err.Error()
		} else {
			msg = check(resp)
		}
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d: %s", b.id, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRegistered waits until every broker's metadata lists all of
// brokers: before that a create with replication factor len(brokers) can
// be refused with INVALID_REPLICATION_FACTOR.
func waitRegistered(t *testing.T, brokers []*inCluster) {
	t.Helper()
	for _, b := range brokers {
		waitMetadata(t, nil, b, func(r *kmsg.MetadataResponse) string {
			if len(r.Brokers) != len(brokers) {
				return fmt.Sprintf("%d of %d brokers registered", len(r.Brokers), len(brokers))
			}
			return ""
		})
	}
}

// metadataOf asks the broker at addr for the metadata of every topic.
func metadataOf(addr string, corr int32) (*kmsg.MetadataResponse, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	payload := encodeRequest(req, corr, "wait-metadata")
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 5 || n > 16<<20 {
		return nil, fmt.Errorf("metadata response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr || body[4] != 0 {
		return nil, fmt.Errorf("bad response header (correlation id %d, want %d)", got, corr)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	if err := resp.ReadFrom(body[5:]); err != nil {
		return nil, err
	}
	return resp, nil
}

func clusterTopic(resp *kmsg.MetadataResponse, name string) *kmsg.MetadataResponseTopic {
	for i := range resp.Topics {
		if t := resp.Topics[i].Topic; t != nil && *t == name {
			return &resp.Topics[i]
		}
	}
	return nil
}

// TestClusterInProcess runs three brokers in one process: a replicated
// topic is created through one and appears on all with the controller's id;
// records produced with acks=all are read back; a follower refuses produce
// with NOT_LEADER_OR_FOLLOWER; DescribeCluster, ElectLeaders and
// ListPartitionReassignments answer from the controller; a broker restarted
// on its old directories keeps its logs (it acts on the metadata only once
// it has caught up); DeleteTopics removes the logs everywhere.
func TestClusterInProcess(t *testing.T) {
	brokers, voters := startInCluster(t, 3)
	seeds := []string{brokers[0].addr, brokers[1].addr, brokers[2].addr}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	waitRegistered(t, brokers)

	const topic = "inproc"
	ct, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, topic)
	if err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}
	var leaderOf0 int32
	for _, b := range brokers {
		waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
			mt := clusterTopic(r, topic)
			if mt == nil || len(mt.Partitions) != 3 || mt.TopicID != ct.ID {
				return "topic missing"
			}
			for _, p := range mt.Partitions {
				if len(p.Replicas) != 3 || len(p.ISR) != 3 || p.Leader < 0 || p.LeaderEpoch < 0 {
					return fmt.Sprintf("partition %+v", p)
				}
			}
			leaderOf0 = mt.Partitions[0].Leader
			return ""
		})
		if et := b.eng.Topic(topic); et == nil || et.ID() != ct.ID || et.Partitions() != 3 {
			t.Fatalf("broker %d: local topic %v", b.id, et)
		}
	}

	for i := 0; i < 60; i++ {
		r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	// ClusterConfig.ReplicaFetch reaches the followers: the leaders'
	// long polls wait as long as the followers' fetches ask.
	polled := false
	for _, b := range brokers {
		polled = polled || strings.Contains(b.logs.String(), fmt.Sprintf("max_wait_ms=%d", followerWaitMaxMs))
	}
	if !polled {
		t.Errorf("no follower fetch asked for replica.fetch.wait.max.ms=%d", followerWaitMaxMs)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < 60 && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	consumer.Close()
	if len(got) != 60 {
		t.Fatalf("read back %d of 60 records", len(got))
	}

	// Auto-creation goes through the controller: the first produce works.
	auto, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	if err := auto.ProduceSync(ctx, &kgo.Record{Topic: "auto-created", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce to an auto-created topic: %v", err)
	}
	auto.Close()
	for _, b := range brokers {
		waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
			if mt := clusterTopic(r, "auto-created"); mt == nil || len(mt.Partitions) != 1 || mt.Partitions[0].Leader < 0 {
				return "auto-created topic missing"
			}
			return ""
		})
	}

	// A follower of partition 0 refuses a produce.
	follower := (leaderOf0 + 1) % 3
	preq := kmsg.NewPtrProduceRequest()
	preq.SetVersion(9)
	preq.Acks, preq.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = []byte{0} // never looked at: the leadership check comes first
	rt.Partitions = append(rt.Partitions, rp)
	preq.Topics = append(preq.Topics, rt)
	c := dialRaw(t, brokers[follower].addr)
	presp := kmsg.NewPtrProduceResponse()
	c.roundTrip(preq, 7, presp)
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to follower %d: %v", follower, kerr.ErrorForCode(code))
	}

	dc := issue[*kmsg.DescribeClusterResponse](t, cl, kmsg.NewPtrDescribeClusterRequest())
	if len(dc.Brokers) != 3 || dc.ControllerID < 0 || dc.ControllerID > 2 {
		t.Fatalf("describe cluster: %+v", dc)
	}
	ts := make(kadm.TopicsSet)
	ts.Add(topic, 0, 1, 2)
	er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, ts)
	if err != nil {
		t.Fatal(err)
	}
	for p, r := range er[topic] {
		if r.Err != kerr.ElectionNotNeeded {
			t.Fatalf("preferred election of partition %d right after creation: %v", p, r.Err)
		}
	}
	lr, err := adm.ListPartitionReassignments(ctx, ts)
	if err != nil || len(lr[topic]) != 0 {
		t.Fatalf("reassignments: %v %+v", err, lr)
	}

	// Restart broker 2 on its directories: its logs survive the restart.
	b2 := brokers[2]
	end := b2.eng.Topic(topic).Partition(0).LogEndOffset()
	b2.stop(t)
	var ln net.Listener
	for i := 0; i < 100; i++ { // the port was ours a moment ago
		if ln, err = net.Listen("tcp", voters[2]); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	b2.start(t, voters, ln)
	cl2, err := kgo.NewClient(kgo.SeedBrokers(b2.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	waitMetadata(t, cl2, b2, func(r *kmsg.MetadataResponse) string {
		if clusterTopic(r, topic) == nil || len(r.Brokers) != 3 {
			return "not caught up"
		}
		return ""
	})
	if et := b2.eng.Topic(topic); et == nil || et.ID() != ct.ID || et.Partition(0).LogEndOffset() < end {
		t.Fatalf("restarted broker lost its log of %s-0 (had %d records)", topic, end)
	}

	// A config change through one broker reaches every broker's engine.
	ac, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("123456")}}, topic)
	if err == nil {
		_, err = ac.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("alter configs: %v", err)
	}
	for _, b := range brokers {
		deadline := time.Now().Add(testTimeout)
		for b.eng.Topic(topic).Overrides()["retention.ms"] != "123456" {
			if time.Now().After(deadline) {
				t.Fatalf("broker %d: overrides %v", b.id, b.eng.Topic(topic).Overrides())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, has := b.eng.Topic(topic).Overrides()["min.insync.replicas"]; has {
			t.Fatalf("broker %d: engine got the cluster key min.insync.replicas", b.id)
		}
	}

	dr, err := adm.DeleteTopics(ctx, topic)
	if err != nil || dr[topic].Err != nil {
		t.Fatalf("delete: %v %v", err, dr[topic].Err)
	}
	deadline := time.Now().Add(testTimeout)
	for _, b := range brokers {
		for b.eng.Topic(topic) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("broker %d still has %s", b.id, topic)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// restart starts a stopped broker again on its directories and its quorum
// address.
func (b *inCluster) restart(t *testing.T, voters map[int32]string) {
	t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 100; i++ { // the port was ours a moment ago
		if ln, err = net.Listen("tcp", voters[b.id]); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	b.start(t, voters, ln)
}

// localPartitions lists the partition directories of topic in b's data
// directory, as "<topic>-<n>".
func (b *inCluster) localPartitions(t *testing.T, topic string) []string {
	t.Helper()
	ents, err := os.ReadDir(b.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ent := range ents {
		var p int32
		if n, _ := fmt.Sscanf(ent.Name(), topic+"-%d", &p); n == 1 && ent.IsDir() && ent.Name() == fmt.Sprintf("%s-%d", topic, p) {
			out = append(out, ent.Name())
		}
	}
	slices.Sort(out)
	return out
}

// wantDirs lists, per broker id, the partition directories the replica
// assignment of mt asks for.
func wantDirs(mt *kmsg.MetadataResponseTopic, brokers int) map[int32][]string {
	want := map[int32][]string{}
	for id := int32(0); id < int32(brokers); id++ {
		want[id] = nil
	}
	for _, p := range mt.Partitions {
		for _, r := range p.Replicas {
			want[r] = append(want[r], fmt.Sprintf("%s-%d", *mt.Topic, p.Partition))
		}
	}
	for id := range want {
		slices.Sort(want[id])
	}
	return want
}

// checkDirs waits until every running broker's directories of mt's topic are
// exactly those of its replicas.
func checkDirs(t *testing.T, brokers []*inCluster, mt *kmsg.MetadataResponseTopic) {
	t.Helper()
	want := wantDirs(mt, len(brokers))
	deadline := time.Now().Add(testTimeout)
	for _, b := range brokers {
		for {
			got := b.localPartitions(t, *mt.Topic)
			if slices.Equal(got, want[b.id]) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker %d holds %v, its replicas are %v", b.id, got, want[b.id])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestClusterLogsOnlyOnReplicas: with RF 1 and RF 2 topics on three brokers
// every data directory holds exactly the partitions its broker replicates;
// a broker that is not a replica answers Produce, Fetch and ListOffsets with
// NOT_LEADER_OR_FOLLOWER and describes the partition in Metadata; a
// reassignment creates the log on the new replica, which copies the data,
// and deletes it from the old one once it completed.
func TestClusterLogsOnlyOnReplicas(t *testing.T) {
	brokers, _ := startInCluster(t, 3)
	seeds := []string{brokers[0].addr, brokers[1].addr, brokers[2].addr}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	waitRegistered(t, brokers)
	topics := map[string]int16{"rf1": 1, "rf2": 2}
	meta := map[string]*kmsg.MetadataResponseTopic{}
	for name, rf := range topics {
		ct, err := adm.CreateTopic(ctx, 6, rf, nil, name)
		if err != nil || ct.Err != nil {
			t.Fatalf("create %s: %v %v", name, err, ct.Err)
		}
		for _, b := range brokers {
			waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
				mt := clusterTopic(r, name)
				if mt == nil || len(mt.Partitions) != 6 {
					return "topic " + name + " missing"
				}
				for _, p := range mt.Partitions {
					if len(p.Replicas) != int(rf) || p.Leader < 0 {
						return fmt.Sprintf("partition %+v", p)
					}
				}
				meta[name] = mt
				return ""
			})
		}
		checkDirs(t, brokers, meta[name])
		total := 0
		for _, b := range brokers {
			total += len(b.localPartitions(t, name))
			if et := b.eng.Topic(name); et == nil || et.Partitions() != 6 {
				t.Fatalf("broker %d does not know %s with 6 partitions", b.id, name)
			}
		}
		if total != 6*int(rf) {
			t.Fatalf("%s: %d partition directories in the cluster, want %d", name, total, 6*rf)
		}
	}

	// New partitions get logs on their replicas only.
	cp, err := adm.CreatePartitions(ctx, 2, "rf2")
	if err != nil || cp["rf2"].Err != nil {
		t.Fatalf("create partitions: %v %+v", err, cp)
	}
	for _, b := range brokers {
		waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
			mt := clusterTopic(r, "rf2")
			if mt == nil || len(mt.Partitions) != 8 {
				return "rf2 has not grown to 8 partitions"
			}
			meta["rf2"] = mt
			return ""
		})
	}
	checkDirs(t, brokers, meta["rf2"])
	for _, b := range brokers {
		deadline := time.Now().Add(testTimeout)
		for b.eng.Topic("rf2").Partitions() != 8 {
			if time.Now().After(deadline) {
				t.Fatalf("broker %d: local rf2 has %d partitions", b.id, b.eng.Topic("rf2").Partitions())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// Off-replica answers for rf1-0.
	p0 := meta["rf1"].Partitions[0]
	owner := p0.Replicas[0]
	other := brokers[(owner+1)%3]
	if other.eng.Topic("rf1").Partition(0) != nil {
		t.Fatalf("broker %d has a log of rf1-0, a partition of broker %d", other.id, owner)
	}
	raw := dialRaw(t, other.addr)
	preq := kmsg.NewPtrProduceRequest()
	preq.SetVersion(9)
	preq.Acks, preq.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "rf1"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = []byte{0}
	rt.Partitions = append(rt.Partitions, rp)
	preq.Topics = append(preq.Topics, rt)
	presp := kmsg.NewPtrProduceResponse()
	raw.roundTrip(preq, 1, presp)
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to non-replica %d: %v", other.id, kerr.ErrorForCode(code))
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.SetVersion(11)
	freq.ReplicaID, freq.MaxBytes = -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "rf1"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp := kmsg.NewPtrFetchResponse()
	raw.roundTrip(freq, 2, fresp)
	if code := fresp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch from non-replica %d: %v", other.id, kerr.ErrorForCode(code))
	}
	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.SetVersion(5)
	lreq.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "rf1"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lreq.Topics = append(lreq.Topics, lt)
	lresp := kmsg.NewPtrListOffsetsResponse()
	raw.roundTrip(lreq, 3, lresp)
	if code := lresp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("list offsets on non-replica %d: %v", other.id, kerr.ErrorForCode(code))
	}
	dreq := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = "rf1", []int32{0}
	dreq.Topics = append(dreq.Topics, dt)
	dresp := kmsg.NewPtrDescribeProducersResponse()
	raw.roundTrip(dreq, 5, dresp)
	if code := dresp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("describe producers on non-replica %d: %v", other.id, kerr.ErrorForCode(code))
	}
	waitMetadata(t, cl, other, func(r *kmsg.MetadataResponse) string {
		if mt := clusterTopic(r, "rf1"); mt == nil || mt.Partitions[0].Leader != owner || mt.Partitions[0].ErrorCode != 0 {
			return "non-replica's metadata of rf1-0 is wrong"
		}
		return ""
	})
	// A partition that does not exist stays UNKNOWN_TOPIC_OR_PARTITION.
	freq.Topics[0].Partitions[0].Partition = 99
	raw.roundTrip(freq, 4, fresp)
	if code := fresp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("fetch of a partition that does not exist: %v", kerr.ErrorForCode(code))
	}

	// Offsets of every partition commit through the group's coordinator,
	// whichever partitions it hosts (Kafka checks the metadata, not the
	// local logs).
	commit := make(kadm.Offsets)
	for p := int32(0); p < 6; p++ {
		commit.AddOffset("rf1", p, int64(p+1), -1)
	}
	if err := adm.CommitAllOffsets(ctx, "g-rf1", commit); err != nil {
		t.Fatalf("commit offsets of every rf1 partition: %v", err)
	}
	fo, err := adm.FetchOffsets(ctx, "g-rf1")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 6; p++ {
		if o, ok := fo.Lookup("rf1", p); !ok || o.Err != nil || o.At != int64(p+1) {
			t.Fatalf("committed offset of rf1-%d: %+v %v", p, o, ok)
		}
	}

	// Records into rf1-0, then move it from owner to other.
	const n = 50
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: "rf1", Partition: 0, Value: []byte(fmt.Sprintf("before-%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	if got := brokers[owner].eng.Topic("rf1").Partition(0).LogEndOffset(); got != n {
		t.Fatalf("rf1-0 log end %d on its replica, want %d", got, n)
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("rf1", 0, []int32{other.id})
	ar, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := ar.Error(); err != nil {
		t.Fatalf("reassign: %v", err)
	}
	deadline := time.Now().Add(testTimeout)
	for {
		lr, err := adm.ListPartitionReassignments(ctx, nil)
		if err == nil && len(lr["rf1"]) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reassignment still listed: %v %+v", err, lr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, b := range brokers {
		waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
			mt := clusterTopic(r, "rf1")
			if mt == nil || !slices.Equal(mt.Partitions[0].Replicas, []int32{other.id}) || mt.Partitions[0].Leader != other.id {
				return "rf1-0 not moved yet"
			}
			meta["rf1"] = mt
			return ""
		})
	}
	checkDirs(t, brokers, meta["rf1"])
	if got := other.eng.Topic("rf1").Partition(0).LogEndOffset(); got != n {
		t.Fatalf("rf1-0 log end %d on its new replica, want %d", got, n)
	}
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: "rf1", Partition: 0, Value: []byte(fmt.Sprintf("after-%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce after the move: %v", err)
		}
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"rf1": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var got []string
	for len(got) < 2*n && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i := range got {
		want := fmt.Sprintf("before-%d", i)
		if i >= n {
			want = fmt.Sprintf("after-%d", i-n)
		}
		if got[i] != want {
			t.Fatalf("record %d is %q, want %q", i, got[i], want)
		}
	}
	if len(got) != 2*n {
		t.Fatalf("read %d records of rf1-0, want %d", len(got), 2*n)
	}
}

// TestClusterAutoLeaderRebalance: with leader.imbalance.check.interval
// shortened, killing the preferred leader of a partition moves leadership
// away; once it is back and in sync, the controller moves leadership back
// to it by itself. A producer (acks=all, idempotent) runs throughout; every
// acknowledged record is read back.
func TestClusterAutoLeaderRebalance(t *testing.T) {
	brokers, voters := startInClusterWith(t, 3, func(c *controller.Config) {
		c.LeaderImbalanceCheckInterval = time.Second
	})
	seeds := []string{brokers[0].addr, brokers[1].addr, brokers[2].addr}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	waitRegistered(t, brokers)
	const topic = "rebalance"
	ct, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, topic)
	if err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}
	var preferred int32
	var epoch0 int32
	waitMetadata(t, cl, brokers[0], func(r *kmsg.MetadataResponse) string {
		mt := clusterTopic(r, topic)
		if mt == nil || len(mt.Partitions) != 3 || len(mt.Partitions[0].ISR) != 3 || mt.Partitions[0].Leader < 0 {
			return "topic not ready"
		}
		preferred, epoch0 = mt.Partitions[0].Replicas[0], mt.Partitions[0].LeaderEpoch
		if mt.Partitions[0].Leader != preferred {
			return "partition 0 not on its preferred replica"
		}
		return ""
	})

	// The producer: one record at a time, round robin over the partitions,
	// bounded in count and by the test's context.
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
	)
	pctx, stopProducing := context.WithCancel(ctx)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; i < 100_000 && pctx.Err() == nil; i++ {
			v := fmt.Sprintf("v-%06d", i)
			r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: []byte(v)}
			if err := cl.ProduceSync(pctx, r).FirstErr(); err == nil {
				mu.Lock()
				acked[v] = true
				mu.Unlock()
			}
		}
	}()
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitAcked := func(n int) {
		deadline := time.Now().Add(testTimeout)
		for ackedCount() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d records acknowledged, waiting for %d", ackedCount(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitAcked(50)

	pb := brokers[preferred]
	survivor := brokers[(preferred+1)%3]
	pb.stop(t)
	waitMetadata(t, cl, survivor, func(r *kmsg.MetadataResponse) string {
		mt := clusterTopic(r, topic)
		if mt == nil || mt.Partitions[0].Leader == preferred || mt.Partitions[0].Leader < 0 {
			return "leadership of partition 0 has not moved"
		}
		return ""
	})
	waitAcked(ackedCount() + 50) // writes continue on the survivors

	pb.restart(t, voters)
	waitMetadata(t, cl, survivor, func(r *kmsg.MetadataResponse) string {
		mt := clusterTopic(r, topic)
		if mt == nil || mt.Partitions[0].Leader != preferred {
			return "leadership of partition 0 did not return to its preferred replica"
		}
		if mt.Partitions[0].LeaderEpoch < epoch0+2 {
			return fmt.Sprintf("leader epoch %d, want at least %d", mt.Partitions[0].LeaderEpoch, epoch0+2)
		}
		return ""
	})
	waitAcked(ackedCount() + 50)
	stopProducing()
	<-produced

	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	mu.Lock()
	want := len(acked)
	mu.Unlock()
	seen := map[string]int{}
	for ctx.Err() == nil {
		missing := 0
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
		mu.Lock()
		for v := range acked {
			if seen[v] == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
	}
	lost := 0
	mu.Lock()
	for v := range acked {
		if seen[v] == 0 {
			lost++
		}
	}
	mu.Unlock()
	if lost != 0 {
		t.Fatalf("%d of %d acknowledged records lost", lost, want)
	}
	t.Logf("%d acknowledged records, all read back", want)
}

// TestClusterRequestsWaitForMetadata: a restarted broker answers no request
// until it has caught up on the metadata (Kafka enables request processing
// only after the initial catch-up). Restarted alone, without a quorum to
// catch up with, broker 0 leaves a Metadata request unanswered, where it
// once answered from an empty view that its topic did not exist
// (UNKNOWN_TOPIC_OR_PARTITION to producers, which franz-go fails records
// on); once a second voter is back it answers with the topic.
func TestClusterRequestsWaitForMetadata(t *testing.T) {
	brokers, voters := startInCluster(t, 3)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitRegistered(t, brokers)
	const topic = "waits"
	if ct, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 2, 3, nil, topic); err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}
	hasTopic := func(r *kmsg.MetadataResponse) string {
		if mt := clusterTopic(r, topic); mt == nil || len(mt.Partitions) != 2 || mt.ErrorCode != 0 {
			return "topic missing"
		}
		return ""
	}
	waitMetadata(t, cl, brokers[0], hasTopic)
	for _, b := range brokers {
		b.stop(t)
	}
	brokers[0].restart(t, voters)
	if resp, err := metadataOf(brokers[0].addr, 1); err == nil {
		t.Fatalf("broker 0 answered Metadata before catching up: %d brokers, topic %q: %v",
			len(resp.Brokers), topic, clusterTopic(resp, topic))
	}
	brokers[1].restart(t, voters)
	waitMetadata(t, cl, brokers[0], hasTopic)
}

// quorumListeners opens n listeners on free 127.0.0.1 ports for the Raft
// quorum of n voters (node ids 0..n-1) and returns their addresses as
// controller voters and the listeners, which the controllers take over.
func quorumListeners(t *testing.T, n int) (map[int32]string, map[int32]net.Listener) {
	t.Helper()
	voters, lns := map[int32]string{}, map[int32]net.Listener{}
	for i := range int32(n) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], voters[i] = ln, ln.Addr().String()
	}
	return voters, lns
}
