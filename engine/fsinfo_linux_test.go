package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratalog/strata/segment"
)

// segment.Ext4NoJournal agrees with jbd2: an ext4 filesystem has a journal exactly
// when /proc/fs/jbd2 lists its device (this VM's root ext4 has none; CI's
// machines are the same kind). Off ext4 it is false.
func TestExt4NoJournal(t *testing.T) {
	dir := t.TempDir()
	fs, _ := sharedFlushFS(dir)
	got := segment.Ext4NoJournal(dir)
	if fs != "ext4" {
		if got {
			t.Fatalf("%s reported as ext4 without a journal", fs)
		}
		return
	}
	name := segment.DeviceName(dir)
	if name == "" {
		t.Fatalf("no block device name for %s", dir)
	}
	journaled := false
	entries, _ := os.ReadDir("/proc/fs/jbd2")
	for _, e := range entries {
		journaled = journaled || strings.HasPrefix(e.Name(), name+"-")
	}
	if got == journaled {
		t.Fatalf("ext4 on %s: Ext4NoJournal %v, jbd2 journal listed %v", name, got, journaled)
	}
	t.Logf("ext4 on %s, journal: %v", name, journaled)
	if segment.Ext4NoJournal(filepath.Join(dir, "missing")) {
		t.Fatal("a missing directory reported as ext4 without a journal")
	}
}
