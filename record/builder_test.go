package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBuilderHeaderDefaults(t *testing.T) {
	var b Builder // zero value: first record sets the base timestamp
	b.Add(500, []byte("a"), []byte("1"), nil)
	b.Add(900, nil, []byte("2"), nil)
	b.Add(100, nil, []byte("3"), nil)
	if b.Len() != 3 {
		t.Fatalf("Len %d", b.Len())
	}
	batch, err := b.AppendTo([]byte("xx"))
	if err != nil {
		t.Fatal(err)
	}
	if string(batch[:2]) != "xx" {
		t.Fatal("AppendTo overwrote dst")
	}
	batch = batch[2:]
	if b.Size() != len(batch) {
		t.Fatalf("Size %d, batch %d bytes", b.Size(), len(batch))
	}
	h, err := Validate(batch)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{BaseOffset: 0, BatchLength: int32(len(batch) - 12), PartitionLeaderEpoch: -1, Magic: 2, CRC: h.CRC,
		LastOffsetDelta: 2, BaseTimestamp: 500, MaxTimestamp: 900, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 3}
	if h != want {
		t.Fatalf("header\n got %+v\nwant %+v", h, want)
	}
	_, recs, err := collect(batch)
	if err != nil {
		t.Fatal(err)
	}
	if recs[2].Timestamp != 100 { // negative delta survives
		t.Fatalf("timestamp %d", recs[2].Timestamp)
	}
}

func TestBuilderResetAndReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	var b Builder
	b.Reset(CodecSnappy, 10)
	b.SetProducer(7, 1, 100)
	b.Add(11, []byte("stale"), []byte("stale"), nil)
	recs := genRecords(rng, 30, 10)
	b.Reset(CodecNone, 10) // drops records and producer
	if b.Len() != 0 || b.Size() != HeaderSize {
		t.Fatalf("after Reset: Len %d Size %d", b.Len(), b.Size())
	}
	for _, r := range recs {
		b.Add(r.Timestamp, r.Key, r.Value, r.Headers)
	}
	reused, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if fresh := buildBatch(t, CodecNone, 10, recs); !bytes.Equal(reused, fresh) {
		t.Fatal("a reused Builder encodes differently from a fresh one")
	}
	h, _ := ParseHeader(reused)
	if h.ProducerID != -1 || h.ProducerEpoch != -1 || h.BaseSequence != -1 {
		t.Fatalf("producer survived Reset: %+v", h)
	}
	// AppendTo twice gives the same batch.
	again, _ := b.AppendTo(nil)
	if !bytes.Equal(again, reused) {
		t.Fatal("second AppendTo differs")
	}
}

func TestBuilderErrors(t *testing.T) {
	var b Builder
	if _, err := b.AppendTo(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty builder: %v", err)
	}
	b.Reset(Codec(6), 0)
	b.Add(0, nil, nil, nil)
	out, err := b.AppendTo([]byte("keep"))
	if err == nil || string(out) != "keep" {
		t.Fatalf("codec 6: %v, dst %q", err, out)
	}
}

func TestBuilderNoAlloc(t *testing.T) {
	value := make([]byte, 1024)
	key := []byte("user-12345")
	hs := []RecordHeader{{Key: "h", Value: []byte("v")}}
	var b Builder
	dst := make([]byte, 0, 64<<10)
	run := func() {
		b.Reset(CodecNone, 1)
		for i := range 32 {
			b.Add(int64(i), key, value, hs)
		}
		var err error
		if dst, err = b.AppendTo(dst[:0]); err != nil {
			t.Fatal(err)
		}
	}
	run() // grow the buffers
	if allocs := testing.AllocsPerRun(50, run); allocs != 0 {
		t.Fatalf("%v allocations per batch in steady state, want 0", allocs)
	}
	if _, err := Validate(dst); err != nil {
		t.Fatal(err)
	}
}

// kmsgRecords decodes a records section with franz-go's kmsg.Record.
func kmsgRecords(t *testing.T, src []byte) []kmsg.Record {
	t.Helper()
	var out []kmsg.Record
	for len(src) > 0 {
		var r kmsg.Record
		if err := r.ReadFrom(src); err != nil {
			t.Fatalf("kmsg.Record.ReadFrom: %v", err)
		}
		_, n := binary.Varint(src)
		src = src[n+int(r.Length):]
		out = append(out, r)
	}
	return out
}

// TestBuilderDecodedByFranzGo: our batches, every codec, read by kmsg and
// franz-go's decompressor.
func TestBuilderDecodedByFranzGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	dec := kgo.DefaultDecompressor()
	for _, c := range allCodecs {
		recs := genRecords(rng, 40, 1_650_000_000_000)
		var b Builder
		b.Reset(c, 1_650_000_000_000)
		b.SetProducer(99, 4, 1000)
		for _, r := range recs {
			b.Add(r.Timestamp, r.Key, r.Value, r.Headers)
		}
		batch, err := b.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(batch); err != nil {
			t.Fatalf("%v: kmsg.RecordBatch.ReadFrom: %v", c, err)
		}
		if kb.FirstOffset != 0 || kb.PartitionLeaderEpoch != -1 || kb.Magic != 2 || kb.Attributes != int16(c) ||
			kb.LastOffsetDelta != 39 || kb.NumRecords != 40 || kb.ProducerID != 99 || kb.ProducerEpoch != 4 ||
			kb.FirstSequence != 1000 || kb.FirstTimestamp != 1_650_000_000_000 || int(kb.Length) != len(batch)-12 {
			t.Fatalf("%v: kmsg sees %+v", c, kb)
		}
		var maxTS int64
		for _, r := range recs {
			maxTS = max(maxTS, r.Timestamp)
		}
		if kb.MaxTimestamp != maxTS {
			t.Fatalf("%v: maxTimestamp %d, want %d", c, kb.MaxTimestamp, maxTS)
		}
		if uint32(kb.CRC) != crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)) {
			t.Fatalf("%v: CRC is not CRC-32C of bytes 21..end", c)
		}
		if !bytes.Equal(kb.AppendTo(nil), batch) {
			t.Fatalf("%v: kmsg re-encodes the batch differently", c)
		}
		raw, err := dec.Decompress(kb.Records, kgo.CompressionCodecType(c))
		if err != nil {
			t.Fatalf("%v: franz-go decompress: %v", c, err)
		}
		krecs := kmsgRecords(t, raw)
		if len(krecs) != len(recs) {
			t.Fatalf("%v: kmsg decoded %d records, want %d", c, len(krecs), len(recs))
		}
		for i, kr := range krecs {
			w := recs[i]
			if int(kr.OffsetDelta) != i || kb.FirstTimestamp+kr.TimestampDelta64 != w.Timestamp ||
				!bytes.Equal(kr.Key, w.Key) || (kr.Key == nil) != (w.Key == nil) ||
				!bytes.Equal(kr.Value, w.Value) || (kr.Value == nil) != (w.Value == nil) || len(kr.Headers) != len(w.Headers) {
				t.Fatalf("%v record %d: kmsg %+v, want %v", c, i, kr, w)
			}
			for j, h := range kr.Headers {
				if h.Key != w.Headers[j].Key || !bytes.Equal(h.Value, w.Headers[j].Value) || (h.Value == nil) != (w.Headers[j].Value == nil) {
					t.Fatalf("%v record %d header %d: %+v", c, i, j, h)
				}
			}
		}
	}
}

// franzBatch encodes recs with kmsg and franz-go's own compressor.
func franzBatch(t *testing.T, c Codec, base int64, recs []testRec) []byte {
	t.Helper()
	var raw []byte
	maxTS := base
	for i, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.Timestamp - base, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // encoded with Length 0: one byte
		raw = kr.AppendTo(raw)
		maxTS = max(maxTS, r.Timestamp)
	}
	records := raw
	if c != CodecNone {
		comp, err := kgo.DefaultCompressor(franzCodec(c))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		out, _ := comp.Compress(&buf, raw)
		records = append([]byte(nil), out...)
	}
	kb := kmsg.RecordBatch{
		FirstOffset: 0, Length: int32(49 + len(records)), PartitionLeaderEpoch: -1, Magic: 2,
		Attributes: int16(c), LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: base, MaxTimestamp: maxTS,
		ProducerID: 5, ProducerEpoch: 0, FirstSequence: 0, NumRecords: int32(len(recs)), Records: records,
	}
	b := kb.AppendTo(nil)
	return restamp(b)
}

// TestFranzGoBatchesParsed: kmsg-encoded batches, compressed by franz-go,
// validate and iterate with ours to the same records.
func TestFranzGoBatchesParsed(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	for _, c := range allCodecs {
		for _, n := range []int{1, 17, 300} {
			recs := genRecords(rng, n, 42_000)
			batch := franzBatch(t, c, 42_000, recs)
			h, err := Validate(batch)
			if err != nil {
				t.Fatalf("%v/%d: Validate: %v", c, n, err)
			}
			if h.ProducerID != 5 || int(h.NumRecords) != n || h.Codec() != c {
				t.Fatalf("%v/%d: header %+v", c, n, h)
			}
			_, got, err := collect(batch)
			if err != nil {
				t.Fatalf("%v/%d: Iterate: %v", c, n, err)
			}
			equalRecs(t, got, recs)
			if c == CodecNone {
				// Same records, same encoding: byte-identical to our Builder
				// apart from the producer fields and CRC.
				ours := buildBatch(t, CodecNone, 42_000, recs)
				if !bytes.Equal(ours[HeaderSize:], batch[HeaderSize:]) {
					t.Fatalf("%d records: record encoding differs from kmsg", n)
				}
			}
		}
	}
}

// SetTransactional and SetControl set the batch attribute bits (with a
// valid CRC), and Reset clears them.
func TestBuilderTransactionalAndControl(t *testing.T) {
	var b Builder
	b.Reset(CodecNone, 1)
	b.SetProducer(7, 1, 0)
	b.SetTransactional()
	b.SetControl()
	b.Add(1, []byte("k"), []byte("v"), nil)
	out, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseHeader(out)
	if err != nil || !CheckCRC(out) {
		t.Fatalf("header %v, crc ok %v", err, CheckCRC(out))
	}
	if !h.Transactional() || !h.Control() || h.Codec() != CodecNone {
		t.Fatalf("attributes %#x: want transactional|control, codec none", h.Attributes)
	}
	b.Reset(CodecNone, 1)
	b.Add(1, nil, []byte("v"), nil)
	out, _ = b.AppendTo(nil)
	if h, _ := ParseHeader(out); h.Attributes != 0 {
		t.Fatalf("after Reset: attributes %#x, want 0", h.Attributes)
	}
}
