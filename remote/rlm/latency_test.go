package rlm

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/remote/objstore"
)

// slowStore advances a test clock (nanoseconds) by lag at every read of
// the store, whole or by range: a store that takes lag per call.
type slowStore struct {
	objstore.ObjectStore
	clock  *atomic.Int64
	lag    time.Duration
	putLag time.Duration // the same for every put
	puts   atomic.Int64
}

func (s *slowStore) Put(ctx context.Context, key string, r io.Reader, size int64, sum objstore.Sum) (objstore.Info, error) {
	s.clock.Add(int64(s.putLag))
	s.puts.Add(1)
	return s.ObjectStore.Put(ctx, key, r, size, sum)
}

func (s *slowStore) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	s.clock.Add(int64(s.lag))
	return s.ObjectStore.Get(ctx, key)
}

func (s *slowStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	s.clock.Add(int64(s.lag))
	return s.ObjectStore.GetRange(ctx, key, off, n)
}

// A read below the local log start served from the object store moves
// the read latency histogram's count and sum by its time on the
// manager's clock, in the bucket holding it; a read the cache answers
// adds an observation in the first bucket and nothing to the sum.
func TestReadLatencyHistogram(t *testing.T) {
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	f.produce(12)
	var clock atomic.Int64
	clock.Store(t0 * int64(time.Millisecond))
	const lag = 250 * time.Millisecond
	m := f.manager(&slowStore{ObjectStore: f.store, clock: &clock, lag: lag}, func(o *Options) {
		o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
		o.ReadAheadBytes = -1 // no background store calls moving the clock
	})
	defer m.Close()
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := f.log.TopicID()
	segs := m.Segments(id, 0)
	if len(segs) < 2 {
		t.Fatalf("%d segments copied", len(segs))
	}
	f.waitLocalStart(segs[len(segs)-1].End)
	if h := m.Stats().ReadLatency; h.Count != 0 || h.Sum != 0 {
		t.Fatalf("histogram before any read: %+v", h)
	}
	if b, err := m.Read(context.Background(), id, 0, 0, 3000); err != nil || len(b) == 0 {
		t.Fatalf("remote read at 0: %d bytes, %v", len(b), err)
	}
	st := m.Stats()
	h := st.ReadLatency
	if h.Count != 1 || h.Sum != lag.Seconds() || st.FetchedBytes == 0 {
		t.Fatalf("after one store read: count %d sum %v fetched %d, want 1, %v and the segment", h.Count, h.Sum, st.FetchedBytes, lag.Seconds())
	}
	for i, n := range h.Counts {
		in := lag.Seconds() <= h.Bounds[min(i, len(h.Bounds)-1)] && (i == 0 || lag.Seconds() > h.Bounds[i-1])
		if i == len(h.Bounds) {
			in = lag.Seconds() > h.Bounds[i-1]
		}
		if want := map[bool]uint64{true: 1}[in]; n != want {
			t.Fatalf("bucket %d (le %v): %d observations, want %d (%v)", i, h.Bounds[min(i, len(h.Bounds)-1)], n, want, h.Counts)
		}
	}
	if b, err := m.Read(context.Background(), id, 0, 10, 3000); err != nil || len(b) == 0 {
		t.Fatalf("cached read at 10: %d bytes, %v", len(b), err)
	}
	h = m.Stats().ReadLatency
	if h.Count != 2 || h.Sum != lag.Seconds() || h.Counts[0] != 1 {
		t.Fatalf("after a cached read: count %d sum %v first bucket %d, want 2, %v, 1", h.Count, h.Sum, h.Counts[0], lag.Seconds())
	}
	if got := m.Stats().ReadTime; got != lag {
		t.Fatalf("read time %v, want %v (the histogram's sum)", got, lag)
	}
}

// The upload and remote read rates `strata plan --calibrate` reads from
// /metrics: CopyTime is the store's time for the copies' puts (on the
// manager's clock), ReadBytes the bytes remote reads returned.
func TestCopyTimeAndReadBytes(t *testing.T) {
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	f.produce(12)
	var clock atomic.Int64
	clock.Store(t0 * int64(time.Millisecond))
	store := &slowStore{ObjectStore: f.store, clock: &clock, lag: 250 * time.Millisecond, putLag: 100 * time.Millisecond}
	m := f.manager(store, func(o *Options) {
		o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
		o.ReadAheadBytes = -1
	})
	defer m.Close()
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	if n := store.puts.Load(); n == 0 || st.CopyTime != time.Duration(n)*store.putLag || st.BytesCopied == 0 || st.ReadBytes != 0 {
		t.Fatalf("%d puts: copy time %v (want %v), %d bytes copied, %d read", n, st.CopyTime, time.Duration(n)*store.putLag, st.BytesCopied, st.ReadBytes)
	}
	id := f.log.TopicID()
	segs := m.Segments(id, 0)
	f.waitLocalStart(segs[len(segs)-1].End)
	var total int64
	for _, off := range []int64{0, 10} {
		b, err := m.Read(context.Background(), id, 0, off, 3000)
		if err != nil || len(b) == 0 {
			t.Fatalf("remote read at %d: %d bytes, %v", off, len(b), err)
		}
		total += int64(len(b))
	}
	if st := m.Stats(); st.ReadBytes != total || st.ReadTime != store.lag {
		t.Fatalf("read bytes %d (want %d), read time %v (want %v)", st.ReadBytes, total, st.ReadTime, store.lag)
	}
}
