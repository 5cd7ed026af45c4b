package engine

import (
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"

	"github.com/stratalog/strata/record"
)

// The tail cache: the most recent batches of each partition kept in memory
// so consumers at the head are served without touching the segment file.
//
// Why: a Direct (O_DIRECT) segment does not populate the page cache, so a
// sendfile of just-written bytes reads them back from the device, and bytes
// still in the appender's partial chunk are not in the file at all (a
// segment's readable end is Segment.Written, not its append position).
//
// Only logs read at the head cache (tailCache.readMs): a log no read has
// come to for tailIdleMs (a topic nobody consumes, or whose consumers are
// far behind) copies nothing and holds no buffer. In a keyed closed-loop
// produce run without consumers the copy was 1.25 s of 10.45 s of broker
// CPU. A consumer's first read after such a spell is served from the file
// (flushing the unwritten tail for it, as for any read the cache cannot
// serve) and turns caching back on for the appends that follow.
//
// Layout: a Log's cache is a list of up to tailBufsPerLog buffers of
// tailBufBytes taken from the Engine's tailPool (allocated once, on huge
// pages outside the Go heap: slab.go; reused; the pool holds at most
// TailCacheBytes (log.tail.cache.bytes), shared evenly among the logs that
// cache, at most tailBufsPerLog each: the default 256 MiB and 96 busy
// partitions give each ten buffers, 2.5 MiB). The buffers hold whole
// append requests of the active segment, back to back:
//
//	bufs[0]            bufs[1]                 bufs[k] (filling)
//	[pos0 .. pos0+n0)  [pos1 = pos0+n0 .. )    ... [posk .. posk+nk) == segment end
//
// so the cache always covers a contiguous byte range that ends at the
// segment's append position, and its batches are [bufs[0].first, logEnd).
// An append that does not fit a buffer (larger than tailBufBytes) or finds
// no buffer (pool exhausted, own oldest still read) empties the cache; it
// starts again at the next append. A full cache drops its oldest buffer.
// Appends that bypass Log.Append (a follower's) are not cached: the next
// Append finds the cache's end behind the segment's and empties it. A
// truncation of the segment (Segment.Truncations moved) makes every cached
// byte stale: reads stop using the cache at once, the next Append empties
// it.
//
// Concurrency: the appender (under Log.mu) copies into the last buffer past
// its published length n and then stores n; readers read [0, n) only, so no
// byte is read while written. tailCache.mu guards the buffer list: the
// appender takes it to add or drop buffers, readers read-lock it while they
// pick buffers and take references. A buffer returns to the pool when its
// last reference goes: the cache's own, and one per ReadResult holding a
// chunk of it (dropped by ReadResult.Release), so a chunk's bytes never
// change before Release.
//
// Batch index: each buffer carries the end position and last offset of its
// batches (tailBuf.idx, allocated with the pool buffer and reused with it),
// filled by the appender from the headers of the bytes it copies (one
// header parse per batch per append instead of one per batch per read) and
// published like n: entries first, then the count (tailBuf.cnt), then n. A
// reader loads n, then the count, and reads entries below it only; it finds
// the batch holding an offset by binary search and sizes the batches it
// returns from consecutive ends. Batches past the entries it loaded (n moved
// on meanwhile) or a buffer whose index was given up (cnt < 0: bytes the
// appender could not index, which should not happen) are walked header by
// header as before; the answers are the same either way.

const (
	tailBufBytes = 256 << 10
	// tailBufsPerLog caps one log's share (4 MiB): with few partitions the
	// budget, not this, should bound how far behind a consumer can fall
	// and still be served from memory (a partition taking 25 MB/s keeps
	// 160 ms; at 1 MiB it kept 40 ms, one GC pause of a client).
	tailBufsPerLog = 16
	// defaultTailCacheBytes: 256 MiB holds ~1.3 s of 96 partitions at
	// 200 MB/s. With 64 MiB (~0.3 s) a consumer started with a keyed
	// producer at that rate fell out of the cache in the start's first
	// seconds and read 462-752 MB from the device to catch up, and at
	// times never did: reading from the device under the writes went no
	// faster than the producer (docs/performance.md, "Session 43").
	defaultTailCacheBytes = 256 << 20
	// maxTailRefs is how many buffers one ReadResult can pin: every buffer
	// of one log's cache.
	maxTailRefs = tailBufsPerLog
	// maxTailBatches bounds one buffer's batch index: a batch is at least
	// record.HeaderSize bytes (4,297 entries, 34 KiB next to 256 KiB).
	maxTailBatches = tailBufBytes / record.HeaderSize
)

// tailEntry indexes one batch of a tail buffer: the batch is
// b[previous end (0 for the first), end) and its last offset is
// first + last.
type tailEntry struct {
	end  uint32
	last uint32
}

// tailMem is one pool buffer: the bytes and the room for their index.
type tailMem struct {
	b   []byte
	idx []tailEntry // len maxTailBatches
}

// tailPool is the Engine-wide budget of tail-cache buffers. The budget is
// shared fairly: a log keeps at most max/caching buffers (at least one, at
// most tailBufsPerLog), where caching counts the logs holding any.
type tailPool struct {
	mu      sync.Mutex
	free    []tailMem
	made    int
	max     int
	caching atomic.Int32 // logs whose cache holds at least one buffer
	mem     slabs        // where new buffers come from (slab.go)
	// prefault is how many buffers the logs hosted can hold
	// (Options.PrefaultTailCache: prefaultLog), mapped ahead whether or
	// not they cache yet.
	prefault int

	// Reads of the cache (tailcache_stats.go): counted only, never read
	// by the cache itself.
	hits, misses atomic.Uint64
}

// perLog is how many buffers one log may keep now.
func (p *tailPool) perLog() int {
	n := int(max(p.caching.Load(), 1))
	return min(max(p.max/n, 1), tailBufsPerLog)
}

// newTailPool returns a pool of at most limit bytes (0: the default); nil
// when limit < 0 or below one buffer (the cache is off).
func newTailPool(limit int64) *tailPool {
	if limit == 0 {
		limit = defaultTailCacheBytes
	}
	if limit < tailBufBytes {
		return nil
	}
	p := &tailPool{max: int(limit / tailBufBytes)}
	per := slabBytes / tailBufBytes
	p.mem = newSlabs(p, tailBufBytes, (p.max+per-1)/per) // the whole budget ahead (slab.go)
	return p
}

// get returns a buffer, or one with b nil when all are in use.
func (p *tailPool) get() tailMem {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		m := p.free[n-1]
		p.free[n-1] = tailMem{}
		p.free = p.free[:n-1]
		return m
	}
	if p.made >= p.max {
		return tailMem{}
	}
	p.made++
	return tailMem{b: p.mem.take(p.room()), idx: make([]tailEntry, maxTailBatches)}
}

// room is how many more buffers the pool may hand out that its slabs
// should map ahead of their need: up to what the logs caching now (and
// one more) can hold, or, with prefault, what every log hosted can; never
// past the budget, so one log read at the head does not map the budget
// ahead. Caller holds p.mu.
func (p *tailPool) room() int {
	r := max(min(p.max, (int(p.caching.Load())+1)*tailBufsPerLog), p.prefault)
	return max(r-p.made, 0)
}

// prefaultLog raises the memory mapped ahead by one more log's share (a
// log hosted: Options.PrefaultTailCache), up to the budget, and starts
// mapping it on the slabs' goroutine before any log caches.
func (p *tailPool) prefaultLog() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prefault >= p.max {
		return
	}
	p.prefault = min(p.prefault+tailBufsPerLog, p.max)
	p.mem.mapAhead(p.room())
}

// stop ends the pool's mapping ahead (Engine.Close).
func (p *tailPool) stop() {
	p.mu.Lock()
	p.mem.stopAhead()
	p.mu.Unlock()
}

func (p *tailPool) put(m tailMem) {
	p.mu.Lock()
	p.free = append(p.free, m)
	p.mu.Unlock()
}

// tailBuf is one cached buffer.
type tailBuf struct {
	b     []byte
	pos   int64        // segment position of b[0]
	first int64        // base offset of the first batch in b
	n     atomic.Int64 // bytes filled; published after the copy
	refs  atomic.Int32 // the cache's own + one per ReadResult
	pool  *tailPool

	// idx[:cnt] indexes the batches of b in order (see the batch index
	// above); cnt is stored after the entries and before n; < 0: given
	// up, readers walk the headers.
	idx []tailEntry
	cnt atomic.Int32
}

// entries returns the published index (nil when given up or empty). Load
// n before it: then it covers every batch in b[:n].
func (t *tailBuf) entries() []tailEntry {
	k := t.cnt.Load()
	if k <= 0 {
		return nil
	}
	return t.idx[:k:k]
}

// index adds the batches of data, just copied to b[at:], to the index and
// publishes them (before the caller stores n). Appender only. A batch it
// cannot index (no room, a bad header, offsets not increasing or too far
// from first) gives the index up for the buffer's life.
func (t *tailBuf) index(at int64, data []byte) {
	k := t.cnt.Load()
	if k < 0 {
		return
	}
	for rest := data; len(rest) > 0; {
		h, err := record.ParseHeader(rest)
		if err != nil || h.Size() > len(rest) || int(k) >= len(t.idx) {
			t.cnt.Store(-1)
			return
		}
		last := h.LastOffset() - t.first
		if last < 0 || last > math.MaxUint32 || (k > 0 && uint32(last) <= t.idx[k-1].last) {
			t.cnt.Store(-1)
			return
		}
		at += int64(h.Size())
		t.idx[k] = tailEntry{end: uint32(at), last: uint32(last)}
		k++
		rest = rest[h.Size():]
	}
	t.cnt.Store(k)
}

func (t *tailBuf) unref() {
	switch n := t.refs.Add(-1); {
	case n == 0:
		t.pool.put(tailMem{b: t.b, idx: t.idx})
		t.b, t.idx = nil, nil
	case n < 0:
		panic("engine: tail-cache buffer released twice (a ReadResult copied and released twice?)")
	}
}

// tailCache is one Log's cache (see above).
type tailCache struct {
	mu   sync.RWMutex
	seg  *logSegment // the segment the buffers belong to
	gen  uint64      // seg's Truncations() when the buffers were started
	bufs []*tailBuf

	end int64 // appender only (Log.mu): segment position after the last cached append

	// readMs is when a read that may use memory (ReadMem, a follower's
	// ReadReplicaMem) last came to the log, in engine-clock ms, stored at
	// most once per tailReadMarkMs. Appends are cached only while that is
	// at most tailIdleMs ago: a partition nobody reads at the head (a
	// producer-only topic, consumers far behind) costs no copy. The first
	// read after an idle spell is served from the file (Log.read flushes
	// the unwritten tail for it) and turns caching back on.
	readMs atomic.Int64
}

const (
	// tailIdleMs is how long after its last read a log keeps caching
	// appends (longer than a consumer group's default session timeout,
	// 45 s, so a consumer that comes back after a rebalance is served from
	// memory).
	tailIdleMs = 60_000
	// tailReadMarkMs is how stale readMs may get before a read stores it
	// again (one store, not one per fetch, on the shared cache line).
	tailReadMarkMs = 1_000
)

// markRead notes a read at nowMs (see readMs).
func (c *tailCache) markRead(nowMs int64) {
	if nowMs-c.readMs.Load() >= tailReadMarkMs {
		c.readMs.Store(nowMs)
	}
}

// add caches data, just appended to s at pos with base offset base, when
// the log was read in the last tailIdleMs (else it empties the cache).
// Caller holds Log.mu. Allocates only when it takes a new buffer (every
// tailBufBytes).
func (c *tailCache) add(p *tailPool, s *logSegment, pos int64, data []byte, base, nowMs int64) {
	if p == nil {
		return
	}
	n := int64(len(data))
	if last := c.readMs.Load(); last == 0 || nowMs-last > tailIdleMs {
		if len(c.bufs) > 0 {
			c.reset(s) // the buffers go back to the pool for logs that are read
		}
		c.end = pos + n
		return
	}
	if c.seg != s || c.end != pos || n > tailBufBytes || c.gen != s.seg.Truncations() {
		c.reset(s)
		if n > tailBufBytes {
			c.end = pos + n
			return
		}
	}
	c.end = pos + n
	if k := len(c.bufs); k > 0 {
		cur := c.bufs[k-1]
		if used := cur.n.Load(); used+n <= int64(len(cur.b)) {
			copy(cur.b[used:], data)
			cur.index(used, data)
			cur.n.Store(used + n)
			return
		}
	}
	for len(c.bufs) > 0 && len(c.bufs) >= p.perLog() {
		c.dropOldest()
	}
	m := p.get()
	for m.b == nil && len(c.bufs) > 0 {
		c.dropOldest() // steal from our own oldest (returns unless read)
		m = p.get()
	}
	if m.b == nil {
		c.reset(s) // nothing to cache into: start again at the next append
		return
	}
	t := &tailBuf{b: m.b, idx: m.idx, pos: pos, first: base, pool: p}
	t.refs.Store(1)
	copy(m.b, data)
	t.index(0, data)
	t.n.Store(n)
	c.mu.Lock()
	c.bufs = append(c.bufs, t)
	c.mu.Unlock()
	if len(c.bufs) == 1 {
		p.caching.Add(1)
	}
}

func (c *tailCache) dropOldest() {
	c.mu.Lock()
	t := c.bufs[0]
	m := copy(c.bufs, c.bufs[1:])
	c.bufs[m] = nil
	c.bufs = c.bufs[:m]
	c.mu.Unlock()
	if m == 0 {
		t.pool.caching.Add(-1)
	}
	t.unref()
}

// reset empties the cache and points it at s. Caller holds Log.mu.
func (c *tailCache) reset(s *logSegment) {
	c.mu.Lock()
	old := c.bufs
	c.bufs = c.bufs[:0]
	c.seg = s
	if s != nil {
		c.gen = s.seg.Truncations()
	}
	c.mu.Unlock()
	if len(old) > 0 {
		old[0].pool.caching.Add(-1)
	}
	for i, t := range old {
		t.unref()
		old[i] = nil
	}
}

// read serves a read of s at offset from the cache when it holds the batch
// containing offset: whole batches with a base offset below bound, at most
// maxBytes (the first one whole if minOneBatch), as memory chunks with a
// reference on each buffer used (res.tail). ok is false when the cache
// does not cover offset (the caller reads the file).
func (c *tailCache) read(s *logSegment, offset, bound, maxBytes int64, minOneBatch bool, res *ReadResult) (ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.seg != s || len(c.bufs) == 0 || offset < c.bufs[0].first || c.gen != s.seg.Truncations() {
		return false // not cached, or cut and possibly rewritten (follower truncation)
	}
	// Never past the segment's end: a truncation (replication) lowers it
	// before the next append empties the cache.
	segEnd := s.end.Load()
	i := len(c.bufs) - 1
	for i > 0 && c.bufs[i].first > offset {
		i--
	}
	// Find the batch holding offset in bufs[i]: the first indexed batch
	// whose last offset is >= offset (offsets increase through the
	// buffer), or, past the index, by walking the headers after it.
	t := c.bufs[i]
	filled := min(t.n.Load(), max(segEnd-t.pos, 0))
	ix := t.entries() // after n: covers b[:n]
	at := int64(0)
	j := 0 // ix[j] is the batch at at, when j < len(ix)
	if len(ix) > 0 {
		d := offset - t.first // >= 0: bufs[i].first <= offset
		lo, hi := 0, len(ix)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if int64(ix[m].last) < d {
				lo = m + 1
			} else {
				hi = m
			}
		}
		j = lo
		if j > 0 {
			at = int64(ix[j-1].end)
		}
	}
	for j == len(ix) {
		if filled-at < record.HeaderSize {
			// Not here (past the cached end, or an append moved on to a
			// new buffer meanwhile): the file path answers.
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
	if filled-at < record.HeaderSize {
		return false // found in the index, past the cached end
	}
	total := int64(0)
	for first := true; i < len(c.bufs); i, first = i+1, false {
		t = c.bufs[i]
		filled = min(t.n.Load(), max(segEnd-t.pos, 0))
		if !first {
			ix, j = t.entries(), 0
		}
		from := at
		stop := false
		for filled-at >= record.HeaderSize {
			// The batch at at: from the index (its header was checked
			// when it was indexed) or, past it, from its header.
			var base, size int64
			if j < len(ix) {
				base = int64(binary.BigEndian.Uint64(t.b[at:]))
				size = int64(ix[j].end) - at
				j++
			} else {
				h, err := record.ParseHeader(t.b[at : at+record.HeaderSize])
				if err != nil {
					stop = true
					break
				}
				base, size = h.BaseOffset, int64(h.Size())
			}
			if base >= bound {
				stop = true
				break
			}
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
