package rlm

import (
	"fmt"
	"reflect"
	"testing"
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
