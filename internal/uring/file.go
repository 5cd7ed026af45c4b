package uring

import (
	"fmt"
	"os"
	"sync/atomic"
)

// File is an open file known to a Ring: the target of Ops, registered in the
// ring's fixed-file table when a slot is free. Its synchronous methods
// (ReadAt, WriteAt, Sync, Truncate, Size, Preallocate) bypass the ring — one
// blocking syscall in the calling goroutine is cheaper than a round trip
// through the ring owner — so a *File satisfies segment.File as it is, and
// the same File takes asynchronous Ops through Ring.Submit.
//
// The File owns the *os.File: keep it referenced only through the File and
// close it with File.Close, after every Op on it has completed.
type File struct {
	f    *os.File
	fd   int
	ring *Ring

	// slot is the registered-file index, or -1. Written only by the ring
	// owner (before RegisterFile returns, and in Close).
	slot int32

	inflight atomic.Int64 // accepted ops not yet completed
	closed   atomic.Bool
	dropped  atomic.Bool // f was closed by DropDescriptor; Ops use the slot
}

// RegisterFile makes f the target of Ops on r and takes ownership of it.
// Registration in the fixed-file table is best effort: when the table is full
// or disabled, Ops use the plain descriptor. RegisterFile blocks until the
// ring owner has processed it, so it must not be called from a Done callback.
func (r *Ring) RegisterFile(f *os.File) (*File, error) {
	if f == nil {
		return nil, fmt.Errorf("%w: nil *os.File", ErrInvalid)
	}
	fd, err := rawFd(f)
	if err != nil {
		return nil, err
	}
	file := &File{f: f, fd: fd, ring: r, slot: -1}
	if err := r.control(opRegister, file); err != nil {
		return nil, err
	}
	return file, nil
}

// control runs a register/unregister op on the ring owner and waits for it.
func (r *Ring) control(code Opcode, f *File) error {
	done := make(chan struct{})
	op := &Op{Code: code, File: f, Done: func(*Op) { close(done) }}
	if err := r.eng.control(op); err != nil {
		return err
	}
	<-done
	return nil
}

// Name is the file's name as given to os.OpenFile.
func (f *File) Name() string { return f.f.Name() }

// Fd is the OS descriptor (for the segment.File interface), ^uintptr(0)
// after DropDescriptor. Never close it.
func (f *File) Fd() uintptr {
	if f.dropped.Load() {
		return ^uintptr(0)
	}
	return uintptr(f.fd)
}

// OSFile returns the underlying *os.File (for sendfile by offset). Never
// seek or close it.
func (f *File) OSFile() *os.File { return f.f }

// Registered reports whether the file occupies a fixed-file slot.
func (f *File) Registered() bool { return f.slot >= 0 }

// ReadAt reads with pread, synchronously (io.ReaderAt).
func (f *File) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

// WriteAt writes with pwrite, synchronously (io.WriterAt).
func (f *File) WriteAt(p []byte, off int64) (int, error) { return f.f.WriteAt(p, off) }

// Sync flushes written data with fdatasync, synchronously.
func (f *File) Sync() error { return datasync(f.f) }

// Truncate changes the file's size.
func (f *File) Truncate(size int64) error { return f.f.Truncate(size) }

// Size reports the file's size (i_size).
func (f *File) Size() (int64, error) {
	st, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// Preallocate reserves blocks for [0, size) without changing i_size
// (fallocate with FALLOC_FL_KEEP_SIZE). handled is false where the platform
// or filesystem cannot.
func (f *File) Preallocate(size int64) (handled bool, err error) {
	return fallocateKeepSize(f.f, size)
}

// DropDescriptor closes the file's own descriptor when the file occupies
// a fixed-file slot: Ops keep reaching it through the slot (the ring's
// table holds its own reference to the open file), so a registered file
// costs the process no descriptor. It reports whether it did; an
// unregistered file keeps its descriptor. Afterwards only Ops through the
// Ring work: the synchronous methods (ReadAt, WriteAt, Sync, Truncate,
// Size, Preallocate) fail with os.ErrClosed and OSFile returns a closed
// *os.File, so use another descriptor of the same file for those. Call it
// before any Op is submitted on the file, from the goroutine that
// registered it.
func (f *File) DropDescriptor() (bool, error) {
	if f.slot < 0 || f.closed.Load() || f.dropped.Load() {
		return false, nil
	}
	if err := f.f.Close(); err != nil {
		return false, err
	}
	f.dropped.Store(true)
	return true, nil
}

// Close removes the file from the ring's fixed-file table and closes it. It
// fails with ErrBusy while Ops on the file are in flight, and with ErrClosed
// the second time.
func (f *File) Close() error {
	if !f.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if f.inflight.Load() != 0 {
		f.closed.Store(false)
		return ErrBusy
	}
	if err := f.ring.control(opUnregister, f); err != nil && err != ErrClosed {
		return err
	}
	if f.dropped.Load() {
		return nil
	}
	return f.f.Close()
}
