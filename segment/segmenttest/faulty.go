package segmenttest

import (
	"errors"
	"sync/atomic"

	"github.com/stratalog/strata/segment"
)

// Op names a File operation for fault injection.
type Op uint8

const (
	OpRead Op = iota
	OpWrite
	OpSync
	OpTruncate
	numOps
)

func (o Op) String() string {
	switch o {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	case OpTruncate:
		return "truncate"
	}
	return "op?"
}

// ErrInjected is the default injected error.
var ErrInjected = errors.New("segmenttest: injected fault")

// ShortWrite, returned by an Injector for OpWrite, makes FaultyFile write the
// first N bytes before failing with Err (a disk filling up mid-write).
type ShortWrite struct {
	N   int
	Err error
}

func (e *ShortWrite) Error() string { return "short write: " + e.Err.Error() }
func (e *ShortWrite) Unwrap() error { return e.Err }

// Injector decides whether the call number call (1-based, per Op) of op at
// off with n bytes fails. It must be safe for concurrent use.
type Injector func(op Op, call int64, off int64, n int) error

// FailNth fails only the nth call (1-based) of op with err.
func FailNth(op Op, nth int64, err error) Injector {
	return func(o Op, call, _ int64, _ int) error {
		if o == op && call == nth {
			return err
		}
		return nil
	}
}

// FailFrom fails the nth call of op and every later one with err.
func FailFrom(op Op, nth int64, err error) Injector {
	return func(o Op, call, _ int64, _ int) error {
		if o == op && call >= nth {
			return err
		}
		return nil
	}
}

var _ segment.File = (*FaultyFile)(nil)

// FaultyFile wraps a segment.File and fails operations chosen by an Injector.
type FaultyFile struct {
	segment.File
	inject Injector
	calls  [numOps]atomic.Int64
}

// NewFaultyFile wraps f; inject may be nil (no faults).
func NewFaultyFile(f segment.File, inject Injector) *FaultyFile {
	return &FaultyFile{File: f, inject: inject}
}

func (f *FaultyFile) fault(op Op, off int64, n int) error {
	call := f.calls[op].Add(1)
	if f.inject == nil {
		return nil
	}
	return f.inject(op, call, off, n)
}

// Calls reports how many times op was called (failed calls included).
func (f *FaultyFile) Calls(op Op) int64 { return f.calls[op].Load() }

func (f *FaultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fault(OpRead, off, len(p)); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *FaultyFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fault(OpWrite, off, len(p)); err != nil {
		var sw *ShortWrite
		if errors.As(err, &sw) && sw.N > 0 {
			n, werr := f.File.WriteAt(p[:min(sw.N, len(p))], off)
			if werr != nil {
				return n, werr
			}
			return n, err
		}
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *FaultyFile) Sync() error {
	if err := f.fault(OpSync, 0, 0); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *FaultyFile) Truncate(size int64) error {
	if err := f.fault(OpTruncate, size, 0); err != nil {
		return err
	}
	return f.File.Truncate(size)
}
