package rlm

import (
	"fmt"
	"reflect"
	"testing"
)

var evTopic = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

func ev(typ string, epoch int32, seg *Segment) Event {
	return Event{Type: typ, TopicID: fmt.Sprintf("%x", evTopic[:]), Topic: "t", Partition: 2, LeaderEpoch: epoch, Broker: 1, EventMs: t0, Segment: seg}
}

// The codec round-trips every event type and refuses other versions,
// unknown types and segment events without a segment.
func TestEventCodec(t *testing.T) {
	files := map[string]FileMeta{KindLog: {Size: 10, SHA256: "ab"}}
	for _, e := range []Event{
		ev(string(CopyStarted), 3, &Segment{ID: "a", Base: 0, End: 10, MaxTimestamp: t0, Size: 10, LeaderEpoch: 2}),
		ev(string(CopyFinished), 3, &Segment{ID: "a", End: 10, Files: files}),
		ev(string(DeleteStarted), 3, &Segment{ID: "a"}),
		ev(string(DeleteFinished), 3, &Segment{ID: "a"}),
		{Type: EventLogStart, TopicID: fmt.Sprintf("%x", evTopic[:]), LeaderEpoch: 4, LogStart: 7},
		{Type: EventPartitionDeleted, TopicID: fmt.Sprintf("%x", evTopic[:]), LeaderEpoch: goneEpoch},
	} {
		got, err := DecodeEvent(EncodeEvent(e))
		if err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
		e.Version = eventVersion
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip:\n%+v %+v\n%+v %+v", got, got.Segment, e, e.Segment)
		}
	}
	for _, bad := range []string{
		`{"v":2,"type":"LOG_START","topicId":"0102030405060708090a0b0c0d0e0f10"}`,
		`{"v":1,"type":"NOPE","topicId":"0102030405060708090a0b0c0d0e0f10"}`,
		`{"v":1,"type":"COPY_SEGMENT_FINISHED","topicId":"0102030405060708090a0b0c0d0e0f10"}`,
		`{"v":1,"type":"LOG_START","topicId":"zz"}`,
		`not json`,
	} {
		if _, err := DecodeEvent([]byte(bad)); err == nil {
			t.Fatalf("%s accepted", bad)
		}
	}
}

func TestMetadataPartition(t *testing.T) {
	seen := map[int32]bool{}
	for p := int32(0); p < 200; p++ {
		mp := MetadataPartition(evTopic, p, 50)
		if mp < 0 || mp >= 50 || mp != MetadataPartition(evTopic, p, 50) {
			t.Fatalf("partition %d -> %d", p, mp)
		}
		seen[mp] = true
	}
	if len(seen) < 25 {
		t.Fatalf("200 partitions hash to %d of 50", len(seen))
	}
}

// The materializer applies a segment's life in order, moves CopiedEnd at
// COPY_SEGMENT_FINISHED only, ignores events of an older leader epoch
// (a deposed leader cannot finish its copy) and records it replays, and
// drops a deleted partition.
func TestMaterializer(t *testing.T) {
	x := newMaterializer()
	off := int64(0)
	apply := func(e Event) (*partitionMeta, bool) {
		t.Helper()
		_, pm, applied, err := x.apply(7, off, EncodeEvent(e))
		if err != nil {
			t.Fatal(err)
		}
		off++
		return pm, applied
	}
	k := tp{evTopic, 2}
	pm, ok := apply(ev(string(CopyStarted), 1, &Segment{ID: "a", Base: 0, End: 10, Size: 100}))
	if !ok || len(pm.Segments) != 1 || pm.Segments[0].State != CopyStarted || pm.CopiedEnd != -1 || pm.Segments[0].EventMs != t0 {
		t.Fatalf("after COPY_STARTED: %+v", pm)
	}
	pm, _ = apply(ev(string(CopyFinished), 1, &Segment{ID: "a", End: 10, Files: map[string]FileMeta{KindLog: {Size: 100}}}))
	if pm.Segments[0].State != CopyFinished || pm.CopiedEnd != 10 || pm.Segments[0].Files[KindLog].Size != 100 {
		t.Fatalf("after COPY_FINISHED: %+v", pm)
	}
	// Leader epoch 1 starts copying b; epoch 2 takes over; 1's finish is ignored.
	apply(ev(string(CopyStarted), 1, &Segment{ID: "b", Base: 10, End: 20}))
	apply(ev(string(CopyStarted), 2, &Segment{ID: "c", Base: 10, End: 25}))
	pm, ok = apply(ev(string(CopyFinished), 1, &Segment{ID: "b", End: 20}))
	if ok || pm.CopiedEnd != 10 || pm.Segments[1].State != CopyStarted {
		t.Fatalf("an older epoch's COPY_FINISHED applied: %v %+v", ok, pm)
	}
	pm, _ = apply(ev(string(CopyFinished), 2, &Segment{ID: "c", End: 25}))
	if pm.CopiedEnd != 25 {
		t.Fatalf("CopiedEnd %d", pm.CopiedEnd)
	}
	// The new leader cleans up b.
	apply(ev(string(DeleteStarted), 2, &Segment{ID: "b"}))
	pm, _ = apply(ev(string(DeleteFinished), 2, &Segment{ID: "b"}))
	if len(pm.Segments) != 2 || pm.Segments[0].ID != "a" || pm.Segments[1].ID != "c" {
		t.Fatalf("segments %+v", pm.Segments)
	}
	pm, _ = apply(Event{Type: EventLogStart, TopicID: fmt.Sprintf("%x", evTopic[:]), Topic: "t", Partition: 2, LeaderEpoch: 2, LogStart: 5})
	if pm.LogStart != 5 {
		t.Fatalf("log start %d", pm.LogStart)
	}
	// A replayed record (offset below the position) changes nothing.
	before := x.parts[k]
	if _, _, applied, _ := x.apply(7, 3, EncodeEvent(ev(string(DeleteFinished), 2, &Segment{ID: "a"}))); applied || x.parts[k] != before {
		t.Fatal("a replayed record was applied")
	}
	if x.position(7) != off || x.position(8) != 0 {
		t.Fatalf("positions %d %d", x.position(7), x.position(8))
	}
	// Snapshots handed out are not changed by later events.
	if _, ok := apply(ev(string(DeleteStarted), 2, &Segment{ID: "a"})); !ok || before.Segments[0].State != CopyFinished {
		t.Fatal("an applied event changed an earlier snapshot")
	}
	// A record that is not an event is skipped, its offset passed.
	if _, _, applied, err := x.apply(7, off, []byte("junk")); err == nil || applied || x.position(7) != off+1 {
		t.Fatalf("junk: %v %v", err, applied)
	}
	off++
	if pm, ok := apply(Event{Type: EventPartitionDeleted, TopicID: fmt.Sprintf("%x", evTopic[:]), Topic: "t", Partition: 2, LeaderEpoch: goneEpoch}); !ok || pm != nil || x.parts[k] != nil {
		t.Fatal("partition not dropped")
	}
	// After the deletion's epoch nothing of an old leader comes back.
	if _, ok := apply(ev(string(CopyStarted), 9, &Segment{ID: "z", Base: 30, End: 40})); ok {
		t.Fatal("an event after the partition's deletion applied")
	}
}
