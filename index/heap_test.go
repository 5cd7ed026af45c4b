package index_test

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stratalog/strata/index"
	"github.com/stratalog/strata/internal/vfs"
)

// memDir is a MemFS holding the directory /d, durably.
func memDir(t *testing.T) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMemFS()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/", "/d"} {
		if err := m.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// memEntries reads path's offset entries from fsys as stored in the file.
func memEntries(t *testing.T, fsys vfs.FS, path string) [][2]uint32 {
	t.Helper()
	b, err := vfs.ReadFile(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	var es [][2]uint32
	for i := 0; i+8 <= len(b); i += 8 {
		es = append(es, [2]uint32{binary.BigEndian.Uint32(b[i:]), binary.BigEndian.Uint32(b[i+4:])})
	}
	return es
}

// An index on Options.FS lives on the heap: its entries reach the file
// only at WriteBack, Sync and Close, as a private mapping's do; only a
// Sync makes them survive a crash of the file system; Close trims the
// file to the entries; a reopen reads them back; Rename goes through
// the file system.
func TestHeapIndexOnMemFS(t *testing.T) {
	m := memDir(t)
	const base, p = 100, "/d/0.index"
	o := index.Options{FS: m}
	x, err := index.OpenOffsetWith(p, base, 4096, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 10; i++ {
		if err := x.Append(base+i*10, i*4096); err != nil {
			t.Fatal(err)
		}
	}
	if es := memEntries(t, m, p); len(es) != 0 {
		t.Fatalf("file holds %v before any write-back (it is not grown either)", es)
	}
	if off, pos := x.Lookup(base + 55); off != base+50 || pos != 5*4096 {
		t.Fatalf("Lookup = (%d, %d)", off, pos)
	}
	if err := x.WriteBack(); err != nil {
		t.Fatal(err)
	}
	if es := memEntries(t, m, p); len(es) != 10 || es[9] != [2]uint32{100, 10 * 4096} {
		t.Fatalf("after WriteBack the file holds %v", es)
	}
	if err := x.Append(base+110, 11*4096); err != nil {
		t.Fatal(err)
	}
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	// Written back but not synced: a crash does not keep it.
	if err := x.Append(base+120, 12*4096); err != nil {
		t.Fatal(err)
	}
	if err := x.WriteBack(); err != nil {
		t.Fatal(err)
	}
	if es := memEntries(t, m, p); len(es) != 12 {
		t.Fatalf("after WriteBack the file holds %d entries, want 12", len(es))
	}
	after := m.Crash(vfs.CrashOptions{})
	if es := memEntries(t, after, p); len(es) != 11 {
		t.Fatalf("a crash after Sync keeps %d entries, want 11", len(es))
	}
	// The old MemFS is powered off: every operation fails from now on.
	if err := x.Append(base+130, 13*4096); err != nil {
		t.Fatal(err) // the heap takes it
	}
	if err := x.Sync(); !errors.Is(err, vfs.ErrCrashed) {
		t.Fatalf("Sync on a crashed file system: %v", err)
	}
	x.Close()

	// Reopen on the crashed-and-restarted file system, truncate, close:
	// the file is trimmed to the entries kept.
	y, err := index.OpenOffsetWith(p, base, 4096, index.Options{FS: after})
	if err != nil {
		t.Fatal(err)
	}
	if y.Entries() != 11 || y.Check(1<<20) != nil {
		t.Fatalf("reopened: %d entries, check %v", y.Entries(), y.Check(1<<20))
	}
	y.TruncateTo(base + 60)
	if err := y.Rename("/d/0.index.deleted"); err != nil {
		t.Fatal(err)
	}
	if err := y.Close(); err != nil {
		t.Fatal(err)
	}
	if es := memEntries(t, after, "/d/0.index.deleted"); len(es) != 5 {
		t.Fatalf("closed after TruncateTo: file holds %d entries, want 5", len(es))
	}
	if _, err := after.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old name after Rename: %v", err)
	}
}

// Heap-backed and mapped indexes answer every lookup alike, for both index
// kinds, through appends, truncations and a reopen.
func TestHeapIndexMatchesMapped(t *testing.T) {
	m := memDir(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 9))
	const base = 1000
	mo, err := index.OpenOffset(filepath.Join(dir, "0.index"), base, 8*600)
	if err != nil {
		t.Fatal(err)
	}
	ho, err := index.OpenOffsetWith("/d/0.index", base, 8*600, index.Options{FS: m})
	if err != nil {
		t.Fatal(err)
	}
	mt, err := index.OpenTime(filepath.Join(dir, "0.timeindex"), base, 12*600)
	if err != nil {
		t.Fatal(err)
	}
	ht, err := index.OpenTimeWith("/d/0.timeindex", base, 12*600, index.Options{FS: m})
	if err != nil {
		t.Fatal(err)
	}
	off, pos, ts := int64(base), int64(0), int64(5000)
	compare := func() {
		t.Helper()
		for q := int64(base - 5); q < off+5; q += 1 + rng.Int64N(7) {
			a1, b1 := mo.Lookup(q)
			a2, b2 := ho.Lookup(q)
			if a1 != a2 || b1 != b2 {
				t.Fatalf("offset Lookup(%d): mapped (%d, %d), heap (%d, %d)", q, a1, b1, a2, b2)
			}
		}
		for q := int64(4990); q < ts+5; q += 1 + rng.Int64N(7) {
			a1, b1 := mt.Lookup(q)
			a2, b2 := ht.Lookup(q)
			if a1 != a2 || b1 != b2 {
				t.Fatalf("time Lookup(%d): mapped (%d, %d), heap (%d, %d)", q, a1, b1, a2, b2)
			}
		}
		if mo.Entries() != ho.Entries() || mt.Entries() != ht.Entries() {
			t.Fatalf("entries: mapped %d/%d, heap %d/%d", mo.Entries(), mt.Entries(), ho.Entries(), ht.Entries())
		}
	}
	for round := range 6 {
		for range 40 + rng.IntN(40) {
			off += 1 + rng.Int64N(20)
			pos += 1 + rng.Int64N(4096)
			ts += 1 + rng.Int64N(100)
			for _, err := range []error{mo.Append(off, pos), ho.Append(off, pos), mt.Append(ts, off), ht.Append(ts, off)} {
				if err != nil && !errors.Is(err, index.ErrFull) {
					t.Fatal(err)
				}
			}
		}
		compare()
		if round%2 == 1 {
			cut := base + rng.Int64N(off-base+1)
			mo.TruncateTo(cut)
			ho.TruncateTo(cut)
			mt.TruncateTo(cut)
			ht.TruncateTo(cut)
			compare()
		}
		if err := ho.WriteBack(); err != nil {
			t.Fatal(err)
		}
	}
	// Reopen the heap indexes from their files: same answers.
	for _, c := range []interface{ Close() error }{ho, ht} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if ho, err = index.OpenOffsetWith("/d/0.index", base, 8*600, index.Options{FS: m}); err != nil {
		t.Fatal(err)
	}
	if ht, err = index.OpenTimeWith("/d/0.timeindex", base, 12*600, index.Options{FS: m}); err != nil {
		t.Fatal(err)
	}
	compare()
	for _, c := range []interface{ Close() error }{ho, ht, mo, mt} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
