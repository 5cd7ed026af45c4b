package engine

import (
	"errors"
	"os"
	"testing"
)

// TestCrashSnapshotBelowFirstSegmentNotLoaded: after DeleteRecords removed
// the segments a producer's batches were in, a crash that loses the newer
// producer snapshots (they are never synced) leaves one older than the
// log's first segment. It must not be loaded: the batches between it and
// the first segment are gone, so replaying from it left the producer at a
// stale sequence, and its next batch was refused as out of order (found
// by TestCrashKeepsTransactionState, seed 121: stale open transactions).
func TestCrashSnapshotBelowFirstSegmentNotLoaded(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	l := mustTopic(t, e, "snap", 1, nil).Partition(0)
	roll := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if err := l.roll(); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, l, idemBatch(t, 1, 0, 0, 1)) // offset 0, sequence 0
	roll()                                     // 1.snapshot: producer 1 at sequence 0
	mustAppend(t, l, idemBatch(t, 1, 0, 1, 2)) // offsets 1-2, sequences 1-2
	roll()                                     // 3.snapshot
	mustAppend(t, l, batchOf(t, 1, 10, 1, 0))  // offset 3, no producer
	durable(t, l)
	if _, err := l.DeleteRecords(3); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil { // 4.snapshot
		t.Fatal(err)
	}
	for _, off := range []int64{3, 4} { // lost in a crash
		if err := os.Remove(l.snapshotPath(off)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(l.snapshotPath(1)); err != nil {
		t.Fatalf("the old snapshot is gone already: %v", err)
	}

	e2 := openEngine(t, dir, nil)
	defer e2.Close()
	l2 := e2.Topic("snap").Partition(0)
	if got := (*l2.segs.Load())[0].base; got != 3 {
		t.Fatalf("first segment at %d, want 3", got)
	}
	if ps, ok := l2.Producer(1); ok {
		t.Errorf("producer 1, whose batches were deleted, known after the restart: %+v", ps)
	}
	if _, err := os.Stat(l2.snapshotPath(1)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the snapshot below the first segment is still there: %v", err)
	}
	info, err := l2.Append(idemBatch(t, 1, 0, 3, 1), 0)
	if err != nil || info.BaseOffset != 4 {
		t.Fatalf("producer 1's next batch: %+v, %v", info, err)
	}
}
