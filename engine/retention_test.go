package engine

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/vfs"
)

// retentionTopic opens an engine on a fake clock with retention driven by
// hand, and a one-partition topic whose segments hold one ~3 KB batch each.
func retentionTopic(t *testing.T, dir string, clk *fakeClock, cfg map[string]string) (*Engine, *Log) {
	t.Helper()
	e := openEngine(t, dir, func(o *Options) {
		o.Now = clk.Now
		o.RetentionCheckInterval = -1
		o.Cleaner.Disabled = true
	})
	c := smallConfig()
	for k, v := range cfg {
		c[k] = v
	}
	tp := mustTopic(t, e, "ret", 1, c)
	return e, tp.Partition(0)
}

// appendAt appends one 3,000-byte record stamped ts (one segment each with
// segment.bytes=4096) and waits until it is durable.
func appendAt(t *testing.T, l *Log, ts int64, seed int) AppendInfo {
	t.Helper()
	info := mustAppend(t, l, batchOf(t, 1, 3000, ts, seed))
	if err := waitDurable(t, l, info.LastOffset); err != nil {
		t.Fatal(err)
	}
	return info
}

func deletedFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+deletedSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRetentionByTimeDeletesExactlyExpiredSegments(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	dir := t.TempDir()
	e, l := retentionTopic(t, dir, clk, map[string]string{"retention.ms": "10000", "file.delete.delay.ms": "60000"})
	defer e.Close()
	for i := 0; i < 10; i++ {
		appendAt(t, l, t0+int64(i)*1000, i)
	}
	if n := l.SegmentCount(); n != 10 {
		t.Fatalf("%d segments, want 10 (one batch each)", n)
	}
	// A reader pins segment 0 before retention runs.
	pinned, err := l.Read(0, 1<<20, true)
	if err != nil || len(pinned.Chunks) != 1 {
		t.Fatalf("Read(0) = %+v, %v", pinned, err)
	}
	defer pinned.Release()

	// Clock behind every timestamp: nothing goes.
	clk.ms.Store(t0 - 3600_000)
	if n := e.enforceRetention(); n != 0 || l.LogStartOffset() != 0 {
		t.Fatalf("clock in the past deleted %d segments, start %d", n, l.LogStartOffset())
	}
	// now - ts > 10000 holds for ts < t0+5500: segments 0..5.
	clk.ms.Store(t0 + 15500)
	if n := e.enforceRetention(); n != 6 {
		t.Fatalf("deleted %d segments, want 6", n)
	}
	if got := l.LogStartOffset(); got != 6 {
		t.Fatalf("log start %d, want 6", got)
	}
	// Exactly at the boundary (now - ts == retention.ms) a segment stays.
	clk.ms.Store(t0 + 16000)
	if n := e.enforceRetention(); n != 0 {
		t.Fatalf("deleted %d segments at now-ts == retention.ms", n)
	}
	if _, err := l.Read(5, 1<<20, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read below the start: %v, want out of range", err)
	}
	batches, _ := readAll(t, l, 6, 1<<20)
	if len(batches) != 4 {
		t.Fatalf("read %d batches from the start, want 4", len(batches))
	}
	// The files are renamed, still there during file.delete.delay.ms.
	pdir := filepath.Join(dir, "ret-0")
	if d := deletedFiles(t, pdir); len(d) != 18 {
		t.Fatalf("%d *.deleted files, want 18 (6 segments x 3): %v", len(d), d)
	}
	// The pinned reader still reads its (renamed) file.
	buf := readChunks(t, pinned)
	if int64(len(buf)) != pinned.Bytes {
		t.Fatalf("pinned read %d bytes, want %d", len(buf), pinned.Bytes)
	}
	// After the delay the unpinned ones go; the pinned .log goes on Release.
	e.releaseDue(clk.ms.Load() + 60000)
	if d := deletedFiles(t, pdir); len(d) != 3 || !strings.Contains(d[0], "00000000000000000000.") {
		t.Fatalf("after the delay: %v, want only the pinned segment's files", d)
	}
	if _, err := pinned.Chunks[0].File.ReadAt(make([]byte, 10), 0); err != nil {
		t.Fatalf("pinned file after unlink delay: %v", err)
	}
	pinned.Release()
	if d := deletedFiles(t, pdir); len(d) != 0 {
		t.Fatalf("after release: %v", d)
	}
	// The start offset survives a restart; offsets of survivors never change.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2, l2 := reopenRetention(t, dir, clk)
	defer e2.Close()
	if got := l2.LogStartOffset(); got != 6 {
		t.Fatalf("log start after reopen %d, want 6", got)
	}
	recs, err := e2.Topic("ret").Consume(0, 6, 100)
	if err != nil || len(recs) != 4 || recs[0].Offset != 6 || recs[3].Offset != 9 {
		t.Fatalf("Consume after reopen: %d records, %v", len(recs), err)
	}
	if !recs[0].Timestamp.Equal(time.UnixMilli(t0 + 6000)) {
		t.Fatalf("first survivor stamped %v", recs[0].Timestamp)
	}
}

func reopenRetention(t *testing.T, dir string, clk *fakeClock) (*Engine, *Log) {
	t.Helper()
	e := openEngine(t, dir, func(o *Options) {
		o.Now = clk.Now
		o.RetentionCheckInterval = -1
		o.Cleaner.Disabled = true
	})
	tp := e.Topic("ret")
	if tp == nil {
		t.Fatal("topic gone after reopen")
	}
	return e, tp.Partition(0)
}

func TestRetentionFutureTimestampBlocksLaterSegments(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	e, l := retentionTopic(t, t.TempDir(), clk, map[string]string{"retention.ms": "1000"})
	defer e.Close()
	appendAt(t, l, t0-100_000, 0)
	appendAt(t, l, t0+86_400_000, 1) // a producer's clock a day ahead
	appendAt(t, l, t0-100_000, 2)
	appendAt(t, l, t0-100_000, 3) // active
	clk.Advance(60_000)
	if n := e.enforceRetention(); n != 1 || l.LogStartOffset() != 1 {
		t.Fatalf("deleted %d, start %d; want 1 and 1 (a future segment is young)", n, l.LogStartOffset())
	}
	// The active segment is never deleted, however old.
	clk.Advance(2 * 86_400_000)
	if n := e.enforceRetention(); n != 2 || l.LogStartOffset() != 3 || l.SegmentCount() != 1 {
		t.Fatalf("deleted %d, start %d, %d segments; want 2, 3, 1", n, l.LogStartOffset(), l.SegmentCount())
	}
}

func TestRetentionBySize(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	e, l := retentionTopic(t, t.TempDir(), clk, map[string]string{"retention.ms": "-1", "retention.bytes": "10000"})
	defer e.Close()
	for i := 0; i < 12; i++ {
		appendAt(t, l, t0, i)
	}
	segSize := (*l.segs.Load())[0].end.Load()
	before := l.SizeBytes()
	n := e.enforceRetention()
	after := l.SizeBytes()
	if n == 0 || after > 10000+segSize {
		t.Fatalf("deleted %d segments: %d bytes left (was %d), limit %d + one segment %d", n, after, before, 10000, segSize)
	}
	// Kafka's rule: the oldest survivor stays because removing it would
	// take the partition below retention.bytes.
	if oldest := (*l.segs.Load())[0].end.Load(); after-oldest >= 10000 {
		t.Fatalf("%d bytes left, oldest segment %d: should have deleted more", after, oldest)
	}
	if got, want := l.LogStartOffset(), int64(n); got != want {
		t.Fatalf("log start %d, want %d", got, want)
	}
	if e.enforceRetention() != 0 {
		t.Fatal("second pass deleted more")
	}
}

func TestRetentionSkipsCompactOnlyTopics(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	e, l := retentionTopic(t, t.TempDir(), clk, map[string]string{"retention.ms": "1", "cleanup.policy": "compact"})
	defer e.Close()
	for i := 0; i < 3; i++ {
		appendAt(t, l, t0-1_000_000, i)
	}
	if n := e.enforceRetention(); n != 0 {
		t.Fatalf("compact topic lost %d segments to retention", n)
	}
}

// The engine's goroutine runs retention on its own, and Close stops it.
func TestRetentionGoroutine(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	dir := t.TempDir()
	e := openEngine(t, dir, func(o *Options) {
		o.Now = clk.Now
		o.RetentionCheckInterval = 5 * time.Millisecond
		o.Cleaner.Disabled = true
	})
	c := smallConfig()
	c["retention.ms"] = "1000"
	c["file.delete.delay.ms"] = "0"
	l := mustTopic(t, e, "ret", 1, c).Partition(0)
	for i := 0; i < 4; i++ {
		appendAt(t, l, t0, i)
	}
	clk.Advance(5000)
	deadline := time.Now().Add(30 * time.Second) // hang guard
	for l.LogStartOffset() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("retention goroutine never ran: start %d", l.LogStartOffset())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for len(deletedFiles(t, filepath.Join(dir, "ret-0"))) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("deleted files never removed: %v", deletedFiles(t, filepath.Join(dir, "ret-0")))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, logStartFile)); err != nil {
		t.Fatal(err)
	}
}

// TestRetentionPassWritesLogStartCheckpointOnce: a retention pass that
// deletes from every partition writes the log-start checkpoint once, after
// all of them (it was once per partition: 192 atomic rewrites of the whole
// file in a pass over two 96-partition topics), and it holds every
// partition's new start; a pass that deletes nothing writes none.
func TestRetentionPassWritesLogStartCheckpointOnce(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	var writes atomic.Int64
	e := openEngine(t, t.TempDir(), func(o *Options) {
		o.Now = clk.Now
		o.RetentionCheckInterval = -1
		o.Cleaner.Disabled = true
		o.syncHook = func(path string) error {
			if filepath.Base(path) == logStartFile {
				writes.Add(1)
			}
			return nil
		}
	})
	defer e.Close()
	c := smallConfig()
	c["retention.ms"], c["retention.bytes"] = "-1", "10000"
	const parts = 6
	tp := mustTopic(t, e, "pass", parts, c)
	for p := 0; p < parts; p++ {
		for i := 0; i < 8; i++ {
			appendAt(t, tp.Partition(int32(p)), t0, p*100+i)
		}
	}
	before := writes.Load()
	n := e.enforceRetention()
	if n < parts {
		t.Fatalf("the pass deleted %d segments from %d partitions: want some from each", n, parts)
	}
	if w := writes.Load() - before; w != 1 {
		t.Fatalf("the pass wrote the log-start checkpoint %d times, want once", w)
	}
	got, err := e.readCheckpoint(logStartFile)
	if err != nil {
		t.Fatal(err)
	}
	for p := 0; p < parts; p++ {
		l := tp.Partition(int32(p))
		if l.LogStartOffset() == 0 {
			t.Fatalf("partition %d: nothing deleted", p)
		}
		if v := got[topicPartition{"pass", int32(p)}]; v != l.LogStartOffset() {
			t.Fatalf("partition %d: checkpoint holds start %d, the log %d", p, v, l.LogStartOffset())
		}
	}
	before = writes.Load()
	if e.enforceRetention() != 0 {
		t.Fatal("second pass deleted more")
	}
	if w := writes.Load() - before; w != 0 {
		t.Fatalf("a pass that deleted nothing wrote the checkpoint %d times", w)
	}
}

// A retention pass renames the segments it deletes without syncing their
// directory (one fsync per deleted segment before). A crash that undoes
// the renames brings them back under their old names, below the log start
// the pass checkpointed: Open keeps that start, reads from it return what
// they did before the crash, and the next pass deletes them again.
func TestRetentionDeletesWithoutDirectorySyncs(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	dir := t.TempDir()
	mfs := newDataFS(t, dir)
	c := &dirSyncCounter{FS: mfs, n: map[string]int{}}
	opts := func(fsys vfs.FS) func(*Options) {
		return func(o *Options) {
			o.fs, o.Now = fsys, clk.Now
			o.RetentionCheckInterval = -1
			o.Cleaner.Disabled = true
		}
	}
	e := openEngine(t, dir, opts(c))
	defer e.Close() // after the crash below: it only stops the engine
	cfg := smallConfig()
	cfg["retention.ms"], cfg["retention.bytes"] = "-1", "10000"
	const parts = 3
	tp := mustTopic(t, e, "ret", parts, cfg)
	var ends, starts, kept [parts]int64
	var before [parts]int
	for p := range parts {
		l := tp.Partition(int32(p))
		for i := range 8 {
			appendAt(t, l, t0, p*100+i)
		}
		ends[p], before[p] = l.LogEndOffset(), c.count(l.dir)
	}
	if n := e.enforceRetention(); n < 2*parts {
		t.Fatalf("the pass deleted %d segments: want several from each of %d partitions", n, parts)
	}
	for p := range parts {
		l := tp.Partition(int32(p))
		// At most the leader-epoch checkpoint's own rewrite.
		if n := c.count(l.dir) - before[p]; n > 1 {
			t.Fatalf("partition %d: the pass synced its directory %d times", p, n)
		}
		starts[p], kept[p] = l.LogStartOffset(), int64(len(*l.segs.Load()))
	}
	after := mfs.Crash(vfs.CrashOptions{})
	e2 := openEngine(t, dir, opts(after))
	defer e2.Close()
	back := 0
	for p := range parts {
		l := e2.Topic("ret").Partition(int32(p))
		if l.LogStartOffset() != starts[p] || l.LogEndOffset() != ends[p] {
			t.Fatalf("partition %d after the crash: log [%d, %d), before it [%d, %d)", p, l.LogStartOffset(), l.LogEndOffset(), starts[p], ends[p])
		}
		res, err := l.Read(starts[p], 1<<20, true)
		if err != nil || len(res.Chunks) == 0 {
			t.Fatalf("partition %d: reading from the log start %d: %v", p, starts[p], err)
		}
		data, err := segmentResultBytes(&res)
		res.Release()
		if err != nil || len(data) < 8 || int64(binary.BigEndian.Uint64(data)) != starts[p] {
			t.Fatalf("partition %d: the read from %d did not start with its batch (%v)", p, starts[p], err)
		}
		back += len(*l.segs.Load()) - int(kept[p])
	}
	if back == 0 {
		t.Fatal("no deleted segment came back in the crash: the test checked nothing")
	}
	e2.enforceRetention()
	for p := range parts {
		if n := int64(len(*e2.Topic("ret").Partition(int32(p)).segs.Load())); n != kept[p] {
			t.Fatalf("partition %d: %d segments after the next pass, %d before the crash", p, n, kept[p])
		}
	}
}
