package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/vfs"
)

// journalOpts turns the journal on at its smallest size (four 4 MiB files),
// so a few MiB of appends go round the ring.
func journalOpts(o *Options) { o.JournalBytes = JournalMinBytes }

// appendJournaled appends n batches round-robin over tp's partitions,
// waits until each is durable (acknowledged, for acks=all), and returns the
// batches per partition as the log holds them (offsets assigned).
func appendJournaled(t *testing.T, tp *Topic, parts, n, recs, valueLen, seed int) [][][]byte {
	t.Helper()
	out := make([][][]byte, parts)
	last := make([]int64, parts)
	for i := 0; i < n; i++ {
		p := i % parts
		b := batchOf(t, recs, valueLen, 1_700_000_000_000, seed+i)
		info := mustAppend(t, tp.Partition(int32(p)), b)
		out[p] = append(out[p], b)
		last[p] = info.LastOffset
	}
	for p := 0; p < parts; p++ {
		if err := waitDurable(t, tp.Partition(int32(p)), last[p]); err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
	}
	return out
}

// checkLog asserts partition p of topic name in e holds exactly want.
func checkLog(t *testing.T, e *Engine, name string, p int, want [][]byte) {
	t.Helper()
	tp := e.Topic(name)
	if tp == nil {
		t.Fatalf("topic %s missing after reopen", name)
	}
	got, _ := readAll(t, tp.Partition(int32(p)), 0, 1<<20)
	if len(got) != len(want) {
		t.Fatalf("partition %d: %d batches after reopen, want %d (HW %d)", p, len(got), len(want), tp.Partition(int32(p)).HighWatermark())
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("partition %d: batch %d differs after reopen", p, i)
		}
	}
}

// onDisk counts the batches a plain walk finds in partition p's first
// segment file under dir.
func onDisk(t *testing.T, dir, name string, p int) int {
	t.Helper()
	return len(naiveWalk(t, segmentFileName(filepath.Join(dir, partitionDirName(name, int32(p))), 0, logSuffix)))
}

// TestJournalReplaysAcknowledgedAppends: appends acknowledged through the
// journal whose bytes never reached their segment files (a segment chunk is
// written only when full) are back after a crash (a copy of the directory
// as the process left it), and a clean Close leaves nothing to replay.
func TestJournalReplaysAcknowledgedAppends(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, journalOpts)
	if e.jnl == nil {
		t.Fatal("journal not on")
	}
	const parts = 6
	tp := mustTopic(t, e, "j", parts, nil)
	want := appendJournaled(t, tp, parts, 120, 4, 200, 1)

	crash := t.TempDir()
	copyDir(t, dir, crash)
	missing := 0
	for p := 0; p < parts; p++ {
		missing += len(want[p]) - onDisk(t, crash, "j", p)
	}
	if missing == 0 {
		t.Fatal("every acknowledged batch was already in its segment file: the test shows nothing about the journal")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := openEngine(t, crash, journalOpts)
	if e2.jnl.replayed.written == 0 {
		t.Fatalf("replay wrote nothing (%+v) with %d batches missing from the segments", e2.jnl.replayed, missing)
	}
	for p := 0; p < parts; p++ {
		checkLog(t, e2, "j", p, want[p])
	}
	// More appends after the replay, then a clean close: the next open
	// replays nothing and still has everything.
	more := appendJournaled(t, e2.Topic("j"), parts, 30, 2, 100, 500)
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	e3 := openEngine(t, crash, journalOpts)
	defer e3.Close()
	if e3.jnl.replayed.records != 0 {
		t.Fatalf("after a clean close the journal replayed %+v", e3.jnl.replayed)
	}
	for p := 0; p < parts; p++ {
		checkLog(t, e3, "j", p, append(want[p], more[p]...))
	}
}

// TestJournalWrapsAndCheckpoints pushes several times the journal's size
// through it (every file overwritten more than once, so checkpoints must
// have moved the start past the records they held), then crashes: every
// acknowledged batch is back.
func TestJournalWrapsAndCheckpoints(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, journalOpts)
	defer e.Close()
	const parts = 4
	tp := mustTopic(t, e, "w", parts, nil)
	var want [][][]byte
	for round := 0; round < 6; round++ { // 6 x 12 MiB through a 16 MiB journal
		got := appendJournaled(t, tp, parts, 96, 32, 4000, round*1000)
		if want == nil {
			want = got
		} else {
			for p := range want {
				want[p] = append(want[p], got[p]...)
			}
		}
	}
	e.jnl.mu.Lock()
	ckpts, start := e.jnl.ckpts, e.jnl.startSeq
	e.jnl.mu.Unlock()
	if ckpts == 0 || start <= 1 {
		t.Fatalf("no checkpoint moved the start (%d checkpoints, start %d)", ckpts, start)
	}
	crash := t.TempDir()
	copyDir(t, dir, crash)
	e2 := openEngine(t, crash, journalOpts)
	defer e2.Close()
	for p := 0; p < parts; p++ {
		checkLog(t, e2, "w", p, want[p])
	}
}

// TestJournalCheckpointEverySlice: a checkpoint writes the partial chunks
// of more segments than one slice (ckptSliceSegments) holds, a slice at a
// time; once it returns, every partition's segment file holds all of its
// acknowledged batches without a replay.
func TestJournalCheckpointEverySlice(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, journalOpts)
	defer e.Close()
	parts := 2*ckptSliceSegments + 3
	tp := mustTopic(t, e, "s", int32(parts), nil)
	want := appendJournaled(t, tp, parts, 3*parts, 2, 300, 7)
	for p := 0; p < parts; p++ {
		if n := onDisk(t, dir, "s", p); n == len(want[p]) {
			t.Fatalf("partition %d: its batches were in its segment file before the checkpoint: the test shows nothing", p)
		}
	}
	if err := e.jnl.checkpoint(); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < parts; p++ {
		if n := onDisk(t, dir, "s", p); n != len(want[p]) {
			t.Errorf("partition %d: %d of %d batches in its segment file after the checkpoint", p, n, len(want[p]))
		}
	}
	// In a hurry (the writer past a quarter of its file) the rest goes at once:
	// the same outcome.
	more := appendJournaled(t, tp, parts, 2*parts, 2, 300, 900)
	e.jnl.ckptHurry.Store(true)
	if err := e.jnl.checkpoint(); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < parts; p++ {
		if n := onDisk(t, dir, "s", p); n != len(want[p])+len(more[p]) {
			t.Errorf("partition %d: %d of %d batches in its segment file after the hurried checkpoint", p, n, len(want[p])+len(more[p]))
		}
	}
}

// TestJournalBarrierKeepsTruncatedBytesOut: a follower truncation cuts
// journaled bytes and new ones take their place; after a crash the replay
// must not bring the cut bytes back over the new ones.
func TestJournalBarrierKeepsTruncatedBytesOut(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, journalOpts)
	defer e.Close()
	tp := mustTopic(t, e, "b", 1, nil)
	first := appendJournaled(t, tp, 1, 10, 3, 150, 100)[0]
	l := tp.Partition(0)
	// Cut after the fourth batch (3 records each).
	if end, err := l.TruncateTo(12); err != nil || end != 12 {
		t.Fatalf("TruncateTo(12) = %d, %v", end, err)
	}
	// Two new batches the size of the old ones: without the barrier, the
	// replay would put old batches 6..9 back after them, at the very
	// offsets (18..29) that follow, and recovery would take them.
	second := appendJournaled(t, tp, 1, 2, 3, 150, 200)[0] // same key lengths: same batch sizes
	crash := t.TempDir()
	copyDir(t, dir, crash)
	e2 := openEngine(t, crash, journalOpts)
	defer e2.Close()
	checkLog(t, e2, "b", 0, append(append([][]byte(nil), first[:4]...), second...))
}

// TestJournalSkipsDeletedTopic: records of a topic deleted and created
// again under the same name (a new topic id) are not replayed into the new
// topic's files.
func TestJournalSkipsDeletedTopic(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, journalOpts)
	defer e.Close()
	appendJournaled(t, mustTopic(t, e, "d", 2, nil), 2, 20, 3, 300, 1)
	if err := e.DeleteTopic("d"); err != nil {
		t.Fatal(err)
	}
	want := appendJournaled(t, mustTopic(t, e, "d", 2, nil), 2, 4, 2, 50, 77)
	crash := t.TempDir()
	copyDir(t, dir, crash)
	e2 := openEngine(t, crash, journalOpts)
	defer e2.Close()
	if e2.jnl.replayed.skipped == 0 {
		t.Fatalf("replay skipped nothing: %+v", e2.jnl.replayed)
	}
	for p := 0; p < 2; p++ {
		checkLog(t, e2, "d", p, want[p])
	}
}

// TestJournalTooSmall: a journal below the minimum is a clear error.
func TestJournalTooSmall(t *testing.T) {
	_, err := Open(Options{Dir: t.TempDir(), Logger: quietLogger(), JournalBytes: JournalMinBytes - 1})
	if err == nil {
		t.Fatal("Open accepted a journal below the minimum")
	}
	if want := fmt.Sprint(JournalMinBytes); !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Fatalf("error %q does not name the minimum %s", err, want)
	}
}

// TestJournalReplaysFollowerAppends: a follower's appends go through the
// journal too (its durable end, reported to the leader, comes from the
// journal's groups), and a crash gives back every byte it reported.
func TestJournalReplaysFollowerAppends(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, journalOpts)
	defer e.Close()
	_, data := sourceLog(t, e, "src")
	// Default segment size: the follower's bytes stay in one segment whose
	// chunk is not full, so only the journal holds them on disk.
	dst := mustTopic(t, e, "dst", 1, nil).Partition(0)
	h := newRecHandler()
	dst.SetFollower(h)
	copyAsFollower(t, dst, data, 700)
	h.waitReported(t, dst.LogEndOffset())
	end := dst.LogEndOffset()
	e.jnl.mu.Lock()
	_, staged := e.jnl.dirty[dst]
	e.jnl.mu.Unlock()
	if !staged && e.jnl.ckpts == 0 {
		t.Fatal("the follower's appends did not go through the journal")
	}

	crash := t.TempDir()
	copyDir(t, dir, crash)
	if n := onDisk(t, crash, "dst", 0); n > 0 && naiveWalk(t, segmentFileName(filepath.Join(crash, partitionDirName("dst", 0)), 0, logSuffix))[n-1].last+1 >= end {
		t.Fatal("the follower's segment file already held every byte: the test shows nothing about the journal")
	}
	e2 := openEngine(t, crash, journalOpts)
	defer e2.Close()
	l2 := e2.Topic("dst").Partition(0)
	if l2.LogEndOffset() != end {
		t.Fatalf("follower log end %d after the crash, reported durable %d", l2.LogEndOffset(), end)
	}
	if got := allBytes(t, l2, 0); !bytes.Equal(got, data) {
		t.Fatalf("follower holds %d bytes after the crash, the leader %d", len(got), len(data))
	}
}

// TestJournalResizedAfterCrash: a restart with another log.io.journal.bytes
// replays the files as they are before it resizes them.
func TestJournalResizedAfterCrash(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, journalOpts)
	defer e.Close()
	want := appendJournaled(t, mustTopic(t, e, "r", 2, nil), 2, 40, 3, 200, 1)
	crash := t.TempDir()
	copyDir(t, dir, crash)
	e2 := openEngine(t, crash, func(o *Options) { o.JournalBytes = 2 * JournalMinBytes })
	defer e2.Close()
	if e2.jnl.replayed.written == 0 {
		t.Fatalf("replay wrote nothing: %+v", e2.jnl.replayed)
	}
	if e2.jnl.fileBytes != 2*JournalMinBytes/journalFiles {
		t.Fatalf("journal files of %d bytes, want %d", e2.jnl.fileBytes, 2*JournalMinBytes/journalFiles)
	}
	for p := 0; p < 2; p++ {
		checkLog(t, e2, "r", p, want[p])
	}
}

// TestJournalAnyByteCount: log.io.journal.bytes that is no multiple of
// the files' alignment still opens (a stage is half a file and must stay
// block-aligned: 30,000,000 bytes once made a 3,749,888-byte stage and
// Open failed), takes appends and stays within what was asked.
func TestJournalAnyByteCount(t *testing.T) {
	for _, n := range []int64{30_000_000, JournalMinBytes + 12_345} {
		e := openEngine(t, t.TempDir(), func(o *Options) { o.JournalBytes = n })
		if e.jnl == nil || e.jnl.fileBytes*journalFiles > n || e.jnl.fileBytes%(2*journalAlign) != 0 {
			t.Fatalf("journal.bytes %d: %+v", n, e.jnl)
		}
		l := mustTopic(t, e, "a", 1, nil).Partition(0)
		info := mustAppend(t, l, batchOf(t, 3, 100, 1, 0))
		if err := waitDurable(t, l, info.LastOffset); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// testGroup builds a group as the writer does: a group header, then one
// write record per payload and a barrier, with the header filled and the
// checksum computed by groupChecksum.
func testGroup(payloads ...[]byte) ([]byte, uint32) {
	buf := make([]byte, journalGroupHdr)
	rec := func(typ byte, payload []byte) {
		n := recordBytes("t", len(payload))
		r := make([]byte, n)
		binary.BigEndian.PutUint32(r, uint32(n))
		r[4] = typ
		binary.BigEndian.PutUint32(r[24:], 3)
		binary.BigEndian.PutUint16(r[28:], 1)
		binary.BigEndian.PutUint64(r[40:], 4096)
		r[journalRecHdr] = 't'
		copy(r[journalRecHdr+1:], payload)
		buf = append(buf, r...)
	}
	for _, p := range payloads {
		rec(journalRecWrite, p)
	}
	rec(journalRecBarrier, nil)
	count := uint32(len(payloads) + 1)
	binary.BigEndian.PutUint32(buf[0:], journalMagic)
	binary.BigEndian.PutUint32(buf[8:], uint32(len(buf)))
	binary.BigEndian.PutUint32(buf[12:], count)
	binary.BigEndian.PutUint64(buf[16:], 7)
	sum, _ := groupChecksum(buf, count, false)
	binary.BigEndian.PutUint32(buf[4:], sum)
	return buf, count
}

// TestJournalChecksumCoversEveryByte: the group checksum leaves batch
// bodies to the batches' own CRCs, so every single byte changed from byte
// 8 on (headers, names, batch prefixes, batch bodies, a split payload)
// must still fail replay's check.
func TestJournalChecksumCoversEveryByte(t *testing.T) {
	two := append(batchOf(t, 3, 40, 1_700_000_000_000, 1), batchOf(t, 2, 25, 1_700_000_000_000, 2)...)
	split := batchOf(t, 2, 30, 1_700_000_000_000, 3)[:70] // not whole batches: covered in full
	buf, count := testGroup(two, split)
	want := binary.BigEndian.Uint32(buf[4:])
	if sum, ok := groupChecksum(buf, count, true); !ok || sum != want {
		t.Fatalf("intact group: ok %v, sum %08x, want %08x", ok, sum, want)
	}
	splitFlag := journalGroupHdr + recordBytes("t", len(two)) + 5
	if buf[splitFlag] != journalFlagFull || buf[journalGroupHdr+5] != 0 {
		t.Fatalf("flags: whole batches %d, split payload %d; want 0 and %d", buf[journalGroupHdr+5], buf[splitFlag], journalFlagFull)
	}
	for i := 8; i < len(buf); i++ {
		if i >= 4 && i < 8 {
			continue
		}
		for _, x := range []byte{0x01, 0x80} {
			buf[i] ^= x
			if sum, ok := groupChecksum(buf, count, true); ok && sum == want {
				t.Fatalf("byte %d of %d flipped (^%#x) passes the check", i, len(buf), x)
			}
			buf[i] ^= x
		}
	}
}

// TestJournalReadsFirstFormat: a group written in the first format (magic
// "SJNL", checksum over every byte) is still found by the replay scan.
func TestJournalReadsFirstFormat(t *testing.T) {
	buf, count := testGroup(batchOf(t, 2, 20, 1_700_000_000_000, 1))
	binary.BigEndian.PutUint32(buf[0:], journalMagicV1)
	binary.BigEndian.PutUint32(buf[4:], crc32.Checksum(buf[8:], journalCRC))
	fs := vfs.NewMemFS()
	f, err := fs.OpenFile("/j", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	padded := make([]byte, 2*journalAlign)
	copy(padded, buf)
	if _, err := f.WriteAt(padded, 0); err != nil {
		t.Fatal(err)
	}
	gs, err := scanJournalFile(f, 0, int64(len(padded)))
	if err != nil || len(gs) != 1 || gs[0].count != count || gs[0].firstSeq != 7 {
		t.Fatalf("scan: %+v, %v; want one group of %d records from 7", gs, err, count)
	}
	buf[len(buf)-1] ^= 1 // and its checksum still guards it
	copy(padded, buf)
	if _, err := f.WriteAt(padded, 0); err != nil {
		t.Fatal(err)
	}
	if gs, _ := scanJournalFile(f, 0, int64(len(padded))); len(gs) != 0 {
		t.Fatalf("a changed byte in a first-format group was accepted: %+v", gs)
	}
}

// TestJournalHoldOneGroup: appends made while the journal is held
// (Engine.HoldJournal) go out as one group when it is released; a barrier
// and a starving chunk pool (unhold) do not wait for the release.
func TestJournalHoldOneGroup(t *testing.T) {
	e := openEngine(t, t.TempDir(), journalOpts)
	defer e.Close()
	tp := mustTopic(t, e, "h", 3, nil)
	appendJournaled(t, tp, 3, 3, 2, 100, 1)
	groups := func() uint64 { st, _ := e.JournalStats(); return st.Groups }

	g0 := groups()
	e.HoldJournal()
	var last [3]int64
	for p := range 3 {
		last[p] = mustAppend(t, tp.Partition(int32(p)), batchOf(t, 2, 100, 1_700_000_000_000, 10+p)).LastOffset
	}
	time.Sleep(50 * time.Millisecond) // a writer that ignores the hold writes within microseconds
	if g := groups(); g != g0 {
		t.Fatalf("%d groups written while held", g-g0)
	}
	e.ReleaseJournal()
	for p := range 3 {
		if err := waitDurable(t, tp.Partition(int32(p)), last[p]); err != nil {
			t.Fatal(err)
		}
	}
	if g := groups(); g != g0+1 {
		t.Fatalf("%d groups for three held appends, want 1", g-g0)
	}

	// A chunk pool running dry lets the writer go while held.
	e.HoldJournal()
	off := mustAppend(t, tp.Partition(0), batchOf(t, 2, 100, 1_700_000_000_000, 20)).LastOffset
	e.jnl.unhold()
	if err := waitDurable(t, tp.Partition(0), off); err != nil {
		t.Fatal(err)
	}
	// A barrier (TruncateTo) while held: it waits for its own group only.
	mustAppend(t, tp.Partition(1), batchOf(t, 2, 100, 1_700_000_000_000, 21))
	done := make(chan error, 1)
	go func() {
		_, err := tp.Partition(2).TruncateTo(2)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a hang detector, not a performance claim
		t.Fatal("TruncateTo waited for the journal's hold")
	}
	e.ReleaseJournal()
	if st, _ := e.JournalStats(); st.Groups < g0+3 {
		t.Fatalf("groups %d after unhold and barrier, want at least %d", st.Groups, g0+3)
	}
}

// TestJournalWritesAhead: while the journal is held, a stage past
// journalAheadMin is written at once without its flush, and its appends
// stay unacknowledged until the group taken at the release is flushed:
// one fdatasync for all of them.
func TestJournalWritesAhead(t *testing.T) {
	defer func(v int) { journalAheadMin = v }(journalAheadMin)
	journalAheadMin = 16 << 10
	e := openEngine(t, t.TempDir(), journalOpts)
	defer e.Close()
	tp := mustTopic(t, e, "a", 4, nil)
	appendJournaled(t, tp, 4, 4, 2, 100, 1)
	stats := func() JournalStats { st, _ := e.JournalStats(); return st }
	st0 := stats()

	e.HoldJournal()
	var acked atomic.Int32
	var last [4]int64
	for i := range 16 { // 16 appends of ~4 KiB: the stage passes 16 KiB
		p := i % 4
		info := mustAppend(t, tp.Partition(int32(p)), batchOf(t, 4, 1000, 1_700_000_000_000, 100+i))
		last[p] = info.LastOffset
		tp.Partition(int32(p)).WhenDurable(info.LastOffset, func(error) { acked.Add(1) })
	}
	deadline := time.Now().Add(30 * time.Second) // a hang detector, not a timing claim
	for stats().Groups == st0.Groups {
		if time.Now().After(deadline) {
			e.ReleaseJournal()
			t.Fatal("no group written ahead while held")
		}
		time.Sleep(time.Millisecond)
	}
	st1 := stats()
	if st1.Flushes != st0.Flushes {
		t.Fatalf("%d flushes while held", st1.Flushes-st0.Flushes)
	}
	if n := acked.Load(); n != 0 {
		t.Fatalf("%d appends acknowledged before the flush", n)
	}
	e.ReleaseJournal()
	for p := range 4 {
		if err := waitDurable(t, tp.Partition(int32(p)), last[p]); err != nil {
			t.Fatal(err)
		}
	}
	// The writer may have written every append ahead (then the release
	// found the stage empty and only flushed) or left some to the group
	// taken at the release: one flush either way.
	st2 := stats()
	if st2.Flushes != st0.Flushes+1 || st2.Ahead < st0.Ahead+1 {
		t.Fatalf("after the release: %d groups (%d written ahead) and %d flushes, want at least one written ahead and one flush",
			st2.Groups-st0.Groups, st2.Ahead-st0.Ahead, st2.Flushes-st0.Flushes)
	}
}

// TestJournalRollLeavesActiveToJournal: a roll's flush job syncs the
// segment it sealed but not the new active segment,
// whose bytes are all journaled: their groups made them durable and a
// checkpoint writes them (under keyed traffic every roll of a burst paid a
// tail write and a device flush for it beside the journal's). After a
// crash every acknowledged batch is back, and Close still syncs the
// active segment.
func TestJournalRollLeavesActiveToJournal(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	synced := map[string]int{}
	e := openEngine(t, dir, func(o *Options) {
		journalOpts(o)
		o.syncHook = func(path string) error {
			mu.Lock()
			synced[filepath.Base(path)]++
			mu.Unlock()
			return nil
		}
	})
	closed := false
	defer func() {
		if !closed {
			e.Close()
		}
	}()
	tp := mustTopic(t, e, "r", 1, map[string]string{"segment.bytes": "65536"})
	l := tp.Partition(0)
	ckpts := e.jnl.stats.checkpoints.Load()
	want := appendJournaled(t, tp, 1, 40, 4, 1000, 1) // ~160 KiB: two rolls or more
	segs := *l.segs.Load()
	if len(segs) < 3 {
		t.Fatalf("%d segments: the appends did not roll twice", len(segs))
	}
	name := func(s *logSegment) string { return filepath.Base(segmentFileName(l.dir, s.base, logSuffix)) }
	count := func(n string) int {
		mu.Lock()
		defer mu.Unlock()
		return synced[n]
	}
	// A roll's flush job runs after the roll: wait until the last two
	// sealed segments are synced and the log's flush is over, then look
	// at the active one (waitFor: a deadlock guard, not a timing
	// assertion).
	for _, s := range segs[len(segs)-3 : len(segs)-1] {
		waitFor(t, func() bool { return count(name(s)) > 0 })
	}
	waitFor(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.flushState == flushIdle || l.flushState == flushDeferred
	})
	if n := e.jnl.stats.checkpoints.Load(); n != ckpts {
		t.Fatalf("%d checkpoints ran: a sync of the active segment would not be the roll's", n-ckpts)
	}
	active := segs[len(segs)-1]
	if n := count(name(active)); n != 0 {
		t.Fatalf("the active segment %s was synced %d times before any checkpoint: a roll's job synced journaled bytes", name(active), n)
	}

	crash := t.TempDir()
	copyDir(t, dir, crash)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if n := count(name(active)); n == 0 {
		t.Fatalf("Close did not sync the active segment %s", name(active))
	}
	e2 := openEngine(t, crash, journalOpts)
	defer e2.Close()
	checkLog(t, e2, "r", 0, want[0])
}

// dirSyncCounter is a file system counting SyncDir calls per directory.
type dirSyncCounter struct {
	vfs.FS
	mu sync.Mutex
	n  map[string]int
}

func (c *dirSyncCounter) SyncDir(name string) error {
	c.mu.Lock()
	c.n[filepath.Clean(name)]++
	c.mu.Unlock()
	return c.FS.SyncDir(name)
}

func (c *dirSyncCounter) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[filepath.Clean(name)]
}

// A roll fsyncs its partition's directory once, when the new segment's
// data file is made (after its index files): neither the roll itself nor
// its flush job syncs it again (each did before, three directory fsyncs
// per roll), and a crash copy taken after the rolls replays every
// acknowledged batch from the new segments.
func TestRollSyncsDirectoryOnce(t *testing.T) {
	for _, journal := range []bool{true, false} {
		t.Run(fmt.Sprintf("journal=%v", journal), func(t *testing.T) {
			dir := t.TempDir()
			mfs := newDataFS(t, dir)
			c := &dirSyncCounter{FS: mfs, n: map[string]int{}}
			e := openEngine(t, dir, func(o *Options) {
				o.fs = c
				if journal {
					o.JournalBytes, o.journalFS = journalMinBytes, o.fs
				}
			})
			defer e.Close()
			tp := mustTopic(t, e, "r", 1, map[string]string{"segment.bytes": "65536", "preallocate": "false"})
			l := tp.Partition(0)
			// The first append starts epoch 0, whose file the next
			// recovery-point checkpoint writes (a directory sync of its
			// own): write it now, and count from the second append on.
			want := appendJournaled(t, tp, 1, 1, 4, 1000, 1)[0]
			if err := e.writeRecoveryCheckpoint(); err != nil {
				t.Fatal(err)
			}
			before, segs0 := c.count(l.dir), len(*l.segs.Load())
			// ~160 KiB more: two rolls or more.
			want = append(want, appendJournaled(t, tp, 1, 40, 4, 1000, 2)[0]...)
			waitFor(t, func() bool { // the rolls' flush jobs are over
				l.mu.Lock()
				defer l.mu.Unlock()
				return (l.flushState == flushIdle || l.flushState == flushDeferred) && len(l.pending) == 0
			})
			rolls := len(*l.segs.Load()) - segs0
			if rolls < 2 {
				t.Fatalf("%d rolls: the appends did not roll twice", rolls)
			}
			if n := c.count(l.dir) - before; n != rolls {
				t.Fatalf("%d rolls synced the partition directory %d times, want one each", rolls, n)
			}
			after := mfs.Crash(vfs.CrashOptions{})
			e2 := openEngine(t, dir, func(o *Options) {
				o.fs = after
				if journal {
					o.JournalBytes, o.journalFS = journalMinBytes, o.fs
				}
			})
			defer e2.Close()
			got := readAllBatches(t, e2.Topic("r").Partition(0), 0)
			if len(got) != len(want) {
				t.Fatalf("%d batches after the crash, %d acknowledged", len(got), len(want))
			}
			for _, b := range want {
				if base := int64(binary.BigEndian.Uint64(b)); !bytes.Equal(got[base], b) {
					t.Fatalf("the batch at %d differs after the crash", base)
				}
			}
		})
	}
}
