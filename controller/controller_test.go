package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

const waitLimit = 30 * time.Second

// eventually polls cond every 10ms until it holds or waitLimit passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
}

// manualClock is the controllers' clock in tests: time moves when the test
// says so.
type manualClock struct{ ms atomic.Int64 }

func (c *manualClock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *manualClock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

type cluster struct {
	t      *testing.T
	voters map[int32]string
	dirs   map[int32]string
	nodes  map[int32]*Controller
	clock  *manualClock
	tweak  func(id int32, cfg *Config) // set by newClusterWith: applied before each New
}

func testConfig(id int32, voters map[int32]string, dir string, ln net.Listener, clock *manualClock) Config {
	return Config{
		NodeID: id, Voters: voters, DataDir: dir, Listener: ln, Logger: quietLogger(),
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		SessionTimeout: time.Hour, TickInterval: 20 * time.Millisecond, Now: clock.now,
	}
}

func newCluster(t *testing.T, n int) *cluster { return newClusterWith(t, n, nil) }

// newClusterWith is newCluster with tweak applied to each node's Config.
func newClusterWith(t *testing.T, n int, tweak func(id int32, cfg *Config)) *cluster {
	c := &cluster{t: t, voters: map[int32]string{}, dirs: map[int32]string{}, nodes: map[int32]*Controller{}, clock: &manualClock{}, tweak: tweak}
	c.clock.ms.Store(1_000_000)
	lns := map[int32]net.Listener{}
	for i := int32(0); i < int32(n); i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		c.voters[i] = ln.Addr().String()
		c.dirs[i] = t.TempDir()
	}
	for i := int32(0); i < int32(n); i++ {
		c.start(i, lns[i])
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.Close()
		}
	})
	return c
}

func (c *cluster) start(id int32, ln net.Listener) {
	c.t.Helper()
	if ln == nil {
		var err error
		for i := 0; i < 100; i++ { // the port was ours a moment ago
			if ln, err = net.Listen("tcp", c.voters[id]); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			c.t.Fatal(err)
		}
	}
	cfg := testConfig(id, c.voters, c.dirs[id], ln, c.clock)
	if c.tweak != nil {
		c.tweak(id, &cfg)
	}
	nd, err := New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes[id] = nd
}

func (c *cluster) stop(id int32) {
	c.t.Helper()
	if err := c.nodes[id].Close(); err != nil {
		c.t.Logf("close %d: %v", id, err)
	}
	delete(c.nodes, id)
}

// leader waits for exactly one running node to lead and returns it.
func (c *cluster) leader() *Controller {
	c.t.Helper()
	var l *Controller
	eventually(c.t, "a single leader", func() bool {
		l = nil
		n := 0
		for _, nd := range c.nodes {
			if nd.IsLeader() {
				l = nd
				n++
			}
		}
		if n != 1 {
			return false
		}
		for _, nd := range c.nodes {
			if id, ok := nd.Leader(); !ok || id != l.NodeID() {
				return false
			}
		}
		return true
	})
	return l
}

func (c *cluster) follower() *Controller {
	for _, nd := range c.nodes {
		if !nd.IsLeader() {
			return nd
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// converged waits until every running node has applied off and all hold
// the same state, and returns its encoding.
func (c *cluster) converged(off int64) []byte {
	c.t.Helper()
	var enc []byte
	eventually(c.t, fmt.Sprintf("convergence at offset %d", off), func() bool {
		enc = nil
		for _, nd := range c.nodes {
			var e []byte
			nd.Read(func(s *State) {
				if s.Offset() >= off {
					e = s.AppendTo(nil)
				}
			})
			if e == nil || (enc != nil && !bytes.Equal(e, enc)) {
				return false
			}
			enc = e
		}
		return true
	})
	return enc
}

func mustPropose(t *testing.T, c *Controller, cmd Command) Result {
	t.Helper()
	r, err := c.Propose(testCtx(t), cmd)
	if err != nil {
		t.Fatalf("propose %T: %v", cmd, err)
	}
	if r.Code != 0 {
		t.Fatalf("propose %T: %v", cmd, r.Err())
	}
	return r
}

// registerAll registers and unfences brokers 0..n-1 through node via.
func registerAll(t *testing.T, via *Controller, n int32) {
	t.Helper()
	for id := int32(0); id < n; id++ {
		r := mustPropose(t, via, RegisterBroker{ID: id, IncarnationID: NewIncarnationID(), Host: "127.0.0.1", Port: 9092 + id})
		hb := mustPropose(t, via, BrokerHeartbeat{ID: id, Epoch: r.BrokerEpoch, MetadataOffset: r.Offset})
		if hb.Fenced {
			t.Fatalf("broker %d fenced after a caught-up heartbeat", id)
		}
	}
}

func TestSingleNodeLeadsAndRestarts(t *testing.T) {
	c := newCluster(t, 1)
	nd := c.leader()
	w := nd.Watch()
	defer w.Close()
	<-w.C() // the initial signal

	registerAll(t, nd, 1)
	r := mustPropose(t, nd, CreateTopic{Name: "orders", ID: NewTopicID(), Partitions: 3, ReplicationFactor: 1})
	select {
	case <-w.C():
	case <-time.After(waitLimit):
		t.Fatal("no watch signal after a change")
	}
	if err := nd.WaitApplied(testCtx(t), r.Offset); err != nil {
		t.Fatal(err)
	}
	var leaders []int32
	nd.Read(func(s *State) {
		for _, p := range s.Topic("orders").Partitions {
			leaders = append(leaders, p.Leader)
		}
	})
	if len(leaders) != 3 || leaders[0] != 0 {
		t.Fatalf("leaders %v", leaders)
	}
	if b, ok := nd.State().Broker(0); !ok || b.LastHeartbeatMs != c.clock.ms.Load() {
		t.Fatalf("heartbeat time %d not stamped from the leader's clock %d", b.LastHeartbeatMs, c.clock.ms.Load())
	}
	before := nd.State().AppendTo(nil)

	c.stop(0)
	if _, err := nd.Propose(context.Background(), Tick{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("propose after close: %v", err)
	}
	c.start(0, nil)
	nd = c.leader()
	var got []byte
	eventually(t, "replay after restart", func() bool {
		nd.Read(func(s *State) {
			if s.Offset() >= r.Offset {
				got = s.AppendTo(nil)
			}
		})
		return got != nil
	})
	// The replayed state equals the one before, but for the session reset
	// the new leader proposed on election.
	restored, err := DecodeState(got)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := DecodeState(before)
	if restored.Topic("orders") == nil || restored.Topic("orders").ID != old.Topic("orders").ID {
		t.Fatal("topic lost across restart")
	}
}

func TestThreeNodeClusterForwardsAndConverges(t *testing.T) {
	c := newCluster(t, 3)
	c.leader()
	f := c.follower()
	registerAll(t, f, 3)
	r := mustPropose(t, f, CreateTopic{Name: "t", ID: NewTopicID(), Partitions: 6, ReplicationFactor: 3})
	enc := c.converged(r.Offset)
	s, err := DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if tp := s.Topic("t"); tp == nil || len(tp.Partitions) != 6 {
		t.Fatal("topic missing on the converged state")
	}
	// A refusal is a Result, not an error, also through forwarding.
	rr, err := c.follower().Propose(testCtx(t), CreateTopic{Name: "t", ID: NewTopicID(), Partitions: 1, ReplicationFactor: 1})
	if err != nil || rr.Code != kerr.TopicAlreadyExists.Code {
		t.Fatalf("duplicate create: %v %+v", err, rr)
	}
}

// TestLeaderKilledDuringProposals closes the Raft leader while a stream of
// proposals (topic creations and broker fencing, which move partition
// leaders) runs through a follower; a new leader takes over, the survivors
// agree, every state any node showed had at most one leader per (partition,
// leader epoch), and the old leader, restarted from its data directory,
// catches up.
func TestLeaderKilledDuringProposals(t *testing.T) {
	c := newCluster(t, 3)
	old := c.leader()
	registerAll(t, c.follower(), 3)

	var ledgerMu sync.Mutex
	ledger := leaderLedger{}
	var violation atomic.Value
	observe := func(nd *Controller) {
		nd.Read(func(s *State) {
			ledgerMu.Lock()
			defer ledgerMu.Unlock()
			if err := ledger.observe(s); err != nil {
				violation.Store(err.Error())
			}
		})
	}
	stopObs := make(chan struct{})
	var obsWG sync.WaitGroup
	for _, nd := range c.nodes {
		w := nd.Watch()
		obsWG.Add(1)
		go func(nd *Controller, w *Watcher) {
			defer obsWG.Done()
			defer w.Close()
			for {
				select {
				case <-stopObs:
					return
				case <-w.C():
					observe(nd)
				}
			}
		}(nd, w)
	}

	// The proposer goes through a node that survives.
	var via *Controller
	for _, nd := range c.nodes {
		if nd != old {
			via = nd
			break
		}
	}
	// Two proposers: one through a surviving node, one through the leader
	// itself (its proposals in flight when it closes end as ErrClosed or
	// ErrUnknownOutcome). The leader is closed while both run.
	const total = 40
	var (
		mu         sync.Mutex
		ok         int
		unknown    int
		lastOffset int64
		createdOK  []string
	)
	propose := func(nd *Controller, prefix string, n int, afterKill func(error) bool) {
		for i := 0; i < n; i++ {
			var cmd Command = CreateTopic{Name: fmt.Sprintf("%s-%d", prefix, i), ID: NewTopicID(), Partitions: 2, ReplicationFactor: 3}
			if i%3 == 1 {
				cmd = FenceBroker{ID: int32(i % 3)}
			} else if i%3 == 2 {
				cmd = UnfenceBroker{ID: int32((i - 1) % 3)}
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			r, err := nd.Propose(ctx, cmd)
			cancel()
			mu.Lock()
			switch {
			case err == nil:
				ok++
				lastOffset = max(lastOffset, r.Offset)
				if ct, isCreate := cmd.(CreateTopic); isCreate && r.Code == 0 {
					createdOK = append(createdOK, ct.Name)
				}
			case errors.Is(err, ErrUnknownOutcome):
				unknown++
			}
			mu.Unlock()
			if err != nil && afterKill == nil && errors.Is(err, ErrUnknownOutcome) {
				continue // in flight at the kill: may or may not have been applied
			}
			if err != nil && (afterKill == nil || !afterKill(err)) {
				t.Errorf("%s proposal %d: %v", prefix, i, err)
				return
			}
			if err != nil {
				return
			}
		}
	}
	var killed atomic.Bool
	var pw sync.WaitGroup
	pw.Add(2)
	go func() { defer pw.Done(); propose(via, "topic", total, nil) }()
	go func() {
		defer pw.Done()
		propose(old, "old", 1000, func(err error) bool {
			return killed.Load() && (errors.Is(err, ErrClosed) || errors.Is(err, ErrUnknownOutcome))
		})
	}()
	eventually(t, "proposals before the kill", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ok >= 10
	})
	killed.Store(true)
	c.stop(old.NodeID())
	pw.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d proposals acknowledged, %d of unknown outcome, %d topics created", ok, unknown, len(createdOK))
	if ok < total-5 {
		t.Fatalf("only %d proposals acknowledged", ok)
	}
	nl := c.leader()
	if nl == old {
		t.Fatal("closed node still leads")
	}
	c.converged(lastOffset)
	close(stopObs)
	obsWG.Wait()
	for _, nd := range c.nodes {
		observe(nd)
	}
	if v := violation.Load(); v != nil {
		t.Fatal(v)
	}

	// Restart the old leader from its data directory: it catches up.
	c.start(old.NodeID(), nil)
	r := mustPropose(t, c.nodes[old.NodeID()], CreateTopic{Name: "after-restart", ID: NewTopicID(), Partitions: 1, ReplicationFactor: 2})
	enc := c.converged(r.Offset)
	s, err := DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(createdOK) < 5 || s.Topic("after-restart") == nil {
		t.Fatalf("%d acknowledged creations", len(createdOK))
	}
	for _, name := range createdOK { // every acknowledged creation survived
		if s.Topic(name) == nil {
			t.Fatalf("acknowledged topic %s missing", name)
		}
	}
	if err := ledger.observe(s); err != nil {
		t.Fatal(err)
	}
}

// TestSessionExpiryFencesSilentBroker drives fencing through the leader's
// own Ticks with a manual clock: the broker that keeps heartbeating stays,
// the silent one is fenced and its partitions move.
func TestSessionExpiryFencesSilentBroker(t *testing.T) {
	clock := &manualClock{}
	clock.ms.Store(5_000_000)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(0, map[int32]string{0: ln.Addr().String()}, t.TempDir(), ln, clock)
	cfg.SessionTimeout = 9 * time.Second
	nd, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	eventually(t, "leadership", nd.IsLeader)
	// The new leader's first command restarts every session; wait for it so
	// that it does not land after the clock moves below.
	eventually(t, "the leader's session reset", func() bool { return nd.Offset() >= 1 })
	registerAll(t, nd, 2)
	mustPropose(t, nd, CreateTopic{Name: "t", ID: NewTopicID(), Assignment: [][]int32{{0, 1}}})

	clock.advance(8 * time.Second)
	b1, _ := nd.State().Broker(1)
	mustPropose(t, nd, BrokerHeartbeat{ID: 1, Epoch: b1.Epoch, MetadataOffset: nd.Offset()})
	clock.advance(2 * time.Second) // broker 0: 10s silent; broker 1: 2s
	eventually(t, "broker 0 fenced by session expiry", func() bool {
		b, _ := nd.State().Broker(0)
		return b.Fenced
	})
	st := nd.State()
	if b, _ := st.Broker(1); b.Fenced {
		t.Fatal("heartbeating broker fenced")
	}
	if p, _ := st.Partition("t", 0); p.Leader != 1 || p.LeaderEpoch != 1 {
		t.Fatalf("partition after fencing its leader: %+v", p)
	}
}

// TestObserverJoins runs a one-voter quorum and a node outside it: the
// observer joins as a non-voter, receives the metadata and forwards its
// proposals to the leader.
func TestObserverJoins(t *testing.T) {
	clock := &manualClock{}
	ln0, _ := net.Listen("tcp", "127.0.0.1:0")
	ln1, _ := net.Listen("tcp", "127.0.0.1:0")
	voters := map[int32]string{0: ln0.Addr().String()}
	v, err := New(testConfig(0, voters, t.TempDir(), ln0, clock))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	cfg := testConfig(5, voters, t.TempDir(), ln1, clock)
	cfg.RaftAddr = ln1.Addr().String()
	o, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	eventually(t, "observer knows the leader", func() bool {
		id, ok := o.Leader()
		return ok && id == 0
	})
	r := mustPropose(t, o, RegisterBroker{ID: 5, IncarnationID: NewIncarnationID(), Host: "h", Port: 1})
	if err := o.WaitApplied(testCtx(t), r.Offset); err != nil {
		t.Fatal(err)
	}
	if _, ok := o.State().Broker(5); !ok || o.IsLeader() {
		t.Fatal("observer missing its own registration, or leading")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{NodeID: 0, DataDir: t.TempDir()},
		{NodeID: -1, Voters: map[int32]string{0: "127.0.0.1:1"}, DataDir: t.TempDir()},
		{NodeID: 1, Voters: map[int32]string{0: "127.0.0.1:1"}, DataDir: t.TempDir()},
		{NodeID: 0, Voters: map[int32]string{0: "127.0.0.1:1"}},
	} {
		if c, err := New(cfg); err == nil {
			c.Close()
			t.Fatalf("config %+v accepted", cfg)
		}
	}
}

func TestParseQuorum(t *testing.T) {
	v, err := ParseQuorum("0@127.0.0.1:9093, 1@localhost:9094,2@[::1]:9095")
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 3 || v[0] != "127.0.0.1:9093" || v[1] != "localhost:9094" || v[2] != "[::1]:9095" {
		t.Fatalf("%v", v)
	}
	if s := FormatQuorum(v); s != "0@127.0.0.1:9093,1@localhost:9094,2@[::1]:9095" {
		t.Fatalf("format %q", s)
	}
	for _, bad := range []string{"", "0", "@h:1", "x@h:1", "-1@h:1", "0@h", "0@h:0", "0@h:70000", "0@:1",
		"0@h:1,0@h:2", "0@h:1,1@h:1"} {
		if _, err := ParseQuorum(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
