package vfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteFileAtomic replaces the file and leaves no temporary behind, also
// for a name too long to take the suffix.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"checkpoint", strings.Repeat("t", 252)} {
		path := filepath.Join(dir, name)
		for _, body := range []string{"one", "two"} {
			if err := WriteFileAtomic(path, []byte(body)); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(path); err != nil || string(b) != body {
				t.Fatalf("%s: %q, %v; want %q", name[:8], b, err, body)
			}
		}
		if tmp := TmpPath(path); len(filepath.Base(tmp)) > MaxFileNameLen || !strings.HasSuffix(tmp, TmpSuffix) {
			t.Fatalf("temporary name %q", filepath.Base(tmp))
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 2 {
		t.Fatalf("directory holds %d entries (%v), want the two files", len(ents), err)
	}
	if err := SyncPath(filepath.Join(dir, "checkpoint")); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(dir, "snapshot")
	if err := ReplaceFileNoSync(snap, []byte("s1")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(snap); err != nil || string(b) != "s1" {
		t.Fatalf("ReplaceFileNoSync: %q, %v", b, err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), nil); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}
