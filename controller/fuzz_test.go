package controller

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand"
	"reflect"
	"testing"
)

// fuzzBase is a small cluster the fuzzed commands are applied to.
func fuzzBase() *State {
	s := NewState()
	for id := int32(0); id < 3; id++ {
		r := s.Apply(RegisterBroker{ID: id, Host: "h", Port: 1})
		s.Apply(BrokerHeartbeat{ID: id, Epoch: r.BrokerEpoch, MetadataOffset: s.Offset()})
	}
	s.Apply(CreateTopic{Name: "t", ID: tid(1), Partitions: 3, ReplicationFactor: 3})
	return s
}

func seedCommands(f *testing.F) {
	g := &cmdGen{rng: rand.New(rand.NewSource(7))}
	s := fuzzBase()
	for i := 0; i < 40; i++ {
		c := g.next(s)
		s.Apply(c)
		f.Add(EncodeCommand(c))
	}
	for _, c := range securityCommands() {
		f.Add(EncodeCommand(c))
	}
}

// FuzzDecodeCommand: decoding never panics; a decoded command re-encodes to
// bytes that decode to the same command; applying it keeps the invariants.
func FuzzDecodeCommand(f *testing.F) {
	seedCommands(f)
	f.Add([]byte{1})
	f.Add([]byte{1, 5, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			if c != nil {
				t.Fatal("command returned with an error")
			}
			return
		}
		re := EncodeCommand(c)
		c2, err := DecodeCommand(re)
		if err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed the command:\n%#v\n%#v", c, c2)
		}
		if !bytes.Equal(EncodeCommand(c2), re) {
			t.Fatal("encoding is not a fixed point")
		}
		s := fuzzBase()
		before := s.Offset()
		s.Apply(c)
		if s.Offset() != before+1 {
			t.Fatal("offset did not advance by one")
		}
		if err := s.Check(); err != nil {
			t.Fatalf("%#v broke an invariant: %v", c, err)
		}
	})
}

// FuzzDecodeState: decoding a snapshot never panics; whatever decodes
// satisfies Check and re-encodes to a fixed point. The CRC is recomputed
// over the fuzzed body so mutations reach the parser.
func FuzzDecodeState(f *testing.F) {
	g := &cmdGen{rng: rand.New(rand.NewSource(3))}
	s := NewState()
	for i := 0; i < 200; i++ {
		s.Apply(g.next(s))
		if i%40 == 0 {
			f.Add(s.AppendTo(nil))
		}
	}
	f.Add(fuzzBase().AppendTo(nil))
	sec := fuzzBase()
	for _, c := range securityCommands() {
		sec.Apply(c)
	}
	f.Add(sec.AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 9 {
			b = bytes.Clone(b)
			binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
		}
		st, err := DecodeState(b)
		if err != nil {
			return
		}
		if err := st.Check(); err != nil {
			t.Fatal(err)
		}
		re := st.AppendTo(nil)
		st2, err := DecodeState(re)
		if err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if !bytes.Equal(st2.AppendTo(nil), re) {
			t.Fatal("encoding is not a fixed point")
		}
		// A decoded state keeps working.
		st.Apply(Tick{NowMs: 1 << 40})
		if err := st.Check(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzDecodeResult: the forwarding RPC's result decoder.
func FuzzDecodeResult(f *testing.F) {
	s := fuzzBase()
	f.Add(AppendResult(nil, s.Apply(CreateTopic{Name: "u", ID: tid(2), Partitions: 2, ReplicationFactor: 2})))
	f.Add(AppendResult(nil, s.Apply(FenceBroker{ID: 9})))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeResult(b)
		if err != nil {
			return
		}
		re := AppendResult(nil, r)
		r2, err := DecodeResult(re)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, r, r2)
		}
	})
}
