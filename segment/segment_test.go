package segment_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stratalog/strata/segment"
	"github.com/stratalog/strata/segment/segmenttest"
)

func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "00000000000000000000.log")
	s, err := segment.Create(p, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if s.Size() != 0 || s.Path() != p || s.File() == nil {
		t.Fatalf("new segment: size %d path %q file %v", s.Size(), s.Path(), s.File())
	}
	log, bounds := genLog(rand.New(rand.NewPCG(3, 4)), 0, 20, 200)
	for i := range len(bounds) - 1 {
		pos, err := s.Append(log[bounds[i]:bounds[i+1]])
		if err != nil {
			t.Fatal(err)
		}
		if pos != bounds[i] || s.Size() != bounds[i+1] {
			t.Fatalf("batch %d at %d (size %d), want %d (%d)", i, pos, s.Size(), bounds[i], bounds[i+1])
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(log))
	if n, err := s.ReadAt(got, 0); err != nil || n != len(log) || !bytes.Equal(got, log) {
		t.Fatalf("ReadAt: n %d err %v equal %v", n, err, bytes.Equal(got, log))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = segment.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Size() != int64(len(log)) {
		t.Fatalf("reopened size %d, want %d (preallocation must not change i_size)", s.Size(), len(log))
	}
	end, infos := recoverAll(t, s, 0)
	if end != int64(len(log)) || len(infos) != len(bounds)-1 {
		t.Fatalf("recover end %d with %d batches, want %d with %d", end, len(infos), len(log), len(bounds)-1)
	}
}

func TestOpenMissing(t *testing.T) {
	if _, err := segment.Open(filepath.Join(t.TempDir(), "nope.log")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open missing file: %v", err)
	}
}

func TestCreateTruncatesExisting(t *testing.T) {
	p := writeFile(t, []byte("stale bytes from an earlier life"))
	s, err := segment.Create(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Size() != 0 {
		t.Fatalf("Create over an existing file: size %d", s.Size())
	}
}

func TestReadAtClampsToSize(t *testing.T) {
	mf := segmenttest.NewMemFile(nil)
	s, err := segment.New("m.log", mf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	// Bytes past Size (an in-flight append) must not be visible to readers.
	if _, err := mf.WriteAt([]byte("XYZ"), 10); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 8)
	n, err := s.ReadAt(p, 6)
	if n != 4 || err != io.EOF || string(p[:n]) != "6789" {
		t.Fatalf("ReadAt across the end: %d %v %q", n, err, p[:n])
	}
	if n, err := s.ReadAt(p, 10); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at the end: %d %v", n, err)
	}
	if n, err := s.ReadAt(p[:4], 2); n != 4 || err != nil || string(p[:4]) != "2345" {
		t.Fatalf("ReadAt inside: %d %v %q", n, err, p[:4])
	}
	if _, err := s.ReadAt(p, -1); !errors.Is(err, segment.ErrRange) {
		t.Fatalf("ReadAt(-1): %v", err)
	}
}

func TestTruncateTo(t *testing.T) {
	log, bounds := genLog(rand.New(rand.NewPCG(5, 6)), 0, 6, 100)
	p := writeFile(t, log)
	s, err := segment.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.TruncateTo(bounds[3]); err != nil {
		t.Fatal(err)
	}
	if err := s.TruncateTo(bounds[3] + 1); !errors.Is(err, segment.ErrRange) {
		t.Fatalf("TruncateTo past Size: %v", err)
	}
	if err := s.TruncateTo(-1); !errors.Is(err, segment.ErrRange) {
		t.Fatalf("TruncateTo(-1): %v", err)
	}
	tail := segmenttest.MakeBatch(nil, 1000, 1, 9, 4, []byte("new"))
	if pos, err := s.Append(tail); err != nil || pos != bounds[3] {
		t.Fatalf("append after truncate at %d: %v", pos, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	disk, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte(nil), log[:bounds[3]]...), tail...)
	if !bytes.Equal(disk, want) {
		t.Fatalf("file after truncate+append: %d bytes, want %d", len(disk), len(want))
	}
}

func TestRename(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.log")
	s, err := segment.Create(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	np := filepath.Join(dir, "a.log.deleted")
	if err := s.Rename(np); err != nil {
		t.Fatal(err)
	}
	if s.Path() != np {
		t.Fatalf("Path %q after rename", s.Path())
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old path still there: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(np); err != nil || string(b) != "abc" {
		t.Fatalf("renamed file: %q %v", b, err)
	}
}

func TestClosed(t *testing.T) {
	s, _ := memSegment(t, nil)
	if s.File() != nil {
		t.Fatal("File() of a MemFile segment is not nil")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != segment.ErrClosed {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Append([]byte("x")); err != segment.ErrClosed {
		t.Fatalf("Append: %v", err)
	}
	if _, err := s.ReadAt(make([]byte, 1), 0); err != segment.ErrClosed {
		t.Fatalf("ReadAt: %v", err)
	}
	if err := s.Sync(); err != segment.ErrClosed {
		t.Fatalf("Sync: %v", err)
	}
	if _, err := s.Recover(0, nil); err != segment.ErrClosed {
		t.Fatalf("Recover: %v", err)
	}
	if err := s.Scan(0, 100, func(segment.BatchInfo) bool { return true }); err != segment.ErrClosed {
		t.Fatalf("Scan: %v", err)
	}
	if err := s.TruncateTo(0); err != segment.ErrClosed {
		t.Fatalf("TruncateTo: %v", err)
	}
	if err := s.Seal(); err != segment.ErrClosed {
		t.Fatalf("Seal: %v", err)
	}
}

// TestCrashDropsUnsynced: after a crash only synced batches remain and
// recovery finds exactly them.
func TestCrashDropsUnsynced(t *testing.T) {
	log, bounds := genLog(rand.New(rand.NewPCG(8, 9)), 0, 15, 100)
	s, mf := memSegment(t, nil)
	for i := range 15 {
		if _, err := s.Append(log[bounds[i]:bounds[i+1]]); err != nil {
			t.Fatal(err)
		}
		if i == 9 {
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	after := mf.Crash()
	s2, err := segment.New("m.log", after)
	if err != nil {
		t.Fatal(err)
	}
	end, infos := recoverAll(t, s2, 0)
	if end != bounds[10] || len(infos) != 10 {
		t.Fatalf("after crash: end %d with %d batches, want %d with 10", end, len(infos), bounds[10])
	}
	if _, err := s.Append([]byte("x")); err == nil {
		t.Fatal("append to the crashed file succeeded")
	}
}

// TestCrashRandomPrefix: power loss keeping any prefix of the unsynced writes
// (the last one torn) never loses a synced batch, and recovery agrees with
// the naive walker on what was kept.
func TestCrashRandomPrefix(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	for iter := range 200 {
		n := 1 + rng.IntN(30)
		log, bounds := genLog(rng, 0, n, 120)
		s, mf := memSegment(t, nil)
		synced, syncedBatches := int64(0), 0
		for i := range n {
			if _, err := s.Append(log[bounds[i]:bounds[i+1]]); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(4) == 0 {
				if err := s.Sync(); err != nil {
					t.Fatal(err)
				}
				synced, syncedBatches = s.Size(), i+1
			}
		}
		after := mf.CrashRandom(rng)
		crashed := after.Bytes()
		s2, err := segment.New("m.log", after)
		if err != nil {
			t.Fatal(err)
		}
		end, infos := recoverAll(t, s2, 0)
		wantEnd, want := naiveWalk(crashed, 0)
		if end != wantEnd || !equalBatches(toNaive(infos), want) {
			t.Fatalf("iter %d: end %d (%d batches), naive %d (%d)", iter, end, len(infos), wantEnd, len(want))
		}
		if end < synced || len(infos) < syncedBatches {
			t.Fatalf("iter %d: lost synced data: end %d < synced %d", iter, end, synced)
		}
		if !bytes.Equal(crashed[:end], log[:end]) {
			t.Fatalf("iter %d: recovered bytes differ from what was appended", iter)
		}
		if got := after.Bytes(); int64(len(got)) != end {
			t.Fatalf("iter %d: file is %d bytes after recovery, want %d", iter, len(got), end)
		}
	}
}

// TestSyncErrorIsSticky: a failed fsync surfaces, and every later Sync and
// Append fails too instead of pretending the lost pages were written.
func TestSyncErrorIsSticky(t *testing.T) {
	b1 := segmenttest.MakeBatch(nil, 0, 1, 1, 0, []byte("one"))
	b2 := segmenttest.MakeBatch(nil, 1, 1, 1, 0, []byte("two"))
	mf := segmenttest.NewMemFile(nil)
	ff := segmenttest.NewFaultyFile(mf, segmenttest.FailNth(segmenttest.OpSync, 2, segmenttest.ErrInjected))
	s, err := segment.New("f.log", ff)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(b1); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(b2); err != nil {
		t.Fatal(err)
	}
	err = s.Sync()
	if !errors.Is(err, segmenttest.ErrInjected) || !errors.Is(err, segment.ErrFailed) {
		t.Fatalf("failed Sync returned %v", err)
	}
	if err := s.Sync(); !errors.Is(err, segment.ErrFailed) || !errors.Is(err, segmenttest.ErrInjected) {
		t.Fatalf("Sync after a failed Sync: %v", err)
	}
	if _, err := s.Append(b2); !errors.Is(err, segment.ErrFailed) {
		t.Fatalf("Append after a failed Sync: %v", err)
	}
	if ff.Calls(segmenttest.OpSync) != 2 {
		t.Fatalf("file Sync called %d times, want 2 (no retry after failure)", ff.Calls(segmenttest.OpSync))
	}
	s2, err := segment.New("f.log", mf.Crash())
	if err != nil {
		t.Fatal(err)
	}
	if end, _ := recoverAll(t, s2, 0); end != int64(len(b1)) {
		t.Fatalf("after crash end %d, want %d", end, len(b1))
	}
}

// TestShortWriteIsSticky: a write that fails half way leaves Size at the last
// whole batch; recovery of the file drops the torn bytes.
func TestShortWriteIsSticky(t *testing.T) {
	b1 := segmenttest.MakeBatch(nil, 0, 1, 1, 0, []byte("one"))
	b2 := segmenttest.MakeBatch(nil, 1, 1, 1, 0, []byte("two"))
	enospc := errors.New("no space left on device")
	mf := segmenttest.NewMemFile(nil)
	ff := segmenttest.NewFaultyFile(mf, segmenttest.FailNth(segmenttest.OpWrite, 2,
		&segmenttest.ShortWrite{N: 20, Err: enospc}))
	s, err := segment.New("f.log", ff)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(b1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(b2); !errors.Is(err, enospc) || !errors.Is(err, segment.ErrFailed) {
		t.Fatalf("short write returned %v", err)
	}
	if s.Size() != int64(len(b1)) {
		t.Fatalf("Size %d after a failed append, want %d", s.Size(), len(b1))
	}
	if _, err := s.Append(b2); !errors.Is(err, segment.ErrFailed) {
		t.Fatalf("Append after a failed write: %v", err)
	}
	if err := s.Sync(); !errors.Is(err, segment.ErrFailed) {
		t.Fatalf("Sync after a failed write: %v", err)
	}
	s2, err := segment.New("f.log", segmenttest.NewMemFile(mf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if s2.Size() != int64(len(b1))+20 {
		t.Fatalf("file holds %d bytes, want %d (torn write)", s2.Size(), len(b1)+20)
	}
	if end, _ := recoverAll(t, s2, 0); end != int64(len(b1)) {
		t.Fatalf("recovered end %d, want %d", end, len(b1))
	}
}

func TestScan(t *testing.T) {
	log, bounds := genLog(rand.New(rand.NewPCG(10, 11)), 50, 40, 300)
	s, _ := memSegment(t, log)
	_, want := naiveWalk(log, 0)

	collect := func(pos, limit int64, stopAfter int) ([]segment.BatchInfo, error) {
		var got []segment.BatchInfo
		err := s.Scan(pos, limit, func(bi segment.BatchInfo) bool {
			got = append(got, bi)
			return len(got) < stopAfter
		})
		return got, err
	}
	for i := range bounds {
		got, err := collect(bounds[i], int64(len(log)), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		if !equalBatches(toNaive(got), want[i:]) {
			t.Fatalf("Scan from batch %d: %d batches, want %d", i, len(got), len(want)-i)
		}
	}
	// A limit inside a batch excludes it; a limit past Size is capped.
	if got, _ := collect(0, bounds[5]+10, 1<<30); len(got) != 5 {
		t.Fatalf("limit inside batch 5: %d batches", len(got))
	}
	if got, _ := collect(0, 1<<40, 1<<30); len(got) != len(want) {
		t.Fatalf("limit past the end: %d batches, want %d", len(got), len(want))
	}
	if got, _ := collect(0, int64(len(log)), 3); len(got) != 3 {
		t.Fatalf("stop after 3: %d batches", len(got))
	}
	if err := s.Scan(-1, 10, func(segment.BatchInfo) bool { return true }); !errors.Is(err, segment.ErrRange) {
		t.Fatalf("Scan(-1): %v", err)
	}
	// A position that is not a batch boundary is reported as corrupt.
	if _, err := collect(bounds[2]+1, int64(len(log)), 1<<30); !errors.Is(err, segment.ErrCorrupt) {
		t.Fatalf("Scan from a non-boundary: %v", err)
	}
	// Steady state allocates nothing.
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		_ = s.Scan(bounds[10], bounds[20], func(segment.BatchInfo) bool { n++; return true })
	})
	if allocs != 0 || n == 0 {
		t.Fatalf("Scan allocates %.1f per call (%d batches seen)", allocs, n)
	}
}

// TestConcurrentReadDuringAppend: readers scanning and reading up to Size
// while the writer appends always see whole, ordered batches.
func TestConcurrentReadDuringAppend(t *testing.T) {
	log, bounds := genLog(rand.New(rand.NewPCG(12, 13)), 0, 500, 200)
	s, err := segment.Create(filepath.Join(t.TempDir(), "c.log"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, len(log))
			for iter := 0; iter < 100000; iter++ {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				size := s.Size()
				n, err := s.ReadAt(buf[:size], 0)
				if err != nil || !bytes.Equal(buf[:n], log[:size]) {
					errs <- errors.New("ReadAt saw bytes that differ from the appended ones")
					return
				}
				prev := int64(-1)
				if err := s.Scan(0, size, func(bi segment.BatchInfo) bool {
					if bi.BaseOffset <= prev {
						err = errors.New("Scan saw offsets out of order")
					}
					prev = bi.LastOffset
					return err == nil
				}); err != nil {
					errs <- err
					return
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for i := range len(bounds) - 1 {
		if _, err := s.Append(log[bounds[i]:bounds[i+1]]); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
