package controller

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestFirstProducerIDIsEndOfFileRanges: the controller's ids start where
// the last node's file range (txn.FileBlockSource: node n owns
// [n<<47, (n+1)<<47), n <= MaxInt64>>47 - 1) ends.
func TestFirstProducerIDIsEndOfFileRanges(t *testing.T) {
	const nodeRangeBits = 47
	maxFileNodeID := int64(math.MaxInt64>>nodeRangeBits - 1)
	if want := (maxFileNodeID + 1) << nodeRangeBits; FirstProducerID != want {
		t.Fatalf("FirstProducerID %d, want %d", FirstProducerID, want)
	}
	if NewState().NextProducerID() != FirstProducerID {
		t.Fatal("a new State does not start at FirstProducerID")
	}
}

func TestAllocateProducerIDsBlocks(t *testing.T) {
	s := NewState()
	r0 := s.Apply(RegisterBroker{ID: 0, IncarnationID: [16]byte{1}, Host: "h", Port: 1})
	r1 := s.Apply(RegisterBroker{ID: 1, IncarnationID: [16]byte{2}, Host: "h", Port: 2})

	// Fenced (registered, not yet caught up) with the current epoch: served.
	seen := map[int64]bool{}
	want := FirstProducerID
	for i := 0; i < 10; i++ {
		id, epoch := int32(i%2), r0.BrokerEpoch
		if id == 1 {
			epoch = r1.BrokerEpoch
		}
		off := s.Offset()
		r := s.Apply(AllocateProducerIDs{BrokerID: id, BrokerEpoch: epoch})
		if r.Code != 0 {
			t.Fatalf("allocation %d: %v", i, r.Err())
		}
		if r.ProducerIDStart != want || r.ProducerIDLen != ProducerIDBlockSize || r.BrokerEpoch != epoch || r.Offset != off+1 {
			t.Fatalf("allocation %d: %+v, want block at %d", i, r, want)
		}
		if seen[r.ProducerIDStart] {
			t.Fatalf("block %d handed out twice", r.ProducerIDStart)
		}
		seen[r.ProducerIDStart] = true
		want += ProducerIDBlockSize
		if s.NextProducerID() != want {
			t.Fatalf("next %d, want %d", s.NextProducerID(), want)
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
	}

	refused := func(c AllocateProducerIDs, code int16) {
		t.Helper()
		next, off := s.NextProducerID(), s.Offset()
		r := s.Apply(c)
		if r.Code != code || r.ProducerIDLen != 0 || r.ProducerIDStart != 0 {
			t.Fatalf("%+v: %+v, want code %d and no block", c, r, code)
		}
		if s.NextProducerID() != next || s.Offset() != off+1 {
			t.Fatalf("%+v: a refusal moved next %d->%d or offset %d->%d", c, next, s.NextProducerID(), off, s.Offset())
		}
	}
	refused(AllocateProducerIDs{BrokerID: 7, BrokerEpoch: 1}, kerr.BrokerIDNotRegistered.Code)
	refused(AllocateProducerIDs{BrokerID: 0, BrokerEpoch: r0.BrokerEpoch + 100}, kerr.StaleBrokerEpoch.Code)

	// A new incarnation of broker 0 fences the old one's epoch.
	r0b := s.Apply(RegisterBroker{ID: 0, IncarnationID: [16]byte{3}, Host: "h", Port: 1})
	refused(AllocateProducerIDs{BrokerID: 0, BrokerEpoch: r0.BrokerEpoch}, kerr.StaleBrokerEpoch.Code)
	if r := s.Apply(AllocateProducerIDs{BrokerID: 0, BrokerEpoch: r0b.BrokerEpoch}); r.Code != 0 || r.ProducerIDStart != want {
		t.Fatalf("new incarnation: %+v", r)
	}
	want += ProducerIDBlockSize

	// Unfenced and session-fenced brokers with the current epoch are served alike.
	s.Apply(BrokerHeartbeat{ID: 1, Epoch: r1.BrokerEpoch, MetadataOffset: s.Offset()})
	if b, _ := s.Broker(1); b.Fenced {
		t.Fatal("broker 1 still fenced")
	}
	if r := s.Apply(AllocateProducerIDs{BrokerID: 1, BrokerEpoch: r1.BrokerEpoch}); r.Code != 0 || r.ProducerIDStart != want {
		t.Fatalf("unfenced broker: %+v", r)
	}
}

func TestAllocateProducerIDsExhausted(t *testing.T) {
	s := NewState()
	r := s.Apply(RegisterBroker{ID: 0, Host: "h", Port: 1})
	last := int64(math.MaxInt64 - ProducerIDBlockSize) // the last block that fits: [last, MaxInt64)
	s.nextProducerID = last
	got := s.Apply(AllocateProducerIDs{BrokerID: 0, BrokerEpoch: r.BrokerEpoch})
	if got.Code != 0 || got.ProducerIDStart != last || s.NextProducerID() != math.MaxInt64 {
		t.Fatalf("last block: %+v next %d", got, s.NextProducerID())
	}
	got = s.Apply(AllocateProducerIDs{BrokerID: 0, BrokerEpoch: r.BrokerEpoch})
	if got.Code != kerr.UnknownServerError.Code || got.ProducerIDLen != 0 || s.NextProducerID() != math.MaxInt64 {
		t.Fatalf("after the last block: %+v next %d", got, s.NextProducerID())
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestProducerIDsSnapshotRoundTrip: nextProducerID survives the snapshot,
// and a restored State continues exactly as the original.
func TestProducerIDsSnapshotRoundTrip(t *testing.T) {
	s := fuzzBase()
	b0, _ := s.Broker(0)
	for i := 0; i < 5; i++ {
		if r := s.Apply(AllocateProducerIDs{BrokerID: 0, BrokerEpoch: b0.Epoch}); r.Code != 0 {
			t.Fatal(r.Err())
		}
	}
	enc := s.AppendTo(nil)
	if enc[4] != StateVersion || StateVersion != 6 {
		t.Fatalf("state version %d", enc[4])
	}
	d, err := DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if d.NextProducerID() != FirstProducerID+5*ProducerIDBlockSize {
		t.Fatalf("restored next %d", d.NextProducerID())
	}
	if !bytes.Equal(d.AppendTo(nil), enc) {
		t.Fatal("re-encoding differs")
	}
	c := s.Clone()
	if c.NextProducerID() != s.NextProducerID() {
		t.Fatal("Clone lost nextProducerID")
	}
	for _, st := range []*State{s, d, c} {
		r := st.Apply(AllocateProducerIDs{BrokerID: 0, BrokerEpoch: b0.Epoch})
		if r.ProducerIDStart != FirstProducerID+5*ProducerIDBlockSize {
			t.Fatalf("continued at %d", r.ProducerIDStart)
		}
	}
	if !bytes.Equal(s.AppendTo(nil), d.AppendTo(nil)) || !bytes.Equal(s.AppendTo(nil), c.AppendTo(nil)) {
		t.Fatal("original, restored and cloned states diverged")
	}
}

// withCRC replaces the trailing checksum of an encoded State.
func withCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

// TestDecodeStateVersion1: a snapshot written before producer id blocks
// existed decodes with nextProducerID = FirstProducerID.
func TestDecodeStateVersion1(t *testing.T) {
	s := fuzzBase()
	v3 := s.AppendTo(nil)
	k := len(s.appendSecurity(nil)) + 1 + len(s.appendBrokerConfigs(nil)) + len(s.appendListeners(nil, s.brokerIDs())) // versions 3, 4, 5 and 6's parts, empty here
	v2 := append(bytes.Clone(v3[:len(v3)-4-k]), 0, 0, 0, 0)
	v2[4] = 2
	v2 = withCRC(v2)
	if d, err := DecodeState(v2); err != nil || !bytes.Equal(d.AppendTo(nil), v3) {
		t.Fatalf("version 2 (no security part): %v", err)
	}
	n := len(binary.AppendVarint(nil, s.NextProducerID()))
	v1 := append(bytes.Clone(v2[:len(v2)-4-n]), 0, 0, 0, 0)
	v1[4] = 1
	d, err := DecodeState(withCRC(v1))
	if err != nil {
		t.Fatal(err)
	}
	if d.NextProducerID() != FirstProducerID || !bytes.Equal(d.AppendTo(nil), v3) {
		t.Fatalf("version 1 decoded to next %d", d.NextProducerID())
	}
	// Version 1 with a trailing nextProducerID, or version 3 without its
	// security part: refused.
	bad := bytes.Clone(v2)
	bad[4] = 1
	if _, err := DecodeState(withCRC(bad)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 1 with trailing bytes: %v", err)
	}
	bad[4] = 3
	if _, err := DecodeState(withCRC(bad)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 3 without its security part: %v", err)
	}
	// Version 2 with a next id below FirstProducerID breaks an invariant.
	low := append(bytes.Clone(v2[:len(v2)-4-n]), binary.AppendVarint(nil, 5)...)
	low = append(low, 0, 0, 0, 0)
	if _, err := DecodeState(withCRC(low)); !errors.Is(err, ErrInvariant) {
		t.Fatalf("next below FirstProducerID: %v", err)
	}
}

func TestAllocateProducerIDsCodec(t *testing.T) {
	c := AllocateProducerIDs{BrokerID: 3, BrokerEpoch: 1 << 40}
	enc := EncodeCommand(c)
	d, err := DecodeCommand(enc)
	if err != nil || d != (AllocateProducerIDs{BrokerID: 3, BrokerEpoch: 1 << 40}) {
		t.Fatalf("round trip: %v %#v", err, d)
	}
	if d.Type().String() != "AllocateProducerIDs" {
		t.Fatal(d.Type().String())
	}
	for i := 0; i < len(enc); i++ {
		if _, err := DecodeCommand(enc[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("prefix of %d bytes: %v", i, err)
		}
	}
	if _, err := DecodeCommand(append(bytes.Clone(enc), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatal("trailing byte accepted")
	}
	// Pointer commands apply as values.
	s := NewState()
	r := s.Apply(RegisterBroker{ID: 3, Host: "h", Port: 1})
	if got := s.Apply(&AllocateProducerIDs{BrokerID: 3, BrokerEpoch: r.BrokerEpoch}); got.Code != 0 {
		t.Fatal(got.Err())
	}
}

// TestResultProducerIDsCodec: the forwarding RPC carries the block; results
// of other commands encode as before (no block fields).
func TestResultProducerIDsCodec(t *testing.T) {
	r := Result{Offset: 9, BrokerEpoch: 4, ProducerIDStart: FirstProducerID + 7000, ProducerIDLen: ProducerIDBlockSize}
	enc := AppendResult(nil, r)
	d, err := DecodeResult(enc)
	if err != nil || !reflect.DeepEqual(d, r) {
		t.Fatalf("round trip: %v %+v", err, d)
	}
	plain := Result{Offset: 9, BrokerEpoch: 4}
	penc := AppendResult(nil, plain)
	if !bytes.Equal(penc, enc[:len(penc)]) {
		t.Fatal("the block is not an optional suffix")
	}
	// A present block must be valid; a truncated one is corrupt.
	zero := append(bytes.Clone(penc), binary.AppendVarint(nil, 5)...)
	zero = binary.AppendVarint(zero, 0)
	for _, b := range [][]byte{zero, enc[:len(enc)-1]} {
		if _, err := DecodeResult(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%x: %v", b, err)
		}
	}
}

// TestProducerIDsThroughQuorum: allocations through a follower (forwarded)
// and the leader, across a leader change and a restart of the old leader,
// never repeat a block, and every node agrees on the next id.
func TestProducerIDsThroughQuorum(t *testing.T) {
	c := newCluster(t, 3)
	c.leader()
	registerAll(t, c.follower(), 3)
	st := c.leader().State()
	seen := map[int64]bool{}
	alloc := func(via *Controller, broker int32) Result {
		t.Helper()
		b, _ := st.Broker(broker)
		r := mustPropose(t, via, AllocateProducerIDs{BrokerID: broker, BrokerEpoch: b.Epoch})
		if r.ProducerIDLen != ProducerIDBlockSize || r.ProducerIDStart < FirstProducerID || seen[r.ProducerIDStart] {
			t.Fatalf("block %+v (seen before: %v)", r, seen[r.ProducerIDStart])
		}
		seen[r.ProducerIDStart] = true
		return r
	}
	for i := int32(0); i < 6; i++ {
		alloc(c.follower(), i%3) // forwarded: the block crosses the RPC
		alloc(c.leader(), i%3)
	}
	old := c.leader().NodeID()
	c.stop(old)
	var last Result
	for i := int32(0); i < 4; i++ {
		last = alloc(c.leader(), i%3)
	}
	c.start(old, nil)
	enc := c.converged(last.Offset)
	d, err := DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if want := FirstProducerID + int64(len(seen))*ProducerIDBlockSize; d.NextProducerID() != want || last.ProducerIDStart != want-ProducerIDBlockSize {
		t.Fatalf("next %d after %d blocks (last at %d), want %d", d.NextProducerID(), len(seen), last.ProducerIDStart, want)
	}
	// The restarted node's allocation continues after every earlier block.
	alloc(c.nodes[old], 0)
}

// FuzzAllocateProducerIDs: any sequence of allocations keeps the blocks
// disjoint and ascending and the next id consistent with them.
func FuzzAllocateProducerIDs(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 0, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		s := fuzzBase()
		var epochs [3]int64
		for id := int32(0); id < 3; id++ {
			b, _ := s.Broker(id)
			epochs[id] = b.Epoch
		}
		next := s.NextProducerID()
		for _, op := range ops {
			id := int32(op % 4) // 3: unknown
			var epoch int64 = 1
			if id < 3 {
				epoch = epochs[id]
			}
			if op&0x80 != 0 {
				epoch++ // stale
			}
			r := s.Apply(AllocateProducerIDs{BrokerID: id, BrokerEpoch: epoch})
			switch {
			case r.Code == 0:
				if id == 3 || op&0x80 != 0 || r.ProducerIDStart != next || r.ProducerIDLen != ProducerIDBlockSize {
					t.Fatalf("op %#x: %+v (next %d)", op, r, next)
				}
				next += ProducerIDBlockSize
			case id < 3 && op&0x80 == 0:
				t.Fatalf("op %#x refused: %v", op, r.Err())
			}
			if s.NextProducerID() != next {
				t.Fatalf("next %d, want %d", s.NextProducerID(), next)
			}
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
	})
}
