package replica_test

// Test harness: a cluster of in-process brokers, each a real engine in its
// own t.TempDir served by a real server.Server on 127.0.0.1:0, each with a
// replica.Manager whose fetchers pull over real sockets. The controller is
// the real controller.State (the pure FSM the Raft controller runs) behind a
// mutex: AlterPartition commands go through its epoch checks, and after
// every change the harness pushes the partition's state to every running
// broker's Manager, as the broker's cluster wiring does.

import (
	"github.com/stratalog/strata/internal/stratatest"

	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/replica"
	"github.com/stratalog/strata/server"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// hangGuard bounds every wait; nothing asserts on durations.
const hangGuard = 60 * time.Second

const testTopic = "rt"

type logBuffer = stratatest.LogBuffer

type testCluster struct {
	t      testing.TB
	logs   *logBuffer
	logger *slog.Logger
	lagMs  int64
	minISR int
	parts  int32 // partitions of the test topic, each replicated on every broker

	// journal opens every broker's engine with a journal
	// (JournalMinBytes); hold and release, when set, are called by a
	// broker's Manager around a fetch response's appends
	// (Config.HoldAppends) after the engine's own.
	journal       bool
	hold, release func(nd *node)
	// socketTimeoutMs is every Manager's SocketTimeoutMs (0: the default).
	socketTimeoutMs int64
	// dial, when set, is every Manager's Config.Dial, given the dialing
	// node.
	dial func(nd *node, ctx context.Context, addr string) (net.Conn, error)
	// fetchBackoffMs and fetchWaitMaxMs are every Manager's
	// FetchBackoffMs and FetchWaitMaxMs (0: 50 and 200).
	fetchBackoffMs int64
	fetchWaitMaxMs int32
	// untold partitions' state is not pushed to the node (keys: node id,
	// partition), as a broker that has not applied it yet (guarded by mu
	// after the start).
	untold map[[2]int32]bool
	// logLevel is the brokers' log level (default info).
	logLevel slog.Level
	// unborn nodes start without the test topic and get no partition
	// state, as a broker that has not applied the topic's creation yet;
	// applyCreation ends that (guarded by mu after the start).
	unborn map[int32]bool

	mu       sync.Mutex
	st       *controller.State
	bepoch   map[int32]int64
	nodes    map[int32]*node
	topicID  [16]byte
	pushMu   sync.Mutex // serializes pushes so Managers see states in order
	isolated map[int32]bool
	ids      idBlocks

	refuseISR int // AlterPartitions still to refuse with INVALID_UPDATE_VERSION, unapplied (guarded by mu)
	refused   int // how many were refused (guarded by mu)
}

// idBlocks hands out producer id blocks unique across the test cluster (the
// controller's job in a real one).
type idBlocks struct {
	mu   sync.Mutex
	next int64
}

func (b *idBlocks) AllocateBlock(context.Context) (txn.Block, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	blk := txn.Block{First: b.next, Size: txn.BlockSize}
	b.next += txn.BlockSize
	return blk, nil
}

type node struct {
	c   *testCluster
	id  int32
	dir string

	eng      *engine.Engine
	srv      *server.Server
	addr     string
	mgr      *replica.Manager
	serveErr chan error
	up       bool
}

// newCluster starts n brokers (ids 1..n) and a topic with one partition
// replicated on all of them, led by broker 1.
func newCluster(t testing.TB, n int, lagMs int64, minISR int) *testCluster {
	t.Helper()
	return newClusterWith(t, n, lagMs, minISR, func(*testCluster) {})
}

// newClusterWith is newCluster with the cluster's options set by opt
// before the brokers start.
func newClusterWith(t testing.TB, n int, lagMs int64, minISR int, opt func(*testCluster)) *testCluster {
	t.Helper()
	logs := &logBuffer{}
	c := &testCluster{
		t:        t,
		logs:     logs,
		lagMs:    lagMs,
		minISR:   minISR,
		st:       controller.NewState(),
		bepoch:   map[int32]int64{},
		nodes:    map[int32]*node{},
		topicID:  [16]byte{0: 0x5A, 15: 1},
		isolated: map[int32]bool{},
		parts:    1,
	}
	opt(c)
	c.logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: c.logLevel}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker logs:\n%s", logs.String())
		}
	})
	var replicas []int32
	for id := int32(1); id <= int32(n); id++ {
		r := c.apply(controller.RegisterBroker{ID: id, IncarnationID: [16]byte{0: byte(id), 15: 1}, Host: "127.0.0.1", Port: 1, NowMs: 1})
		c.bepoch[id] = r.BrokerEpoch
		c.apply(controller.BrokerHeartbeat{ID: id, Epoch: r.BrokerEpoch, NowMs: 1, MetadataOffset: c.st.Offset()})
		replicas = append(replicas, id)
	}
	assignment := make([][]int32, c.parts)
	for i := range assignment {
		assignment[i] = replicas
	}
	c.apply(controller.CreateTopic{Name: testTopic, ID: controller.TopicID(c.topicID), Assignment: assignment})
	for id := int32(1); id <= int32(n); id++ {
		nd := &node{c: c, id: id, dir: t.TempDir()}
		c.nodes[id] = nd
		nd.start()
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			if nd.up {
				nd.stop()
			}
		}
	})
	c.push()
	return c
}

// applyCreation has an unborn node create the test topic and pushes every
// partition's state, as a broker applying the creation late does.
func (c *testCluster) applyCreation(id int32) {
	c.t.Helper()
	nd := c.nodes[id]
	if _, err := nd.eng.CreateTopicWithID(testTopic, c.topicID, c.parts, nil); err != nil {
		c.t.Fatalf("node %d: create topic: %v", id, err)
	}
	c.mu.Lock()
	delete(c.unborn, id)
	c.mu.Unlock()
	c.push()
}

func (c *testCluster) apply(cmd controller.Command) controller.Result {
	c.t.Helper()
	c.mu.Lock()
	r := c.st.Apply(cmd)
	err := c.st.Check()
	c.mu.Unlock()
	if err != nil {
		c.t.Fatalf("controller state after %T: %v", cmd, err)
	}
	if r.Code != 0 {
		c.t.Fatalf("%T: %v %s", cmd, kerr.ErrorForCode(r.Code), r.Message)
	}
	return r
}

// partition returns the controller's state of the test partition.
func (c *testCluster) partition() controller.Partition { return c.partitionAt(0) }

// partitionAt returns the controller's state of partition part.
func (c *testCluster) partitionAt(part int32) controller.Partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, _ := c.st.Partition(testTopic, part)
	return controller.Partition{Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR), Leader: p.Leader,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch}
}

// push hands the partitions' current state to every running, non-isolated
// broker's Manager.
func (c *testCluster) push() {
	c.pushMu.Lock()
	defer c.pushMu.Unlock()
	for part := range c.parts {
		c.pushPartition(part)
	}
}

func (c *testCluster) pushPartition(part int32) {
	p := c.partitionAt(part)
	c.mu.Lock()
	var targets []*node
	for _, id := range p.Replicas {
		if nd := c.nodes[id]; nd != nil && nd.up && !c.isolated[id] && !c.unborn[id] && !c.untold[[2]int32{id, part}] {
			targets = append(targets, nd)
		}
	}
	c.mu.Unlock()
	for _, nd := range targets {
		st := replica.Partition{Log: nd.logAt(part), Topic: testTopic, Partition: part, Leader: p.Leader,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, Replicas: p.Replicas, ISR: p.ISR, MinISR: c.minISR}
		var err error
		if p.Leader == nd.id {
			err = nd.mgr.BecomeLeader(st)
		} else {
			err = nd.mgr.BecomeFollower(st)
		}
		if err != nil && !errors.Is(err, replica.ErrStaleState) {
			c.logger.Warn("push failed", "broker", nd.id, "err", err)
		}
	}
}

// isrUpdater is one broker's AlterPartition path into the controller.
type isrUpdater struct {
	c  *testCluster
	id int32
}

func (u isrUpdater) AlterPartition(ctx context.Context, req replica.AlterPartition) (replica.AlterPartitionResult, error) {
	c := u.c
	members := make([]controller.ISRMember, len(req.ISR))
	for i, id := range req.ISR {
		members[i] = controller.ISRMember{ID: id, Epoch: -1}
	}
	c.mu.Lock()
	if c.refuseISR > 0 {
		c.refuseISR--
		c.refused++
		c.mu.Unlock()
		return replica.AlterPartitionResult{}, fmt.Errorf("%w: injected refusal", kerr.InvalidUpdateVersion)
	}
	r := c.st.Apply(controller.AlterPartition{BrokerID: u.id, BrokerEpoch: c.bepoch[u.id], Partitions: []controller.AlterPartitionItem{{
		Topic: req.Topic, Partition: req.Partition, LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch, ISR: members}}})
	c.mu.Unlock()
	if r.Code != 0 {
		return replica.AlterPartitionResult{}, kerr.ErrorForCode(r.Code)
	}
	pr := r.Partitions[0]
	if pr.Code != 0 {
		return replica.AlterPartitionResult{}, kerr.ErrorForCode(pr.Code)
	}
	go c.push() // as the broker's metadata watch does, asynchronously
	return replica.AlterPartitionResult{LeaderEpoch: pr.LeaderEpoch, PartitionEpoch: pr.PartitionEpoch, ISR: pr.ISR}, nil
}

func (c *testCluster) addrOf(id int32) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.nodes[id]
	if nd == nil || !nd.up || c.isolated[id] {
		return "", false
	}
	return nd.addr, true
}

func (nd *node) start() {
	c := nd.c
	t := c.t
	t.Helper()
	lc := engine.DefaultLogConfig()
	lc.SegmentBytes = 64 << 10 // several segments per test
	opts := engine.Options{Dir: nd.dir, Log: lc, Logger: c.logger.With("node", nd.id)}
	if c.journal {
		opts.JournalBytes = engine.JournalMinBytes
	}
	eng, err := engine.Open(opts)
	if err != nil {
		t.Fatalf("node %d: engine: %v", nd.id, err)
	}
	c.mu.Lock()
	unborn := c.unborn[nd.id]
	c.mu.Unlock()
	if eng.Topic(testTopic) == nil && !unborn {
		if _, err := eng.CreateTopicWithID(testTopic, c.topicID, c.parts, nil); err != nil {
			t.Fatalf("node %d: create topic: %v", nd.id, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{NodeID: nd.id, ClusterID: "replica-test", Logger: c.logger.With("node", nd.id),
		Txn: server.TxnConfig{ProducerIDs: &c.ids}}, eng)
	nd.serveErr = make(chan error, 1)
	go func() { nd.serveErr <- srv.Serve(ln) }()
	hold, release := eng.HoldJournal, eng.ReleaseJournal
	if c.hold != nil {
		hold = func() { eng.HoldJournal(); c.hold(nd) }
		release = func() { c.release(nd); eng.ReleaseJournal() }
	}
	var dial func(context.Context, string) (net.Conn, error)
	if c.dial != nil {
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return c.dial(nd, ctx, addr) }
	}
	mgr := replica.New(replica.Config{
		BrokerID:        nd.id,
		BrokerAddr:      c.addrOf,
		ISR:             isrUpdater{c, nd.id},
		LagTimeMaxMs:    c.lagMs,
		FetchWaitMaxMs:  cmp.Or(c.fetchWaitMaxMs, 200),
		FetchBackoffMs:  cmp.Or(c.fetchBackoffMs, 50),
		Logger:          c.logger.With("node", nd.id),
		HoldAppends:     hold,
		ReleaseAppends:  release,
		SocketTimeoutMs: c.socketTimeoutMs,
		Dial:            dial,
	})
	c.mu.Lock()
	nd.eng, nd.srv, nd.mgr, nd.addr, nd.up = eng, srv, mgr, ln.Addr().String(), true
	c.mu.Unlock()
}

func (nd *node) stop() {
	c := nd.c
	c.mu.Lock()
	nd.up = false
	c.mu.Unlock()
	nd.mgr.Close()
	nd.srv.Close()
	if err := <-nd.serveErr; err != nil {
		c.t.Errorf("node %d: Serve: %v", nd.id, err)
	}
	if err := nd.eng.Close(); err != nil {
		c.t.Errorf("node %d: engine close: %v", nd.id, err)
	}
}

func (nd *node) log() *engine.Log { return nd.logAt(0) }

func (nd *node) logAt(part int32) *engine.Log { return nd.eng.Topic(testTopic).Partition(part) }

func (nd *node) status() replica.Status {
	st, ok := nd.mgr.Status(testTopic, 0)
	if !ok {
		nd.c.t.Fatalf("node %d does not replicate the partition", nd.id)
	}
	return st
}

// eventually polls cond until it holds (hang guard only).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logBytes returns the log's batches from its start to its end.
func logBytes(t testing.TB, l *engine.Log) []byte {
	t.Helper()
	var out []byte
	from := l.LogStartOffset()
	for guard := 0; guard < 1_000_000; guard++ {
		res, err := l.ReadReplica(from, 1<<20, true)
		if err != nil {
			t.Fatalf("read %s at %d: %v", l, from, err)
		}
		if len(res.Chunks) == 0 {
			res.Release()
			return out
		}
		for _, ch := range res.Chunks {
			buf := make([]byte, ch.Len)
			if _, err := ch.File.ReadAt(buf, ch.Pos); err != nil {
				t.Fatal(err)
			}
			out = append(out, buf...)
			for rest := buf; len(rest) > 0; {
				_, r, h, err := record.Next(rest)
				if err != nil {
					t.Fatal(err)
				}
				from = h.LastOffset() + 1
				rest = r
			}
		}
		res.Release()
	}
	t.Fatal("logBytes did not terminate")
	return nil
}

// produce sends n records with acks=all to broker nd and waits for every
// acknowledgement; it returns how many failed.
func produce(t testing.TB, nd *node, n int, tag string) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(nd.addr), kgo.DefaultProduceTopic(testTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordRetries(3), kgo.ProduceRequestTimeout(hangGuard))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for i := 0; i < n; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("%s-%d", tag, i%17)), Value: []byte(fmt.Sprintf("%s-%06d-%s", tag, i, bytes.Repeat([]byte("x"), 100)))},
			func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
				wg.Done()
			})
	}
	wg.Wait()
	return failed
}

// appendOne appends one small batch to l with its current leader epoch.
func appendOne(t testing.TB, l *engine.Log, value string) engine.AppendInfo {
	t.Helper()
	var b record.Builder
	b.Reset(record.CodecNone, time.Now().UnixMilli())
	b.Add(time.Now().UnixMilli(), []byte("k"), []byte(value), nil)
	batch, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Append(batch, l.LeaderEpoch())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// waitReplicated runs Manager.WaitReplicated and returns its answer.
func waitReplicated(t testing.TB, m *replica.Manager, l *engine.Log, last int64) error {
	t.Helper()
	ch := make(chan error, 1)
	m.WaitReplicated(l, last, func(err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-time.After(hangGuard):
		t.Fatalf("WaitReplicated(%d) never answered; HW %d", last, l.HighWatermark())
		return nil
	}
}

func controllerFence(id int32) controller.Command   { return controller.FenceBroker{ID: id} }
func controllerUnfence(id int32) controller.Command { return controller.UnfenceBroker{ID: id} }

// partitionFor is p as broker leader would be told it, at leaderEpoch.
func partitionFor(l *engine.Log, p controller.Partition, leader, leaderEpoch int32) replica.Partition {
	return replica.Partition{Log: l, Topic: testTopic, Partition: 0, Leader: leader, LeaderEpoch: leaderEpoch,
		PartitionEpoch: p.PartitionEpoch + 1, Replicas: p.Replicas, ISR: p.Replicas, MinISR: 1}
}
