package rlm

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/remote/objstore"
)

// Read errors.
var (
	// ErrNotRemote: the offset is in no remote segment (below the remote
	// log start, or at or past the partition's copied end).
	ErrNotRemote = errors.New("rlm: offset not in remote storage")
	// ErrCorrupt: remote data failed its checksum (CRC-32C or, copied
	// before it, SHA-256 of a whole object; CRC of a batch read by range)
	// or does not parse.
	ErrCorrupt = errors.New("rlm: remote data corrupt")
)

// Read returns whole record batches of the partition from remote
// storage, starting with the batch holding offset, at most maxBytes of
// them but always the first whole (Kafka's minOneBatch), all from one
// segment. The bytes are shared with the cache: the caller must not
// modify them. Read takes no engine lock, so a slow store delays only its
// caller, never produce or reads of local data.
//
// With FetchMaxBytesPerSecond, Read first waits until the bytes earlier
// Reads returned fit that rate (read-ahead is not counted: it stays
// within ReadAheadBytes of what Reads returned).
//
// Errors: ErrNotRemote for an offset no remote segment holds; a store
// error (objstore.IsTransient: retry; also a throttle wait cut by ctx)
// or ErrCorrupt otherwise.
func (m *Manager) Read(ctx context.Context, topicID [16]byte, partition int32, offset int64, maxBytes int) ([]byte, error) {
	k := tp{topicID, partition}
	if m.cl != nil {
		t := m.o.Engine.TopicByID(topicID)
		if t == nil || !m.readable(t.Name(), k) {
			m.Kick() // a pass makes the leader ready
			return nil, ErrNotReady
		}
	}
	pm := m.get(k)
	if pm == nil {
		return nil, ErrNotRemote
	}
	i := -1
	for j := range pm.Segments {
		s := &pm.Segments[j]
		if s.State == CopyFinished && s.Base <= offset && offset < s.End {
			i = j
		}
	}
	if i < 0 || offset < pm.LogStart {
		return nil, ErrNotRemote
	}
	seg := &pm.Segments[i]
	// The fetch throttle: wait until what earlier reads returned fits
	// FetchMaxBytesPerSecond; past ctx's deadline the read fails as a
	// slow store's would (transient).
	if d := m.fetchPace.delay(m.o.Now()); d > 0 {
		m.fetchThrottleNanos.Add(int64(d))
		if err := m.o.Sleep(ctx, d); err != nil {
			return nil, &objstore.Error{Op: "get", Key: ObjectKey(pm.Topic, partition, seg.Base, seg.ID, KindLog), Kind: objstore.Transient,
				Err: fmt.Errorf("remote fetch throttle (%v to wait): %w", d, err)}
		}
	}
	start := m.o.Now()
	defer func() {
		d := m.o.Now().Sub(start)
		m.reads.Add(1)
		m.readNanos.Add(int64(d))
		m.readLatency.Observe(readLatencyBounds, d)
	}()
	seq := m.streams.sequential(k, offset)
	maxBytes = max(maxBytes, 0)
	var out []byte
	var pos, next int64
	if m.whole(seg) {
		data, err := m.object(ctx, pm.Topic, partition, seg, KindLog)
		if err != nil {
			return nil, err
		}
		s, e, n, err := sliceBatches(data, offset, maxBytes, false)
		if err != nil {
			return nil, err
		}
		out, pos, next = data[s:e:e], int64(e), n
	} else {
		var err error
		if out, pos, next, err = m.readRange(ctx, pm.Topic, partition, seg, offset, maxBytes); err != nil {
			return nil, err
		}
	}
	m.streams.record(k, offset, next)
	m.readBytes.Add(int64(len(out)))
	m.fetchPace.charge(m.o.Now(), int64(len(out)))
	if seq {
		m.readAhead(pm, i, pos)
	}
	return out, nil
}

// object returns a whole object of seg, from the cache, a read-ahead in
// flight or the store.
func (m *Manager) object(ctx context.Context, topic string, partition int32, seg *Segment, kind string) ([]byte, error) {
	return m.load(ctx, seg.ID+kind, func(ctx context.Context) ([]byte, error) {
		return m.fetchObject(ctx, topic, partition, seg, kind)
	})
}

// fetchObject gets a whole object of seg from the store and checks it
// against the checksum recorded when it was copied.
func (m *Manager) fetchObject(ctx context.Context, topic string, partition int32, seg *Segment, kind string) ([]byte, error) {
	fm, ok := seg.Files[kind]
	if !ok {
		return nil, fmt.Errorf("%w: segment %s has no %s object", ErrCorrupt, seg.ID, kind)
	}
	want, err := sumOf(fm)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	key := ObjectKey(topic, partition, seg.Base, seg.ID, kind)
	r, info, err := m.o.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if info.Size != fm.Size || info.Sum != want {
		return nil, fmt.Errorf("%w: %s is %d bytes with checksum %s, copied as %d bytes with %s", ErrCorrupt, key, info.Size, info.Sum, fm.Size, want)
	}
	b, err := io.ReadAll(r)
	if errors.Is(err, objstore.ErrChecksumMismatch) {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != fm.Size || want.Of(b) != want {
		return nil, fmt.Errorf("%w: %s does not match its checksum", ErrCorrupt, key)
	}
	m.fetched.Add(int64(len(b)))
	return b, nil
}

// readRange reads a segment too large to cache whole: the offset index
// (cached) gives a position at or before offset, and the .log's chunks
// (ChunkBytes each, cached) from there are read until the batch holding
// offset and what follows it within maxBytes are in hand; each batch
// returned is CRC-checked. pos is the byte position in the segment of
// the end of what it returns, next the offset after its last batch.
func (m *Manager) readRange(ctx context.Context, topic string, partition int32, seg *Segment, offset int64, maxBytes int) (out []byte, end, next int64, err error) {
	pos := int64(0)
	if _, ok := seg.Files[KindOffsetIndex]; ok {
		idx, err := m.object(ctx, topic, partition, seg, KindOffsetIndex)
		if err != nil {
			return nil, 0, 0, err
		}
		pos = indexFloor(idx, offset-seg.Base)
	}
	key := ObjectKey(topic, partition, seg.Base, seg.ID, KindLog)
	want := int64(max(maxBytes, 1))
	for pos < seg.Size {
		b, err := m.span(ctx, topic, partition, seg, pos, want)
		if err != nil {
			return nil, 0, 0, err
		}
		// Skip whole batches below offset; then return what fits.
		skip := 0
		for {
			h, err := record.ParseHeader(b[skip:])
			if err != nil || skip+h.Size() > len(b) {
				break
			}
			if h.LastOffset() >= offset {
				break
			}
			skip += h.Size()
		}
		if skip > 0 {
			pos += int64(skip)
			continue
		}
		h, err := record.ParseHeader(b)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%w: %s at %d: %v", ErrCorrupt, key, pos, err)
		}
		if h.Size() > len(b) {
			if int64(h.Size()) > seg.Size-pos {
				return nil, 0, 0, fmt.Errorf("%w: %s at %d: batch of %d bytes past the end", ErrCorrupt, key, pos, h.Size())
			}
			want = int64(h.Size())
			continue
		}
		s, e, n, err := sliceBatches(b, offset, maxBytes, true)
		if err != nil {
			return nil, 0, 0, err
		}
		return b[s:e:e], pos + int64(e), n, nil
	}
	return nil, 0, 0, fmt.Errorf("%w: %s holds no batch with offset %d", ErrCorrupt, key, offset)
}

// span returns the bytes of seg's .log from pos to the end of the chunk
// holding pos+n-1 (or the segment's end), from cached chunks.
func (m *Manager) span(ctx context.Context, topic string, partition int32, seg *Segment, pos, n int64) ([]byte, error) {
	cs := m.o.ChunkBytes
	first, last := pos/cs, (min(pos+n, seg.Size)-1)/cs
	if first == last {
		b, err := m.chunk(ctx, topic, partition, seg, first)
		if err != nil {
			return nil, err
		}
		return b[pos-first*cs:], nil
	}
	buf := make([]byte, 0, min((last-first+1)*cs, seg.Size-first*cs))
	for c := first; c <= last; c++ {
		b, err := m.chunk(ctx, topic, partition, seg, c)
		if err != nil {
			return nil, err
		}
		buf = append(buf, b...)
	}
	return buf[pos-first*cs:], nil
}

// chunk returns chunk c of seg's .log (bytes [c*ChunkBytes,
// (c+1)*ChunkBytes) cut at the segment's end).
func (m *Manager) chunk(ctx context.Context, topic string, partition int32, seg *Segment, c int64) ([]byte, error) {
	return m.load(ctx, chunkKey(seg, c), func(ctx context.Context) ([]byte, error) {
		return m.fetchChunk(ctx, topic, partition, seg, c)
	})
}

func (m *Manager) fetchChunk(ctx context.Context, topic string, partition int32, seg *Segment, c int64) ([]byte, error) {
	cs := m.o.ChunkBytes
	off := c * cs
	n := min(cs, seg.Size-off)
	key := ObjectKey(topic, partition, seg.Base, seg.ID, KindLog)
	b, err := m.getRange(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != n {
		return nil, fmt.Errorf("%w: %s: %d bytes at %d, want %d", ErrCorrupt, key, len(b), off, n)
	}
	return b, nil
}

func (m *Manager) getRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	r, err := m.o.Store.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, err
	}
	m.fetched.Add(int64(len(b)))
	return b, nil
}

// indexFloor is the position of the last offset-index entry (Kafka's: 4
// bytes offset relative to the base, 4 bytes position, big-endian) at or
// below rel; 0 when none.
func indexFloor(idx []byte, rel int64) int64 {
	pos := int64(0)
	for i := 0; i+8 <= len(idx); i += 8 {
		r := int64(binary.BigEndian.Uint32(idx[i:]))
		p := int64(binary.BigEndian.Uint32(idx[i+4:]))
		if i > 0 && r == 0 && p == 0 {
			break // unused slot
		}
		if r > rel {
			break
		}
		pos = p
	}
	return pos
}

// sliceBatches finds the batches of b from the one holding offset, at
// most maxBytes of them but at least that first one whole: b[start:end],
// and next, the offset after the last. checkCRC checks each of them (b
// came from a range read, not verified by the object's checksum).
func sliceBatches(b []byte, offset int64, maxBytes int, checkCRC bool) (start, end int, next int64, err error) {
	start = -1
	for p := 0; p < len(b); {
		h, err := record.ParseHeader(b[p:])
		if err != nil || p+h.Size() > len(b) {
			if start < 0 && !checkCRC {
				return 0, 0, 0, fmt.Errorf("%w: batch at %d: %v", ErrCorrupt, p, err)
			}
			break // a range read cut the last batch
		}
		np := p + h.Size()
		if start < 0 {
			if h.LastOffset() < offset {
				p = np
				continue
			}
			start = p
		} else if np-start > maxBytes {
			break
		}
		if checkCRC && !record.CheckCRC(b[p:np]) {
			return 0, 0, 0, fmt.Errorf("%w: batch at offset %d fails its CRC", ErrCorrupt, h.BaseOffset)
		}
		end, next = np, h.LastOffset()+1
		p = np
	}
	if start < 0 {
		return 0, 0, 0, fmt.Errorf("%w: no batch with offset %d", ErrCorrupt, offset)
	}
	return start, end, next, nil
}

// segCache is an LRU of fetched objects bounded by their bytes.
type segCache struct {
	mu   sync.Mutex
	max  int64
	used int64
	ll   *list.List // front: most recent; values *cacheEntry
	m    map[string]*list.Element
}

type cacheEntry struct {
	key  string
	data []byte
}

func newSegCache(max int64) *segCache {
	return &segCache{max: max, ll: list.New(), m: map[string]*list.Element{}}
}

func (c *segCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheEntry).data, true
	}
	return nil, false
}

// has reports whether key is cached, without making it recent.
func (c *segCache) has(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[key]
	return ok
}

func (c *segCache) put(key string, data []byte) {
	if int64(len(data)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok {
		return
	}
	c.m[key] = c.ll.PushFront(&cacheEntry{key, data})
	c.used += int64(len(data))
	for c.used > c.max {
		c.remove(c.ll.Back())
	}
}

// drop removes every object of a segment (keys starting with its id).
func (c *segCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if strings.HasPrefix(k, id) {
			c.remove(e)
		}
	}
}

func (c *segCache) remove(e *list.Element) {
	ce := e.Value.(*cacheEntry)
	c.ll.Remove(e)
	delete(c.m, ce.key)
	c.used -= int64(len(ce.data))
}

// bytes is the cache's size (tests).
func (c *segCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
