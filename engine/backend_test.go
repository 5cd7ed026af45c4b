package engine

import (
	"github.com/stratalog/strata/internal/stratatest"

	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/segment"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer = stratatest.LogBuffer

func TestParseIOBackend(t *testing.T) {
	for in, want := range map[string]string{"": "auto", "auto": "auto", "uring": "uring", "pwrite": "pwrite"} {
		if got, err := ParseIOBackend(in); err != nil || got != want {
			t.Fatalf("ParseIOBackend(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseIOBackend("mmap"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("ParseIOBackend(mmap): %v", err)
	}
}

// TestIOBackendChoice: each log.io.backend value gives the backend it
// names and logs which one is active and why; where the O_DIRECT probe
// fails, uring fails Open.
func TestIOBackendChoice(t *testing.T) {
	open := func(dir, backend string) (*Engine, string, error) {
		var out syncBuffer
		e, err := Open(Options{Dir: dir, IOBackend: backend, Logger: slog.New(slog.NewTextHandler(&out, nil))})
		return e, out.String(), err
	}
	for _, c := range []struct {
		backend string
		direct  bool
		log     string
	}{
		{"", true, `backend="io_uring O_DIRECT" reason="log.io.backend=auto"`}, // see "Why auto is uring"
		{"uring", true, `backend="io_uring O_DIRECT"`},
		{"pwrite", false, `backend=pwrite reason="log.io.backend=pwrite"`},
	} {
		e, out, err := open(t.TempDir(), c.backend)
		if err != nil {
			t.Fatalf("%q: %v", c.backend, err)
		}
		if e.io.direct() != c.direct || !strings.Contains(out, c.log) {
			t.Fatalf("%q: direct %v, log %q", c.backend, e.io.direct(), out)
		}
		// The tail cache is on by default only where the page cache does
		// not already hold the tail (O_DIRECT).
		if (e.tails != nil) != c.direct {
			t.Fatalf("%q: tail cache on = %v with direct = %v", c.backend, e.tails != nil, c.direct)
		}
		// The backend works end to end: append, durable, read back.
		l := mustTopic(t, e, "b", 1, nil).Partition(0)
		b := batchOf(t, 3, 100, 1, 1)
		info := mustAppend(t, l, b)
		want := append([]byte(nil), b...) // as stored: patched in place
		if err := waitDurable(t, l, info.LastOffset); err != nil {
			t.Fatal(err)
		}
		got, _ := readAll(t, l, 0, 1<<20)
		if len(got) != 1 || !bytes.Equal(got[0], want) {
			t.Fatalf("%q: read back %d batches", c.backend, len(got))
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// A data directory where the O_DIRECT probe cannot run (here: a path
	// under a regular file) makes uring fail.
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := newIOBackend("uring", filepath.Join(notDir, "data"), nil, true, true, quietLogger()); err == nil {
		b.close()
		t.Fatal("log.io.backend=uring succeeded where the O_DIRECT probe fails")
	}
}

// TestDirectReadsNeverPassWritten: with write.caching the HW moves at
// append, before a Direct segment wrote its partial tail chunk; Read (file
// chunks only) must still return the batch, with its bytes in the file.
func TestDirectReadsNeverPassWritten(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.IOBackend = IOBackendUring })
	defer e.Close()
	l := mustTopic(t, e, "wc", 1, map[string]string{"write.caching": "true"}).Partition(0)
	for i := range 20 {
		b := batchOf(t, 2, 50+i, int64(i), i)
		info := mustAppend(t, l, b)
		want := append([]byte(nil), b...)
		s := l.active
		if i == 0 && s.seg.Written() >= s.end.Load() {
			t.Fatalf("written %d, end %d: the tail was not behind (nothing exercised)", s.seg.Written(), s.end.Load())
		}
		if l.HighWatermark() != info.LastOffset+1 {
			t.Fatalf("write.caching HW %d, want %d", l.HighWatermark(), info.LastOffset+1)
		}
		res, err := l.Read(info.BaseOffset, 1<<20, true)
		if err != nil || len(res.Chunks) != 1 || res.Chunks[0].File == nil || res.Chunks[0].Buf != nil {
			t.Fatalf("Read(%d): %v %+v", info.BaseOffset, err, res.Chunks)
		}
		got := readChunks(t, res)
		res.Release()
		if !bytes.Equal(got, want) {
			t.Fatalf("batch %d read from the file differs", i)
		}
		if w := s.seg.Written(); w < res.Chunks[0].Pos+res.Chunks[0].Len {
			t.Fatalf("chunk ends at %d past the written end %d", res.Chunks[0].Pos+res.Chunks[0].Len, w)
		}
	}
}

// TestReadMemServesTheTail: ReadMem answers consumers at the head from
// memory with the same bytes Read finds in the file; a memory chunk stays
// unchanged while the cache moves on, until Release; buffers are reused.
func TestReadMemServesTheTail(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.TailCacheBytes = 64 << 20 })
	defer e.Close()
	l := mustTopic(t, e, "tc", 1, nil).Partition(0)
	readingHead(t, l)
	var stored [][]byte
	appendN := func(n, size int) AppendInfo {
		var info AppendInfo
		for i := range n {
			b := batchOf(t, 1, size, int64(i), len(stored))
			info = mustAppend(t, l, b)
			stored = append(stored, append([]byte(nil), b...)) // patched in place
		}
		if err := waitDurable(t, l, info.LastOffset); err != nil {
			t.Fatal(err)
		}
		return info
	}
	appendN(50, 900)
	mem, err := l.ReadMem(10, 64<<10, true)
	if err != nil || len(mem.Chunks) == 0 {
		t.Fatalf("ReadMem: %v, %d chunks", err, len(mem.Chunks))
	}
	var memBytes []byte
	for _, c := range mem.Chunks {
		if c.Buf == nil || c.File != nil || int64(len(c.Buf)) != c.Len {
			t.Fatalf("ReadMem chunk %+v is not a memory chunk", c)
		}
		memBytes = append(memBytes, c.Buf...)
	}
	file, err := l.Read(10, 64<<10, true)
	if err != nil {
		t.Fatal(err)
	}
	fileBytes := readChunks(t, file)
	file.Release()
	if !bytes.Equal(memBytes, fileBytes) || int64(len(memBytes)) != mem.Bytes {
		t.Fatalf("ReadMem gave %d bytes, Read %d, or they differ", len(memBytes), len(fileBytes))
	}
	if !bytes.Equal(memBytes[:len(stored[10])], stored[10]) {
		t.Fatal("ReadMem does not start with the batch at offset 10")
	}
	// Push twice the per-log cap through the cache: the pinned chunk must
	// not change; the buffer comes back after Release.
	keep := append([]byte(nil), memBytes...)
	appendN(2*tailBufsPerLog*tailBufBytes/900, 900)
	var again []byte
	for _, c := range mem.Chunks {
		again = append(again, c.Buf...)
	}
	if !bytes.Equal(again, keep) {
		t.Fatal("a pinned memory chunk changed before Release")
	}
	mem.Release()
	mem.Release() // idempotent
	// The head is in memory, the old offsets are not any more.
	end := l.LogEndOffset()
	head, err := l.ReadMem(end-3, 1<<20, true)
	if err != nil || len(head.Chunks) == 0 || head.Chunks[0].Buf == nil {
		t.Fatalf("ReadMem at the head: %v %+v", err, head.Chunks)
	}
	var n int
	for _, c := range head.Chunks {
		for rest := c.Buf; len(rest) > 0; n++ {
			b, r, _, err := record.Next(rest)
			if err != nil || !bytes.Equal(b, stored[int(end)-3+n]) {
				t.Fatalf("head batch %d: %v", n, err)
			}
			rest = r
		}
	}
	head.Release()
	if n != 3 {
		t.Fatalf("%d batches at the head, want 3", n)
	}
	old, err := l.ReadMem(10, 1<<20, true)
	if err != nil || len(old.Chunks) != 1 || old.Chunks[0].File == nil {
		t.Fatalf("ReadMem of an evicted offset: %v %+v", err, old.Chunks)
	}
	old.Release()
	e.tails.mu.Lock()
	made, free := e.tails.made, len(e.tails.free)
	e.tails.mu.Unlock()
	if made > tailBufsPerLog+1 || made-free > tailBufsPerLog {
		t.Fatalf("tail pool made %d buffers, %d free: buffers are not reused", made, free)
	}
}

// TestTailCacheBudget: with a global budget smaller than the partitions'
// wish, appends and reads on every partition stay correct (partitions
// without a buffer are served from the file).
func TestTailCacheBudget(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.TailCacheBytes = 2 * tailBufBytes })
	defer e.Close()
	tp := mustTopic(t, e, "budget", 4, nil)
	want := make([][][]byte, 4)
	for i := range 400 {
		p := i % 4
		l := tp.Partition(int32(p))
		b := batchOf(t, 1, 3000, int64(i), i)
		info := mustAppend(t, l, b)
		want[p] = append(want[p], append([]byte(nil), b...))
		if err := waitDurable(t, l, info.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
	for p := range 4 {
		l := tp.Partition(int32(p))
		for off := int64(0); off < l.LogEndOffset(); off++ {
			res, err := l.ReadMem(off, 1, true)
			if err != nil || len(res.Chunks) != 1 {
				t.Fatalf("p%d ReadMem(%d): %v %d", p, off, err, len(res.Chunks))
			}
			var got []byte
			if c := res.Chunks[0]; c.Buf != nil {
				got = c.Buf
			} else {
				got = readChunks(t, res)
			}
			if !bytes.Equal(got, want[p][off]) {
				t.Fatalf("p%d offset %d differs", p, off)
			}
			res.Release()
		}
	}
	if e.tails.made > 2 {
		t.Fatalf("tail pool made %d buffers over a budget of 2", e.tails.made)
	}
}

// cpuSecondsSelf is the process's user+system CPU time (getrusage; io_uring
// io-wq workers are threads of the process and included).
func cpuSecondsSelf(tb testing.TB) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// BenchmarkBackendAppendDurable compares the backends end to end through
// the engine: 16 producers append 1 KiB records (or 64 KiB batches) to 4
// (or 64) partitions and each waits for WhenDurable (acks=all, fsync before
// the ack, group commit). "uring" shares device flushes (zero-filled
// segments, devflush.go), "uring-ownsync" fdatasyncs each segment
// (log.io.flush.shared=false). Reports MB/s, CPU-seconds per GiB
// (getrusage, io-wq kernel workers included) and segment syncs per op.
func BenchmarkBackendAppendDurable(b *testing.B) {
	for _, backend := range []string{IOBackendPwrite, IOBackendUring, "uring-ownsync"} {
		for _, size := range []struct {
			name         string
			records, val int
			partitions   int32
		}{{"1KiB", 1, 1000, 4}, {"64KiB", 64, 1000, 4}, {"64KiB-64p", 64, 1000, 64}} {
			b.Run(backend+"/"+size.name, func(b *testing.B) {
				e := openEngine(b, b.TempDir(), func(o *Options) {
					o.IOBackend = backend
					if backend == "uring-ownsync" {
						o.IOBackend, o.DisableSharedFlush = IOBackendUring, true
					}
				})
				defer e.Close()
				nparts := size.partitions
				tp := mustTopic(b, e, "bench", nparts, map[string]string{"segment.bytes": fmt.Sprint(256 << 20)})
				batch := batchOf(b, size.records, size.val, 1, 0)
				b.SetBytes(int64(len(batch)))
				var next atomic.Int32
				cpu0 := cpuSecondsSelf(b)
				b.SetParallelism(8) // 16 producers on 2 cores
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					l := tp.Partition(next.Add(1) % nparts)
					mine := append([]byte(nil), batch...)
					done := make(chan error, 1)
					cb := func(err error) { done <- err }
					for pb.Next() {
						info, err := l.Append(mine, 0)
						if err != nil {
							b.Error(err)
							return
						}
						l.WhenDurable(info.LastOffset, cb)
						if err := <-done; err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				gib := float64(b.N) * float64(len(batch)) / (1 << 30)
				b.ReportMetric((cpuSecondsSelf(b)-cpu0)/gib, "cpu-s/GiB")
				b.ReportMetric(float64(e.syncs.Load())/float64(b.N), "syncs/op")
			})
		}
	}
}

// BenchmarkReadHead compares a consumer at the head: Read (file chunk; the
// bytes then read back with pread, as sendfile would) against ReadMem
// (memory chunk from the tail cache), on the O_DIRECT backend where the
// page cache does not hold just-written bytes.
func BenchmarkReadHead(b *testing.B) {
	for _, mem := range []bool{false, true} {
		b.Run(fmt.Sprintf("mem=%v", mem), func(b *testing.B) {
			e := openEngine(b, b.TempDir(), func(o *Options) { o.IOBackend = IOBackendUring })
			defer e.Close()
			l := mustTopic(b, e, "head", 1, nil).Partition(0)
			batch := batchOf(b, 16, 1000, 1, 0)
			buf := make([]byte, 1<<20)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				info, err := l.Append(batch, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := waitDurable(b, l, info.LastOffset); err != nil {
					b.Fatal(err)
				}
				read := l.Read
				if mem {
					read = l.ReadMem
				}
				res, err := read(info.BaseOffset, 1<<20, true)
				if err != nil || len(res.Chunks) == 0 {
					b.Fatalf("read: %v", err)
				}
				for _, c := range res.Chunks {
					if c.Buf == nil {
						if _, err := c.File.ReadAt(buf[:c.Len], c.Pos); err != nil {
							b.Fatal(err)
						}
					}
				}
				res.Release()
			}
		})
	}
}

// TestTailCacheStaleAfterTruncation: bytes cached before a truncation are
// never served after it when a follower rewrote the same offsets at the
// same positions (the truncation resets the cache; Segment.Truncations is
// the second guard).
func TestTailCacheStaleAfterTruncation(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.TailCacheBytes = 64 << 20 })
	defer e.Close()
	l := mustTopic(t, e, "trunc", 1, nil).Partition(0)
	readingHead(t, l)
	var last AppendInfo
	for i := range 10 {
		last = mustAppend(t, l, batchOf(t, 1, 200, int64(i), i))
	}
	if err := waitDurable(t, l, last.LastOffset); err != nil {
		t.Fatal(err)
	}
	if res, err := l.ReadMem(5, 1<<20, true); err != nil || len(res.Chunks) == 0 || res.Chunks[0].Buf == nil {
		t.Fatalf("not served from the cache before the truncation: %v %+v", err, res.Chunks)
	} else {
		res.Release()
	}
	if _, err := l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for i := range 5 {
		b := batchOf(t, 1, 200, int64(100+i), 1000+i) // same sizes, other bytes
		record.SetBaseOffset(b, int64(5+i))
		if _, err := l.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
		want = append(want, append([]byte(nil), b...))
	}
	res, err := l.ReadReplicaMem(5, 1<<20, true)
	if err != nil || len(res.Chunks) == 0 {
		t.Fatalf("ReadReplicaMem: %v", err)
	}
	var got []byte
	for _, c := range res.Chunks {
		if c.Buf != nil {
			got = append(got, c.Buf...)
		} else {
			got = append(got, readChunks(t, ReadResult{Chunks: []Chunk{c}, Bytes: c.Len})...)
		}
	}
	res.Release()
	if !bytes.HasPrefix(got, want[0]) {
		t.Fatal("a read after the truncation returned bytes cached before it")
	}
}

// TestDirectManyPartitions: segments beyond one pool's share get further
// pools, the first richGroups with richSpareChunks spare chunks and the
// next with poolSpareChunks; every partition appends, syncs and reads
// back; Close releases the ring and every pool (no warning logged).
func TestDirectManyPartitions(t *testing.T) {
	var out syncBuffer
	e := openEngine(t, t.TempDir(), func(o *Options) {
		o.IOBackend = IOBackendUring
		o.Logger = slog.New(slog.NewTextHandler(&out, nil))
	})
	const parts = richGroups*segsPerPool + 5
	tp := mustTopic(t, e, "many", parts, map[string]string{"preallocate": "false"})
	infos := make([]AppendInfo, parts)
	want := make([][]byte, parts)
	for p := range parts {
		b := batchOf(t, 2, 100+p, int64(p), p)
		infos[p] = mustAppend(t, tp.Partition(int32(p)), b)
		want[p] = append([]byte(nil), b...)
	}
	for p := range parts {
		l := tp.Partition(int32(p))
		if err := waitDurable(t, l, infos[p].LastOffset); err != nil {
			t.Fatal(err)
		}
		got, _ := readAll(t, l, 0, 1<<20)
		if len(got) != 1 || !bytes.Equal(got[0], want[p]) {
			t.Fatalf("partition %d read back wrong", p)
		}
	}
	e.io.mu.Lock()
	var chunks []int
	for _, g := range e.io.groups {
		chunks = append(chunks, g.pool.Chunks())
	}
	e.io.mu.Unlock()
	if len(chunks) != richGroups+1 {
		t.Fatalf("%d pools for %d segments of %d per pool", len(chunks), parts, segsPerPool)
	}
	for i, n := range chunks {
		want := segsPerPool + richSpareChunks
		if i >= richGroups {
			want = segsPerPool + poolSpareChunks
		}
		if n != want {
			t.Fatalf("pool %d has %d chunks, want %d (all: %v)", i, n, want, chunks)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); strings.Contains(s, "level=WARN") {
		t.Fatalf("warnings at Close: %s", s)
	}
	e.io.mu.Lock()
	refs := e.io.refs
	e.io.mu.Unlock()
	if refs != 0 {
		t.Fatalf("%d backend references left after Close: the ring and pools stay open", refs)
	}
}

// TestDirectWriteCachingBigChunks: active segments of logs with write
// caching get pools of big chunks, at most bigChunkGroups of them (the
// rest share ordinary pools); other logs keep ordinary chunks; appends
// read back from both.
func TestDirectWriteCachingBigChunks(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.IOBackend = IOBackendUring })
	defer e.Close()
	const wcParts = bigChunkGroups*segsPerPool + 3
	wc := mustTopic(t, e, "wc", wcParts, map[string]string{"write.caching": "true", "preallocate": "false"})
	plain := mustTopic(t, e, "plain", 2, map[string]string{"preallocate": "false"})
	for _, l := range []*Log{wc.Partition(0), wc.Partition(wcParts - 1), plain.Partition(1)} {
		b := batchOf(t, 2, 300, 0, 0)
		info := mustAppend(t, l, b)
		if err := waitDurable(t, l, info.LastOffset); err != nil {
			t.Fatal(err)
		}
		if got, _ := readAll(t, l, 0, 1<<20); len(got) != 1 || !bytes.Equal(got[0], b) {
			t.Fatalf("%s read back wrong", l.dir)
		}
	}
	chunk := func(l *Log) int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.active.grp.pool.ChunkBytes()
	}
	e.io.mu.Lock()
	var bigs, users, ordinary int
	for _, g := range e.io.groups {
		if g.big {
			bigs++
			users += g.users
			if g.pool.ChunkBytes() != bigPoolChunkBytes {
				t.Errorf("a big pool has %d-byte chunks", g.pool.ChunkBytes())
			}
		} else {
			ordinary++
		}
	}
	e.io.mu.Unlock()
	if bigs != bigChunkGroups || users != bigChunkGroups*segsPerPool || ordinary < 1 {
		t.Fatalf("%d big pools with %d segments, %d ordinary: want %d big pools, full", bigs, users, ordinary, bigChunkGroups)
	}
	if c := chunk(wc.Partition(0)); c != bigPoolChunkBytes {
		t.Fatalf("write-caching partition 0: %d-byte chunks, want %d", c, bigPoolChunkBytes)
	}
	if c := chunk(wc.Partition(wcParts - 1)); c != poolChunkBytes {
		t.Fatalf("write-caching partition past the big pools: %d-byte chunks, want %d", c, poolChunkBytes)
	}
	if c := chunk(plain.Partition(0)); c != poolChunkBytes {
		t.Fatalf("partition without write caching: %d-byte chunks, want %d", c, poolChunkBytes)
	}
}

// TestDirectSealedSegmentsFreePoolShares: rolled (sealed) Direct segments
// give their pool share back, so a partition with many segments does not
// map pool after pool.
func TestDirectSealedSegmentsFreePoolShares(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.IOBackend = IOBackendUring })
	defer e.Close()
	l := mustTopic(t, e, "rolls", 1, smallConfig()).Partition(0)
	var last AppendInfo
	for i := range 200 {
		last = mustAppend(t, l, batchOf(t, 1, 1500, int64(i), i)) // two per 4 KiB segment
	}
	if err := waitDurable(t, l, last.LastOffset); err != nil {
		t.Fatal(err)
	}
	segs := len(*l.segs.Load())
	e.io.mu.Lock()
	groups, users := len(e.io.groups), e.io.groups[0].users
	e.io.mu.Unlock()
	if segs < 2*segsPerPool || groups != 1 || users != 1 {
		t.Fatalf("%d segments: %d pools, %d active users of the first", segs, groups, users)
	}
	got, _ := readAll(t, l, 0, 1<<20)
	if len(got) != 200 {
		t.Fatalf("read back %d of 200 batches", len(got))
	}
}

// TestTailCacheConcurrentReaders: readers at the head while the appender
// fills, evicts and steals buffers (a budget of three buffers for two
// partitions): every batch a read returns is whole, passes its CRC and is
// the one at its offset; memory chunks do not change before Release.
func TestTailCacheConcurrentReaders(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.TailCacheBytes = 3 * tailBufBytes })
	defer e.Close()
	tp := mustTopic(t, e, "conc", 2, map[string]string{"write.caching": "true"})
	const n = 1500
	batches := make([][][]byte, 2)
	for p := range batches {
		for i := range n {
			batches[p] = append(batches[p], batchOf(t, 1+i%3, 200+i%5*300, int64(i), p*n+i))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for p := range 2 {
		l := tp.Partition(int32(p))
		wg.Add(1)
		go func() { // the appender
			defer wg.Done()
			for _, b := range batches[p] {
				if _, err := l.Append(b, 0); err != nil {
					errs <- err
					return
				}
			}
		}()
		for range 2 {
			wg.Add(1)
			go func() { // a head reader: reads until it has seen every batch
				defer wg.Done()
				next := int64(0)
				for guard := 0; next < n && guard < 10_000_000; guard++ {
					res, err := l.ReadMem(next, 64<<10, true)
					if err != nil {
						errs <- err
						return
					}
					data, err := resultBytes(&res)
					if err != nil {
						errs <- err
						res.Release()
						return
					}
					before := append([]byte(nil), data...)
					for rest := data; len(rest) > 0; {
						b, r, h, err := record.Next(rest)
						if err != nil || !record.CheckCRC(b) || h.BaseOffset != next {
							errs <- fmt.Errorf("p%d: bad batch at %d (base %d): %v", p, next, h.BaseOffset, err)
							res.Release()
							return
						}
						next = h.LastOffset() + 1
						rest = r
					}
					var again []byte
					for _, c := range res.Chunks {
						again = append(again, c.Buf...)
					}
					if len(again) > 0 && !bytes.Equal(again, before[:len(again)]) {
						errs <- fmt.Errorf("p%d: memory chunk changed before Release", p)
					}
					res.Release()
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for p := range 2 {
		if end := tp.Partition(int32(p)).LogEndOffset(); end < n {
			t.Fatalf("p%d ends at %d", p, end)
		}
	}
}

// A zero-fill write carries no more pages than one device request takes
// (queue/max_segments; the buffer's pages are not physically contiguous):
// 254 pages on this VM's virtio disk, so 1,016 KiB instead of 1 MiB.
func TestZeroWriteBytes(t *testing.T) {
	for _, c := range []struct{ buf, segs, want int }{
		{1 << 20, 254, 254 * 4096},
		{1 << 20, 0, 1 << 20},    // unknown: the whole buffer
		{1 << 20, 1024, 1 << 20}, // the device takes more than the buffer
		{1 << 20, 1, 16 * 4096},  // a nonsense limit is not taken literally
	} {
		if got := zeroWriteBytes(c.buf, c.segs); got != c.want {
			t.Errorf("zeroWriteBytes(%d, %d) = %d, want %d", c.buf, c.segs, got, c.want)
		}
	}
	if n := segment.MaxWriteSegments(filepath.Join(t.TempDir(), "missing")); n != 0 {
		t.Errorf("max segments of a missing path: %d", n)
	}
}
