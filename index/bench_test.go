package index_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stratalog/strata/index"
)

// fillOffset makes an index of n entries 10 offsets and 1 KiB apart.
func fillOffset(b *testing.B, n int) *index.OffsetIndex {
	x := openOffset(b, tempPath(b, "b.index"), 0, n*8)
	for i := range n {
		if err := x.Append(int64(i)*10, int64(i)*1024); err != nil {
			b.Fatal(err)
		}
	}
	return x
}

var sinkOff, sinkPos int64

// BenchmarkOffsetLookup sweeps index sizes: 1 Ki entries, 128 Ki (1 MiB, a
// full 10 MiB default index is 1.3 Mi entries), 1.25 Mi.
func BenchmarkOffsetLookup(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 17, 10 << 17} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			x := fillOffset(b, n)
			defer x.Close()
			b.ReportAllocs()
			b.Run("uniform", func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					sinkOff, sinkPos = x.Lookup(int64((i*7919)%n) * 10)
					i++
				}
			})
			// Consumers near the log end: targets in the last 512 entries.
			b.Run("tail", func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					sinkOff, sinkPos = x.Lookup(int64(n-1-(i*7919)%min(n, 512)) * 10)
					i++
				}
			})
		})
	}
}

// BenchmarkOffsetLookupParallel measures the lock-free Lookup from several
// goroutines against the same search behind a shared RWMutex read lock (the
// alternative design), to show what the sequence lock saves on the fetch path.
func BenchmarkOffsetLookupParallel(b *testing.B) {
	const n = 1 << 10 // cache-resident, so the synchronization cost shows
	b.Run("lockfree", func(b *testing.B) {
		x := fillOffset(b, n)
		defer x.Close()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				off, _ := x.Lookup(int64((i*7919)%n) * 10)
				if off < 0 {
					b.Error("negative offset")
				}
				i++
			}
		})
	})
	b.Run("rwmutex", func(b *testing.B) {
		x := fillOffset(b, n)
		defer x.Close()
		var mu sync.RWMutex
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				mu.RLock()
				off, _ := x.Lookup(int64((i*7919)%n) * 10)
				mu.RUnlock()
				if off < 0 {
					b.Error("negative offset")
				}
				i++
			}
		})
	})
}

func BenchmarkOffsetAppend(b *testing.B) {
	x := openOffset(b, tempPath(b, "a.index"), 0, 10<<20)
	defer x.Close()
	b.SetBytes(index.OffsetEntryBytes)
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		if x.Full() {
			x.Reset()
			i = 0
		}
		if err := x.Append(i, i); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkTimeLookup(b *testing.B) {
	const n = 1 << 17
	x := openTime(b, tempPath(b, "b.timeindex"), 0, n*12)
	defer x.Close()
	for i := range n {
		if err := x.Append(1_700_000_000_000+int64(i)*100, int64(i)*10); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sinkOff, sinkPos = x.Lookup(1_700_000_000_000 + int64((i*7919)%n)*100 + 50)
		i++
	}
}
