package segment_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stratalog/strata/segment"
	"github.com/stratalog/strata/segment/segmenttest"
)

// damage applies one random kind of crash damage to a valid log and returns
// the damaged bytes and a description.
func damage(rng *rand.Rand, log []byte, bounds []int64, nextOffset int64) ([]byte, string) {
	out := append([]byte(nil), log...)
	switch rng.IntN(9) {
	case 0: // cut at a random byte
		return out[:rng.IntN(len(out)+1)], "cut"
	case 1: // random garbage appended
		g := make([]byte, rng.IntN(300))
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		return append(out, g...), "garbage"
	case 2: // zeros appended (preallocated blocks, unwritten pages)
		return append(out, make([]byte, rng.IntN(300))...), "zeros"
	case 3: // a stale batch whose offset does not increase
		i := rng.IntN(len(bounds) - 1)
		return append(out, log[bounds[i]:bounds[i+1]]...), "stale"
	case 4: // a new batch with one flipped byte in the CRC-covered part
		nb := segmenttest.MakeBatch(nil, nextOffset, 2, 5, 3, []byte("payload-bytes"))
		nb[21+rng.IntN(len(nb)-21)] ^= byte(1 + rng.IntN(255))
		return append(out, nb...), "bad-crc"
	case 5: // a new batch torn mid-way, then a whole one
		nb := segmenttest.MakeBatch(nil, nextOffset, 1, 5, 3, []byte("torn-batch"))
		out = append(out, nb[:rng.IntN(len(nb))]...)
		return segmenttest.MakeBatch(out, nextOffset+1, 1, 5, 3, []byte("after")), "torn"
	case 6: // a batch with a valid CRC but lastOffsetDelta < 0
		nb := segmenttest.MakeBatch(nil, nextOffset, 0, 5, 3, []byte("neg"))
		return append(out, nb...), "negative-delta"
	case 7: // corruption in the middle of the log
		if len(out) > 0 {
			out[rng.IntN(len(out))] ^= byte(1 + rng.IntN(255))
		}
		return out, "flip"
	default: // intact, plus a valid new batch (must be kept)
		return segmenttest.MakeBatch(out, nextOffset, 3, 5, 3, []byte("good")), "good"
	}
}

// TestRecoverMatchesNaiveWalk checks Recover against naiveWalk on real files
// with random damage, small read chunks (so batches straddle chunk borders and
// some are CRC-checked in a stream) and random starting boundaries.
func TestRecoverMatchesNaiveWalk(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for iter := range 300 {
		restore := segment.SetRecoverChunkBytes(int64(61 + rng.IntN(2048)))
		log, bounds := genLog(rng, int64(rng.IntN(1000)), 1+rng.IntN(20), 400)
		bad, kind := damage(rng, log, bounds, 1<<40)
		from := bounds[rng.IntN(len(bounds))]
		if from > int64(len(bad)) {
			from = 0
		}
		wantEnd, want := naiveWalk(bad, from)

		p := writeFile(t, bad)
		s, err := segment.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if s.Size() != int64(len(bad)) {
			t.Fatalf("iter %d: Open size %d, file %d", iter, s.Size(), len(bad))
		}
		end, got := recoverAll(t, s, from)
		restore()
		if end != wantEnd || !equalBatches(toNaive(got), want) {
			t.Fatalf("iter %d (%s, from %d): Recover end %d with %d batches; naive end %d with %d",
				iter, kind, from, end, len(got), wantEnd, len(want))
		}
		if kind == "good" && end != int64(len(bad)) {
			t.Fatalf("iter %d: intact log recovered to %d of %d", iter, end, len(bad))
		}
		if s.Size() != end {
			t.Fatalf("iter %d: Size %d after Recover, want %d", iter, s.Size(), end)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		disk, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(disk, bad[:end]) {
			t.Fatalf("iter %d: file holds %d bytes, want the %d-byte valid prefix", iter, len(disk), end)
		}
	}
}

// TestRecoverLargeBatches uses the production 1 MiB chunk with batches larger
// than a chunk (streamed CRC) and cuts inside and between them.
func TestRecoverLargeBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	big := make([]byte, 1<<20+(1<<19))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	var log []byte
	log = segmenttest.MakeBatch(log, 0, 10, 1, 0, big[:1000])
	log = segmenttest.MakeBatch(log, 10, 10, 2, 0, big)
	mid := int64(len(log))
	log = segmenttest.MakeBatch(log, 20, 10, 3, 0, big[:700<<10])
	log = segmenttest.MakeBatch(log, 30, 10, 4, 0, big)
	corrupt := append([]byte(nil), log...)
	corrupt[mid-500] ^= 0x40 // inside the second (streamed) batch

	cases := []struct {
		name string
		b    []byte
	}{
		{"whole", log},
		{"cut-in-big", log[:mid-1]},
		{"cut-at-boundary", log[:mid]},
		{"cut-last", log[:len(log)-3]},
		{"corrupt-big", corrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantEnd, want := naiveWalk(c.b, 0)
			s, err := segment.Open(writeFile(t, c.b))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			end, got := recoverAll(t, s, 0)
			if end != wantEnd || !equalBatches(toNaive(got), want) {
				t.Fatalf("end %d (%d batches), want %d (%d)", end, len(got), wantEnd, len(want))
			}
		})
	}
}

func TestRecoverRange(t *testing.T) {
	log, _ := genLog(rand.New(rand.NewPCG(1, 2)), 0, 3, 50)
	s, _ := memSegment(t, log)
	if _, err := s.Recover(int64(len(log))+1, nil); err == nil {
		t.Fatal("Recover past the end succeeded")
	}
	if _, err := s.Recover(-1, nil); err == nil {
		t.Fatal("Recover from -1 succeeded")
	}
	end, err := s.Recover(int64(len(log)), nil)
	if err != nil || end != int64(len(log)) {
		t.Fatalf("Recover at the end: %d, %v", end, err)
	}
}

// TestRecoverReadError: an I/O error stops recovery without truncating.
func TestRecoverReadError(t *testing.T) {
	log, _ := genLog(rand.New(rand.NewPCG(1, 3)), 0, 5, 50)
	mf := segmenttest.NewMemFile(log)
	ff := segmenttest.NewFaultyFile(mf, segmenttest.FailNth(segmenttest.OpRead, 1, segmenttest.ErrInjected))
	s, err := segment.New("x.log", ff)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recover(0, nil); err != segmenttest.ErrInjected {
		t.Fatalf("Recover error %v, want injected", err)
	}
	if got := mf.Bytes(); !bytes.Equal(got, log) {
		t.Fatalf("file changed to %d bytes after a failed recovery", len(got))
	}
}

// TestRecoverOffsetOrder: a batch whose baseOffset is not above the previous
// batch's last offset ends the valid log even though its CRC is fine.
func TestRecoverOffsetOrder(t *testing.T) {
	var b []byte
	b = segmenttest.MakeBatch(b, 100, 5, 1, 0, nil) // 100..104
	end1 := int64(len(b))
	b = segmenttest.MakeBatch(b, 104, 1, 1, 0, nil) // overlaps
	s, _ := memSegment(t, b)
	end, got := recoverAll(t, s, 0)
	if end != end1 || len(got) != 1 || got[0].LastOffset != 104 {
		t.Fatalf("end %d batches %+v, want end %d with one batch", end, got, end1)
	}
	// baseOffset is outside the CRC: a negative one must still be refused.
	c := segmenttest.MakeBatch(nil, 0, 1, 1, 0, nil)
	binary.BigEndian.PutUint64(c, ^uint64(0))
	s2, _ := memSegment(t, c)
	if end, _ := recoverAll(t, s2, 0); end != 0 {
		t.Fatalf("negative baseOffset kept: end %d", end)
	}
}

// TestVerifyAndNextValidBatch: Verify stops where Recover would and
// changes nothing; NextValidBatch finds the batch after a batch damaged in
// place (body or header) and nothing after a torn tail (cut, zeros,
// garbage), across read-chunk borders.
func TestVerifyAndNextValidBatch(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	for iter := range 200 {
		restore := segment.SetRecoverChunkBytes(int64(61 + rng.IntN(2048)))
		log, bounds := genLog(rng, int64(rng.IntN(1000)), 3+rng.IntN(10), 400)
		_, batches := naiveWalk(log, 0)
		i := rng.IntN(len(batches) - 1) // damaged batch; a valid one follows
		bad := append([]byte(nil), log...)
		kind := "body"
		if rng.IntN(2) == 0 {
			bad[bounds[i]+21+int64(rng.IntN(int(bounds[i+1]-bounds[i]-21)))] ^= byte(1 + rng.IntN(255))
		} else {
			kind = "length"
			bad[bounds[i]+8+int64(rng.IntN(4))] ^= byte(1 + rng.IntN(255))
		}
		s, mf := memSegment(t, bad)
		end, err := s.Verify(0, nil)
		if err != nil || end != bounds[i] {
			t.Fatalf("iter %d (%s): Verify end %d, %v; want %d", iter, kind, end, err, bounds[i])
		}
		if s.Size() != int64(len(bad)) || !bytes.Equal(mf.Bytes(), bad) {
			t.Fatalf("iter %d: Verify changed the file", iter)
		}
		// VerifyRange: a range of whole batches before the damage passes,
		// one over it stops at it, one after it passes.
		if got, err := s.VerifyRange(0, bounds[i], nil); err != nil || got != bounds[i] {
			t.Fatalf("iter %d: VerifyRange(0, %d) = %d, %v", iter, bounds[i], got, err)
		}
		lo := bounds[rng.IntN(i+1)]
		if got, err := s.VerifyRange(lo, bounds[i+1], nil); err != nil || got != bounds[i] {
			t.Fatalf("iter %d: VerifyRange(%d, %d) over the damage = %d, %v; want %d", iter, lo, bounds[i+1], got, err, bounds[i])
		}
		hi := bounds[i+2+rng.IntN(len(bounds)-i-2)]
		if got, err := s.VerifyRange(bounds[i+1], hi, nil); err != nil || got != hi {
			t.Fatalf("iter %d: VerifyRange(%d, %d) after the damage = %d, %v", iter, bounds[i+1], hi, got, err)
		}
		if s.Size() != int64(len(bad)) || !bytes.Equal(mf.Bytes(), bad) {
			t.Fatalf("iter %d: VerifyRange changed the file", iter)
		}
		b, found, err := s.NextValidBatch(end, batches[i].base)
		if err != nil || !found || b.Pos != bounds[i+1] || b.BaseOffset != batches[i+1].base {
			t.Fatalf("iter %d (%s): NextValidBatch %+v found %v err %v; want pos %d base %d",
				iter, kind, b, found, err, bounds[i+1], batches[i+1].base)
		}

		// Torn tails: nothing valid after the bad spot.
		last := len(batches) - 1
		next := batches[last].last + 1
		tails := map[string][]byte{
			"cut":     log[:bounds[last]+int64(rng.IntN(int(bounds[last+1]-bounds[last])))],
			"zeros":   append(append([]byte(nil), log...), make([]byte, 1+rng.IntN(5000))...),
			"garbage": append(append([]byte(nil), log...), bytes.Repeat([]byte{2, 0, 0, 0, 9}, 1+rng.IntN(500))...),
		}
		for name, tb := range tails {
			s, _ := memSegment(t, tb)
			end, err := s.Verify(0, nil)
			if err != nil {
				t.Fatal(err)
			}
			from := next
			if name == "cut" {
				from = batches[last].base
			}
			if _, found, err := s.NextValidBatch(end, from); err != nil || found {
				t.Fatalf("iter %d: torn tail %q (end %d of %d): found a valid batch after it (%v)", iter, name, end, len(tb), err)
			}
		}
		restore()
	}
}
