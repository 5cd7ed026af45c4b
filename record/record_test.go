package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"reflect"
	"testing"
)

// testRec is a record as a test writes and reads it: absolute timestamp,
// deep-copied bytes, nil for null.
type testRec struct {
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []RecordHeader
}

func (r testRec) String() string {
	return fmt.Sprintf("{ts %d key %q value %d bytes (nil %v) headers %d}", r.Timestamp, r.Key, len(r.Value), r.Value == nil, len(r.Headers))
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// genRecords makes n records exercising null and empty keys and values,
// headers with null values, and out-of-order timestamps.
func genRecords(rng *rand.Rand, n int, base int64) []testRec {
	recs := make([]testRec, n)
	for i := range recs {
		r := &recs[i]
		r.Timestamp = base + int64(rng.IntN(2000)) - 500
		switch rng.IntN(4) {
		case 0: // null key
		case 1:
			r.Key = []byte{}
		default:
			r.Key = fmt.Appendf(nil, "key-%d", rng.IntN(100))
		}
		switch rng.IntN(5) {
		case 0: // tombstone
		case 1:
			r.Value = []byte{}
		default:
			r.Value = make([]byte, rng.IntN(300))
			for j := range r.Value {
				r.Value[j] = byte('a' + rng.IntN(4)) // compressible
			}
		}
		for j := range rng.IntN(3) {
			h := RecordHeader{Key: fmt.Sprintf("h%d", j)}
			if rng.IntN(3) > 0 {
				h.Value = fmt.Appendf(nil, "v%d", rng.IntN(10))
			}
			r.Headers = append(r.Headers, h)
		}
	}
	return recs
}

func buildBatch(t testing.TB, c Codec, base int64, recs []testRec) []byte {
	t.Helper()
	var b Builder
	b.Reset(c, base)
	for _, r := range recs {
		b.Add(r.Timestamp, r.Key, r.Value, r.Headers)
	}
	out, err := b.AppendTo(nil)
	if err != nil {
		t.Fatalf("AppendTo(%v): %v", c, err)
	}
	return out
}

// collect iterates batch and deep-copies every record.
func collect(batch []byte) (Header, []testRec, error) {
	var hdr Header
	var recs []testRec
	err := Iterate(batch, func(h *Header, r *Record) error {
		hdr = *h
		tr := testRec{Timestamp: h.BaseTimestamp + r.TimestampDelta, Key: cloneBytes(r.Key), Value: cloneBytes(r.Value)}
		for _, rh := range r.Headers {
			tr.Headers = append(tr.Headers, RecordHeader{Key: rh.Key, Value: cloneBytes(rh.Value)})
		}
		if int(r.OffsetDelta) != len(recs) {
			return fmt.Errorf("offsetDelta %d at index %d", r.OffsetDelta, len(recs))
		}
		recs = append(recs, tr)
		return nil
	})
	return hdr, recs, err
}

func equalRecs(t testing.TB, got, want []testRec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
}

// restamp recomputes b's CRC after a test edited the covered bytes.
func restamp(b []byte) []byte {
	binary.BigEndian.PutUint32(b[OffsetCRC:], crc32.Checksum(b[OffsetAttrs:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// rawBatch frames a hand-made records section as an uncompressed batch with
// a valid CRC.
func rawBatch(numRecords, lastOffsetDelta int32, records []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(records))
	binary.BigEndian.PutUint32(b[8:], uint32(HeaderSize-LogOverhead+len(records)))
	binary.BigEndian.PutUint32(b[12:], 0xffffffff)
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(lastOffsetDelta))
	binary.BigEndian.PutUint64(b[43:], 0xffffffffffffffff)
	binary.BigEndian.PutUint16(b[51:], 0xffff)
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)
	binary.BigEndian.PutUint32(b[57:], uint32(numRecords))
	return restamp(append(b, records...))
}

// rawRecord encodes a record from explicit fields, for records no Builder
// would write. body is appended verbatim after the fields.
func rawRecord(tsDelta int64, offsetDelta int32, key, value []byte, headers []RecordHeader) []byte {
	var body []byte
	body = append(body, 0)
	body = binary.AppendVarint(body, tsDelta)
	body = binary.AppendVarint(body, int64(offsetDelta))
	body = appendBytes(body, key)
	body = appendBytes(body, value)
	body = binary.AppendVarint(body, int64(len(headers)))
	for _, h := range headers {
		body = binary.AppendVarint(body, int64(len(h.Key)))
		body = append(body, h.Key...)
		body = appendBytes(body, h.Value)
	}
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// framed wraps a record body (everything after the length) with its length.
func framed(body ...[]byte) []byte {
	b := bytes.Join(body, nil)
	return append(binary.AppendVarint(nil, int64(len(b))), b...)
}

func varint(x int64) []byte { return binary.AppendVarint(nil, x) }
