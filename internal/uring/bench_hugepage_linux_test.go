package uring

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeBuf maps n bytes (a multiple of 2 MiB) backed by transparent huge
// pages when the kernel grants them (madvise mode), filled; ok reports
// whether every 2 MiB of it is one huge page (AnonHugePages of smaps).
func hugeBuf(b *testing.B, n int) []byte {
	const huge = 2 << 20
	raw, err := unix.Mmap(-1, 0, n+huge, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Munmap(raw) })
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
	skip := int((huge - addr%huge) % huge)
	buf := raw[skip : skip+n : skip+n]
	if err := unix.Madvise(buf, unix.MADV_HUGEPAGE); err != nil {
		b.Fatal(err)
	}
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	return buf
}

// BenchmarkBufferPages: O_DIRECT writes of n bytes from a buffer of 4 KiB
// pages (each page one segment of the request: a 1 MiB write is 256
// descriptors of the virtio queue) against one of 2 MiB transparent huge
// pages (physically contiguous: one segment), from 1 or 8 goroutines, a
// fdatasync after every 96 writes.
func BenchmarkBufferPages(b *testing.B) {
	const size, writes, rounds = 256 << 20, 96, 20
	for _, n := range []int{64 << 10, 1 << 20} {
		for _, g := range []int{1, 8} {
			for _, kind := range []string{"4K", "THP"} {
				b.Run(fmt.Sprintf("write=%dK/goroutines=%d/pages=%s", n>>10, g, kind), func(b *testing.B) {
					var buf []byte
					if kind == "THP" {
						buf = hugeBuf(b, 8<<20)
					} else {
						buf = deviceBuf(b, 8<<20)
					}
					fd := writtenFile(b, filepath.Join(b.TempDir(), "f"), size, deviceBuf(b, 4<<20))
					var round []time.Duration
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						for r := 0; r < rounds; r++ {
							t0 := time.Now()
							writeRound(b, fd, writes, g, func(k int) []byte { return buf[k*n%(8<<20):][:n] },
								func(w int) int64 { return int64((r*writes+w)%(size/n)) * int64(n) })
							if err := unix.Fdatasync(fd); err != nil {
								b.Fatal(err)
							}
							round = append(round, time.Since(t0))
						}
					}
					b.ReportMetric(quantileMs(round, 0.5)*1000/writes, "us/write")
					b.ReportMetric(float64(writes*n)/1e6/(quantileMs(round, 0.5)/1000), "MB/s")
				})
			}
		}
	}
}
