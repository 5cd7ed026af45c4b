package engine

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// heldDevFlush returns a devFlush whose flushes announce their number on
// entered and end only when release is sent to.
func heldDevFlush() (d *devFlush, entered chan int, release chan struct{}) {
	entered, release = make(chan int, 16), make(chan struct{}, 16)
	var n atomic.Int32
	d = newDevFlush(nil, 0, func() error {
		entered <- int(n.Add(1))
		<-release
		return nil
	})
	return d, entered, release
}

// A wait that starts while a flush runs must not be answered by that
// flush (it may have started before the caller's writes completed): it
// gets the next one. Waiters arriving together share one flush.
func TestDevFlushWaitsForAFlushStartedAfterIt(t *testing.T) {
	d, entered, release := heldDevFlush()
	first := make(chan error, 1)
	go func() { first <- d.wait() }()
	if got := <-entered; got != 1 {
		t.Fatalf("first flush numbered %d", got)
	}
	// Flush 1 is running. Three waiters arrive now: none may return when
	// flush 1 ends.
	var wg sync.WaitGroup
	var done atomic.Int32
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.wait(); err != nil {
				t.Error(err)
			}
			done.Add(1)
		}()
	}
	waitFor(t, func() bool { return d.waits.Load() == 4 })
	release <- struct{}{} // flush 1 ends
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := <-entered; got != 2 {
		t.Fatalf("second flush numbered %d", got)
	}
	if got := done.Load(); got != 0 {
		t.Fatalf("%d waiters returned on a flush that started before they waited", got)
	}
	release <- struct{}{} // flush 2 ends: all three are answered by it
	wg.Wait()
	if got := d.flushes.Load(); got != 2 {
		t.Fatalf("%d flushes for 4 waits arriving in two groups, want 2", got)
	}
	select {
	case k := <-entered:
		t.Fatalf("unexpected flush %d", k)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestDevFlushErrorIsSticky(t *testing.T) {
	boom := errors.New("EIO")
	var calls atomic.Int32
	d := newDevFlush(nil, 0, func() error {
		if calls.Add(1) == 2 {
			return boom
		}
		return nil
	})
	if err := d.wait(); err != nil {
		t.Fatal(err)
	}
	if err := d.wait(); !errors.Is(err, boom) {
		t.Fatalf("second wait: %v, want %v", err, boom)
	}
	if err := d.wait(); !errors.Is(err, boom) {
		t.Fatalf("after a failed flush: %v, want %v (never retried)", err, boom)
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("%d flushes, want 2 (none after the failure)", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// With the O_DIRECT backend on ext4/XFS, acks=all durability of busy
// partitions comes from shared device flushes (fewer flushes than segment
// syncs once each segment had its own first fdatasync), the HW still only
// moves to durable bytes, and everything reads back after a reopen. With
// DisableSharedFlush every segment fdatasyncs itself. With NoZeroFill the
// shared flush is a syncfs and segments share it from their first sync.
func TestSharedFlushMakesAppendsDurable(t *testing.T) {
	fs, supported := sharedFlushFS(t.TempDir())
	for _, mode := range []string{"zerofill", "nozerofill", "disabled"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			disable := mode == "disabled"
			opts := func(o *Options) {
				o.IOBackend, o.DisableSharedFlush, o.NoZeroFill = IOBackendUring, disable, mode == "nozerofill"
			}
			e := openEngine(t, dir, opts)
			if on := supported && !disable; (e.io.dev != nil) != on || e.io.metaFlush != (on && mode == "nozerofill") {
				t.Fatalf("dev flush %v (syncfs %v) in mode %s on %s, want %v", e.io.dev != nil, e.io.metaFlush, mode, fs, on)
			}
			tp := mustTopic(t, e, "shared", 8, nil)
			want := appendRoundsDurable(t, tp, 8, 40, 4, 1000, hwCoversDurable(t))
			if d := e.io.dev; d != nil {
				if d.flushes.Load() == 0 || d.waits.Load() == 0 {
					t.Fatalf("shared flush on, but %d flushes for %d segment syncs", d.flushes.Load(), d.waits.Load())
				}
				// A zero-filled segment's first sync is its own
				// fdatasync; without zero-fill every sync shares.
				if own := e.ownSyncs.Load(); (own == 0) != (mode == "nozerofill") {
					t.Fatalf("%d own fdatasyncs of active segments in mode %s", own, mode)
				}
				t.Logf("%d device flushes for %d shared segment syncs", d.flushes.Load(), d.waits.Load())
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = openEngine(t, dir, opts)
			defer e.Close()
			tp = e.Topic("shared")
			for p := range 8 {
				if err := readHead(tp.Partition(int32(p)), want[p], false); err != nil {
					t.Fatalf("partition %d after reopen: %v", p, err)
				}
			}
		})
	}
}

// One flush worker whose shared flush is held: the logs dirtied meanwhile
// queue, and the worker then takes them as one batch made durable by one
// device flush (flushBatch), each log's durable offset and HW moving only
// after it. (Needs ext4 or XFS under the test directory, as CI has.)
func TestFlushBatchSharesOneFlush(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, func(o *Options) { o.IOBackend = IOBackendUring; o.flushWorkers = 1 })
	defer e.Close()
	d := e.io.dev
	if d == nil || !e.fl.batch {
		t.Fatalf("shared flush %v, batch workers %v", d != nil, e.fl.batch)
	}
	const parts = 32
	tp := mustTopic(t, e, "batch", parts, nil)
	// Each segment's first sync is its own fdatasync; after it, syncs share.
	for p := range parts {
		l := tp.Partition(int32(p))
		info := mustAppend(t, l, batchOf(t, 2, 100, 1, p))
		waitFor(t, func() bool { return l.HighWatermark() > info.LastOffset })
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	real := d.flush
	d.flush = func() error {
		if held.CompareAndSwap(false, true) {
			entered <- struct{}{}
			<-release
		}
		return real()
	}
	waits0, flushes0 := d.waits.Load(), d.flushes.Load()

	l0 := tp.Partition(0)
	first := mustAppend(t, l0, batchOf(t, 2, 100, 2, 100))
	<-entered // the only worker is inside the flush for partition 0
	var wg sync.WaitGroup
	var ends [parts]int64
	for p := 1; p < parts; p++ {
		l := tp.Partition(int32(p))
		info := mustAppend(t, l, batchOf(t, 3, 100, 3, 200+p))
		ends[p] = info.LastOffset + 1
		wg.Add(1)
		l.WhenDurable(info.LastOffset, func(err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
	}
	for p := 1; p < parts; p++ {
		if hw := tp.Partition(int32(p)).HighWatermark(); hw >= ends[p] {
			t.Fatalf("partition %d: HW %d covers %d before its flush", p, hw, ends[p])
		}
	}
	close(release)
	wg.Wait()
	waitFor(t, func() bool { return l0.HighWatermark() > first.LastOffset })
	if w, f := d.waits.Load()-waits0, d.flushes.Load()-flushes0; w != 2 || f != 2 {
		t.Fatalf("%d waits and %d device flushes for partition 0 and a batch of %d, want 2 and 2", w, f, parts-1)
	}
	for p := 1; p < parts; p++ {
		l := tp.Partition(int32(p))
		if hw := l.HighWatermark(); hw != ends[p] {
			t.Fatalf("partition %d: HW %d, want %d", p, hw, ends[p])
		}
	}
}

// waitFor(need) is answered by flush number need even if it started
// before the call (the caller's writes completed before it started, which
// is what need = epoch()+1 read after them says), at once if that flush
// already ended; need 0 is wait().
func TestDevFlushWaitForEpoch(t *testing.T) {
	d, entered, release := heldDevFlush()
	need := d.epoch() + 1 // "writes" completed before flush 1 starts
	first := make(chan error, 1)
	go func() { first <- d.wait() }()
	if got := <-entered; got != 1 || d.epoch() != 1 {
		t.Fatalf("first flush numbered %d, epoch %d", got, d.epoch())
	}
	// Flush 1 is running and started after the writes: waitFor(need) is
	// answered by it; a plain wait() needs flush 2.
	byEpoch := make(chan error, 1)
	go func() { byEpoch <- d.waitFor(need) }()
	plain := make(chan error, 1)
	go func() { plain <- d.wait() }()
	waitFor(t, func() bool { return d.waits.Load() == 3 })
	release <- struct{}{} // flush 1 ends
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-byEpoch; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-plain:
		t.Fatalf("wait() returned (%v) on a flush that started before it", err)
	default:
	}
	if got := <-entered; got != 2 {
		t.Fatalf("second flush numbered %d", got)
	}
	release <- struct{}{}
	if err := <-plain; err != nil {
		t.Fatal(err)
	}
	// Flush 2 ended: a waiter whose writes completed before it started
	// returns without a flush.
	if err := d.waitFor(2); err != nil {
		t.Fatal(err)
	}
	if got := d.flushes.Load(); got != 2 {
		t.Fatalf("%d flushes, want 2", got)
	}
	// A need beyond the next flush is clamped to it.
	go func() { release <- struct{}{} }()
	if err := d.waitFor(99); err != nil {
		t.Fatal(err)
	}
	if got := <-entered; got != 3 || d.flushes.Load() != 3 {
		t.Fatalf("flush %d, %d flushes, want the third", got, d.flushes.Load())
	}
}

// With shared flushes the engine's segments carry the flush numbers
// (segment.Options.FlushEpoch): the value kept with the written watermark
// is one read after the append's write completed, so never below the
// flushes started before the append.
func TestSegmentsCarryFlushEpoch(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.IOBackend = IOBackendUring })
	defer e.Close()
	d := e.io.dev
	if d == nil {
		t.Fatal("no shared flushes on the test filesystem")
	}
	l := mustTopic(t, e, "epoch", 1, nil).Partition(0)
	for i := range 3 {
		before := d.epoch()
		info := mustAppend(t, l, batchOf(t, 2, 100, int64(i), i))
		waitFor(t, func() bool { return l.HighWatermark() > info.LastOffset })
		ep, ok := l.active.seg.WrittenEpoch()
		if !ok {
			t.Fatal("engine segment without FlushEpoch")
		}
		if ep < before {
			t.Fatalf("append %d: written epoch %d below the %d flushes started before it", i, ep, before)
		}
	}
	if d.epoch() == 0 {
		t.Fatal("no shared flush ran")
	}
}
