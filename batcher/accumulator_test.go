package batcher

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

type sentRecord struct {
	key, value []byte
	tsMs       int64
	tag        int64
}

// decodedRecord is one record as franz-go's kmsg decodes it.
type decodedRecord struct {
	key, value []byte
	tsMs       int64
	offset     int32
}

// decodeWithKmsg decodes an encoded batch with franz-go's kmsg, checks its
// CRC-32C the way a Kafka broker does, and returns its header and records.
func decodeWithKmsg(t testing.TB, b []byte) (kmsg.RecordBatch, []decodedRecord) {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatalf("kmsg cannot decode the batch: %v", err)
	}
	if int(rb.Length)+12 != len(b) {
		t.Fatalf("batch length field %d, batch is %d bytes", rb.Length, len(b))
	}
	if rb.Magic != 2 {
		t.Fatalf("magic %d", rb.Magic)
	}
	if got := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)); got != uint32(rb.CRC) {
		t.Fatalf("CRC-32C %08x, header says %08x", got, uint32(rb.CRC))
	}
	raw := rb.Records
	if c := record.Codec(rb.Attributes & 7); c != record.CodecNone {
		var err error
		if raw, err = record.Decompress(c, nil, rb.Records); err != nil {
			t.Fatalf("decompressing %v records: %v", c, err)
		}
	}
	var out []decodedRecord
	for i := int32(0); i < rb.NumRecords; i++ {
		n, k := binary.Varint(raw)
		if k <= 0 || n < 0 || int(n) > len(raw)-k {
			t.Fatalf("record %d: bad length prefix", i)
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[:k+int(n)]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		raw = raw[k+int(n):]
		out = append(out, decodedRecord{key: r.Key, value: r.Value, tsMs: rb.FirstTimestamp + r.TimestampDelta64, offset: r.OffsetDelta})
	}
	if len(raw) != 0 {
		t.Fatalf("%d bytes after the last record", len(raw))
	}
	if int(rb.LastOffsetDelta) != len(out)-1 {
		t.Fatalf("lastOffsetDelta %d with %d records", rb.LastOffsetDelta, len(out))
	}
	return rb, out
}

func newAcc(t testing.TB, cfg Config) *Accumulator {
	t.Helper()
	a, err := NewAccumulator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkDrained decodes every batch and checks that, partition by partition,
// the records come out exactly as appended and in order, with their tags.
func checkDrained(t *testing.T, batches []*Batch, sent map[int32][]sentRecord, codec record.Codec) {
	t.Helper()
	got := map[int32][]sentRecord{}
	for _, b := range batches {
		if _, err := record.Validate(b.Bytes); err != nil {
			t.Fatalf("record.Validate: %v", err)
		}
		rb, recs := decodeWithKmsg(t, b.Bytes)
		if record.Codec(rb.Attributes&7) != codec {
			t.Fatalf("batch codec %d, want %v", rb.Attributes&7, codec)
		}
		if len(recs) != b.Records || len(b.Tags) != b.Records {
			t.Fatalf("batch says %d records, %d tags, decoded %d", b.Records, len(b.Tags), len(recs))
		}
		for i, r := range recs {
			if int(r.offset) != i {
				t.Fatalf("offset delta %d at index %d", r.offset, i)
			}
			got[b.Partition] = append(got[b.Partition], sentRecord{key: r.key, value: r.value, tsMs: r.tsMs, tag: b.Tags[i]})
		}
	}
	for p, want := range sent {
		g := got[p]
		if len(g) != len(want) {
			t.Fatalf("partition %d: %d records decoded, %d appended", p, len(g), len(want))
		}
		for i := range want {
			w := want[i]
			if !bytes.Equal(g[i].key, w.key) || (g[i].key == nil) != (w.key == nil) ||
				!bytes.Equal(g[i].value, w.value) || (g[i].value == nil) != (w.value == nil) || g[i].tsMs != w.tsMs || g[i].tag != w.tag {
				t.Fatalf("partition %d record %d: got key %q ts %d tag %d, want key %q ts %d tag %d",
					p, i, g[i].key, g[i].tsMs, g[i].tag, w.key, w.tsMs, w.tag)
			}
		}
	}
	for p := range got {
		if _, ok := sent[p]; !ok {
			t.Fatalf("records on partition %d that nothing was appended to", p)
		}
	}
}

func TestAccumulatorBatchesDecodeWithKmsg(t *testing.T) {
	for _, codec := range []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			a := newAcc(t, Config{Partitions: 7, MaxBatchBytes: 4096, Codec: codec, Seed: 1})
			rng := rand.New(rand.NewPCG(5, 6))
			sent := map[int32][]sentRecord{}
			var out []*Batch
			now := t0
			for i := range 3000 {
				var key []byte
				if i%3 != 0 {
					key = fmt.Appendf(nil, "user-%d", rng.IntN(50))
				}
				value := make([]byte, rng.IntN(300))
				for j := range value {
					value[j] = byte('a' + rng.IntN(4)) // compressible
				}
				if i%97 == 0 {
					value = nil // a null value
				}
				ts := now.UnixMilli()
				p, err := a.Append(now, ts, key, value, int64(i))
				if err != nil {
					t.Fatal(err)
				}
				sent[p] = append(sent[p], sentRecord{key: key, value: value, tsMs: ts, tag: int64(i)})
				now = now.Add(37 * time.Microsecond)
				if a.Ready(now) {
					if out, err = a.Drain(now, out); err != nil {
						t.Fatal(err)
					}
				}
			}
			a.Flush()
			out, err := a.Drain(now, out)
			if err != nil {
				t.Fatal(err)
			}
			if a.Buffered() != 0 {
				t.Fatalf("Buffered() = %d after draining everything", a.Buffered())
			}
			if _, ok := a.Deadline(); ok {
				t.Fatal("Deadline reports work after draining everything")
			}
			checkDrained(t, out, sent, codec)
			for _, b := range out {
				if codec == record.CodecNone && len(b.Bytes) > 4096 {
					t.Fatalf("batch of %d bytes over MaxBatchBytes 4096", len(b.Bytes))
				}
			}
		})
	}
}

func TestKeyedPartitionsAgreeWithKgo(t *testing.T) {
	for _, n := range []int32{1, 3, 96, 1000} {
		a := newAcc(t, Config{Partitions: n})
		tp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		for i := range 5000 {
			key := fmt.Appendf(nil, "key-%d", i)
			p, err := a.Append(t0, 0, key, []byte("v"), 0)
			if err != nil {
				t.Fatal(err)
			}
			if want := tp.Partition(&kgo.Record{Key: key}, int(n)); int(p) != want {
				t.Fatalf("%d partitions, key %q: accumulator chose %d, kgo %d", n, key, p, want)
			}
		}
	}
}

func TestLingerClosesBatch(t *testing.T) {
	a := newAcc(t, Config{Partitions: 4, Linger: 5 * time.Millisecond})
	if a.Ready(t0) {
		t.Fatal("empty accumulator is ready")
	}
	if _, err := a.Append(t0, 1, []byte("a"), []byte("1"), 1); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(2 * time.Millisecond)
	if _, err := a.Append(later, 2, []byte("a"), []byte("2"), 2); err != nil {
		t.Fatal(err)
	}
	if d, ok := a.Deadline(); !ok || !d.Equal(t0.Add(5*time.Millisecond)) {
		t.Fatalf("Deadline = %v %v, want t0+5ms", d, ok)
	}
	almost := t0.Add(5*time.Millisecond - time.Nanosecond)
	if a.Ready(almost) {
		t.Fatal("ready before linger expired")
	}
	if out, _ := a.Drain(almost, nil); len(out) != 0 {
		t.Fatalf("Drain before linger returned %d batches", len(out))
	}
	at := t0.Add(5 * time.Millisecond)
	if !a.Ready(at) {
		t.Fatal("not ready when linger expired")
	}
	out, err := a.Drain(at, nil)
	if err != nil || len(out) != 1 || out[0].Records != 2 || !out[0].Opened.Equal(t0) {
		t.Fatalf("Drain at linger: %d batches, err %v", len(out), err)
	}
	if out[0].Tags[0] != 1 || out[0].Tags[1] != 2 {
		t.Fatalf("tags %v", out[0].Tags)
	}
	a.Release(out[0])
	// A new batch starts its own linger from its first record.
	if _, err := a.Append(at, 3, []byte("a"), []byte("3"), 3); err != nil {
		t.Fatal(err)
	}
	if d, _ := a.Deadline(); !d.Equal(at.Add(5 * time.Millisecond)) {
		t.Fatalf("second batch deadline %v, want %v", d, at.Add(5*time.Millisecond))
	}
}

func TestNoLingerIsReadyAtOnce(t *testing.T) {
	a := newAcc(t, Config{Partitions: 1, Linger: -1})
	a.Append(t0, 0, nil, []byte("x"), 0)
	if !a.Ready(t0) {
		t.Fatal("negative linger: batch not ready at once")
	}
}

func TestSizeClosesBatch(t *testing.T) {
	const maxBytes = 1000
	a := newAcc(t, Config{Partitions: 1, MaxBatchBytes: maxBytes, Linger: time.Hour})
	value := bytes.Repeat([]byte("v"), 100)
	var out []*Batch
	for i := range 50 {
		if _, err := a.Append(t0, 0, []byte("k"), value, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if !a.Ready(t0) {
		t.Fatal("full batches are not ready without time passing")
	}
	out, _ = a.Drain(t0, out)
	if len(out) == 0 {
		t.Fatal("no full batch drained")
	}
	// Each encoded record is 100 value + 1 key + 8 framing bytes = 109; the
	// 61-byte header leaves room for 8 of them in 1000 bytes.
	total := 0
	for _, b := range out {
		if len(b.Bytes) > maxBytes {
			t.Fatalf("batch of %d bytes over %d", len(b.Bytes), maxBytes)
		}
		if b.Records != 8 {
			t.Fatalf("full batch with %d records, want 8", b.Records)
		}
		total += b.Records
	}
	a.Flush()
	rest, _ := a.Drain(t0, nil)
	for _, b := range rest {
		total += b.Records
	}
	if total != 50 {
		t.Fatalf("%d records drained, 50 appended", total)
	}
}

func TestOversizedRecordGetsItsOwnBatch(t *testing.T) {
	a := newAcc(t, Config{Partitions: 1, MaxBatchBytes: 200, Linger: time.Hour})
	a.Append(t0, 0, nil, []byte("small"), 1)
	a.Append(t0, 0, nil, bytes.Repeat([]byte("x"), 1000), 2)
	a.Append(t0, 0, nil, []byte("small"), 3)
	a.Flush()
	out, err := a.Drain(t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 {
		t.Fatalf("%d batches, want 3 (small, big alone, small)", len(out))
	}
	for i, b := range out {
		if b.Records != 1 || b.Tags[0] != int64(i+1) {
			t.Fatalf("batch %d: %d records, tags %v", i, b.Records, b.Tags)
		}
	}
}

func TestStickyPartitionerForKeylessRecords(t *testing.T) {
	const parts = 8
	a := newAcc(t, Config{Partitions: parts, MaxBatchBytes: 1000, Linger: time.Hour, Seed: 42})
	value := bytes.Repeat([]byte("v"), 100)
	seen := map[int32]int{}
	prev := int32(-1)
	for range 200 { // 200 batches of 8 records
		var p0 int32 = -1
		for i := range 8 {
			p, _ := a.Append(t0, 0, nil, value, 0)
			if i == 0 {
				p0 = p
			} else if p != p0 {
				t.Fatalf("keyless record left the sticky partition %d for %d before the batch closed", p0, p)
			}
		}
		if p0 == prev {
			t.Fatalf("sticky partition %d picked twice in a row", p0)
		}
		prev = p0
		seen[p0]++
		out, _ := a.Drain(t0, nil)
		if len(out) != 1 || out[0].Partition != p0 || out[0].Records != 8 {
			t.Fatalf("after 8 records: %d batches drained", len(out))
		}
		a.Release(out[0])
	}
	for p := int32(0); p < parts; p++ {
		if seen[p] < 10 { // expected 25 each
			t.Fatalf("partition %d got %d of 200 sticky batches: %v", p, seen[p], seen)
		}
	}

	// A linger close switches partitions too.
	b := newAcc(t, Config{Partitions: parts, Linger: time.Millisecond, Seed: 7})
	first, _ := b.Append(t0, 0, nil, value, 0)
	again, _ := b.Append(t0, 0, nil, value, 0)
	if again != first {
		t.Fatal("keyless records split before any close")
	}
	out, _ := b.Drain(t0.Add(time.Millisecond), nil)
	if len(out) != 1 {
		t.Fatalf("linger drain: %d batches", len(out))
	}
	next, _ := b.Append(t0.Add(time.Millisecond), 0, nil, value, 0)
	if next == first {
		t.Fatal("sticky partition unchanged after its batch closed on linger")
	}
}

func TestIdempotentSequences(t *testing.T) {
	a := newAcc(t, Config{Partitions: 2, MaxBatchBytes: 500, Linger: time.Hour})
	a.SetProducer(7, 3)
	for i := range 40 {
		a.Append(t0, 0, []byte("same-key"), bytes.Repeat([]byte("v"), 50), int64(i))
	}
	a.Flush()
	out, err := a.Drain(t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := int32(0)
	for _, b := range out {
		rb, _ := decodeWithKmsg(t, b.Bytes)
		if rb.ProducerID != 7 || rb.ProducerEpoch != 3 || rb.FirstSequence != want || b.BaseSequence != want {
			t.Fatalf("batch producer %d/%d seq %d (field %d), want 7/3 seq %d", rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence, b.BaseSequence, want)
		}
		want += int32(b.Records)
	}
	if want != 40 {
		t.Fatalf("sequences cover %d records, want 40", want)
	}
}

func TestNewAccumulatorRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Partitions: 0},
		{Partitions: MaxPartitions + 1},
		{Partitions: 1, MaxBatchBytes: 10},
		{Partitions: 1, Codec: 9},
	} {
		if _, err := NewAccumulator(cfg); err == nil {
			t.Errorf("NewAccumulator(%+v) accepted", cfg)
		}
	}
}

// TestSteadyStateDoesNotAllocate appends, drains and releases like a
// producer does and checks that nothing is allocated per record once the
// batch pool has grown.
func TestSteadyStateDoesNotAllocate(t *testing.T) {
	a := newAcc(t, Config{Partitions: 16, MaxBatchBytes: 16 << 10, Seed: 3})
	value := make([]byte, 1024)
	key := []byte("key-00000")
	var out []*Batch
	now := t0
	i := 0
	step := func() {
		i++
		key[len(key)-1] = byte('0' + i%10)
		var k []byte
		if i%2 == 0 {
			k = key
		}
		a.Append(now, now.UnixMilli(), k, value, int64(i))
		now = now.Add(10 * time.Microsecond)
		if a.Ready(now) {
			out, _ = a.Drain(now, out[:0])
			for _, b := range out {
				a.Release(b)
			}
		}
	}
	for range 20000 { // warm the pool and the buffers
		step()
	}
	allocs := testing.AllocsPerRun(5000, step)
	if allocs != 0 && !raceEnabled {
		t.Fatalf("%.3f allocations per record in steady state, want 0", allocs)
	}
}

// FuzzAccumulator drives an accumulator from fuzz bytes (each op byte picks
// append keyed/keyless, advance time, drain or flush) and checks the
// invariants: every batch decodes with kmsg and passes its CRC, records come
// out per partition exactly as appended, nothing is lost at the end.
func FuzzAccumulator(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}, uint16(4), uint16(300))
	f.Add(bytes.Repeat([]byte{1, 0, 9}, 50), uint16(1), uint16(100))
	f.Add([]byte{200, 201, 3, 3, 3, 255, 17}, uint16(96), uint16(65535))
	f.Fuzz(func(t *testing.T, ops []byte, parts, maxBytes uint16) {
		if len(ops) > 4096 {
			ops = ops[:4096]
		}
		cfg := Config{
			Partitions:    int32(parts%64) + 1,
			MaxBatchBytes: record.HeaderSize + 1 + int(maxBytes),
			Linger:        time.Duration(maxBytes%7) * time.Millisecond,
			Codec:         record.Codec(parts % 5),
			Seed:          uint64(maxBytes),
		}
		a := newAcc(t, cfg)
		sent := map[int32][]sentRecord{}
		var out []*Batch
		now := t0
		for i, op := range ops {
			switch {
			case op < 160:
				var key []byte
				if op%2 == 0 {
					key = []byte{op, byte(i)}
				}
				value := bytes.Repeat([]byte{op}, int(op))
				p, err := a.Append(now, int64(i), key, value, int64(i))
				if err != nil {
					t.Fatal(err)
				}
				if p < 0 || p >= cfg.Partitions {
					t.Fatalf("partition %d out of range", p)
				}
				sent[p] = append(sent[p], sentRecord{key: key, value: value, tsMs: int64(i), tag: int64(i)})
			case op < 220:
				now = now.Add(time.Duration(op-160) * 100 * time.Microsecond)
			case op < 250:
				ready := a.Ready(now)
				n := len(out)
				var err error
				if out, err = a.Drain(now, out); err != nil {
					t.Fatal(err)
				}
				if ready != (len(out) > n) {
					t.Fatalf("Ready said %v, Drain returned %d batches", ready, len(out)-n)
				}
			default:
				a.Flush()
			}
		}
		a.Flush()
		out, err := a.Drain(now, out)
		if err != nil {
			t.Fatal(err)
		}
		checkDrained(t, out, sent, cfg.Codec)
	})
}

func BenchmarkAccumulatorAppend(b *testing.B) {
	for _, size := range []int{100, 1024} {
		for _, codec := range []record.Codec{record.CodecNone, record.CodecLZ4, record.CodecZstd} {
			for _, keyed := range []bool{false, true} {
				name := fmt.Sprintf("%dB/%v/keyed=%v", size, codec, keyed)
				b.Run(name, func(b *testing.B) {
					a := newAcc(b, Config{Partitions: 96, Codec: codec, Seed: 1})
					value := make([]byte, size)
					rand.NewChaCha8([32]byte{1}).Read(value)
					key := []byte("key-000000")
					var out []*Batch
					now := t0
					b.SetBytes(int64(size))
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						i++
						var k []byte
						if keyed {
							k = key
							k[len(k)-1] = byte('0' + i%10)
							k[len(k)-2] = byte('0' + i/10%10)
						}
						a.Append(now, 0, k, value, int64(i))
						now = now.Add(time.Microsecond)
						if a.Ready(now) {
							out, _ = a.Drain(now, out[:0])
							for _, bt := range out {
								a.Release(bt)
							}
						}
					}
				})
			}
		}
	}
}
