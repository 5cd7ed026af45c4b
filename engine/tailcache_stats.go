package engine

// Tail-cache and log size statistics for the broker's metrics: read-only
// views of counters and sizes, which change nothing of what they count.

// TailCacheStats are the tail cache's read counters (tailcache.go).
type TailCacheStats struct {
	// Hits are reads of a segment served from the cache; Misses are reads
	// that could use the cache (consumer and follower fetches at a segment)
	// and were served from the segment file instead: a read of an older
	// segment than the active one, below the cached range, or of a log not
	// caching (unread for a while, or the pool exhausted).
	Hits, Misses uint64
}

// TailCacheStats returns the tail cache's counters; ok is false when the
// cache is off (log.tail.cache.bytes below one buffer).
func (e *Engine) TailCacheStats() (s TailCacheStats, ok bool) {
	p := e.tails
	if p == nil {
		return TailCacheStats{}, false
	}
	return TailCacheStats{Hits: p.hits.Load(), Misses: p.misses.Load()}, true
}

// tailRead is l.tail.read, counted as a hit or a miss of the Engine's pool.
func (l *Log) tailRead(s *logSegment, offset, bound, maxBytes int64, minOneBatch bool, res *ReadResult) bool {
	ok := l.tail.read(s, offset, bound, maxBytes, minOneBatch, res)
	if p := l.e.tails; p != nil {
		if ok {
			p.hits.Add(1)
		} else {
			p.misses.Add(1)
		}
	}
	return ok
}

// LogSize is a partition's size on this broker.
type LogSize struct {
	Segments int   // segment files, the active one included
	Bytes    int64 // bytes of batches in them (readable: appended and visible)
}

// Size returns the log's segment count and bytes (a snapshot: segments
// roll, are deleted by retention and compacted concurrently).
func (l *Log) Size() LogSize {
	p := l.segs.Load()
	if p == nil {
		return LogSize{}
	}
	segs := *p
	sz := LogSize{Segments: len(segs)}
	for _, s := range segs {
		sz.Bytes += s.end.Load()
	}
	return sz
}
