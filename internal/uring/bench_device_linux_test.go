package uring

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratalog/strata/internal/diskstats"
)

// Device benchmarks: what the disk under the broker charges per request and
// per way of making appends to many files durable. They use plain O_DIRECT
// pwrite from goroutines (no ring): they measure the device and the
// filesystem, to choose the appender's design, not this package.
//
//	go test -run XXX -bench 'DeviceRequests|DurableAppends' -benchtime 1x ./internal/uring/
//
// STRATA_DEVICE_BENCH_BYTES sets the data per DurableAppends run (default
// 256 MiB). Files go to the benchmark's temporary directory: run it on the
// filesystem the broker's data directory uses.

// deviceBuf returns n bytes aligned for O_DIRECT (an anonymous mapping),
// filled with a non-zero pattern.
func deviceBuf(b *testing.B, n int) []byte {
	buf, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Munmap(buf) })
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	return buf
}

// writtenFile creates path with size bytes of written (not unwritten)
// blocks, synced, open for O_DIRECT writes.
func writtenFile(b *testing.B, path string, size int64, zeros []byte) int {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_DIRECT, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	for off := int64(0); off < size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), size-off)
		if _, err := unix.Pwrite(fd, zeros[:n], off); err != nil {
			b.Fatal(err)
		}
	}
	if err := unix.Fdatasync(fd); err != nil {
		b.Fatal(err)
	}
	return fd
}

func quantileMs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[max(i, 0)].Seconds() * 1000
}

// writeRound issues writes pwrites on fd from g goroutines (goroutine k
// takes every g-th write from k, writing bufOf(k) at offsetOf(w)) and waits
// for them.
func writeRound(b *testing.B, fd, writes, g int, bufOf func(k int) []byte, offsetOf func(w int) int64) {
	var wg sync.WaitGroup
	for k := 0; k < g; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			buf := bufOf(k)
			for w := k; w < writes; w += g {
				if _, err := unix.Pwrite(fd, buf, offsetOf(w)); err != nil {
					b.Error(err)
				}
			}
		}(k)
	}
	wg.Wait()
}

// BenchmarkDeviceRequests: rounds of 96 O_DIRECT writes (one per partition
// of a 96-partition produce cycle) at scattered offsets of a written file,
// from 1, 8 or 32 goroutines, each round followed by one fdatasync.
// us/write is the round's time over 96: if the device served requests in
// parallel it would fall with more goroutines.
func BenchmarkDeviceRequests(b *testing.B) {
	const size, writes, rounds = 256 << 20, 96, 40
	for _, n := range []int{8 << 10, 64 << 10} {
		for _, g := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("write=%dK/goroutines=%d", n>>10, g), func(b *testing.B) {
				buf := deviceBuf(b, 1<<20)
				fd := writtenFile(b, filepath.Join(b.TempDir(), "f"), size, deviceBuf(b, 4<<20))
				var round, syncs []time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for r := 0; r < rounds; r++ {
						t0 := time.Now()
						writeRound(b, fd, writes, g, func(int) []byte { return buf[:n] },
							func(w int) int64 { return int64((r*writes+w)%(size>>20)) << 20 })
						t1 := time.Now()
						if err := unix.Fdatasync(fd); err != nil {
							b.Fatal(err)
						}
						round = append(round, t1.Sub(t0))
						syncs = append(syncs, time.Since(t1))
					}
				}
				b.ReportMetric(quantileMs(round, 0.5)*1000/writes, "us/write")
				b.ReportMetric(quantileMs(syncs, 0.5), "fdatasync-p50-ms")
			})
		}
	}
}

// BenchmarkDurableAppends: 96 files each take appends in turn; a cycle
// writes w bytes to each of d files (O_DIRECT, concurrently) and then makes
// them durable, three ways:
//
//   - zerofill: the files' blocks were written (zero-filled) beforehand and
//     one fdatasync of an anchor file flushes the device cache; each cycle
//     also writes as many zero bytes to a spare written file, the cost of
//     zero-filling ahead of the appends (the broker's default: shared
//     device flushes, engine/devflush.go)
//   - recycled: the files' blocks are written before the run (a recycled
//     segment file) and nothing is zero-filled during it; one fdatasync
//     of an anchor file: the floor zerofill pays the zeros on top of
//   - perfile: unwritten extents (fallocate mode 0), one fdatasync per
//     dirty file, concurrently: each commits its extent conversion
//   - syncfs: unwritten extents, one syncfs(2) of the filesystem
//   - journal: each cycle's data goes to the device as one write to a
//     journal file (written blocks, reused in a circle) and one fdatasync
//     of it; a background goroutine copies each file's data into the file
//     (unwritten extents) 1 MiB at a time and fdatasyncs a file every
//     16 MiB, off the cycle's path (a design the broker does not have: it
//     would trade the zero-fill for a second copy of the data, and one
//     device request per partition and cycle for one per cycle)
//
// Reported: MB/s of appended data, cycle-p50/p99-ms, sync-p50-ms,
// cpu-s/GiB (the process, kernel included) and, from /proc/diskstats for
// the device under the files (other processes' I/O included), the device's
// bytes written per appended byte and its writes and flushes per cycle.
func BenchmarkDurableAppends(b *testing.B) {
	total := int64(256 << 20)
	if s := os.Getenv("STRATA_DEVICE_BENCH_BYTES"); s != "" {
		if _, err := fmt.Sscan(s, &total); err != nil || total < 1<<20 {
			b.Fatalf("STRATA_DEVICE_BENCH_BYTES=%q: want a byte count >= 1 MiB", s)
		}
	}
	shapes := []struct{ dirty, w int }{{16, 64 << 10}, {96, 8 << 10}, {96, 32 << 10}, {8, 128 << 10}}
	for _, sh := range shapes {
		for _, mode := range []string{"zerofill", "recycled", "perfile", "syncfs", "journal"} {
			b.Run(fmt.Sprintf("files=%dx%dK/%s", sh.dirty, sh.w>>10, mode), func(b *testing.B) {
				b.SetBytes(total)
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					durableAppends(b, mode, 96, sh.dirty, sh.w, total)
				}
			})
		}
	}
}

func durableAppends(b *testing.B, mode string, files, dirty, w int, total int64) {
	dir := b.TempDir()
	perFile := (total/int64(files)/int64(w) + 1) * int64(w)
	zeros := deviceBuf(b, 1<<20)
	clear(zeros)
	fds := make([]int, files)
	for i := range fds {
		path := filepath.Join(dir, fmt.Sprint(i))
		if mode == "zerofill" || mode == "recycled" {
			fds[i] = writtenFile(b, path, perFile, zeros)
			continue
		}
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_DIRECT, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { unix.Close(fd) })
		if err := unix.Fallocate(fd, 0, 0, perFile); err != nil {
			b.Fatalf("fallocate: %v (this benchmark needs a filesystem with unwritten extents)", err)
		}
		if err := unix.Fdatasync(fd); err != nil {
			b.Fatal(err)
		}
		fds[i] = fd
	}
	zlen := int64(dirty * w)
	const zsize = 64 << 20
	zf := -1
	if mode == "zerofill" {
		zf = writtenFile(b, filepath.Join(dir, "zeros"), zsize, zeros)
	}
	anchor := writtenFile(b, filepath.Join(dir, "anchor"), 4096, zeros)
	if d, err := unix.Open(dir, unix.O_RDONLY, 0); err == nil {
		unix.Fsync(d)
		unix.Close(d)
	}
	buf := deviceBuf(b, w)
	zbuf := deviceBuf(b, int(zlen))
	clear(zbuf)
	var jr *journalRun
	if mode == "journal" {
		jr = newJournalRun(b, filepath.Join(dir, "journal"), fds, zeros, zbuf)
	}
	pos := make([]int64, files)
	var cycles, syncs []time.Duration
	var written, zoff int64
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	ds0, dsErr := readDiskstats(dir)
	b.StartTimer()
	next := 0
	chosen := make([]int, 0, dirty)
	for written < total {
		t0 := time.Now()
		chosen = chosen[:0]
		for k := 0; k < dirty && written+int64(len(chosen)*w) < total; k++ {
			f := next % files
			next++
			if pos[f]+int64(w) <= perFile {
				chosen = append(chosen, f)
			}
		}
		if len(chosen) == 0 {
			break
		}
		var wg sync.WaitGroup
		if jr != nil {
			jr.cycle(b, chosen, w)
			written += int64(len(chosen) * w)
			for _, f := range chosen {
				pos[f] += int64(w)
			}
			syncs = append(syncs, jr.lastSync)
			cycles = append(cycles, time.Since(t0))
			continue
		}
		for _, f := range chosen {
			wg.Add(1)
			go func(fd int, off int64) {
				defer wg.Done()
				if _, err := unix.Pwrite(fd, buf, off); err != nil {
					b.Error(err)
				}
			}(fds[f], pos[f])
			pos[f] += int64(w)
			written += int64(w)
		}
		if zf >= 0 {
			if zoff+zlen > zsize {
				zoff = 0
			}
			if _, err := unix.Pwrite(zf, zbuf, zoff); err != nil {
				b.Error(err)
			}
			zoff += zlen
		}
		wg.Wait()
		t1 := time.Now()
		var err error
		switch mode {
		case "zerofill", "recycled":
			err = unix.Fdatasync(anchor)
		case "syncfs":
			err = unix.Syncfs(anchor)
		case "perfile":
			var mu sync.Mutex
			for _, f := range chosen {
				wg.Add(1)
				go func(fd int) {
					defer wg.Done()
					if e := unix.Fdatasync(fd); e != nil {
						mu.Lock()
						err = e
						mu.Unlock()
					}
				}(fds[f])
			}
			wg.Wait()
		}
		if err != nil {
			b.Fatal(err)
		}
		syncs = append(syncs, time.Since(t1))
		cycles = append(cycles, time.Since(t0))
	}
	if jr != nil {
		jr.finish(b)
	}
	b.StopTimer()
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	if ds1, err := readDiskstats(dir); err == nil && dsErr == nil && written > 0 {
		b.ReportMetric(float64((ds1.WriteSectors-ds0.WriteSectors)*diskstats.SectorBytes)/float64(written), "dev-bytes/byte")
		b.ReportMetric(float64(ds1.Writes-ds0.Writes)/float64(len(cycles)), "dev-writes/cycle")
		b.ReportMetric(float64(ds1.Flushes-ds0.Flushes)/float64(len(cycles)), "dev-flushes/cycle")
	}
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(quantileMs(cycles, 0.5), "cycle-p50-ms")
	b.ReportMetric(quantileMs(cycles, 0.99), "cycle-p99-ms")
	b.ReportMetric(quantileMs(syncs, 0.5), "sync-p50-ms")
	b.ReportMetric(cpu.Seconds()/(float64(written)/(1<<30)), "cpu-s/GiB")
}

// journalRun is BenchmarkDurableAppends' journal mode.
type journalRun struct {
	jf       int
	joff     int64
	jbuf     []byte
	fds      []int
	pending  []int64 // bytes journaled but not yet copied into each file
	filePos  []int64
	unsynced []int64
	copyBuf  []byte
	tasks    chan func() error
	done     chan error
	lastSync time.Duration
}

const (
	journalBytes     = 64 << 20
	journalCopyBytes = 1 << 20
	journalSyncBytes = 16 << 20
)

func newJournalRun(b *testing.B, path string, fds []int, zeros, jbuf []byte) *journalRun {
	j := &journalRun{
		jf: writtenFile(b, path, journalBytes, zeros), jbuf: jbuf, fds: fds,
		pending: make([]int64, len(fds)), filePos: make([]int64, len(fds)), unsynced: make([]int64, len(fds)),
		copyBuf: deviceBuf(b, journalCopyBytes), tasks: make(chan func() error, 64), done: make(chan error, 1),
	}
	for i := range j.jbuf {
		j.jbuf[i] = byte(i*3 + 1)
	}
	go func() {
		var first error
		for t := range j.tasks {
			if err := t(); err != nil && first == nil {
				first = err
			}
		}
		j.done <- first
	}()
	return j
}

// cycle journals w bytes for each chosen file in one write and one
// fdatasync, and queues the background copies that became due.
func (j *journalRun) cycle(b *testing.B, chosen []int, w int) {
	n := int64(len(chosen) * w)
	if j.joff+n > journalBytes {
		j.joff = 0
	}
	if _, err := unix.Pwrite(j.jf, j.jbuf[:n], j.joff); err != nil {
		b.Fatal(err)
	}
	j.joff += n
	t1 := time.Now()
	if err := unix.Fdatasync(j.jf); err != nil {
		b.Fatal(err)
	}
	j.lastSync = time.Since(t1)
	for _, f := range chosen {
		j.pending[f] += int64(w)
		for j.pending[f] >= journalCopyBytes {
			fd, off := j.fds[f], j.filePos[f]
			j.pending[f] -= journalCopyBytes
			j.filePos[f] += journalCopyBytes
			j.unsynced[f] += journalCopyBytes
			sync := j.unsynced[f] >= journalSyncBytes
			if sync {
				j.unsynced[f] = 0
			}
			j.tasks <- func() error {
				if _, err := unix.Pwrite(fd, j.copyBuf, off); err != nil {
					return err
				}
				if sync {
					return unix.Fdatasync(fd)
				}
				return nil
			}
		}
	}
}

// finish waits for the background copies (counted in the run's time).
func (j *journalRun) finish(b *testing.B) {
	close(j.tasks)
	if err := <-j.done; err != nil {
		b.Fatal(err)
	}
}

// readDiskstats reads the counters of the device holding dir.
func readDiskstats(dir string) (diskstats.Stats, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return diskstats.Stats{}, err
	}
	return diskstats.Read(unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)))
}
