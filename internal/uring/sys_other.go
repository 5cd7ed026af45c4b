//go:build !linux

package uring

import (
	"os"
	"unsafe"
)

func rawFd(f *os.File) (int, error) { return int(f.Fd()), nil }

// datasync falls back to fsync where fdatasync is not portable.
func datasync(f *os.File) error { return f.Sync() }

func fallocateKeepSize(f *os.File, size int64) (bool, error) { return false, nil }

// fallocate raises f's size to off+n where it is smaller (no allocation
// call here).
func fallocate(f *os.File, off, n int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() >= off+n {
		return nil
	}
	return f.Truncate(off + n)
}

// mapAnon returns n bytes aligned to Alignment from the Go heap (which does
// not move objects); the pool keeps it referenced.
func mapAnon(n int) ([]byte, error) {
	raw := make([]byte, n+Alignment)
	skip := (Alignment - int(uintptr(unsafe.Pointer(&raw[0]))%Alignment)) % Alignment
	return raw[skip : skip+n : skip+n], nil
}

func unmapAnon(b []byte) error { return nil }

func mapAnonPaged(n int, late bool) ([]byte, error) { return mapAnon(n) }

func newUringEngine(r *Ring, cfg Config) (engine, error) {
	return nil, ErrUnavailable
}

// hugeBacked reports whether b is backed by huge pages: never known here.
func hugeBacked([]byte) bool { return false }
