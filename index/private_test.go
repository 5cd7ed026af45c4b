package index_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stratalog/strata/index"
)

// fileEntries reads path's offset entries as stored in the file (not in
// any mapping), stopping at the first all-zero entry.
func fileEntries(t *testing.T, path string) [][2]uint32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var es [][2]uint32
	for i := 0; i+8 <= len(b); i += 8 {
		rel, pos := binary.BigEndian.Uint32(b[i:]), binary.BigEndian.Uint32(b[i+4:])
		if rel == 0 && pos == 0 && i > 0 {
			break
		}
		es = append(es, [2]uint32{rel, pos})
	}
	return es
}

// A private mapping keeps appended entries out of the file (and so out of
// the page cache's dirty pages) until WriteBack, Sync or Close, and then
// writes exactly the entries the index holds, truncations included.
func TestPrivateMappingWritesBackOnDemand(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("private mappings are a Linux option; elsewhere entries are written through")
	}
	p := filepath.Join(t.TempDir(), "0.index")
	const base = 100
	x, err := index.OpenOffsetWith(p, base, 4096, index.Options{Private: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 10; i++ {
		if err := x.Append(base+i*10, i*4096); err != nil {
			t.Fatal(err)
		}
	}
	if es := fileEntries(t, p); len(es) > 1 || (len(es) == 1 && es[0] != [2]uint32{}) {
		t.Fatalf("file holds %v before any write-back", es)
	}
	if off, pos := x.Lookup(base + 55); off != base+50 || pos != 5*4096 {
		t.Fatalf("Lookup through the private mapping = (%d, %d)", off, pos)
	}
	if err := x.WriteBack(); err != nil {
		t.Fatal(err)
	}
	if es := fileEntries(t, p); len(es) != 10 || es[9] != [2]uint32{100, 10 * 4096} {
		t.Fatalf("after WriteBack the file holds %v", es)
	}
	// Truncate below what was written back, append different entries:
	// the file gets the new ones over the old.
	x.TruncateTo(base + 40)
	if err := x.Append(base+45, 3*4096+100); err != nil {
		t.Fatal(err)
	}
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	if es := fileEntries(t, p); es[3] != [2]uint32{45, 3*4096 + 100} {
		t.Fatalf("after truncate, append, Sync: entry 3 = %v", es[3])
	}
	if err := x.Append(base+60, 8*4096); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Size() != 5*8 {
		t.Fatalf("closed file: %v, %v (want 5 entries)", st, err)
	}
	y, err := index.OpenOffset(p, base, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if err := y.Check(1 << 20); err != nil {
		t.Fatal(err)
	}
	if off, pos, ok := y.Last(); !ok || off != base+60 || pos != 8*4096 {
		t.Fatalf("reopened Last = (%d, %d, %v)", off, pos, ok)
	}
}

// The time index's private mapping writes back the same way.
func TestPrivateTimeIndexWriteBack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("private mappings are a Linux option")
	}
	p := filepath.Join(t.TempDir(), "0.timeindex")
	x, err := index.OpenTimeWith(p, 0, 1200, index.Options{Private: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 4; i++ {
		if err := x.Append(1000*i, i); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(p); !allZero(b) {
		t.Fatal("time index entries reached the file before a write-back")
	}
	if err := x.WriteBack(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if got := binary.BigEndian.Uint64(b[36:]); got != 4000 {
		t.Fatalf("fourth entry's timestamp in the file = %d", got)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Size() != 48 {
		t.Fatalf("closed size %d", st.Size())
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
