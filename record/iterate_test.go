package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestIterateRoundTripEveryCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for c := CodecNone; c <= CodecZstd; c++ {
		for _, n := range []int{1, 2, 50, 700} {
			recs := genRecords(rng, n, 1_000_000)
			batch := buildBatch(t, c, 1_000_000, recs)
			h, got, err := collect(batch)
			if err != nil {
				t.Fatalf("%v/%d: %v", c, n, err)
			}
			if h.Codec() != c || int(h.NumRecords) != n {
				t.Fatalf("%v/%d: header %+v", c, n, h)
			}
			equalRecs(t, got, recs)
		}
	}
}

func TestIterateAliasing(t *testing.T) {
	recs := []testRec{{Timestamp: 5, Key: []byte("key"), Value: []byte("value")}, {Timestamp: 6, Key: []byte("k2"), Value: []byte("v2")}}
	for _, c := range []Codec{CodecNone, CodecZstd} {
		batch := buildBatch(t, c, 5, recs)
		var keys [][]byte
		err := Iterate(batch, func(h *Header, r *Record) error {
			keys = append(keys, r.Key)
			h.NumRecords = 0 // scribbling on h must not change the iteration
			return nil
		})
		if err != nil || len(keys) != 2 {
			t.Fatalf("%v: %v, %d keys", c, err, len(keys))
		}
		// Keys stay valid after Iterate and cannot be appended into their neighbours.
		if string(keys[0]) != "key" || string(keys[1]) != "k2" || cap(keys[0]) != len(keys[0]) {
			t.Fatalf("%v: keys %q %q cap %d", c, keys[0], keys[1], cap(keys[0]))
		}
		if c == CodecNone && &keys[0][0] != &batch[bytes.Index(batch, []byte("key"))] {
			t.Fatal("uncompressed key does not alias the batch")
		}
	}
}

func TestIterateStopsOnCallbackError(t *testing.T) {
	batch := buildBatch(t, CodecNone, 0, genRecords(rand.New(rand.NewPCG(4, 4)), 10, 0))
	stop := errors.New("stop")
	calls := 0
	err := Iterate(batch, func(*Header, *Record) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 3 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
}

func TestIterateEdgeValues(t *testing.T) {
	recs := bytes.Join([][]byte{
		rawRecord(math.MaxInt64, 0, nil, nil, nil),
		rawRecord(math.MinInt64, 1, []byte{}, []byte{}, []RecordHeader{{Key: "", Value: nil}, {Key: "x", Value: []byte{}}}),
		// Overlong but terminated varints (0 as 0x80 0x00) are accepted, like Java.
		framed([]byte{0}, []byte{0x80, 0x00}, []byte{0x84, 0x00}, varint(-1), varint(-1), varint(0)),
		rawRecord(0, math.MaxInt32, nil, nil, nil),
	}, nil)
	batch := rawBatch(4, 3, recs)
	var got []Record
	err := Iterate(batch, func(_ *Header, r *Record) error {
		c := *r
		c.Headers = append([]RecordHeader(nil), r.Headers...)
		got = append(got, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].TimestampDelta != math.MaxInt64 || got[0].Key != nil || got[0].Value != nil {
		t.Fatalf("record 0: %+v", got[0])
	}
	r1 := got[1]
	if r1.TimestampDelta != math.MinInt64 || r1.Key == nil || len(r1.Key) != 0 || r1.Value == nil || len(r1.Headers) != 2 ||
		r1.Headers[0].Key != "" || r1.Headers[0].Value != nil || r1.Headers[1].Key != "x" || r1.Headers[1].Value == nil {
		t.Fatalf("record 1: %+v", r1)
	}
	if got[2].OffsetDelta != 2 || got[2].TimestampDelta != 0 {
		t.Fatalf("record 2: %+v", got[2])
	}
	if got[3].OffsetDelta != math.MaxInt32 {
		t.Fatalf("record 3: %+v", got[3])
	}
}

// TestIterateMalformed is one row per decoding rule.
func TestIterateMalformed(t *testing.T) {
	ok := rawRecord(0, 0, []byte("k"), []byte("v"), nil)
	hdrs := func(count int64, rest ...[]byte) []byte {
		return framed(append([][]byte{{0}, varint(0), varint(0), varint(-1), varint(-1), varint(count)}, rest...)...)
	}
	for _, tc := range []struct {
		name  string
		batch []byte
		want  error
	}{
		{"short", rawBatch(1, 0, ok)[:HeaderSize+2], ErrShort},
		{"magic", func() []byte { b := rawBatch(1, 0, ok); b[16] = 1; return b }(), ErrMagic},
		{"crc", func() []byte { b := rawBatch(1, 0, ok); b[len(b)-1]++; return b }(), ErrCorrupt},
		{"trailing bytes after batch", append(rawBatch(1, 0, ok), 0), ErrInvalid},
		{"negative record count", rawBatch(-1, 0, nil), ErrInvalid},
		{"fewer records than count", rawBatch(2, 1, ok), ErrInvalid},
		{"more records than count", rawBatch(1, 0, append(append([]byte{}, ok...), ok...)), ErrInvalid},
		{"count over bytes", rawBatch(1000, 999, ok), ErrInvalid},
		{"junk after records", rawBatch(1, 0, append(append([]byte{}, ok...), 0, 0, 0, 0, 0, 0, 0)), ErrInvalid},
		{"negative record length", rawBatch(1, 0, append(varint(-1), make([]byte, 8)...)), ErrInvalid},
		{"record length past end", rawBatch(1, 0, append(varint(100), make([]byte, 8)...)), ErrInvalid},
		{"record length short of fields", rawBatch(1, 0, append(varint(3), ok[1:]...)), ErrInvalid},
		{"record length past fields", rawBatch(1, 0, framed(ok[1:], []byte{0})), ErrInvalid},
		{"length varint unterminated", rawBatch(1, 0, bytes.Repeat([]byte{0x80}, 8)), ErrInvalid},
		{"varint 6 bytes", rawBatch(1, 0, framed([]byte{0}, varint(0), []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, varint(-1), varint(-1), varint(0))), ErrInvalid},
		{"varint over 32 bits", rawBatch(1, 0, framed([]byte{0}, varint(0), []byte{0xff, 0xff, 0xff, 0xff, 0x1f}, varint(-1), varint(-1), varint(0))), ErrInvalid},
		{"varlong 11 bytes", rawBatch(1, 0, framed([]byte{0}, bytes.Repeat([]byte{0x80}, 10), []byte{0}, varint(0), varint(-1), varint(-1), varint(0))), ErrInvalid},
		{"varlong over 64 bits", rawBatch(1, 0, framed([]byte{0}, bytes.Repeat([]byte{0xff}, 9), []byte{0x02}, varint(0), varint(-1), varint(-1), varint(0))), ErrInvalid},
		{"key length -2", rawBatch(1, 0, framed([]byte{0}, varint(0), varint(0), varint(-2), varint(-1), varint(0))), ErrInvalid},
		{"key past record", rawBatch(1, 0, framed([]byte{0}, varint(0), varint(0), varint(50), varint(-1), varint(0))), ErrInvalid},
		{"value length -2", rawBatch(1, 0, framed([]byte{0}, varint(0), varint(0), varint(-1), varint(-2), varint(0))), ErrInvalid},
		{"value past record", rawBatch(1, 0, framed([]byte{0}, varint(0), varint(0), varint(-1), varint(9), []byte("abc"), varint(0))), ErrInvalid},
		{"missing header count", rawBatch(1, 0, framed([]byte{0}, varint(0), varint(0), varint(-1), varint(-1))), ErrInvalid},
		{"negative header count", rawBatch(1, 0, hdrs(-1)), ErrInvalid},
		{"header count over bytes", rawBatch(1, 0, hdrs(1<<30, make([]byte, 8))), ErrInvalid},
		{"fewer headers than count", rawBatch(1, 0, hdrs(2, varint(1), []byte("a"), varint(-1))), ErrInvalid},
		{"null header key", rawBatch(1, 0, hdrs(1, varint(-1), varint(1), []byte("v"))), ErrInvalid},
		{"header key past record", rawBatch(1, 0, hdrs(1, varint(30), varint(-1))), ErrInvalid},
		{"header value -2", rawBatch(1, 0, hdrs(1, varint(1), []byte("a"), varint(-2))), ErrInvalid},
		{"header value past record", rawBatch(1, 0, hdrs(1, varint(1), []byte("a"), varint(20))), ErrInvalid},
		{"unknown codec", func() []byte { b := rawBatch(1, 0, ok); b[OffsetAttrs+1] = 6; return restamp(b) }(), ErrInvalid},
		{"garbage gzip", func() []byte { b := rawBatch(1, 0, ok); b[OffsetAttrs+1] = 1; return restamp(b) }(), ErrInvalid},
		{"garbage snappy", func() []byte { b := rawBatch(1, 0, ok); b[OffsetAttrs+1] = 2; return restamp(b) }(), ErrInvalid},
		{"garbage lz4", func() []byte { b := rawBatch(1, 0, ok); b[OffsetAttrs+1] = 3; return restamp(b) }(), ErrInvalid},
		{"garbage zstd", func() []byte { b := rawBatch(1, 0, ok); b[OffsetAttrs+1] = 4; return restamp(b) }(), ErrInvalid},
		{"compressed, count mismatch", func() []byte {
			b := buildBatch(t, CodecGzip, 0, []testRec{{Value: []byte("x")}, {Value: []byte("y")}})
			binary.BigEndian.PutUint32(b[57:], 3)
			return restamp(b)
		}(), ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := Iterate(tc.batch, func(*Header, *Record) error { calls++; return nil })
			if !errors.Is(err, tc.want) {
				t.Fatalf("Iterate = %v after %d records, want %v", err, calls, tc.want)
			}
		})
	}
	// The valid base record really is valid, so the rows above fail for
	// the reason they name.
	if err := Iterate(rawBatch(1, 0, ok), func(*Header, *Record) error { return nil }); err != nil {
		t.Fatalf("base record: %v", err)
	}
	if err := Iterate(rawBatch(1, 0, hdrs(1, varint(1), []byte("a"), varint(-1))), func(*Header, *Record) error { return nil }); err != nil {
		t.Fatalf("base header record: %v", err)
	}
}

func TestIterateEmptyBatch(t *testing.T) {
	// A batch emptied by compaction: zero records, no bytes. Not valid from a
	// producer, but readable.
	b := rawBatch(0, 0, nil)
	calls := 0
	if err := Iterate(b, func(*Header, *Record) error { calls++; return nil }); err != nil || calls != 0 {
		t.Fatalf("empty batch: %v, %d calls", err, calls)
	}
	if _, err := Validate(b); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate(empty) = %v", err)
	}
}

// TestVarintMatchesStdlib checks the record varint readers against
// encoding/binary on random and edge inputs: the plain version.
func TestVarintMatchesStdlib(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	inputs := [][]byte{nil, {0x80}, {0xff, 0xff, 0xff, 0xff, 0x0f}, {0xff, 0xff, 0xff, 0xff, 0x10},
		bytes.Repeat([]byte{0xff}, 9), append(bytes.Repeat([]byte{0xff}, 9), 1), append(bytes.Repeat([]byte{0xff}, 9), 2)}
	for _, x := range []int64{0, -1, 1, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, 1 << 35} {
		inputs = append(inputs, varint(x))
	}
	for range 20000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.Uint32())
			if rng.IntN(3) > 0 {
				b[i] |= 0x80
			}
		}
		inputs = append(inputs, b)
	}
	for _, in := range inputs {
		checkVarints(t, in)
	}
}

func checkVarints(t testing.TB, in []byte) {
	t.Helper()
	ux, n := binary.Uvarint(in)
	r := reader{b: in}
	got := r.varlong()
	wantOK := n > 0
	if r.bad == wantOK || (wantOK && (got != int64(ux>>1)^-int64(ux&1) || len(r.b) != len(in)-n)) {
		t.Fatalf("varlong(%x) = %d bad %v, stdlib %d n %d", in, got, r.bad, ux, n)
	}
	r = reader{b: in}
	got32 := r.varint()
	wantOK = n > 0 && n <= 5 && ux <= math.MaxUint32
	if r.bad == wantOK || (wantOK && (int64(got32) != int64(ux>>1)^-int64(ux&1) || len(r.b) != len(in)-n)) {
		t.Fatalf("varint(%x) = %d bad %v, stdlib %d n %d", in, got32, r.bad, ux, n)
	}
}

func TestIterateHeaderKeysReused(t *testing.T) {
	var b Builder
	b.Reset(CodecNone, 0)
	hs := []RecordHeader{{Key: "trace-id", Value: []byte("1")}, {Key: "content-type", Value: []byte("json")}}
	for range 100 {
		b.Add(0, []byte("k"), []byte("v"), hs)
	}
	batch, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	// One allocation for the Record, a few for the first record's headers;
	// later records reuse the keys: nothing per record.
	allocs := testing.AllocsPerRun(20, func() {
		if err := Iterate(batch, func(_ *Header, r *Record) error {
			if len(r.Headers) != 2 || r.Headers[1].Key != "content-type" {
				t.Fatalf("headers %+v", r.Headers)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 5 {
		t.Fatalf("%v allocations to iterate 100 records", allocs)
	}
}
