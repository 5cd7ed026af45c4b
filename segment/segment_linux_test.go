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
	if supported && blocks < segment.PreallocFirstStepBytes {
		t.Fatalf("Create reserved %d bytes, want the first step, >= %d", blocks, segment.PreallocFirstStepBytes)
	}
	if _, err := s.Append(make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	if err := s.TruncateTo(1000); err != nil {
		t.Fatal(err)
	}
	if _, blocks := allocatedBytes(t, p); supported && blocks < segment.PreallocFirstStepBytes {
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

// TestPreallocateInSteps: a large segment limit is reserved a step at a time,
// staying ahead of the appends and never past the limit.
func TestPreallocateInSteps(t *testing.T) {
	dir := t.TempDir()
	if !fallocateWorks(t, dir) {
		t.Fatal("the test filesystem refuses fallocate(KEEP_SIZE); preallocation cannot be checked here")
	}
	const limit = 1 << 30
	p := filepath.Join(dir, "big.log")
	s, err := segment.Create(p, limit)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, blocks := allocatedBytes(t, p)
	if blocks < segment.PreallocFirstStepBytes || blocks > 2*segment.PreallocFirstStepBytes {
		t.Fatalf("reserved %d bytes at Create, want the first step (%d), not the %d limit", blocks, segment.PreallocFirstStepBytes, int64(limit))
	}
	chunk := make([]byte, 1<<20)
	for i := 0; i < 40; i++ { // 40 MiB: past two steps
		if _, err := s.Append(chunk); err != nil {
			t.Fatal(err)
		}
		size, blocks := allocatedBytes(t, p)
		if blocks < size {
			t.Fatalf("after %d MiB: %d bytes reserved, behind the %d written", i+1, blocks, size)
		}
		if blocks > size+2*segment.PreallocStepBytes {
			t.Fatalf("after %d MiB: %d bytes reserved, more than two steps ahead", i+1, blocks)
		}
	}
}
