package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratalog/strata/record"
)

// recycleOpts: ends mode, retention run by hand (no timer).
func recycleOpts(o *Options) {
	endsOpts(o)
	o.RetentionCheckInterval = -1
}

// recycleCfg: 1 MiB segments, retention keeping only the active one, and
// deleted files released only when the test says so (releaseDue).
func recycleCfg() map[string]string {
	return map[string]string{"segment.bytes": "1048576", "retention.bytes": "1", "file.delete.delay.ms": "3600000"}
}

// appended is a batch as appended, at its base offset.
type appended struct {
	base int64
	b    []byte
}

// appendRound appends four ~16 KiB batches to l and waits until they are
// durable (acknowledged).
func appendRound(t *testing.T, l *Log, seed *int) []appended {
	t.Helper()
	var out []appended
	var last int64
	for range 4 {
		b := batchOf(t, 16, 1000, int64(*seed), *seed)
		*seed++
		info := mustAppend(t, l, b)
		out, last = append(out, appended{info.BaseOffset, append([]byte(nil), b...)}), info.LastOffset
	}
	if err := waitDurable(t, l, last); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkBatches reads every batch of all from l's log start on, one Read
// each, and checks it is the one appended, and that the log ends right
// after the last: nothing else (an old segment's batch) is served.
func checkBatches(l *Log, all []appended) error {
	start := l.LogStartOffset()
	for _, a := range all {
		if a.base < start {
			continue
		}
		res, err := l.Read(a.base, 1, true)
		if err != nil {
			return fmt.Errorf("read at %d: %w", a.base, err)
		}
		data, err := resultBytes(&res)
		res.Release()
		if err != nil {
			return err
		}
		b, _, h, err := record.Next(data)
		if err != nil || h.BaseOffset != a.base || !record.CheckCRC(b) || !bytes.Equal(b[16:], a.b[16:]) {
			return fmt.Errorf("batch at %d is not the one appended (base %d, %v)", a.base, h.BaseOffset, err)
		}
	}
	h, _ := record.ParseHeader(all[len(all)-1].b)
	if want := all[len(all)-1].base + int64(h.LastOffsetDelta) + 1; l.LogEndOffset() != want {
		return fmt.Errorf("log end %d, want %d", l.LogEndOffset(), want)
	}
	return nil
}

// globCount counts the files of dir matching pattern.
func globCount(t *testing.T, dir, pattern string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// fileSizeOf is the size of the file at path.
func fileSizeOf(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// appendUntilSegments appends rounds until l has n segments.
func appendUntilSegments(t *testing.T, l *Log, n int, seed *int, all *[]appended) {
	t.Helper()
	for i := 0; l.SegmentCount() < n; i++ {
		if i == 1000 {
			t.Fatalf("1000 rounds and %d segments, want %d", l.SegmentCount(), n)
		}
		*all = append(*all, appendRound(t, l, seed)...)
	}
}

// poolLog opens an engine in ends mode with a one-partition topic whose
// segments are small and appends until it has n segments; it returns the
// batches appended and the seed of the next.
func poolLog(t *testing.T, n int) (*Engine, *Log, []appended, int) {
	t.Helper()
	requireSharedFlush(t)
	e := openEngine(t, t.TempDir(), recycleOpts)
	l := mustTopic(t, e, "pool", 1, recycleCfg()).Partition(0)
	var all []appended
	seed := 0
	appendUntilSegments(t, l, n, &seed, &all)
	return e, l, all, seed
}

// A follower follows its leader's log start with DeleteRecords, so its
// segments are cut that way rather than by its own retention: they feed
// the pool as retention's do (a three-broker run in ends mode recycled
// about half of its rolls while they did not).
func TestDeleteRecordsFeedsPool(t *testing.T) {
	e, l, all, seed := poolLog(t, 4)
	segs := *l.segs.Load()
	if _, err := l.DeleteRecords(segs[2].base); err != nil {
		t.Fatal(err)
	}
	if got, files := l.pool.size(), globCount(t, l.dir, "*.log"+recycleSuffix); got != 2 || files != 2 {
		t.Fatalf("pool of %d, %d *.log.recycle files after DeleteRecords cut two segments, want 2", got, files)
	}
	appendUntilSegments(t, l, 4, &seed, &all) // two rolls
	if n := e.recycledSegs.Load(); n != 2 {
		t.Fatalf("%d segments made over recycled files, want 2", n)
	}
	if err := checkBatches(l, all); err != nil {
		t.Fatal(err)
	}
}

// TestFloorDrainsPools: crossing the free-space floor first removes the
// pooled segment files (each holds a segment's worth of disk beyond
// retention), and while below it deleted segments are unlinked, not
// pooled; above it they are pooled again.
func TestFloorDrainsPools(t *testing.T) {
	e, l, all, _ := poolLog(t, 7)
	segs := *l.segs.Load()
	pooled := func() (int, int) { return l.pool.size(), globCount(t, l.dir, "*.log"+recycleSuffix) }
	if _, err := l.DeleteRecords(segs[2].base); err != nil {
		t.Fatal(err)
	}
	if n, files := pooled(); n != 2 || files != 2 {
		t.Fatalf("pool of %d, %d files, want 2", n, files)
	}
	e.SetMinFreeSpace(math.MaxInt64, 100) // the whole filesystem: below the floor
	if !e.FreeSpace().Below {
		t.Fatal("not below a floor of the whole filesystem")
	}
	if n, files := pooled(); n != 0 || files != 0 {
		t.Fatalf("below the floor: pool of %d, %d files, want none", n, files)
	}
	if _, err := l.DeleteRecords(segs[4].base); err != nil {
		t.Fatal(err)
	}
	if n, files := pooled(); n != 0 || files != 0 {
		t.Fatalf("deleted below the floor: pool of %d, %d files, want none", n, files)
	}
	// (emptied *.log.spare files hold no disk: spare.go)
	if files := globCount(t, l.dir, "*.log*") - globCount(t, l.dir, "*.log"+spareSuffix); files != len(segs)-4 {
		t.Fatalf("%d *.log* files, want the %d segments left", files, len(segs)-4)
	}
	e.SetMinFreeSpace(-1, -1)
	if _, err := l.DeleteRecords(segs[5].base); err != nil {
		t.Fatal(err)
	}
	if n, files := pooled(); n != 1 || files != 1 {
		t.Fatalf("floor off: pool of %d, %d files, want 1", n, files)
	}
	if err := checkBatches(l, all); err != nil {
		t.Fatal(err)
	}
}

// TestRecycledSegmentsFeedRolls: retention of a partition in ends mode
// keeps the deleted segments' files in the partition's pool (at most
// recyclePoolMax, as *.log.recycle), the next rolls make their segments
// over them (no zero-fill below the old size, shared flushes from the
// first round: no own fdatasync), a roll with the pool empty zero-fills a
// fresh file, every acknowledged batch reads back exactly, Close cuts the
// recycled file to the segment's size, and Open adopts the pool (bounded)
// after a clean close and after a crash.
func TestRecycledSegmentsFeedRolls(t *testing.T) {
	requireSharedFlush(t)
	dir := t.TempDir()
	e := openEngine(t, dir, recycleOpts)
	l := mustTopic(t, e, "pool", 1, recycleCfg()).Partition(0)
	if !l.recycles() {
		t.Fatal("a log in ends mode does not recycle")
	}
	var all []appended
	seed := 0
	appendUntilSegments(t, l, 5, &seed, &all)
	segs := *l.segs.Load()
	if fresh := segs[0].seg.ZeroFilled(); fresh < 512<<10 || fresh > 1<<20 {
		t.Fatalf("a fresh 1 MiB segment wrote %d bytes of zeros, want up to segment.bytes", fresh)
	}
	if n, err := l.deleteRetainedSegments(e.nowMs()); n != 4 || err != nil {
		t.Fatalf("retention deleted %d segments (%v), want the 4 sealed ones", n, err)
	}
	if got := l.pool.size(); got != 0 {
		t.Fatalf("%d pooled files while the deleted segments are still referenced", got)
	}
	e.releaseDue(math.MaxInt64)
	if got, files := l.pool.size(), globCount(t, l.dir, "*.log"+recycleSuffix); got != recyclePoolMax || files != recyclePoolMax {
		t.Fatalf("pool of %d, %d *.log.recycle files, want %d (the bound)", got, files, recyclePoolMax)
	}
	if n := globCount(t, l.dir, "*"+deletedSuffix); n != 0 {
		t.Fatalf("%d *.deleted files left", n)
	}
	if err := checkBatches(l, all); err != nil {
		t.Fatal(err)
	}

	// Two rolls take the two pooled files; their segments zero-fill at
	// most the few pages between the old file's size and segment.bytes,
	// and never sync themselves.
	own := e.ownSyncs.Load()
	appendUntilSegments(t, l, 3, &seed, &all)
	if n := e.recycledSegs.Load(); n != 2 {
		t.Fatalf("%d segments made over recycled files, want 2", n)
	}
	if n := l.pool.size(); n != 0 {
		t.Fatalf("pool of %d after two rolls", n)
	}
	segs = *l.segs.Load()
	if z := segs[1].seg.ZeroFilled(); z > 64<<10 {
		t.Fatalf("a recycled 1 MiB segment wrote %d bytes of zeros", z)
	}
	if n := e.ownSyncs.Load() - own; n != 0 {
		t.Fatalf("%d own fdatasyncs of recycled active segments (their rounds share the journal's flush)", n)
	}
	// The pool is empty: the next roll zero-fills a fresh file.
	appendUntilSegments(t, l, 4, &seed, &all)
	if n := e.recycledSegs.Load(); n != 2 {
		t.Fatalf("%d segments made over recycled files, want still 2", n)
	}
	if err := checkBatches(l, all); err != nil {
		t.Fatal(err)
	}

	// Again with a recycled active segment at the crash and at Close.
	if n, err := l.deleteRetainedSegments(e.nowMs()); n != 3 || err != nil {
		t.Fatalf("retention deleted %d segments (%v), want 3", n, err)
	}
	e.releaseDue(math.MaxInt64)
	appendUntilSegments(t, l, 2, &seed, &all)
	all = append(all, appendRound(t, l, &seed)...)
	if n := e.recycledSegs.Load(); n != 3 {
		t.Fatalf("%d segments made over recycled files, want 3", n)
	}
	active := (*l.segs.Load())[1]
	if size := fileSizeOf(t, active.logPath); size <= active.end.Load() {
		t.Fatalf("the recycled active segment's file is %d bytes, not past the segment's %d: no old bytes to test with", size, active.end.Load())
	}
	crash := t.TempDir()
	copyDir(t, dir, crash)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if size := fileSizeOf(t, active.logPath); size != active.end.Load() {
		t.Fatalf("after Close the recycled file is %d bytes, want the segment's %d", size, active.end.Load())
	}
	// Two more pooled files (left by hand): three is over the bound, Open
	// keeps two and removes the third.
	for _, name := range []string{"00000000000000000001", "00000000000000000002"} {
		extra := filepath.Join(l.dir, name+logSuffix+recycleSuffix)
		if err := os.WriteFile(extra, bytes.Repeat([]byte{0x55}, 300<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := globCount(t, l.dir, "*.log"+recycleSuffix); n != 3 {
		t.Fatalf("%d pooled files before Open, want 3", n)
	}
	for _, d := range []string{dir, crash} {
		e2 := openEngine(t, d, recycleOpts)
		l2 := e2.Topic("pool").Partition(0)
		if err := checkBatches(l2, all); err != nil {
			t.Errorf("%s: %v", d, err)
		}
		pdir := filepath.Join(d, filepath.Base(l.dir))
		want := 1 // the crash copy's
		if d == dir {
			want = recyclePoolMax
		}
		if got, files := l2.pool.size(), globCount(t, pdir, "*.log"+recycleSuffix); got != want || files != want {
			t.Errorf("%s: pool of %d after Open, %d *.log.recycle files, want %d", d, got, files, want)
		}
		if err := e2.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A deleted topic's pool goes with its directory.
	e3 := openEngine(t, dir, recycleOpts)
	defer e3.Close()
	if err := e3.DeleteTopic("pool"); err != nil {
		t.Fatal(err)
	}
	if m, err := filepath.Glob(filepath.Join(dir, "*", "*"+recycleSuffix)); err != nil || len(m) != 0 {
		t.Fatalf("pooled files of a deleted topic left: %v %v", m, err)
	}
	if _, err := os.Stat(l.dir); !os.IsNotExist(err) {
		t.Fatalf("the deleted partition's directory: %v", err)
	}
}

// TestRecycledCrashNeverServesStale: a crash of a partition whose active
// segment is a recycled file (old batches with valid CRCs past its end).
// Recovery keeps every acknowledged batch and serves no old batch and no
// batch the journal's end records do not vouch for: as the process left
// it, with a valid unacknowledged batch right at the durable end, with a
// write lost over old bytes before a later one that landed, and the same
// with no end record naming the segment (the recovery rule for a segment
// whose end records the journal no longer holds, simulated here by
// removing the journal).
func TestRecycledCrashNeverServesStale(t *testing.T) {
	requireSharedFlush(t)
	dir := t.TempDir()
	e := openEngine(t, dir, recycleOpts)
	l := mustTopic(t, e, "stale", 1, recycleCfg()).Partition(0)
	var all []appended
	seed := 0
	retainTwoOfThree(t, e, l, &seed, &all)
	for range 3 {
		all = append(all, appendRound(t, l, &seed)...)
	}
	if n := e.recycledSegs.Load(); n != 1 {
		t.Fatalf("%d segments made over recycled files, want 1", n)
	}
	l.mu.Lock()
	active := l.active
	l.mu.Unlock()
	durable, path := active.seg.Durable(), active.logPath
	if durable != active.end.Load() {
		t.Fatalf("durable %d, end %d", durable, active.end.Load())
	}
	h, _ := record.ParseHeader(all[len(all)-1].b)
	last := all[len(all)-1].base + int64(h.LastOffsetDelta)

	copies := map[string]string{}
	for _, name := range []string{"asleft", "unvouched", "lost", "unnamed"} {
		copies[name] = t.TempDir()
		copyDir(t, dir, copies[name])
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	rel := strings.TrimPrefix(path, dir)
	writeAt := func(root string, b []byte, pos int64) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(root, rel), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, pos); err != nil {
			t.Fatal(err)
		}
	}
	batchAt := func(offset int64) []byte {
		b := batchOf(t, 3, 500, 99, 99)
		binary.BigEndian.PutUint64(b, uint64(offset))
		return b
	}
	// A valid batch following the last acknowledged one, written but not
	// vouched for by an end record.
	writeAt(copies["unvouched"], batchAt(last+1), durable)
	// The round after the last acknowledged one: its first write lost (old
	// bytes, here garbage), a later one landed.
	for _, c := range []string{"lost", "unnamed"} {
		writeAt(copies[c], append(bytes.Repeat([]byte{0xa7}, 4096), batchAt(last+4)...), durable)
	}
	if err := os.RemoveAll(filepath.Join(copies["unnamed"], journalDirName)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"asleft", "unvouched", "lost", "unnamed"} {
		root := copies[name]
		e2 := openEngine(t, root, recycleOpts)
		cpath := filepath.Join(root, rel)
		end, ok := e2.jnl.replayed.ends[cpath]
		if named := name != "unnamed"; ok != named || (named && end != durable) {
			t.Errorf("%s: replay trusts %d (%v), want the durable end %d (%v)", name, end, ok, durable, named)
		}
		l2 := e2.Topic("stale").Partition(0)
		if err := checkBatches(l2, all); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if size := fileSizeOf(t, cpath); size != durable {
			t.Errorf("%s: the recycled segment's file is %d bytes after recovery, want %d", name, size, durable)
		}
		if err := e2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecyclingOnlyInEndsMode: outside ends mode (the journal with zero
// fill here) retention unlinks deleted files as before, nothing is pooled
// or recycled, and Open removes *.log.recycle files it finds.
func TestRecyclingOnlyInEndsMode(t *testing.T) {
	opts := func(o *Options) {
		o.IOBackend, o.JournalBytes, o.RetentionCheckInterval = IOBackendUring, JournalMinBytes, -1
	}
	dir := t.TempDir()
	e := openEngine(t, dir, opts)
	l := mustTopic(t, e, "nopool", 1, recycleCfg()).Partition(0)
	if l.recycles() {
		t.Fatal("a log outside ends mode recycles")
	}
	var all []appended
	seed := 0
	retainTwoOfThree(t, e, l, &seed, &all)
	if n, p, files := e.recycledSegs.Load(), l.pool.size(), globCount(t, l.dir, "*"+recycleSuffix); n != 0 || p != 0 || files != 0 {
		t.Fatalf("outside ends mode: %d recycled segments, pool of %d, %d *.recycle files", n, p, files)
	}
	if n := globCount(t, l.dir, "*"+deletedSuffix); n != 0 {
		t.Fatalf("%d *.deleted files left", n)
	}
	if err := checkBatches(l, all); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(l.dir, "00000000000000000000.log"+recycleSuffix)
	if err := os.WriteFile(stray, bytes.Repeat([]byte{0x55}, 300<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	e2 := openEngine(t, dir, opts)
	defer e2.Close()
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("a *.log.recycle file outside ends mode survived Open: %v", err)
	}
	if err := checkBatches(e2.Topic("nopool").Partition(0), all); err != nil {
		t.Fatal(err)
	}
}

// trustEndsSegment writes a segment file of base 1000 holding n batches
// of 4 records (offsets 1000 on) and returns its path, bytes and the
// batches' end positions.
func trustEndsSegment(t *testing.T, n int) (path string, data []byte, bounds []int64) {
	t.Helper()
	for i := range n {
		b := batchOf(t, 4, 300, int64(i), i)
		binary.BigEndian.PutUint64(b, uint64(1000+4*i)) // the segment's base is 1000
		data = append(data, b...)
		bounds = append(bounds, int64(len(data)))
	}
	path = filepath.Join(t.TempDir(), "00000000000000001000.log")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data, bounds
}

// TestTrustEndsRecordPastTrustedEnd: a newest-group end record starting
// past the trusted end (a journal checkpoint's device flush raised the
// segment's durable end between two rounds) is trusted when the bytes from
// the trusted end to its end are whole batches that follow, gap included,
// and not when the gap holds anything else (old bytes of a recycled file).
func TestTrustEndsRecordPastTrustedEnd(t *testing.T) {
	e := openEngine(t, t.TempDir(), endsOpts)
	defer e.Close()
	path, data, bounds := trustEndsSegment(t, 6)
	recs := []endRec{
		{from: 0, end: bounds[1], endOffset: 1008, flushed: true},
		{from: bounds[3], end: bounds[5], endOffset: 1024}, // the newest group's
	}
	if got, err := trustEnds(e, path, recs); err != nil || got != bounds[5] {
		t.Fatalf("trusted end %d (%v), want %d: the gap [%d, %d) holds the batches that follow", got, err, bounds[5], bounds[1], bounds[3])
	}
	// Old bytes in the gap: a batch of offsets below the base.
	binary.BigEndian.PutUint64(data[bounds[2]:], 7)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := trustEnds(e, path, recs); err != nil || got != bounds[1] {
		t.Fatalf("trusted end %d (%v), want %d: the gap holds an old batch", got, err, bounds[1])
	}
}

// TestTrustEndsUnknownFrom: a round recorded after a truncation that no
// sync followed carries from = -1 (the segment's durable end unknown);
// replay checks that round's bytes from the segment's start instead of
// failing the engine's Open on a read at a negative offset (seen in
// TestJournalEndsCrash, seed 149, once).
func TestTrustEndsUnknownFrom(t *testing.T) {
	e := openEngine(t, t.TempDir(), endsOpts)
	defer e.Close()
	path, data, bounds := trustEndsSegment(t, 3)
	if got, err := trustEnds(e, path, []endRec{{from: -1, end: bounds[2], endOffset: 1012}}); err != nil || got != bounds[2] {
		t.Fatalf("newest round from -1: trusted end %d (%v), want %d", got, err, bounds[2])
	}
	if got, err := trustEnds(e, path, []endRec{{from: -1, end: bounds[0], endOffset: 1004, flushed: true}, {from: -1, end: bounds[2], endOffset: 1012}}); err != nil || got != bounds[2] {
		t.Fatalf("a flushed round, then the newest, from -1: trusted end %d (%v), want %d", got, err, bounds[2])
	}
	// The newest round's bytes torn: nothing past the start is vouched for.
	data[bounds[0]+20] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := trustEnds(e, path, []endRec{{from: -1, end: bounds[2], endOffset: 1012}}); err != nil || got != 0 {
		t.Fatalf("torn newest round from -1: trusted end %d (%v), want 0", got, err)
	}
}

// retainTwoOfThree appends until l has three segments, lets retention
// delete the two older ones and release them (to the pool, in ends mode),
// and appends until l has two segments again.
func retainTwoOfThree(t *testing.T, e *Engine, l *Log, seed *int, all *[]appended) {
	t.Helper()
	appendUntilSegments(t, l, 3, seed, all)
	if n, err := l.deleteRetainedSegments(e.nowMs()); n != 2 || err != nil {
		t.Fatalf("retention deleted %d segments (%v), want 2", n, err)
	}
	e.releaseDue(math.MaxInt64)
	appendUntilSegments(t, l, 2, seed, all)
}
