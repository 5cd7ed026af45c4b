package segment_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stratalog/strata/segment"
	"github.com/stratalog/strata/segment/segmenttest"
)

func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("batch=%dKiB", size>>10), func(b *testing.B) {
			batch := segmenttest.MakeBatch(nil, 0, 1, 0, 0, make([]byte, size-61))
			s, err := segment.Create(filepath.Join(b.TempDir(), "b.log"), 64<<20)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if s.Size() > 256<<20 {
					if err := s.TruncateTo(0); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := s.Append(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRecover(b *testing.B) {
	for _, payload := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("batch=%dKiB", payload>>10), func(b *testing.B) {
			log, _ := genLog(rand.New(rand.NewPCG(1, 1)), 0, (16<<20)/payload, payload)
			s, err := segment.Open(writeFile(b, log))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetBytes(int64(len(log)))
			b.ReportAllocs()
			for b.Loop() {
				if end, err := s.Recover(0, nil); err != nil || end != int64(len(log)) {
					b.Fatalf("recover: %d %v", end, err)
				}
			}
		})
	}
}

// BenchmarkScan: the fetch-path walk from an index entry over ~4 KiB of 1 KiB batches.
func BenchmarkScan(b *testing.B) {
	log, bounds := genLog(rand.New(rand.NewPCG(2, 2)), 0, 1000, 1<<10)
	s, err := segment.Open(writeFile(b, log))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		from := bounds[i%900]
		n := 0
		if err := s.Scan(from, int64(len(log)), func(segment.BatchInfo) bool { n++; return n < 4 }); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
