package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
)

// compactWorkload writes updates records over keys keys (update i sets key
// i%keys to "v<i>"), in batches of batchLen records, then a tombstone for
// every key divisible by 10, then (after advancing the clock by rollAfterMs)
// one "filler" record that rolls the segment so everything before it is
// cleanable. It returns the expected latest offset and value per key (nil
// value: deleted).
type latest struct {
	offset int64
	value  []byte
}

func compactWorkload(t testing.TB, l *Log, clk *fakeClock, updates, keys, batchLen int, codec record.Codec, rollAfterMs int64) map[string]latest {
	t.Helper()
	want := make(map[string]latest, keys)
	var b record.Builder
	var buf []byte
	next := l.LogEndOffset()
	flush := func() {
		if b.Len() == 0 {
			return
		}
		var err error
		if buf, err = b.AppendTo(buf[:0]); err != nil {
			t.Fatal(err)
		}
		info := mustAppend(t, l, buf)
		if info.BaseOffset != next-int64(b.Len()) {
			t.Fatalf("batch at %d, expected %d", info.BaseOffset, next-int64(b.Len()))
		}
		b.Reset(codec, clk.ms.Load())
	}
	b.Reset(codec, clk.ms.Load())
	for i := 0; i < updates; i++ {
		k := "key-" + strconv.Itoa(i%keys)
		v := []byte("v" + strconv.Itoa(i))
		b.Add(clk.ms.Load(), []byte(k), v, nil)
		want[k] = latest{next, v}
		next++
		if b.Len() == batchLen {
			flush()
		}
	}
	for k := 0; k < keys; k += 10 {
		key := "key-" + strconv.Itoa(k)
		b.Add(clk.ms.Load(), []byte(key), nil, nil)
		want[key] = latest{next, nil}
		next++
		if b.Len() == batchLen {
			flush()
		}
	}
	flush()
	clk.Advance(rollAfterMs)
	b.Reset(codec, clk.ms.Load())
	b.Add(clk.ms.Load(), []byte("filler"), []byte("x"), nil)
	want["filler"] = latest{next, []byte("x")}
	next++
	flush()
	if err := waitDurable(t, l, next-1); err != nil {
		t.Fatal(err)
	}
	return want
}

// readKeys reads the whole partition through Read and returns, per key, the
// last record seen, checking CRCs, batch validity and strictly increasing
// offsets.
func readKeys(t testing.TB, l *Log) (map[string]latest, int) {
	t.Helper()
	got := map[string]latest{}
	prev := int64(-1)
	n := 0
	batches, _ := readAll(t, l, l.LogStartOffset(), 1<<20)
	for _, batch := range batches {
		// Not record.Validate: compaction keeps lastOffsetDelta, so a
		// cleaned batch may hold fewer records than its offset span.
		if h, err := record.ParseHeader(batch); err != nil || !record.CheckCRC(batch) || int(h.NumRecords) > int(h.LastOffsetDelta)+1 {
			t.Fatalf("bad batch: %+v, %v", h, err)
		}
		err := record.Iterate(batch, func(h *record.Header, r *record.Record) error {
			off := h.BaseOffset + int64(r.OffsetDelta)
			if off <= prev {
				return fmt.Errorf("offset %d after %d", off, prev)
			}
			if off > h.LastOffset() {
				return fmt.Errorf("offset %d past the batch's last offset %d", off, h.LastOffset())
			}
			prev = off
			n++
			got[string(r.Key)] = latest{off, bytes.Clone(r.Value)}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return got, n
}

// checkCompacted asserts that a fully compacted log holds exactly the live
// keys, each once, at its latest offset with its latest value.
func checkCompacted(t testing.TB, l *Log, want map[string]latest) {
	t.Helper()
	got, n := readKeys(t, l)
	live := 0
	for k, w := range want {
		g, ok := got[k]
		if w.value == nil {
			if ok {
				t.Fatalf("deleted key %s still present at %d (value %q)", k, g.offset, g.value)
			}
			continue
		}
		live++
		if !ok || g.offset != w.offset || !bytes.Equal(g.value, w.value) {
			t.Fatalf("key %s: got %+v (present %v), want offset %d value %q", k, g, ok, w.offset, w.value)
		}
	}
	if n != live || len(got) != live {
		t.Fatalf("read %d records over %d keys, want %d live keys once each", n, len(got), live)
	}
}

// checkNothingLost asserts that the last record of every key is its latest
// write (a tombstone may be present or already removed).
func checkNothingLost(t testing.TB, l *Log, want map[string]latest) {
	t.Helper()
	got, _ := readKeys(t, l)
	for k, w := range want {
		g, ok := got[k]
		if w.value == nil && !ok {
			continue
		}
		if !ok || g.offset != w.offset || !bytes.Equal(g.value, w.value) {
			t.Fatalf("key %s: last record %+v (present %v), want offset %d value %q", k, g, ok, w.offset, w.value)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Fatalf("unknown key %q", k)
		}
	}
}

func compactEngine(t testing.TB, dir string, clk *fakeClock) *Engine {
	return openEngine(t, dir, func(o *Options) {
		o.Now = clk.Now
		o.RetentionCheckInterval = -1
		o.Cleaner.Disabled = true
		o.Cleaner.IOMaxBytesPerSecond = -1
	})
}

func compactConfig(segmentBytes int) map[string]string {
	return map[string]string{
		"cleanup.policy":       "compact",
		"segment.bytes":        strconv.Itoa(segmentBytes),
		"preallocate":          "false",
		"delete.retention.ms":  "1000",
		"segment.ms":           "60000",
		"index.interval.bytes": "4096",
	}
}

func TestCompactionMillionUpdates(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	dir := t.TempDir()
	e := compactEngine(t, dir, clk)
	defer func() { e.Close() }()
	tp := mustTopic(t, e, "cmp", 1, compactConfig(1<<20))
	l := tp.Partition(0)
	updates, keys := 1_000_000, 10_000
	if testing.Short() {
		updates = 100_000
	}
	want := compactWorkload(t, l, clk, updates, keys, 2000, record.CodecNone, 120_000)
	before := l.SizeBytes()
	segsBefore := l.SegmentCount()

	st, err := tp.Compact(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted %d segments: %d -> %d bytes, %d records removed, %+v", segsBefore, before, l.SizeBytes(), st.RecordsRemoved, st)
	if st.CleanedTo != l.LogEndOffset()-1 {
		t.Fatalf("cleaned to %d, want %d (the active segment's base)", st.CleanedTo, l.LogEndOffset()-1)
	}
	checkCompacted(t, l, want)
	if l.LogStartOffset() != 0 {
		t.Fatalf("log start moved to %d", l.LogStartOffset())
	}
	// A second pass finds nothing dirty.
	if st2, err := tp.Compact(0); err != nil || st2.SegmentsRewritten != 0 {
		t.Fatalf("second pass: %+v, %v", st2, err)
	}
	// The cleaned segments, indexes and clean point survive a restart.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = compactEngine(t, dir, clk)
	l = e.Topic("cmp").Partition(0)
	checkCompacted(t, l, want)
	checkIndexesAgainstWalk(t, l)
	if got := e.cleanPoint(l); got != st.CleanedTo {
		t.Fatalf("clean point after reopen %d, want %d", got, st.CleanedTo)
	}
	// Timestamp lookups still work on cleaned segments.
	if off, _, ok := l.OffsetForTimestamp(t0 + 1); !ok || off != l.LogEndOffset()-1 {
		t.Fatalf("OffsetForTimestamp after compaction = %d, %v", off, ok)
	}
}

// Tombstones stay until delete.retention.ms passed, then go.
func TestCompactionTombstoneHorizon(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	e := compactEngine(t, t.TempDir(), clk)
	defer e.Close()
	cfg := compactConfig(64 << 10)
	cfg["delete.retention.ms"] = "3600000"
	tp := mustTopic(t, e, "tomb", 1, cfg)
	l := tp.Partition(0)
	want := compactWorkload(t, l, clk, 20_000, 500, 500, record.CodecNone, 120_000)
	if _, err := tp.Compact(0); err != nil {
		t.Fatal(err)
	}
	got, _ := readKeys(t, l)
	for k, w := range want {
		if w.value == nil {
			if g, ok := got[k]; !ok || g.value != nil || g.offset != w.offset {
				t.Fatalf("tombstone of %s gone before delete.retention.ms: %+v %v", k, g, ok)
			}
		}
	}
	checkNothingLost(t, l, want)
	// Past the horizon a new pass removes them (the log has no new dirty
	// data: force the clean point back as a fresh dirty segment would).
	clk.Advance(3600_001)
	e.setCleanPoint(l, 0)
	if _, err := tp.Compact(0); err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, l, want)
}

// Compressed batches are re-encoded with their codec.
func TestCompactionRecompresses(t *testing.T) {
	for _, codec := range []record.Codec{record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			const t0 = int64(1_700_000_000_000)
			clk := newFakeClock(t0)
			e := compactEngine(t, t.TempDir(), clk)
			defer e.Close()
			tp := mustTopic(t, e, "z", 1, compactConfig(32<<10))
			l := tp.Partition(0)
			want := compactWorkload(t, l, clk, 20_000, 300, 700, codec, 120_000)
			if _, err := tp.Compact(0); err != nil {
				t.Fatal(err)
			}
			checkCompacted(t, l, want)
			batches, _ := readAll(t, l, 0, 1<<20)
			for _, b := range batches {
				h, _ := record.ParseHeader(b)
				if h.Codec() != codec {
					t.Fatalf("batch at %d has codec %v, want %v", h.BaseOffset, h.Codec(), codec)
				}
			}
		})
	}
}

func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "c", 1, map[string]string{"cleanup.policy": "compact,delete"}).Partition(0)
	keyless := makeBatch(t, testRecord{ts: 1, key: []byte("k"), value: []byte("a")}, testRecord{ts: 1, value: []byte("b")})
	if _, err := l.Append(keyless, 0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("keyless record on a compacted topic: %v, want ErrInvalidRecord", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatal("refused batch changed the log")
	}
	mustAppend(t, l, makeBatch(t, testRecord{ts: 1, key: []byte("k"), value: nil}))
}

// A crash at any step of a swap leaves each segment old or new; reopening
// loses nothing, and the next pass finishes the job.
func TestCompactionCrashMidClean(t *testing.T) {
	for _, step := range []string{"cleaned", "swap", "deleted"} {
		for _, nth := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s-%d", step, nth), func(t *testing.T) {
				const t0 = int64(1_700_000_000_000)
				clk := newFakeClock(t0)
				dir, crash := t.TempDir(), t.TempDir()
				e := compactEngine(t, dir, clk)
				tp := mustTopic(t, e, "crash", 1, compactConfig(64<<10))
				l := tp.Partition(0)
				want := compactWorkload(t, l, clk, 50_000, 1000, 1000, record.CodecNone, 120_000)
				seen := 0
				e.cl.hook = func(s string) error {
					if s != step {
						return nil
					}
					if seen++; seen < nth {
						return nil
					}
					copyDir(t, dir, crash) // the disk as a SIGKILL would leave it
					return errors.New("injected crash")
				}
				if _, err := tp.Compact(0); !errors.Is(err, errCleanAborted) {
					t.Fatalf("Compact with a crash at %s: %v", step, err)
				}
				e.cl.hook = nil
				e.Close()

				e2 := compactEngine(t, crash, clk)
				defer e2.Close()
				l2 := e2.Topic("crash").Partition(0)
				checkNothingLost(t, l2, want)
				for _, pat := range []string{"*" + cleanedSuffix, "*" + swapSuffix, "*" + deletedSuffix} {
					if m, _ := filepath.Glob(filepath.Join(crash, "crash-0", pat)); len(m) > 0 {
						t.Fatalf("leftovers after Open: %v", m)
					}
				}
				if _, err := e2.Topic("crash").Compact(0); err != nil {
					t.Fatal(err)
				}
				checkCompacted(t, l2, want)
			})
		}
	}
}

// The engine's cleaner goroutine compacts on its own once the dirty ratio
// passes min.cleanable.dirty.ratio, and Close stops it.
func TestCleanerGoroutine(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	e := openEngine(t, t.TempDir(), func(o *Options) {
		o.Now = clk.Now
		o.RetentionCheckInterval = -1
		o.Cleaner.Backoff = 5 * time.Millisecond
		o.Cleaner.IOMaxBytesPerSecond = 8 << 20
	})
	defer e.Close()
	cfg := compactConfig(32 << 10)
	cfg["min.cleanable.dirty.ratio"] = "0.1"
	l := mustTopic(t, e, "auto", 1, cfg).Partition(0)
	want := compactWorkload(t, l, clk, 20_000, 100, 500, record.CodecNone, 120_000)
	deadline := time.Now().Add(60 * time.Second) // hang guard
	for e.cleanPoint(l) != l.LogEndOffset()-1 {
		if time.Now().After(deadline) {
			t.Fatalf("cleaner never cleaned: clean point %d, end %d", e.cleanPoint(l), l.LogEndOffset())
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkCompacted(t, l, want)
}

// BenchmarkCleaner measures one cleaning pass (unthrottled) over a log of
// 200,000 updates of 100-byte values over 10,000 keys; MB/s is the log's
// size before cleaning over the pass's time.
func BenchmarkCleaner(b *testing.B) {
	const t0 = int64(1_700_000_000_000)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		clk := newFakeClock(t0)
		e := compactEngine(b, b.TempDir(), clk)
		tp := mustTopic(b, e, "bench", 1, compactConfig(8<<20))
		l := tp.Partition(0)
		compactWorkloadValues(b, l, clk, 200_000, 10_000, 1000, 100)
		size := l.SizeBytes()
		b.SetBytes(size)
		b.StartTimer()
		if _, err := tp.Compact(0); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		e.Close()
	}
}

func compactWorkloadValues(b testing.TB, l *Log, clk *fakeClock, updates, keys, batchLen, valueLen int) {
	var bd record.Builder
	var buf []byte
	val := bytes.Repeat([]byte("v"), valueLen)
	bd.Reset(record.CodecNone, clk.ms.Load())
	var last int64
	for i := 0; i < updates; i++ {
		bd.Add(clk.ms.Load(), []byte("key-"+strconv.Itoa(i%keys)), val, nil)
		if bd.Len() == batchLen || i == updates-1 {
			buf, _ = bd.AppendTo(buf[:0])
			last = mustAppend(b, l, buf).LastOffset
			bd.Reset(record.CodecNone, clk.ms.Load())
		}
	}
	clk.Advance(120_000)
	bd.Add(clk.ms.Load(), []byte("filler"), val, nil)
	buf, _ = bd.AppendTo(buf[:0])
	last = mustAppend(b, l, buf).LastOffset
	if err := waitDurable(b, l, last); err != nil {
		b.Fatal(err)
	}
}

// FuzzCleanerFilterBatch feeds the cleaner's batch filter persisted-looking
// bytes: any input (with its length and CRC fixed up so decoding gets past
// them) must not panic, and whatever it returns must be one valid batch
// with the same base offset, lastOffsetDelta and codec, holding a subset of
// the input's records at their original offsets.
func FuzzCleanerFilterBatch(f *testing.F) {
	var b record.Builder
	for _, codec := range []record.Codec{record.CodecNone, record.CodecZstd} {
		b.Reset(codec, 1000)
		b.Add(1000, []byte("a"), []byte("1"), nil)
		b.Add(1001, nil, []byte("2"), nil)
		b.Add(1002, []byte("a"), nil, []record.RecordHeader{{Key: "h", Value: []byte("x")}})
		b.Add(1003, []byte("b"), []byte("3"), nil)
		seed, _ := b.AppendTo(nil)
		record.SetBaseOffset(seed, 100)
		f.Add(seed, []byte("a"), int64(102), true)
		f.Add(seed, []byte("b"), int64(200), false)
	}
	f.Fuzz(func(t *testing.T, batch, key []byte, latest int64, dropTombstones bool) {
		if len(batch) < record.HeaderSize || len(batch) > 1<<16 {
			return
		}
		batch = bytes.Clone(batch)
		binary.BigEndian.PutUint32(batch[8:], uint32(len(batch)-record.LogOverhead))
		binary.BigEndian.PutUint32(batch[record.OffsetCRC:], crc32.Checksum(batch[record.OffsetAttrs:], castagnoliTable))
		h, err := record.ParseHeader(batch)
		if err != nil {
			return
		}
		m := offsetMap{idx: map[string]int32{}}
		m.put(key, latest)
		w := segmentRewriter{m: &m}
		out, removed, err := w.filterBatch(&h, batch, dropTombstones)
		if err != nil || len(out) == 0 {
			return
		}
		if h.Control() { // control batches pass through untouched
			if !bytes.Equal(out, batch) {
				t.Fatal("control batch changed")
			}
			return
		}
		oh, err := record.ParseHeader(out)
		if err != nil || oh.Size() != len(out) || !record.CheckCRC(out) {
			t.Fatalf("filtered batch invalid: %+v %v", oh, err)
		}
		if oh.BaseOffset != h.BaseOffset || oh.LastOffsetDelta != h.LastOffsetDelta || oh.Codec() != h.Codec() {
			t.Fatalf("header changed: %+v -> %+v", h, oh)
		}
		// A crafted batch may repeat an offset delta: count records, not
		// offsets (in keeps the last record of each offset).
		in, nIn := map[int64]string{}, 0
		dupDeltas := false
		_ = record.Iterate(batch, func(h *record.Header, r *record.Record) error {
			nIn++
			o := h.BaseOffset + int64(r.OffsetDelta)
			if _, ok := in[o]; ok {
				dupDeltas = true
			}
			in[o] = string(r.Key) + "=" + string(r.Value)
			return nil
		})
		n := 0
		if err := record.Iterate(out, func(h *record.Header, r *record.Record) error {
			n++
			if !dupDeltas && in[h.BaseOffset+int64(r.OffsetDelta)] != string(r.Key)+"="+string(r.Value) {
				t.Fatalf("record at %d not from the input", h.BaseOffset+int64(r.OffsetDelta))
			}
			return nil
		}); err != nil {
			t.Fatalf("filtered batch does not decode: %v", err)
		}
		if int64(n)+removed != int64(nIn) && removed > 0 {
			t.Fatalf("%d kept + %d removed != %d records", n, removed, nIn)
		}
	})
}

// Segments left small by cleaning are merged into one (up to segment.bytes),
// and a crash in the middle of a merge's swap loses nothing: Open promotes
// the merged segment and drops the old segments it subsumed.
func TestCompactionMergesSmallSegments(t *testing.T) {
	for _, step := range []string{"", "cleaned", "swap", "deleted"} {
		t.Run("crash-at-"+step, func(t *testing.T) {
			const t0 = int64(1_700_000_000_000)
			clk := newFakeClock(t0)
			dir, crash := t.TempDir(), t.TempDir()
			e := compactEngine(t, dir, clk)
			tp := mustTopic(t, e, "merge", 1, compactConfig(64<<10))
			l := tp.Partition(0)
			want := compactWorkload(t, l, clk, 50_000, 1000, 1000, record.CodecNone, 120_000)
			if _, err := tp.Compact(0); err != nil {
				t.Fatal(err)
			}
			before := l.SegmentCount()
			if before < 4 {
				t.Fatalf("%d segments after the first pass; the test needs several", before)
			}
			// A full pass again (as after new dirty data): the small
			// segments now fit one.
			if err := e.setCleanPoint(l, 0); err != nil {
				t.Fatal(err)
			}
			if step == "" {
				st, err := tp.Compact(0)
				if err != nil {
					t.Fatal(err)
				}
				if l.SegmentCount() != 2 || st.SegmentsRewritten != before-1 {
					t.Fatalf("after merging: %d segments (was %d), %+v; want the cleaned ones merged into one", l.SegmentCount(), before, st)
				}
				checkCompacted(t, l, want)
				checkIndexesAgainstWalk(t, l)
				e.Close()
				return
			}
			e.cl.hook = func(s string) error {
				if s != step {
					return nil
				}
				copyDir(t, dir, crash)
				return errors.New("injected crash")
			}
			if _, err := tp.Compact(0); !errors.Is(err, errCleanAborted) {
				t.Fatalf("Compact with a crash at %s: %v", step, err)
			}
			e.cl.hook = nil
			e.Close()
			e2 := compactEngine(t, crash, clk)
			defer e2.Close()
			l2 := e2.Topic("merge").Partition(0)
			checkCompacted(t, l2, want)
			if step != "cleaned" && l2.SegmentCount() != 2 {
				t.Fatalf("after a crash past the commit point: %d segments, want the merged one and the active one", l2.SegmentCount())
			}
			checkIndexesAgainstWalk(t, l2)
		})
	}
}

// A topic deleted and created again with the same name starts dirty.
func TestCleanPointForgottenOnDelete(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	dir := t.TempDir()
	e := compactEngine(t, dir, clk)
	tp := mustTopic(t, e, "again", 1, compactConfig(32<<10))
	compactWorkload(t, tp.Partition(0), clk, 5000, 50, 500, record.CodecNone, 120_000)
	if st, err := tp.Compact(0); err != nil || st.CleanedTo == 0 {
		t.Fatalf("Compact: %+v, %v", st, err)
	}
	if err := e.DeleteTopic("again"); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e = compactEngine(t, dir, clk)
	defer e.Close()
	tp = mustTopic(t, e, "again", 1, compactConfig(32<<10))
	if p := e.cleanPoint(tp.Partition(0)); p != 0 {
		t.Fatalf("re-created topic's clean point %d, want 0", p)
	}
}

// min.compaction.lag.ms keeps young segments out of cleaning;
// max.compaction.lag.ms makes a log due however low its dirty ratio.
func TestCompactionLags(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	e := compactEngine(t, t.TempDir(), clk)
	defer e.Close()
	cfg := compactConfig(32 << 10)
	cfg["min.compaction.lag.ms"] = "3600000"
	cfg["min.cleanable.dirty.ratio"] = "1"
	tp := mustTopic(t, e, "lag", 1, cfg)
	l := tp.Partition(0)
	want := compactWorkload(t, l, clk, 10_000, 100, 500, record.CodecNone, 120_000)
	if st, err := tp.Compact(0); err != nil || st.CleanedTo != 0 || st.SegmentsRewritten != 0 {
		t.Fatalf("young segments cleaned: %+v, %v", st, err)
	}
	if e.pickLogToClean() != nil {
		t.Fatal("a log with nothing cleanable was picked")
	}
	clk.Advance(3600_000)
	// Old enough now; nothing is clean yet, so the dirty ratio is 1.
	if e.pickLogToClean() != l {
		t.Fatal("an old enough, wholly dirty log was not picked")
	}
	if _, err := tp.Compact(0); err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, l, want)

	// New dirty data below min.cleanable.dirty.ratio=1 (the log has a clean
	// part now) waits...
	over := tp.Overrides()
	over["min.compaction.lag.ms"] = "0"
	if err := e.SetTopicConfig("lag", over); err != nil {
		t.Fatal(err)
	}
	more := compactWorkload(t, l, clk, 2000, 100, 500, record.CodecNone, 120_000)
	if e.pickLogToClean() != nil {
		t.Fatal("picked below min.cleanable.dirty.ratio")
	}
	// ...until max.compaction.lag.ms passed for its first dirty segment.
	over["max.compaction.lag.ms"] = "60000"
	if err := e.SetTopicConfig("lag", over); err != nil {
		t.Fatal(err)
	}
	if e.pickLogToClean() != l {
		t.Fatal("max.compaction.lag.ms passed, but the log was not picked")
	}
	if _, err := tp.Compact(0); err != nil {
		t.Fatal(err)
	}
	checkNothingLost(t, l, more)
}
