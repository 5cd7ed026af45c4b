package share

import (
	"bytes"
	"reflect"
	"testing"
)

func TestStateRecordRoundTrip(t *testing.T) {
	p := New(Config{DeliveryCountLimit: 2}, 10)
	acq, _ := p.Acquire(0, "m", 5, 20)
	if len(acq) != 1 || acq[0].First != 10 || acq[0].Last != 14 {
		t.Fatalf("acquired %+v", acq)
	}
	if _, err := p.Acknowledge(0, "m", []AckBatch{{First: 11, Last: 12, Types: []AckType{AckAccept, AckRelease}}}); err != nil {
		t.Fatal(err)
	}
	v, err := EncodeState(p.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeState(v)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p.Snapshot()) {
		t.Fatalf("decoded %+v, want %+v", back, p.Snapshot())
	}
	if _, err := DecodeState([]byte("{")); err == nil {
		t.Fatal("a truncated value decoded")
	}
	k := StateKey("g", [16]byte{15: 1}, 3)
	want := append([]byte{0, KeyState, 0, 1, 'g'}, append(make([]byte, 15), 1, 0, 0, 0, 3)...)
	if !bytes.Equal(k, want) {
		t.Fatalf("StateKey %x, want %x", k, want)
	}
	if p := StatePartition(k, 50); p < 0 || p >= 50 || StatePartition(k, 0) != 0 {
		t.Fatalf("StatePartition %d", p)
	}
}
