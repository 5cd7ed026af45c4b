package uring

import (
	"github.com/stratalog/strata/internal/stratatest"

	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// logBuffer collects log output from any goroutine.
type logBuffer = stratatest.LogBuffer

// newTestRing starts a ring with the given backend (failing the test if it
// is not the one in use) and closes it at cleanup.
func newTestRing(t testing.TB, b Backend, mod func(*Config)) *Ring {
	t.Helper()
	cfg := Config{Backend: b, Logger: quietLogger()}
	if mod != nil {
		mod(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", b, err)
	}
	if r.Backend() != b {
		t.Fatalf("backend %s in use, want %s", r.Backend(), b)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// openTestFile creates a file in a temp dir with extra open flags, registers
// it with r and closes it at cleanup.
func openTestFile(t testing.TB, r *Ring, flags int) *File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	osf, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|flags, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f, err := r.RegisterFile(osf)
	if err != nil {
		osf.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// do submits op and waits for its completion.
func do(t testing.TB, r *Ring, op *Op) (int, error) {
	t.Helper()
	done := make(chan struct{})
	op.Done = func(*Op) { close(done) }
	if err := r.Submit(op); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	<-done
	return op.N, op.Err
}

// batch counts completions of many ops and records the first failure.
type batch struct {
	mu     sync.Mutex
	n      int
	want   int
	first  error
	doneCh chan struct{}
}

func newBatch(want int) *batch { return &batch{want: want, doneCh: make(chan struct{})} }

// done is a Done callback: it checks that the whole buffer moved.
func (b *batch) done(op *Op) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.first == nil {
		switch {
		case op.Err != nil:
			b.first = op.Err
		case op.Code != OpFsync && op.N != len(op.Buf):
			b.first = io.ErrShortWrite
		}
	}
	b.n++
	if b.n == b.want {
		close(b.doneCh)
	}
}

func (b *batch) wait(t testing.TB) {
	t.Helper()
	<-b.doneCh
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.first != nil {
		t.Fatalf("op failed: %v", b.first)
	}
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
}
