//go:build linux

package index_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stratalog/strata/index"
)

// TestIndexReservesInSteps: a 10 MiB index holds real blocks only a step
// ahead of its entries, and keeps working past several steps.
func TestIndexReservesInSteps(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.index")
	x, err := index.OpenOffset(p, 0, 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if used := st.Sys().(*syscall.Stat_t).Blocks * 512; used > 2*index.ReserveStepBytes {
		t.Fatalf("a new index holds %d bytes of disk, want at most two %d-byte steps", used, index.ReserveStepBytes)
	}
	n := 3 * index.ReserveStepBytes / index.OffsetEntryBytes
	for i := 0; i < n; i++ {
		if err := x.Append(int64(i), int64(i)*100); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	for _, probe := range []int64{0, int64(n / 2), int64(n - 1)} {
		if o, pos := x.Lookup(probe); o != probe || pos != probe*100 {
			t.Fatalf("lookup %d = (%d, %d)", probe, o, pos)
		}
	}
}
