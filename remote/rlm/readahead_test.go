package rlm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/remote/objstore"
	"github.com/stratalog/strata/remote/objstore/weedtest"
)

// The read-ahead tests run against the real S3-compatible server
// (SeaweedFS) and count the HTTP GETs the manager's S3 client sends it.

// countingTransport is the S3 client's HTTP transport: it counts the
// GETs of objects of its bucket by key ("key" for a whole object,
// "key@off" for a range from byte off) and holds those whose key has the
// prefix block until their request's context ends (reporting the GET on
// entered and the context's error on blocked).
type countingTransport struct {
	base    http.RoundTripper
	bucket  string
	mu      sync.Mutex
	gets    map[string]int
	block   string
	entered chan string
	blocked chan error
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	prefix := "/" + c.bucket + "/"
	if req.Method != http.MethodGet || !strings.HasPrefix(req.URL.Path, prefix) || len(req.URL.Path) == len(prefix) {
		return c.base.RoundTrip(req)
	}
	name := strings.TrimPrefix(req.URL.Path, prefix)
	if r := req.Header.Get("Range"); r != "" {
		from, _, _ := strings.Cut(strings.TrimPrefix(r, "bytes="), "-")
		if _, err := strconv.ParseInt(from, 10, 64); err != nil {
			return nil, fmt.Errorf("test transport: range %q", r)
		}
		name += "@" + from
	}
	c.mu.Lock()
	c.gets[name]++
	block := c.block
	c.mu.Unlock()
	if block != "" && strings.HasPrefix(name, block) {
		c.entered <- name
		<-req.Context().Done()
		c.blocked <- req.Context().Err()
		return nil, req.Context().Err()
	}
	return c.base.RoundTrip(req)
}

func (c *countingTransport) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets[name]
}

func (c *countingTransport) total() (n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.gets {
		n += v
	}
	return n
}

func (c *countingTransport) setBlock(prefix string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.block = prefix
}

// countedS3 is a client of w's bucket whose GETs are counted.
func countedS3(t *testing.T, w *weedtest.Server, bucket string) (*objstore.S3, *countingTransport) {
	t.Helper()
	ct := &countingTransport{base: http.DefaultTransport.(*http.Transport).Clone(), bucket: bucket, gets: map[string]int{},
		entered: make(chan string, 100), blocked: make(chan error, 100)}
	s3, err := objstore.NewS3(objstore.S3Config{Endpoint: w.Endpoint, Bucket: bucket, Region: "us-east-1",
		PathStyle: true, AccessKeyID: weedtest.AccessKey, SecretAccessKey: weedtest.SecretKey, Transport: ct})
	if err != nil {
		t.Fatal(err)
	}
	return s3, ct
}

// tieredS3Fixture produces 40 batches into 4 KiB segments, copies them
// to a new bucket of w and waits until local retention deleted the local
// copies: every segment is then read from S3.
func tieredS3Fixture(t *testing.T, w *weedtest.Server, bucket string) (*fixture, []Segment) {
	t.Helper()
	s3 := newS3(t, w, bucket)
	f := newFixture(t, tieredConfig)
	f.store = s3
	f.produce(40)
	m := f.manager(s3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := m.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	segs := m.Segments(f.log.TopicID(), 0)
	// Local retention deletes copied segments only while a manager's hook
	// answers CopiedEnd: wait for it before Close removes the hook.
	f.waitLocalStart(segs[len(segs)-1].End)
	m.Close()
	if len(segs) < 8 || finished(segs) != len(segs) {
		t.Fatalf("%d segments (%d copied)", len(segs), finished(segs))
	}
	return f, segs
}

// nextOffset is the offset after the last batch of data.
func nextOffset(t *testing.T, data []byte) int64 {
	t.Helper()
	next := int64(-1)
	for len(data) > 0 {
		_, rest, h, err := record.Next(data)
		if err != nil {
			t.Fatal(err)
		}
		next, data = h.LastOffset()+1, rest
	}
	return next
}

// waitEntered waits for the transport to hold a GET (bounded: the
// timeout fails a broken read-ahead, it measures nothing).
func waitEntered(t *testing.T, ct *countingTransport) string {
	t.Helper()
	select {
	case name := <-ct.entered:
		return name
	case <-time.After(30 * time.Second):
		t.Fatal("the held GET was never sent")
	}
	return ""
}

func TestReadAheadS3(t *testing.T) {
	w := weedtest.Start(t)
	t.Run("WholeSegments", func(t *testing.T) { testReadAheadWholeSegments(t, w) })
	t.Run("Chunks", func(t *testing.T) { testReadAheadChunks(t, w) })
	t.Run("Cancelled", func(t *testing.T) { testReadAheadCancelled(t, w) })
}

// A consumer reading remote segments sequentially finds each next
// segment GET from S3 before it reads it, each once: its own reads send
// one GET in all, for the first segment. A first, unsequential read and
// read-ahead off fetch nothing ahead.
func testReadAheadWholeSegments(t *testing.T, w *weedtest.Server) {
	const bucket = "strata-readahead-whole"
	f, segs := tieredS3Fixture(t, w, bucket)
	defer f.eng.Close()
	s3, ct := countedS3(t, w, bucket)
	m := f.manager(s3, func(o *Options) { o.ReadAheadBytes = 1 }) // the next segment, once a read reaches a segment's end
	defer m.Close()
	id := f.log.TopicID()
	key := func(s Segment) string { return ObjectKey("tiered", 0, s.Base, s.ID, KindLog) }

	off := int64(0)
	for i, s := range segs {
		if i > 0 {
			if n := ct.count(key(s)); n != 1 {
				t.Fatalf("segment %d: %d GETs before it was read, want 1 (read ahead)", i, n)
			}
		}
		misses := m.Stats().CacheMisses
		for reads := 0; off < s.End; reads++ {
			b, err := m.Read(context.Background(), id, 0, off, 1000) // a few batches: several reads a segment
			if err != nil {
				t.Fatalf("read at %d: %v", off, err)
			}
			off = nextOffset(t, b)
		}
		m.readAheadWG.Wait() // the read-ahead started by this segment's last read lands
		if got := m.Stats().CacheMisses - misses; i > 0 && got != 0 {
			t.Fatalf("segment %d: its reads sent %d GETs of their own", i, got)
		}
		if n := ct.count(key(s)); n != 1 {
			t.Fatalf("segment %d: %d GETs", i, n)
		}
	}
	st := m.Stats()
	if st.CacheMisses != 1 || st.ReadAheads != int64(len(segs)-1) || ct.total() != len(segs) {
		t.Fatalf("stats %+v, %d GETs: want 1 foreground GET and %d read-aheads", st, ct.total(), len(segs)-1)
	}

	// A read that continues no earlier one reads nothing ahead.
	s3b, ct2 := countedS3(t, w, bucket)
	m2 := f.manager(s3b, func(o *Options) { o.ReadAheadBytes = 1 << 20 })
	defer m2.Close()
	if _, err := m2.Read(context.Background(), id, 0, segs[2].Base, 1000); err != nil {
		t.Fatal(err)
	}
	m2.readAheadWG.Wait()
	if st := m2.Stats(); st.ReadAheads != 0 || ct2.total() != 1 || ct2.count(key(segs[2])) != 1 {
		t.Fatalf("a first read fetched ahead: %+v, %d GETs", st, ct2.total())
	}
	// Off: sequential reads fetch nothing ahead.
	s3c, ct3 := countedS3(t, w, bucket)
	m3 := f.manager(s3c, func(o *Options) { o.ReadAheadBytes = -1 })
	defer m3.Close()
	for off := int64(0); off < segs[1].End; {
		b, err := m3.Read(context.Background(), id, 0, off, 1000)
		if err != nil {
			t.Fatal(err)
		}
		off = nextOffset(t, b)
	}
	m3.readAheadWG.Wait()
	if st := m3.Stats(); st.ReadAheads != 0 || st.CacheMisses != 2 || ct3.total() != 2 || ct3.count(key(segs[2])) != 0 {
		t.Fatalf("read-ahead off: %+v, %d GETs", st, ct3.total())
	}
}

// Segments read by ranges: the chunks within ReadAheadBytes of a
// sequential reader are GET ahead of its reads, each chunk once; from its
// third read on (the first is not sequential, the second's batch reaches
// a chunk the first did not) the reader's own reads send no GET; the
// cache stays within its bound.
func testReadAheadChunks(t *testing.T, w *weedtest.Server) {
	const bucket = "strata-readahead-chunks"
	f, segs := tieredS3Fixture(t, w, bucket)
	defer f.eng.Close()
	s3, ct := countedS3(t, w, bucket)
	const chunk = 1024
	m := f.manager(s3, func(o *Options) {
		o.MaxCachedSegmentBytes = 1 // every segment by ranges
		o.ChunkBytes = chunk
		o.ReadAheadBytes = 2 * chunk
		o.CacheBytes = 16 * chunk
	})
	defer m.Close()
	id := f.log.TopicID()
	var reads int
	for off := int64(0); off < segs[len(segs)-1].End; reads++ {
		misses := m.Stats().CacheMisses
		b, err := m.Read(context.Background(), id, 0, off, 500)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if got := m.Stats().CacheMisses - misses; reads >= 2 && got != 0 {
			t.Fatalf("read %d at offset %d sent %d GETs of its own", reads, off, got)
		}
		off = nextOffset(t, b)
		m.readAheadWG.Wait()
		if m.cache.bytes() > m.o.CacheBytes {
			t.Fatalf("cache %d bytes", m.cache.bytes())
		}
	}
	units := 0
	for _, s := range segs {
		if n := ct.count(ObjectKey("tiered", 0, s.Base, s.ID, KindOffsetIndex)); n != 1 {
			t.Fatalf("offset index of segment %d: %d GETs", s.Base, n)
		}
		units++
		for c := int64(0); c*chunk < s.Size; c++ {
			name := fmt.Sprintf("%s@%d", ObjectKey("tiered", 0, s.Base, s.ID, KindLog), c*chunk)
			if n := ct.count(name); n != 1 {
				t.Fatalf("chunk %s: %d GETs", name, n)
			}
			units++
		}
	}
	st := m.Stats()
	if ct.total() != units || st.CacheMisses+st.ReadAheads != int64(units) || st.ReadAheads < int64(units-4) {
		t.Fatalf("stats %+v, %d GETs after %d reads of %d indexes and chunks", st, ct.total(), reads, units)
	}
}

// A read-ahead GET held by the server is cancelled, and its slot and
// goroutine released, when its segment is deleted (DeleteRecords and
// the next pass) and when the manager closes (Close waits for it); a
// foreground read waiting for it gives up at its own deadline; nothing a
// cancelled read-ahead got is cached.
func testReadAheadCancelled(t *testing.T, w *weedtest.Server) {
	const bucket = "strata-readahead-cancel"
	f, segs := tieredS3Fixture(t, w, bucket)
	defer f.eng.Close()
	id := f.log.TopicID()
	key := func(s Segment) string { return ObjectKey("tiered", 0, s.Base, s.ID, KindLog) }
	// readTwo reads at from and then sequentially: the second read
	// starts the read-ahead.
	readTwo := func(m *Manager, from int64) {
		t.Helper()
		b, err := m.Read(context.Background(), id, 0, from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Read(context.Background(), id, 0, nextOffset(t, b), 1000); err != nil {
			t.Fatal(err)
		}
	}

	// Deleted segment.
	s3, ct := countedS3(t, w, bucket)
	ct.setBlock(key(segs[1]))
	m := f.manager(s3, func(o *Options) { o.ReadAheadBytes = 1 << 20 })
	readTwo(m, 0)
	if got := waitEntered(t, ct); got != key(segs[1]) {
		t.Fatalf("held GET %s", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := m.Read(ctx, id, 0, segs[1].Base, 1000)
	cancel()
	if !objstore.IsTransient(err) || ct.count(key(segs[1])) != 1 {
		t.Fatalf("read joining the held read-ahead: %v (%d GETs)", err, ct.count(key(segs[1])))
	}
	if err := m.DeleteRecords(id, "tiered", 0, segs[2].Base); err != nil {
		t.Fatal(err)
	}
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ct.blocked:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("held read-ahead GET ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("deleting the segment did not cancel its read-ahead GET")
	}
	m.readAheadWG.Wait()
	m.fmu.Lock()
	running, flights := m.readAheadsRunning, len(m.flights)
	m.fmu.Unlock()
	if running != 0 || flights != 0 || m.cache.has(segs[1].ID+KindLog) {
		t.Fatalf("after the deletion: %d read-aheads running, %d flights, cached %v", running, flights, m.cache.has(segs[1].ID+KindLog))
	}
	if left := m.Segments(id, 0); left[0].ID != segs[2].ID {
		t.Fatalf("first segment left %d", left[0].Base)
	}
	// The released slots serve the next read-ahead.
	ra := m.Stats().ReadAheads
	readTwo(m, segs[len(segs)-3].Base)
	m.readAheadWG.Wait()
	if m.Stats().ReadAheads == ra || ct.count(key(segs[len(segs)-2])) != 1 {
		t.Fatalf("no read-ahead after the cancelled one: %+v", m.Stats())
	}
	m.Close()

	// Close.
	s3b, ct2 := countedS3(t, w, bucket)
	ct2.setBlock(key(segs[4]))
	m2 := f.manager(s3b, func(o *Options) { o.ReadAheadBytes = 1 << 20 })
	readTwo(m2, segs[3].Base)
	waitEntered(t, ct2)
	m2.Close()
	select {
	case err := <-ct2.blocked:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("held read-ahead GET ended with %v", err)
		}
	default:
		t.Fatal("Close returned before the held read-ahead GET ended")
	}
	if m2.cache.has(segs[4].ID + KindLog) {
		t.Fatal("a cancelled read-ahead was cached")
	}
}
