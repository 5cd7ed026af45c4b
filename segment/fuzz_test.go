package segment_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stratalog/strata/segment"
	"github.com/stratalog/strata/segment/segmenttest"
)

// fuzzPrefix is three valid batches (offsets 0..8) every fuzz input follows.
func fuzzPrefix() []byte {
	var b []byte
	b = segmenttest.MakeBatch(b, 0, 3, 10, 1, []byte("first"))
	b = segmenttest.MakeBatch(b, 3, 3, 11, 1, []byte("second batch"))
	return segmenttest.MakeBatch(b, 6, 3, 12, 1, nil)
}

// FuzzRecover: arbitrary bytes after valid batches never panic, never drop a
// valid batch, never keep a batch the naive walker rejects, and Scan over the
// recovered file reports the same batches.
func FuzzRecover(f *testing.F) {
	good := segmenttest.MakeBatch(nil, 9, 1, 13, 1, []byte("next"))
	stale := segmenttest.MakeBatch(nil, 5, 1, 13, 1, []byte("stale"))
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 1
	f.Add([]byte{})
	f.Add(make([]byte, 100))
	f.Add(good)
	f.Add(good[:40])
	f.Add(append(append([]byte(nil), good...), good[:70]...))
	f.Add(stale)
	f.Add(badCRC)
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x09\x7f\xff\xff\xff\x00\x00\x00\x00\x02"))
	prefix := fuzzPrefix()
	f.Fuzz(func(t *testing.T, tail []byte) {
		data := append(append([]byte(nil), prefix...), tail...)
		wantEnd, want := naiveWalk(data, 0)

		// Scan over the raw bytes: either whole batches or ErrCorrupt.
		raw, _ := memSegment(t, data)
		n := 0
		if err := raw.Scan(0, int64(len(data)), func(segment.BatchInfo) bool { n++; return n < 1000 }); err != nil && !errors.Is(err, segment.ErrCorrupt) {
			t.Fatalf("Scan over raw bytes: %v", err)
		}

		s, mf := memSegment(t, data)
		end, got := recoverAll(t, s, 0)
		if end < int64(len(prefix)) {
			t.Fatalf("valid prefix lost: end %d < %d", end, len(prefix))
		}
		if end != wantEnd || !equalBatches(toNaive(got), want) {
			t.Fatalf("Recover end %d (%d batches), naive %d (%d)", end, len(got), wantEnd, len(want))
		}
		if s.Size() != end || !bytes.Equal(mf.Bytes(), data[:end]) {
			t.Fatalf("file not truncated to the valid end %d", end)
		}
		var scanned []segment.BatchInfo
		if err := s.Scan(0, end, func(bi segment.BatchInfo) bool { scanned = append(scanned, bi); return true }); err != nil {
			t.Fatalf("Scan over the recovered file: %v", err)
		}
		if !equalBatches(toNaive(scanned), want) {
			t.Fatalf("Scan saw %d batches, Recover kept %d", len(scanned), len(want))
		}
	})
}
