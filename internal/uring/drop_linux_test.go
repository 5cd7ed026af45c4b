//go:build linux

package uring

import (
	"errors"
	"os"
	"testing"
)

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestDropDescriptor: a registered file keeps taking writes and fsyncs
// through its slot after its descriptor is closed, costs no descriptor,
// and closes cleanly; an unregistered file keeps its descriptor.
func TestDropDescriptor(t *testing.T) {
	r := newTestRing(t, BackendUring, func(c *Config) { c.FileSlots = 1 })
	a := openTestFile(t, r, 0)
	b := openTestFile(t, r, 0) // no slot left
	before := countFDs(t)
	if ok, err := a.DropDescriptor(); !ok || err != nil {
		t.Fatalf("DropDescriptor of a registered file: %v, %v", ok, err)
	}
	if ok, err := b.DropDescriptor(); ok || err != nil {
		t.Fatalf("DropDescriptor of an unregistered file: %v, %v", ok, err)
	}
	if got := countFDs(t); got != before-1 {
		t.Fatalf("descriptors %d -> %d, want one fewer", before, got)
	}
	if a.Fd() != ^uintptr(0) {
		t.Fatalf("Fd after DropDescriptor = %d", a.Fd())
	}
	if _, err := do(t, r, &Op{Code: OpWrite, File: a, Buf: []byte("slot"), Off: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := do(t, r, &Op{Code: OpFsync, File: a, Datasync: true}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(a.Name()); err != nil || string(got) != "\x00\x00slot" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := a.WriteAt([]byte("x"), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("WriteAt after DropDescriptor: %v, want os.ErrClosed", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close after DropDescriptor: %v", err)
	}
}
