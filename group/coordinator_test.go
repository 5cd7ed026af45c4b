package group

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memLog is an in-memory group.Log: records per partition, durable at once.
// (The server's tests run the coordinator over the real engine.)
type memLog struct {
	mu    sync.Mutex
	parts map[int32][]Record
	fail  error
}

func (m *memLog) Append(p int32, recs []Record, done func(error)) {
	m.mu.Lock()
	err := m.fail
	if err == nil {
		if m.parts == nil {
			m.parts = map[int32][]Record{}
		}
		m.parts[p] = append(m.parts[p], recs...)
	}
	m.mu.Unlock()
	done(err) // inline, as the engine may do
}

func (m *memLog) Load(p int32, fn func(key, value []byte) error) error {
	m.mu.Lock()
	recs := append([]Record(nil), m.parts[p]...)
	m.mu.Unlock()
	for _, r := range recs {
		if err := fn(r.Key, r.Value); err != nil {
			return err
		}
	}
	return nil
}

func newTestCoordinator(t *testing.T, log Log) *Coordinator {
	c := New(Config{MinSessionTimeoutMs: 100, InitialRebalanceDelayMs: -1, TickMs: 5}, log, nil, nil)
	t.Cleanup(c.Close)
	for p := int32(0); p < c.cfg.OffsetsPartitions; p++ {
		if err := c.LoadPartition(p); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestCoordinatorReloadsOffsetsAndGroups(t *testing.T) {
	log := &memLog{}
	c := newTestCoordinator(t, log)

	// A simple commit (no members) creates the group.
	var codes []int16
	c.Commit(CommitRequest{Group: "simple", Generation: -1, Offsets: []CommitOffset{
		{TP: TopicPartition{"t", 0}, Offset: 42, LeaderEpoch: 3, Metadata: "m"},
		{TP: TopicPartition{"t", 1}, Offset: 7, LeaderEpoch: -1},
		{TP: TopicPartition{"t", 2}, Offset: 9, Metadata: string(make([]byte, 5000))},
	}}, func(c []int16) { codes = c })
	if codes[0] != 0 || codes[1] != 0 || codes[2] != kerr.OffsetMetadataTooLarge.Code {
		t.Fatalf("commit codes %v", codes)
	}

	// A managed group reaches Stable.
	var jr JoinResult
	join := JoinRequest{Group: "managed", ProtocolType: "consumer", SessionTimeoutMs: 60000, RebalanceTimeoutMs: 60000,
		Protocols: []Protocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}}
	c.Join(join, func(r JoinResult) { jr = r })
	if jr.Err != 0 || jr.Generation != 1 {
		t.Fatalf("join: %+v", jr)
	}
	var sr SyncResult
	c.Sync(SyncRequest{Group: "managed", MemberID: jr.MemberID, Generation: 1,
		Assignments: map[string][]byte{jr.MemberID: []byte("assignment")}}, func(r SyncResult) { sr = r })
	if sr.Err != 0 || string(sr.Assignment) != "assignment" {
		t.Fatalf("sync: %+v", sr)
	}
	c.Commit(CommitRequest{Group: "managed", Generation: 1, MemberID: jr.MemberID,
		Offsets: []CommitOffset{{TP: TopicPartition{"t", 0}, Offset: 100}}}, func(c []int16) { codes = c })
	if codes[0] != 0 {
		t.Fatalf("managed commit: %v", codes)
	}
	c.Commit(CommitRequest{Group: "managed", Generation: 0, MemberID: jr.MemberID,
		Offsets: []CommitOffset{{TP: TopicPartition{"t", 0}, Offset: 1}}}, func(c []int16) { codes = c })
	if codes[0] != kerr.IllegalGeneration.Code {
		t.Fatalf("stale commit: %v", codes)
	}

	// A second coordinator over the same log (a restart, or failover).
	c2 := newTestCoordinator(t, log)
	got, code := c2.Fetch("simple", nil)
	if code != 0 || len(got) != 2 || got[0].Offset.Offset != 42 || got[0].Metadata != "m" || got[0].LeaderEpoch != 3 || got[1].Offset.Offset != 7 {
		t.Fatalf("reloaded simple offsets: %+v code %d", got, code)
	}
	d, found, _ := c2.Describe("managed")
	if !found || d.State != Stable || d.Generation != 1 || len(d.Members) != 1 || string(d.Members[0].Assignment) != "assignment" {
		t.Fatalf("reloaded group: %+v", d)
	}
	if code := c2.Heartbeat("managed", jr.MemberID, "", 1); code != 0 {
		t.Fatalf("heartbeat after reload: %d", code)
	}
	got, _ = c2.Fetch("managed", []TopicPartition{{"t", 0}, {"t", 9}})
	if got[0].Offset.Offset != 100 || got[1].Offset.Offset != -1 {
		t.Fatalf("managed offsets: %+v", got)
	}

	// Delete offsets and the simple group; the tombstones survive a reload.
	var top int16
	c2.DeleteOffsets("simple", []TopicPartition{{"t", 1}}, func(tc int16, _ []int16) { top = tc })
	if top != 0 {
		t.Fatalf("OffsetDelete: %d", top)
	}
	var dcodes []int16
	c2.DeleteGroups([]string{"managed", "nope"}, func(c []int16) { dcodes = c })
	if dcodes[0] != kerr.NonEmptyGroup.Code || dcodes[1] != kerr.GroupIDNotFound.Code {
		t.Fatalf("DeleteGroups codes %v", dcodes)
	}
	c3 := newTestCoordinator(t, log)
	got, _ = c3.Fetch("simple", nil)
	if len(got) != 1 || got[0].TP.Partition != 0 {
		t.Fatalf("after OffsetDelete and reload: %+v", got)
	}
	c3.DeleteGroups([]string{"simple"}, func(c []int16) { dcodes = c })
	if dcodes[0] != 0 {
		t.Fatalf("DeleteGroups: %v", dcodes)
	}
	c4 := newTestCoordinator(t, log)
	if _, found, _ := c4.Describe("simple"); found {
		t.Fatal("deleted group came back after reload")
	}
}

func TestCoordinatorUnloadedAnswersNotCoordinator(t *testing.T) {
	log := &memLog{}
	c := newTestCoordinator(t, log)
	p := c.PartitionFor("x")
	var jr JoinResult
	c.Join(JoinRequest{Group: "x", ProtocolType: "consumer", SessionTimeoutMs: 60000,
		Protocols: []Protocol{{Name: "range"}}}, func(r JoinResult) { jr = r })
	if jr.Err != 0 {
		t.Fatalf("join: %+v", jr)
	}
	c.UnloadPartition(p)
	if code := c.Heartbeat("x", jr.MemberID, "", jr.Generation); code != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat on an unloaded partition: %d", code)
	}
	if _, code := c.Fetch("x", nil); code != kerr.NotCoordinator.Code {
		t.Fatalf("fetch on an unloaded partition: %d", code)
	}
}

func TestCoordinatorTimerExpiresSessions(t *testing.T) {
	var mu sync.Mutex
	now := time.UnixMilli(1_000_000)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := New(Config{MinSessionTimeoutMs: 100, InitialRebalanceDelayMs: -1, TickMs: 5}, &memLog{}, clock, nil)
	t.Cleanup(c.Close)
	for p := int32(0); p < 50; p++ {
		c.LoadPartition(p)
	}
	var jr JoinResult
	c.Join(JoinRequest{Group: "x", ProtocolType: "consumer", SessionTimeoutMs: 200,
		Protocols: []Protocol{{Name: "range"}}}, func(r JoinResult) { jr = r })
	var sr SyncResult
	c.Sync(SyncRequest{Group: "x", MemberID: jr.MemberID, Generation: jr.Generation}, func(r SyncResult) { sr = r })
	if sr.Err != 0 {
		t.Fatalf("sync %+v", sr)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	deadline := time.Now().Add(30 * time.Second) // hang guard
	for {
		d, found, _ := c.Describe("x")
		if !found || d.State == Empty {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session never expired: %+v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDecodeRecordRoundTrip(t *testing.T) {
	o := Offset{Offset: 5, LeaderEpoch: 2, Metadata: "meta", CommitTimestampMs: 99}
	d, err := DecodeRecord(OffsetCommitKey("g", "t", 3), OffsetCommitValue(o))
	if err != nil || d.Kind != KindOffset || d.Group != "g" || d.TP != (TopicPartition{"t", 3}) || d.Offset != o {
		t.Fatalf("offset record: %+v %v", d, err)
	}
	d, err = DecodeRecord(OffsetCommitKey("g", "t", 3), nil)
	if err != nil || !d.Tombstone {
		t.Fatalf("tombstone: %+v %v", d, err)
	}
	// Kafka's byte layout for the offset key v1.
	want := []byte{0, 1, 0, 1, 'g', 0, 1, 't', 0, 0, 0, 3}
	if got := OffsetCommitKey("g", "t", 3); !bytes.Equal(got, want) {
		t.Fatalf("key bytes %x, want %x", got, want)
	}
	if d, err := DecodeRecord([]byte{0, 9, 1}, []byte{1}); err != nil || d.Kind != KindUnknown {
		t.Fatalf("unknown key version: %+v %v", d, err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(OffsetCommitKey("g", "t", 1), OffsetCommitValue(Offset{Offset: 1, Metadata: "x"}))
	g := NewGroup("g", &Config{}, 0)
	f.Add(GroupMetadataKey("g"), g.MetadataValue())
	v := kmsg.GroupMetadataValue{Version: 3, ProtocolType: "consumer", Members: []kmsg.GroupMetadataValueMember{{MemberID: "m"}}}
	f.Add(GroupMetadataKey("g"), v.AppendTo(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		d, err := DecodeRecord(key, value)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a record that decodes the same.
		switch d.Kind {
		case KindOffset:
			if d.Tombstone {
				return
			}
			d2, err := DecodeRecord(OffsetCommitKey(d.Group, d.TP.Topic, d.TP.Partition), OffsetCommitValue(d.Offset))
			if err != nil || d2.Offset != d.Offset || d2.TP != d.TP || d2.Group != d.Group {
				t.Fatalf("re-encode: %+v vs %+v (%v)", d2, d, err)
			}
		case KindGroup:
			if !d.Tombstone && d.Meta == nil {
				t.Fatal("group record without metadata")
			}
			if d.Meta != nil {
				grp := NewGroup(d.Group, &Config{MinSessionTimeoutMs: 1}, 0)
				restoreGroup(grp, d.Meta, 0) // must not panic on any decoded input
				if _, err := DecodeRecord(GroupMetadataKey(d.Group), grp.MetadataValue()); err != nil {
					t.Fatalf("restored group does not re-encode: %v", err)
				}
			}
		}
	})
}

func TestCoordinatorExpiresOffsets(t *testing.T) {
	var mu sync.Mutex
	now := time.UnixMilli(10_000_000)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	log := &memLog{}
	c := New(Config{MinSessionTimeoutMs: 100, InitialRebalanceDelayMs: -1, TickMs: 5, OffsetsRetentionMs: 3_600_000}, log, clock, nil)
	t.Cleanup(c.Close)
	for p := int32(0); p < 50; p++ {
		c.LoadPartition(p)
	}
	commit := func(g string, p int32) {
		var codes []int16
		c.Commit(CommitRequest{Group: g, Generation: -1, Offsets: []CommitOffset{{TP: TopicPartition{"t", p}, Offset: 1}}},
			func(x []int16) { codes = x })
		if codes[0] != 0 {
			t.Fatalf("commit %s/%d: %v", g, p, codes)
		}
	}
	commit("old", 0)
	advance(50 * time.Minute)
	commit("old", 1)
	commit("young", 0)
	advance(20 * time.Minute) // "old"/0 is 70 min old, the others 20 min
	waitOffsets := func(g string, want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // hang guard
		for {
			got, _ := c.Fetch(g, nil)
			if len(got) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %s has %d offsets, want %d", g, len(got), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitOffsets("old", 1)
	waitOffsets("young", 1)
	// Reloading replays the tombstones.
	c2 := newTestCoordinator(t, log)
	if got, _ := c2.Fetch("old", nil); len(got) != 1 || got[0].TP.Partition != 1 {
		t.Fatalf("after reload: %+v", got)
	}
}
