package engine

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// inodes maps the inode numbers of dir's files to their names.
func inodes(t *testing.T, dir string) map[uint64]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[uint64]string{}
	for _, en := range ents {
		fi, err := en.Info()
		if err != nil {
			t.Fatal(err)
		}
		m[fi.Sys().(*syscall.Stat_t).Ino] = en.Name()
	}
	return m
}

// Retention's deleted segment files and the snapshots no longer kept
// become empty spares in the partition's directory, and the next rolls
// make their segment files and snapshots over those inodes instead of
// allocating new ones (spare.go); Open adopts the spares a restart finds,
// and every record stays readable.
func TestSparesServeRolls(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	dir := t.TempDir()
	e, l := retentionTopic(t, dir, clk, map[string]string{"retention.ms": "-1", "retention.bytes": "10000", "file.delete.delay.ms": "0"})
	defer e.Close()
	for i := 0; i < 12; i++ {
		appendAt(t, l, t0, i)
	}
	if n := e.enforceRetention(); n < 4 {
		t.Fatalf("retention deleted %d segments", n)
	}
	e.releaseDue(t0 + 1e9)
	waitFor(t, func() bool { // (the engine's goroutine may be releasing them too)
		ents, err := os.ReadDir(l.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range ents {
			if strings.HasSuffix(en.Name(), deletedSuffix) {
				return false
			}
		}
		return true
	})
	before := inodes(t, l.dir)
	var spares []uint64
	for ino, name := range before {
		if strings.HasSuffix(name, spareSuffix) {
			spares = append(spares, ino)
			if fi, err := os.Stat(filepath.Join(l.dir, name)); err != nil || fi.Size() != 0 {
				t.Fatalf("spare %s: %v, size %d", name, err, fi.Size())
			}
		}
	}
	if len(spares) < 6 || l.spares.size() != len(spares) {
		t.Fatalf("%d spares on disk, %d in the pool, after deleting segments: %v", len(spares), l.spares.size(), before)
	}
	for _, name := range before {
		if strings.HasSuffix(name, deletedSuffix) {
			t.Fatalf("%s left", name)
		}
	}
	// Two more segments: their files are the spares' inodes.
	for i := 12; i < 14; i++ {
		appendAt(t, l, t0, i)
	}
	after := inodes(t, l.dir)
	reused := 0
	for _, ino := range spares {
		if name, ok := after[ino]; ok && !strings.HasSuffix(name, spareSuffix) {
			reused++
		}
	}
	if reused < 6 { // each roll: the data file and two indexes (and the snapshot's temporary file)
		t.Fatalf("%d of %d spares reused by two rolls (%d left in the pool): %v", reused, len(spares), l.spares.size(), after)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := openEngine(t, dir, func(o *Options) { o.Now = clk.Now; o.RetentionCheckInterval = -1 })
	defer e2.Close()
	l2 := e2.Topic("ret").Partition(0)
	left := 0
	for _, name := range inodes(t, l2.dir) {
		if strings.HasSuffix(name, spareSuffix) {
			left++
		}
	}
	if left == 0 || l2.spares.size() != left {
		t.Fatalf("after a restart: %d spares on disk, %d adopted", left, l2.spares.size())
	}
	for off := l2.LogStartOffset(); off < l2.LogEndOffset(); off++ {
		rr, err := l2.Read(off, 1<<20, true)
		if err != nil || len(rr.Chunks) == 0 {
			t.Fatalf("read at %d: %v", off, err)
		}
		rr.Release()
	}
}
