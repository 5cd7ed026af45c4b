//go:build linux

package segment_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratalog/strata/internal/uring"
	"github.com/stratalog/strata/segment"
	"github.com/stratalog/strata/segment/segmenttest"
)

// benchRollBytes is where the appender benchmark rolls to a new segment
// file (the old one is deleted), so runs of any length stay on a bounded
// amount of disk and keep meeting fresh reservations, as a partition does.
const benchRollBytes = 256 << 20

// benchSyncEvery is the bytes appended between Syncs in the "every1MiB"
// mode: a 5 ms flush window at 200 MB/s.
const benchSyncEvery = 1 << 20

// benchPacedBytesPerSec is the append rate of the "paced200MBps" mode (with
// the 2 ms flusher): 200,000 1 KiB records/s, the engine's latency target.
const benchPacedBytesPerSec = 200e6

func cpuSeconds(tb testing.TB) float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// latencies records sync durations without allocating in steady state.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	if len(l.d) < cap(l.d) {
		l.d = append(l.d, d)
	}
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	q := func(p float64) float64 {
		return float64(l.d[min(len(l.d)-1, int(p*float64(len(l.d))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "sync-p50-ms")
	b.ReportMetric(q(0.99), "sync-p99-ms")
	b.ReportMetric(float64(len(l.d))/float64(b.N), "syncs/op")
}

// BenchmarkAppender compares the segment backends at the segment level:
// 1 KiB and 64 KiB appends into segments preallocated like the engine's
// (1 GiB segment.bytes, PreallocStepBytes steps), without syncs, with a Sync
// after every MiB appended (same goroutine), and with a goroutine calling
// Sync every 2 ms (the flusher's window) while appends go on, and the same
// with appends paced at 200 MB/s (the produce-latency target's rate). Reports MB/s, CPU-seconds per GiB appended
// (getrusage of the process, io-wq workers included) and Sync p50/p99.
func BenchmarkAppender(b *testing.B) {
	type be struct {
		name string
		opts func(b *testing.B) segment.Options
	}
	ringOpts := func(backend uring.Backend, direct, pre bool) func(*testing.B) segment.Options {
		return func(b *testing.B) segment.Options {
			pool, err := uring.NewPool(segment.DirectChunkBytes, segment.DirectDepth+2)
			if err != nil {
				b.Fatal(err)
			}
			r, err := uring.New(uring.Config{Backend: backend, Pools: []*uring.Pool{pool}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				r.Close()
				pool.Close()
			})
			return segment.Options{Ring: r, Direct: direct, PreWrite: pre, Pool: pool}
		}
	}
	backends := []be{
		{"Pwrite", func(*testing.B) segment.Options { return segment.Options{} }},
		{"RingBuffered", ringOpts(uring.BackendUring, false, false)},
		{"RingDirect", ringOpts(uring.BackendUring, true, false)},
		{"RingDirectPrewrite", ringOpts(uring.BackendUring, true, true)},
	}
	for _, bk := range backends {
		for _, size := range []int{1 << 10, 64 << 10} {
			for _, mode := range []string{"nosync", "every1MiB", "concurrent", "paced200MBps"} {
				b.Run(fmt.Sprintf("%s/%dKiB/%s", bk.name, size>>10, mode), func(b *testing.B) {
					benchAppender(b, bk.opts(b), size, mode)
				})
			}
		}
	}
}

func benchAppender(b *testing.B, opts segment.Options, size int, mode string) {
	dir := b.TempDir()
	batch := segmenttest.MakeBatch(nil, 0, 1, 0, 0, make([]byte, size-61))
	if len(batch) != size {
		b.Fatalf("batch is %d bytes, want %d", len(batch), size)
	}
	gen := 0
	var s *segment.Segment
	roll := func() {
		if s != nil {
			old := s.Path()
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			if err := os.Remove(old); err != nil {
				b.Fatal(err)
			}
		}
		gen++
		var err error
		if s, err = segment.CreateWith(filepath.Join(dir, fmt.Sprintf("%020d.log", gen)), 1<<30, opts); err != nil {
			b.Fatal(err)
		}
	}
	roll()
	lat := &latencies{d: make([]time.Duration, 0, 1<<16)}
	var mu sync.Mutex // concurrent mode: the flusher must not Sync a segment being rolled
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if mode == "concurrent" || mode == "paced200MBps" {
		synced := int64(-1)
		wg.Go(func() {
			tick := time.NewTicker(2 * time.Millisecond) // the flusher's window
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				mu.Lock()
				if sz := s.Size(); sz == synced {
					mu.Unlock()
					continue // nothing appended in this window
				} else {
					synced = sz
				}
				t0 := time.Now()
				err := s.Sync()
				lat.add(time.Since(t0))
				mu.Unlock()
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	syncEvery := max(1, benchSyncEvery/size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu0 := cpuSeconds(b)
	i := 0
	start := time.Now()
	for b.Loop() {
		if mode == "paced200MBps" && i%64 == 0 {
			// Hold the rate at benchPacedBytesPerSec: sleep when ahead.
			due := time.Duration(float64(i*size) / benchPacedBytesPerSec * float64(time.Second))
			if ahead := due - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		if s.Size() >= benchRollBytes {
			mu.Lock()
			roll()
			mu.Unlock()
		}
		if _, err := s.Append(batch); err != nil {
			b.Fatal(err)
		}
		i++
		if mode == "every1MiB" && i%syncEvery == 0 {
			t0 := time.Now()
			if err := s.Sync(); err != nil {
				b.Fatal(err)
			}
			lat.add(time.Since(t0))
		}
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	cpu := cpuSeconds(b) - cpu0
	b.ReportMetric(cpu/(float64(b.N)*float64(size)/(1<<30)), "cpu-s/GiB")
	lat.report(b)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}
