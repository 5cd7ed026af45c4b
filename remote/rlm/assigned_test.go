package rlm

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

// With a filter the materializer keeps only the partitions it wants; a
// skipped partition wanted later is rebuilt by a replay of its metadata
// partition from offset 0 (the other partitions' events are not applied
// twice), ending where it was skipped, with later records applied to
// both; a partition no longer wanted is dropped. The result equals an
// unfiltered materializer's.
func TestMaterializerReplicatedOnly(t *testing.T) {
	const mp = 3
	a, b := tp{evTopic, 1}, tp{evTopic, 2}
	event := func(k tp, typ string, epoch int32, seg *Segment) []byte {
		return EncodeEvent(Event{Type: typ, TopicID: fmt.Sprintf("%x", k.id[:]), Topic: "t", Partition: k.p, LeaderEpoch: epoch, EventMs: t0, Segment: seg})
	}
	var log [][]byte
	for i := int64(0); i < 4; i++ {
		for _, k := range []tp{a, b} {
			id := fmt.Sprintf("%d-%d", k.p, i)
			log = append(log,
				event(k, string(CopyStarted), 1, &Segment{ID: id, Base: 10 * i, End: 10 * (i + 1), Size: 100}),
				event(k, string(CopyFinished), 1, &Segment{ID: id, End: 10 * (i + 1), Files: map[string]FileMeta{KindLog: {Size: 100}}}))
		}
	}
	all := newMaterializer()
	wanted := map[tp]bool{a: true}
	x := newMaterializer()
	x.want = func(k tp, got int32) bool {
		if got != mp {
			t.Fatalf("metadata partition %d", got)
		}
		return wanted[k]
	}
	feed := func(m *materializer, from, to int) {
		t.Helper()
		for off := from; off < to; off++ {
			if _, _, _, err := m.apply(mp, int64(off), log[off]); err != nil {
				t.Fatal(err)
			}
		}
	}
	feed(all, 0, len(log))
	half := len(log) / 2
	feed(x, 0, half)
	if x.parts[b] != nil || x.skipped[b] != mp || x.parts[a] == nil || len(x.parts[a].Segments) != 2 {
		t.Fatalf("a %+v, b %+v, skipped %v", x.parts[a], x.parts[b], x.skipped)
	}
	if dropped, restart := x.refresh(true); len(dropped) != 0 || restart {
		t.Fatalf("nothing changed: dropped %v, restart %v", dropped, restart)
	}
	// b is wanted: without replays allowed nothing happens yet.
	wanted[b] = true
	if !x.needsReplay() {
		t.Fatal("no replay needed")
	}
	if _, restart := x.refresh(false); restart || x.parts[b] != nil {
		t.Fatal("replay started while not allowed")
	}
	if _, restart := x.refresh(true); !restart || x.position(mp) != 0 || x.next[mp] != int64(half) {
		t.Fatalf("replay: restart %v, position %d, next %d", restart, x.position(mp), x.next[mp])
	}
	// The consumer restarts at the position: offset 0.
	feed(x, 0, half-1)
	if x.position(mp) != int64(half-1) || x.pending[b] != int64(half) {
		t.Fatalf("mid-replay: position %d, pending %v", x.position(mp), x.pending)
	}
	feed(x, half-1, len(log))
	if len(x.pending) != 0 || len(x.replay) != 0 || x.position(mp) != int64(len(log)) {
		t.Fatalf("after the replay: pending %v, replay %v, position %d", x.pending, x.replay, x.position(mp))
	}
	for _, k := range []tp{a, b} {
		if !reflect.DeepEqual(x.parts[k], all.parts[k]) || x.epochs[k] != all.epochs[k] {
			t.Fatalf("partition %d: %+v, unfiltered %+v", k.p, x.parts[k], all.parts[k])
		}
	}
	// a is no longer replicated: dropped, its events skipped again.
	delete(wanted, a)
	if dropped, _ := x.refresh(true); len(dropped) != 1 || dropped[0] != a || x.parts[a] != nil || x.skipped[a] != mp {
		t.Fatalf("dropped %v, a %+v", dropped, x.parts[a])
	}
	x.apply(mp, int64(len(log)), EncodeEvent(Event{Type: EventLogStart, TopicID: fmt.Sprintf("%x", a.id[:]), Topic: "t", Partition: a.p, LeaderEpoch: 1, LogStart: 5}))
	if x.parts[a] != nil {
		t.Fatal("an event of a dropped partition applied")
	}
}

// replicaBroker is a fakeBroker that says which partitions it replicates.
type replicaBroker struct {
	fakeBroker
	replicates *atomic.Bool
}

func (b replicaBroker) Replicates([16]byte, int32) bool { return b.replicates.Load() }

// A third broker that does not replicate the cluster fixture's partition
// consumes the metadata topic but materializes nothing of it; its
// snapshot keeps the partition as skipped across a restart; once it
// replicates the partition its next pass replays the metadata partition
// and it has every segment the leader copied, and can rebuild a follower
// from them (RemoteLogAuxState).
func TestClusterBystanderMaterializesOnlyItsPartitions(t *testing.T) {
	c := newClusterFixture(t, tieredConfig)
	ctx := context.Background()
	k := c.k()
	c.topic.setLeader(k, 0, 1)
	c.produce(20)
	if err := c.m[0].RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	leaderSegs := c.m[0].Segments(k.id, 0)
	if len(leaderSegs) < 3 {
		t.Fatalf("%d segments copied", len(leaderSegs))
	}
	end := leaderSegs[len(leaderSegs)-1].End

	f2 := newFixture(t, tieredConfig) // its own engine; its "tiered" is another topic id
	defer f2.eng.Close()
	var replicates atomic.Bool
	open := func() *Manager {
		return f2.manager(c.f[0].store, func(o *Options) { // the cluster's store
			o.Metadata = replicaBroker{fakeBroker{c.topic, 2}, &replicates}
			o.Now = func() time.Time { return time.UnixMilli(c.clock.Load()) }
		})
	}
	m2 := open()
	waitPosition := func(m *Manager) {
		t.Helper()
		want, _ := fakeBroker{c.topic, 2}.EndOffset(ctx, MetadataPartition(k.id, k.p, c.topic.n))
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := m.waitApplied(wctx, MetadataPartition(k.id, k.p, c.topic.n), want); err != nil {
			t.Fatal(err)
		}
	}
	waitPosition(m2)
	if err := m2.RunOnce(ctx); err != nil { // saves the snapshot
		t.Fatal(err)
	}
	if segs := m2.Segments(k.id, 0); len(segs) != 0 {
		t.Fatalf("the bystander materialized %d segments", len(segs))
	}
	m2.Close()

	// Restarted: the snapshot says the partition was skipped; it still is.
	m2 = open()
	defer func() { m2.Close() }()
	m2.cl.matMu.Lock()
	mp, skipped := m2.cl.mat.skipped[k]
	m2.cl.matMu.Unlock()
	if !skipped || mp != MetadataPartition(k.id, k.p, c.topic.n) {
		t.Fatalf("after the restart the partition is not skipped (%v, %d)", skipped, mp)
	}
	// It starts replicating the partition: the next pass replays.
	replicates.Store(true)
	if err := m2.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	waitPosition(m2)
	if got := m2.Segments(k.id, 0); fmt.Sprint(got) != fmt.Sprint(leaderSegs) {
		t.Fatalf("after the replay:\n%+v\nleader's:\n%+v", got, leaderSegs)
	}
	if _, err := m2.RemoteLogAuxState(ctx, k.id, 0, end); err != nil {
		t.Fatalf("remote state for a new follower: %v", err)
	}
	// And no longer: dropped.
	replicates.Store(false)
	if err := m2.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if segs := m2.Segments(k.id, 0); len(segs) != 0 {
		t.Fatalf("%d segments kept after the partition left", len(segs))
	}
}
