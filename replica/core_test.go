package replica

// Unit tests of the leader-side core (core.go): explicit times, explicit
// log positions, no goroutines, no clock, no sockets.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

const (
	t0    = int64(1_000_000) // the tests' epoch, ms
	lagMs = int64(30_000)
	boMs  = int64(1_000)
)

func testCfg() coreConfig {
	return coreConfig{self: 1, lagMs: lagMs, backoffMs: boMs, canAlter: true}
}

func leaderState(leaderEpoch, partitionEpoch int32, replicas, isr []int32, minISR int) Partition {
	return Partition{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch,
		Replicas: replicas, ISR: isr, MinISR: minISR}
}

// newLeader is a core that became leader of replicas with isr at now.
func newLeader(t *testing.T, cfg coreConfig, replicas, isr []int32, now int64, pos logPos) *core {
	t.Helper()
	c := newCore(cfg, "t", 0)
	st := leaderState(5, 9, replicas, isr, 2)
	newEpoch, err := c.prepareLeader(&st, false)
	if err != nil || !newEpoch {
		t.Fatalf("prepareLeader: newEpoch %v err %v", newEpoch, err)
	}
	c.becomeLeader(&st, newEpoch, now, pos)
	return c
}

// pos is a log whose end and durable end are end, with the given HW and
// current epoch starting at 0.
func pos(end, hw int64) logPos { return logPos{end: end, durable: end, hw: hw, epochStart: 0} }

func mustFetch(t *testing.T, c *core, id int32, off, now int64, p logPos) actions {
	t.Helper()
	a, err := c.followerFetch(id, -1, off, now, p)
	if err != nil {
		t.Fatalf("fetch by %d at %d: %v", id, off, err)
	}
	return a
}

// TestCoreHighWatermark: the HW is min(leader's durable end, every other
// ISR member's fetch offset), waits for every ISR member's first fetch,
// ignores followers out of the ISR, includes a member being added, and
// never moves backwards.
func TestCoreHighWatermark(t *testing.T) {
	type fetch struct {
		id     int32
		off    int64
		pos    logPos
		wantHW int64 // advanceHW asked for; -1 none
	}
	cases := []struct {
		name     string
		replicas []int32
		isr      []int32
		fetches  []fetch
	}{
		{"waits for every ISR member's first fetch", []int32{1, 2, 3}, []int32{1, 2, 3}, []fetch{
			{2, 10, pos(10, 0), -1},
			{3, 7, pos(10, 0), 7},
			{3, 10, pos(10, 7), 10},
		}},
		{"min of the ISR followers' fetch offsets", []int32{1, 2, 3}, []int32{1, 2, 3}, []fetch{
			{2, 4, pos(20, 0), -1},
			{3, 12, pos(20, 0), 4},
			{2, 15, pos(20, 4), 12},
			{3, 20, pos(20, 12), 15},
			{2, 20, pos(20, 15), 20},
		}},
		{"the leader's durable end bounds it", []int32{1, 2}, []int32{1, 2}, []fetch{
			{2, 10, logPos{end: 10, durable: 6, hw: 0}, 6},
			{2, 10, logPos{end: 10, durable: 10, hw: 6}, 10},
		}},
		{"followers out of the ISR do not hold it back", []int32{1, 2, 3}, []int32{1, 2}, []fetch{
			{3, 0, pos(10, 0), -1},
			{2, 10, pos(10, 0), 10},
		}},
		{"a leader alone in the ISR: its durable end", []int32{1, 2}, []int32{1}, []fetch{
			{2, 3, pos(10, 0), 10},
		}},
		{"never backwards: a follower refetching lower asks nothing", []int32{1, 2}, []int32{1, 2}, []fetch{
			{2, 8, pos(10, 0), 8},
			{2, 5, pos(10, 8), -1},
			{2, 8, pos(10, 8), -1},
			{2, 9, pos(10, 8), 9},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testCfg()
			cfg.canAlter = false // HW only: no ISR changes
			c := newLeader(t, cfg, tc.replicas, tc.isr, t0, pos(0, 0))
			for i, f := range tc.fetches {
				a := mustFetch(t, c, f.id, f.off, t0+int64(i), f.pos)
				if a.advanceHW != f.wantHW {
					t.Fatalf("fetch %d (%d at %d): advanceHW %d, want %d", i, f.id, f.off, a.advanceHW, f.wantHW)
				}
				if a.propose != nil {
					t.Fatalf("fetch %d: proposed %v without an ISR updater", i, a.propose.req.ISR)
				}
			}
		})
	}
}

// TestCoreHWMaximalISR: while adding a member is in flight the HW waits for
// it too (Kafka's maximal ISR); once the controller refuses, the committed
// ISR rules again.
func TestCoreHWMaximalISR(t *testing.T) {
	c := newLeader(t, testCfg(), []int32{1, 2, 3}, []int32{1, 2}, t0, pos(0, 0))
	if a := mustFetch(t, c, 2, 10, t0, pos(10, 0)); a.advanceHW != 10 {
		t.Fatalf("HW with ISR [1 2]: %d, want 10", a.advanceHW)
	}
	// 3 reaches the HW: proposed; the next fetch of 2 sees the maximal ISR.
	a := mustFetch(t, c, 3, 10, t0+1, pos(20, 10))
	if a.propose == nil || !slices.Equal(a.propose.req.ISR, []int32{1, 2, 3}) {
		t.Fatalf("expansion: %+v", a.propose)
	}
	if a := mustFetch(t, c, 2, 20, t0+2, pos(20, 10)); a.advanceHW != -1 {
		t.Fatalf("HW while adding 3 (at 10): %d, want none", a.advanceHW)
	}
	out, a2 := c.alterDone(a.propose, AlterPartitionResult{}, kerr.InvalidUpdateVersion, t0+3, pos(20, 10))
	if out != alterRefused || a2.advanceHW != 20 {
		t.Fatalf("refusal: outcome %d advanceHW %d, want refused and 20", out, a2.advanceHW)
	}
}

// TestCoreISRShrink: an ISR member not caught up within
// replica.lag.time.max.ms is proposed out at the next tick, and not a
// millisecond earlier.
func TestCoreISRShrink(t *testing.T) {
	type fetch struct {
		at  int64 // ms after t0
		off int64
		end int64 // the leader's log end at the fetch
	}
	cases := []struct {
		name       string
		fetches    []fetch // by follower 2; follower 3 fetches at the log end every time
		lastCaught int64   // follower 2's lastCaughtUpMs after them (ms after t0)
	}{
		{"never fetched: caught up when leadership began", nil, 0},
		{"fetched at the end", []fetch{{100, 50, 50}}, 100},
		{"behind the end: not caught up", []fetch{{100, 40, 50}, {200, 45, 60}}, 0},
		{"reached the end it saw at its previous fetch: caught up then",
			[]fetch{{100, 40, 50}, {200, 50, 60}}, 100},
		{"past the previous end, twice", []fetch{{100, 40, 50}, {200, 55, 60}, {300, 61, 70}}, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newLeader(t, testCfg(), []int32{1, 2, 3}, []int32{1, 2, 3}, t0, pos(0, 0))
			var last int64
			for _, f := range tc.fetches {
				mustFetch(t, c, 2, f.off, t0+f.at, logPos{end: f.end, durable: f.end, hw: 0})
				mustFetch(t, c, 3, f.end, t0+f.at, logPos{end: f.end, durable: f.end, hw: 0})
				last = f.end
			}
			if got := c.followers[2].lastCaughtUpMs; got != t0+tc.lastCaught {
				t.Fatalf("lastCaughtUpMs %d, want t0+%d", got-t0, tc.lastCaught)
			}
			// Follower 3 stays caught up; follower 2 stops fetching.
			edge := t0 + tc.lastCaught + lagMs
			mustFetch(t, c, 3, last, edge, logPos{end: last, durable: last, hw: 0})
			if a := c.tick(edge, pos(last, 0)); a.propose != nil {
				t.Fatalf("tick at exactly lag.time.max.ms proposed %v", a.propose.req.ISR)
			}
			mustFetch(t, c, 3, last, edge+1, logPos{end: last, durable: last, hw: 0})
			a := c.tick(edge+1, pos(last, 0))
			if a.propose == nil {
				t.Fatal("tick past lag.time.max.ms proposed nothing")
			}
			want := AlterPartition{Topic: "t", Partition: 0, LeaderEpoch: 5, PartitionEpoch: 9, ISR: []int32{1, 3}}
			if got := a.propose.req; got.Topic != want.Topic || got.LeaderEpoch != want.LeaderEpoch ||
				got.PartitionEpoch != want.PartitionEpoch || !slices.Equal(got.ISR, want.ISR) {
				t.Fatalf("proposal %+v, want %+v", got, want)
			}
			if !slices.Equal(a.propose.from, []int32{1, 2, 3}) {
				t.Fatalf("proposal from %v", a.propose.from)
			}
			if !slices.Equal(c.pendingISR, []int32{1, 3}) {
				t.Fatalf("pending %v", c.pendingISR)
			}
			// One proposal at a time.
			if a := c.tick(edge+2, pos(last, 0)); a.propose != nil {
				t.Fatalf("second proposal while one is in flight: %v", a.propose.req.ISR)
			}
		})
	}
}

// TestCoreISRExpand: a follower out of the ISR is proposed in once its
// fetch offset reached both the HW and the start of the current leader
// epoch, on its fetch or at a tick.
func TestCoreISRExpand(t *testing.T) {
	cases := []struct {
		name   string
		off    int64
		hw     int64
		estart int64
		want   bool
	}{
		{"below the HW", 9, 10, 0, false},
		{"at the HW", 10, 10, 0, true},
		{"past the HW", 12, 10, 0, true},
		{"at the HW, below the epoch start", 10, 10, 11, false},
		{"at the HW and the epoch start", 11, 10, 11, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newLeader(t, testCfg(), []int32{1, 2, 3}, []int32{1, 3}, t0, pos(0, 0))
			p := logPos{end: 20, durable: 20, hw: tc.hw, epochStart: tc.estart}
			a := mustFetch(t, c, 2, tc.off, t0+1, p)
			if got := a.propose != nil; got != tc.want {
				t.Fatalf("proposed on fetch: %v, want %v", got, tc.want)
			}
			if tc.want && !slices.Equal(a.propose.req.ISR, []int32{1, 3, 2}) {
				t.Fatalf("proposed ISR %v, want [1 3 2]", a.propose.req.ISR)
			}
			if tc.want {
				return
			}
			// Not yet: the HW moves to its offset and a tick adds it.
			p.hw, p.epochStart = tc.off, min(tc.estart, tc.off)
			mustFetch(t, c, 3, 20, t0+2, p)
			if a := c.tick(t0+3, p); a.propose == nil || !slices.Equal(a.propose.req.ISR, []int32{1, 3, 2}) {
				t.Fatalf("tick once caught up: %+v", a.propose)
			}
		})
	}
}

// TestCoreAlterDone: the controller's answer to a proposal.
func TestCoreAlterDone(t *testing.T) {
	shrink := func(t *testing.T) (*core, *proposal) {
		t.Helper()
		c := newLeader(t, testCfg(), []int32{1, 2, 3}, []int32{1, 2, 3}, t0, pos(0, 0))
		mustFetch(t, c, 2, 10, t0+1, pos(10, 0)) // 3 never fetches: the HW waits for it
		a := c.tick(t0+lagMs+1, pos(10, 0))
		if a.propose == nil || !slices.Equal(a.propose.req.ISR, []int32{1, 2}) {
			t.Fatalf("shrink: %+v", a.propose)
		}
		return c, a.propose
	}
	t.Run("committed: the ISR and partition epoch move, the HW follows", func(t *testing.T) {
		c, p := shrink(t)
		out, a := c.alterDone(p, AlterPartitionResult{LeaderEpoch: 5, PartitionEpoch: 10, ISR: []int32{1, 2}}, nil, t0+lagMs+2, pos(10, 0))
		if out != alterApplied || !slices.Equal(c.isr, []int32{1, 2}) || c.partitionEpoch != 10 || c.pendingISR != nil {
			t.Fatalf("outcome %d isr %v partitionEpoch %d pending %v", out, c.isr, c.partitionEpoch, c.pendingISR)
		}
		if a.advanceHW != 10 {
			t.Fatalf("advanceHW %d, want 10 (3 no longer counts)", a.advanceHW)
		}
	})
	t.Run("committed but older than the applied state: kept", func(t *testing.T) {
		c, p := shrink(t)
		st := leaderState(5, 11, []int32{1, 2, 3}, []int32{1, 2, 3}, 2)
		c.becomeLeader(&st, false, t0+lagMs+2, pos(10, 0)) // the controller pushed a newer state
		out, _ := c.alterDone(p, AlterPartitionResult{LeaderEpoch: 5, PartitionEpoch: 10, ISR: []int32{1, 2}}, nil, t0+lagMs+3, pos(10, 0))
		if out != alterApplied || !slices.Equal(c.isr, []int32{1, 2, 3}) || c.partitionEpoch != 11 {
			t.Fatalf("outcome %d isr %v partitionEpoch %d", out, c.isr, c.partitionEpoch)
		}
	})
	t.Run("refused: nothing proposed before the next tick", func(t *testing.T) {
		c, p := shrink(t)
		out, _ := c.alterDone(p, AlterPartitionResult{}, fmt.Errorf("%w: stale", kerr.FencedLeaderEpoch), t0+lagMs+2, pos(10, 0))
		if out != alterRefused || c.pendingISR != nil || !slices.Equal(c.isr, []int32{1, 2, 3}) {
			t.Fatalf("outcome %d pending %v isr %v", out, c.pendingISR, c.isr)
		}
		if c.canPropose(t0 + lagMs + 3) {
			t.Fatal("a change may be proposed right after a refusal")
		}
		mustFetch(t, c, 2, 10, t0+lagMs+3, pos(10, 0)) // 2 stays caught up; 3 does not
		if a := c.tick(t0+lagMs+4, pos(10, 0)); a.propose == nil || !slices.Equal(a.propose.req.ISR, []int32{1, 2}) {
			t.Fatalf("tick after a refusal: %+v", a.propose)
		}
	})
	t.Run("refused: a new state allows a proposal at once", func(t *testing.T) {
		c := newLeader(t, testCfg(), []int32{1, 2}, []int32{1}, t0, pos(0, 0))
		a := mustFetch(t, c, 2, 0, t0+1, pos(10, 0))
		if a.propose == nil {
			t.Fatal("no expansion")
		}
		c.alterDone(a.propose, AlterPartitionResult{}, kerr.IneligibleReplica, t0+2, pos(10, 10))
		if a := mustFetch(t, c, 2, 10, t0+3, pos(10, 10)); a.propose != nil {
			t.Fatal("proposed again before a tick or state")
		}
		st := leaderState(5, 10, []int32{1, 2}, []int32{1}, 1)
		c.becomeLeader(&st, false, t0+4, pos(10, 10))
		if a := mustFetch(t, c, 2, 10, t0+5, pos(10, 10)); a.propose == nil || a.propose.req.PartitionEpoch != 10 {
			t.Fatalf("after the new state: %+v", a.propose)
		}
	})
	t.Run("unknown outcome: proposed again after the backoff", func(t *testing.T) {
		c, p := shrink(t)
		now := t0 + lagMs + 2
		out, _ := c.alterDone(p, AlterPartitionResult{}, context.DeadlineExceeded, now, pos(10, 0))
		if out != alterRetry {
			t.Fatalf("outcome %d", out)
		}
		if a := c.tick(now+boMs-1, pos(10, 0)); a.propose != nil {
			t.Fatal("proposed before the backoff passed")
		}
		if a := c.tick(now+boMs, pos(10, 0)); a.propose == nil {
			t.Fatal("not proposed once the backoff passed")
		}
	})
	t.Run("a new leader epoch meanwhile: ignored", func(t *testing.T) {
		c, p := shrink(t)
		st := leaderState(6, 12, []int32{1, 2, 3}, []int32{1, 2, 3}, 2)
		newEpoch, err := c.prepareLeader(&st, false)
		if err != nil || !newEpoch {
			t.Fatalf("prepareLeader: %v %v", newEpoch, err)
		}
		c.becomeLeader(&st, newEpoch, t0+lagMs+2, pos(10, 0))
		out, a := c.alterDone(p, AlterPartitionResult{LeaderEpoch: 5, PartitionEpoch: 10, ISR: []int32{1, 2}}, nil, t0+lagMs+3, pos(10, 0))
		if out != alterIgnored || a.advanceHW != -1 || !slices.Equal(c.isr, []int32{1, 2, 3}) || c.partitionEpoch != 12 {
			t.Fatalf("outcome %d advanceHW %d isr %v partitionEpoch %d", out, a.advanceHW, c.isr, c.partitionEpoch)
		}
	})
	t.Run("the controller's push overtook the answer", func(t *testing.T) {
		c, p := shrink(t)
		st := leaderState(5, 10, []int32{1, 2, 3}, []int32{2, 1}, 2) // same members, another order
		c.becomeLeader(&st, false, t0+lagMs+2, pos(10, 0))
		if c.pendingISR != nil {
			t.Fatalf("pending %v after the push committed it", c.pendingISR)
		}
		out, _ := c.alterDone(p, AlterPartitionResult{LeaderEpoch: 5, PartitionEpoch: 10, ISR: []int32{1, 2}}, nil, t0+lagMs+3, pos(10, 0))
		if out != alterApplied || c.partitionEpoch != 10 {
			t.Fatalf("outcome %d partitionEpoch %d", out, c.partitionEpoch)
		}
	})
}

// TestCoreNoUpdater: without an ISRUpdater the ISR stays as given.
func TestCoreNoUpdater(t *testing.T) {
	cfg := testCfg()
	cfg.canAlter = false
	c := newLeader(t, cfg, []int32{1, 2, 3}, []int32{1, 2}, t0, pos(0, 0))
	if a := mustFetch(t, c, 3, 10, t0+1, pos(10, 10)); a.propose != nil {
		t.Fatal("expansion proposed without an updater")
	}
	if a := c.tick(t0+10*lagMs, pos(10, 10)); a.propose != nil {
		t.Fatal("shrink proposed without an updater")
	}
}

// TestCoreMinISR: CheckProduce's and WaitReplicated's decisions.
func TestCoreMinISR(t *testing.T) {
	name := stringer("t-0")
	cases := []struct {
		name    string
		leading bool
		isr     int32
		minISR  int32
		acks    int16
		want    error
	}{
		{"not leading", false, 3, 2, -1, kerr.NotLeaderForPartition},
		{"not leading, acks=1", false, 3, 2, 1, kerr.NotLeaderForPartition},
		{"ISR at min", true, 2, 2, -1, nil},
		{"ISR above min", true, 3, 2, -1, nil},
		{"ISR below min, acks=all", true, 1, 2, -1, kerr.NotEnoughReplicas},
		{"ISR below min, acks=1", true, 1, 2, 1, nil},
		{"ISR below min, acks=0", true, 1, 2, 0, nil},
	}
	for _, tc := range cases {
		err := checkProduce(tc.leading, tc.isr, tc.minISR, tc.acks, name)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("checkProduce %s: %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == kerr.NotEnoughReplicas && !strings.Contains(err.Error(), "t-0 has 1 members, min.insync.replicas is 2") {
			t.Errorf("checkProduce %s: message %q", tc.name, err)
		}
	}
	logErr := errors.New("log offline")
	acks := []struct {
		name            string
		err             error
		sameGen, leader bool
		isr, minISR     int32
		want            error
	}{
		{"replicated", nil, true, true, 2, 2, nil},
		{"the log failed", logErr, true, true, 2, 2, logErr},
		{"leadership changed", nil, false, true, 2, 2, kerr.NotLeaderForPartition},
		{"no longer leading", nil, true, false, 2, 2, kerr.NotLeaderForPartition},
		{"the ISR shrank below min", nil, true, true, 1, 2, kerr.NotEnoughReplicasAfterAppend},
	}
	for _, tc := range acks {
		err := ackResult(tc.err, tc.sameGen, tc.leader, tc.isr, tc.minISR)
		if err != tc.want {
			t.Errorf("ackResult %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// The core publishes min.insync.replicas >= 1 and the committed ISR.
	c := newLeader(t, testCfg(), []int32{1, 2, 3}, []int32{1, 2}, t0, pos(0, 0))
	if c.minISR != 2 || len(c.isr) != 2 || !c.leading() {
		t.Fatalf("minISR %d isr %v leading %v", c.minISR, c.isr, c.leading())
	}
	st := leaderState(5, 10, []int32{1, 2, 3}, []int32{1}, 0)
	c.becomeLeader(&st, false, t0+1, pos(0, 0))
	if c.minISR != 1 || len(c.isr) != 1 {
		t.Fatalf("MinISR 0 gives minISR %d; isr %v", c.minISR, c.isr)
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// TestCoreLeaderEpochs: stale states are refused, a damaged log may not
// start leading, a new leader epoch forgets follower positions and
// in-flight proposals, the same epoch keeps them.
func TestCoreLeaderEpochs(t *testing.T) {
	c := newLeader(t, testCfg(), []int32{1, 2}, []int32{1, 2}, t0, pos(0, 0))
	gen := c.gen
	mustFetch(t, c, 2, 10, t0+1, pos(10, 0))

	stale := []Partition{leaderState(4, 20, []int32{1, 2}, []int32{1, 2}, 1), leaderState(5, 8, []int32{1, 2}, []int32{1, 2}, 1)}
	for _, st := range stale {
		if _, err := c.prepareLeader(&st, false); !errors.Is(err, ErrStaleState) {
			t.Fatalf("prepareLeader epochs %d/%d: %v", st.LeaderEpoch, st.PartitionEpoch, err)
		}
		fst := st
		fst.Leader = 2
		if _, err := c.becomeFollower(&fst); !errors.Is(err, ErrStaleState) {
			t.Fatalf("becomeFollower epochs %d/%d: %v", st.LeaderEpoch, st.PartitionEpoch, err)
		}
	}

	// Same leader epoch, newer partition epoch: positions kept; a damaged
	// log may keep leading (it is not a new epoch).
	same := leaderState(5, 10, []int32{1, 2}, []int32{1, 2}, 1)
	newEpoch, err := c.prepareLeader(&same, true)
	if err != nil || newEpoch {
		t.Fatalf("same epoch: newEpoch %v err %v", newEpoch, err)
	}
	c.becomeLeader(&same, false, t0+2, pos(10, 10))
	if c.gen != gen || c.followers[2].fetchOffset != 10 {
		t.Fatalf("same epoch: gen %d->%d, follower at %d", gen, c.gen, c.followers[2].fetchOffset)
	}

	// A new leader epoch on a damaged log: refused.
	next := leaderState(6, 11, []int32{1, 2}, []int32{1, 2}, 1)
	if _, err := c.prepareLeader(&next, true); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("new epoch on a damaged log: %v", err)
	}
	// Healthy: positions start unknown, the HW waits for the first fetch.
	newEpoch, err = c.prepareLeader(&next, false)
	if err != nil || !newEpoch {
		t.Fatalf("new epoch: newEpoch %v err %v", newEpoch, err)
	}
	if a := c.becomeLeader(&next, true, t0+3, pos(12, 10)); a.advanceHW != -1 {
		t.Fatalf("HW %d before the follower's first fetch in the new epoch", a.advanceHW)
	}
	if c.gen != gen+1 || c.followers[2].fetchOffset != -1 || c.followers[2].lastCaughtUpMs != t0+3 {
		t.Fatalf("new epoch: gen %d, follower %+v", c.gen, *c.followers[2])
	}
	if a := mustFetch(t, c, 2, 12, t0+4, pos(12, 10)); a.advanceHW != 12 {
		t.Fatalf("HW after the first fetch: %d, want 12", a.advanceHW)
	}

	// The replica set shrinks: the follower is forgotten.
	fewer := leaderState(6, 12, []int32{1}, []int32{1}, 1)
	c.becomeLeader(&fewer, false, t0+5, pos(12, 12))
	if _, ok := c.followers[2]; ok {
		t.Fatal("follower 2 kept after leaving the replica set")
	}

	// Becoming a follower: a new generation; no longer leading.
	fol := leaderState(7, 13, []int32{1, 2}, []int32{1, 2}, 1)
	fol.Leader = 2
	changed, err := c.becomeFollower(&fol)
	if err != nil || !changed || c.leading() || c.gen != gen+2 || c.followers != nil {
		t.Fatalf("becomeFollower: changed %v err %v leading %v gen %d", changed, err, c.leading(), c.gen)
	}
	// The same state again changes nothing; a new partition epoch neither.
	fol.PartitionEpoch = 14
	if changed, err := c.becomeFollower(&fol); err != nil || changed || c.gen != gen+2 {
		t.Fatalf("becomeFollower again: changed %v err %v gen %d", changed, err, c.gen)
	}
	// A new leader at the same epoch does.
	fol.Leader = 3
	if changed, _ := c.becomeFollower(&fol); !changed {
		t.Fatal("a new leader is not a change")
	}
}

// TestCoreStaleFollowerFetch: fetches the leader must refuse with
// NOT_LEADER_OR_FOLLOWER, changing nothing.
func TestCoreStaleFollowerFetch(t *testing.T) {
	setups := []struct {
		name     string
		setup    func(c *core)
		id       int32
		inactive bool // no longer an active leader: a tick proposes nothing either
	}{
		{"not a replica", func(*core) {}, 4, false},
		{"this broker itself", func(*core) {}, 1, false},
		{"after becoming follower", func(c *core) {
			st := leaderState(6, 10, []int32{1, 2}, []int32{1, 2}, 1)
			st.Leader = 2
			c.becomeFollower(&st)
		}, 2, true},
		{"after Stop", func(c *core) { c.remove() }, 2, true},
		{"after Close", func(c *core) { c.halt() }, 2, true},
		{"removed from the replica set", func(c *core) {
			st := leaderState(5, 10, []int32{1}, []int32{1}, 1)
			c.becomeLeader(&st, false, t0, pos(10, 10))
		}, 2, false},
	}
	for _, tc := range setups {
		t.Run(tc.name, func(t *testing.T) {
			c := newLeader(t, testCfg(), []int32{1, 2}, []int32{1, 2}, t0, pos(0, 0))
			tc.setup(c)
			isr := slices.Clone(c.isr)
			a, err := c.followerFetch(tc.id, -1, 10, t0+1, pos(10, 0))
			if !errors.Is(err, kerr.NotLeaderForPartition) {
				t.Fatalf("fetch: %v", err)
			}
			if a.advanceHW != -1 || a.propose != nil || !slices.Equal(c.isr, isr) {
				t.Fatalf("a refused fetch acted: %+v isr %v", a, c.isr)
			}
			if a := c.tick(t0+10*lagMs, pos(10, 0)); tc.inactive && a.propose != nil {
				t.Fatalf("tick proposed %v on an inactive leader", a.propose.req.ISR)
			}
		})
	}
	// Stop (unlike Close) ends leadership for the produce path.
	c := newLeader(t, testCfg(), []int32{1, 2}, []int32{1, 2}, t0, pos(0, 0))
	c.halt()
	if !c.leading() {
		t.Fatal("Close ended leadership for produce checks")
	}
	gen := c.gen
	c.remove()
	if c.leading() || c.gen != gen+1 {
		t.Fatalf("after Stop: leading %v gen %d", c.leading(), c.gen)
	}
}

// TestCoreStatus: Status reports the core's view, followers in replica
// order.
func TestCoreStatus(t *testing.T) {
	c := newLeader(t, testCfg(), []int32{3, 1, 2}, []int32{1, 2, 3}, t0, pos(0, 0))
	mustFetch(t, c, 2, 7, t0+5, pos(10, 0))
	var st Status
	c.status(&st)
	if st.Role != engine.RoleLeader || st.LeaderEpoch != 5 || st.PartitionEpoch != 9 || len(st.Followers) != 2 ||
		st.Followers[0].ID != 3 || st.Followers[0].FetchOffset != -1 ||
		st.Followers[1].ID != 2 || st.Followers[1].FetchOffset != 7 || st.Followers[1].LastFetchMs != t0+5 {
		t.Fatalf("status %+v", st)
	}
}

// epochCfg is testCfg with a metadata view of broker registrations read
// from regs (KIP-903).
func epochCfg(regs map[int32]Registration) coreConfig {
	cfg := testCfg()
	cfg.registration = func(id int32) Registration { return regs[id] }
	return cfg
}

// TestCoreStaleBrokerEpochFetch (KIP-903): a fetch carrying an older broker
// epoch than the follower's registration (its broker restarted, the old
// process still fetching) is refused with NOT_LEADER_OR_FOLLOWER and moves
// nothing: not the follower's position, not the HW, and it does not keep
// the member in the ISR. A fetch with the registered epoch, with none (-1,
// an older Fetch version) or with a newer one than the view has counts.
func TestCoreStaleBrokerEpochFetch(t *testing.T) {
	regs := map[int32]Registration{
		2: {Registered: true, Alive: true, Epoch: 20},
		3: {Registered: true, Alive: true, Epoch: 30},
	}
	c := newLeader(t, epochCfg(regs), []int32{1, 2, 3}, []int32{1, 2, 3}, t0, pos(10, 0))
	if _, err := c.followerFetch(2, 20, 10, t0+1, pos(10, 0)); err != nil {
		t.Fatalf("fetch with the registered epoch: %v", err)
	}
	a, err := c.followerFetch(3, 29, 10, t0+2, pos(10, 0))
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("stale fetch: err %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if a.advanceHW != -1 || a.propose != nil {
		t.Fatalf("stale fetch acted: %+v", a)
	}
	if f := c.followers[3]; f.fetchOffset != -1 || f.lastFetchMs != 0 || f.brokerEpoch != -1 {
		t.Fatalf("stale fetch recorded: %+v", *f)
	}
	// The registered epoch counts: the HW moves to 10.
	if a := mustFetchEpoch(t, c, 3, 30, 10, t0+3, pos(10, 0)); a.advanceHW != 10 {
		t.Fatalf("fetch with the registered epoch: advanceHW %d, want 10", a.advanceHW)
	}
	// A fetch without an epoch, or with a newer one than the view has
	// (the view lags the registration), counts.
	if a := mustFetchEpoch(t, c, 3, -1, 12, t0+4, pos(12, 10)); a.advanceHW != -1 {
		t.Fatalf("advanceHW %d with member 2 at 10", a.advanceHW) // 2 is still at 10
	}
	if a := mustFetchEpoch(t, c, 2, 21, 12, t0+5, pos(12, 10)); a.advanceHW != 12 {
		t.Fatalf("fetch with a newer epoch than the view's: advanceHW %d, want 12", a.advanceHW)
	}

	// Broker 3 restarts (registration 31) and its new process stops
	// fetching; its old process still fetches at the log end. Those
	// fetches are refused, so 3 is not caught up and leaves the ISR.
	regs[3] = Registration{Registered: true, Alive: true, Epoch: 31}
	for now := t0 + 6; now < t0+6+2*lagMs; now += lagMs / 4 {
		if _, err := c.followerFetch(3, 30, 100, now, pos(100, 12)); !errors.Is(err, kerr.NotLeaderForPartition) {
			t.Fatalf("old incarnation's fetch at %d: err %v", now, err)
		}
		mustFetchEpoch(t, c, 2, 21, 100, now, pos(100, 12))
	}
	if f := c.followers[3]; f.fetchOffset != 12 {
		t.Fatalf("follower 3 at %d, want 12 (its last counted fetch)", f.fetchOffset)
	}
	a = c.tick(t0+6+2*lagMs, pos(100, 12))
	if a.propose == nil || !slices.Equal(a.propose.req.ISR, []int32{1, 2}) {
		t.Fatalf("tick: %+v, want a shrink to [1 2]", a.propose)
	}
}

// TestCoreISRExpansionBrokerEpoch (KIP-903): a follower joins the ISR only
// when its broker is registered, alive, and its fetches carry the
// registered epoch (or none); the proposal carries each member's broker
// epoch for the controller to check.
func TestCoreISRExpansionBrokerEpoch(t *testing.T) {
	regs := map[int32]Registration{
		2: {Registered: true, Alive: true, Epoch: 20},
		3: {Registered: true, Alive: false, Epoch: 30}, // fenced
	}
	c := newLeader(t, epochCfg(regs), []int32{1, 2, 3}, []int32{1, 2}, t0, pos(10, 10))
	mustFetchEpoch(t, c, 2, 20, 10, t0+1, pos(10, 10))
	// A stale fetch: refused, nothing proposed.
	if a, err := c.followerFetch(3, 29, 10, t0+2, pos(10, 10)); err == nil || a.propose != nil {
		t.Fatalf("stale fetch: %+v %v", a.propose, err)
	}
	// The registered epoch but fenced: counted, not eligible.
	if a := mustFetchEpoch(t, c, 3, 30, 10, t0+3, pos(10, 10)); a.propose != nil {
		t.Fatalf("fenced broker proposed for the ISR: %+v", a.propose.req)
	}
	if a := c.tick(t0+4, pos(10, 10)); a.propose != nil {
		t.Fatalf("tick proposed a fenced broker: %+v", a.propose.req)
	}
	// Unfenced: the next check proposes it, with the epochs the fetches carried.
	regs[3] = Registration{Registered: true, Alive: true, Epoch: 30}
	a := c.tick(t0+5, pos(10, 10))
	if a.propose == nil {
		t.Fatal("caught-up, alive follower not proposed")
	}
	if r := a.propose.req; !slices.Equal(r.ISR, []int32{1, 2, 3}) || !slices.Equal(r.ISREpochs, []int64{-1, 20, 30}) {
		t.Fatalf("proposal ISR %v epochs %v, want [1 2 3] [-1 20 30]", r.ISR, r.ISREpochs)
	}
	c.alterDone(a.propose, AlterPartitionResult{}, kerr.IneligibleReplica, t0+6, pos(10, 10))

	// Broker 3 restarted (registration 31) and its new process has not
	// fetched yet: the epoch its last fetch carried is not the registered
	// one, so it is not proposed.
	regs[3] = Registration{Registered: true, Alive: true, Epoch: 31}
	if a := c.tick(t0+7, pos(10, 10)); a.propose != nil {
		t.Fatalf("proposed with the old incarnation's epoch: %+v", a.propose.req)
	}
	// Its fetch with the new epoch makes it eligible again.
	a = mustFetchEpoch(t, c, 3, 31, 10, t0+8, pos(10, 10))
	if a.propose == nil || !slices.Equal(a.propose.req.ISREpochs, []int64{-1, 20, 31}) {
		t.Fatalf("fetch with the new epoch: proposal %+v", a.propose)
	}

	// Without a metadata view nothing is checked and -1 is proposed for a
	// fetch that carried no epoch.
	c2 := newLeader(t, testCfg(), []int32{1, 2}, []int32{1}, t0, pos(10, 10))
	a = mustFetch(t, c2, 2, 10, t0+1, pos(10, 10))
	if a.propose == nil || !slices.Equal(a.propose.req.ISREpochs, []int64{-1, -1}) {
		t.Fatalf("no view: proposal %+v", a.propose)
	}
}

func mustFetchEpoch(t *testing.T, c *core, id int32, epoch, off, now int64, p logPos) actions {
	t.Helper()
	a, err := c.followerFetch(id, epoch, off, now, p)
	if err != nil {
		t.Fatalf("fetch by %d (epoch %d) at %d: %v", id, epoch, off, err)
	}
	return a
}
