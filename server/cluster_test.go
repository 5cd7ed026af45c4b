package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
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
}

// startInCluster starts n brokers on 127.0.0.1, each a controller voter.
func startInCluster(t *testing.T, n int) (brokers []*inCluster, voters map[int32]string) {
	t.Helper()
	voters = map[int32]string{}
	lns := map[int32]net.Listener{}
	for i := int32(0); i < int32(n); i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], voters[i] = ln, ln.Addr().String()
	}
	for i := int32(0); i < int32(n); i++ {
		b := &inCluster{id: i, dataDir: t.TempDir(), ctlDir: t.TempDir()}
		b.start(t, voters, lns[i])
		brokers = append(brokers, b)
	}
	return brokers, voters
}

func (b *inCluster) start(t *testing.T, voters map[int32]string, ln net.Listener) {
	t.Helper()
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctl, err := controller.New(controller.Config{
		NodeID: b.id, Voters: voters, DataDir: b.ctlDir, Listener: ln,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		SessionTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Dir: b.dataDir, Log: engine.DefaultLogConfig(), Logger: logger})
	if err != nil {
		ctl.Close()
		t.Fatal(err)
	}
	kln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{
		NodeID: b.id, ClusterID: "strata-test-cluster", NumPartitions: 1, AutoCreateTopics: true, Logger: logger,
		Cluster: ClusterConfig{Controller: ctl, HeartbeatInterval: 100 * time.Millisecond, ReplicaLagTimeMax: 2 * time.Second},
	}, eng)
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

// waitMetadata polls broker b's Metadata until check returns "".
func waitMetadata(t *testing.T, cl *kgo.Client, b *inCluster, check func(*kmsg.MetadataResponse) string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(testCtx(t), cl.Broker(int(b.id)))
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
	for _, b := range brokers {
		waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
			if len(r.Brokers) != 3 {
				return fmt.Sprintf("%d brokers", len(r.Brokers))
			}
			return ""
		})
	}

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
