package txn

import (
	"bytes"
	"testing"

	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sampleMetadata() []*Metadata {
	return []*Metadata{
		{TransactionalID: "t1", ProducerID: 5, PrevProducerID: -1, NextProducerID: -1, ProducerEpoch: 3, LastProducerEpoch: -1,
			TimeoutMs: 60000, State: Empty, StartMs: -1, LastUpdateMs: 123},
		{TransactionalID: "t2", ProducerID: 1 << 40, PrevProducerID: -1, NextProducerID: -1, ProducerEpoch: 0, LastProducerEpoch: -1,
			TimeoutMs: 1, State: Ongoing, StartMs: 99, LastUpdateMs: 100,
			Partitions: []TopicPartition{{"a", 0}, {"a", 3}, {"b", 1}, {"__consumer_offsets", 7}}},
		{TransactionalID: "t3", ProducerID: 9, PrevProducerID: 8, NextProducerID: 10, ProducerEpoch: 32767, LastProducerEpoch: -1,
			TimeoutMs: 900000, State: PrepareCommit, StartMs: 1, LastUpdateMs: 2, TV2: true,
			Partitions: []TopicPartition{{"x", 0}}},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, md := range sampleMetadata() {
		md.Partitions = normalizeTPs(md.Partitions)
		key, val := EncodeKey(nil, md.TransactionalID), EncodeValue(nil, md)
		id, err := DecodeKey(key)
		if err != nil || id != md.TransactionalID {
			t.Fatalf("key: %q %v", id, err)
		}
		got, err := DecodeValue(id, val)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(md) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, md)
		}
		// Cross-check the wire layout with an independent decoder.
		var kv kmsg.TxnMetadataValue
		if err := kv.ReadFrom(val); err != nil {
			t.Fatal(err)
		}
		wantVer := int16(0)
		if md.TV2 || md.PrevProducerID != -1 {
			wantVer = 1
		}
		if kv.Version != wantVer || kv.ProducerID != md.ProducerID || int8(kv.State) != int8(md.State) {
			t.Fatalf("kmsg sees %+v", kv)
		}
	}
	// Kafka's v0 key bytes: int16 version 0, int16 length, id.
	if k := EncodeKey(nil, "ab"); !bytes.Equal(k, []byte{0, 0, 0, 2, 'a', 'b'}) {
		t.Fatalf("key bytes %v", k)
	}
	if v := EncodeValue(nil, &Metadata{State: Dead}); v != nil {
		t.Fatal("Dead must be a tombstone")
	}
}

func TestDecodeRejects(t *testing.T) {
	md := sampleMetadata()[1]
	md.Partitions = normalizeTPs(md.Partitions)
	val := EncodeValue(nil, md)
	for i := 0; i < len(val); i++ {
		if _, err := DecodeValue("x", val[:i]); err == nil && i > 0 {
			t.Fatalf("truncated value (%d of %d bytes) decoded", i, len(val))
		}
	}
	bad := append([]byte(nil), val...)
	bad[1] = 9 // version 9
	if _, err := DecodeValue("x", bad); err == nil {
		t.Fatal("unknown version decoded")
	}
	if _, err := DecodeKey([]byte{0, 1, 0, 1, 'a'}); err == nil {
		t.Fatal("key version 1 decoded")
	}
	if _, err := DecodeKey([]byte{0, 0, 0, 0}); err == nil {
		t.Fatal("empty id decoded")
	}
	c := NewCoordinator(Config{}, 0)
	if err := c.Load([]byte{0, 0, 0, 1, 'x'}, bad); err == nil {
		t.Fatal("Load accepted a bad value")
	}
}

func FuzzDecodeValue(f *testing.F) {
	for _, md := range sampleMetadata() {
		md.Partitions = normalizeTPs(md.Partitions)
		f.Add(EncodeKey(nil, md.TransactionalID), EncodeValue(nil, md))
	}
	f.Fuzz(func(t *testing.T, key, val []byte) {
		id, err := DecodeKey(key)
		if err != nil {
			return
		}
		md, err := DecodeValue(id, val)
		if err != nil || md.State == Dead {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		again, err := DecodeValue(id, EncodeValue(nil, md))
		if err != nil || !again.Equal(md) {
			t.Fatalf("re-encode: %v\n%+v\n%+v", err, md, again)
		}
		c := NewCoordinator(Config{}, 0)
		if err := c.Load(key, val); err != nil {
			t.Fatal(err)
		}
		c.Recover(md.LastUpdateMs)
		c.Tick(md.LastUpdateMs)
	})
}

func TestMarkerBatch(t *testing.T) {
	for _, commit := range []bool{true, false} {
		b := AppendMarkerBatch([]byte("prefix"), 42, 7, 11, commit, 1234)
		batch := b[len("prefix"):]
		h, err := record.ParseHeader(batch)
		if err != nil {
			t.Fatal(err)
		}
		if !record.CheckCRC(batch) {
			t.Fatal("bad CRC")
		}
		if !h.Control() || !h.Transactional() || h.ProducerID != 42 || h.ProducerEpoch != 7 || h.BaseSequence != -1 || h.NumRecords != 1 {
			t.Fatalf("header %+v", h)
		}
		n := 0
		err = record.Iterate(batch, func(h *record.Header, r *record.Record) error {
			n++
			c, ce, err := ParseMarker(r.Key, r.Value)
			if err != nil || c != commit || ce != 11 || h.BaseTimestamp+r.TimestampDelta != 1234 {
				t.Fatalf("marker %v %d %v", c, ce, err)
			}
			return nil
		})
		if err != nil || n != 1 {
			t.Fatalf("iterate: %v, %d records", err, n)
		}
	}
	if _, _, err := ParseMarker([]byte{0, 0, 0, 5}, []byte{0, 0, 0, 0, 0, 1}); err == nil {
		t.Fatal("control type 5 parsed as a marker")
	}
	if _, _, err := ParseMarker([]byte{0, 0, 0}, nil); err == nil {
		t.Fatal("short marker parsed")
	}
}
