package rlm

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/remote/objstore"
)

// fakeTopic is an in-memory __remote_log_metadata shared by the brokers
// of a test, with the user partitions' leaders.
type fakeTopic struct {
	mu      sync.Mutex
	n       int32
	recs    [][][]byte
	changed chan struct{}
	leaders map[tp][2]int32 // leader, epoch
	gone    map[[16]byte]bool
	ensured atomic.Int64
	started atomic.Int64 // the sum of the offsets consumers started at
}

func newFakeTopic(n int32) *fakeTopic {
	return &fakeTopic{n: n, recs: make([][][]byte, n), changed: make(chan struct{}), leaders: map[tp][2]int32{}, gone: map[[16]byte]bool{}}
}

func (t *fakeTopic) setLeader(k tp, leader, epoch int32) {
	t.mu.Lock()
	t.leaders[k] = [2]int32{leader, epoch}
	t.mu.Unlock()
}

// fakeBroker is one broker's MetadataTopic over a fakeTopic.
type fakeBroker struct {
	t  *fakeTopic
	id int32
}

func (b fakeBroker) Partitions() int32 { return b.t.n }
func (b fakeBroker) Ensure()           { b.t.ensured.Add(1) }
func (b fakeBroker) BrokerID() int32   { return b.id }

func (b fakeBroker) Publish(ctx context.Context, mp int32, key, value []byte) (int64, error) {
	t := b.t
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recs[mp] = append(t.recs[mp], append([]byte(nil), value...))
	close(t.changed)
	t.changed = make(chan struct{})
	return int64(len(t.recs[mp]) - 1), nil
}

func (b fakeBroker) EndOffset(ctx context.Context, mp int32) (int64, error) {
	b.t.mu.Lock()
	defer b.t.mu.Unlock()
	return int64(len(b.t.recs[mp])), nil
}

func (b fakeBroker) Consume(ctx context.Context, from func(mp int32) int64, apply func(mp int32, offset int64, value []byte)) {
	t := b.t
	next := make([]int, t.n)
	for mp := range next {
		next[mp] = int(from(int32(mp)))
		b.t.started.Add(int64(next[mp]))
	}
	for {
		type rec struct {
			mp  int32
			off int
			v   []byte
		}
		var todo []rec
		t.mu.Lock()
		for mp := range t.recs {
			for ; next[mp] < len(t.recs[mp]); next[mp]++ {
				todo = append(todo, rec{int32(mp), next[mp], t.recs[mp][next[mp]]})
			}
		}
		ch := t.changed
		t.mu.Unlock()
		for _, r := range todo {
			apply(r.mp, int64(r.off), r.v)
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

func (b fakeBroker) Leadership(topic string, id [16]byte, p int32) (int32, bool) {
	b.t.mu.Lock()
	defer b.t.mu.Unlock()
	l, ok := b.t.leaders[tp{id, p}]
	return l[1], ok && l[0] == b.id
}

func (b fakeBroker) TopicGone(id [16]byte) bool {
	b.t.mu.Lock()
	defer b.t.mu.Unlock()
	return b.t.gone[id]
}

func (b fakeBroker) LeadsMetadataPartition(mp int32) bool { return b.id == 0 }

// clusterFixture is two brokers' engines holding replicas of one tiered
// partition (the same topic id, the same records), each with a manager
// in cluster mode over one fake metadata topic and one object store.
type clusterFixture struct {
	t     *testing.T
	topic *fakeTopic
	f     [2]*fixture
	m     [2]*Manager
	clock atomic.Int64 // ms
}

func newClusterFixture(t *testing.T, cfg map[string]string) *clusterFixture {
	c := &clusterFixture{t: t, topic: newFakeTopic(4)}
	c.clock.Store(t0 + 60_000)
	f0 := newFixture(t, cfg)
	base := t.TempDir()
	f1 := &fixture{t: t, dataDir: filepath.Join(base, "data"), metaDir: filepath.Join(base, "meta"), storeDir: f0.storeDir, store: f0.store}
	f1.openEngine()
	tp1, err := f1.eng.CreateTopicWithID("tiered", f0.log.TopicID(), 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f1.log = tp1.Partition(0)
	c.f = [2]*fixture{f0, f1}
	for i, f := range c.f {
		c.m[i] = f.manager(f.store, func(o *Options) {
			o.Metadata = fakeBroker{c.topic, int32(i)}
			o.Now = func() time.Time { return time.UnixMilli(c.clock.Load()) }
		})
	}
	t.Cleanup(func() {
		for i := range c.m {
			c.m[i].Close()
			c.f[i].eng.Close()
		}
	})
	return c
}

func (c *clusterFixture) k() tp { return tp{c.f[0].log.TopicID(), 0} }

// produce appends the same n batches to both replicas.
func (c *clusterFixture) produce(n int) {
	c.f[0].produce(n)
	c.f[1].produce(n)
}

// waitCopiedEnd waits (bounded) until broker i's materialized CopiedEnd
// is want.
func (c *clusterFixture) waitCopiedEnd(i int, want int64) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.m[i].CopiedEnd(c.k().id, "tiered", 0) != want {
		if time.Now().After(deadline) {
			c.t.Fatalf("broker %d: CopiedEnd %d, want %d", i, c.m[i].CopiedEnd(c.k().id, "tiered", 0), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (c *clusterFixture) logKeys() map[string]bool {
	out := map[string]bool{}
	for _, k := range c.f[0].keys() {
		if strings.HasSuffix(k, KindLog) {
			out[k] = true
		}
	}
	return out
}

// The leader alone copies (one copy per partition); the follower
// materializes the events, and its local retention follows the copied
// end. After a leader move the new leader refuses remote reads until it
// has caught up, then serves every record from offset 0 (the old leader's
// segments), copies on from the copied end, fences the old leader's late
// events and deletes by retention what the old leader copied.
func TestClusterLeaderMove(t *testing.T) {
	cfg := map[string]string{}
	for k, v := range tieredConfig {
		cfg[k] = v
	}
	cfg["retention.ms"] = "3600000" // remote retention on the managers' clock
	c := newClusterFixture(t, cfg)
	ctx := context.Background()
	k := c.k()
	c.topic.setLeader(k, 0, 1)
	c.produce(30)
	sealed := c.f[0].log.SealedSegments()
	if len(sealed) < 6 {
		t.Fatalf("%d sealed segments", len(sealed))
	}
	// The backlog is the leader's alone.
	if n, _ := c.m[0].Lag(); n != len(sealed) {
		t.Fatalf("leader's lag %d segments, %d sealed", n, len(sealed))
	}
	if n, b := c.m[1].Lag(); n != 0 || b != 0 {
		t.Fatalf("follower's lag %d segments, %d bytes", n, b)
	}
	for i := range c.m {
		if err := c.m[i].RunOnce(ctx); err != nil {
			t.Fatalf("broker %d pass: %v", i, err)
		}
	}
	copied := sealed[len(sealed)-1].End
	c.waitCopiedEnd(0, copied)
	c.waitCopiedEnd(1, copied)
	old := c.m[0].Segments(k.id, 0)
	if len(old) != len(sealed) || finished(old) != len(sealed) {
		t.Fatalf("leader's metadata: %d segments, %d finished, %d sealed", len(old), finished(old), len(sealed))
	}
	if got := c.m[1].Segments(k.id, 0); len(got) != len(old) || got[0].ID != old[0].ID || got[len(got)-1].Files[KindLog] != old[len(old)-1].Files[KindLog] {
		t.Fatalf("follower's metadata %+v, leader's %+v", got, old)
	}
	if keys := c.logKeys(); len(keys) != len(sealed) {
		t.Fatalf("%d .log objects for %d segments: one copy per partition expected", len(keys), len(sealed))
	}
	c.f[0].waitLocalStart(copied)
	c.f[1].waitLocalStart(copied) // the follower's local retention follows the metadata
	if c.m[1].Stats().SegmentsCopied != 0 {
		t.Fatal("the follower copied")
	}
	// The follower answers no remote read.
	if _, err := c.m[1].Read(ctx, k.id, 0, 0, 1000); !errors.Is(err, ErrNotReady) {
		t.Fatalf("follower read: %v", err)
	}
	if !c.m[0].Ready(k.id, 0) || c.m[1].Ready(k.id, 0) {
		t.Fatalf("ready: leader %v, follower %v", c.m[0].Ready(k.id, 0), c.m[1].Ready(k.id, 0))
	}

	// Leader move: broker 1 leads at epoch 2.
	c.topic.setLeader(k, 1, 2)
	if _, err := c.m[1].Read(ctx, k.id, 0, 0, 1000); !errors.Is(err, ErrNotReady) {
		t.Fatalf("read before the new leader's pass: %v", err)
	}
	if c.m[1].Ready(k.id, 0) || c.m[0].Ready(k.id, 0) {
		t.Fatalf("ready before the new leader's pass: new %v, old %v", c.m[1].Ready(k.id, 0), c.m[0].Ready(k.id, 0))
	}
	c.produce(10)
	if err := c.m[1].RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// (Local retention may already have deleted what the pass copied:
	// CopiedEnd, applied before the pass returned, says how far it went.)
	newCopied := c.m[1].CopiedEnd(k.id, "tiered", 0)
	if newCopied <= copied || newCopied < c.f[1].log.HighWatermark()-40 {
		t.Fatalf("new leader's copied end %d, was %d, high watermark %d", newCopied, copied, c.f[1].log.HighWatermark())
	}
	c.waitCopiedEnd(1, newCopied)
	c.waitCopiedEnd(0, newCopied)
	if !c.m[1].Ready(k.id, 0) {
		t.Fatal("the new leader is not ready after its pass")
	}
	segs := c.m[1].Segments(k.id, 0)
	if segs[0].ID != old[0].ID || finished(segs) != len(segs) {
		t.Fatalf("new leader's segments %+v", segs)
	}
	for _, s := range segs[len(old):] {
		if s.Base < copied {
			t.Fatalf("new leader copied %d-%d again (copied end was %d)", s.Base, s.End, copied)
		}
	}
	if c.m[1].Stats().SegmentsCopied != int64(len(segs)-len(old)) {
		t.Fatalf("new leader copied %d, %d new segments", c.m[1].Stats().SegmentsCopied, len(segs)-len(old))
	}
	c.f[1].waitLocalStart(newCopied)
	if n := c.f[1].readAll(c.m[1]); n == 0 {
		t.Fatal("the new leader read nothing remote")
	}
	// The old leader, deposed, no longer copies; a late event of its
	// epoch is ignored everywhere.
	c.f[0].produce(10)
	if err := c.m[0].RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if c.m[0].Stats().SegmentsCopied != int64(len(old)) {
		t.Fatal("the deposed leader copied")
	}
	late := Segment{ID: "late", Base: 1 << 40, End: 1<<40 + 1}
	err := c.m[0].update(k, "tiered", Event{Type: string(CopyStarted), LeaderEpoch: 1, Segment: &late})
	if !errors.Is(err, errFenced) {
		t.Fatalf("late event: %v", err)
	}
	for i := range c.m {
		for _, s := range c.m[i].Segments(k.id, 0) {
			if s.ID == "late" {
				t.Fatalf("broker %d applied a fenced event", i)
			}
		}
	}

	// Remote retention on the new leader deletes the old leader's copies.
	c.clock.Add(2 * 3600_000)
	if err := c.m[1].RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if keys := c.logKeys(); len(keys) != 0 {
		t.Fatalf("after retention %d .log objects left: %v", len(keys), keys)
	}
	c.waitCopiedEnd(0, newCopied)
	deadline := time.Now().Add(10 * time.Second)
	for len(c.m[0].Segments(k.id, 0)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("broker 0 still lists %d segments", len(c.m[0].Segments(k.id, 0)))
		}
		time.Sleep(2 * time.Millisecond)
	}
	if c.m[1].Stats().SegmentsDeleted != int64(len(segs)) {
		t.Fatalf("new leader deleted %d of %d", c.m[1].Stats().SegmentsDeleted, len(segs))
	}
}

// A copy the old leader left COPY_SEGMENT_STARTED is cleaned up by the
// new leader once ready, and a deleted topic's remote data by the broker
// leading its metadata partition, whose metadata is then dropped.
func TestClusterCleanupAndDeletedTopic(t *testing.T) {
	c := newClusterFixture(t, tieredConfig)
	ctx := context.Background()
	k := c.k()
	c.topic.setLeader(k, 0, 1)
	c.produce(20)
	if err := c.m[0].RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// A copy started at epoch 1 that never finished (its broker died).
	seg := Segment{ID: "halfway", Base: 1 << 30, End: 1<<30 + 10}
	if err := c.m[0].update(k, "tiered", Event{Type: string(CopyStarted), LeaderEpoch: 1, Segment: &seg}); err != nil {
		t.Fatal(err)
	}
	c.topic.setLeader(k, 1, 2)
	if err := c.m[1].RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range c.m {
		deadline := time.Now().Add(10 * time.Second)
		for {
			found := false
			for _, s := range c.m[i].Segments(k.id, 0) {
				found = found || s.ID == "halfway"
			}
			if !found {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker %d still lists the interrupted copy", i)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if len(c.logKeys()) == 0 {
		t.Fatal("nothing copied")
	}
	// The topic is deleted from the cluster: broker 0 leads every
	// metadata partition (fakeBroker), so it deletes the data.
	c.topic.mu.Lock()
	c.topic.gone[k.id] = true
	c.topic.mu.Unlock()
	if err := c.m[1].RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if len(c.logKeys()) == 0 {
		t.Fatal("a broker not leading the metadata partition deleted the data")
	}
	if err := c.m[0].RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if keys := c.f[0].keys(); len(keys) != 0 {
		t.Fatalf("%d objects left", len(keys))
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.m[1].Segments(k.id, 0) != nil || c.m[1].CopiedEnd(k.id, "tiered", 0) != -1 {
		if time.Now().After(deadline) {
			t.Fatal("broker 1 kept the deleted partition's metadata")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// hookStore calls onPut (once) before the first Put.
type hookStore struct {
	objstore.ObjectStore
	once  sync.Once
	onPut func()
}

func (s *hookStore) Put(ctx context.Context, key string, r io.Reader, size int64, sum objstore.Sum) (objstore.Info, error) {
	s.once.Do(s.onPut)
	return s.ObjectStore.Put(ctx, key, r, size, sum)
}

// A leader deposed in the middle of a copy: the new leader cleans up its
// COPY_SEGMENT_STARTED entry, the old leader's COPY_SEGMENT_FINISHED is
// fenced, and the old leader deletes the objects it wrote, so the store
// holds no object that no metadata names.
func TestClusterDeposedMidCopyLeavesNoOrphans(t *testing.T) {
	c := newClusterFixture(t, tieredConfig)
	ctx := context.Background()
	k := c.k()
	c.topic.setLeader(k, 0, 1)
	c.produce(20)
	c.m[0].Close()
	hs := &hookStore{ObjectStore: c.f[0].store}
	hs.onPut = func() {
		c.topic.setLeader(k, 1, 2)
		if err := c.m[1].RunOnce(ctx); err != nil {
			t.Errorf("new leader's pass: %v", err)
		}
	}
	c.m[0] = c.f[0].manager(hs, func(o *Options) {
		o.Metadata = fakeBroker{c.topic, 0}
		o.Now = func() time.Time { return time.UnixMilli(c.clock.Load()) }
	})
	err := c.m[0].RunOnce(ctx)
	if !errors.Is(err, errFenced) {
		t.Fatalf("deposed leader's pass: %v", err)
	}
	if c.m[0].Stats().SegmentsCopied != 0 {
		t.Fatal("the deposed leader finished a copy")
	}
	named := map[string]bool{}
	for _, s := range c.m[1].Segments(k.id, 0) {
		if s.State != CopyFinished {
			t.Fatalf("new leader lists %+v", s)
		}
		named[s.ID] = true
	}
	if len(named) == 0 {
		t.Fatal("the new leader copied nothing")
	}
	for _, key := range c.f[0].keys() {
		if !named[strings.SplitN(strings.TrimPrefix(key, "tiered-0/"), "-", 2)[1][:22]] {
			t.Fatalf("object %s is named by no segment", key)
		}
	}
}

// A broker's materialized metadata and consumer positions are saved after
// a pass: reopened, its manager has the partition's segments at once
// (before consuming anything), consumes from the saved positions, and
// applies what follows.
func TestClusterSnapshotRestart(t *testing.T) {
	c := newClusterFixture(t, tieredConfig)
	ctx := context.Background()
	k := c.k()
	c.topic.setLeader(k, 0, 1)
	c.produce(20)
	if err := c.m[0].RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	copied := c.m[0].CopiedEnd(k.id, "tiered", 0)
	c.waitCopiedEnd(1, copied)
	if err := c.m[1].RunOnce(ctx); err != nil { // a follower's pass saves the snapshot
		t.Fatal(err)
	}
	before := c.m[1].Segments(k.id, 0)
	c.m[1].Close()
	c.topic.started.Store(0)
	// Reopened without a consumer able to deliver (a topic with no
	// records past the snapshot): the state comes from the snapshot.
	c.m[1] = c.f[1].manager(c.f[1].store, func(o *Options) {
		o.Metadata = fakeBroker{c.topic, 1}
		o.Now = func() time.Time { return time.UnixMilli(c.clock.Load()) }
	})
	got := c.m[1].Segments(k.id, 0)
	if len(got) != len(before) || len(got) == 0 || got[len(got)-1].ID != before[len(before)-1].ID ||
		c.m[1].CopiedEnd(k.id, "tiered", 0) != copied {
		t.Fatalf("after restart %d segments (CopiedEnd %d), before %d (%d)", len(got), c.m[1].CopiedEnd(k.id, "tiered", 0), len(before), copied)
	}
	c.topic.mu.Lock()
	total := 0
	for _, r := range c.topic.recs {
		total += len(r)
	}
	c.topic.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for c.topic.started.Load() != int64(total) {
		if time.Now().After(deadline) {
			t.Fatalf("consumer started at offsets summing %d, want %d (the saved positions)", c.topic.started.Load(), total)
		}
		time.Sleep(2 * time.Millisecond)
	}
	// What follows is applied.
	c.produce(10)
	if err := c.m[0].RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	newEnd := c.m[0].CopiedEnd(k.id, "tiered", 0)
	if newEnd <= copied {
		t.Fatalf("nothing more copied: %d", newEnd)
	}
	c.waitCopiedEnd(1, newEnd)
}
