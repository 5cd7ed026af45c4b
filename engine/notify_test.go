package engine

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// notifyEntries counts the logs with a live hwNotify.
func notifyEntries() int {
	n := 0
	notifyTable.Range(func(_, _ any) bool { n++; return true })
	return n
}

// wakeCounter is an HWWaiter whose wake counts and signals.
func wakeCounter() (*HWWaiter, *atomic.Int32, chan struct{}) {
	var n atomic.Int32
	ch := make(chan struct{}, 16)
	w := NewHWWaiter(func() { n.Add(1); ch <- struct{}{} })
	return w, &n, ch
}

func waitWake(t *testing.T, ch chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("waiter never woke")
	}
}

// TestHWWaiterManyLogs: one waiter on many logs wakes once, when the HW of
// one of them passes the registered offset; the other registrations are
// cancelled and the table empties once the woken log's HW moved.
func TestHWWaiterManyLogs(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	const parts = 64
	tp := mustTopic(t, e, "notify", parts, nil)
	before := notifyEntries()

	w, n, ch := wakeCounter()
	w.Arm(parts)
	for p := range int32(parts) {
		w.Add(tp.Partition(p), 0) // HW 0: wake when HW > 0
	}
	if got := notifyEntries() - before; got != parts {
		t.Fatalf("%d logs with waiters, want %d", got, parts)
	}
	if n.Load() != 0 {
		t.Fatal("woke before any append")
	}
	l := tp.Partition(parts - 1)
	info := mustAppend(t, l, batchOf(t, 3, 10, time.Now().UnixMilli(), 1))
	waitWake(t, ch)
	if err := waitDurable(t, l, info.LastOffset); err != nil {
		t.Fatal(err)
	}
	w.Cancel()

	// A second append on another partition: no registration is left, so
	// nothing wakes, and every hwNotify went away (the appended log's on
	// its wake, the others' on their next HW move or now, via Cancel,
	// leaving only an armed WhenDurable record).
	l0 := tp.Partition(0)
	info = mustAppend(t, l0, batchOf(t, 1, 10, time.Now().UnixMilli(), 2))
	if err := waitDurable(t, l0, info.LastOffset); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("woke %d times, want 1", got)
	}
	for p := range int32(parts) {
		nt, ok := notifyTable.Load(tp.Partition(p))
		if !ok {
			continue
		}
		h := nt.(*hwNotify)
		h.mu.Lock()
		regs := len(h.regs)
		h.mu.Unlock()
		if regs != 0 {
			t.Fatalf("partition %d keeps %d registrations after Cancel", p, regs)
		}
		if p == 0 || p == parts-1 {
			t.Fatalf("partition %d keeps its hwNotify after its HW moved", p)
		}
	}
}

// TestHWWaiterAlreadySatisfied: an offset below the HW wakes inline.
func TestHWWaiterAlreadySatisfied(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "sat", 1, nil).Partition(0)
	info := mustAppend(t, l, batchOf(t, 2, 10, time.Now().UnixMilli(), 1))
	if err := waitDurable(t, l, info.LastOffset); err != nil {
		t.Fatal(err)
	}
	w, n, _ := wakeCounter()
	w.Arm(2)
	w.Add(l, 0)
	w.Add(l, 0)
	if got := n.Load(); got != 1 {
		t.Fatalf("woke %d times, want exactly 1 (inline)", got)
	}
	w.Cancel()
	// Waiting at the HW registers; the next append wakes it; re-armed
	// waiters wake again.
	for round := range 3 {
		w.Arm(1)
		w.Add(l, l.HighWatermark())
		info := mustAppend(t, l, batchOf(t, 1, 10, time.Now().UnixMilli(), round))
		if err := waitDurable(t, l, info.LastOffset); err != nil {
			t.Fatal(err)
		}
		w.Cancel()
		if got := n.Load(); got != int32(round+2) {
			t.Fatalf("round %d: woke %d times", round, got)
		}
	}
}

// TestHWWaiterLogClosed: closing the engine wakes waiters of its logs.
func TestHWWaiterLogClosed(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	l := mustTopic(t, e, "closing", 1, nil).Partition(0)
	w, _, ch := wakeCounter()
	w.Arm(1)
	w.Add(l, 0)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	waitWake(t, ch)
	w.Cancel()
	if _, ok := notifyTable.Load(l); ok {
		t.Fatal("closed log keeps its hwNotify")
	}
}

// TestHWWaiterCancelBounded: many polls that time out on an idle log leave
// one registration record at most, not one per poll.
func TestHWWaiterCancelBounded(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "idle", 1, nil).Partition(0)
	w, n, _ := wakeCounter()
	for range 10000 {
		w.Arm(1)
		w.Add(l, 0)
		w.Cancel()
	}
	v, ok := notifyTable.Load(l)
	if !ok {
		t.Fatal("no hwNotify while armed")
	}
	h := v.(*hwNotify)
	h.mu.Lock()
	regs, capRegs := len(h.regs), cap(h.regs)
	h.mu.Unlock()
	if regs != 0 || capRegs > 1 {
		t.Fatalf("after 10000 cancelled polls: %d registrations, capacity %d", regs, capRegs)
	}
	l.hwMu.Lock()
	durableRecords := len(l.waiters)
	l.hwMu.Unlock()
	if durableRecords != 1 {
		t.Fatalf("after 10000 cancelled polls: %d WhenDurable records, want 1", durableRecords)
	}
	if n.Load() != 0 {
		t.Fatal("woke without an append")
	}
}

// BenchmarkHWWaiter is what a parked long poll costs the broker: Arm, one Add
// per partition, Cancel. No goroutine, no timer, and no allocation once the
// waiter and the logs' hwNotify records exist.
func BenchmarkHWWaiter(b *testing.B) {
	for _, parts := range []int32{1, 96, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			e := openEngine(b, b.TempDir(), nil)
			defer e.Close()
			tp := mustTopic(b, e, "bench", parts, nil)
			logs := make([]*Log, parts)
			for p := range parts {
				logs[p] = tp.Partition(p)
			}
			w := NewHWWaiter(func() {})
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				w.Arm(len(logs))
				for _, l := range logs {
					w.Add(l, 0)
				}
				w.Cancel()
			}
		})
	}
}
