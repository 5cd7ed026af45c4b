package engine

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/vfs"
)

// TestCrashRecoveryPointCoversOnlySyncedIndexes: a flush makes the active
// segment's bytes durable, the log rolls (the sealed segment's index files
// are written, to be synced by the next flush), and a recovery-point
// checkpoint is written before that flush: the power fails with the new
// segment's directory entry on disk. Recovery trusts the indexes of the
// segments below the recovery point, so the checkpoint must stop at the
// sealed segment until its indexes are synced. It did not: the restart
// trusted an index the crash had emptied, the segment's largest timestamp
// was lost and a timestamp lookup found none of its records (found by
// TestCrashKeepsTransactionState, seed 219).
func TestCrashRecoveryPointCoversOnlySyncedIndexes(t *testing.T) {
	dir := "/data"
	mfs := newDataFS(t, dir)
	open := func(fsys vfs.FS) *Engine {
		return openEngine(t, dir, func(o *Options) { o.fs, o.Now = fsys, newFakeClock(1_000_000).Now })
	}
	e := open(mfs)
	l := mustTopic(t, e, "rp", 1, map[string]string{"index.interval.bytes": "1"}).Partition(0)
	const n = 5
	for i := range n {
		mustAppend(t, l, batchOf(t, 1, 10, 1000+int64(i), i))
	}
	durable(t, l)

	l.mu.Lock() // no flush runs from here to the crash
	if err := l.roll(); err != nil {
		t.Fatal(err)
	}
	if err := e.writeRecoveryCheckpoint(); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, partitionDirName("rp", 0))
	if err := mfs.SyncDir(pdir); err != nil { // the new segment's entry reached the disk
		t.Fatal(err)
	}
	after := mfs.Crash(vfs.CrashOptions{})
	l.mu.Unlock()
	_ = e.Close()

	e2 := open(after)
	defer e2.Close()
	l2 := e2.Topic("rp").Partition(0)
	if end := l2.LogEndOffset(); end != n {
		t.Fatalf("log end %d after the crash, want %d", end, n)
	}
	for i := range int64(n) {
		if off, _, ok := l2.OffsetForTimestamp(1000 + i); !ok || off != i {
			t.Errorf("OffsetForTimestamp(%d) = (%d, %v), want offset %d", 1000+i, off, ok, i)
		}
	}
	if off, ts := l2.MaxTimestamp(); off != n-1 || ts != 1000+n-1 {
		t.Errorf("MaxTimestamp = (%d, %d), want (%d, %d)", off, ts, n-1, 1000+n-1)
	}
}

// TestCrashLostTimeIndexTailWalksTheSegment: recovery resumes its walk of
// a segment at the last offset index entry below the recovery point and
// took the segment's largest timestamp from the time index. A crash that
// kept the offset index but lost the time index's entries (the active
// segment's indexes are never synced; a sealed one's two files are
// written apart) left only the walked batches' timestamps: with a last
// batch stamped lower than earlier ones (a transaction marker takes the
// broker's clock), timestamp lookups skipped the segment's records and
// MaxTimestamp named the wrong one (found by
// TestCrashKeepsTransactionState, seed 1159 with STRATA_CRASH_SEEDS).
func TestCrashLostTimeIndexTailWalksTheSegment(t *testing.T) {
	dir := "/data"
	mfs := newDataFS(t, dir)
	open := func() *Engine {
		return openEngine(t, dir, func(o *Options) { o.fs, o.Now = mfs, newFakeClock(1_000_000).Now })
	}
	e := open()
	l := mustTopic(t, e, "ts", 1, map[string]string{"index.interval.bytes": "1"}).Partition(0)
	const n = 5
	for i := range n {
		mustAppend(t, l, batchOf(t, 1, 10, 1000+int64(i), i))
	}
	mustAppend(t, l, batchOf(t, 1, 10, 10, n)) // stamped below the others
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// As a crash can leave it: no clean shutdown, the offset index whole,
	// the time index without its entries.
	if err := mfs.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, partitionDirName("ts", 0))
	if err := mfs.Truncate(segmentFileName(pdir, 0, timeIndexSuffix), 0); err != nil {
		t.Fatal(err)
	}

	e2 := open()
	defer e2.Close()
	l2 := e2.Topic("ts").Partition(0)
	for i := range int64(n) {
		if off, _, ok := l2.OffsetForTimestamp(1000 + i); !ok || off != i {
			t.Errorf("OffsetForTimestamp(%d) = (%d, %v), want offset %d", 1000+i, off, ok, i)
		}
	}
	if off, ts := l2.MaxTimestamp(); off != n-1 || ts != 1000+n-1 {
		t.Errorf("MaxTimestamp = (%d, %d), want (%d, %d)", off, ts, n-1, 1000+n-1)
	}
}

// TestRecoveryPointStopsAtUnsyncedSealedSegment: with the journal, an
// append is durable once its group commit is, so the durable offset
// passes the end of a segment sealed by a roll while the flush that
// syncs its index files is still to come; the recovery point stays at
// that segment's end until the flush is done.
func TestRecoveryPointStopsAtUnsyncedSealedSegment(t *testing.T) {
	defer func(v int64) { journalMinBytes = v }(journalMinBytes)
	journalMinBytes = journalFiles * (16 << 10)
	dir := "/data"
	mfs := newDataFS(t, dir)
	var blocking atomic.Bool
	release := make(chan struct{})
	e := openEngine(t, dir, func(o *Options) {
		o.fs, o.JournalBytes, o.journalFS = mfs, journalMinBytes, mfs
		o.syncHook = func(path string) error {
			if blocking.Load() && (strings.HasSuffix(path, indexSuffix) || strings.HasSuffix(path, timeIndexSuffix)) {
				<-release
			}
			return nil
		}
	})
	defer e.Close()
	l := mustTopic(t, e, "rp", 1, map[string]string{"index.interval.bytes": "1"}).Partition(0)
	for i := range 3 {
		mustAppend(t, l, batchOf(t, 1, 10, 1000+int64(i), i))
	}
	durable(t, l)
	blocking.Store(true)
	l.mu.Lock()
	err := l.roll() // segment 0 sealed at 3; its index syncs wait for release
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		mustAppend(t, l, batchOf(t, 1, 10, 1003+int64(i), 3+i))
	}
	durable(t, l)
	if d, rp := l.durable.Load(), l.recoveryPoint(); d != 6 || rp != 3 {
		t.Errorf("durable offset %d, recovery point %d; want 6 and 3 (segment 0's indexes not synced)", d, rp)
	}
	blocking.Store(false)
	close(release)
	durable(t, l)
	for i := 0; l.recoveryPoint() != 6; i++ { // the flush syncing segment 0's indexes finishes
		if i > 30000 {
			t.Fatalf("recovery point stuck at %d", l.recoveryPoint())
		}
		e.kickFlusher()
		time.Sleep(time.Millisecond)
	}
}
