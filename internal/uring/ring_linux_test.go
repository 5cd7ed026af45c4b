package uring

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// backends is the table every behavioural test runs over: the io_uring
// engine and the forced pwrite fallback must pass the same suite.
var backends = []Backend{BackendUring, BackendPwrite}

// TestUringCompletesOutOfOrder makes completion order differ from submission
// order on purpose: a read of an empty pipe is submitted first and stays in
// flight while later writes complete; it completes last, once data arrives.
// (pread on a pipe is ESPIPE, so this scenario is io_uring only; the pwrite
// backend's workers reorder completions in the other tests.)
func TestUringCompletesOutOfOrder(t *testing.T) {
	r := newTestRing(t, BackendUring, nil)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	pipe, err := r.RegisterFile(pr)
	if err != nil {
		t.Fatal(err)
	}
	f := openTestFile(t, r, 0)

	var order []string // appended only from Done callbacks (never concurrent)
	readDone := make(chan struct{})
	read := &Op{Code: OpRead, File: pipe, Buf: make([]byte, 5), Done: func(op *Op) {
		order = append(order, "read")
		close(readDone)
	}}
	if err := r.Submit(read); err != nil {
		t.Fatal(err)
	}
	const writes = 20
	wb := newBatch(writes)
	var wm Watermark
	var wmErr error
	for i := range writes {
		buf := make([]byte, 4096)
		fill(buf, byte(i))
		// Complete in the watermark from the callback, as an appender does.
		op := &Op{Code: OpWrite, File: f, Buf: buf, Off: int64(i) * 4096, Done: func(op *Op) {
			order = append(order, "write")
			if _, err := wm.Complete(op.Off, int64(op.N)); err != nil && wmErr == nil {
				wmErr = err
			}
			wb.done(op)
		}}
		if err := r.Submit(op); err != nil {
			t.Fatal(err)
		}
	}
	wb.wait(t)
	select {
	case <-readDone:
		t.Fatal("pipe read completed before any data was written")
	default:
	}
	if _, err := pw.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	<-readDone
	if read.Err != nil || string(read.Buf[:read.N]) != "hello" {
		t.Fatalf("pipe read: n=%d err=%v data=%q", read.N, read.Err, read.Buf[:read.N])
	}
	if len(order) != writes+1 || order[writes] != "read" {
		t.Fatalf("completion order %v: want %d writes then the read", order, writes)
	}
	if wmErr != nil || wm.Value() != writes*4096 {
		t.Fatalf("watermark %d (err %v), want %d", wm.Value(), wmErr, writes*4096)
	}
	if err := pipe.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDirectIOWithPool writes and reads an O_DIRECT file from pool chunks.
// On io_uring the pool is registered, so the ring must have used
// WRITE_FIXED/READ_FIXED and the registered file; every op must have been a
// reaped CQE (the ring was really used).
func TestDirectIOWithPool(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			pool, err := NewPool(64<<10, 8)
			if err != nil {
				t.Fatal(err)
			}
			r := newTestRing(t, b, func(c *Config) { c.Pools = []*Pool{pool} })
			t.Cleanup(func() {
				r.Close()
				if err := pool.Close(); err != nil {
					t.Errorf("pool Close after ring Close: %v", err)
				}
			})
			f := openTestFile(t, r, syscall.O_DIRECT)
			const writes = 64
			wb := newBatch(writes)
			var bufs [][]byte
			putBack := func(op *Op) {
				pool.Put(op.Buf)
				wb.done(op)
			}
			for i := range writes {
				buf := pool.Get()
				fill(buf, byte(i))
				want := append([]byte(nil), buf...)
				bufs = append(bufs, want)
				if err := r.Submit(&Op{Code: OpWrite, File: f, Buf: buf, Off: int64(i * len(buf)), Done: putBack}); err != nil {
					t.Fatal(err)
				}
			}
			wb.wait(t)
			for i, want := range bufs {
				buf := pool.Get()
				n, err := do(t, r, &Op{Code: OpRead, File: f, Buf: buf, Off: int64(i * len(buf))})
				if err != nil || n != len(buf) || !bytes.Equal(buf, want) {
					t.Fatalf("O_DIRECT read %d: n=%d err=%v equal=%v", i, n, err, bytes.Equal(buf, want))
				}
				pool.Put(buf)
			}
			st := r.Stats()
			if b == BackendUring {
				if !f.Registered() || st.FixedFile < 2*writes || st.FixedBufs < 2*writes || st.CQEs < 2*writes {
					t.Fatalf("ring not used as configured: registered=%v stats %+v", f.Registered(), st)
				}
			} else if st.SQEs != 0 || st.CQEs != 0 || f.Registered() {
				t.Fatalf("pwrite backend touched a ring: %+v", st)
			}
			if pool.Free() != pool.Chunks() {
				t.Fatalf("pool has %d of %d chunks back", pool.Free(), pool.Chunks())
			}
		})
	}
}

// TestFileSlotsExhausted: files beyond the registered table fall back to
// plain descriptors and work the same; a freed slot is reused.
func TestFileSlotsExhausted(t *testing.T) {
	r := newTestRing(t, BackendUring, func(c *Config) { c.FileSlots = 1 })
	a := openTestFile(t, r, 0)
	b := openTestFile(t, r, 0)
	if !a.Registered() || b.Registered() {
		t.Fatalf("registered: a=%v b=%v, want true false", a.Registered(), b.Registered())
	}
	for _, f := range []*File{a, b} {
		if _, err := do(t, r, &Op{Code: OpWrite, File: f, Buf: []byte("slot"), Off: 3}); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f.Name())
		if err != nil || string(got) != "\x00\x00\x00slot" {
			t.Fatalf("%q %v", got, err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second File.Close: %v, want ErrClosed", err)
	}
	c := openTestFile(t, r, 0)
	if !c.Registered() {
		t.Fatal("slot freed by Close was not reused")
	}
	if err := r.Submit(&Op{Code: OpFsync, File: a, Done: func(*Op) {}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit on a closed File: %v, want ErrClosed", err)
	}
}

// TestAutoPicksUring: on this kernel auto must select io_uring (the
// benchmarks and the segment appender rely on it).
func TestAutoPicksUring(t *testing.T) {
	r, err := New(Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Backend() != BackendUring {
		t.Fatalf("auto chose %s on a kernel with io_uring", r.Backend())
	}
	path := filepath.Join(t.TempDir(), "nop")
	osf, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := r.RegisterFile(osf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := do(t, r, &Op{Code: OpNop}); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.CQEs != 1 || st.SQEs != 1 || st.Enters == 0 {
		t.Fatalf("stats after one nop: %+v", st)
	}
}

// TestPoolRegisteredOutlivesRing: a pool registered with a ring cannot be
// unmapped until the ring is closed.
func TestPoolRegisteredOutlivesRing(t *testing.T) {
	p, err := NewPool(Alignment, 2)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Backend: BackendUring, Pools: []*Pool{p}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close of a registered pool: %v, want ErrBusy", err)
	}
	r.Close()
	if err := p.Close(); err != nil {
		t.Fatalf("Close after the ring closed: %v", err)
	}
}

// A pool registered after setup (RegisterPool) makes writes on its chunks
// WRITE_FIXED like a Config.Pools one; a pool never registered does not,
// and both write the same bytes. The registered pool outlives the ring.
func TestRegisterPoolAfterSetup(t *testing.T) {
	first, err := NewPool(64<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	late, err := NewPool(64<<10, 4)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewPool(64<<10, 4)
	if err != nil {
		t.Fatal(err)
	}
	r := newTestRing(t, BackendUring, func(c *Config) { c.Pools = []*Pool{first} })
	if err := r.RegisterPool(late); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.String(), "fixed-buffers=2") {
		t.Fatalf("ring %s: want 2 registered buffers", r)
	}
	f := openTestFile(t, r, syscall.O_DIRECT)
	write := func(p *Pool, off int64, v byte) {
		t.Helper()
		buf := p.Get()
		defer p.Put(buf)
		fill(buf, v)
		if _, err := do(t, r, &Op{Code: OpWrite, File: f, Buf: buf, Off: off}); err != nil {
			t.Fatal(err)
		}
	}
	before := r.Stats().FixedBufs
	write(late, 0, 1)
	if got := r.Stats().FixedBufs - before; got != 1 {
		t.Fatalf("write on a RegisterPool chunk: %d fixed-buffer SQEs, want 1", got)
	}
	write(other, 64<<10, 2)
	if got := r.Stats().FixedBufs - before; got != 1 {
		t.Fatalf("write on an unregistered chunk used a fixed buffer (%d)", got)
	}
	buf := other.Get()
	for i, v := range []byte{1, 2} {
		if _, err := do(t, r, &Op{Code: OpRead, File: f, Buf: buf, Off: int64(i) << 16}); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, len(buf))
		fill(want, v)
		if !bytes.Equal(buf, want) {
			t.Fatalf("block %d reads other bytes than written", i)
		}
	}
	other.Put(buf)
	if err := late.Close(); err != ErrBusy {
		t.Fatalf("Close of a pool registered with an open ring: %v, want ErrBusy", err)
	}
	r.Close()
	for _, p := range []*Pool{first, late, other} {
		if err := p.Close(); err != nil {
			t.Fatalf("pool Close after the ring closed: %v", err)
		}
	}
}

// TestBusyOwnerYields keeps the ring owner looping (a stream of nops, each
// submitted when the last completes) for longer than yieldEvery and checks
// that it passed through the Go scheduler: without that, the runtime's
// sysmon sees its P stuck on one goroutine and retakes it every 10 ms.
func TestBusyOwnerYields(t *testing.T) {
	r := newTestRing(t, BackendUring, nil)
	done := make(chan struct{}, 1)
	op := &Op{Code: OpNop, Done: func(*Op) { done <- struct{}{} }}
	deadline := time.Now().Add(10 * time.Second) // bound only; 2*yieldEvery suffices
	start := time.Now()
	n := 0
	for r.Stats().Yields == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no yield after %d nops over %v of a busy owner (yieldEvery %v)", n, time.Since(start), yieldEvery)
		}
		if err := r.Submit(op); err != nil {
			t.Fatal(err)
		}
		<-done
		if op.Err != nil {
			t.Fatal(op.Err)
		}
		n++
	}
}

// TestOwnerYieldsByConfigNow: the owner's yield reads Config.Now. With a
// clock that stands still a busy owner never yields; with one that moves
// yieldEvery per read it yields on its next pass.
func TestOwnerYieldsByConfigNow(t *testing.T) {
	nops := func(r *Ring, n int) {
		done := make(chan struct{}, 1)
		op := &Op{Code: OpNop, Done: func(*Op) { done <- struct{}{} }}
		for range n {
			if err := r.Submit(op); err != nil {
				t.Fatal(err)
			}
			<-done
			if op.Err != nil {
				t.Fatal(op.Err)
			}
		}
	}
	still := newTestRing(t, BackendUring, func(c *Config) { c.Now = func() time.Time { return time.Unix(1000, 0) } })
	nops(still, 200)
	if y := still.Stats().Yields; y != 0 {
		t.Fatalf("%d yields with a clock that stands still", y)
	}
	var ns atomic.Int64
	moving := newTestRing(t, BackendUring, func(c *Config) {
		c.Now = func() time.Time { return time.Unix(0, ns.Add(int64(yieldEvery))) }
	})
	nops(moving, 20)
	if y := moving.Stats().Yields; y == 0 {
		t.Fatal("no yield with a clock that moves yieldEvery per read")
	}
}
