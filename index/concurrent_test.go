package index_test

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentLookupDuringTruncate: readers looking up while the writer
// appends, truncates and re-appends (overwriting truncated slots) never see
// an entry torn between two generations. Entries carry their generation in
// the position: pos = rel*16 + gen%16, so a torn read has pos/16 != rel.
func TestConcurrentLookupDuringTruncate(t *testing.T) {
	const base = 1000
	x := openOffset(t, tempPath(t, "c.index"), base, 4096*8)
	defer x.Close()
	done := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2_000_000; i++ {
				if i%256 == 0 {
					select {
					case <-done:
						errs <- nil
						return
					default:
					}
				}
				target := int64(base + (i*7919+r)%20000)
				off, pos := x.Lookup(target)
				rel := off - base
				if off > target || (off == base && pos == 0) {
					continue
				}
				if pos/16 != rel {
					errs <- fmt.Errorf("Lookup(%d) = (%d, %d): torn entry", target, off, pos)
					return
				}
			}
			errs <- nil
		}()
	}
	var rels []int64 // the writer's model of the entries' relative offsets
	for gen := int64(0); gen < 3000; gen++ {
		for range 20 {
			if x.Full() {
				break
			}
			rel := int64(0)
			if len(rels) > 0 {
				rel = rels[len(rels)-1] + 1 + gen%5 // slots hold different offsets per generation
			}
			if err := x.Append(base+rel, rel*16+gen%16); err != nil {
				t.Fatal(err)
			}
			rels = append(rels, rel)
		}
		keep := max(len(rels)-15, 0)
		if len(rels) > 1000 {
			keep = 0
		}
		if keep < len(rels) {
			x.TruncateTo(base + rels[keep])
		}
		rels = rels[:keep]
		if x.Entries() != keep {
			t.Fatalf("gen %d: %d entries after truncation, want %d", gen, x.Entries(), keep)
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
