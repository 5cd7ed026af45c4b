package crcsum

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestChecksumMatchesDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 64*BlockBytes+377)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	var s Sums
	for round := range 2000 {
		s.Reset(buf)
		covered := rng.IntN(len(buf) + 1)
		if round%4 == 0 {
			covered = len(buf)
		}
		// cover in uneven steps, as reads arrive
		for at := 0; at < covered; {
			at = min(covered, at+1+rng.IntN(9000))
			s.Cover(at)
		}
		a := rng.IntN(len(buf))
		b := a + rng.IntN(len(buf)-a+1)
		p := buf[a:b]
		want := crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli))
		if got := s.Checksum(p, a); got != want {
			t.Fatalf("round %d: [%d, %d) covered %d: %08x, want %08x", round, a, b, covered, got, want)
		}
	}
}

func TestChecksumUsesTheSums(t *testing.T) {
	buf := make([]byte, 16*BlockBytes)
	var s Sums
	s.Reset(buf)
	s.Cover(len(buf))
	p := buf[100 : 15*BlockBytes+7]
	want := s.Checksum(p, 100)
	// A block's sum changed behind the bytes' back: the combined
	// checksum must change with it (it reads the sums, not the bytes),
	// and a range outside the buffer must not.
	s.sums[5] ^= 1
	if s.Checksum(p, 100) == want {
		t.Fatal("Checksum did not combine the block sums")
	}
	other := append([]byte(nil), p...)
	if got := s.Checksum(other, 100); got != want {
		t.Fatalf("copy outside the buffer: %08x, want %08x", got, want)
	}
	if got := s.Checksum(buf[101:15*BlockBytes+8], 100); got != crc32.Checksum(buf[101:15*BlockBytes+8], crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatalf("a range not at the offset given: %08x", got)
	}
	var nilSums *Sums
	if got := nilSums.Checksum(p, 100); got != crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatalf("nil Sums: %08x", got)
	}
}

func TestCoverNeedsWholeBlocks(t *testing.T) {
	buf := make([]byte, 3*BlockBytes+5)
	var s Sums
	s.Reset(buf)
	s.Cover(BlockBytes - 1)
	if len(s.sums) != 0 {
		t.Fatalf("%d sums for a partial block", len(s.sums))
	}
	s.Cover(len(buf) + 100)
	if len(s.sums) != 3 {
		t.Fatalf("%d sums, want 3", len(s.sums))
	}
}

func BenchmarkChecksum(b *testing.B) {
	buf := make([]byte, 6<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	var s Sums
	s.Reset(buf)
	s.Cover(len(buf))
	p := buf[1234 : 1234+60000]
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for range b.N {
		s.Checksum(p, 1234)
	}
}

func BenchmarkCover(b *testing.B) {
	buf := make([]byte, 128<<10)
	var s Sums
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for range b.N {
		s.Reset(buf)
		s.Cover(len(buf))
	}
}

func TestOffset(t *testing.T) {
	buf := make([]byte, 100*BlockBytes)
	var s Sums
	if _, ok := s.Offset(buf[:1], 0); ok {
		t.Fatal("empty sums have an offset")
	}
	var nilSums *Sums
	if _, ok := nilSums.Offset(buf[:1], 0); ok {
		t.Fatal("nil sums have an offset")
	}
	s.Reset(buf[:90*BlockBytes])
	end := 90 * BlockBytes
	for _, c := range []struct {
		p    []byte
		from int
		off  int
		ok   bool
	}{
		{buf[:end], 0, 0, true},
		{buf[123:4000], 0, 123, true},
		{buf[123:4000], 100, 123, true},
		{buf[end-1 : end], 0, 0, false}, // beyond the search from 0
		{buf[end-1 : end], end - 5000, end - 1, true},
		{buf[end-1 : end+1], end - 10, 0, false},          // runs past the covered buffer
		{buf[95*BlockBytes : 96*BlockBytes], 0, 0, false}, // after it
		{buf[123:4000], 124, 0, false},                    // before from
		{buf[7:7], 0, 0, false},                           // empty
		{make([]byte, 10), 0, 0, false},                   // elsewhere
	} {
		if off, ok := s.Offset(c.p, c.from); ok != c.ok || off != c.off {
			t.Fatalf("Offset(%d bytes, from %d): %d, %v; want %d, %v", len(c.p), c.from, off, ok, c.off, c.ok)
		}
	}
}
