package controller

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestOfflineDirMovesLeadership: a heartbeat reporting the broker's data
// directory offline (KIP-112) moves its leaderships to the next ISR member
// and takes it out of every ISR it is not the last member of, leaving it
// registered and unfenced; it is not elected, let back into an ISR or
// given new replicas until it registers again, and after a new
// registration (a restart) it rejoins as any restarted broker does.
func TestOfflineDirMovesLeadership(t *testing.T) {
	s := NewState()
	var e [4]int64
	for id := int32(0); id < 4; id++ {
		e[id] = addBroker(t, s, id, "", 0)
	}
	mustApply(t, s, CreateTopic{Name: "t", ID: tid(1), Assignment: [][]int32{{0, 1, 2}, {1, 0, 2}, {2, 1, 3}}})
	mustApply(t, s, CreateTopic{Name: "u", ID: tid(2), Assignment: [][]int32{{0}}})

	r := mustApply(t, s, BrokerHeartbeat{ID: 0, Epoch: e[0], NowMs: 1, MetadataOffset: s.Offset(), OfflineDir: true})
	if r.Fenced || r.BrokerEpoch != e[0] {
		t.Fatalf("heartbeat result %+v", r)
	}
	wantPart(t, part(t, s, "t", 0), 1, []int32{1, 2}, 1, 1)     // led by 0: the next ISR member leads
	wantPart(t, part(t, s, "t", 1), 1, []int32{1, 2}, 0, 1)     // followed by 0: it leaves the ISR
	wantPart(t, part(t, s, "t", 2), 2, []int32{2, 1, 3}, 0, 0)  // not a replica of 0: untouched
	wantPart(t, part(t, s, "u", 0), NoLeader, []int32{0}, 1, 1) // its only replica: offline, ISR kept
	if b, _ := s.Broker(0); b.Fenced || b.ShuttingDown || !b.OfflineDir || b.Live() {
		t.Fatalf("broker 0 after reporting its directory offline: %+v", b)
	}

	// Sticky for the registration: a later heartbeat without the flag (or
	// the same report again) changes nothing.
	mustApply(t, s, BrokerHeartbeat{ID: 0, Epoch: e[0], NowMs: 2, MetadataOffset: s.Offset()})
	mustApply(t, s, BrokerHeartbeat{ID: 0, Epoch: e[0], NowMs: 3, MetadataOffset: s.Offset(), OfflineDir: true})
	wantPart(t, part(t, s, "t", 0), 1, []int32{1, 2}, 1, 1)
	if b, _ := s.Broker(0); !b.OfflineDir {
		t.Fatal("the offline directory was forgotten by a heartbeat without the flag")
	}

	// Not let back into an ISR, not elected, not placed.
	wantPartCode(t, apply(t, s, AlterPartition{BrokerID: 1, BrokerEpoch: e[1], Partitions: []AlterPartitionItem{
		{Topic: "t", Partition: 0, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []ISRMember{{0, -1}, {1, -1}, {2, -1}}}}}), kerr.IneligibleReplica)
	wantPartCode(t, apply(t, s, ElectLeaders{Election: ElectPreferred, Partitions: []TopicPartition{{"t", 0}}}), kerr.PreferredLeaderNotAvailable)
	mustApply(t, s, CreateTopic{Name: "v", ID: tid(3), Partitions: 8, ReplicationFactor: 3})
	for i := int32(0); i < 8; i++ {
		if p := part(t, s, "v", i); contains(p.Replicas, 0) {
			t.Fatalf("v-%d placed on broker 0, whose directory is offline: %v", i, p.Replicas)
		}
	}
	wantCode(t, apply(t, s, CreateTopic{Name: "w", ID: tid(4), Partitions: 1, ReplicationFactor: 4}), kerr.InvalidReplicationFactor)
	// Fencing and unfencing (a session expiry and a caught-up heartbeat)
	// do not make it eligible either.
	mustApply(t, s, FenceBroker{ID: 0})
	mustApply(t, s, BrokerHeartbeat{ID: 0, Epoch: e[0], NowMs: 4, MetadataOffset: s.Offset()})
	if b, _ := s.Broker(0); b.Fenced || !b.OfflineDir {
		t.Fatalf("broker 0 after fence and heartbeat: %+v", b)
	}
	wantPart(t, part(t, s, "u", 0), NoLeader, []int32{0}, 1, 1)

	// A restart with a healthy directory: a new registration starts
	// without the flag; caught up, it leads what only it can lead and
	// rejoins ISRs through its leaders' AlterPartition.
	r = mustApply(t, s, RegisterBroker{ID: 0, IncarnationID: inc(100), Host: "127.0.0.1", Port: 9092, NowMs: 5})
	e[0] = r.BrokerEpoch
	if b, _ := s.Broker(0); b.OfflineDir {
		t.Fatal("a new registration kept the offline directory")
	}
	mustApply(t, s, BrokerHeartbeat{ID: 0, Epoch: e[0], NowMs: 6, MetadataOffset: s.Offset()})
	wantPart(t, part(t, s, "u", 0), 0, []int32{0}, 2, 2)
	p := part(t, s, "t", 0)
	mustApply(t, s, AlterPartition{BrokerID: 1, BrokerEpoch: e[1], Partitions: []AlterPartitionItem{
		{Topic: "t", Partition: 0, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []ISRMember{{0, e[0]}, {1, e[1]}, {2, e[2]}}}}})
	wantPart(t, part(t, s, "t", 0), 1, []int32{0, 1, 2}, 1, 2)
}

// TestOfflineDirStaleOrUnknown: the report is refused like any heartbeat
// from a registration that is not current, and changes nothing.
func TestOfflineDirStaleOrUnknown(t *testing.T) {
	s := NewState()
	e0 := addBroker(t, s, 0, "", 0)
	addBroker(t, s, 1, "", 0)
	mustApply(t, s, CreateTopic{Name: "t", ID: tid(1), Assignment: [][]int32{{0, 1}}})
	before := s.Clone()
	wantCode(t, apply(t, s, BrokerHeartbeat{ID: 0, Epoch: e0 + 100, NowMs: 1, OfflineDir: true}), kerr.StaleBrokerEpoch)
	wantCode(t, apply(t, s, BrokerHeartbeat{ID: 7, Epoch: e0, NowMs: 1, OfflineDir: true}), kerr.BrokerIDNotRegistered)
	before.offset = s.offset
	if !bytes.Equal(before.AppendTo(nil), s.AppendTo(nil)) {
		t.Fatal("a refused offline-directory report changed the state")
	}
}

// TestOfflineDirHeartbeatEncoding: the flag is a trailing byte 1 written
// only when set, so a heartbeat without it encodes as before (logs written
// by older versions decode unchanged); a trailing 0 is refused.
func TestOfflineDirHeartbeatEncoding(t *testing.T) {
	plain := BrokerHeartbeat{ID: 3, Epoch: 9, NowMs: 10, MetadataOffset: 11, WantShutdown: true}
	off := plain
	off.OfflineDir = true
	pb, ob := EncodeCommand(plain), EncodeCommand(off)
	if len(ob) != len(pb)+1 || !bytes.Equal(ob[:len(pb)], pb) || ob[len(pb)] != 1 {
		t.Fatalf("encodings\n% x\n% x", pb, ob)
	}
	for _, c := range []BrokerHeartbeat{plain, off} {
		got, err := DecodeCommand(EncodeCommand(c))
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip of %+v: %+v, %v", c, got, err)
		}
	}
	for _, bad := range [][]byte{append(bytes.Clone(pb), 0), append(bytes.Clone(pb), 2), append(bytes.Clone(ob), 1)} {
		if c, err := DecodeCommand(bad); err == nil {
			t.Fatalf("% x decoded as %+v", bad, c)
		}
	}
}

// TestOfflineDirSnapshot: the flag is part of the snapshot (version 4);
// a version 3 snapshot decodes with every directory online.
func TestOfflineDirSnapshot(t *testing.T) {
	s := NewState()
	e0 := addBroker(t, s, 0, "", 0)
	addBroker(t, s, 1, "", 0)
	mustApply(t, s, BrokerHeartbeat{ID: 0, Epoch: e0, NowMs: 1, MetadataOffset: s.Offset(), OfflineDir: true})
	snap := s.AppendTo(nil)
	if snap[4] != StateVersion || StateVersion < 4 {
		t.Fatalf("snapshot version %d, want %d (at least 4)", snap[4], StateVersion)
	}
	got, err := DecodeState(snap)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := got.Broker(0); !b.OfflineDir {
		t.Fatal("the offline directory did not survive a snapshot")
	}
	if b, _ := got.Broker(1); b.OfflineDir {
		t.Fatal("broker 1 came back from the snapshot with an offline directory")
	}

	// Version 3 had no offline-directory list: the same bytes without
	// the (empty) list at the end.
	v3 := NewState()
	addBroker(t, v3, 0, "", 0)
	addBroker(t, v3, 1, "", 0)
	enc := v3.AppendTo(nil)
	// An empty list is one byte, then version 5's broker configs and
	// version 6's listeners (one byte each when empty), then the CRC.
	old := bytes.Clone(enc[:len(enc)-7])
	old[4] = 3
	old = binary.BigEndian.AppendUint32(old, crc32.Checksum(old, castagnoli))
	st, err := DecodeState(old)
	if err != nil {
		t.Fatalf("version 3 snapshot: %v", err)
	}
	if !bytes.Equal(st.AppendTo(nil), enc) {
		t.Fatal("a version 3 snapshot decodes to a different state")
	}
	// The list names registered brokers, ascending, once each.
	for _, ids := range [][]int32{{5}, {1, 0}, {0, 0}} {
		bad := appendInt32s(bytes.Clone(enc[:len(enc)-7]), ids)
		bad = append(bad, 0, 0) // no broker configs (version 5), no listeners (version 6)
		bad = binary.BigEndian.AppendUint32(bad, crc32.Checksum(bad, castagnoli))
		if _, err := DecodeState(bad); err == nil {
			t.Fatalf("offline list %v decoded", ids)
		}
	}
}

// TestOfflineDirReplayDeterminism is TestReplayDeterminism with heartbeats
// reporting offline directories mixed in: both States (from the commands
// and from their decoded encodings) stay equal, the invariants (no leader
// that is not live, so none with an offline directory) hold after every
// command, one leader per epoch, and a snapshot taken midway replays to
// the same end.
func TestOfflineDirReplayDeterminism(t *testing.T) {
	reported := 0
	for seed := int64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewSource(seed))
		g := &cmdGen{rng: rng}
		a, b := NewState(), NewState()
		ledger := leaderLedger{}
		var cmds []Command
		n := 300 + rng.Intn(300)
		for i := 0; i < n; i++ {
			c := g.next(a)
			if hb, ok := c.(BrokerHeartbeat); ok && rng.Intn(4) == 0 {
				hb.OfflineDir = true
				c = hb
				if br, ok := a.Broker(hb.ID); ok && br.Epoch == hb.Epoch && !br.OfflineDir {
					reported++
				}
			}
			cmds = append(cmds, c)
			ra := a.Apply(c)
			dec, err := DecodeCommand(EncodeCommand(c))
			if err != nil {
				t.Fatalf("seed %d cmd %d %T: %v", seed, i, c, err)
			}
			rb := b.Apply(dec)
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("seed %d cmd %d %T: results differ\n%+v\n%+v", seed, i, c, ra, rb)
			}
			if err := a.Check(); err != nil {
				t.Fatalf("seed %d cmd %d %+v: %v", seed, i, c, err)
			}
			for _, br := range a.Brokers() {
				if !br.OfflineDir {
					continue
				}
				for _, tp := range a.Topics() {
					for j, p := range tp.Partitions {
						if p.Leader == br.ID || (contains(p.ISR, br.ID) && len(p.ISR) > 1 && !br.Fenced) {
							t.Fatalf("seed %d cmd %d: %s-%d leader %d isr %v with broker %d's directory offline",
								seed, i, tp.Name, j, p.Leader, p.ISR, br.ID)
						}
					}
				}
			}
			if !bytes.Equal(a.AppendTo(nil), b.AppendTo(nil)) {
				t.Fatalf("seed %d cmd %d %T: states differ", seed, i, c)
			}
			if err := ledger.observe(a); err != nil {
				t.Fatalf("seed %d cmd %d: %v", seed, i, err)
			}
		}
		cut := rng.Intn(len(cmds))
		c := NewState()
		for _, cmd := range cmds[:cut] {
			c.Apply(cmd)
		}
		snap := c.AppendTo(nil)
		restored, err := DecodeState(snap)
		if err != nil {
			t.Fatalf("seed %d: restore: %v", seed, err)
		}
		if !bytes.Equal(restored.AppendTo(nil), snap) {
			t.Fatalf("seed %d: restored state encodes differently", seed)
		}
		for _, cmd := range cmds[cut:] {
			restored.Apply(cmd)
		}
		if !bytes.Equal(restored.AppendTo(nil), a.AppendTo(nil)) {
			t.Fatalf("seed %d: snapshot at %d + replay differs from the original run", seed, cut)
		}
	}
	if reported < 30 {
		t.Fatalf("only %d heartbeats reported a directory offline on a current registration", reported)
	}
}
