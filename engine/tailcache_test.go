package engine

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stratalog/strata/record"
)

// tailReadLinear is tailCache.read as it was before the batch index: the
// batch holding offset is found by walking the headers of its buffer from
// the start. The index must give exactly its answers.
func tailReadLinear(c *tailCache, s *logSegment, offset, bound, maxBytes int64, minOneBatch bool, res *ReadResult) (ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.seg != s || len(c.bufs) == 0 || offset < c.bufs[0].first || c.gen != s.seg.Truncations() {
		return false
	}
	segEnd := s.end.Load()
	i := len(c.bufs) - 1
	for i > 0 && c.bufs[i].first > offset {
		i--
	}
	t := c.bufs[i]
	filled := min(t.n.Load(), max(segEnd-t.pos, 0))
	at := int64(0)
	for {
		if filled-at < record.HeaderSize {
			return false
		}
		h, err := record.ParseHeader(t.b[at : at+record.HeaderSize])
		if err != nil {
			return false
		}
		if h.LastOffset() >= offset {
			break
		}
		at += int64(h.Size())
	}
	total := int64(0)
	for ; i < len(c.bufs); i++ {
		t = c.bufs[i]
		filled = min(t.n.Load(), max(segEnd-t.pos, 0))
		from := at
		stop := false
		for filled-at >= record.HeaderSize {
			h, err := record.ParseHeader(t.b[at : at+record.HeaderSize])
			if err != nil || h.BaseOffset >= bound {
				stop = true
				break
			}
			size := int64(h.Size())
			if at+size > filled {
				stop = true
				break
			}
			if total+size > maxBytes && !(total == 0 && minOneBatch) {
				stop = true
				break
			}
			total += size
			at += size
			if total >= maxBytes {
				stop = true
				break
			}
		}
		if at > from {
			t.refs.Add(1)
			res.tail[res.ntail] = t
			res.ntail++
			res.Chunks = append(res.Chunks, Chunk{Buf: t.b[from:at:at], Pos: t.pos + from, Len: at - from})
		}
		if stop || at < filled {
			break
		}
		at = 0
	}
	res.Bytes = total
	return true
}

// sameTailRead reports how two tail-cache answers differ ("" when they
// are the same chunks of the same buffers).
func sameTailRead(okA bool, a *ReadResult, okB bool, b *ReadResult) string {
	if okA != okB {
		return fmt.Sprintf("ok %v, want %v", okA, okB)
	}
	if a.Bytes != b.Bytes || len(a.Chunks) != len(b.Chunks) || a.ntail != b.ntail {
		return fmt.Sprintf("%d bytes in %d chunks (%d buffers), want %d in %d (%d)",
			a.Bytes, len(a.Chunks), a.ntail, b.Bytes, len(b.Chunks), b.ntail)
	}
	for k := range a.Chunks {
		ca, cb := a.Chunks[k], b.Chunks[k]
		if ca.Pos != cb.Pos || ca.Len != cb.Len || len(ca.Buf) != len(cb.Buf) || cap(ca.Buf) != cap(cb.Buf) ||
			(len(ca.Buf) > 0 && &ca.Buf[0] != &cb.Buf[0]) || a.tail[k] != b.tail[k] {
			return fmt.Sprintf("chunk %d: pos %d len %d, want pos %d len %d", k, ca.Pos, ca.Len, cb.Pos, cb.Len)
		}
	}
	return ""
}

// checkTailReads compares tailCache.read with the linear walk at every
// offset from lo to hi (inclusive) under several bounds and byte limits.
// Single goroutine, no append running.
func checkTailReads(t *testing.T, l *Log, lo, hi int64) {
	t.Helper()
	s := l.active
	end := l.LogEndOffset()
	type lim struct {
		bound, maxBytes int64
		minOne          bool
	}
	lims := []lim{
		{math.MaxInt64, math.MaxInt64, true},
		{math.MaxInt64, 1, true},
		{math.MaxInt64, 1, false},
		{math.MaxInt64, 40_000, false},
		{math.MaxInt64, tailBufBytes + 1000, true},
		{end - 1, math.MaxInt64, true},
		{(lo + hi) / 2, 20_000, true},
	}
	for off := lo; off <= hi; off++ {
		for _, m := range lims {
			var got, want ReadResult
			okGot := l.tail.read(s, off, m.bound, m.maxBytes, m.minOne, &got)
			okWant := tailReadLinear(&l.tail, s, off, m.bound, m.maxBytes, m.minOne, &want)
			diff := sameTailRead(okGot, &got, okWant, &want)
			got.Release()
			want.Release()
			if diff != "" {
				t.Fatalf("read(%d, bound %d, max %d, minOne %v) [cache %d..%d]: %s",
					off, m.bound, m.maxBytes, m.minOne, lo, hi, diff)
			}
		}
	}
}

// TestTailCacheIndex: the per-buffer batch index finds the same batches as
// the linear header walk at every offset (batch bases, lasts and offsets
// inside multi-record batches), across buffer boundaries, as the cache
// drops its oldest buffers and reuses pool buffers (and their indexes),
// and when a buffer's index covers only a prefix or is given up. The bytes
// match what Read finds in the file.
func TestTailCacheIndex(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.TailCacheBytes = 3 * tailBufBytes })
	defer e.Close()
	l := mustTopic(t, e, "idx", 1, map[string]string{"segment.bytes": fmt.Sprint(64 << 20)}).Partition(0)
	readingHead(t, l)
	rng := rand.New(rand.NewPCG(1, 2))
	var (
		stored   = map[int64][]byte{} // base offset -> batch
		drops    int
		firstWas int64 = -1
		last     AppendInfo
	)
	const appends = 2400
	for i := range appends {
		// One to three batches per request; 1-7 records of 0-2000 bytes.
		var req []byte
		for range 1 + rng.IntN(3) {
			n := 1 + rng.IntN(7)
			size := rng.IntN(2000)
			if rng.IntN(4) == 0 {
				size = rng.IntN(20)
			}
			req = append(req, batchOf(t, n, size, int64(i), i)...)
		}
		last = mustAppend(t, l, req)
		at := last.BaseOffset
		for rest := req; len(rest) > 0; {
			b, r, h, err := record.Next(rest)
			if err != nil {
				t.Fatal(err)
			}
			stored[at] = b
			at += int64(h.LastOffsetDelta) + 1
			rest = r
		}
		l.tail.mu.RLock()
		first := l.tail.bufs[0].first
		nbufs := len(l.tail.bufs)
		l.tail.mu.RUnlock()
		dropped := firstWas >= 0 && first != firstWas
		if dropped {
			drops++
		}
		// Right after a drop (the new last buffer holds one request),
		// and now and then.
		if (dropped && drops%8 == 1) || i%600 == 599 || (i < 400 && nbufs > 1 && i%50 == 0) {
			checkTailReads(t, l, first-2, l.LogEndOffset()+1)
		}
		firstWas = first
	}
	if drops < 5 {
		t.Fatalf("the cache dropped its oldest buffer %d times: the test does not cover eviction", drops)
	}
	e.tails.mu.Lock()
	made := e.tails.made
	e.tails.mu.Unlock()
	if made > 3 {
		t.Fatalf("pool made %d buffers for a budget of 3", made)
	}

	// Every buffer's index is whole and matches its bytes.
	l.tail.mu.RLock()
	bufs := append([]*tailBuf(nil), l.tail.bufs...)
	l.tail.mu.RUnlock()
	if len(bufs) != 3 {
		t.Fatalf("%d buffers cached, want 3", len(bufs))
	}
	for _, tb := range bufs {
		ix := tb.entries()
		at := int64(0)
		for j, x := range ix {
			h, err := record.ParseHeader(tb.b[at:])
			if err != nil || int64(x.end) != at+int64(h.Size()) || int64(x.last) != h.LastOffset()-tb.first {
				t.Fatalf("buffer at %d, entry %d: %+v, batch at %d: base %d size %d (%v)", tb.pos, j, x, at, h.BaseOffset, h.Size(), err)
			}
			at = int64(x.end)
		}
		if at != tb.n.Load() {
			t.Fatalf("buffer at %d: index covers %d of %d bytes", tb.pos, at, tb.n.Load())
		}
	}

	// The cached bytes are the file's.
	if err := waitDurable(t, l, last.LastOffset); err != nil {
		t.Fatal(err)
	}
	lo, hi := bufs[0].first, l.LogEndOffset()-1
	for off := lo; off <= hi; off += 1 + int64(rng.IntN(5)) {
		mem, err := l.ReadMem(off, 50_000, true)
		if err != nil || len(mem.Chunks) == 0 || mem.Chunks[0].Buf == nil {
			t.Fatalf("ReadMem(%d): %v %+v", off, err, mem.Chunks)
		}
		var got []byte
		for _, c := range mem.Chunks {
			got = append(got, c.Buf...)
		}
		file, err := l.Read(off, 50_000, true)
		if err != nil {
			t.Fatal(err)
		}
		want := readChunks(t, file)
		file.Release()
		mem.Release()
		if !bytes.Equal(got, want) {
			t.Fatalf("ReadMem(%d) gave %d bytes, Read %d, or they differ", off, len(got), len(want))
		}
		_, _, h, err := record.Next(got)
		if err != nil || h.BaseOffset > off || h.LastOffset() < off || !bytes.Equal(got[:h.Size()], stored[h.BaseOffset]) {
			t.Fatalf("ReadMem(%d) starts with batch %d..%d: %v", off, h.BaseOffset, h.LastOffset(), err)
		}
	}

	// An index covering a prefix of a buffer (the walk does the rest), an
	// empty one and a given-up one answer as the walk does.
	mid := bufs[1]
	full := mid.cnt.Load()
	for _, cnt := range []int32{full / 2, 1, -1} {
		mid.cnt.Store(cnt)
		checkTailReads(t, l, bufs[0].first, l.LogEndOffset())
	}
	mid.cnt.Store(full)
}

// TestTailCacheIndexConcurrent: readers at random offsets (inside batches,
// behind and at the head) while the appender fills buffers, indexes them,
// evicts and reuses them: the first batch returned holds the offset and is
// the one appended there.
func TestTailCacheIndexConcurrent(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.TailCacheBytes = 2 * tailBufBytes })
	defer e.Close()
	l := mustTopic(t, e, "idxc", 1, map[string]string{"write.caching": "true"}).Partition(0)
	readingHead(t, l)
	const n = 3000
	var (
		mu     sync.Mutex
		stored = map[int64][]byte{}
		reqs   [][]byte
	)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range n {
		var req []byte
		for range 1 + rng.IntN(2) {
			req = append(req, batchOf(t, 1+rng.IntN(6), 50+rng.IntN(600), int64(i), i)...)
		}
		reqs = append(reqs, req)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	done := make(chan struct{})
	wg.Add(1)
	go func() { // the appender
		defer wg.Done()
		defer close(done)
		for _, req := range reqs {
			info, err := l.Append(req, 0)
			if err != nil {
				errs <- err
				return
			}
			at := info.BaseOffset
			mu.Lock()
			for rest := req; len(rest) > 0; {
				b, r, h, _ := record.Next(rest)
				stored[at] = b
				at += int64(h.LastOffsetDelta) + 1
				rest = r
			}
			mu.Unlock()
		}
	}()
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for {
				select {
				case <-done:
					return
				default:
				}
				end := l.LogEndOffset()
				if end == 0 {
					continue
				}
				off := end - 1 - int64(rng.IntN(int(min(end, 2000))))
				res, err := l.ReadMem(off, int32(1+rng.IntN(20_000)), true)
				if err != nil {
					errs <- err
					return
				}
				if len(res.Chunks) == 0 {
					res.Release()
					continue // not yet below the visible end
				}
				data, err := resultBytes(&res)
				res.Release()
				if err != nil {
					errs <- err
					return
				}
				b, _, h, err := record.Next(data)
				mu.Lock()
				want := stored[h.BaseOffset]
				mu.Unlock()
				if err != nil || h.BaseOffset > off || h.LastOffset() < off || !record.CheckCRC(b) ||
					(want != nil && !bytes.Equal(b, want)) {
					errs <- fmt.Errorf("read at %d: batch %d..%d: %v", off, h.BaseOffset, h.LastOffset(), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// BenchmarkTailCacheRead: a consumer at the head of a partition whose
// cache holds full buffers of small batches reads the last batch (the
// batch search covers a whole buffer). "cache" calls tailCache.read with a
// reused ReadResult; "ReadMem" is the whole Log path (which allocates the
// result's chunk slice).
func BenchmarkTailCacheRead(b *testing.B) {
	for _, c := range []struct {
		name         string
		records, val int
	}{{"6x1KiB", 6, 1000}, {"6x100B", 6, 100}, {"1x100B", 1, 100}} {
		b.Run(c.name, func(b *testing.B) {
			e := openEngine(b, b.TempDir(), func(o *Options) { o.TailCacheBytes = 4 * tailBufBytes })
			defer e.Close()
			l := mustTopic(b, e, "bench", 1, map[string]string{"segment.bytes": fmt.Sprint(64 << 20)}).Partition(0)
			batch := batchOf(b, c.records, c.val, 1, 0)
			var info AppendInfo
			for {
				info = mustAppend(b, l, batch)
				l.tail.mu.RLock()
				k := len(l.tail.bufs)
				full := k >= 2 && l.tail.bufs[k-1].n.Load() > tailBufBytes-2*int64(len(batch))
				l.tail.mu.RUnlock()
				if full {
					break
				}
			}
			if err := waitDurable(b, l, info.LastOffset); err != nil {
				b.Fatal(err)
			}
			off := info.BaseOffset
			b.Run("cache", func(b *testing.B) {
				s := l.active
				var res ReadResult
				b.ReportAllocs()
				for b.Loop() {
					res.Chunks = res.Chunks[:0]
					if !l.tail.read(s, off, math.MaxInt64, 1<<20, true, &res) || res.Bytes != int64(len(batch)) {
						b.Fatalf("not served from the cache: %d bytes", res.Bytes)
					}
					res.Release()
				}
			})
			b.Run("ReadMem", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					res, err := l.ReadMem(off, 1<<20, true)
					if err != nil || len(res.Chunks) != 1 || res.Chunks[0].Buf == nil {
						b.Fatalf("ReadMem: %v %+v", err, res.Chunks)
					}
					res.Release()
				}
			})
		})
	}
}

// readingHead makes l a log that is read at the head, as a consumer waiting
// for new records does (a ReadMem at the log end): from then on its
// appends are cached (tailIdleMs).
func readingHead(t testing.TB, l *Log) {
	t.Helper()
	res, err := l.ReadMem(l.LogEndOffset(), 1, true)
	if err != nil {
		t.Fatal(err)
	}
	res.Release()
}

// TestTailCacheOnlyWhileRead: a log nobody reads caches nothing (no copy of
// its appends); a read at the head turns caching on for the next appends;
// tailIdleMs after the last read the cache gives its buffers back, and a
// read after that is served from the file with the same bytes.
func TestTailCacheOnlyWhileRead(t *testing.T) {
	clock := newFakeClock(1_700_000_000_000)
	e := openEngine(t, t.TempDir(), func(o *Options) { o.TailCacheBytes = 4 * tailBufBytes; o.Now = clock.Now })
	defer e.Close()
	l := mustTopic(t, e, "idle", 1, nil).Partition(0)
	cached := func() int {
		l.tail.mu.RLock()
		defer l.tail.mu.RUnlock()
		return len(l.tail.bufs)
	}
	var last AppendInfo
	appendSome := func(k int) {
		for i := range k {
			last = mustAppend(t, l, batchOf(t, 2, 300, clock.ms.Load(), i))
		}
		if err := waitDurable(t, l, last.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
	appendSome(20)
	if n := cached(); n != 0 {
		t.Fatalf("%d buffers cached for a log never read", n)
	}
	readingHead(t, l)
	from := l.LogEndOffset()
	appendSome(20)
	res, err := l.ReadMem(from, 1<<20, true)
	if err != nil || len(res.Chunks) == 0 || res.Chunks[0].Buf == nil {
		t.Fatalf("after a read at the head, appends not served from memory: %v %+v", err, res.Chunks)
	}
	memBytes, err := resultBytes(&res)
	res.Release()
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(tailIdleMs + 1)
	appendSome(1)
	if n := cached(); n != 0 {
		t.Fatalf("%d buffers still cached %d ms after the last read", n, tailIdleMs+1)
	}
	res, err = l.ReadMem(from, int32(len(memBytes)), true)
	if err != nil || len(res.Chunks) == 0 || res.Chunks[0].Buf != nil {
		t.Fatalf("idle log's read: %v %+v (want a file chunk)", err, res.Chunks)
	}
	fileBytes := readChunks(t, res)
	res.Release()
	if len(fileBytes) < len(memBytes) {
		t.Fatalf("file read gave %d bytes, the cached read %d", len(fileBytes), len(memBytes))
	}
	if !bytes.Equal(fileBytes[:len(memBytes)], memBytes) {
		t.Fatalf("file read after the idle spell differs from the cached read (%d vs %d bytes)", len(fileBytes), len(memBytes))
	}
}
