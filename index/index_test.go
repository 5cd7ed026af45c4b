package index_test

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratalog/strata/index"
)

type offEntry struct{ off, pos int64 }

// linearOffset is the plain reference for OffsetIndex.Lookup.
func linearOffset(es []offEntry, base, target int64) (int64, int64) {
	off, pos := base, int64(0)
	for _, e := range es {
		if e.off <= target {
			off, pos = e.off, e.pos
		}
	}
	return off, pos
}

func tempPath(t testing.TB, name string) string {
	return filepath.Join(t.TempDir(), name)
}

func openOffset(t testing.TB, p string, base int64, maxBytes int) *index.OffsetIndex {
	t.Helper()
	x, err := index.OpenOffset(p, base, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func fileSize(t testing.TB, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestOffsetLookupMatchesLinear: Lookup equals a linear scan over a model,
// through random appends, truncations, resets and reopens.
func TestOffsetLookupMatchesLinear(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for iter := range 40 {
		base := int64(rng.IntN(1 << 40))
		maxEntries := 1 + rng.IntN(300)
		p := tempPath(t, "x.index")
		x := openOffset(t, p, base, maxEntries*8+rng.IntN(8))
		var model []offEntry
		nextOff, nextPos := base+int64(rng.IntN(3)), int64(rng.IntN(100))
		for step := range 400 {
			switch r := rng.IntN(100); {
			case r < 70:
				err := x.Append(nextOff, nextPos)
				if len(model) == maxEntries {
					if !errors.Is(err, index.ErrFull) || !x.Full() {
						t.Fatalf("iter %d step %d: append to a full index: %v", iter, step, err)
					}
					break
				}
				if err != nil {
					t.Fatalf("iter %d step %d: append: %v", iter, step, err)
				}
				model = append(model, offEntry{nextOff, nextPos})
				nextOff += 1 + int64(rng.IntN(1000))
				nextPos += 1 + int64(rng.IntN(100000))
			case r < 85:
				cut := base + int64(rng.IntN(int(nextOff-base)+2))
				x.TruncateTo(cut)
				for len(model) > 0 && model[len(model)-1].off >= cut {
					model = model[:len(model)-1]
				}
			case r < 87:
				x.Reset()
				model = model[:0]
			case r < 92:
				if err := x.Close(); err != nil {
					t.Fatal(err)
				}
				if got := fileSize(t, p); got != int64(len(model))*8 {
					t.Fatalf("iter %d: closed file %d bytes, want %d", iter, got, len(model)*8)
				}
				x = openOffset(t, p, base, maxEntries*8)
			}
			if x.Entries() != len(model) {
				t.Fatalf("iter %d step %d: %d entries, model %d", iter, step, x.Entries(), len(model))
			}
			off, pos, ok := x.Last()
			if ok != (len(model) > 0) || (ok && (off != model[len(model)-1].off || pos != model[len(model)-1].pos)) {
				t.Fatalf("iter %d step %d: Last (%d, %d, %v)", iter, step, off, pos, ok)
			}
			for range 5 {
				target := base - 2 + int64(rng.IntN(int(nextOff-base)+4))
				gotOff, gotPos := x.Lookup(target)
				wantOff, wantPos := linearOffset(model, base, target)
				if gotOff != wantOff || gotPos != wantPos {
					t.Fatalf("iter %d step %d: Lookup(%d) = (%d, %d), linear (%d, %d)",
						iter, step, target, gotOff, gotPos, wantOff, wantPos)
				}
			}
		}
		if err := x.Check(nextPos + 1); err != nil {
			t.Fatalf("iter %d: Check: %v", iter, err)
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOffsetReopenKeepsEntries(t *testing.T) {
	p := tempPath(t, "00000000000000001000.index")
	x := openOffset(t, p, 1000, 4096)
	if got := fileSize(t, p); got != 4096 {
		t.Fatalf("active index file %d bytes, want 4096 (preallocated)", got)
	}
	for i := range 10 {
		if err := x.Append(1000+int64(i)*10, int64(i)*4096); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != index.ErrClosed {
		t.Fatalf("second Close: %v", err)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 80 || binary.BigEndian.Uint32(raw[8:]) != 10 || binary.BigEndian.Uint32(raw[12:]) != 4096 {
		t.Fatalf("closed file: %d bytes, entry 1 = % x", len(raw), raw[8:16])
	}
	x = openOffset(t, p, 1000, 4096)
	defer x.Close()
	if x.Entries() != 10 || fileSize(t, p) != 4096 {
		t.Fatalf("reopened: %d entries, %d bytes", x.Entries(), fileSize(t, p))
	}
	if err := x.Check(10 * 4096); err != nil {
		t.Fatal(err)
	}
	if off, pos := x.Lookup(1055); off != 1050 || pos != 5*4096 {
		t.Fatalf("Lookup(1055) = (%d, %d)", off, pos)
	}
	if off, pos := x.Lookup(999); off != 1000 || pos != 0 {
		t.Fatalf("Lookup below base = (%d, %d)", off, pos)
	}
	if err := x.Append(1100, 10*4096); err != nil {
		t.Fatalf("append after reopen: %v", err)
	}
}

func TestOffsetAppendOrder(t *testing.T) {
	x := openOffset(t, tempPath(t, "o.index"), 100, 1024)
	defer x.Close()
	for _, c := range []struct{ off, pos int64 }{
		{99, 0}, {100 + math.MaxInt32 + 1, 0}, {100, -1}, {100, math.MaxInt32 + 1},
	} {
		if err := x.Append(c.off, c.pos); !errors.Is(err, index.ErrOrder) {
			t.Fatalf("Append(%d, %d): %v", c.off, c.pos, err)
		}
	}
	if err := x.Append(100+math.MaxInt32, math.MaxInt32-1); err != nil {
		t.Fatalf("largest relative offset: %v", err)
	}
	x.Reset()
	if err := x.Append(110, 500); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ off, pos int64 }{{110, 600}, {109, 600}, {111, 500}, {111, 400}} {
		if err := x.Append(c.off, c.pos); !errors.Is(err, index.ErrOrder) {
			t.Fatalf("Append(%d, %d) after (110, 500): %v", c.off, c.pos, err)
		}
	}
}

func TestOffsetTruncateTo(t *testing.T) {
	x := openOffset(t, tempPath(t, "t.index"), 0, 1024)
	defer x.Close()
	for i := range 10 {
		if err := x.Append(int64(i)*10, int64(i)*100); err != nil {
			t.Fatal(err)
		}
	}
	x.TruncateTo(1000) // past the end: nothing dropped
	if x.Entries() != 10 {
		t.Fatalf("%d entries", x.Entries())
	}
	x.TruncateTo(50) // drops offsets >= 50
	if off, _, _ := x.Last(); x.Entries() != 5 || off != 40 {
		t.Fatalf("after TruncateTo(50): %d entries, last %d", x.Entries(), off)
	}
	x.TruncateTo(41)
	if x.Entries() != 5 {
		t.Fatalf("after TruncateTo(41): %d entries", x.Entries())
	}
	x.TruncateTo(40)
	if x.Entries() != 4 {
		t.Fatalf("after TruncateTo(40): %d entries", x.Entries())
	}
	if err := x.Append(25, 360); !errors.Is(err, index.ErrOrder) { // ordered against the last kept entry
		t.Fatalf("Append(25) after (30, 300): %v", err)
	}
	if err := x.Append(35, 350); err != nil { // room again after the last kept (30, 300)
		t.Fatal(err)
	}
	if err := x.Append(35, 400); !errors.Is(err, index.ErrOrder) { // and against the one just appended
		t.Fatalf("Append(35) after (35, 350): %v", err)
	}
	if off, pos := x.Lookup(39); off != 35 || pos != 350 {
		t.Fatalf("Lookup(39) = (%d, %d)", off, pos)
	}
	x.TruncateTo(-5)
	if x.Entries() != 0 {
		t.Fatalf("TruncateTo below base left %d entries", x.Entries())
	}
}

func TestOffsetFull(t *testing.T) {
	p := tempPath(t, "f.index")
	x := openOffset(t, p, 0, 5*8+7) // rounds down to 5 entries
	if fileSize(t, p) != 40 {
		t.Fatalf("file %d bytes, want 40", fileSize(t, p))
	}
	for i := range 5 {
		if x.Full() {
			t.Fatalf("full after %d entries", i)
		}
		if err := x.Append(int64(i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if !x.Full() {
		t.Fatal("not full after 5 entries")
	}
	if err := x.Append(5, 5); err != index.ErrFull {
		t.Fatalf("append to a full index: %v", err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	// A smaller maxBytes keeps every entry already in the file, and is full.
	x = openOffset(t, p, 0, 16)
	defer x.Close()
	if x.Entries() != 5 || !x.Full() {
		t.Fatalf("reopened smaller: %d entries, full %v", x.Entries(), x.Full())
	}
	if _, err := index.OpenOffset(tempPath(t, "tiny.index"), 0, 7); err == nil {
		t.Fatal("maxBytes below one entry accepted")
	}
}

// TestCrashedIndexFailsCheck: an index never closed (a crash) opens at its
// preallocated size; Check rejects the zero entries, and Reset + rebuild works.
func TestCrashedIndexFailsCheck(t *testing.T) {
	p := tempPath(t, "c.index")
	x := openOffset(t, p, 0, 800)
	for i := range 10 {
		if err := x.Append(int64(i+1)*10, int64(i+1)*100); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(p) // the file as a crash would leave it
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	cp := tempPath(t, "crashed.index")
	if err := os.WriteFile(cp, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	y := openOffset(t, cp, 0, 800)
	defer y.Close()
	if y.Entries() != 100 {
		t.Fatalf("crashed index opens with %d entries, want 100", y.Entries())
	}
	if err := y.Check(1 << 20); !errors.Is(err, index.ErrCorrupt) {
		t.Fatalf("Check of a crashed index: %v", err)
	}
	y.Reset()
	for i := range 3 {
		if err := y.Append(int64(i+1)*10, int64(i+1)*100); err != nil {
			t.Fatal(err)
		}
	}
	if err := y.Check(1 << 20); err != nil {
		t.Fatalf("Check after rebuild: %v", err)
	}
}

func TestOffsetCheck(t *testing.T) {
	entries := func(pairs ...uint32) []byte {
		b := make([]byte, 0, len(pairs)*4)
		for _, v := range pairs {
			b = binary.BigEndian.AppendUint32(b, v)
		}
		return b
	}
	cases := []struct {
		name    string
		data    []byte
		logSize int64
		ok      bool
	}{
		{"empty", nil, 0, true},
		{"good", entries(0, 0, 5, 100, 9, 200), 300, true},
		{"torn tail ignored", append(entries(0, 0, 5, 100), 1, 2, 3), 300, true},
		{"offset repeats", entries(0, 0, 5, 100, 5, 200), 300, false},
		{"position repeats", entries(0, 0, 5, 100, 6, 100), 300, false},
		{"position past log", entries(0, 0, 5, 100), 100, false},
		{"negative as int32", entries(0x80000000, 0), 300, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := tempPath(t, "k.index")
			if err := os.WriteFile(p, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			x := openOffset(t, p, 0, 64)
			defer x.Close()
			if x.Entries() != len(c.data)/8 {
				t.Fatalf("%d entries from %d bytes", x.Entries(), len(c.data))
			}
			err := x.Check(c.logSize)
			if c.ok != (err == nil) || (err != nil && !errors.Is(err, index.ErrCorrupt)) {
				t.Fatalf("Check = %v, want ok=%v", err, c.ok)
			}
		})
	}
}

func TestRename(t *testing.T) {
	dir := t.TempDir()
	x := openOffset(t, filepath.Join(dir, "a.index"), 0, 64)
	if err := x.Append(1, 1); err != nil {
		t.Fatal(err)
	}
	np := filepath.Join(dir, "a.index.deleted")
	if err := x.Rename(np); err != nil {
		t.Fatal(err)
	}
	if x.Path() != np {
		t.Fatalf("Path %q", x.Path())
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if fileSize(t, np) != 8 {
		t.Fatalf("renamed file %d bytes, want 8", fileSize(t, np))
	}
}

// TestLookupLargeMatchesLinear covers indexes past the 8 KiB warm section,
// with targets on both sides of its first entry.
func TestLookupLargeMatchesLinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1023, 1024, 1025, 1500, 5000} {
		x := openOffset(t, tempPath(t, "l.index"), 10, n*8)
		tx := openTime(t, tempPath(t, "l.timeindex"), 10, n*12)
		var es []offEntry
		var ts []timeEntry
		off, pos, tm := int64(10), int64(0), int64(-5000)
		for range n {
			if err := x.Append(off, pos); err != nil {
				t.Fatal(err)
			}
			if err := tx.Append(tm, off); err != nil {
				t.Fatal(err)
			}
			es, ts = append(es, offEntry{off, pos}), append(ts, timeEntry{tm, off})
			off, pos, tm = off+1+int64(rng.IntN(5)), pos+1+int64(rng.IntN(5)), tm+1+int64(rng.IntN(5))
		}
		probe := func(i int) {
			i = min(max(i, 0), n-1)
			for d := int64(-1); d <= 1; d++ {
				gotOff, gotPos := x.Lookup(es[i].off + d)
				wantOff, wantPos := linearOffset(es, 10, es[i].off+d)
				if gotOff != wantOff || gotPos != wantPos {
					t.Fatalf("n %d: Lookup(%d) = (%d, %d), linear (%d, %d)", n, es[i].off+d, gotOff, gotPos, wantOff, wantPos)
				}
				gotTs, gotTOff := tx.Lookup(ts[i].ts + d)
				wantTs, wantTOff := linearTime(ts, 10, ts[i].ts+d)
				if gotTs != wantTs || gotTOff != wantTOff {
					t.Fatalf("n %d: time Lookup(%d) = (%d, %d), linear (%d, %d)", n, ts[i].ts+d, gotTs, gotTOff, wantTs, wantTOff)
				}
			}
		}
		for _, i := range []int{0, n - 1024, n - 1025, n - 1023, n - 683, n - 682, n - 684, n - 1} {
			probe(i)
		}
		for range 300 {
			probe(rng.IntN(n))
		}
		x.Close()
		tx.Close()
	}
}
