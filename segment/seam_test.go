package segment_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/segment"
)

func readAll(t *testing.T, s *segment.Segment) string {
	t.Helper()
	b := make([]byte, s.Size())
	if _, err := s.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return string(b)
}

// TestSeamOnMemFS: a segment created, written and renamed through a
// vfs.MemFS lives wholly there: Create's directory sync makes the new name
// durable, Rename goes through the file system (and follows in Path), and
// a crash keeps the synced bytes under the renamed name, not the unsynced
// ones; a failed rename leaves the segment where it was.
func TestSeamOnMemFS(t *testing.T) {
	m := vfs.NewMemFS()
	if err := m.MkdirAll("/d/p-0", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/", "/d"} { // the directories' own entries
		if err := m.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	s, err := segment.CreateFS(m, "/d/p-0/0.log", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if s.File() != nil {
		t.Fatal("a MemFS segment reports an *os.File")
	}
	if _, err := s.Append([]byte("synced")); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	m.Inject(vfs.Fault{Ops: vfs.OpRename, Nth: 1, Err: syscall.EIO})
	if err := s.Rename("/d/p-0/0.log.deleted"); !errors.Is(err, syscall.EIO) || s.Path() != "/d/p-0/0.log" {
		t.Fatalf("failed rename: %v, path %s", err, s.Path())
	}
	if err := s.Rename("/d/p-0/0.log.deleted"); err != nil {
		t.Fatal(err)
	}
	if s.Path() != "/d/p-0/0.log.deleted" {
		t.Fatalf("path %s after rename", s.Path())
	}
	if _, err := s.Append([]byte("+unsynced")); err != nil {
		t.Fatal(err)
	}
	s2, err := segment.CreateFS(m, "/d/p-0/6.log", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Append([]byte("never synced")); err != nil {
		t.Fatal(err)
	}

	after := m.Crash(vfs.CrashOptions{Seed: 1})
	if _, err := after.Stat("/d/p-0/0.log"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old name after the synced rename: %v", err)
	}
	r, err := segment.OpenFS(after, "/d/p-0/0.log.deleted")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); got != "synced" {
		t.Fatalf("renamed segment holds %q after the crash, want the synced bytes", got)
	}
	r2, err := segment.OpenFS(after, "/d/p-0/6.log")
	if err != nil {
		t.Fatalf("created segment's name did not survive the crash: %v", err)
	}
	if r2.Size() != 0 {
		t.Fatalf("created segment holds %d unsynced bytes after the crash", r2.Size())
	}
	// The renamed segment renames on the crashed file system's successor
	// only through its own: the old MemFS is down.
	if err := s.Rename("/d/p-0/0.log"); err == nil {
		t.Fatal("rename on a crashed MemFS succeeded")
	}
	for _, c := range []*segment.Segment{r, r2} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSeamOnOS: through vfs.OS a segment is the real file it always was
// (a descriptor for sendfile), and Rename moves the real file.
func TestSeamOnOS(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "0.log")
	s, err := segment.CreateFS(vfs.OS, p, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.File() == nil {
		t.Fatal("a vfs.OS segment has no *os.File")
	}
	if _, err := s.Append([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(p + ".deleted"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p + ".deleted")
	if err != nil || string(b) != "abc" {
		t.Fatalf("renamed file: %q, %v", b, err)
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old name: %v", err)
	}
	f, err := os.OpenFile(p+".deleted", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sf := segment.FileOf(vfs.OS, f); sf.Fd() != f.Fd() {
		t.Fatalf("FileOf(vfs.OS, *os.File) has fd %d, want %d", sf.Fd(), f.Fd())
	}
	f.Close()
}
