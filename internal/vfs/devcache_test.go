package vfs

import (
	"bytes"
	"os"
	"syscall"
	"testing"
)

// devFile creates name on m with size bytes of b, synced (and its
// directory entry), and returns it open.
func devFile(t *testing.T, m *MemFS, name string, size int, b byte) File {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{b}, size), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	return f
}

func mustWriteAt(t *testing.T, f File, p []byte, off int64) {
	t.Helper()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

func devContents(t *testing.T, m *MemFS, name string) []byte {
	t.Helper()
	b, err := ReadFile(m, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeviceCacheFlushByAnyFile: with the device cache, an overwrite
// inside a file's durable size survives a crash once another file's Sync
// returned after it; an overwrite after that flush, a write extending the
// file and a write past a truncation do not; without the device cache the
// same flush makes nothing of the other file durable.
func TestDeviceCacheFlushByAnyFile(t *testing.T) {
	for _, dev := range []bool{true, false} {
		m := NewMemFS()
		m.SetDeviceCache(dev)
		seg := devFile(t, m, "/seg", 4096, 0)
		anchor := devFile(t, m, "/anchor", 0, 0)
		mustWriteAt(t, seg, []byte("round1"), 0)    // overwrite: in the device cache
		mustWriteAt(t, seg, []byte("extend"), 4096) // extends the file: needs its own sync
		if err := anchor.Sync(); err != nil {       // the device cache flush
			t.Fatal(err)
		}
		mustWriteAt(t, seg, []byte("round2"), 100) // after the flush
		got := devContents(t, m.Crash(CrashOptions{Seed: 1}), "/seg")
		want := make([]byte, 4096)
		if dev {
			copy(want, "round1")
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("device cache %v: after the crash %q..., want %q... (%d bytes, want %d)", dev, got[:8], want[:8], len(got), len(want))
		}
	}

	// A truncation lowers the durable size until the file's own sync: a
	// write that refills the cut range is not an overwrite.
	m := NewMemFS()
	m.SetDeviceCache(true)
	seg := devFile(t, m, "/seg", 4096, 'a')
	anchor := devFile(t, m, "/anchor", 0, 0)
	if err := seg.Truncate(1000); err != nil {
		t.Fatal(err)
	}
	mustWriteAt(t, seg, []byte("past the cut"), 2000)
	mustWriteAt(t, seg, []byte("below"), 10)
	if err := anchor.Sync(); err != nil {
		t.Fatal(err)
	}
	got := devContents(t, m.Crash(CrashOptions{Seed: 2}), "/seg")
	want := bytes.Repeat([]byte{'a'}, 4096)
	copy(want[10:], "below")
	if !bytes.Equal(got, want) {
		t.Fatalf("after a truncation: got %d bytes %q..., want the old size with the flushed overwrite", len(got), got[:16])
	}
}

// TestDeviceCacheFailedSyncKeepsFlushed: a failed fsync drops the file's
// unsynced changes but not the overwrites a device flush made durable.
func TestDeviceCacheFailedSyncKeepsFlushed(t *testing.T) {
	m := NewMemFS()
	m.SetDeviceCache(true)
	seg := devFile(t, m, "/seg", 100, 0)
	anchor := devFile(t, m, "/anchor", 0, 0)
	mustWriteAt(t, seg, []byte("kept"), 0)
	if err := anchor.Sync(); err != nil {
		t.Fatal(err)
	}
	mustWriteAt(t, seg, []byte("lost"), 50)
	m.Inject(Fault{Ops: OpSync, Path: "/seg", Nth: 1, Err: syscall.EIO})
	if err := seg.Sync(); err == nil {
		t.Fatal("injected sync error not returned")
	}
	got := devContents(t, m.Crash(CrashOptions{Seed: 3}), "/seg")
	want := make([]byte, 100)
	copy(want, "kept")
	if !bytes.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestDeviceCacheCrashIndependentAndTorn: unsynced writes are kept or lost
// each on its own (a later one without an earlier one), and a torn write
// keeps whole 512-byte sectors only; one seed, one outcome.
func TestDeviceCacheCrashIndependentAndTorn(t *testing.T) {
	later, torn := false, false
	for seed := range uint64(200) {
		m := NewMemFS()
		m.SetDeviceCache(true)
		f := devFile(t, m, "/f", 8192, 0)
		mustWriteAt(t, f, bytes.Repeat([]byte{1}, 2048), 0)
		mustWriteAt(t, f, bytes.Repeat([]byte{2}, 2048), 4096)
		opts := CrashOptions{Seed: seed, KeepUnsynced: true, Tear: true}
		got := devContents(t, m.Crash(opts), "/f")
		again := devContents(t, m.Crash(opts), "/f")
		if !bytes.Equal(got, again) {
			t.Fatalf("seed %d: two crashes with one seed differ", seed)
		}
		if len(got) != 8192 {
			t.Fatalf("seed %d: size %d", seed, len(got))
		}
		for s := 0; s < 8192; s += sectorBytes {
			sec := got[s : s+sectorBytes]
			if !bytes.Equal(sec, bytes.Repeat(sec[:1], sectorBytes)) {
				t.Fatalf("seed %d: sector at %d partly written", seed, s)
			}
		}
		ones, twos := bytes.Count(got[:2048], []byte{1}), bytes.Count(got[4096:6144], []byte{2})
		if ones == 0 && twos == 2048 {
			later = true
		}
		if (ones > 0 && ones < 2048) || (twos > 0 && twos < 2048) {
			torn = true
		}
	}
	if !later || !torn {
		t.Fatalf("200 seeds: a later write kept without an earlier one %v, a torn write %v", later, torn)
	}
}
