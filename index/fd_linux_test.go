//go:build linux

package index_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stratalog/strata/index"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestIndexHoldsNoDescriptor: an open index (active or sealed) holds its
// mapping, not a descriptor; appends across reservation steps, a rename
// and Close (which trims the file) still work on the renamed file.
func TestIndexHoldsNoDescriptor(t *testing.T) {
	dir := t.TempDir()
	before := openFDs(t)
	var xs []*index.OffsetIndex
	for i := range 50 {
		x, err := index.OpenOffset(filepath.Join(dir, string(rune('a'+i%26))+string(rune('a'+i/26))+".index"), 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		xs = append(xs, x)
	}
	tm, err := index.OpenTime(filepath.Join(dir, "t.timeindex"), 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	if got := openFDs(t) - before; got != 0 {
		t.Fatalf("51 open indexes hold %d descriptors", got)
	}
	x := xs[0]
	n := 2*index.ReserveStepBytes/index.OffsetEntryBytes + 7
	for i := range n / 2 {
		if err := x.Append(int64(i), int64(i)*10); err != nil {
			t.Fatal(err)
		}
	}
	moved := filepath.Join(dir, "moved.index")
	if err := x.Rename(moved); err != nil {
		t.Fatal(err)
	}
	for i := n / 2; i < n; i++ { // crosses reservation steps after the rename
		if err := x.Append(int64(i), int64(i)*10); err != nil {
			t.Fatalf("append %d after rename: %v", i, err)
		}
	}
	for _, x := range xs {
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(moved)
	if err != nil || st.Size() != int64(n*index.OffsetEntryBytes) {
		t.Fatalf("closed index: %v, %d bytes, want %d", err, st.Size(), n*index.OffsetEntryBytes)
	}
	re, err := index.OpenOffset(moved, 0, int(st.Size()))
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if re.Entries() != n {
		t.Fatalf("reopened: %d entries, want %d", re.Entries(), n)
	}
	if o, p := re.Lookup(int64(n - 1)); o != int64(n-1) || p != int64(n-1)*10 {
		t.Fatalf("lookup after reopen = %d, %d", o, p)
	}
}

// TestIndexNeverTouchesAReplacedFile: when another file takes the index's
// path (the index's own file moved away without Rename), a reservation
// step fails instead of allocating in, or Close trimming, the other file.
func TestIndexNeverTouchesAReplacedFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.index")
	x, err := index.OpenOffset(p, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, p+".elsewhere"); err != nil {
		t.Fatal(err)
	}
	other := []byte("someone else's file")
	if err := os.WriteFile(p, other, 0o644); err != nil {
		t.Fatal(err)
	}
	var appendErr error
	for i := 0; appendErr == nil && i < 2*index.ReserveStepBytes/index.OffsetEntryBytes; i++ {
		appendErr = x.Append(int64(i), int64(i))
	}
	if appendErr == nil {
		t.Fatal("appends past the reservation succeeded on a replaced path")
	}
	if err := x.Close(); err == nil {
		t.Fatal("Close trimmed a replaced path without complaint")
	}
	if got, _ := os.ReadFile(p); string(got) != string(other) {
		t.Fatalf("the other file changed: %q", got)
	}
}
