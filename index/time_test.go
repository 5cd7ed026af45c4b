package index_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stratalog/strata/index"
)

type timeEntry struct{ ts, off int64 }

// linearTime is the plain reference for TimeIndex.Lookup.
func linearTime(es []timeEntry, base, target int64) (int64, int64) {
	ts, off := int64(-1), base
	for _, e := range es {
		if e.ts <= target {
			ts, off = e.ts, e.off
		}
	}
	return ts, off
}

func openTime(t testing.TB, p string, base int64, maxBytes int) *index.TimeIndex {
	t.Helper()
	x, err := index.OpenTime(p, base, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestTimeLookupMatchesLinear: Lookup equals a linear scan over a model that
// keeps only strictly increasing timestamps, through truncations and reopens.
func TestTimeLookupMatchesLinear(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	for iter := range 40 {
		base := int64(rng.IntN(1 << 40))
		maxEntries := 1 + rng.IntN(200)
		p := tempPath(t, "x.timeindex")
		x := openTime(t, p, base, maxEntries*12+rng.IntN(12))
		var model []timeEntry
		ts, off := int64(rng.IntN(1<<41))-(1<<40), base // negative timestamps too
		for step := range 400 {
			switch r := rng.IntN(100); {
			case r < 75:
				ts += int64(rng.IntN(200)) - 50 // sometimes goes backwards: ignored
				off += int64(rng.IntN(3))
				err := x.Append(ts, off)
				last := len(model) - 1
				switch {
				case last >= 0 && ts <= model[last].ts:
					if err != nil {
						t.Fatalf("iter %d step %d: non-increasing timestamp returned %v", iter, step, err)
					}
				case len(model) == maxEntries:
					if !errors.Is(err, index.ErrFull) {
						t.Fatalf("iter %d step %d: append to a full index: %v", iter, step, err)
					}
				case err != nil:
					t.Fatalf("iter %d step %d: append: %v", iter, step, err)
				default:
					model = append(model, timeEntry{ts, off})
				}
			case r < 88:
				cut := base + int64(rng.IntN(int(off-base)+2))
				x.TruncateTo(cut)
				for len(model) > 0 && model[len(model)-1].off >= cut {
					model = model[:len(model)-1]
				}
				if len(model) > 0 {
					off = max(off, model[len(model)-1].off)
				}
			case r < 95:
				if err := x.Close(); err != nil {
					t.Fatal(err)
				}
				if got := fileSize(t, p); got != int64(len(model))*12 {
					t.Fatalf("iter %d: closed file %d bytes, want %d", iter, got, len(model)*12)
				}
				x = openTime(t, p, base, maxEntries*12)
			}
			if x.Entries() != len(model) {
				t.Fatalf("iter %d step %d: %d entries, model %d", iter, step, x.Entries(), len(model))
			}
			lts, loff, ok := x.Last()
			if ok != (len(model) > 0) || (ok && (lts != model[len(model)-1].ts || loff != model[len(model)-1].off)) {
				t.Fatalf("iter %d step %d: Last (%d, %d, %v)", iter, step, lts, loff, ok)
			}
			for range 5 {
				target := ts - 300 + int64(rng.IntN(400))
				gotTs, gotOff := x.Lookup(target)
				wantTs, wantOff := linearTime(model, base, target)
				if gotTs != wantTs || gotOff != wantOff {
					t.Fatalf("iter %d step %d: Lookup(%d) = (%d, %d), linear (%d, %d)",
						iter, step, target, gotTs, gotOff, wantTs, wantOff)
				}
			}
		}
		if err := x.Check(); err != nil {
			t.Fatalf("iter %d: Check: %v", iter, err)
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTimeIgnoresNonIncreasing(t *testing.T) {
	x := openTime(t, tempPath(t, "t.timeindex"), 500, 120)
	defer x.Close()
	if err := x.Append(1000, 500); err != nil {
		t.Fatal(err)
	}
	for _, ts := range []int64{1000, 999, math.MinInt64} {
		if err := x.Append(ts, 510); err != nil {
			t.Fatalf("Append(%d) with an older timestamp: %v", ts, err)
		}
	}
	if x.Entries() != 1 {
		t.Fatalf("%d entries, want 1", x.Entries())
	}
	if err := x.Append(2000, 499); !errors.Is(err, index.ErrOrder) {
		t.Fatalf("offset below the base: %v", err)
	}
	if err := x.Append(2000, 520); err != nil {
		t.Fatal(err)
	}
	if err := x.Append(3000, 519); !errors.Is(err, index.ErrOrder) {
		t.Fatalf("offset going backwards: %v", err)
	}
	if err := x.Append(3000, 520); err != nil { // same offset, later time: Kafka allows it
		t.Fatal(err)
	}
	if ts, off := x.Lookup(2500); ts != 2000 || off != 520 {
		t.Fatalf("Lookup(2500) = (%d, %d)", ts, off)
	}
	if ts, off := x.Lookup(999); ts != -1 || off != 500 {
		t.Fatalf("Lookup before the first entry = (%d, %d)", ts, off)
	}
	if err := x.Check(); err != nil {
		t.Fatal(err)
	}
	x.TruncateTo(520)
	if x.Entries() != 1 {
		t.Fatalf("TruncateTo(520) left %d entries", x.Entries())
	}
}

func TestTimeFull(t *testing.T) {
	x := openTime(t, tempPath(t, "f.timeindex"), 0, 2*12+11)
	defer x.Close()
	for i := range 2 {
		if err := x.Append(int64(i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if !x.Full() {
		t.Fatal("not full after 2 entries")
	}
	if err := x.Append(1, 5); err != nil {
		t.Fatalf("ignored entry on a full index: %v", err)
	}
	if err := x.Append(2, 2); err != index.ErrFull {
		t.Fatalf("append to a full index: %v", err)
	}
}
