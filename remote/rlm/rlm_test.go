package rlm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/remote/objstore"
)

const t0 = int64(1_700_000_000_000)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fixture is an engine with one tiered partition and a local object store.
type fixture struct {
	t        *testing.T
	dataDir  string
	metaDir  string
	storeDir string
	eng      *engine.Engine
	log      *engine.Log
	store    objstore.ObjectStore
}

var tieredConfig = map[string]string{
	"segment.bytes":         "4096",
	"remote.storage.enable": "true",
	"local.retention.bytes": "0", // every copied segment goes locally
	"retention.ms":          "-1",
	"file.delete.delay.ms":  "0",
}

func newFixture(t *testing.T, cfg map[string]string) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{t: t, dataDir: filepath.Join(base, "data"), metaDir: filepath.Join(base, "meta"), storeDir: filepath.Join(base, "store")}
	f.openEngine()
	tp, err := f.eng.CreateTopic("tiered", 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.log = tp.Partition(0)
	st, err := objstore.OpenLocal(vfs.OS, f.storeDir)
	if err != nil {
		t.Fatal(err)
	}
	f.store = st
	return f
}

func (f *fixture) openEngine() {
	f.t.Helper()
	e, err := engine.Open(engine.Options{Dir: f.dataDir, Log: engine.DefaultLogConfig(), Logger: quiet,
		RetentionCheckInterval: 5 * time.Millisecond})
	if err != nil {
		f.t.Fatal(err)
	}
	f.eng = e
	if tp := e.Topic("tiered"); tp != nil {
		f.log = tp.Partition(0)
	}
}

func (f *fixture) manager(store objstore.ObjectStore, mod func(*Options)) *Manager {
	f.t.Helper()
	o := Options{Engine: f.eng, Store: store, Dir: f.metaDir, Interval: -1, Logger: quiet,
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }}
	if mod != nil {
		mod(&o)
	}
	m, err := Open(o)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// produce appends n batches of 10 records (value "v<offset>", timestamp
// t0+offset) and waits until they are durable.
func (f *fixture) produce(n int) {
	f.t.Helper()
	for i := 0; i < n; i++ {
		next := f.log.LogEndOffset()
		var b record.Builder
		b.Reset(record.CodecNone, t0+next)
		for j := int64(0); j < 10; j++ {
			b.Add(t0+next+j, nil, []byte(fmt.Sprintf("v%d-%s", next+j, strings.Repeat("x", 100))), nil)
		}
		batch, err := b.AppendTo(nil)
		if err != nil {
			f.t.Fatal(err)
		}
		info, err := f.log.Append(batch, f.log.LeaderEpoch())
		if err != nil {
			f.t.Fatal(err)
		}
		done := make(chan error, 1)
		f.log.WhenDurable(info.LastOffset, func(err error) { done <- err })
		if err := <-done; err != nil {
			f.t.Fatal(err)
		}
	}
}

// waitLocalStart waits (bounded) until engine retention moved the local
// log start to at least want.
func (f *fixture) waitLocalStart(want int64) {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for f.log.LogStartOffset() < want {
		if time.Now().After(deadline) {
			f.t.Fatalf("local log start %d, want %d", f.log.LogStartOffset(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readAll reads every record from offset 0 to the high watermark, from
// the manager below the local log start and from the engine above, and
// checks each offset's value.
func (f *fixture) readAll(m *Manager) (remoteBatches int) {
	f.t.Helper()
	hw := f.log.HighWatermark()
	for off := int64(0); off < hw; {
		// Local retention runs meanwhile (every 5 ms) and may delete the
		// segment between the check and the read: as the fetch path does
		// (server/01_fetch.go), a local read out of range goes remote.
		var data []byte
		if off >= f.log.LogStartOffset() {
			rr, err := f.log.Read(off, 3000, true)
			switch {
			case err == nil:
				c := rr.Chunks[0]
				data = make([]byte, c.Len)
				if _, err := c.File.ReadAt(data, c.Pos); err != nil {
					f.t.Fatal(err)
				}
				rr.Release()
			case errors.Is(err, engine.ErrOffsetOutOfRange) && off < f.log.LogStartOffset():
				rr.Release()
			default:
				f.t.Fatalf("local read at %d: %v", off, err)
			}
		}
		if data == nil {
			b, err := m.Read(context.Background(), f.log.TopicID(), 0, off, 3000)
			if err != nil {
				f.t.Fatalf("remote read at %d: %v", off, err)
			}
			data = b
			remoteBatches++
		}
		if len(data) == 0 {
			f.t.Fatalf("empty read at %d", off)
		}
		for len(data) > 0 {
			batch, rest, _, err := record.Next(data)
			if err != nil {
				f.t.Fatalf("batch at %d: %v", off, err)
			}
			data = rest
			err = record.Iterate(batch, func(h *record.Header, r *record.Record) error {
				o := h.BaseOffset + int64(r.OffsetDelta)
				if o < off {
					return nil // the batch began below the offset asked for
				}
				if o != off || !strings.HasPrefix(string(r.Value), fmt.Sprintf("v%d-", o)) {
					return fmt.Errorf("offset %d: record %d %q", off, o, r.Value[:8])
				}
				off++
				return nil
			})
			if err != nil {
				f.t.Fatal(err)
			}
		}
	}
	return remoteBatches
}

func (f *fixture) keys() []string {
	f.t.Helper()
	var out []string
	after := ""
	for {
		p, err := f.store.List(context.Background(), "", after, 0)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, o := range p.Objects {
			out = append(out, o.Key)
		}
		if p.Next == "" {
			return out
		}
		after = p.Next
	}
}

func finished(segs []Segment) (n int) {
	for _, s := range segs {
		if s.State == CopyFinished {
			n++
		}
	}
	return n
}

// Rolled segments are copied with their files, local retention then
// deletes the local copies, every record still reads from offset 0, and
// a restart keeps the metadata.
func TestCopyLocalRetentionAndReadBack(t *testing.T) {
	f := newFixture(t, tieredConfig)
	f.produce(40) // ~48 KB in 4 KiB segments
	m := f.manager(f.store, nil)
	sealed := f.log.SealedSegments()
	if len(sealed) < 8 {
		t.Fatalf("%d sealed segments", len(sealed))
	}
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	segs := m.Segments(f.log.TopicID(), 0)
	if len(segs) != len(sealed) || finished(segs) != len(sealed) {
		t.Fatalf("%d remote segments (%d finished), %d sealed", len(segs), finished(segs), len(sealed))
	}
	for i, s := range segs {
		if s.Base != sealed[i].Base || s.End != sealed[i].End || s.Size != sealed[i].Size || s.MaxTimestamp != t0+s.End-1 {
			t.Fatalf("segment %d: %+v, sealed %+v", i, s, sealed[i])
		}
		for _, kind := range []string{KindLog, KindOffsetIndex, KindTimeIndex, KindEpochs} {
			fm, ok := s.Files[kind]
			if !ok {
				t.Fatalf("segment %d has no %s", i, kind)
			}
			info, err := f.store.Head(context.Background(), ObjectKey("tiered", 0, s.Base, s.ID, kind))
			if err != nil || info.Size != fm.Size || info.Sum.String() != fm.Checksum || info.Sum.Alg != objstore.CRC32C {
				t.Fatalf("segment %d %s: %+v %v, recorded %+v", i, kind, info, err, fm)
			}
		}
	}
	copiedEnd := sealed[len(sealed)-1].End
	if got := m.CopiedEnd(f.log.TopicID(), "tiered", 0); got != copiedEnd {
		t.Fatalf("CopiedEnd %d, want %d", got, copiedEnd)
	}
	f.waitLocalStart(copiedEnd)
	if start, ok := m.LogStart(f.log.TopicID(), 0); !ok || start != 0 {
		t.Fatalf("remote log start %d %v", start, ok)
	}
	if hi, ok := m.HighestTieredOffset(f.log.TopicID(), 0); !ok || hi != copiedEnd-1 {
		t.Fatalf("highest tiered %d %v, want %d", hi, ok, copiedEnd-1)
	}
	if n := f.readAll(m); n == 0 {
		t.Fatal("nothing was read from remote storage")
	}
	st := m.Stats()
	if st.SegmentsCopied != int64(len(sealed)) || st.CacheMisses == 0 || st.CacheHits == 0 || st.FetchedBytes == 0 ||
		st.Reads == 0 || st.ReadTime <= 0 {
		t.Fatalf("stats %+v", st)
	}

	// Restart: the metadata is back, and reads by ranges (segments
	// larger than the cache limit) see the same records.
	m.Close()
	if err := f.eng.Close(); err != nil {
		t.Fatal(err)
	}
	f.openEngine()
	defer f.eng.Close()
	m2 := f.manager(f.store, func(o *Options) { o.MaxCachedSegmentBytes = 1 })
	defer m2.Close()
	if got := m2.Segments(f.log.TopicID(), 0); len(got) != len(segs) || got[0].ID != segs[0].ID {
		t.Fatalf("after restart %d segments", len(got))
	}
	if f.log.LogStartOffset() < copiedEnd {
		t.Fatalf("local start %d after restart", f.log.LogStartOffset())
	}
	f.readAll(m2)
	if m2.Stats().CacheMisses == 0 || m2.cache.bytes() > 64<<10 {
		t.Fatalf("range reads: stats %+v, cache %d bytes", m2.Stats(), m2.cache.bytes())
	}
	// New segments after the restart are copied too.
	f.produce(10)
	if err := m2.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := m2.CopiedEnd(f.log.TopicID(), "tiered", 0); got <= copiedEnd {
		t.Fatalf("CopiedEnd %d did not move past %d", got, copiedEnd)
	}
}

// flakyStore fails the first n calls of op with a Transient error, and
// from the put numbered hangAt on blocks each Put until its ctx is done
// (a crash mid-copy, when the manager is closed).
type flakyStore struct {
	objstore.ObjectStore
	failPuts atomic.Int64
	puts     atomic.Int64
	hangAt   int64 // 0: never
	hanging  chan struct{}
	once     sync.Once
}

func (s *flakyStore) Put(ctx context.Context, key string, r io.Reader, size int64, sum objstore.Sum) (objstore.Info, error) {
	n := s.puts.Add(1)
	if s.hangAt > 0 && n >= s.hangAt {
		s.once.Do(func() { close(s.hanging) })
		<-ctx.Done()
		return objstore.Info{}, &objstore.Error{Op: "put", Key: key, Kind: objstore.Transient, Err: ctx.Err()}
	}
	if s.failPuts.Add(-1) >= 0 {
		return objstore.Info{}, &objstore.Error{Op: "put", Key: key, Kind: objstore.Transient, Err: errors.New("store down")}
	}
	return s.ObjectStore.Put(ctx, key, r, size, sum)
}

// A store failing N times is retried with doubling backoff, and local
// retention waits for the copy.
func TestCopyRetriesWithBackoff(t *testing.T) {
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	f.produce(12)
	nSealed := len(f.log.SealedSegments())
	fs := &flakyStore{ObjectStore: f.store}
	fs.failPuts.Store(5)
	var waits []time.Duration
	m := f.manager(fs, func(o *Options) {
		o.BackoffMin, o.BackoffMax = 10*time.Millisecond, 40*time.Millisecond
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			waits = append(waits, d)
			// While the store fails, local retention keeps every segment.
			if f.log.LogStartOffset() != 0 {
				t.Errorf("local start moved to %d before any copy", f.log.LogStartOffset())
			}
			return ctx.Err()
		}
	})
	defer m.Close()
	time.Sleep(20 * time.Millisecond) // retention passes run meanwhile (5 ms)
	if n, b := m.Lag(); n != nSealed || b < int64(nSealed)*3000 {
		t.Fatalf("lag before copying: %d segments, %d bytes", n, b)
	}
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, b := m.Lag(); n != 0 || b != 0 {
		t.Fatalf("lag after copying: %d segments, %d bytes", n, b)
	}
	want := []time.Duration{10, 20, 40, 40, 40}
	if len(waits) != len(want) {
		t.Fatalf("waits %v", waits)
	}
	for i := range want {
		if waits[i] != want[i]*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", waits, want)
		}
	}
	if st := m.Stats(); st.Retries != 5 || st.SegmentsCopied != int64(nSealed) {
		t.Fatalf("stats %+v", st)
	}
	f.readAll(m)
}

// A crash in the middle of a copy leaves a COPY_SEGMENT_STARTED entry and
// some objects; nothing references them, the segment stays local, and
// the next start deletes them and copies the segment again.
func TestCrashDuringCopyIsCleanedUp(t *testing.T) {
	f := newFixture(t, tieredConfig)
	f.produce(12)
	nSealed := len(f.log.SealedSegments())
	fs := &flakyStore{ObjectStore: f.store, hangAt: 9, hanging: make(chan struct{})} // the 2nd segment's 3rd object or so
	m := f.manager(fs, nil)
	errc := make(chan error, 1)
	go func() { errc <- m.RunOnce(m.ctx) }()
	<-fs.hanging
	// Mid-copy: local retention deletes only what was copied.
	copied := m.CopiedEnd(f.log.TopicID(), "tiered", 0)
	if copied <= 0 {
		t.Fatalf("CopiedEnd %d mid-copy", copied)
	}
	f.waitLocalStart(copied)
	time.Sleep(20 * time.Millisecond) // retention passes run meanwhile (5 ms)
	if got := f.log.LogStartOffset(); got != copied {
		t.Fatalf("local start %d, copied end %d", got, copied)
	}
	m.Close() // the crash: the copy is abandoned mid-way
	<-errc

	// What a restart finds on disk.
	rs, err := loadState(vfs.OS, f.metaDir)
	if err != nil {
		t.Fatal(err)
	}
	metas := rs.parts
	pm := metas[tp{f.log.TopicID(), 0}]
	var started *Segment
	for i := range pm.Segments {
		if pm.Segments[i].State == CopyStarted {
			started = &pm.Segments[i]
		}
	}
	if started == nil || pm.CopiedEnd != started.Base || pm.CopiedEnd != copied || finished(pm.Segments) == 0 {
		t.Fatalf("metadata after the crash: %+v", pm)
	}
	orphans := 0
	for _, k := range f.keys() {
		if strings.Contains(k, started.ID) {
			orphans++
		}
	}
	if orphans == 0 {
		t.Fatal("the interrupted copy wrote no object: the test crashed too early")
	}
	// The interrupted segment is not readable remotely.
	if _, err := m.Read(context.Background(), f.log.TopicID(), 0, started.Base, 100); !errors.Is(err, ErrNotRemote) {
		t.Fatalf("read of the half-copied segment: %v", err)
	}

	// Restart.
	if err := f.eng.Close(); err != nil {
		t.Fatal(err)
	}
	f.openEngine()
	defer f.eng.Close()
	// The manager's goroutine runs a pass at once (its timer is an hour).
	m2 := f.manager(f.store, func(o *Options) { o.Interval = time.Hour })
	defer m2.Close()
	deadline := time.Now().Add(20 * time.Second)
	for finished(m2.Segments(f.log.TopicID(), 0)) < nSealed || len(m2.Segments(f.log.TopicID(), 0)) != nSealed {
		if time.Now().After(deadline) {
			t.Fatalf("no pass at start: %+v", m2.Segments(f.log.TopicID(), 0))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, k := range f.keys() {
		if strings.Contains(k, started.ID) {
			t.Fatalf("object %s of the interrupted copy left", k)
		}
	}
	segs := m2.Segments(f.log.TopicID(), 0)
	if len(segs) != nSealed || finished(segs) != nSealed {
		t.Fatalf("%d segments (%d finished), want %d", len(segs), finished(segs), nSealed)
	}
	f.waitLocalStart(segs[len(segs)-1].End)
	f.readAll(m2)
}

// retention.bytes and retention.ms delete remote segments once they are
// no longer local, objects first, then the metadata.
func TestRemoteRetention(t *testing.T) {
	cfg := map[string]string{}
	for k, v := range tieredConfig {
		cfg[k] = v
	}
	cfg["retention.bytes"] = "20000"
	f := newFixture(t, cfg)
	defer f.eng.Close()
	f.produce(40)
	now := atomic.Int64{}
	now.Store(t0)
	m := f.manager(f.store, func(o *Options) { o.Now = func() time.Time { return time.UnixMilli(now.Load()) } })
	defer m.Close()
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.waitLocalStart(m.CopiedEnd(f.log.TopicID(), "tiered", 0))
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	left := m.Segments(f.log.TopicID(), 0)
	var remoteBytes int64
	for _, s := range left {
		remoteBytes += s.Size
	}
	total := remoteBytes + f.log.SizeBytes()
	st := m.Stats()
	if len(left) == 0 || st.SegmentsDeleted == 0 || int64(len(left))+st.SegmentsDeleted != st.SegmentsCopied ||
		total < 20000 || total-left[0].Size >= 20000 {
		t.Fatalf("%d segments left, stats %+v, %d bytes in all", len(left), st, total)
	}
	// Only the objects of the segments left remain.
	ids := map[string]bool{}
	for _, s := range left {
		ids[s.ID] = true
	}
	for _, k := range f.keys() {
		id := k[strings.LastIndexByte(k, '/')+22 : strings.LastIndexByte(k, '/')+44]
		if !ids[id] {
			t.Fatalf("object %s of a deleted segment left", k)
		}
	}
	if start, _ := m.LogStart(f.log.TopicID(), 0); start != left[0].Base {
		t.Fatalf("remote start %d, want %d", start, left[0].Base)
	}
	if _, err := m.Read(context.Background(), f.log.TopicID(), 0, 0, 100); !errors.Is(err, ErrNotRemote) {
		t.Fatalf("read below the remote start: %v", err)
	}
	// retention.ms: every remote-only segment is older than an hour.
	cfg["retention.ms"] = "3600000"
	if err := f.eng.SetTopicConfig("tiered", cfg); err != nil {
		t.Fatal(err)
	}
	now.Store(t0 + 2*3600_000)
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(m.Segments(f.log.TopicID(), 0)); n != 0 {
		t.Fatalf("%d remote segments past retention.ms", n)
	}
}

// A remote object that does not match its recorded SHA-256 is refused.
func TestCorruptRemoteObjectRefused(t *testing.T) {
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	f.produce(8)
	m := f.manager(f.store, nil)
	defer m.Close()
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := m.Segments(f.log.TopicID(), 0)[0]
	bad := []byte(strings.Repeat("z", int(s.Size)))
	key := ObjectKey("tiered", 0, s.Base, s.ID, KindLog)
	if _, err := f.store.Put(context.Background(), key, strings.NewReader(string(bad)), int64(len(bad)), objstore.SumOf(bad)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Read(context.Background(), f.log.TopicID(), 0, s.Base, 100); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a replaced object: %v", err)
	}
}

func TestObjectKey(t *testing.T) {
	for _, tc := range []struct {
		topic, want string
	}{
		{"orders", "orders-3/00000000000000000042-abc.log"},
		{".hidden", "=2Ehidden-3/00000000000000000042-abc.log"},
	} {
		k := ObjectKey(tc.topic, 3, 42, "abc", KindLog)
		if k != tc.want || objstore.ValidKey(k) != nil {
			t.Errorf("%s: %s (%v)", tc.topic, k, objstore.ValidKey(k))
		}
	}
}

// ListOffsets by time and read_committed's aborted transactions are
// answered from remote segments: their time indexes, batches and copied
// .txnindex objects.
func TestTimestampSearchAndAbortedTxnsRemote(t *testing.T) {
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	f.produce(5)
	// An aborted transaction of producer 7 in the middle.
	txnFirst := f.log.LogEndOffset()
	var b record.Builder
	b.Reset(record.CodecNone, t0+txnFirst)
	b.SetProducer(7, 0, 0)
	b.SetTransactional()
	for j := int64(0); j < 10; j++ {
		b.Add(t0+txnFirst+j, nil, []byte(fmt.Sprintf("v%d-aborted", txnFirst+j)), nil)
	}
	batch, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.log.Append(batch, f.log.LeaderEpoch()); err != nil {
		t.Fatal(err)
	}
	mk, err := f.log.AppendTxnMarker(7, 0, 0, false, f.log.LeaderEpoch())
	if err != nil {
		t.Fatal(err)
	}
	f.produce(20)
	m := f.manager(f.store, nil)
	defer m.Close()
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	copied := m.CopiedEnd(f.log.TopicID(), "tiered", 0)
	if copied <= mk.LastOffset+1 {
		t.Fatalf("copied end %d: the marker at %d is not copied", copied, mk.LastOffset)
	}
	f.waitLocalStart(copied)
	withTxn := 0
	for _, s := range m.Segments(f.log.TopicID(), 0) {
		if _, ok := s.Files[KindTxnIndex]; ok {
			withTxn++
		}
	}
	if withTxn != 1 {
		t.Fatalf("%d segments copied with a .txnindex, want 1", withTxn)
	}
	got, err := m.AbortedTransactions(context.Background(), f.log.TopicID(), 0, nil, 0, copied)
	if err != nil || len(got) != 1 || got[0] != (engine.AbortedTxn{ProducerID: 7, FirstOffset: txnFirst}) {
		t.Fatalf("aborted %+v, %v; want producer 7 from %d", got, err, txnFirst)
	}
	if got, _ := m.AbortedTransactions(context.Background(), f.log.TopicID(), 0, nil, mk.LastOffset+1, copied); len(got) != 0 {
		t.Fatalf("aborted after the marker: %+v", got)
	}
	// Every record's offset is found by its timestamp (t0+offset), none
	// past the remote data.
	for _, want := range []int64{0, 1, 37, txnFirst + 3, copied - 1} {
		off, ts, found, err := m.OffsetForTimestamp(context.Background(), f.log.TopicID(), 0, t0+want)
		if err != nil || !found || off != want || ts != t0+want {
			t.Fatalf("timestamp %d: offset %d ts %d found %v err %v", want, off, ts, found, err)
		}
	}
	if _, _, found, err := m.OffsetForTimestamp(context.Background(), f.log.TopicID(), 0, t0+copied+5); found || err != nil {
		t.Fatalf("a timestamp past the remote data found (%v)", err)
	}
}

// CopyMaxBytesPerSecond spreads the copies: the waits add up to the bytes
// copied over the rate (the clock stands still here, so every byte is
// waited for).
func TestCopyThrottle(t *testing.T) {
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	f.produce(12)
	var waited time.Duration
	m := f.manager(f.store, func(o *Options) {
		o.CopyMaxBytesPerSecond = 10_000
		o.Now = func() time.Time { return time.UnixMilli(t0) }
		o.Sleep = func(ctx context.Context, d time.Duration) error { waited = d; return ctx.Err() }
	})
	defer m.Close()
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	want := time.Duration(float64(st.BytesCopied) / 10_000 * float64(time.Second))
	if st.SegmentsCopied < 3 || waited < want-time.Millisecond || waited > want+time.Millisecond {
		t.Fatalf("last wait %v after %d bytes at 10,000 B/s, want %v", waited, st.BytesCopied, want)
	}
}

// Deleting a topic deletes its remote segments and metadata file.
func TestDeletedTopicRemoteDataDeleted(t *testing.T) {
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	f.produce(10)
	m := f.manager(f.store, nil)
	defer m.Close()
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := f.log.TopicID()
	if len(f.keys()) == 0 || len(m.Segments(id, 0)) == 0 {
		t.Fatal("nothing copied")
	}
	if err := f.eng.DeleteTopic("tiered"); err != nil {
		t.Fatal(err)
	}
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if keys := f.keys(); len(keys) != 0 {
		t.Fatalf("objects left: %v", keys)
	}
	if n := len(m.Segments(id, 0)); n != 0 {
		t.Fatalf("%d segments left in the metadata", n)
	}
	if rs, err := loadState(vfs.OS, f.metaDir); err != nil || rs.parts[tp{id, 0}] != nil {
		t.Fatalf("metadata on disk after the topic's deletion: %v, %v", rs.parts[tp{id, 0}], err)
	}
	// Its snapshot file goes at the log's next compaction (here the next
	// Open's).
	m.Close()
	m = f.manager(f.store, nil)
	defer m.Close()
	if _, err := os.Stat(filepath.Join(f.metaDir, metaFileName(id, 0))); !os.IsNotExist(err) {
		t.Fatalf("metadata file: %v", err)
	}
}

// DeleteRecords below the local log start moves the remote log start:
// reads below it fail, timestamps below it are not answered, the
// segments wholly below it are deleted, and the floor survives a restart.
func TestDeleteRecordsRemote(t *testing.T) {
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	f.produce(40)
	m := f.manager(f.store, nil)
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := f.log.TopicID()
	segs := m.Segments(id, 0)
	f.waitLocalStart(segs[len(segs)-1].End)
	before := segs[2].Base + 3 // inside the third segment
	if err := m.DeleteRecords(id, "tiered", 0, before); err != nil {
		t.Fatal(err)
	}
	if start, ok := m.LogStart(id, 0); !ok || start != before {
		t.Fatalf("remote log start %d %v, want %d", start, ok, before)
	}
	if _, err := m.Read(context.Background(), id, 0, before-1, 100); !errors.Is(err, ErrNotRemote) {
		t.Fatalf("read below the start: %v", err)
	}
	if b, err := m.Read(context.Background(), id, 0, before, 100); err != nil || len(b) == 0 {
		t.Fatalf("read at the start: %v", err)
	}
	if off, _, found, err := m.OffsetForTimestamp(context.Background(), id, 0, t0); err != nil || !found || off != before {
		t.Fatalf("earliest timestamp: offset %d found %v err %v, want %d", off, found, err, before)
	}
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	left := m.Segments(id, 0)
	if len(left) != len(segs)-2 || left[0].ID != segs[2].ID {
		t.Fatalf("%d of %d segments left, first %+v", len(left), len(segs), left[0])
	}
	for _, k := range f.keys() {
		if strings.Contains(k, segs[0].ID) || strings.Contains(k, segs[1].ID) {
			t.Fatalf("object %s below the start left", k)
		}
	}
	m.Close()
	m2 := f.manager(f.store, nil)
	defer m2.Close()
	if start, _ := m2.LogStart(id, 0); start != before {
		t.Fatalf("after restart the remote log start is %d", start)
	}
}

// Segments copied before CRC-32C recorded each object's SHA-256: their
// objects are still fetched and verified by it, and a recorded SHA-256
// that does not match is ErrCorrupt; new copies record a CRC-32C.
func TestSHA256CopiesStillVerified(t *testing.T) {
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	m := f.manager(f.store, nil)
	defer m.Close()
	data := []byte("an offset index copied by an older broker")
	sha := sha256.Sum256(data)
	old, err := objstore.ParseSum(hex.EncodeToString(sha[:]))
	if err != nil {
		t.Fatal(err)
	}
	seg := &Segment{ID: "old", Base: 0, End: 1, Files: map[string]FileMeta{KindOffsetIndex: {Size: int64(len(data)), SHA256: old.String()}}}
	if _, err := f.store.Put(context.Background(), ObjectKey("tiered", 0, 0, "old", KindOffsetIndex), bytes.NewReader(data), int64(len(data)), old); err != nil {
		t.Fatal(err)
	}
	got, err := m.fetchObject(context.Background(), "tiered", 0, seg, KindOffsetIndex)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fetch: %q %v", got, err)
	}
	other := sha256.Sum256([]byte("something else"))
	seg.Files[KindOffsetIndex] = FileMeta{Size: int64(len(data)), SHA256: hex.EncodeToString(other[:])}
	if _, err := m.fetchObject(context.Background(), "tiered", 0, seg, KindOffsetIndex); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("fetch against a wrong SHA-256: %v, want ErrCorrupt", err)
	}
	if s, err := sumOf(FileMeta{Checksum: "crc32c:0a0b0c0d"}); err != nil || s.Alg != objstore.CRC32C {
		t.Fatalf("sumOf a checksum: %+v %v", s, err)
	}
}
