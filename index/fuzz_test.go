package index_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratalog/strata/index"
)

// fuzzDir is where a fuzz target's index file goes: a fresh directory on
// tmpfs (/dev/shm) where there is one, else the test's temporary directory.
// Every input rewrites, opens, fallocates, maps and trims a file: about
// 0.4 ms on this machine's ext4 and 0.1 ms on tmpfs. That matters for Go's
// minimizer, which runs the target up to n² times for an n-byte input it
// found interesting: a 2 KiB input held a worker for the whole default
// minimize time (60 s) and a 5 s fuzz run showed 0 execs/s until its end.
// scripts/test also bounds minimization (-fuzzminimizetime).
func fuzzDir(f *testing.F) string {
	if d, err := os.MkdirTemp("/dev/shm", "strata-index-fuzz-"); err == nil {
		f.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return f.TempDir()
}

// FuzzOpenOffset: arbitrary file contents never make Open, Check, Lookup,
// Last, TruncateTo or Append panic; Entries is size/8; when Check passes,
// Lookup agrees with a linear scan of the decoded entries; Close trims.
func FuzzOpenOffset(f *testing.F) {
	be := binary.BigEndian
	good := be.AppendUint32(be.AppendUint32(be.AppendUint32(be.AppendUint32(nil, 0), 0), 7), 4096)
	f.Add([]byte{}, uint32(0), uint16(64))
	f.Add(good, uint32(5), uint16(64))
	f.Add(good, uint32(9), uint16(8))
	f.Add(append(good, 1, 2, 3), uint32(7), uint16(16))
	f.Add(make([]byte, 64), uint32(1), uint16(64))
	f.Add([]byte{0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, uint32(0xffffffff), uint16(100))
	dir := fuzzDir(f)
	f.Fuzz(func(t *testing.T, data []byte, target uint32, maxBytes uint16) {
		const base = 1 << 33
		p := filepath.Join(dir, "fuzz.index")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		x, err := index.OpenOffset(p, base, int(maxBytes))
		if int(maxBytes) < 8 {
			if err == nil {
				t.Fatal("maxBytes below one entry accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		n := len(data) / 8
		if x.Entries() != n {
			t.Fatalf("%d entries from %d bytes", x.Entries(), len(data))
		}
		es := make([]offEntry, n)
		for i := range es {
			es[i] = offEntry{base + int64(be.Uint32(data[i*8:])), int64(be.Uint32(data[i*8+4:]))}
		}
		off, pos := x.Lookup(base + int64(target))
		if err := x.Check(1 << 31); err == nil {
			wantOff, wantPos := linearOffset(es, base, base+int64(target))
			if off != wantOff || pos != wantPos {
				t.Fatalf("Lookup(%d) = (%d, %d), linear (%d, %d)", target, off, pos, wantOff, wantPos)
			}
		} else if !errors.Is(err, index.ErrCorrupt) {
			t.Fatalf("Check: %v", err)
		} else if off != base || pos != 0 {
			// Unchecked entries: the answer must at least be one of them.
			found := false
			for _, e := range es {
				found = found || (e.off == off && e.pos == pos)
			}
			if !found {
				t.Fatalf("Lookup returned (%d, %d), not an entry", off, pos)
			}
		}
		if lo, lp, ok := x.Last(); ok != (n > 0) || (ok && (lo != es[n-1].off || lp != es[n-1].pos)) {
			t.Fatalf("Last = (%d, %d, %v)", lo, lp, ok)
		}
		x.TruncateTo(base + int64(target))
		kept := x.Entries()
		if kept > n {
			t.Fatalf("TruncateTo grew the index to %d", kept)
		}
		_ = x.Append(base+int64(target)+1, 1<<30)
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(p); err != nil || st.Size()%8 != 0 {
			t.Fatalf("closed file: %v %v", st, err)
		}
	})
}

// FuzzOpenTime: the same for the time index.
func FuzzOpenTime(f *testing.F) {
	be := binary.BigEndian
	good := be.AppendUint32(be.AppendUint64(be.AppendUint32(be.AppendUint64(nil, 100), 0), 200), 3)
	f.Add([]byte{}, int64(0), uint16(120))
	f.Add(good, int64(150), uint16(120))
	f.Add(append(good, 9), int64(300), uint16(12))
	f.Add(make([]byte, 48), int64(-1), uint16(48))
	dir := fuzzDir(f)
	f.Fuzz(func(t *testing.T, data []byte, target int64, maxBytes uint16) {
		const base = 77
		p := filepath.Join(dir, "fuzz.timeindex")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		x, err := index.OpenTime(p, base, int(maxBytes))
		if int(maxBytes) < 12 {
			if err == nil {
				t.Fatal("maxBytes below one entry accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		n := len(data) / 12
		if x.Entries() != n {
			t.Fatalf("%d entries from %d bytes", x.Entries(), len(data))
		}
		es := make([]timeEntry, n)
		for i := range es {
			es[i] = timeEntry{int64(be.Uint64(data[i*12:])), base + int64(be.Uint32(data[i*12+8:]))}
		}
		ts, off := x.Lookup(target)
		if err := x.Check(); err == nil {
			wantTs, wantOff := linearTime(es, base, target)
			if ts != wantTs || off != wantOff {
				t.Fatalf("Lookup(%d) = (%d, %d), linear (%d, %d)", target, ts, off, wantTs, wantOff)
			}
		} else if !errors.Is(err, index.ErrCorrupt) {
			t.Fatalf("Check: %v", err)
		}
		x.TruncateTo(base + int64(uint8(target)))
		_ = x.Append(target, base+1<<20)
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
