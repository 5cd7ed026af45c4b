package uring

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// TestRoundTripRandomOffsets writes buffers of random lengths at random
// non-overlapping offsets, all in flight together (more than the ring holds,
// so the queue is exercised), syncs, reads every range back through the ring
// and compares it and the whole file with a model.
func TestRoundTripRandomOffsets(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			r := newTestRing(t, b, func(c *Config) { c.Entries = 8 })
			f := openTestFile(t, r, 0)
			const cell, cells = 64 << 10, 128
			rng := rand.New(rand.NewPCG(1, uint64(len(b))))
			model := make([]byte, cell*cells)
			ops := make([]*Op, cells)
			wb := newBatch(cells)
			for i, c := range rng.Perm(cells) {
				n := 1 + rng.IntN(cell)
				off := int64(c*cell + rng.IntN(cell-n+1))
				buf := make([]byte, n)
				fill(buf, byte(i))
				copy(model[off:], buf)
				ops[i] = &Op{Code: OpWrite, File: f, Buf: buf, Off: off, Done: wb.done}
			}
			for _, op := range ops {
				if err := r.Submit(op); err != nil {
					t.Fatal(err)
				}
			}
			wb.wait(t)
			if _, err := do(t, r, &Op{Code: OpFsync, File: f, Datasync: true}); err != nil {
				t.Fatalf("fdatasync: %v", err)
			}

			rb := newBatch(cells)
			reads := make([]*Op, cells)
			for i, w := range ops {
				reads[i] = &Op{Code: OpRead, File: f, Buf: make([]byte, len(w.Buf)), Off: w.Off, Done: rb.done}
				if err := r.Submit(reads[i]); err != nil {
					t.Fatal(err)
				}
			}
			rb.wait(t)
			for i, w := range ops {
				if !bytes.Equal(reads[i].Buf, w.Buf) {
					t.Fatalf("range %d at %d: read back differs from what was written", i, w.Off)
				}
			}
			got, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			end := int64(0)
			for _, w := range ops {
				end = max(end, w.Off+int64(len(w.Buf)))
			}
			if !bytes.Equal(got, model[:end]) {
				t.Fatalf("file content differs from the model (len %d, want %d)", len(got), end)
			}
		})
	}
}

// TestConcurrentSubmitters has many goroutines submitting at once, each
// waiting for its own completions (run with -race).
func TestConcurrentSubmitters(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			r := newTestRing(t, b, func(c *Config) { c.Entries = 16 })
			f := openTestFile(t, r, 0)
			const goroutines, perG, size = 8, 200, 1024
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					bt := newBatch(perG)
					ops := make([]Op, perG)
					for i := range ops {
						buf := make([]byte, size)
						fill(buf, byte(g*31+i))
						ops[i] = Op{Code: OpWrite, File: f, Buf: buf, Off: int64((g*perG + i) * size), Done: bt.done}
						if err := r.Submit(&ops[i]); err != nil {
							errs <- err
							return
						}
					}
					<-bt.doneCh
					errs <- bt.first
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, size)
			for g := range goroutines {
				for i := range perG {
					fill(want, byte(g*31+i))
					off := (g*perG + i) * size
					if !bytes.Equal(got[off:off+size], want) {
						t.Fatalf("goroutine %d op %d: content differs", g, i)
					}
				}
			}
			st := r.Stats()
			if st.Submitted != st.Completed || st.Completed < goroutines*perG {
				t.Fatalf("stats %+v: want Submitted == Completed >= %d", st, goroutines*perG)
			}
		})
	}
}

// TestFallocate: OpFallocate raises the file's size to Off+Len and never
// lowers it; an empty or negative range is refused at Submit.
func TestFallocate(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			r := newTestRing(t, b, nil)
			f := openTestFile(t, r, 0)
			size := func() int64 {
				st, err := os.Stat(f.Name())
				if err != nil {
					t.Fatal(err)
				}
				return st.Size()
			}
			if n, err := do(t, r, &Op{Code: OpFallocate, File: f, Off: 0, Len: 1 << 20}); n != 0 || err != nil {
				t.Fatalf("fallocate: n=%d err=%v", n, err)
			}
			if got := size(); got != 1<<20 {
				t.Fatalf("size after fallocate of 1 MiB: %d", got)
			}
			if _, err := do(t, r, &Op{Code: OpFallocate, File: f, Off: 4096, Len: 4096}); err != nil {
				t.Fatal(err)
			}
			if got := size(); got != 1<<20 {
				t.Fatalf("a range inside the file changed its size to %d", got)
			}
			if _, err := do(t, r, &Op{Code: OpWrite, File: f, Buf: []byte("x"), Off: 5000}); err != nil {
				t.Fatal(err)
			}
			if _, err := do(t, r, &Op{Code: OpFallocate, File: f, Off: 1 << 20, Len: 1 << 20}); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2<<20 || got[5000] != 'x' || got[5001] != 0 || got[(2<<20)-1] != 0 {
				t.Fatalf("after growing: size %d, byte at 5000 %q", len(got), got[5000])
			}
			done := func(*Op) { t.Error("Done called for a refused op") }
			for _, op := range []*Op{
				{Code: OpFallocate, File: f, Off: 0, Len: 0, Done: done},
				{Code: OpFallocate, File: f, Off: -1, Len: 1, Done: done},
			} {
				if err := r.Submit(op); !errors.Is(err, ErrInvalid) {
					t.Errorf("fallocate off %d len %d: %v, want ErrInvalid", op.Off, op.Len, err)
				}
			}
		})
	}
}

// TestFsyncCompletion: fdatasync and fsync complete with N == 0 and no error,
// and a failing write reports the errno as an *os.PathError.
func TestFsyncCompletion(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			r := newTestRing(t, b, nil)
			f := openTestFile(t, r, 0)
			if _, err := do(t, r, &Op{Code: OpWrite, File: f, Buf: []byte("durable"), Off: 0}); err != nil {
				t.Fatal(err)
			}
			for _, ds := range []bool{true, false} {
				n, err := do(t, r, &Op{Code: OpFsync, File: f, Datasync: ds})
				if n != 0 || err != nil {
					t.Fatalf("fsync(datasync=%v): n=%d err=%v", ds, n, err)
				}
			}

			ro, err := os.Open(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			rof, err := r.RegisterFile(ro)
			if err != nil {
				t.Fatal(err)
			}
			defer rof.Close()
			_, err = do(t, r, &Op{Code: OpWrite, File: rof, Buf: []byte("x"), Off: 0})
			var pe *os.PathError
			if !errors.As(err, &pe) || !errors.Is(err, syscall.EBADF) || pe.Path != f.Name() {
				t.Fatalf("write to a read-only file: %v, want *os.PathError with EBADF for %s", err, f.Name())
			}
		})
	}
}

// TestReadAtEOF: a read crossing end of file returns the bytes present and
// io.EOF, like io.ReaderAt.
func TestReadAtEOF(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			r := newTestRing(t, b, nil)
			f := openTestFile(t, r, 0)
			data := bytes.Repeat([]byte("z"), 100)
			if _, err := f.WriteAt(data, 0); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4096)
			n, err := do(t, r, &Op{Code: OpRead, File: f, Buf: buf, Off: 0})
			if n != 100 || err != io.EOF || !bytes.Equal(buf[:n], data) {
				t.Fatalf("read across EOF: n=%d err=%v", n, err)
			}
			n, err = do(t, r, &Op{Code: OpRead, File: f, Buf: buf, Off: 200})
			if n != 0 || err != io.EOF {
				t.Fatalf("read past EOF: n=%d err=%v", n, err)
			}
		})
	}
}

// TestCloseDrains: Close with most ops still queued completes every accepted
// op exactly once, successfully, then refuses new work.
func TestCloseDrains(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			r := newTestRing(t, b, func(c *Config) { c.Entries = 4 })
			f := openTestFile(t, r, 0)
			const n, size = 500, 512
			var calls [n]atomic.Int32
			var failed atomic.Int32
			ops := make([]Op, n)
			for i := range ops {
				buf := make([]byte, size)
				fill(buf, byte(i))
				ops[i] = Op{Code: OpWrite, File: f, Buf: buf, Off: int64(i * size), Tag: uint64(i), Done: func(op *Op) {
					calls[op.Tag].Add(1)
					if op.Err != nil || op.N != size {
						failed.Add(1)
					}
				}}
				if err := r.Submit(&ops[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			for i := range calls {
				if c := calls[i].Load(); c != 1 {
					t.Fatalf("op %d: Done called %d times, want 1", i, c)
				}
			}
			if failed.Load() != 0 {
				t.Fatalf("%d ops failed during drain", failed.Load())
			}
			got, err := os.ReadFile(f.Name())
			if err != nil || len(got) != n*size {
				t.Fatalf("file after drain: len %d err %v", len(got), err)
			}
			late := &Op{Code: OpNop, Done: func(*Op) { t.Error("Done called for an op refused after Close") }}
			if err := r.Submit(late); !errors.Is(err, ErrClosed) {
				t.Fatalf("Submit after Close: %v, want ErrClosed", err)
			}
			if late.state.Load() != 0 {
				t.Fatal("refused op left marked in flight")
			}
			osf, err := os.Open(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			defer osf.Close()
			if _, err := r.RegisterFile(osf); !errors.Is(err, ErrClosed) {
				t.Fatalf("RegisterFile after Close: %v, want ErrClosed", err)
			}
			if err := r.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if err := f.Close(); err != nil {
				t.Fatalf("File.Close after ring Close: %v", err)
			}
		})
	}
}

// TestInFlightGuards holds the callback goroutine inside one Done so a second
// op is deterministically still in flight, then checks that resubmitting it
// fails with ErrBusy and that its File refuses to close.
func TestInFlightGuards(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			r := newTestRing(t, b, nil)
			f := openTestFile(t, r, 0)
			entered, gate := make(chan struct{}), make(chan struct{})
			first := &Op{Code: OpNop, Done: func(*Op) { close(entered); <-gate }}
			if err := r.Submit(first); err != nil {
				t.Fatal(err)
			}
			<-entered
			second := newBatch(1)
			op := &Op{Code: OpWrite, File: f, Buf: []byte("abc"), Done: second.done}
			if err := r.Submit(op); err != nil {
				t.Fatal(err)
			}
			if err := r.Submit(op); !errors.Is(err, ErrBusy) {
				t.Fatalf("resubmitting an op in flight: %v, want ErrBusy", err)
			}
			if err := f.Close(); !errors.Is(err, ErrBusy) {
				t.Fatalf("closing a file with an op in flight: %v, want ErrBusy", err)
			}
			close(gate)
			second.wait(t)
			if err := r.Submit(op); err != nil { // completed ops may be reused
				t.Fatalf("reusing a completed op: %v", err)
			}
		})
	}
}

// TestSubmitValidation: malformed ops are refused synchronously.
func TestSubmitValidation(t *testing.T) {
	r := newTestRing(t, BackendPwrite, nil)
	other := newTestRing(t, BackendPwrite, nil)
	f := openTestFile(t, r, 0)
	g := openTestFile(t, other, 0)
	done := func(*Op) { t.Error("Done called for a refused op") }
	for name, op := range map[string]*Op{
		"nil Done":      {Code: OpNop},
		"negative off":  {Code: OpWrite, File: f, Off: -1, Done: done},
		"nil file":      {Code: OpWrite, Buf: []byte("x"), Done: done},
		"fsync no file": {Code: OpFsync, Done: done},
		"foreign file":  {Code: OpWrite, File: g, Buf: []byte("x"), Done: done},
		"bad opcode":    {Code: opRegister, File: f, Done: done},
	} {
		if err := r.Submit(op); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := r.Submit(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil op: %v, want ErrInvalid", err)
	}
}

// TestDoneResubmits chains 200 sequential writes, each submitted from the
// previous one's Done, reusing one Op.
func TestDoneResubmits(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			r := newTestRing(t, b, nil)
			f := openTestFile(t, r, 0)
			const steps, size = 200, 4096
			buf := make([]byte, size)
			finished := make(chan error, 1)
			var op Op
			op = Op{Code: OpWrite, File: f, Buf: buf, Done: func(op *Op) {
				if op.Err != nil || op.Tag == steps-1 {
					finished <- op.Err
					return
				}
				op.Tag++
				op.Off = int64(op.Tag) * size
				fill(op.Buf, byte(op.Tag))
				if err := r.Submit(op); err != nil {
					finished <- err
				}
			}}
			fill(buf, 0)
			if err := r.Submit(&op); err != nil {
				t.Fatal(err)
			}
			if err := <-finished; err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(f.Name())
			if err != nil || len(got) != steps*size {
				t.Fatalf("len %d err %v", len(got), err)
			}
			want := make([]byte, size)
			for i := range steps {
				fill(want, byte(i))
				if !bytes.Equal(got[i*size:(i+1)*size], want) {
					t.Fatalf("step %d differs", i)
				}
			}
		})
	}
}

// TestFileSyncMethods: the synchronous methods make a *File usable as a
// segment.File.
func TestFileSyncMethods(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			r := newTestRing(t, b, nil)
			f := openTestFile(t, r, 0)
			if handled, err := f.Preallocate(1 << 20); err != nil || !handled {
				t.Fatalf("Preallocate: %v %v", handled, err)
			}
			if _, err := f.WriteAt([]byte("0123456789"), 5); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			if size, err := f.Size(); err != nil || size != 15 {
				t.Fatalf("Size = %d, %v; want 15 (KEEP_SIZE preallocation must not change it)", size, err)
			}
			buf := make([]byte, 4)
			if n, err := f.ReadAt(buf, 8); n != 4 || err != nil || string(buf) != "3456" {
				t.Fatalf("ReadAt: %d %v %q", n, err, buf)
			}
			if err := f.Truncate(7); err != nil {
				t.Fatal(err)
			}
			if size, _ := f.Size(); size != 7 {
				t.Fatalf("size after Truncate = %d", size)
			}
			if f.OSFile() == nil || f.Fd() != f.OSFile().Fd() {
				t.Fatal("Fd/OSFile mismatch")
			}
		})
	}
}

// TestSubmitDoesNotAllocate: the submit/complete path is allocation free
// once warm, on both backends.
func TestSubmitDoesNotAllocate(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			r := newTestRing(t, b, nil)
			f := openTestFile(t, r, 0)
			ch := make(chan struct{}, 1)
			op := &Op{Code: OpWrite, File: f, Buf: make([]byte, 512), Done: func(*Op) { ch <- struct{}{} }}
			allocs := testing.AllocsPerRun(200, func() {
				if err := r.Submit(op); err != nil {
					panic(err)
				}
				<-ch
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per submit+complete, want 0", allocs)
			}
		})
	}
}

func TestParseBackend(t *testing.T) {
	for in, want := range map[string]Backend{"": BackendAuto, "auto": BackendAuto, "uring": BackendUring, "pwrite": BackendPwrite} {
		if got, err := ParseBackend(in); err != nil || got != want {
			t.Errorf("ParseBackend(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseBackend("aio"); err == nil {
		t.Error("ParseBackend(aio) succeeded")
	}
	if _, err := New(Config{Backend: "aio"}); err == nil {
		t.Error("New with an unknown backend succeeded")
	}
	if _, err := New(Config{Entries: -1}); err == nil {
		t.Error("New with Entries -1 succeeded")
	}
}

// TestCloseRaces opens and closes rings many times with ops racing Close,
// where a lost wakeup would hang Close (the test binary's timeout catches it).
func TestCloseRaces(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			for i := range 200 {
				r, err := New(Config{Backend: b, Entries: 4, Logger: quietLogger()})
				if err != nil {
					t.Fatal(err)
				}
				var done atomic.Int32
				accepted := 0
				for range i % 7 {
					if r.Submit(&Op{Code: OpNop, Done: func(*Op) { done.Add(1) }}) == nil {
						accepted++
					}
				}
				// A control op completes inside the owner's turn, after it
				// last looked at closing: Close right behind it is the
				// narrowest window for a lost wakeup.
				osf, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				f, err := r.RegisterFile(osf)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				var racer sync.WaitGroup
				racer.Add(1)
				go func() { // may lose to Close
					defer racer.Done()
					r.Submit(&Op{Code: OpNop, Done: func(*Op) { done.Add(1) }})
				}()
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
				racer.Wait()
				if got := int(done.Load()); got < accepted {
					t.Fatalf("round %d: %d of %d accepted ops completed before Close returned", i, got, accepted)
				}
			}
		})
	}
}
