//go:build linux

package segment_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratalog/strata/internal/uring"
	"github.com/stratalog/strata/segment"
	"github.com/stratalog/strata/segment/segmenttest"
)

// TestRecycleWith: a recycled file (an old segment's synced bytes) opens
// as an empty segment; appends overwrite its blocks without zero-fill up
// to its page-aligned size and share device flushes from the first one;
// readers, Recover and Verify never see the old bytes past Size; past the
// old size the zero-fill runs ahead only up to prealloc; Close cuts i_size
// back to Size, and so do Seal and TruncateTo.
func TestRecycleWith(t *testing.T) {
	ring := newRing(t, uring.BackendUring)
	opts := segment.Options{Ring: ring, Direct: true, PreWrite: true}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 7))
	// The old file starts with the very batches the new segment appends
	// first (base offset 5000), followed by more valid batches whose
	// offsets follow them: a walk not bounded by Size would take them.
	batches, _ := genLog(rng, 5000, 60, 3000) // well below the old size
	// A last batch ends them at a page boundary: the new segment's last
	// write zeroes no old bytes after them.
	pad := 4096 - (len(batches)+61)%4096
	batches = segmenttest.MakeBatch(batches, 90000, 1, 1000, 3, make([]byte, pad))
	if len(batches)%4096 != 0 {
		t.Fatalf("batches end at %d", len(batches))
	}
	const oldSize = 600<<10 + 123
	old := append([]byte(nil), batches...)
	for base := int64(1 << 20); len(old) < oldSize; base += 1 << 20 {
		more, _ := genLog(rng, base, 50, 3000)
		old = append(old, more...)
	}
	old = old[:oldSize]

	for _, end := range []string{"close", "seal", "truncate", "page"} {
		t.Run(end, func(t *testing.T) {
			path := filepath.Join(dir, end+".log")
			if err := os.WriteFile(path, old, 0o644); err != nil {
				t.Fatal(err)
			}
			prealloc := int64(1 << 20)
			if end == "page" {
				prealloc = oldSize &^ 4095 // no zero-fill ahead at all
			}
			s, err := segment.RecycleWith(path, prealloc, opts)
			if err != nil {
				t.Fatal(err)
			}
			if s.Size() != 0 || s.Written() != 0 || s.Durable() != 0 {
				t.Fatalf("recycled: size %d written %d durable %d, want 0 0 0", s.Size(), s.Written(), s.Durable())
			}
			flushes := 0
			flush := func() error { flushes++; return nil }
			var want []byte
			mustAppend(t, s, batches)
			want = append(want, batches...)
			if shared, err := s.SyncShared(flush); !shared || err != nil || flushes != 1 {
				t.Fatalf("first sync of a recycled segment: shared %v err %v flushes %d, want a shared flush", shared, err, flushes)
			}
			if got := s.ZeroFilled(); got != 0 {
				t.Fatalf("%d bytes of zeros written below the recycled file's size", got)
			}
			checkContent(t, s, want)
			var infos []segment.BatchInfo
			n, err := s.Verify(0, func(b segment.BatchInfo) { infos = append(infos, b) })
			if err != nil || n != int64(len(want)) || len(infos) != 61 {
				t.Fatalf("walk of the recycled segment: end %d, %d batches, %v; want %d, 61 (never the old bytes)", n, len(infos), err, len(want))
			}
			var p []byte
			if end == "page" {
				// Up to the old size's last page boundary exactly: i_size
				// (the old size) is past Size, the reservation is not.
				p = bytes.Repeat([]byte{0x3c}, int(prealloc)-len(want))
				mustAppend(t, s, p)
				want = append(want, p...)
				if got := s.ZeroFilled(); got != 0 {
					t.Fatalf("%d bytes of zeros written below the recycled file's size", got)
				}
			}
			if end == "seal" || end == "truncate" {
				// Past the old size: the zero-fill covers what is needed,
				// not a step past prealloc.
				for int64(len(want)) < oldSize+8<<10 {
					p, _ = genLog(rng, int64(len(want))+10000, 20, 3000)
					mustAppend(t, s, p)
					want = append(want, p...)
				}
				if shared, err := s.SyncShared(flush); !shared || err != nil {
					t.Fatalf("sync past the old size: shared %v err %v", shared, err)
				}
				if got := s.ZeroFilled(); got <= 0 || got > prealloc-oldSize&^4095 {
					t.Fatalf("%d bytes of zeros past the old size, want some, at most up to prealloc (%d)", got, prealloc-(oldSize&^4095))
				}
				checkContent(t, s, want)
			}
			switch end {
			case "seal":
				if err := s.Seal(); err != nil {
					t.Fatal(err)
				}
			case "truncate":
				want = want[:len(want)-len(p)]
				if err := s.TruncateTo(int64(len(want))); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("file after %s: %d bytes, want the segment's %d (i_size cut back to Size)", end, len(got), len(want))
			}
		})
	}
}

// TestRecycleWithNeedsPreWrite: only Direct PreWrite segments recycle.
func TestRecycleWithNeedsPreWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	if err := os.WriteFile(path, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	ring := newRing(t, uring.BackendUring)
	for _, o := range []segment.Options{{}, {Ring: ring}, {Ring: ring, Direct: true}, {Ring: ring, Direct: true, SharedMeta: true}} {
		if s, err := segment.RecycleWith(path, 0, o); err == nil {
			s.Close()
			t.Fatalf("RecycleWith(%+v): no error", o)
		}
	}
}
