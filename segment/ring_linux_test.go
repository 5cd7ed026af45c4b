//go:build linux

package segment_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/stratalog/strata/internal/uring"
	"github.com/stratalog/strata/segment"
)

// backend is one way of writing a segment, for table-driven tests.
type backend struct {
	name string
	opts func(t testing.TB) segment.Options
}

func newRing(t testing.TB, b uring.Backend) *uring.Ring {
	t.Helper()
	r, err := uring.New(uring.Config{Backend: b, Entries: 64})
	if err != nil {
		t.Fatalf("uring.New(%s): %v", b, err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("ring close: %v", err)
		}
	})
	return r
}

var backends = []backend{
	{"pwrite", func(testing.TB) segment.Options { return segment.Options{} }},
	{"ring-buffered", func(t testing.TB) segment.Options {
		return segment.Options{Ring: newRing(t, uring.BackendUring)}
	}},
	{"ring-direct", func(t testing.TB) segment.Options {
		return segment.Options{Ring: newRing(t, uring.BackendUring), Direct: true}
	}},
	{"ring-direct-prewrite", func(t testing.TB) segment.Options {
		return segment.Options{Ring: newRing(t, uring.BackendUring), Direct: true, PreWrite: true}
	}},
	{"ring-direct-sharedmeta", func(t testing.TB) segment.Options {
		return segment.Options{Ring: newRing(t, uring.BackendUring), Direct: true, SharedMeta: true}
	}},
	{"ringfallback-direct", func(t testing.TB) segment.Options {
		return segment.Options{Ring: newRing(t, uring.BackendPwrite), Direct: true}
	}},
}

// readAll reads [0, Size()) through ReadAt and through File() (the buffered
// descriptor sendfile uses) and checks both against want.
func checkContent(t *testing.T, s *segment.Segment, want []byte) {
	t.Helper()
	if got := s.Size(); got != int64(len(want)) {
		t.Fatalf("Size = %d, want %d", got, len(want))
	}
	if w := s.Written(); w > s.Size() {
		t.Fatalf("Written %d > Size %d", w, s.Size())
	}
	// Before Flush, readers get a prefix of the model: never unwritten bytes.
	pre := make([]byte, len(want))
	n, _ := s.ReadAt(pre, 0)
	if int64(n) > s.Written() || !bytes.Equal(pre[:n], want[:n]) {
		t.Fatalf("ReadAt before Flush: %d bytes (Written %d), match=%v", n, s.Written(), bytes.Equal(pre[:n], want[:n]))
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if s.Written() != s.Size() {
		t.Fatalf("after Flush: Written %d, Size %d", s.Written(), s.Size())
	}
	got := make([]byte, len(want))
	if n, err := s.ReadAt(got, 0); n != len(want) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("ReadAt content differs from the model (first diff at %d)", firstDiff(got, want))
	}
	clear(got)
	if n, err := s.File().ReadAt(got, 0); n != len(want) || (err != nil && err != io.EOF) {
		t.Fatalf("File().ReadAt = %d, %v", n, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("File() content differs from the model (first diff at %d)", firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestBackendsAppendSyncReopenRecover(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			opts := be.opts(t)
			rng := rand.New(rand.NewPCG(1, 2))
			log, bounds := genLog(rng, 0, 60, 9000)
			path := filepath.Join(t.TempDir(), "00000000000000000000.log")
			s, err := segment.CreateWith(path, 64<<20, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(bounds); i++ {
				pos, err := s.Append(log[bounds[i-1]:bounds[i]])
				if err != nil || pos != bounds[i-1] {
					t.Fatalf("Append %d = %d, %v; want %d", i, pos, err, bounds[i-1])
				}
				if i%7 == 0 {
					if err := s.Sync(); err != nil {
						t.Fatal(err)
					}
				}
			}
			checkContent(t, s, log)
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil || st.Size() != int64(len(log)) {
				t.Fatalf("i_size after clean Close = %v, %v; want %d", st.Size(), err, len(log))
			}
			s, err = segment.OpenWith(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			checkContent(t, s, log)
			end, infos := recoverAll(t, s, 0)
			if end != int64(len(log)) || len(infos) != len(bounds)-1 {
				t.Fatalf("Recover = %d with %d batches; want %d, %d", end, len(infos), len(log), len(bounds)-1)
			}
			// Appends continue after reopen (the Direct tail page is read back).
			more, mb := genLog(rng, 1<<20, 10, 3000)
			for i := 1; i < len(mb); i++ {
				if _, err := s.Append(more[mb[i-1]:mb[i]]); err != nil {
					t.Fatal(err)
				}
			}
			log = append(log, more...)
			checkContent(t, s, log)
			// Truncate back to a batch boundary and append again.
			cut := bounds[33]
			if err := s.TruncateTo(cut); err != nil {
				t.Fatal(err)
			}
			log = log[:cut]
			checkContent(t, s, log)
			if _, err := s.Append(more[:mb[1]]); err != nil {
				t.Fatal(err)
			}
			log = append(log, more[:mb[1]]...)
			checkContent(t, s, log)
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := s.Seal(); err != nil {
				t.Fatal(err)
			}
			st, err = os.Stat(path)
			if err != nil || st.Size() != int64(len(log)) {
				t.Fatalf("i_size after Seal = %v, %v; want %d", st.Size(), err, len(log))
			}
		})
	}
}

// TestDirectTailRewriteModel appends random sizes (1 byte to 200 KiB,
// crossing pages and chunks) and compares the file with a plain byte model
// after every append, then reopens and continues from the persisted tail.
func TestDirectTailRewriteModel(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			opts := be.opts(t)
			rng := rand.New(rand.NewPCG(7, 9))
			path := filepath.Join(t.TempDir(), "00000000000000000000.log")
			s, err := segment.CreateWith(path, 1<<20, opts)
			if err != nil {
				t.Fatal(err)
			}
			var model []byte
			buf := make([]byte, 200<<10)
			for round := range 2 {
				for i := range 60 {
					var n int
					switch rng.IntN(4) {
					case 0:
						n = 1 + rng.IntN(16)
					case 1:
						n = 1 + rng.IntN(5000)
					case 2:
						n = 4096 * (1 + rng.IntN(3))
					default:
						n = 1 + rng.IntN(len(buf))
					}
					b := buf[:n]
					for j := range b {
						b[j] = byte(rng.Uint32())
					}
					pos, err := s.Append(b)
					if err != nil || pos != int64(len(model)) {
						t.Fatalf("round %d append %d (%d bytes) = %d, %v; want pos %d", round, i, n, pos, err, len(model))
					}
					model = append(model, b...)
					clear(b) // Append must not keep the caller's bytes
					checkContent(t, s, model)
				}
				if err := s.Sync(); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				disk, err := os.ReadFile(path)
				if err != nil || !bytes.Equal(disk, model) {
					t.Fatalf("file after Close: %d bytes, %v; want %d matching bytes (diff at %d)", len(disk), err, len(model), firstDiff(disk, model))
				}
				if s, err = segment.OpenWith(path, opts); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDirectSyncedSmallAppends syncs after every small append, so every
// write but the first starts inside a page an earlier write covered (the
// carried page, rewritten from its last O_DIRECT-aligned boundary at or
// below the synced end: 512 bytes on a disk with 512-byte sectors), and
// checks the file after each sync, through the page cache and after a
// reopen.
func TestDirectSyncedSmallAppends(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			opts := be.opts(t)
			rng := rand.New(rand.NewPCG(11, 13))
			path := filepath.Join(t.TempDir(), "00000000000000000000.log")
			s, err := segment.CreateWith(path, 1<<20, opts)
			if err != nil {
				t.Fatal(err)
			}
			var model []byte
			for i := range 300 {
				b := make([]byte, 1+rng.IntN(3000))
				for j := range b {
					b[j] = byte(rng.Uint32()) | 1
				}
				if _, err := s.Append(b); err != nil {
					t.Fatal(err)
				}
				model = append(model, b...)
				if err := s.Sync(); err != nil {
					t.Fatal(err)
				}
				disk := make([]byte, len(model))
				if _, err := s.File().ReadAt(disk, 0); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(disk, model) {
					t.Fatalf("append %d: file differs from the model at %d of %d", i, firstDiff(disk, model), len(model))
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if disk, err := os.ReadFile(path); err != nil || !bytes.Equal(disk, model) {
				t.Fatalf("after Close: %d bytes, %v, diff at %d", len(disk), err, firstDiff(disk, model))
			}
		})
	}
}

// TestDirectCrashZeroTail takes a copy of a Direct segment's file while it is
// open (i_size raised ahead of the data: the state a crash leaves, plus a torn
// last batch) and checks that OpenWith+Recover find the valid end.
func TestDirectCrashZeroTail(t *testing.T) {
	opts := segment.Options{Ring: newRing(t, uring.BackendUring), Direct: true}
	rng := rand.New(rand.NewPCG(3, 4))
	log, bounds := genLog(rng, 0, 40, 5000)
	dir := t.TempDir()
	path := filepath.Join(dir, "00000000000000000000.log")
	s, err := segment.CreateWith(path, 1<<30, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 1; i < len(bounds); i++ {
		if _, err := s.Append(log[bounds[i-1]:bounds[i]]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	disk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(disk)) <= int64(len(log)) {
		t.Fatalf("i_size %d not raised past the data %d", len(disk), len(log))
	}
	if !bytes.Equal(disk[:len(log)], log) || !bytes.Equal(disk[len(log):], make([]byte, len(disk)-len(log))) {
		t.Fatal("on-disk image is not the log followed by zeros")
	}
	for _, tc := range []struct {
		name    string
		image   []byte
		wantEnd int64
	}{
		{"zero tail", disk, int64(len(log))},
		{"torn last batch", tornCopy(disk, bounds[len(bounds)-2], bounds[len(bounds)-1]), bounds[len(bounds)-2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "00000000000000000000.log")
			if err := os.WriteFile(p, tc.image, 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := segment.OpenWith(p, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Size() != int64(len(tc.image)) {
				t.Fatalf("Size on open = %d, want i_size %d", c.Size(), len(tc.image))
			}
			end, _ := recoverAll(t, c, 0)
			if end != tc.wantEnd || c.Size() != tc.wantEnd {
				t.Fatalf("Recover = %d, Size %d; want %d", end, c.Size(), tc.wantEnd)
			}
			// The segment keeps working after recovery.
			next := log[bounds[len(bounds)-2]:bounds[len(bounds)-1]]
			if tc.wantEnd == int64(len(log)) {
				next, _ = genLog(rng, 1<<30, 1, 100)
			}
			if pos, err := c.Append(next); err != nil || pos != tc.wantEnd {
				t.Fatalf("Append after Recover = %d, %v", pos, err)
			}
			if err := c.Sync(); err != nil {
				t.Fatal(err)
			}
			want := append(append([]byte(nil), tc.image[:tc.wantEnd]...), next...)
			checkContent(t, c, want)
		})
	}
}

// tornCopy copies b and damages the batch [lo, hi) near its end, as a write
// cut short by a crash leaves it.
func tornCopy(b []byte, lo, hi int64) []byte {
	c := append([]byte(nil), b...)
	clear(c[hi-(hi-lo)/3 : hi])
	return c
}

// TestDirectPageCacheCoherent reads a range through the buffered descriptor
// (caching its pages) before O_DIRECT appends write it, then reads again:
// the kernel must have invalidated the cached pages, so a buffered reader
// (pread or sendfile) sees the new bytes.
func TestDirectPageCacheCoherent(t *testing.T) {
	opts := segment.Options{Ring: newRing(t, uring.BackendUring), Direct: true}
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	s, err := segment.CreateWith(path, 1<<20, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stale := make([]byte, 64<<10)
	if n, err := s.File().ReadAt(stale, 0); n != len(stale) || err != nil {
		t.Fatalf("priming read = %d, %v", n, err)
	}
	if !bytes.Equal(stale, make([]byte, len(stale))) {
		t.Fatal("fresh reservation does not read as zeros")
	}
	data := bytes.Repeat([]byte("strata!"), 9000)
	if _, err := s.Append(data); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	other, err := os.Open(path) // an independent buffered descriptor
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, f := range []*os.File{s.File(), other} {
		got := make([]byte, len(data))
		if n, err := f.ReadAt(got, 0); n != len(got) || err != nil || !bytes.Equal(got, data) {
			t.Fatalf("buffered read after O_DIRECT write: n=%d err=%v equal=%v", n, err, bytes.Equal(got, data))
		}
	}
	// sendfile from the segment's File (what fetch uses) into another file.
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var off int64
	for sent := 0; sent < len(data); {
		n, err := unix.Sendfile(int(out.Fd()), int(s.File().Fd()), &off, len(data)-sent)
		if err != nil || n <= 0 {
			t.Fatalf("sendfile at %d: %d, %v", off, n, err)
		}
		sent += n
	}
	got, err := os.ReadFile(out.Name())
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("sendfile copy after O_DIRECT write: %d bytes, %v, equal=%v", len(got), err, bytes.Equal(got, data))
	}
}

// TestRingSyncConcurrentWithAppend runs Sync in a loop on another goroutine
// while appends go on (the engine's flusher), then checks content and that a
// final Sync succeeds.
func TestRingSyncConcurrentWithAppend(t *testing.T) {
	for _, be := range backends[1:] {
		t.Run(be.name, func(t *testing.T) {
			opts := be.opts(t)
			path := filepath.Join(t.TempDir(), "00000000000000000000.log")
			s, err := segment.CreateWith(path, 8<<20, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			rng := rand.New(rand.NewPCG(5, 6))
			log, bounds := genLog(rng, 0, 200, 6000)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var syncs int
			var syncErr error
			firstSync := make(chan struct{})
			wg.Go(func() {
				defer func() {
					if syncs == 0 {
						close(firstSync)
					}
				}()
				for syncErr == nil {
					select {
					case <-stop:
						return
					default:
					}
					syncErr = s.Sync()
					syncs++
					if syncs == 1 {
						close(firstSync)
					}
				}
			})
			for i := 1; i < len(bounds); i++ {
				if i == len(bounds)/2 {
					<-firstSync // at least one Sync overlaps the appends
				}
				if _, err := s.Append(log[bounds[i-1]:bounds[i]]); err != nil {
					close(stop)
					wg.Wait()
					t.Fatal(err)
				}
			}
			close(stop)
			wg.Wait()
			if syncErr != nil || syncs == 0 {
				t.Fatalf("concurrent syncs: %d, err %v", syncs, syncErr)
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			checkContent(t, s, log)
		})
	}
}

func TestOptionsErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "x.log")
	if _, err := segment.OpenWith(path, segment.Options{Ring: newRing(t, uring.BackendUring), Direct: true}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenWith(missing) = %v, want ErrNotExist", err)
	}
	pool, err := uring.NewPool(uring.Alignment, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// A shared pool with 4 KiB chunks: every append crosses chunks.
	opts := segment.Options{Ring: newRing(t, uring.BackendUring), Direct: true, Pool: pool}
	p := filepath.Join(t.TempDir(), "y.log")
	s, err := segment.CreateWith(p, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{1, 2, 3}, 10000)
	if _, err := s.Append(data); err != nil {
		t.Fatal(err)
	}
	checkContent(t, s, data)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if pool.Free() != pool.Chunks() {
		t.Fatalf("pool has %d of %d chunks free after Close", pool.Free(), pool.Chunks())
	}
}

// appendThen appends b to s and to model, then syncs (then 1), flushes
// (2) or does neither (0), and returns the model.
func appendThen(t *testing.T, s *segment.Segment, model, b []byte, then int) []byte {
	t.Helper()
	if _, err := s.Append(b); err != nil {
		t.Fatal(err)
	}
	var err error
	switch then {
	case 1:
		err = s.Sync()
	case 2:
		err = s.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	return append(model, b...)
}

// closeAndCheck checks s against model, closes it and checks the file at
// path holds exactly model.
func closeAndCheck(t *testing.T, s *segment.Segment, path string, model []byte) {
	t.Helper()
	checkContent(t, s, model)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	disk, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(disk, model) {
		t.Fatalf("file after Close: %d bytes, %v; want %d (diff at %d)", len(disk), err, len(model), firstDiff(disk, model))
	}
}

// TestSharedMetaSplitWrites covers a SharedMeta segment's flushes whose
// write starts in the page an earlier flush wrote and runs on into pages
// not written yet: they go out as two writes sharing one chunk
// (submitSplit), and the chunk must go back to the pool exactly once (a
// second Put panics), only after both, with every byte where it belongs.
func TestSharedMetaSplitWrites(t *testing.T) {
	pool, err := uring.NewPool(segment.DirectChunkBytes, 3*segment.DirectDepth)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	opts := segment.Options{Ring: newRing(t, uring.BackendUring), Direct: true, SharedMeta: true, Pool: pool}
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	s, err := segment.CreateWith(path, 64<<20, opts)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var model []byte
	for i := range 400 {
		// Mostly a few pages, so that the flush's write starts inside the
		// carried page and ends past it; sometimes less than the rest of
		// that page (one write), sometimes more than a chunk.
		n := 1 + rng.IntN(3*4096)
		switch i % 10 {
		case 3:
			n = 1 + rng.IntN(300)
		case 7:
			n = segment.DirectChunkBytes + rng.IntN(4096)
		}
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(len(model) + j*13)
		}
		then := 2
		if i%4 == 0 {
			then = 1
		}
		model = appendThen(t, s, model, b, then)
	}
	closeAndCheck(t, s, path, model)
	if pool.Free() != pool.Chunks() {
		t.Fatalf("pool has %d of %d chunks free after Close", pool.Free(), pool.Chunks())
	}
}

// FuzzDirectAppendModel drives a Direct segment with fuzzer-chosen append
// sizes and Sync/Flush points and checks it against a plain byte model,
// before and after Close.
func FuzzDirectAppendModel(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 16, 0, 1, 0})
	f.Add([]byte{255, 255, 3, 0, 0, 5, 15, 255, 1, 1})
	f.Add([]byte{0x10, 0x00, 0x10, 0x01, 0x0f, 0xff})
	opts := segment.Options{Ring: newRing(f, uring.BackendUring), Direct: true}
	f.Fuzz(func(t *testing.T, script []byte) {
		path := filepath.Join(t.TempDir(), "00000000000000000000.log")
		s, err := segment.CreateWith(path, 0, opts)
		if err != nil {
			t.Fatal(err)
		}
		var model []byte
		for i := 0; i+1 < len(script) && i < 128; i += 2 {
			n := (int(script[i])<<8 | int(script[i+1])) % 70000
			b := make([]byte, n)
			for j := range b {
				b[j] = byte(len(model) + j*7)
			}
			model = appendThen(t, s, model, b, int(script[i]%3))
		}
		closeAndCheck(t, s, path, model)
	})
}

// TestRingFailureIsSticky closes the ring under an open Direct segment: the
// next write fails to submit, and every later Append and Sync returns
// ErrFailed wrapping the cause; Close still releases the segment.
func TestRingFailureIsSticky(t *testing.T) {
	r, err := uring.New(uring.Config{Backend: uring.BackendUring, Entries: 8})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	s, err := segment.CreateWith(path, 0, segment.Options{Ring: r, Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	_, aerr := s.Append(make([]byte, segment.DirectChunkBytes)) // fills a chunk: a write is due
	if !errors.Is(aerr, segment.ErrFailed) || !errors.Is(aerr, uring.ErrClosed) {
		t.Fatalf("Append after ring close = %v, want ErrFailed wrapping uring.ErrClosed", aerr)
	}
	if _, err := s.Append([]byte{1}); !errors.Is(err, segment.ErrFailed) {
		t.Fatalf("second Append = %v, want ErrFailed", err)
	}
	if err := s.Sync(); !errors.Is(err, segment.ErrFailed) {
		t.Fatalf("Sync = %v, want ErrFailed", err)
	}
	if s.Written() != 1000 {
		t.Fatalf("Written = %d, want 1000 (only the synced bytes reached the file)", s.Written())
	}
	if err := s.Close(); err != nil && !errors.Is(err, uring.ErrClosed) {
		t.Fatalf("Close = %v", err)
	}
}

// TestDirectReadaheadStopsAtWritten: an active Direct segment's i_size runs
// ahead of its written end (zero-filled or unwritten blocks). Reading it
// sequentially up to Written, as a catch-up consumer does, must not bring
// pages past Written into the page cache: the kernel's readahead would
// (windows of up to read_ahead_kb), and pages of zero-filled blocks read
// that way are dropped again when the data's O_DIRECT write lands, so the
// reader reads them twice. Prefetch reads ahead instead, up to Written.
// After Seal (i_size = Size) the kernel's readahead is back.
func TestDirectReadaheadStopsAtWritten(t *testing.T) {
	opts := segment.Options{Ring: newRing(t, uring.BackendUring), Direct: true, PreWrite: true}
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	s, err := segment.CreateWith(path, 64<<20, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const written = 8 << 20
	chunk := bytes.Repeat([]byte{7}, 64<<10)
	for range written / len(chunk) {
		if _, err := s.Append(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Written() != written || st.Size() <= written+(4<<20) {
		t.Fatalf("written %d, i_size %d: want i_size well past the written end", s.Written(), st.Size())
	}
	// The segment's descriptor is the one fetches read (sendfile). The
	// first half is read as the broker does, after a Prefetch; the second
	// with plain sequential reads, which the kernel's readahead would
	// follow past the end.
	buf := make([]byte, 64<<10)
	for off := int64(0); off < written; off += int64(len(buf)) {
		if off < written/2 {
			s.Prefetch(off, int64(len(buf)))
		}
		if n, err := s.File().ReadAt(buf, off); n != len(buf) || err != nil || buf[0] != 7 {
			t.Fatalf("read at %d: %d, %v", off, n, err)
		}
	}
	if n := residentPages(t, path, written, st.Size()-written); n != 0 {
		t.Fatalf("%d pages past the written end are in the page cache after reading up to it", n)
	}
	// The reads went through the page cache (so the check above could
	// see readahead): nearly every page read is resident. Not all: under
	// memory pressure (CI, 2046 of 2048 once) the kernel may reclaim a few
	// clean pages before mincore looks.
	if n := residentPages(t, path, 0, written); n < written/4096*9/10 {
		t.Fatalf("%d of the %d pages read are resident", n, written/4096)
	}
	// Prefetch near the end reads ahead only up to Written.
	if err := unix.Fadvise(int(s.File().Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	s.Prefetch(written-(1<<20), 4<<20)
	deadline := time.Now().Add(5 * time.Second)
	for residentPages(t, path, written-(1<<20), 1<<20) < 256 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := residentPages(t, path, written-(1<<20), 1<<20); n != 256 {
		t.Fatalf("Prefetch brought %d of the 256 pages before the written end", n)
	}
	if n := residentPages(t, path, written, st.Size()-written); n != 0 {
		t.Fatalf("Prefetch read %d pages past the written end", n)
	}
}

// residentPages counts the pages of [off, off+n) of path in the page cache.
func residentPages(t *testing.T, path string, off, n int64) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (n+4095)/4096)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	count := 0
	for _, v := range vec {
		count += int(v & 1)
	}
	return count
}

// TestDirectSealWaitsForZeroFill: Seal cuts the file to Size while the
// zero-fill may be running a step ahead of the appends (its fallocate and
// zero writes raise i_size as they land); the cut must come after the
// step, or the sealed file keeps a tail of zeros past its last byte. Each
// round appends just past the point where the next step starts and
// seals at once, with the step in flight.
func TestDirectSealWaitsForZeroFill(t *testing.T) {
	opts := segment.Options{Ring: newRing(t, uring.BackendUring), Direct: true, PreWrite: true}
	dir := t.TempDir()
	chunk := bytes.Repeat([]byte{7}, 4<<10)
	for round := range 16 {
		path := filepath.Join(dir, fmt.Sprintf("%020d.log", round))
		s, err := segment.CreateWith(path, 0, opts)
		if err != nil {
			t.Fatal(err)
		}
		n := (64 + 37*round) << 10 // 64 KiB to ~620 KiB: across the first steps' starts
		var size int64
		for size < int64(n) {
			if _, err := s.Append(chunk); err != nil {
				t.Fatal(err)
			}
			size += int64(len(chunk))
		}
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != size {
			t.Fatalf("round %d: the sealed file is %d bytes, its segment %d", round, st.Size(), size)
		}
	}
}
