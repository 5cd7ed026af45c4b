package controller

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"reflect"
	"testing"
)

// A broker registers every listener's endpoint (Kafka's
// BrokerRegistrationRequest.Listeners) and the state answers per listener.
func TestRegisterBrokerListeners(t *testing.T) {
	eps := []Endpoint{{Name: "INTERNAL", Host: "10.0.0.1", Port: 9093}, {Name: "EXTERNAL", Host: "kafka.example", Port: 9092}}
	c := RegisterBroker{ID: 3, IncarnationID: [16]byte{7}, Host: "10.0.0.1", Port: 9093, Rack: "r", NowMs: 5, Listeners: eps}
	enc := EncodeCommand(c)
	if CommandType(enc[1]) != TypeRegisterBrokerListeners {
		t.Fatalf("type %v, want RegisterBrokerListeners", CommandType(enc[1]))
	}
	got, err := DecodeCommand(enc)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, c)
	}
	for n := 2; n < len(enc); n++ {
		if _, err := DecodeCommand(enc[:n]); err == nil {
			t.Fatalf("truncation to %d accepted", n)
		}
	}
	// Without listeners the encoding is the one logs written before
	// listeners were registered hold: type 1, the same bytes.
	plain := c
	plain.Listeners = nil
	old := EncodeCommand(plain)
	if CommandType(old[1]) != TypeRegisterBroker || !bytes.HasPrefix(enc[2:], old[2:]) || len(old) >= len(enc) {
		t.Fatalf("plain registration encodes as %x (with listeners %x)", old, enc)
	}
	if d, err := DecodeCommand(old); err != nil || d.(RegisterBroker).Listeners != nil {
		t.Fatalf("plain decode: %+v, %v", d, err)
	}

	s := NewState()
	if r := s.Apply(c); r.Code != 0 {
		t.Fatalf("register: %+v", r)
	}
	b, _ := s.Broker(3)
	for _, tc := range []struct {
		name string
		host string
		port int32
		ok   bool
	}{{"EXTERNAL", "kafka.example", 9092, true}, {"INTERNAL", "10.0.0.1", 9093, true}, {"", "10.0.0.1", 9093, true}, {"OTHER", "", 0, false}} {
		h, p, ok := b.Endpoint(tc.name)
		if h != tc.host || p != tc.port || ok != tc.ok {
			t.Errorf("Endpoint(%q) = %s:%d %v, want %s:%d %v", tc.name, h, p, ok, tc.host, tc.port, tc.ok)
		}
	}
	// A broker without listeners serves its one endpoint on every listener.
	s.Apply(RegisterBroker{ID: 4, IncarnationID: [16]byte{8}, Host: "h4", Port: 4})
	b4, _ := s.Broker(4)
	if h, p, ok := b4.Endpoint("EXTERNAL"); h != "h4" || p != 4 || !ok {
		t.Errorf("plain broker's Endpoint(EXTERNAL) = %s:%d %v", h, p, ok)
	}

	// The snapshot keeps them; a restart's registration replaces them.
	d, err := DecodeState(s.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	if db, _ := d.Broker(3); !reflect.DeepEqual(db.Listeners, eps) {
		t.Fatalf("after the snapshot: %+v", db.Listeners)
	}
	if !bytes.Equal(d.AppendTo(nil), s.AppendTo(nil)) {
		t.Fatal("snapshot not canonical")
	}
	s.Apply(RegisterBroker{ID: 3, IncarnationID: [16]byte{9}, Host: "10.0.0.1", Port: 9093, Listeners: eps[:1]})
	if nb, _ := s.Broker(3); len(nb.Listeners) != 1 {
		t.Fatalf("re-registration kept %+v", nb.Listeners)
	}

	for _, bad := range [][]Endpoint{
		{{Name: "A", Host: "h", Port: 1}, {Name: "A", Host: "h", Port: 2}},
		{{Name: "", Host: "h", Port: 1}},
		{{Name: "A", Host: "h", Port: 70000}},
		make([]Endpoint, maxEndpoints+1),
	} {
		if r := NewState().Apply(RegisterBroker{ID: 1, Host: "h", Port: 1, Listeners: bad}); r.Code == 0 {
			t.Errorf("registration with listeners %+v accepted", bad)
		}
	}
}

// A version-5 snapshot (before listeners) still decodes.
func TestDecodeStateVersion5(t *testing.T) {
	s := NewState()
	s.Apply(RegisterBroker{ID: 0, Host: "h", Port: 1})
	v6 := s.AppendTo(nil)
	body := bytes.Clone(v6[:len(v6)-4])
	if body[4] != 6 || body[len(body)-1] != 0 {
		t.Fatalf("unexpected layout: version %d, last byte %d", body[4], body[len(body)-1])
	}
	body[4] = 5
	body = body[:len(body)-1] // no listeners part
	v5 := binary.BigEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
	d, err := DecodeState(v5)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := d.Broker(0); !ok || b.Host != "h" || b.Listeners != nil {
		t.Fatalf("broker 0 after a v5 snapshot: %+v %v", b, ok)
	}
}
