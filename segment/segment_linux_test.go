//go:build linux

package segment_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratalog/strata/segment"
)

func allocatedBytes(t *testing.T, p string) (size, blocks int64) {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	return st.Size(), sys.Blocks * 512
}

// fallocateWorks probes whether the test filesystem supports KEEP_SIZE.
func fallocateWorks(t *testing.T, dir string) bool {
	f, err := os.Create(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// TestPreallocateAndSeal: Create reserves blocks without moving i_size, Seal
// gives them back, TruncateTo on an active segment re-reserves them.
func TestPreallocateAndSeal(t *testing.T) {
	dir := t.TempDir()
	supported := fallocateWorks(t, dir)
	const prealloc = 8 << 20
	p := filepath.Join(dir, "p.log")
	s, err := segment.Create(p, prealloc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	size, blocks := allocatedBytes(t, p)
	if size != 0 {
		t.Fatalf("i_size %d after Create, want 0", size)
	}
	if supported && blocks < prealloc {
		t.Fatalf("Create reserved %d bytes, want >= %d", blocks, prealloc)
	}
	if _, err := s.Append(make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	if err := s.TruncateTo(1000); err != nil {
		t.Fatal(err)
	}
	if _, blocks := allocatedBytes(t, p); supported && blocks < prealloc {
		t.Fatalf("TruncateTo dropped the reservation: %d bytes allocated", blocks)
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	size, blocks = allocatedBytes(t, p)
	if size != 1000 || blocks >= 1<<20 {
		t.Fatalf("after Seal: i_size %d, %d bytes allocated", size, blocks)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
}
