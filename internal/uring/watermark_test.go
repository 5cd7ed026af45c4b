package uring

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestWatermarkExample(t *testing.T) {
	var w Watermark
	w.Reset(1000)
	const k = 64 << 10
	steps := []struct {
		off, n, want int64
		pending      int
	}{
		{1000 + k, k, 1000, 1},
		{1000 + 3*k, k, 1000, 2},
		{1000, k, 1000 + 2*k, 1},
		{1000 + 2*k, k, 1000 + 4*k, 0},
		{1000 + 4*k, 0, 1000 + 4*k, 0},
	}
	for i, s := range steps {
		got, err := w.Complete(s.off, s.n)
		if err != nil || got != s.want || w.Value() != s.want || w.Pending() != s.pending {
			t.Fatalf("step %d: Complete(%d, %d) = %d, %v pending %d; want %d pending %d", i, s.off, s.n, got, err, w.Pending(), s.want, s.pending)
		}
	}
}

func TestWatermarkRejects(t *testing.T) {
	var w Watermark
	w.Reset(100)
	if _, err := w.Complete(200, 50); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]int64{{50, 10}, {90, 20}, {180, 30}, {240, 5}, {210, 10}, {190, 100}} {
		if _, err := w.Complete(c[0], c[1]); !errors.Is(err, ErrOverlap) {
			t.Errorf("Complete(%d, %d): %v, want ErrOverlap", c[0], c[1], err)
		}
	}
	for _, c := range [][2]int64{{-1, 5}, {5, -1}, {1 << 62, 1 << 62}} {
		if _, err := w.Complete(c[0], c[1]); err == nil {
			t.Errorf("Complete(%d, %d) accepted", c[0], c[1])
		}
	}
	if w.Value() != 100 || w.Pending() != 1 {
		t.Fatalf("rejected ranges changed the state: value %d pending %d", w.Value(), w.Pending())
	}
}

// checkWatermark completes the ranges of sizes in the given order and compares
// every step with a naive model (a per-range done flag and a linear scan).
func checkWatermark(t *testing.T, start int64, sizes []int64, order []int) {
	t.Helper()
	offs := make([]int64, len(sizes))
	pos := start
	for i, n := range sizes {
		offs[i] = pos
		pos += n
	}
	var w Watermark
	w.Reset(start)
	done := make([]bool, len(sizes))
	for step, i := range order {
		got, err := w.Complete(offs[i], sizes[i])
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		done[i] = true
		want := start
		for j := range sizes {
			if !done[j] && sizes[j] != 0 { // an empty range holds no bytes to wait for
				break
			}
			want += sizes[j]
		}
		if got != want || w.Value() != want {
			t.Fatalf("step %d (range %d): watermark %d, model %d", step, i, got, want)
		}
		if w.Pending() > len(sizes)/2+1 {
			t.Fatalf("step %d: %d pending spans for %d ranges: spans not merged", step, w.Pending(), len(sizes))
		}
	}
	if w.Pending() != 0 {
		t.Fatalf("all complete but %d spans pending", w.Pending())
	}
}

func TestWatermarkRandomOrders(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for range 500 {
		n := 1 + rng.IntN(40)
		sizes := make([]int64, n)
		for i := range sizes {
			sizes[i] = int64(rng.IntN(3) * (1 + rng.IntN(70000))) // some zero-length
		}
		checkWatermark(t, int64(rng.IntN(1<<20)), sizes, rng.Perm(n))
	}
}

func TestWatermarkDoesNotAllocate(t *testing.T) {
	var w Watermark
	order := []int{3, 1, 2, 0, 7, 5, 6, 4}
	allocs := testing.AllocsPerRun(100, func() {
		w.Reset(0)
		for _, i := range order {
			if _, err := w.Complete(int64(i)*4096, 4096); err != nil {
				panic(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}

// FuzzWatermark: any permutation of any back-to-back ranges ends at the sum
// of the sizes and matches the naive model at every step.
func FuzzWatermark(f *testing.F) {
	f.Add([]byte{3, 1, 2, 0}, []byte{10, 20, 0, 30})
	f.Add([]byte{0}, []byte{255})
	f.Add([]byte{5, 4, 3, 2, 1, 0}, []byte{1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, perm, sizeBytes []byte) {
		n := min(len(sizeBytes), 64)
		if n == 0 {
			return
		}
		sizes := make([]int64, n)
		for i := range sizes {
			sizes[i] = int64(sizeBytes[i]) * 512
		}
		// A permutation from perm's bytes: a Fisher-Yates shuffle driven by them.
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		for i := n - 1; i > 0 && len(perm) > 0; i-- {
			j := int(perm[i%len(perm)]) % (i + 1)
			order[i], order[j] = order[j], order[i]
		}
		checkWatermark(t, 4096, sizes, order)
	})
}
