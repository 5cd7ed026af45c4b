package engine

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
)

// TestDirectReadIndexJumpStopsAtWritten: a Read that spans many index
// entries (the offset-index jump in scanRead) on a Direct segment whose
// tail is still in the appender's chunk (write.caching: the HW is the log
// end) must end at the written end, not at the last indexed batch below
// the HW. Index entries are added at append, before the write-behind put
// the bytes in the file; jumping to one past Written returned zeros (the
// unwritten reservation), which is what TestTailCacheConcurrentReaders
// with log.io.backend=uring caught.
func TestDirectReadIndexJumpStopsAtWritten(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.IOBackend = IOBackendUring })
	defer e.Close()
	l := mustTopic(t, e, "jump", 1, map[string]string{
		"write.caching":        "true",
		"index.interval.bytes": "2048",
	}).Partition(0)
	var want [][]byte
	// 300 KiB: two full 128 KiB chunks are written, the rest stays behind.
	for i := 0; l.active.end.Load() < 300<<10; i++ {
		b := batchOf(t, 1, 1000, int64(i), i)
		mustAppend(t, l, b)
		want = append(want, append([]byte(nil), b...))
	}
	s := l.active
	// Written moves when the chunk writes complete; wait for the two full
	// chunks (their completions are already on their way).
	for deadline := time.Now().Add(30 * time.Second); s.seg.Written() < 256<<10 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // hang guard only
	}
	w := s.seg.Written()
	if w < 256<<10 || w >= s.end.Load() {
		t.Fatalf("written %d, end %d: the test needs a tail behind the written end", w, s.end.Load())
	}
	res, err := l.Read(0, 1<<20, true)
	if err != nil || len(res.Chunks) != 1 {
		t.Fatalf("Read: %v, %d chunks", err, len(res.Chunks))
	}
	c := res.Chunks[0]
	if c.Pos+c.Len > w {
		t.Fatalf("file chunk [%d, %d) passes the written end %d", c.Pos, c.Pos+c.Len, w)
	}
	got := readChunks(t, res)
	res.Release()
	n := 0
	for rest := got; len(rest) > 0; n++ {
		b, r, _, err := record.Next(rest)
		if err != nil || n >= len(want) || !bytes.Equal(b, want[n]) {
			t.Fatalf("batch %d of the read differs from the one appended (%v)", n, err)
		}
		rest = r
	}
	if int64(n) < 200 {
		t.Fatalf("read %d batches below the written end %d: the index jump was not exercised", n, w)
	}
}

// TestHeadReadersEveryBackend: on each I/O backend, readers at the head
// of two partitions (ReadMem, and Read whose chunks are file ranges only)
// while the appenders fill, evict and steal tail-cache buffers, with
// write.caching (the HW runs ahead of a Direct segment's written end) and
// small index intervals (reads jump through the offset index): every batch
// a read returns is whole, passes its CRC, is the one at its offset and
// equals the batch appended.
func TestHeadReadersEveryBackend(t *testing.T) {
	for _, backend := range []string{IOBackendPwrite, IOBackendUring} {
		t.Run(backend, func(t *testing.T) {
			e := openEngine(t, t.TempDir(), func(o *Options) {
				o.IOBackend = backend
				o.TailCacheBytes = 3 * tailBufBytes
			})
			defer e.Close()
			tp := mustTopic(t, e, "head", 2, map[string]string{
				"write.caching":        "true",
				"index.interval.bytes": "1024",
			})
			const n = 1500
			batches := make([][][]byte, 2)
			for p := range batches {
				for i := range n {
					batches[p] = append(batches[p], batchOf(t, 1+i%3, 200+i%5*300, int64(i), p*n+i))
				}
			}
			// The readers' copies: Append patches the batches in place.
			copies := make([][][]byte, 2)
			for p := range batches {
				for _, b := range batches[p] {
					copies[p] = append(copies[p], append([]byte(nil), b...))
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8)
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
				for _, mem := range []bool{true, false} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := readHead(l, copies[p], mem); err != nil {
							errs <- fmt.Errorf("p%d mem=%v: %w", p, mem, err)
						}
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}

// readHead reads l from offset 0 until it has seen every batch of want
// (batch i holds offsets i*... as appended), checking each against want.
func readHead(l *Log, want [][]byte, mem bool) error {
	byBase := make(map[int64][]byte, len(want))
	next := int64(0)
	for _, b := range want {
		byBase[next] = b
		h, err := record.ParseHeader(b)
		if err != nil {
			return err
		}
		next += int64(h.LastOffsetDelta) + 1
	}
	end, next := next, 0
	for guard := 0; next < end && guard < 10_000_000; guard++ {
		var res ReadResult
		var err error
		if mem {
			res, err = l.ReadMem(next, 64<<10, true)
		} else {
			res, err = l.Read(next, 64<<10, true)
		}
		if err != nil {
			return err
		}
		data, err := resultBytes(&res)
		res.Release()
		if err != nil {
			return err
		}
		for rest := data; len(rest) > 0; {
			b, r, h, err := record.Next(rest)
			if err != nil || h.BaseOffset != next || !record.CheckCRC(b) {
				return fmt.Errorf("bad batch at %d (base %d): %v", next, h.BaseOffset, err)
			}
			// The broker patched baseOffset (bytes 0-8) and the leader
			// epoch (12-16); the rest is the producer's.
			if w := byBase[next]; len(w) != len(b) || !bytes.Equal(b[16:], w[16:]) {
				return fmt.Errorf("batch at %d differs from the one appended", next)
			}
			next = h.LastOffset() + 1
			rest = r
		}
	}
	if next < end {
		return fmt.Errorf("stopped at %d of %d", next, end)
	}
	return nil
}

// TestIOBackendAutoFallsBack: where the O_DIRECT probe cannot run, auto
// opens on pwrite with a warning saying why, while uring fails.
func TestIOBackendAutoFallsBack(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	b, err := newIOBackend("", filepath.Join(notDir, "data"), nil, true, true, slog.New(slog.NewTextHandler(&out, nil)))
	if err != nil {
		t.Fatalf("auto where the probe fails: %v", err)
	}
	defer b.close()
	if b.direct() || !strings.Contains(out.String(), "level=WARN") || !strings.Contains(out.String(), "backend=pwrite") {
		t.Fatalf("auto: direct %v, log %q", b.direct(), out.String())
	}
	if b, err := newIOBackend("uring", filepath.Join(notDir, "data"), nil, true, true, quietLogger()); err == nil {
		b.close()
		t.Fatal("log.io.backend=uring succeeded where the O_DIRECT probe fails")
	}
}

// TestOneDescriptorPerPartition: an open partition with one segment holds
// one file descriptor on either backend (the indexes are mappings without
// descriptors; a Direct segment's O_DIRECT open lives in the ring's
// fixed-file table), so 10,000 partitions fit a 20,000 descriptor limit;
// Close gives every descriptor back.
func TestOneDescriptorPerPartition(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	for _, backend := range []string{IOBackendPwrite, IOBackendUring} {
		t.Run(backend, func(t *testing.T) {
			before := fds()
			e := openEngine(t, t.TempDir(), func(o *Options) { o.IOBackend = backend })
			const parts = 200
			tp := mustTopic(t, e, "fds", parts, nil)
			infos := make([]AppendInfo, parts)
			for p := range parts {
				infos[p] = mustAppend(t, tp.Partition(int32(p)), batchOf(t, 1, 100, 1, p))
			}
			for p := range parts {
				if err := waitDurable(t, tp.Partition(int32(p)), infos[p].LastOffset); err != nil {
					t.Fatal(err)
				}
			}
			// A few belong to the engine itself (the ring, its eventfd,
			// the directory): allow 16.
			if used := fds() - before; used > parts+16 {
				t.Fatalf("%d partitions hold %d descriptors (%.2f each)", parts, used, float64(used)/parts)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if after := fds(); after > before {
				t.Fatalf("%d descriptors before Open, %d after Close", before, after)
			}
		})
	}
}

// TestSealedSegmentsParkDescriptors: a partition with ~100 sealed segments
// holds descriptors only for its active segment and the cache's most
// recently read ones, on either backend; reading the whole log reopens
// parked segments and returns every batch.
func TestSealedSegmentsParkDescriptors(t *testing.T) {
	defer func(n int) { sealedFilesOpen = n }(sealedFilesOpen)
	sealedFilesOpen = 4
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	for _, backend := range []string{IOBackendPwrite, IOBackendUring} {
		t.Run(backend, func(t *testing.T) {
			before := fds()
			e := openEngine(t, t.TempDir(), func(o *Options) { o.IOBackend = backend })
			defer e.Close()
			l := mustTopic(t, e, "parked", 1, smallConfig()).Partition(0)
			var want [][]byte
			var last AppendInfo
			for i := range 200 {
				b := batchOf(t, 1, 1500, int64(i), i) // two per 4 KiB segment
				last = mustAppend(t, l, b)
				want = append(want, append([]byte(nil), b...))
			}
			if err := waitDurable(t, l, last.LastOffset); err != nil {
				t.Fatal(err)
			}
			segs := len(*l.segs.Load())
			for range 2 { // the second pass reads segments parked by the first
				got, _ := readAll(t, l, 0, 3000)
				if len(got) != len(want) {
					t.Fatalf("read %d of %d batches", len(got), len(want))
				}
				for i := range got {
					if !bytes.Equal(got[i][16:], want[i][16:]) {
						t.Fatalf("batch %d differs", i)
					}
				}
			}
			if used := fds() - before; segs < 50 || used > 1+sealedFilesOpen+16 {
				t.Fatalf("%d segments hold %d descriptors (cache %d)", segs, used, sealedFilesOpen)
			}
			parks, reopens := e.io.cache.Stats()
			if parks == 0 || reopens == 0 {
				t.Fatalf("parks %d, reopens %d: nothing was parked and reopened", parks, reopens)
			}
		})
	}
}
