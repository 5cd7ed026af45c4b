package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// rollAheadAppends appends 1 KiB batches to a fresh log with segBytes
// segments until its active segment has less than an eighth of them (the
// margin, under RollAhead) free, and returns the log and the offset the
// next append would get.
func rollAheadAppends(t *testing.T, rollAhead, segBytes int64) (*Log, int64) {
	t.Helper()
	e := openEngine(t, t.TempDir(), func(o *Options) { o.RollAhead = rollAhead })
	t.Cleanup(func() { e.Close() })
	cfg := smallConfig()
	cfg["segment.bytes"] = fmt.Sprint(segBytes)
	cfg["segment.index.bytes"] = "65536"
	l := mustTopic(t, e, "ahead", 1, cfg).Partition(0)
	var next int64
	// Stop at the first roll too: the roller may roll right after the
	// append that crossed the margin, before this loop looks again. Both
	// are read under the log's lock, which the roll holds: read apart,
	// the segment count before a roll and the new segment's end after it
	// let the loop append once more (two CI failures).
	for i := 0; !rolledOrFull(l, segBytes-segBytes/8); i++ {
		next = mustAppend(t, l, batchOf(t, 1, 1024, 1000, i)).LastOffset + 1
	}
	return l, next
}

// rolledOrFull reports, in one look under l's lock, whether l has more
// than one segment or its active segment holds at least full bytes.
func rolledOrFull(l *Log, full int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(*l.segs.Load()) > 1 || l.active.end.Load() >= full
}

// activeEnd is the size of l's active segment.
func activeEnd(l *Log) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active.end.Load()
}

// With RollAhead, a partition whose active segment has less than the
// margin free is rolled by the roller, with no further append: the next
// segment starts at the log end, and the sealed one is short of
// segment.bytes by less than the margin. Without it, or with segments too
// small for a margin of minRollAheadMargin, nothing rolls until an append
// does not fit.
func TestRollAhead(t *testing.T) {
	const seg = 1 << 20
	l, next := rollAheadAppends(t, 1<<20, seg)
	deadline := time.Now().Add(30 * time.Second) // a bound, not a measurement
	for len(*l.segs.Load()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no roll ahead: segments %v, active segment %d bytes", segmentBases(t, l.dir), activeEnd(l))
		}
		time.Sleep(5 * time.Millisecond)
	}
	segs := *l.segs.Load()
	if len(segs) != 2 || segs[1].base != next {
		t.Fatalf("segments %v, want a second at the log end %d", segmentBases(t, l.dir), next)
	}
	if size := segs[0].end.Load(); size < seg-seg/8 || size > seg {
		t.Fatalf("the sealed segment holds %d bytes, want %d-%d", size, seg-seg/8, seg)
	}
	// The log goes on in the new segment.
	if info := mustAppend(t, l, batchOf(t, 1, 1024, 1000, 99)); info.BaseOffset != next {
		t.Fatalf("append after the roll at %d, want %d", info.BaseOffset, next)
	}

	for _, c := range []struct{ rollAhead, seg int64 }{{0, seg}, {1 << 20, 256 << 10}, {32 << 10, seg}} {
		l, _ := rollAheadAppends(t, c.rollAhead, c.seg)
		time.Sleep(50 * time.Millisecond) // nothing would roll it: give a wrong roller time to show
		if bases := segmentBases(t, l.dir); len(bases) != 1 {
			t.Fatalf("RollAhead %d, segment.bytes %d: segments %v before an append that does not fit", c.rollAhead, c.seg, bases)
		}
	}
}

// Appends from four goroutines to partitions that roll, ahead or in an
// append (which of the two is timing's): every append lands once, in
// order, every batch reads back, and Close stops the roller (go test
// -race checks the locking between the roller and the appends).
func TestRollAheadConcurrentAppends(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.RollAhead = 1 << 20 })
	cfg := smallConfig()
	cfg["segment.bytes"] = "524288"
	cfg["segment.index.bytes"] = "65536"
	cfg["retention.bytes"] = "-1"
	top := mustTopic(t, e, "ahead", 4, cfg)
	const appends = 1200
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func(l *Log) {
			defer wg.Done()
			for i := 0; i < appends; i++ {
				info, err := l.Append(batchOf(t, 1, 1024, 1000, i), 0)
				if err != nil {
					t.Errorf("%s append %d: %v", l, i, err)
					return
				}
				if info.BaseOffset != int64(i) {
					t.Errorf("%s append %d at offset %d", l, i, info.BaseOffset)
					return
				}
			}
		}(top.Partition(int32(p)))
	}
	wg.Wait()
	for p := 0; p < 4; p++ {
		l := top.Partition(int32(p))
		if n := len(segmentBases(t, l.dir)); n < 3 {
			t.Fatalf("partition %d: %d segments for %d appends of ~1.1 KiB into 512 KiB segments", p, n, appends)
		}
		if err := waitDurable(t, l, appends-1); err != nil {
			t.Fatal(err)
		}
		got, _ := readAll(t, l, 0, 1<<30)
		if len(got) != appends {
			t.Fatalf("partition %d reads %d batches, want %d", p, len(got), appends)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}
