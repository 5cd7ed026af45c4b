package uring

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Write benchmarks: 64 KiB writes filling a preallocated file, as a segment
// appender does, through each engine, with and without a periodic fdatasync.
//
//	STRATA_URING_BENCH_BYTES       bytes per run (default 256 MiB; the figures use 1 GiB)
//	STRATA_URING_BENCH_SYNC_BYTES  fdatasync window (default 4 MiB)
//
// Reported: MB/s (from SetBytes), cpu-s/GiB (getrusage of the whole process,
// io-wq workers included, before/after the timed part), fsync-p50/p99-ms and
// new-threads (tasks present after the run that were not before: io-wq
// workers the kernel had to start because writes were punted).
//
//	go test -run XXX -bench Write64K -benchtime 1x -count 5 ./internal/uring/
const (
	benchChunk = 64 << 10
	benchQD    = 32
)

func envBytes(b *testing.B, name string, def int64) int64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < benchChunk {
		b.Fatalf("%s=%q: want a byte count >= %d", name, s, benchChunk)
	}
	return v - v%benchChunk
}

type benchMode struct {
	name     string
	engine   string // "pwrite-loop" (one goroutine, QD 1) or a Backend
	direct   bool
	fixedBuf bool // pool registered with the ring
	fixedFd  bool // file registered with the ring
	keepSize bool // fallocate KEEP_SIZE (writes extend i_size) instead of mode 0
	rewrite  bool // the file's blocks are already written (no unwritten-extent conversion)
}

var benchModes = []benchMode{
	{name: "pwrite-loop-buffered", engine: "pwrite-loop"},
	{name: "pwrite-loop-direct", engine: "pwrite-loop", direct: true},
	{name: "pwrite-pool-buffered", engine: string(BackendPwrite)},
	{name: "pwrite-pool-direct", engine: string(BackendPwrite), direct: true},
	{name: "uring-buffered", engine: string(BackendUring), fixedFd: true},
	{name: "uring-direct", engine: string(BackendUring), direct: true},
	{name: "uring-direct-fixedbuf", engine: string(BackendUring), direct: true, fixedBuf: true},
	{name: "uring-direct-fixed", engine: string(BackendUring), direct: true, fixedBuf: true, fixedFd: true},
	{name: "uring-direct-fixed-rewrite", engine: string(BackendUring), direct: true, fixedBuf: true, fixedFd: true, rewrite: true},
	{name: "uring-direct-fixed-keepsize", engine: string(BackendUring), direct: true, fixedBuf: true, fixedFd: true, keepSize: true},
}

func BenchmarkWrite64K(b *testing.B) {
	total := envBytes(b, "STRATA_URING_BENCH_BYTES", 256<<20)
	window := envBytes(b, "STRATA_URING_BENCH_SYNC_BYTES", 4<<20)
	for _, m := range benchModes {
		for _, sync := range []bool{false, true} {
			name := m.name + "/nosync"
			if sync {
				name = m.name + "/sync"
			}
			b.Run(name, func(b *testing.B) {
				syncEvery := int64(0)
				if sync {
					syncEvery = window
				}
				benchWrite(b, m, total, syncEvery)
			})
		}
	}
}

func benchWrite(b *testing.B, m benchMode, total, syncEvery int64) {
	pool, err := NewPool(benchChunk, benchQD)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	var r *Ring
	if m.engine != "pwrite-loop" {
		cfg := Config{Backend: Backend(m.engine), Entries: 2 * benchQD, Logger: quietLogger()}
		if m.fixedBuf {
			cfg.Pools = []*Pool{pool}
		}
		if !m.fixedFd {
			cfg.FileSlots = -1
		}
		if r, err = New(cfg); err != nil {
			b.Fatal(err)
		}
		defer r.Close()
	}
	dir := b.TempDir()
	b.SetBytes(total)
	b.ReportAllocs()
	var cpu time.Duration
	var lat []time.Duration
	threads := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		osf := createPrealloc(b, filepath.Join(dir, fmt.Sprint("seg", i)), total, m.direct, m.keepSize, m.rewrite)
		before := taskCount()
		cpu0 := cpuTime()
		b.StartTimer()
		if r == nil {
			lat = append(lat, pwriteLoop(b, osf, pool, total, syncEvery)...)
		} else {
			lat = append(lat, ringWrite(b, r, osf, pool, total, syncEvery, m)...)
		}
		b.StopTimer()
		cpu += cpuTime() - cpu0
		threads = max(threads, taskCount()-before)
		if got, err := osf.Stat(); err != nil || got.Size() != total {
			b.Fatalf("file size %v (%v), want %d", got.Size(), err, total)
		}
		osf.Close()
		os.Remove(osf.Name())
		b.StartTimer()
	}
	gib := float64(total) * float64(b.N) / (1 << 30)
	b.ReportMetric(cpu.Seconds()/gib, "cpu-s/GiB")
	b.ReportMetric(float64(threads), "new-threads")
	if len(lat) > 0 {
		slices.Sort(lat)
		ms := func(q float64) float64 { // nearest rank
			i := int(math.Ceil(q*float64(len(lat)))) - 1
			return lat[max(i, 0)].Seconds() * 1000
		}
		b.ReportMetric(ms(0.5), "fsync-p50-ms")
		b.ReportMetric(ms(0.99), "fsync-p99-ms")
		b.ReportMetric(ms(1), "fsync-max-ms")
		b.ReportMetric(float64(len(lat))/float64(b.N), "fsyncs")
	}
	if r != nil && m.engine == string(BackendUring) {
		st := r.Stats()
		if st.CQEs < st.Completed || (m.fixedBuf && st.FixedBufs == 0) || (m.fixedFd && st.FixedFile == 0) {
			b.Fatalf("ring not used as configured: %+v", st)
		}
	}
}

// createPrealloc makes a file of exactly total bytes of allocated, unwritten
// blocks (fallocate mode 0), or total bytes reserved past an empty i_size
// (KEEP_SIZE, where every write extends the file).
func createPrealloc(b *testing.B, path string, total int64, direct, keepSize, rewrite bool) *os.File {
	flags := os.O_RDWR | os.O_CREATE | os.O_TRUNC
	if direct {
		flags |= unix.O_DIRECT
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	mode := uint32(0)
	if keepSize {
		mode = unix.FALLOC_FL_KEEP_SIZE
	}
	if err := unix.Fallocate(int(f.Fd()), mode, 0, total); err != nil {
		b.Fatalf("fallocate: %v", err)
	}
	if rewrite {
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < total; off += int64(len(zeros)) {
			if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), total-off)], off); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := f.Sync(); err != nil { // the allocation itself is not what is measured
		b.Fatal(err)
	}
	return f
}

// pwriteLoop is the plain baseline: one goroutine, one pwrite after another,
// a blocking fdatasync every syncEvery bytes.
func pwriteLoop(b *testing.B, f *os.File, pool *Pool, total, syncEvery int64) []time.Duration {
	buf := pool.Get()
	defer pool.Put(buf)
	fill(buf, 1)
	var lat []time.Duration
	fd := int(f.Fd())
	next := syncEvery
	for off := int64(0); off < total; off += benchChunk {
		if _, err := unix.Pwrite(fd, buf, off); err != nil {
			b.Fatal(err)
		}
		if syncEvery > 0 && (off+benchChunk >= next || off+benchChunk == total) {
			t0 := time.Now()
			if err := unix.Fdatasync(fd); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			next += syncEvery
		}
	}
	return lat
}

// ringWrite keeps benchQD writes in flight and, like the segment appender,
// tracks the written watermark from out-of-order completions and issues one
// fdatasync whenever it passes the next window boundary (never two at once).
// A final fdatasync covers the tail.
func ringWrite(b *testing.B, r *Ring, osf *os.File, pool *Pool, total, syncEvery int64, m benchMode) []time.Duration {
	f, err := r.RegisterFile(osf)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		// Ownership stays with the caller: unregister without closing.
		if err := r.control(opUnregister, f); err != nil {
			b.Fatal(err)
		}
	}()
	free := make(chan *Op, benchQD)
	for range benchQD {
		buf := pool.Get()
		fill(buf, 2)
		free <- &Op{Code: OpWrite, File: f, Buf: buf}
	}
	defer func() {
		for range benchQD {
			pool.Put((<-free).Buf)
		}
	}()

	// State below is touched only from Done callbacks (one at a time).
	var (
		wm        Watermark
		syncing   bool
		covering  int64 // watermark when the sync in flight was issued
		next      = syncEvery
		syncStart time.Time
		lat       []time.Duration
		firstErr  error
		finished  = make(chan struct{})
		syncOp    = &Op{Code: OpFsync, File: f, Datasync: true}
	)
	wm.Reset(0)
	fail := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	startSync := func(w int64) {
		syncing, covering, next = true, w, w+syncEvery
		syncStart = time.Now()
		fail(r.Submit(syncOp))
	}
	syncOp.Done = func(op *Op) {
		lat = append(lat, time.Since(syncStart))
		syncing = false
		fail(op.Err)
		w := wm.Value()
		switch {
		case covering == total:
			close(finished)
		case w >= next || w == total:
			startSync(w)
		}
	}
	writeDone := func(op *Op) {
		fail(op.Err)
		w, err := wm.Complete(op.Off, int64(op.N))
		fail(err)
		free <- op
		switch {
		case syncEvery == 0:
			if w == total {
				close(finished)
			}
		case !syncing && (w >= next || w == total):
			startSync(w)
		}
	}
	for off := int64(0); off < total; off += benchChunk {
		op := <-free
		op.Off, op.Done = off, writeDone
		if err := r.Submit(op); err != nil {
			b.Fatal(err)
		}
	}
	<-finished
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	return lat
}

func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func taskCount() int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	return len(ents)
}

// BenchmarkNop measures the ring's own cost per op: batches of benchQD nops
// submitted from one goroutine and waited for.
func BenchmarkNop(b *testing.B) {
	for _, be := range backends {
		b.Run(string(be), func(b *testing.B) {
			r := newTestRing(b, be, nil)
			done := make(chan struct{}, benchQD)
			ops := make([]Op, benchQD)
			for i := range ops {
				ops[i] = Op{Code: OpNop, Done: func(*Op) { done <- struct{}{} }}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += benchQD {
				n := min(benchQD, b.N-i)
				for j := range n {
					if err := r.Submit(&ops[j]); err != nil {
						b.Fatal(err)
					}
				}
				for range n {
					<-done
				}
			}
			b.StopTimer()
			st := r.Stats()
			b.ReportMetric(float64(st.Enters)/float64(b.N), "enters/op")
			b.ReportMetric(float64(st.Wakeups)/float64(b.N), "wakeups/op")
		})
	}
}
