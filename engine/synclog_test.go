package engine

import (
	"github.com/stratalog/strata/internal/vfs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSyncLogRecordsAndCuts: recordSync logs the pre-sync length of a file
// synced in place, the new length of an atomically replaced file and
// directory syncs; CutToSyncLog truncates, empties unsynced indexes and
// deletes never-synced segments and .tmp files.
func TestSyncLogRecordsAndCuts(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "sync.log")
	r, err := openSyncRecorder(logPath, dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{dir: dir, synclog: r}
	part := filepath.Join(dir, "t-0")
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	seg := segmentFileName(part, 0, logSuffix)
	os.WriteFile(seg, make([]byte, 100), 0o644)
	if err := e.syncFile(seg, func() error { return vfs.SyncPath(seg) }); err != nil {
		t.Fatal(err)
	}
	if err := e.syncFile(part, func() error { return vfs.SyncDir(part) }); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(dir, "recovery-point-offset-checkpoint")
	if err := e.syncFile(ck, func() error { return vfs.WriteFileAtomic(ck, []byte("0\n0\n")) }); err != nil {
		t.Fatal(err)
	}
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(logPath)
	st, err := ReadSyncLog(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st.Files[filepath.Join("t-0", "00000000000000000000.log")] != 100 || !st.Dirs["t-0"] ||
		st.Files["recovery-point-offset-checkpoint"] != 4 {
		t.Fatalf("sync log state %+v", st)
	}
	// Unsynced appends, an index never synced, a segment never synced, a tmp.
	fa, _ := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	fa.Write(make([]byte, 5000))
	fa.Close()
	idx := segmentFileName(part, 0, indexSuffix)
	os.WriteFile(idx, []byte("junk"), 0o644)
	seg2 := segmentFileName(part, 50, logSuffix)
	os.WriteFile(seg2, []byte("unsynced"), 0o644)
	os.WriteFile(filepath.Join(part, "x.tmp"), []byte("t"), 0o644)
	stats, err := CutToSyncLog(dir, logPath, CutOptions{Torn: true})
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(seg); fi == nil || fi.Size() != 4096 { // 100 synced + garbage to the page end
		t.Fatalf("segment after torn cut: %v", fi)
	}
	if fi, _ := os.Stat(idx); fi == nil || fi.Size() != 4 { // emptied, then a torn 4-byte write
		t.Fatalf("index after cut: %v", fi)
	}
	for _, p := range []string{seg2, filepath.Join(part, "x.tmp")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s survived the cut: %v", p, err)
		}
	}
	if stats.Deleted != 2 || stats.TornWrites != 2 || stats.Truncated != 2 {
		t.Fatalf("stats %s", stats)
	}
}

func TestSyncLogRejectsMalformed(t *testing.T) {
	for _, in := range []string{"a 1\nbad\nb 2\n", "../x 1\n", "a -1\nb 2\n"} {
		if _, err := ReadSyncLog(strings.NewReader(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	if st, err := ReadSyncLog(strings.NewReader("a 1\ncut-sho")); err != nil || st.Files["a"] != 1 {
		t.Errorf("cut last line: %v %+v", err, st)
	}
}
