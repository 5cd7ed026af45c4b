package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// seedBatches is a small corpus: one batch per codec, a hand-made edge
// batch, and a few broken ones.
func seedBatches(f *testing.F) [][]byte {
	recs := genRecords(rand.New(rand.NewPCG(11, 11)), 4, 1000)
	var seeds [][]byte
	for _, c := range allCodecs {
		seeds = append(seeds, buildBatch(f, c, 1000, recs))
	}
	edge := rawBatch(2, 1, append(rawRecord(-1, 0, []byte{}, nil, []RecordHeader{{Key: "k"}}), rawRecord(1<<40, 1, nil, []byte("v"), nil)...))
	seeds = append(seeds, edge, edge[:HeaderSize], append(append([]byte{}, edge...), edge...), make([]byte, HeaderSize))
	return seeds
}

// FuzzValidate: any bytes; never panics; an accepted batch is whole, CRC
// clean and consistent with ParseHeader, Next and CheckCRC.
func FuzzValidate(f *testing.F) {
	for _, s := range seedBatches(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkValidate(t, data)
		// Random bytes almost never carry a matching CRC: also check the
		// input with its CRC stamped, so the rules after the CRC get fuzzed.
		if h, err := ParseHeader(data); err == nil && h.Size() == len(data) {
			stamped := restamp(append([]byte(nil), data...))
			if _, err := Validate(stamped); errors.Is(err, ErrCorrupt) {
				t.Fatal("restamped batch still fails its CRC")
			}
			checkValidate(t, stamped)
		}
	})
}

func checkValidate(t *testing.T, data []byte) {
	h, err := Validate(data)
	if err != nil {
		for _, s := range []error{ErrShort, ErrMagic, ErrCorrupt, ErrInvalid} {
			if errors.Is(err, s) {
				return
			}
		}
		t.Fatalf("error %v wraps no sentinel", err)
	}
	if !CheckCRC(data) || h.Size() != len(data) || h.NumRecords <= 0 || h.LastOffsetDelta != h.NumRecords-1 || h.Control() {
		t.Fatalf("accepted %+v for %d bytes (CheckCRC %v)", h, len(data), CheckCRC(data))
	}
	if p, err := ParseHeader(data); err != nil || p != h {
		t.Fatalf("ParseHeader disagrees: %+v %v", p, err)
	}
	batch, rest, nh, err := Next(data)
	if err != nil || len(rest) != 0 || len(batch) != len(data) || nh != h {
		t.Fatalf("Next disagrees: %d/%d bytes, %v", len(batch), len(rest), err)
	}
	// Decoding an accepted batch may still fail, but must not panic.
	_ = Iterate(data, func(*Header, *Record) error { return nil })
}

// FuzzIterate: any bytes framed as one batch with a valid CRC; never panics;
// what decodes re-encodes (with a Builder) to records that decode the same.
func FuzzIterate(f *testing.F) {
	for _, s := range seedBatches(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < HeaderSize || len(data) > 1<<20 {
			return
		}
		b := append([]byte(nil), data...)
		b[16] = 2
		binary.BigEndian.PutUint32(b[8:], uint32(len(b)-LogOverhead))
		restamp(b)
		h, recs, err := collectAny(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("framed, stamped batch failed with %v", err)
			}
			return
		}
		if len(recs) != int(h.NumRecords) {
			t.Fatalf("%d records decoded, header says %d", len(recs), h.NumRecords)
		}
		if len(recs) == 0 {
			return
		}
		var bl Builder
		bl.Reset(CodecNone, h.BaseTimestamp)
		for _, r := range recs {
			bl.Add(r.Timestamp, r.Key, r.Value, r.Headers)
		}
		again, err := bl.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		_, recs2, err := collectAny(again)
		if err != nil {
			t.Fatalf("re-encoded batch fails: %v", err)
		}
		equalRecs(t, recs2, recs)
	})
}

// collectAny is collect without the offsetDelta contiguity check.
func collectAny(batch []byte) (Header, []testRec, error) {
	var hdr Header
	var recs []testRec
	err := Iterate(batch, func(h *Header, r *Record) error {
		hdr = *h
		tr := testRec{Timestamp: h.BaseTimestamp + r.TimestampDelta, Key: cloneBytes(r.Key), Value: cloneBytes(r.Value)}
		for _, rh := range r.Headers {
			tr.Headers = append(tr.Headers, RecordHeader{Key: rh.Key, Value: cloneBytes(rh.Value)})
		}
		recs = append(recs, tr)
		return nil
	})
	if err == nil && len(recs) == 0 {
		hdr, _ = ParseHeader(batch)
	}
	return hdr, recs, err
}

// FuzzNext: any bytes; never panics; the batches Next returns tile a prefix
// of the input exactly, each at least a header long.
func FuzzNext(f *testing.F) {
	for _, s := range seedBatches(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rest := data
		var joined []byte
		for i := 0; i <= len(data)/HeaderSize; i++ {
			batch, r, h, err := Next(rest)
			if err != nil {
				if !bytes.Equal(r, rest) || batch != nil {
					t.Fatalf("on error Next must return the input as rest")
				}
				break
			}
			if len(batch) < HeaderSize || len(batch) != h.Size() || len(batch)+len(r) != len(rest) {
				t.Fatalf("batch %d bytes, Size %d, rest %d of %d", len(batch), h.Size(), len(r), len(rest))
			}
			joined = append(joined, batch...)
			rest = r
		}
		if !bytes.Equal(append(joined, rest...), data) {
			t.Fatal("batches plus rest do not rebuild the input")
		}
	})
}

// FuzzDecompress: any bytes under any codec; never panics, never exceeds
// the limit, and keeps dst's prefix.
func FuzzDecompress(f *testing.F) {
	for _, c := range allCodecs {
		comp, _ := Compress(c, nil, []byte("hello hello hello hello"))
		f.Add(uint8(c), comp)
	}
	f.Add(uint8(CodecSnappy), xerialMagic[:])
	f.Fuzz(func(t *testing.T, c uint8, data []byte) {
		prefix := []byte{1, 2, 3}
		out, err := Decompress(Codec(c%8), append([]byte{}, prefix...), data)
		if !bytes.HasPrefix(out, prefix) {
			t.Fatal("dst prefix lost")
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if len(out)-len(prefix) > MaxDecompressedBytes() {
			t.Fatalf("%d bytes out", len(out))
		}
	})
}
