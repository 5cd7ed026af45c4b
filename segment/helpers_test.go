package segment_test

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratalog/strata/segment"
	"github.com/stratalog/strata/segment/segmenttest"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// naiveBatch is one batch found by naiveWalk.
type naiveBatch struct {
	pos, size, base, last, maxTs int64
	epoch                        int32
}

// naiveWalk is the plain reference for Recover: it decodes the v2 header by
// hand (no record package) from an in-memory copy of the file and stops at
// the first batch that is short, has a bad magic or length, runs past the
// end, has a negative lastOffsetDelta or baseOffset, does not increase the
// offset, or fails its CRC.
func naiveWalk(b []byte, from int64) (end int64, batches []naiveBatch) {
	be := binary.BigEndian
	pos, prev := from, int64(-1)
	for {
		rest := b[pos:]
		if len(rest) < 61 {
			break
		}
		base := int64(be.Uint64(rest))
		blen := int64(int32(be.Uint32(rest[8:])))
		size := 12 + blen
		delta := int64(int32(be.Uint32(rest[23:])))
		if rest[16] != 2 || blen < 49 || size > int64(len(rest)) || size > math.MaxInt32 {
			break
		}
		if delta < 0 || base < 0 || base > math.MaxInt64-delta || base <= prev {
			break
		}
		if crc32.Checksum(rest[21:size], castagnoli) != be.Uint32(rest[17:]) {
			break
		}
		batches = append(batches, naiveBatch{
			pos: pos, size: size, base: base, last: base + delta,
			maxTs: int64(be.Uint64(rest[35:])), epoch: int32(be.Uint32(rest[12:])),
		})
		prev = base + delta
		pos += size
	}
	return pos, batches
}

// genLog builds n valid batches starting at offset base with random record
// counts and payload sizes up to maxPayload; it returns the bytes and the
// batch boundaries (len n+1).
func genLog(rng *rand.Rand, base int64, n, maxPayload int) ([]byte, []int64) {
	var b []byte
	bounds := []int64{0}
	for range n {
		recs := int32(1 + rng.IntN(5))
		payload := make([]byte, rng.IntN(maxPayload+1))
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		b = segmenttest.MakeBatch(b, base, recs, 1000+base, 3, payload)
		base += int64(recs) + int64(rng.IntN(3)) // gaps are legal (compaction)
		bounds = append(bounds, int64(len(b)))
	}
	return b, bounds
}

func toNaive(infos []segment.BatchInfo) []naiveBatch {
	out := make([]naiveBatch, 0, len(infos))
	for _, i := range infos {
		out = append(out, naiveBatch{
			pos: i.Pos, size: int64(i.Size), base: i.BaseOffset, last: i.LastOffset,
			maxTs: i.MaxTimestamp, epoch: i.LeaderEpoch,
		})
	}
	return out
}

func equalBatches(a, b []naiveBatch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func writeFile(t testing.TB, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// memSegment makes a segment over a MemFile holding b (all synced).
func memSegment(t testing.TB, b []byte) (*segment.Segment, *segmenttest.MemFile) {
	t.Helper()
	mf := segmenttest.NewMemFile(b)
	s, err := segment.New("mem.log", mf)
	if err != nil {
		t.Fatal(err)
	}
	return s, mf
}

func recoverAll(t testing.TB, s *segment.Segment, from int64) (int64, []segment.BatchInfo) {
	t.Helper()
	var got []segment.BatchInfo
	end, err := s.Recover(from, func(bi segment.BatchInfo) { got = append(got, bi) })
	if err != nil {
		t.Fatalf("Recover(%d): %v", from, err)
	}
	return end, got
}
