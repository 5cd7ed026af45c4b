package server

// Consumer groups end to end: franz-go group consumers (kgo.ConsumerGroup,
// the classic protocol) against an in-process broker on 127.0.0.1. No wall
// clock is asserted on; every wait is bounded by testTimeout as a hang guard.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupTestConfig makes groups fast to test: short session timeouts are
// allowed, no initial rebalance delay, deadlines checked every 20 ms.
func groupTestConfig(c *Config, _ *engine.Options) {
	c.Groups.Coordinator = group.Config{MinSessionTimeoutMs: 500, InitialRebalanceDelayMs: -1, TickMs: 20,
		ConsumerSessionTimeoutMs: 1500, ConsumerHeartbeatIntervalMs: 100}
}

// restartableBroker is a broker whose data directory outlives it, so a test
// can stop it and start another over the same data.
type restartableBroker struct {
	t    *testing.T
	dir  string
	addr string
	s    *Server
	eng  *engine.Engine
	done chan error
	logs *logBuffer
}

func startRestartable(t *testing.T, dir string) *restartableBroker {
	t.Helper()
	b := &restartableBroker{t: t, dir: dir, logs: &logBuffer{}}
	logger := slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := Config{ClusterID: "strata-group-test", NumPartitions: 1, AutoCreateTopics: true, Logger: logger}
	groupTestConfig(&cfg, nil)
	eng, err := engine.Open(engine.Options{Dir: dir, Log: engine.DefaultLogConfig(), Logger: logger})
	if err != nil {
		t.Fatalf("engine.Open: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	b.eng, b.s, b.addr, b.done = eng, New(cfg, eng), ln.Addr().String(), make(chan error, 1)
	go func() { b.done <- b.s.Serve(ln) }()
	t.Cleanup(b.stop)
	return b
}

// stop closes the server and the engine; idempotent.
func (b *restartableBroker) stop() {
	if b.s == nil {
		return
	}
	b.s.Close()
	select {
	case <-b.done:
	case <-time.After(testTimeout):
		b.t.Errorf("Serve did not return after Close")
	}
	if err := b.eng.Close(); err != nil {
		b.t.Errorf("engine.Close: %v", err)
	}
	if b.t.Failed() {
		b.t.Logf("broker logs:\n%s", b.logs)
	}
	b.s = nil
}

// seenSet records every (partition, offset) any consumer processed.
type seenSet struct {
	mu    sync.Mutex
	count map[[2]int64]int
}

func newSeen() *seenSet { return &seenSet{count: map[[2]int64]int{}} }

func (s *seenSet) add(p int32, off int64) {
	s.mu.Lock()
	s.count[[2]int64{int64(p), off}]++
	s.mu.Unlock()
}

// has reports whether every offset in [0, ends[p]) of every partition was seen.
func (s *seenSet) has(ends map[int32]int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, end := range ends {
		for o := int64(0); o < end; o++ {
			if s.count[[2]int64{int64(p), o}] == 0 {
				return false
			}
		}
	}
	return true
}

// groupConsumer is one kgo group member polling in its own goroutine
// (owned by the test: stop or kill ends it).
type groupConsumer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	// minSeen is the smallest offset this consumer processed per partition.
	mu      sync.Mutex
	minSeen map[int32]int64
}

func startConsumer(t *testing.T, addr, groupID, topic string, seen *seenSet, opts ...kgo.Opt) *groupConsumer {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ConsumerGroup(groupID),
		kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(1500 * time.Millisecond),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second),
		kgo.AutoCommitInterval(100 * time.Millisecond),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &groupConsumer{cl: cl, cancel: cancel, done: make(chan struct{}), minSeen: map[int32]int64{}}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				seen.add(r.Partition, r.Offset)
				c.mu.Lock()
				if m, ok := c.minSeen[r.Partition]; !ok || r.Offset < m {
					c.minSeen[r.Partition] = r.Offset
				}
				c.mu.Unlock()
			})
		}
	}()
	t.Cleanup(c.stop)
	return c
}

// stop ends polling and closes the client (leaving the group, committing
// what was consumed). Idempotent.
func (c *groupConsumer) stop() {
	if c.cl == nil {
		return
	}
	c.cancel()
	<-c.done
	c.cl.Close()
	c.cl = nil
}

// produceSpread produces n records spread evenly over partitions and
// returns the partitions' end offsets.
func produceSpread(t *testing.T, addr, topic string, partitions int32, n int) map[int32]int64 {
	t.Helper()
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(fmt.Sprint(i))}
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// waitFor polls cond (bounded by testTimeout) and fails with what() if it
// never holds.
func waitFor(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupShape describes a group: state, members and the partitions each owns.
func groupShape(t *testing.T, adm *kadm.Client, groupID string) (string, map[string][]int32) {
	t.Helper()
	ds, err := adm.DescribeGroups(testCtx(t), groupID)
	if err != nil {
		t.Fatalf("DescribeGroups: %v", err)
	}
	d := ds[groupID]
	out := map[string][]int32{}
	for _, m := range d.Members {
		ca, _ := m.Assigned.AsConsumer()
		var ps []int32
		if ca != nil {
			for _, tp := range ca.Topics {
				ps = append(ps, tp.Partitions...)
			}
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out[m.MemberID] = ps
	}
	return d.State, out
}

// balanced reports a Stable group of want members whose assignments cover
// partitions 0..n-1 exactly once, each member owning at least one.
func balanced(state string, shape map[string][]int32, want int, n int32) bool {
	if state != "Stable" || len(shape) != want {
		return false
	}
	owned := map[int32]int{}
	for _, ps := range shape {
		if len(ps) == 0 {
			return false
		}
		for _, p := range ps {
			owned[p]++
		}
	}
	for p := int32(0); p < n; p++ {
		if owned[p] != 1 {
			return false
		}
	}
	return len(owned) == int(n)
}

func TestGroupMembersKillJoinRestart(t *testing.T) {
	killJoinRestart(t, groupShape)
}

// TestConsumerGroup848KillJoinRestart is the same story with KIP-848:
// the broker assigns (uniform), members heartbeat with
// ConsumerGroupHeartbeat, and the killed static member's partitions move
// when its session times out on the broker.
func TestConsumerGroup848KillJoinRestart(t *testing.T) {
	killJoinRestart(t, consumerGroupShape, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
}

// consumerGroupShape is groupShape through ConsumerGroupDescribe.
func consumerGroupShape(t *testing.T, adm *kadm.Client, groupID string) (string, map[string][]int32) {
	t.Helper()
	_ = adm
	return consumerShapeVia(t, groupID)
}

func killJoinRestart(t *testing.T, shapeOf func(*testing.T, *kadm.Client, string) (string, map[string][]int32), opts ...kgo.Opt) {
	b := startRestartable(t, t.TempDir())
	currentAddr = b.addr
	adm := newAdmin(t, b.addr)
	const topic, gid, parts = "stream", "g-classic", int32(6)
	if _, err := adm.CreateTopic(testCtx(t), parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	seen := newSeen()
	ends := produceSpread(t, b.addr, topic, parts, 300)

	c1 := startConsumer(t, b.addr, gid, topic, seen, opts...)
	c2 := startConsumer(t, b.addr, gid, topic, seen, opts...)
	victim := startConsumer(t, b.addr, gid, topic, seen, append(opts, kgo.InstanceID("victim"))...)
	shape := func() string { s, m := shapeOf(t, adm, gid); return fmt.Sprint(s, m) }
	waitFor(t, shape, func() bool { s, m := shapeOf(t, adm, gid); return balanced(s, m, 3, parts) })
	waitFor(t, func() string { return "first batch consumed" }, func() bool { return seen.has(ends) })

	// Kill the static member: Close sends no LeaveGroup for a static
	// member, so the group only notices when its session times out.
	victim.stop()
	ends = produceSpread(t, b.addr, topic, parts, 300)
	waitFor(t, shape, func() bool { s, m := shapeOf(t, adm, gid); return balanced(s, m, 2, parts) })
	waitFor(t, func() string { return "second batch consumed by the survivors" }, func() bool { return seen.has(ends) })

	// A new member joins: the group rebalances over three again.
	c4 := startConsumer(t, b.addr, gid, topic, seen, opts...)
	waitFor(t, shape, func() bool { s, m := shapeOf(t, adm, gid); return balanced(s, m, 3, parts) })
	ends = produceSpread(t, b.addr, topic, parts, 300)
	waitFor(t, func() string { return "third batch consumed" }, func() bool { return seen.has(ends) })

	// Everyone stops (committing on the way out); the commits are what the
	// next generation resumes from.
	for _, c := range []*groupConsumer{c1, c2, c4} {
		if err := c.cl.CommitUncommittedOffsets(testCtx(t)); err != nil {
			t.Fatalf("commit: %v", err)
		}
		c.stop()
	}
	committed, err := adm.FetchOffsets(testCtx(t), gid)
	if err != nil {
		t.Fatal(err)
	}
	commits := map[int32]int64{}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Errorf("committed %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		commits[o.Partition] = o.At
	})
	for p := int32(0); p < parts; p++ {
		if commits[p] != ends[p] {
			t.Errorf("partition %d committed at %d, want the end %d (everything was consumed)", p, commits[p], ends[p])
		}
	}

	// Restart the broker too: commits come back from __consumer_offsets.
	dir := b.dir
	b.stop()
	b = startRestartable(t, dir)
	currentAddr = b.addr
	adm = newAdmin(t, b.addr)
	ends = produceSpread(t, b.addr, topic, parts, 120)
	var again []*groupConsumer
	for i := 0; i < 3; i++ {
		again = append(again, startConsumer(t, b.addr, gid, topic, seen, opts...))
	}
	waitFor(t, func() string { return "fourth batch consumed after restart" }, func() bool { return seen.has(ends) })
	for _, c := range again {
		c.mu.Lock()
		for p, m := range c.minSeen {
			if m < commits[p] {
				t.Errorf("after restart a member re-read partition %d from %d, below the commit %d", p, m, commits[p])
			}
		}
		c.mu.Unlock()
	}
	if !seen.has(ends) {
		t.Fatal("the union of what was processed misses records")
	}
}

func TestGroupTwoGroupsIndependent(t *testing.T) {
	addr, _, _ := startBroker(t, groupTestConfig)
	adm := newAdmin(t, addr)
	const topic, parts = "shared", int32(3)
	if _, err := adm.CreateTopic(testCtx(t), parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	ends := produceSpread(t, addr, topic, parts, 90)
	fast, slow := newSeen(), newSeen()
	startConsumer(t, addr, "fast", topic, fast)
	// The slow group takes few records per fetch and uses the eager range
	// protocol (the fast one kgo's default, cooperative-sticky).
	startConsumer(t, addr, "slow", topic, slow, kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxBytes(1),
		kgo.Balancers(kgo.RangeBalancer()))
	startConsumer(t, addr, "slow", topic, slow, kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxBytes(1),
		kgo.Balancers(kgo.RangeBalancer()))
	waitFor(t, func() string { return "fast group consumed everything" }, func() bool { return fast.has(ends) })
	waitFor(t, func() string { return "slow group consumed everything" }, func() bool { return slow.has(ends) })
	waitFor(t, func() string { return "both groups committed the end" }, func() bool {
		for _, g := range []string{"fast", "slow"} {
			o, err := adm.FetchOffsets(testCtx(t), g)
			if err != nil {
				return false
			}
			for p := int32(0); p < parts; p++ {
				r, ok := o.Lookup(topic, p)
				if !ok || r.At != ends[p] {
					return false
				}
			}
		}
		return true
	})
	ds, err := adm.DescribeGroups(testCtx(t), "slow")
	if err != nil || ds["slow"].Protocol != "range" || len(ds["slow"].Members) != 2 {
		t.Errorf("slow group: %+v %v, want 2 members on range", ds["slow"], err)
	}
	listed, err := adm.ListGroups(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["fast"]; !ok {
		t.Errorf("ListGroups misses fast: %v", listed.Groups())
	}
	if _, ok := listed["slow"]; !ok {
		t.Errorf("ListGroups misses slow: %v", listed.Groups())
	}
	// Deleting a group with members is refused.
	del, err := adm.DeleteGroups(testCtx(t), "fast")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(del["fast"].Err, kerr.NonEmptyGroup) {
		t.Errorf("DeleteGroups of a live group: %v, want NON_EMPTY_GROUP", del["fast"].Err)
	}
}

// currentAddr is the broker killJoinRestart talks to (consumerShapeVia).
var currentAddr string

// consumerShapeVia describes a KIP-848 group with ConsumerGroupDescribe.
func consumerShapeVia(t *testing.T, groupID string) (string, map[string][]int32) {
	t.Helper()
	cl := newClient(t, currentAddr)
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{groupID}
	resp := issue[*kmsg.ConsumerGroupDescribeResponse](t, cl, req)
	g := resp.Groups[0]
	out := map[string][]int32{}
	for _, m := range g.Members {
		var ps []int32
		for _, tp := range m.Assignment.TopicPartitions {
			ps = append(ps, tp.Partitions...)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out[m.MemberID] = ps
	}
	return g.State, out
}
