package segment

import "testing"

// TestZeroSchedulerSlots: one zero-fill slot process-wide, handed on in
// FIFO order on release, except that a segment an append waits for
// (hurry) goes first; with nobody waiting the slot is free again.
func TestZeroSchedulerSlots(t *testing.T) {
	z := zeroScheduler{free: 1}
	a, b, c := &ringWriter{}, &ringWriter{}, &ringWriter{}
	if !z.acquire(a) {
		t.Fatal("the free slot was not taken")
	}
	if z.acquire(b) || z.acquire(c) {
		t.Fatal("took a busy slot")
	}
	z.hurry(c)
	if w := z.release(); w != c {
		t.Fatalf("release handed the slot to %p, want the hurried segment %p", w, c)
	}
	if w := z.release(); w != b {
		t.Fatalf("release handed the slot to %p, want the waiting segment %p", w, b)
	}
	if w := z.release(); w != nil || z.free != 1 {
		t.Fatalf("release with nobody waiting: %p, free %d", w, z.free)
	}
	if !z.acquire(a) || z.free != 0 {
		t.Fatalf("the returned slot was not taken again: free %d", z.free)
	}
}
