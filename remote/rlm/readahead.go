package rlm

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/stratalog/strata/remote/objstore"
)

// Read-ahead (issue 23): a partition read sequentially from remote
// storage gets what follows fetched in the background into the cache,
// so that consecutive fetches of a catching-up consumer find their data
// there instead of waiting for the store on each.
//
// A read is sequential when its offset is where an earlier read of the
// partition ended (the manager remembers the ends of the last
// maxStreams reads of each partition: a few consumers of one partition
// each keep their own stream). After a sequential read that returned
// data up to byte position pos of its segment, every unit (a chunk of a
// segment read by ranges, or a whole segment up to
// MaxCachedSegmentBytes, with its offset index when read by ranges)
// starting within ReadAheadBytes past pos is fetched, unless cached or
// in flight, by a goroutine of the manager: at most maxReadAheads at
// once (more are skipped; the next read asks again). A foreground read
// needing a unit in flight waits for that fetch instead of issuing its
// own (one store call per unit), and fetches it itself if that fetch
// failed. Read-ahead fetches run under the manager's context (Close
// cancels them and waits for them) and are cancelled when their segment
// is deleted; what a cancelled or failed fetch got is not cached.

// maxStreams is how many read ends per partition are remembered.
const maxStreams = 4

// maxReadAheads bounds the read-ahead fetches in flight, broker-wide.
const maxReadAheads = 4

// flight is a store fetch of one cache unit in progress.
type flight struct {
	done       chan struct{} // closed when data, err are set
	data       []byte
	err        error
	background bool               // a read-ahead fetch
	cancel     context.CancelFunc // read-ahead: cancels its fetch
	dropped    bool               // its segment was deleted: not cached (under fmu)
}

// load returns the cache unit ck: from the cache, from a fetch of it in
// flight, or by fetching it (fetch gets ctx bounded by OpTimeout) and
// caching what it returns. A read served without its own store call
// counts as a cache hit, one that calls the store as a miss.
func (m *Manager) load(ctx context.Context, ck string, fetch func(context.Context) ([]byte, error)) ([]byte, error) {
	joined := false
	for {
		if b, ok := m.cache.get(ck); ok {
			m.hits.Add(1)
			return b, nil
		}
		m.fmu.Lock()
		if fl := m.flights[ck]; fl != nil && !joined {
			m.fmu.Unlock()
			select {
			case <-fl.done:
			case <-ctx.Done():
				return nil, &objstore.Error{Op: "get", Key: ck, Kind: objstore.Transient, Err: ctx.Err()}
			}
			if fl.err == nil {
				m.hits.Add(1)
				return fl.data, nil
			}
			joined = true // that fetch failed (or was cancelled): fetch it ourselves
			continue
		}
		fl := &flight{done: make(chan struct{})}
		registered := m.flights[ck] == nil
		if registered {
			m.flights[ck] = fl
		}
		m.fmu.Unlock()
		m.misses.Add(1)
		octx, cancel := context.WithTimeout(ctx, m.o.OpTimeout)
		b, err := fetch(octx)
		cancel()
		if registered {
			m.land(ck, fl, b, err)
		} else if err == nil {
			m.cache.put(ck, b)
		}
		return b, err
	}
}

// land ends a registered flight: caches its data unless it failed or its
// segment was deleted meanwhile, and wakes its waiters.
func (m *Manager) land(ck string, fl *flight, b []byte, err error) {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	if err == nil && !fl.dropped {
		m.cache.put(ck, b)
	}
	if fl.background {
		m.readAheadsRunning--
	}
	delete(m.flights, ck)
	fl.data, fl.err = b, err
	close(fl.done)
}

// prefetch starts a read-ahead fetch of the unit ck unless it is cached,
// in flight, the manager is closing or maxReadAheads run already.
func (m *Manager) prefetch(ck string, fetch func(context.Context) ([]byte, error)) {
	if m.cache.has(ck) {
		return
	}
	m.fmu.Lock()
	if m.ctx.Err() != nil || m.flights[ck] != nil || m.readAheadsRunning >= maxReadAheads {
		m.fmu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, m.o.OpTimeout)
	fl := &flight{done: make(chan struct{}), background: true, cancel: cancel}
	m.flights[ck] = fl
	m.readAheadsRunning++
	m.readAheadWG.Add(1)
	m.fmu.Unlock()
	go func() {
		defer m.readAheadWG.Done()
		defer cancel()
		b, err := fetch(ctx)
		if err == nil {
			m.readAheads.Add(1)
		} else if ctx.Err() == nil {
			m.log.Debug("read-ahead fetch failed", "unit", ck, "err", err)
		}
		m.land(ck, fl, b, err)
	}()
}

// dropSegment forgets a deleted segment's cached objects and chunks and
// cancels its read-ahead fetches.
func (m *Manager) dropSegment(id string) {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	for ck, fl := range m.flights {
		if strings.HasPrefix(ck, id) {
			fl.dropped = true
			if fl.cancel != nil {
				fl.cancel()
			}
		}
	}
	m.cache.drop(id)
}

// readAhead runs after a sequential read of pm.Segments[i] that returned
// data up to byte position pos: it prefetches the units starting within
// ReadAheadBytes past pos, in this segment and the next ones.
func (m *Manager) readAhead(pm *partitionMeta, i int, pos int64) {
	budget := m.o.ReadAheadBytes
	if budget <= 0 {
		return
	}
	seg := &pm.Segments[i]
	end := pos + budget // in seg's byte positions
	if !m.whole(seg) {
		cs := m.o.ChunkBytes
		for c := pos / cs; c*cs < min(end, seg.Size); c++ {
			m.prefetchChunk(pm.Topic, pm.Partition, seg, c)
		}
	}
	left := end - seg.Size
	for j := i + 1; j < len(pm.Segments) && left > 0; j++ {
		s := &pm.Segments[j]
		if s.State != CopyFinished {
			continue
		}
		if m.whole(s) {
			m.prefetchObject(pm.Topic, pm.Partition, s, KindLog)
		} else {
			if _, ok := s.Files[KindOffsetIndex]; ok {
				m.prefetchObject(pm.Topic, pm.Partition, s, KindOffsetIndex)
			}
			cs := m.o.ChunkBytes
			for c := int64(0); c*cs < min(left, s.Size); c++ {
				m.prefetchChunk(pm.Topic, pm.Partition, s, c)
			}
		}
		left -= s.Size
	}
}

func (m *Manager) prefetchObject(topic string, partition int32, seg *Segment, kind string) {
	m.prefetch(seg.ID+kind, func(ctx context.Context) ([]byte, error) {
		return m.fetchObject(ctx, topic, partition, seg, kind)
	})
}

func (m *Manager) prefetchChunk(topic string, partition int32, seg *Segment, c int64) {
	m.prefetch(chunkKey(seg, c), func(ctx context.Context) ([]byte, error) {
		return m.fetchChunk(ctx, topic, partition, seg, c)
	})
}

// chunkKey is the cache key of chunk c of seg's .log.
func chunkKey(seg *Segment, c int64) string {
	return seg.ID + KindLog + "#" + strconv.FormatInt(c, 10)
}

// whole reports whether seg is fetched whole (else by chunks).
func (m *Manager) whole(seg *Segment) bool { return seg.Size <= m.o.MaxCachedSegmentBytes }

// streams remembers, per partition, where its last reads ended.
type streams struct {
	mu   sync.Mutex
	ends map[tp][]int64
}

// sequential reports whether a read at offset continues an earlier one.
func (s *streams) sequential(k tp, offset int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.ends[k] {
		if e == offset {
			return true
		}
	}
	return false
}

// record notes that a read at offset ended before next: the stream that
// ended at offset (if any) moves to next; otherwise a new one starts,
// replacing the oldest beyond maxStreams.
func (s *streams) record(k tp, offset, next int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ends == nil {
		s.ends = map[tp][]int64{}
	}
	e := s.ends[k]
	for i := range e {
		if e[i] == offset || e[i] == next {
			e = append(e[:i], e[i+1:]...)
			break
		}
	}
	e = append(e, next)
	if len(e) > maxStreams {
		e = e[len(e)-maxStreams:]
	}
	s.ends[k] = e
}

// forget drops a partition's streams.
func (s *streams) forget(k tp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ends, k)
}
