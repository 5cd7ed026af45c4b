package uring

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestCopyNTMatchesBuiltin copies ranges of many lengths between many
// alignments and checks every byte of the destination: the copied ones
// equal the source, the ones around them untouched.
func TestCopyNTMatchesBuiltin(t *testing.T) {
	for _, avx := range copyNTPaths() {
		setCopyNTAVX(t, avx)
		rng := rand.New(rand.NewPCG(1, 2))
		src := make([]byte, 300<<10)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		dst := make([]byte, len(src)+256)
		fill := bytes.Repeat([]byte{0xa5}, len(dst))
		lengths := []int{0, 1, 31, CopyNTMinBytes - 1, CopyNTMinBytes, CopyNTMinBytes + 1, CopyNTMinBytes + 127, 64 << 10, 128<<10 + 77, 256<<10 + 31}
		for range 12 {
			lengths = append(lengths, CopyNTMinBytes+rng.IntN(200<<10))
		}
		for _, n := range lengths {
			for _, so := range []int{0, 1, 7, 16, 31, 33} {
				for _, do := range []int{0, 1, 5, 16, 31, 32, 63, 100} {
					copy(dst, fill)
					s := src[so : so+n]
					got := CopyNT(dst[do:do+n+7], s)
					if got != n {
						t.Fatalf("avx=%v n=%d: Copy = %d", avx, n, got)
					}
					if !bytes.Equal(dst[do:do+n], s) {
						t.Fatalf("avx=%v n=%d src+%d dst+%d: copied bytes differ", avx, n, so, do)
					}
					if !bytes.Equal(dst[:do], fill[:do]) || !bytes.Equal(dst[do+n:], fill[do+n:]) {
						t.Fatalf("avx=%v n=%d src+%d dst+%d: a byte outside the range changed", avx, n, so, do)
					}
				}
			}
		}
	}
}

// TestCopyNTShortSides: the count is the shorter side's, as with copy.
func TestCopyNTShortSides(t *testing.T) {
	a, b := make([]byte, 20<<10), make([]byte, 12<<10)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	if n := CopyNT(a, b); n != len(b) || !bytes.Equal(a[:n], b) {
		t.Fatalf("CopyNT(long, short) = %d", n)
	}
	for i := range a {
		a[i] = byte(i*3 + 2)
	}
	if n := CopyNT(b, a); n != len(b) || !bytes.Equal(b, a[:n]) {
		t.Fatalf("CopyNT(short, long) = %d", n)
	}
}

// TestCopyNTOverlapping: overlapping ranges give what copy gives (memmove).
func TestCopyNTOverlapping(t *testing.T) {
	for _, shift := range []int{-4096, -33, -1, 1, 33, 4096} {
		buf := make([]byte, 100<<10)
		want := make([]byte, len(buf))
		for i := range buf {
			buf[i] = byte(i*13 + 5)
		}
		copy(want, buf)
		lo, n := 8<<10, 64<<10
		copy(want[lo+shift:lo+shift+n], want[lo:lo+n])
		CopyNT(buf[lo+shift:lo+shift+n], buf[lo:lo+n])
		if !bytes.Equal(buf, want) {
			t.Fatalf("shift %d: differs from copy at %d", shift, copyNTFirstDiff(buf, want))
		}
	}
}

func copyNTFirstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// BenchmarkCopyNT copies a keyed produce request's worth of batches (96 x 60
// KiB) from a cold buffer into cold 128 KiB chunks, as the broker's append
// does (the caches are flushed by a 32 MiB walk outside the timer).
func BenchmarkCopyNT(b *testing.B) {
	const batch, parts, chunk = 60 << 10, 96, 128 << 10
	src := make([]byte, parts*batch)
	for i := range src {
		src[i] = byte(i)
	}
	dst := make([][]byte, 4*parts)
	for i := range dst {
		dst[i] = make([]byte, chunk)
	}
	evict := make([]byte, 32<<20)
	for _, c := range []struct {
		name string
		fn   func(d, s []byte) int
	}{{"builtin", func(d, s []byte) int { return copy(d, s) }}, {"copynt", CopyNT}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				for j := 0; j < len(evict); j += 64 {
					evict[j]++
				}
				b.StartTimer()
				for p := range parts {
					c.fn(dst[(i%4)*parts+p][p*16:], src[p*batch:(p+1)*batch])
				}
			}
		})
	}
}
