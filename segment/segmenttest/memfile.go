// Package segmenttest provides fakes for testing code built on package
// segment: MemFile, an in-memory segment.File that remembers which writes
// were synced and can simulate a crash (dropping unsynced writes, or keeping
// a random prefix of them with the last one torn); FaultyFile, a wrapper
// injecting errors into chosen operations; and MakeBatch, which builds a
// valid RecordBatch v2 by hand for tests that must not depend on
// record.Builder.
package segmenttest

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"

	"github.com/stratalog/strata/segment"
)

// ErrCrashed is returned by a MemFile that has been crashed; use the file
// returned by the crash method instead.
var ErrCrashed = errors.New("segmenttest: file crashed")

var _ segment.File = (*MemFile)(nil)

// memOp is one mutation since the last Sync, kept to replay a crash.
type memOp struct {
	off      int64
	data     []byte // write; nil for a truncate
	truncate bool
	size     int64 // truncate target
}

// MemFile is an in-memory segment.File. Reads see every write; only writes
// and truncates followed by a Sync survive Crash. Safe for concurrent use.
type MemFile struct {
	mu      sync.Mutex
	data    []byte  // current contents
	synced  []byte  // contents as of the last Sync
	pending []memOp // mutations since the last Sync, in order
	syncs   int
	closed  bool
	crashed bool
}

// NewMemFile returns a file holding a copy of initial, all of it synced.
func NewMemFile(initial []byte) *MemFile {
	return &MemFile{
		data:   append([]byte(nil), initial...),
		synced: append([]byte(nil), initial...),
	}
}

func (f *MemFile) check() error {
	switch {
	case f.crashed:
		return ErrCrashed
	case f.closed:
		return os.ErrClosed
	}
	return nil
}

// ReadAt implements io.ReaderAt.
func (f *MemFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("segmenttest: negative offset %d", off)
	}
	if off >= int64(len(f.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt implements io.WriterAt, extending the file with zeros as needed.
func (f *MemFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("segmenttest: negative offset %d", off)
	}
	f.data = writeAt(f.data, p, off)
	f.pending = append(f.pending, memOp{off: off, data: append([]byte(nil), p...)})
	return len(p), nil
}

func writeAt(dst, p []byte, off int64) []byte {
	if end := off + int64(len(p)); end > int64(len(dst)) {
		dst = append(dst, make([]byte, end-int64(len(dst)))...)
	}
	copy(dst[off:], p)
	return dst
}

func truncate(dst []byte, size int64) []byte {
	if size <= int64(len(dst)) {
		return dst[:size]
	}
	return append(dst, make([]byte, size-int64(len(dst)))...)
}

// Truncate changes the size, zero-filling when it grows.
func (f *MemFile) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("segmenttest: negative size %d", size)
	}
	f.data = truncate(f.data, size)
	f.pending = append(f.pending, memOp{truncate: true, size: size})
	return nil
}

// Sync makes every write and truncate so far survive a Crash.
func (f *MemFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return err
	}
	f.synced = append(f.synced[:0], f.data...)
	f.pending = f.pending[:0]
	f.syncs++
	return nil
}

// Size returns the current size.
func (f *MemFile) Size() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return 0, err
	}
	return int64(len(f.data)), nil
}

// Close marks the file closed; the contents stay readable via Bytes.
func (f *MemFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// Fd returns ^uintptr(0): a MemFile has no descriptor.
func (f *MemFile) Fd() uintptr { return ^uintptr(0) }

// Bytes returns a copy of the current contents.
func (f *MemFile) Bytes() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]byte(nil), f.data...)
}

// SyncedBytes returns a copy of the contents as of the last Sync.
func (f *MemFile) SyncedBytes() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]byte(nil), f.synced...)
}

// Pending is the number of writes and truncates not yet synced.
func (f *MemFile) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// Syncs is the number of successful Sync calls.
func (f *MemFile) Syncs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// Crash simulates power loss: it returns the file as it would be found after
// a restart, holding only synced data. f itself fails every call afterwards.
func (f *MemFile) Crash() *MemFile {
	return f.CrashAfter(0, 0)
}

// CrashRandom simulates power loss that kept a random prefix of the unsynced
// mutations, the last kept write possibly torn (a random prefix of its bytes).
func (f *MemFile) CrashRandom(rng *rand.Rand) *MemFile {
	f.mu.Lock()
	n := len(f.pending)
	torn := 0
	keep := rng.IntN(n + 1)
	if keep < n && f.pending[keep].data != nil {
		torn = rng.IntN(len(f.pending[keep].data) + 1)
	}
	f.mu.Unlock()
	return f.CrashAfter(keep, torn)
}

// CrashAfter simulates power loss that kept the first keep unsynced mutations
// and tornBytes bytes of the next one (if it is a write).
func (f *MemFile) CrashAfter(keep, tornBytes int) *MemFile {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashed = true
	out := append([]byte(nil), f.synced...)
	keep = min(max(keep, 0), len(f.pending))
	for _, op := range f.pending[:keep] {
		out = apply(out, op)
	}
	if keep < len(f.pending) && f.pending[keep].data != nil && tornBytes > 0 {
		op := f.pending[keep]
		op.data = op.data[:min(tornBytes, len(op.data))]
		out = apply(out, op)
	}
	return &MemFile{data: out, synced: append([]byte(nil), out...)}
}

func apply(dst []byte, op memOp) []byte {
	if op.truncate {
		return truncate(dst, op.size)
	}
	return writeAt(dst, op.data, op.off)
}
