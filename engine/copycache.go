package engine

import (
	"io"
	"sync"
	"sync/atomic"
)

// The copy cache (Options.CopyCacheBytes, remote.log.copy.cache.bytes):
// the bytes of each remote-enabled partition's active segment, kept in
// memory from its appends and handed to the segment when it rolls, so
// that the remote log manager's copy of a segment it copies soon after
// the roll reads memory instead of the device.
//
// Why: O_DIRECT segments never enter the page cache, where a Kafka
// broker's copies find the bytes they read, so every copy read its
// segment back from the disk: 1.6-1.8 GB in a 20 s run at 100,000 keyed
// 1 KiB records/s, beside the journal's writes and flushes on a device
// that serves one request at a time. The same reads made by another
// process beside a topic without remote storage raised its produce p99
// more than the copies' CPU did (docs/performance.md, "Session 38").
// Copying the appended bytes once more, while they are in the CPU's
// cache, costs a memcpy: 2.7 % of a tiered broker's CPU samples, against
// 1.6-1.8 GB of device reads a run no more (docs/performance.md,
// "Session 39"; a fresh broker also pays the first touch of the memory
// as the cache grows).
//
// What is kept: only logs with remote.storage.enable, a remote log
// manager installed (SetRemoteHook) and segment.bytes at most an eighth
// of the cache (copyPool.stageMax), from a segment's first byte; the leader's
// appends (Log.appendBatches), not a follower's, which copies nothing.
// Any append that does not continue the staged bytes (a follower's
// append in between, a truncation) or finds no block gives the stage up
// until the next segment. A roll hands a complete stage to the sealed
// segment (logSegment.copyMem); OpenSealedSegment takes it (the copy
// reads it, and releases it with SegmentFiles.Close), and a segment
// closed first (deleted, truncated away, the engine closed) releases
// it. When no block is free, the asking log gives its stage up (that
// segment's copy reads the file, as without the cache): copies go oldest
// first, so the memory of segments sealed earlier is the next to be
// used, and taking it for newer appends would waste both. Only memory a
// segment has held for copyStaleMs (a copy that keeps failing, a store
// that is down) is taken back for newer appends, oldest first.
//
// Memory: blocks of copyBlockBytes, allocated up to the budget as
// needed (on huge pages outside the Go heap, slab.go) and reused, never
// freed while the Engine lives.

const (
	copyBlockBytes         = 256 << 10
	defaultCopyCacheBytes  = 1 << 30
	copyStageFrac          = 8 // a staged segment is at most 1/copyStageFrac of the cache
	copySealedCompactEvery = 1024
	copyStaleMs            = 30_000
)

// copyMem is a segment's bytes [0, n) in blocks.
type copyMem struct {
	blocks [][]byte
	n      int64
	pool   *copyPool
}

// release returns the blocks to the pool. The caller owns m (took it out
// of every shared place).
func (m *copyMem) release() {
	m.pool.put(m.blocks)
	m.blocks, m.n = nil, 0
}

// ReadAt reads m's bytes at off (io.ReaderAt).
func (m *copyMem) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := 0
	for len(p) > 0 && off < m.n {
		b := m.blocks[off/copyBlockBytes]
		k := off % copyBlockBytes
		c := copy(p, b[k:min(int64(len(b)), k+m.n-off)])
		p, off, n = p[c:], off+int64(c), n+c
	}
	if len(p) > 0 {
		return n, io.EOF
	}
	return n, nil
}

// copyMemReader reads a copyMem once, in order.
type copyMemReader struct {
	m   *copyMem
	off int64
}

func (r *copyMemReader) Read(p []byte) (int, error) {
	if r.off >= r.m.n {
		return 0, io.EOF
	}
	n, _ := r.m.ReadAt(p[:min(int64(len(p)), r.m.n-r.off)], r.off)
	r.off += int64(n)
	return n, nil
}

func (r *copyMemReader) Close() error { return nil }

// copyPool is the Engine's budget of copy-cache blocks.
type copyPool struct {
	mu     sync.Mutex
	free   [][]byte
	made   int
	max    int          // blocks
	sealed []sealedCopy // memory handed to sealed segments, oldest first (entries taken since are skipped)
	pushes int
	mem    slabs // where new blocks come from (slab.go)

	// Counters for the broker's metrics (CopyCacheStats).
	hits, misses, evicted, dropped atomic.Uint64
}

type sealedCopy struct {
	s    *logSegment
	m    *copyMem
	atMs int64 // when it was sealed (engine clock)
}

// newCopyPool returns a pool of at most limit bytes (0: the default); nil
// when limit < 0 or too small to stage a segment of a block.
func newCopyPool(limit int64) *copyPool {
	if limit == 0 {
		limit = defaultCopyCacheBytes
	}
	if limit < copyStageFrac*copyBlockBytes {
		return nil
	}
	p := &copyPool{max: int(limit / copyBlockBytes)}
	p.mem = newSlabs(p, copyBlockBytes, 1)
	return p
}

// stop ends the pool's mapping ahead (Engine.Close).
func (p *copyPool) stop() {
	p.mu.Lock()
	p.mem.stopAhead()
	p.mu.Unlock()
}

// stageMax is the largest segment.bytes a log stages.
func (p *copyPool) stageMax() int64 { return int64(p.max) * copyBlockBytes / copyStageFrac }

// get returns a block, taking one from the oldest sealed segment's
// memory when the budget is spent and that is copyStaleMs old at nowMs;
// nil when none can be had.
func (p *copyPool) get(nowMs int64) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		return b
	}
	if p.made < p.max {
		p.made++
		return p.mem.take(p.max - p.made)
	}
	for len(p.sealed) > 0 {
		e := p.sealed[0]
		if e.s.copyMem.Load() == e.m && nowMs-e.atMs < copyStaleMs {
			return nil // the oldest memory will be copied soon: keep it
		}
		p.sealed[0] = sealedCopy{}
		p.sealed = p.sealed[1:]
		if !e.s.copyMem.CompareAndSwap(e.m, nil) {
			continue // taken by its copy or released already
		}
		p.evicted.Add(1)
		if len(e.m.blocks) == 0 {
			continue
		}
		b := e.m.blocks[0]
		p.free = append(p.free, e.m.blocks[1:]...)
		e.m.blocks, e.m.n = nil, 0
		return b
	}
	return nil
}

func (p *copyPool) put(blocks [][]byte) {
	if len(blocks) == 0 {
		return
	}
	p.mu.Lock()
	p.free = append(p.free, blocks...)
	p.mu.Unlock()
}

// seal hands m to s at nowMs and records it for eviction, oldest first.
func (p *copyPool) seal(s *logSegment, m *copyMem, nowMs int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.copyMem.Store(m)
	// Entries taken meanwhile (copied, released) leave from the front
	// here and, every copySealedCompactEvery seals, from anywhere: the
	// list stays about as long as the memory it tracks.
	for len(p.sealed) > 0 && p.sealed[0].s.copyMem.Load() != p.sealed[0].m {
		p.sealed[0] = sealedCopy{}
		p.sealed = p.sealed[1:]
	}
	if p.pushes++; p.pushes%copySealedCompactEvery == 0 {
		kept := p.sealed[:0]
		for _, e := range p.sealed {
			if e.s.copyMem.Load() == e.m {
				kept = append(kept, e)
			}
		}
		clear(p.sealed[len(kept):])
		p.sealed = kept
	}
	p.sealed = append(p.sealed, sealedCopy{s, m, nowMs})
}

// copyStage is a Log's staging of its active segment's bytes; appender
// only (Log.mu).
type copyStage struct {
	seg *logSegment // the segment staged or given up (mem nil)
	mem *copyMem
}

// add stages data, just appended to s at pos (see the type comment).
func (c *copyStage) add(l *Log, cfg *LogConfig, s *logSegment, pos int64, data []byte) {
	p := l.e.copies
	if p == nil {
		return
	}
	if c.seg != s {
		c.drop()
		c.seg = s
		if pos != 0 || !cfg.RemoteStorageEnable || cfg.SegmentBytes > p.stageMax() || !l.e.hasRemoteHook() {
			return
		}
		c.mem = &copyMem{pool: p}
	}
	m := c.mem
	if m == nil {
		return
	}
	if m.n != pos {
		c.drop()
		p.dropped.Add(1)
		return
	}
	for len(data) > 0 {
		k := m.n % copyBlockBytes
		if k == 0 {
			b := p.get(l.e.nowMs())
			if b == nil {
				c.drop()
				p.dropped.Add(1)
				return
			}
			m.blocks = append(m.blocks, b)
		}
		n := copy(m.blocks[len(m.blocks)-1][k:], data)
		data = data[n:]
		m.n += int64(n)
	}
}

// sealed hands the stage of s, sealed by a roll, to s when it holds
// every byte of it.
func (c *copyStage) sealed(s *logSegment, nowMs int64) {
	if c.seg != s {
		return
	}
	m := c.mem
	c.seg, c.mem = nil, nil
	if m == nil {
		return
	}
	if m.n != s.end.Load() {
		m.release()
		return
	}
	m.pool.seal(s, m, nowMs)
}

// drop gives the stage up.
func (c *copyStage) drop() {
	if c.mem != nil {
		c.mem.release()
	}
	c.seg, c.mem = nil, nil
}

// dropCopy releases the memory handed to s, if still there (s closed or
// its bytes cut).
func (s *logSegment) dropCopy() {
	if m := s.copyMem.Swap(nil); m != nil {
		m.release()
	}
}

// hasRemoteHook reports whether a remote log manager is installed.
func (e *Engine) hasRemoteHook() bool {
	m := remoteHooks.Load()
	return m != nil && (*m)[e] != nil
}

// CopyCacheStats are the copy cache's counters (copycache.go).
type CopyCacheStats struct {
	// Hits are segments opened for copying whose bytes were in memory;
	// Misses are those read from the file. Evicted counts sealed
	// segments' memory taken for newer appends before their copy (held
	// copyStaleMs); Dropped, stages given up (no block, or appends that
	// did not continue them).
	Hits, Misses, Evicted, Dropped uint64
	// Bytes is the memory the cache holds now (blocks allocated).
	Bytes int64
}

// CopyCacheStats returns the copy cache's counters; ok is false when the
// cache is off.
func (e *Engine) CopyCacheStats() (s CopyCacheStats, ok bool) {
	p := e.copies
	if p == nil {
		return CopyCacheStats{}, false
	}
	p.mu.Lock()
	made := p.made
	p.mu.Unlock()
	return CopyCacheStats{Hits: p.hits.Load(), Misses: p.misses.Load(), Evicted: p.evicted.Load(),
		Dropped: p.dropped.Load(), Bytes: int64(made) * copyBlockBytes}, true
}
