package segment_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/uring"
	"github.com/stratalog/strata/segment"
)

// SyncShared shares a caller's device flush only while every unsynced
// byte overwrites zero-filled blocks whose metadata an own Sync made
// durable: not before the first Sync, not after a truncation until the
// next one, never after Seal, never without PreWrite.
func TestSyncSharedQualifies(t *testing.T) {
	ring := newRing(t, uring.BackendUring)
	flushes := 0
	flush := func() error { flushes++; return nil }
	dir := t.TempDir()

	plain, err := segment.CreateWith(filepath.Join(dir, "direct.log"), 0, segment.Options{Ring: ring, Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	mustAppend(t, plain, bytes.Repeat([]byte{1}, 5000))
	if err := plain.Sync(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, plain, []byte("more"))
	if shared, err := plain.SyncShared(flush); shared || err != nil {
		t.Fatalf("Direct without PreWrite: shared %v err %v, want false nil", shared, err)
	}

	s, err := segment.CreateWith(filepath.Join(dir, "pre.log"), 0, segment.Options{Ring: ring, Direct: true, PreWrite: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := bytes.Repeat([]byte("abcdefgh"), 1000)
	mustAppend(t, s, want)
	if shared, err := s.SyncShared(flush); shared || err != nil {
		t.Fatalf("before any own Sync: shared %v err %v, want false nil", shared, err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	// 300 KiB crosses the first reservation step: appends wait for the
	// zero-filled next step and stay shareable.
	for i := range 300 {
		b := bytes.Repeat([]byte{byte(i)}, 1024)
		mustAppend(t, s, b)
		want = append(want, b...)
		if i%50 != 49 {
			continue
		}
		shared, err := s.SyncShared(flush)
		if !shared || err != nil {
			t.Fatalf("after an own Sync: shared %v err %v, want true nil", shared, err)
		}
		if got := s.Durable(); got != int64(len(want)) {
			t.Fatalf("durable %d after SyncShared, want %d", got, len(want))
		}
	}
	if flushes != 6 {
		t.Fatalf("%d flushes for 6 shared syncs of new bytes", flushes)
	}
	if shared, err := s.SyncShared(flush); !shared || err != nil || flushes != 6 {
		t.Fatalf("nothing new: shared %v err %v flushes %d, want true nil 6 (no flush)", shared, err, flushes)
	}
	checkContent(t, s, want)

	if err := s.TruncateTo(int64(len(want) - 1000)); err != nil {
		t.Fatal(err)
	}
	want = want[:len(want)-1000]
	mustAppend(t, s, []byte("after the cut"))
	want = append(want, "after the cut"...)
	if shared, _ := s.SyncShared(flush); shared {
		t.Fatal("shared right after a truncation (its i_size change needs an own fdatasync)")
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, []byte("x"))
	want = append(want, 'x')
	if shared, err := s.SyncShared(flush); !shared || err != nil {
		t.Fatalf("after the own Sync following the cut: shared %v err %v", shared, err)
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, []byte("y"))
	want = append(want, 'y')
	if shared, _ := s.SyncShared(flush); shared {
		t.Fatal("shared after Seal (appends past a sealed end allocate blocks)")
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if shared, _ := s.SyncShared(flush); shared {
		t.Fatal("shared after Seal and an own Sync")
	}
	checkContent(t, s, want)
}

// A failed device flush fails the segment like a failed fdatasync.
func TestSyncSharedFlushFailureIsSticky(t *testing.T) {
	ring := newRing(t, uring.BackendUring)
	s, err := segment.CreateWith(filepath.Join(t.TempDir(), "pre.log"), 0, segment.Options{Ring: ring, Direct: true, PreWrite: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustAppend(t, s, []byte("one"))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, []byte("two"))
	boom := errors.New("EIO")
	shared, err := s.SyncShared(func() error { return boom })
	if !shared || !errors.Is(err, segment.ErrFailed) || !errors.Is(err, boom) {
		t.Fatalf("shared %v err %v, want true and ErrFailed wrapping %v", shared, err, boom)
	}
	if s.Durable() >= s.Size() {
		t.Fatalf("durable %d covers size %d after a failed flush", s.Durable(), s.Size())
	}
	if _, err := s.Append([]byte("three")); !errors.Is(err, segment.ErrFailed) {
		t.Fatalf("append after a failed flush: %v, want ErrFailed", err)
	}
}

// Many PreWrite segments zero-filling at once share the process-wide
// zero-fill slots; every one finishes and keeps its bytes.
func TestPreWriteManySegmentsConcurrently(t *testing.T) {
	ring := newRing(t, uring.BackendUring)
	pool, err := uring.NewPool(64<<10, 3*24)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := segment.CreateWith(filepath.Join(dir, string(rune('a'+i))+".log"), 0,
				segment.Options{Ring: ring, Direct: true, PreWrite: true, Pool: pool})
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			var want []byte
			for j := range 700 { // 700 KiB: three reservation steps
				b := bytes.Repeat([]byte{byte(i + j)}, 1024)
				if _, err := s.Append(b); err != nil {
					t.Error(err)
					return
				}
				want = append(want, b...)
			}
			if err := s.Sync(); err != nil {
				t.Error(err)
				return
			}
			got := make([]byte, len(want))
			if _, err := s.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
				t.Errorf("segment %d: read back differs (err %v)", i, err)
			}
		}()
	}
	wg.Wait()
}

func mustAppend(t *testing.T, s *segment.Segment, b []byte) {
	t.Helper()
	if _, err := s.Append(b); err != nil {
		t.Fatal(err)
	}
}

// WriteBehind puts a partial tail chunk's bytes in the file without a
// Sync, StartShared or Flush; WrittenEpoch keeps the FlushEpoch value read
// when the written watermark last advanced, not the value at the query.
func TestWriteBehindAndWrittenEpoch(t *testing.T) {
	ring := newRing(t, uring.BackendUring)
	var epoch atomic.Uint64
	epoch.Store(5)
	s, err := segment.CreateWith(filepath.Join(t.TempDir(), "wb.log"), 0, segment.Options{
		Ring: ring, Direct: true, PreWrite: true, FlushEpoch: epoch.Load})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitWritten := func(end int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); s.Written() < end; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) { // hang guard only
				t.Fatalf("written %d, want %d: the write-behind never went out", s.Written(), end)
			}
		}
	}
	mustAppend(t, s, bytes.Repeat([]byte{7}, 3000)) // a partial chunk
	if s.Written() != 0 {
		t.Fatalf("written %d before WriteBehind: the tail was already written", s.Written())
	}
	s.WriteBehind()
	waitWritten(3000)
	if e, ok := s.WrittenEpoch(); !ok || e != 5 {
		t.Fatalf("WrittenEpoch %d %v, want 5 true", e, ok)
	}
	epoch.Store(9) // flushes started since: the bytes below Written stay at 5
	if e, _ := s.WrittenEpoch(); e != 5 {
		t.Fatalf("WrittenEpoch %d after the epoch moved without a write, want 5", e)
	}
	// The next partial write rewrites the carried page; after it the epoch
	// is the one read at its completion.
	mustAppend(t, s, bytes.Repeat([]byte{8}, 2000))
	s.WriteBehind()
	waitWritten(5000)
	if e, _ := s.WrittenEpoch(); e != 9 {
		t.Fatalf("WrittenEpoch %d after a write at epoch 9, want 9", e)
	}
	got := make([]byte, 5000)
	if _, err := s.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append(bytes.Repeat([]byte{7}, 3000), bytes.Repeat([]byte{8}, 2000)...)) {
		t.Fatal("file bytes differ from the appended ones")
	}
	plain, err := segment.CreateWith(filepath.Join(t.TempDir(), "p.log"), 0, segment.Options{Ring: ring, Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, ok := plain.WrittenEpoch(); ok {
		t.Fatal("WrittenEpoch ok without FlushEpoch")
	}
}
