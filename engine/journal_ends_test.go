package engine

import (
	"strings"
	"sync"
	"testing"
)

// endsOpts: the journal holding segment ends only (Options.JournalEnds),
// over zero-filled O_DIRECT segments with shared flushes.
func endsOpts(o *Options) {
	o.IOBackend, o.JournalBytes, o.JournalEnds = IOBackendUring, JournalMinBytes, true
}

// TestJournalEndsMakesAppendsDurable: with log.io.journal.ends, acks=all
// appends are durable once the journal group holding their segments' ends
// is: the rounds stage end records and never a write record, no shared
// device flush of their own runs (the journal's fdatasync is the flush),
// the HW follows, and everything acknowledged is there after a crash (a
// copy of the directory as the process left it) and after a clean close,
// the journal replaying no bytes into the segments.
func TestJournalEndsMakesAppendsDurable(t *testing.T) {
	if fs, ok := sharedFlushFS(t.TempDir()); !ok {
		t.Fatalf("the test directory's filesystem (%s) has no shared device flushes; ext4 or XFS is needed, as CI has", fs)
	}
	dir := t.TempDir()
	e := openEngine(t, dir, endsOpts)
	if e.jnl == nil || !e.jnlEnds || e.io.dev == nil {
		t.Fatalf("ends mode not on: journal %v, ends %v, shared flush %v", e.jnl != nil, e.jnlEnds, e.io.dev != nil)
	}
	const parts = 8
	tp := mustTopic(t, e, "ends", parts, nil)
	var want [parts][][]byte
	for round := range 40 {
		var wg sync.WaitGroup
		for p := range parts {
			l := tp.Partition(int32(p))
			b := batchOf(t, 4, 1000, int64(round), round*parts+p)
			info := mustAppend(t, l, b)
			want[p] = append(want[p], append([]byte(nil), b...))
			wg.Add(1)
			l.WhenDurable(info.LastOffset, func(err error) {
				if err != nil {
					t.Error(err)
				}
				if hw := l.HighWatermark(); hw < info.LastOffset+1 {
					t.Errorf("durable callback with HW %d below %d", hw, info.LastOffset+1)
				}
				wg.Done()
			})
		}
		wg.Wait()
	}
	e.jnl.mu.Lock()
	ends, staged := e.jnl.endRecs, e.jnl.nextSeq
	e.jnl.mu.Unlock()
	if ends == 0 {
		t.Fatal("no end record was staged: the rounds did not go through the journal")
	}
	if ends != staged-1 {
		t.Fatalf("%d records staged, %d of them ends: the journal took record bytes", staged-1, ends)
	}
	if n := e.io.dev.flushes.Load(); n != 0 {
		t.Fatalf("%d shared device flushes ran beside the journal's", n)
	}
	t.Logf("%d end records", ends)

	crash := t.TempDir()
	copyDir(t, dir, crash)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{crash, dir} {
		e2 := openEngine(t, d, endsOpts)
		if r := e2.jnl.replayed; r.written != 0 {
			t.Errorf("%s: the journal replayed record bytes: %+v", d, r)
		}
		tp2 := e2.Topic("ends")
		for p := range parts {
			if err := readHead(tp2.Partition(int32(p)), want[p], false); err != nil {
				t.Errorf("%s: partition %d: %v", d, p, err)
			}
		}
		if err := e2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// log.io.journal.ends needs the journal, zero fill and shared flushes.
func TestJournalEndsNeedsZeroFill(t *testing.T) {
	for _, mutate := range []func(*Options){
		func(o *Options) { endsOpts(o); o.NoZeroFill = true },
		func(o *Options) { endsOpts(o); o.JournalBytes = 0 },
		func(o *Options) { endsOpts(o); o.DisableSharedFlush = true },
	} {
		opts := Options{Dir: t.TempDir(), Logger: quietLogger()}
		mutate(&opts)
		e, err := Open(opts)
		if err == nil {
			e.Close()
			t.Fatalf("Open with %+v: no error", opts)
		}
		if !strings.Contains(err.Error(), "log.io.journal.ends") {
			t.Fatalf("Open: %v", err)
		}
	}
}
