package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

func validBatch(t testing.TB) []byte {
	t.Helper()
	return buildBatch(t, CodecNone, 1_700_000_000_000, genRecords(rand.New(rand.NewPCG(7, 7)), 5, 1_700_000_000_000))
}

func TestParseHeaderFields(t *testing.T) {
	var b Builder
	b.Reset(CodecLZ4, 1000)
	b.SetProducer(42, 3, 17)
	b.Add(1000, []byte("k"), []byte("v"), nil)
	b.Add(1500, nil, []byte("w"), nil)
	b.Add(1200, nil, nil, nil)
	batch, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	SetBaseOffset(batch, 1234)
	SetPartitionLeaderEpoch(batch, 9)
	h, err := ParseHeader(batch)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{
		BaseOffset: 1234, BatchLength: int32(len(batch) - LogOverhead), PartitionLeaderEpoch: 9,
		Magic: 2, CRC: binary.BigEndian.Uint32(batch[OffsetCRC:]), Attributes: int16(CodecLZ4),
		LastOffsetDelta: 2, BaseTimestamp: 1000, MaxTimestamp: 1500,
		ProducerID: 42, ProducerEpoch: 3, BaseSequence: 17, NumRecords: 3,
	}
	if h != want {
		t.Fatalf("header\n got %+v\nwant %+v", h, want)
	}
	if h.Size() != len(batch) || h.LastOffset() != 1236 || h.Codec() != CodecLZ4 {
		t.Fatalf("Size %d LastOffset %d Codec %v", h.Size(), h.LastOffset(), h.Codec())
	}
	if h.LogAppendTime() || h.Transactional() || h.Control() {
		t.Fatal("attribute flags set on a plain batch")
	}
	// Patching outside the CRC keeps the batch valid.
	if _, err := Validate(batch); err != nil {
		t.Fatalf("Validate after patching offset and epoch: %v", err)
	}
}

func TestAttributeFlags(t *testing.T) {
	for _, tc := range []struct {
		attrs          int16
		lat, txn, ctrl bool
		codec          Codec
	}{
		{0x08, true, false, false, CodecNone},
		{0x10 | 0x04, false, true, false, CodecZstd},
		{0x20 | 0x10, false, true, true, CodecNone},
		{0x7f, true, true, true, Codec(7)},
	} {
		h := Header{Attributes: tc.attrs}
		if h.LogAppendTime() != tc.lat || h.Transactional() != tc.txn || h.Control() != tc.ctrl || h.Codec() != tc.codec {
			t.Errorf("attrs %#x: lat %v txn %v ctrl %v codec %v", tc.attrs, h.LogAppendTime(), h.Transactional(), h.Control(), h.Codec())
		}
	}
}

// TestValidateErrors is one row per rule Validate enforces.
func TestValidateErrors(t *testing.T) {
	type edit func(b []byte) []byte
	set16 := func(off int, v uint16) edit {
		return func(b []byte) []byte { binary.BigEndian.PutUint16(b[off:], v); return b }
	}
	set32 := func(off int, v uint32) edit {
		return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], v); return b }
	}
	then := func(es ...edit) edit {
		return func(b []byte) []byte {
			for _, e := range es {
				b = e(b)
			}
			return b
		}
	}
	for _, tc := range []struct {
		name string
		edit edit
		want error
	}{
		{"valid", func(b []byte) []byte { return b }, nil},
		{"empty", func([]byte) []byte { return nil }, ErrShort},
		{"shorter than header", func(b []byte) []byte { return b[:HeaderSize-1] }, ErrShort},
		{"torn tail", func(b []byte) []byte { return b[:len(b)-1] }, ErrShort},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, ErrInvalid},
		{"magic 1", func(b []byte) []byte { b[16] = 1; return b }, ErrMagic},
		{"magic 0 (zeroed tail)", func(b []byte) []byte { return make([]byte, len(b)) }, ErrMagic},
		{"batchLength below header", set32(8, HeaderSize-LogOverhead-1), ErrInvalid},
		{"batchLength negative", set32(8, 0xffffff00), ErrInvalid},
		{"batchLength past the end", set32(8, 1<<20), ErrShort},
		{"crc field flipped", func(b []byte) []byte { b[OffsetCRC] ^= 1; return b }, ErrCorrupt},
		{"attributes flipped", func(b []byte) []byte { b[OffsetAttrs+1] ^= 0x10; return b }, ErrCorrupt},
		{"record byte flipped", func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }, ErrCorrupt},
		{"zero records", then(set32(57, 0), set32(23, 0xffffffff), restamp), ErrInvalid},
		{"negative records", then(set32(57, 0xfffffffe), set32(23, 0xfffffffd), restamp), ErrInvalid},
		{"lastOffsetDelta too small", then(set32(23, 3), restamp), ErrInvalid},
		{"lastOffsetDelta too big", then(set32(23, 5), restamp), ErrInvalid},
		{"control batch", then(set16(OffsetAttrs, 0x20), restamp), ErrInvalid},
		{"codec 5", then(set16(OffsetAttrs, 5), restamp), ErrInvalid},
		{"codec 7", then(set16(OffsetAttrs, 7), restamp), ErrInvalid},
		{"more records than bytes", then(set32(57, 100000), set32(23, 99999), restamp), ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.edit(validBatch(t))
			h, err := Validate(b)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
			if err == nil {
				if !CheckCRC(b) || h.Size() != len(b) {
					t.Fatalf("valid batch: CheckCRC %v Size %d len %d", CheckCRC(b), h.Size(), len(b))
				}
			}
			// Only the three sentinel kinds plus nil ever come back.
			for _, s := range []error{ErrShort, ErrMagic, ErrCorrupt, ErrInvalid} {
				if errors.Is(err, s) {
					return
				}
			}
			if err != nil {
				t.Fatalf("error %v wraps no sentinel", err)
			}
		})
	}
}

func TestValidateAcceptsEveryCodecAndFlags(t *testing.T) {
	recs := genRecords(rand.New(rand.NewPCG(1, 1)), 20, 5000)
	for c := CodecNone; c <= CodecZstd; c++ {
		b := buildBatch(t, c, 5000, recs)
		h, err := Validate(b)
		if err != nil || h.Codec() != c || h.NumRecords != 20 {
			t.Fatalf("%v: %v (codec %v, %d records)", c, err, h.Codec(), h.NumRecords)
		}
	}
	// Transactional and LogAppendTime batches are legal from a producer.
	b := validBatch(t)
	binary.BigEndian.PutUint16(b[OffsetAttrs:], 0x10|0x08)
	if _, err := Validate(restamp(b)); err != nil {
		t.Fatalf("transactional batch: %v", err)
	}
}

func TestParseHeaderReturnsFieldsOnError(t *testing.T) {
	b := validBatch(t)
	b[16] = 1
	SetBaseOffset(b, 77)
	h, err := ParseHeader(b)
	if !errors.Is(err, ErrMagic) || h.BaseOffset != 77 || h.Magic != 1 {
		t.Fatalf("ParseHeader = %+v, %v", h, err)
	}
}

func TestCheckCRC(t *testing.T) {
	b := validBatch(t)
	if !CheckCRC(b) {
		t.Fatal("fresh batch fails CheckCRC")
	}
	if !CheckCRC(append(b[:len(b):len(b)], 1, 2, 3)) {
		t.Fatal("bytes after the batch must be ignored")
	}
	for _, bad := range [][]byte{nil, b[:HeaderSize-1], b[:len(b)-1]} {
		if CheckCRC(bad) {
			t.Fatalf("CheckCRC true for %d bytes", len(bad))
		}
	}
	// Every single-bit flip in the covered range is caught.
	for i := OffsetAttrs; i < len(b); i++ {
		for bit := range 8 {
			b[i] ^= 1 << bit
			if CheckCRC(b) {
				t.Fatalf("flip of byte %d bit %d not detected", i, bit)
			}
			b[i] ^= 1 << bit
		}
	}
}

func TestNext(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	var all []byte
	var sizes []int
	for c := CodecNone; c <= CodecZstd; c++ {
		b := buildBatch(t, c, 100, genRecords(rng, 1+rng.IntN(10), 100))
		SetBaseOffset(b, int64(len(sizes)*100))
		sizes = append(sizes, len(b))
		all = append(all, b...)
	}
	rest := all
	for i, size := range sizes {
		batch, r, h, err := Next(rest)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if len(batch) != size || h.Size() != size || h.BaseOffset != int64(i*100) || !bytes.Equal(batch, rest[:size]) {
			t.Fatalf("batch %d: len %d size %d offset %d", i, len(batch), h.Size(), h.BaseOffset)
		}
		if cap(batch) != len(batch) {
			t.Fatal("batch capacity reaches into the next batch")
		}
		rest = r
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left", len(rest))
	}
	// A torn tail: every strict prefix of the last batch is ErrShort and
	// leaves rest untouched.
	last := all[len(all)-sizes[len(sizes)-1]:]
	for n := range len(last) {
		batch, r, _, err := Next(last[:n])
		if !errors.Is(err, ErrShort) || batch != nil || len(r) != n {
			t.Fatalf("prefix %d: batch %d bytes, rest %d, err %v", n, len(batch), len(r), err)
		}
	}
	if _, _, _, err := Next(make([]byte, 100)); !errors.Is(err, ErrMagic) {
		t.Fatalf("zeroed bytes: %v", err)
	}
}

func TestSetters(t *testing.T) {
	b := validBatch(t)
	SetBaseOffset(b, -5)
	SetPartitionLeaderEpoch(b, 1<<30)
	h, err := Validate(b)
	if err != nil || h.BaseOffset != -5 || h.PartitionLeaderEpoch != 1<<30 {
		t.Fatalf("after Set*: %+v %v", h, err)
	}
	before, recs, err := collect(b)
	if err != nil {
		t.Fatal(err)
	}
	SetLogAppendTime(b, 99_999)
	h, err = Validate(b)
	if err != nil {
		t.Fatalf("SetLogAppendTime broke the batch: %v", err)
	}
	if !h.LogAppendTime() || h.MaxTimestamp != 99_999 || h.BaseTimestamp != before.BaseTimestamp || h.Codec() != CodecNone {
		t.Fatalf("after SetLogAppendTime: %+v", h)
	}
	_, after, err := collect(b)
	if err != nil {
		t.Fatal(err)
	}
	equalRecs(t, after, recs)
	// Idempotent.
	SetLogAppendTime(b, 99_999)
	if h2, err := Validate(b); err != nil || h2 != h {
		t.Fatalf("second SetLogAppendTime: %+v %v", h2, err)
	}
}

func TestSettersPanicOnShort(t *testing.T) {
	short := make([]byte, HeaderSize-1)
	torn := validBatch(t)
	torn = torn[:len(torn)-1]
	for name, fn := range map[string]func(){
		"SetBaseOffset":           func() { SetBaseOffset(short, 1) },
		"SetPartitionLeaderEpoch": func() { SetPartitionLeaderEpoch(short, 1) },
		"SetLogAppendTime":        func() { SetLogAppendTime(short, 1) },
		"SetLogAppendTime torn":   func() { SetLogAppendTime(torn, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			fn()
		}()
	}
}

func TestValidateNoAlloc(t *testing.T) {
	b := validBatch(t)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Validate(b); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := Next(b); err != nil {
			t.Fatal(err)
		}
		if !CheckCRC(b) {
			t.Fatal("crc")
		}
		SetBaseOffset(b, 1)
		SetPartitionLeaderEpoch(b, 2)
		SetLogAppendTime(b, 3)
		if _, err := ParseHeader(b[:HeaderSize-1]); err == nil {
			t.Fatal("short header parsed")
		}
		b[16] = 3
		_, err := ParseHeader(b)
		b[16] = 2
		if err == nil {
			t.Fatal("bad magic parsed")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run, want 0", allocs)
	}
}
