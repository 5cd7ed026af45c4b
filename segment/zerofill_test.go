package segment

import "testing"

// TestZeroSchedulerSlots: one zero-fill slot process-wide, handed on in
// FIFO order on release, except that a segment an append waits for
// (hurry) goes first, and takes the slot at once when it is free.
func TestZeroSchedulerSlots(t *testing.T) {
	z := zeroScheduler{free: 1}
	a, b, c := &ringWriter{}, &ringWriter{}, &ringWriter{}
	if !z.acquire(a) {
		t.Fatal("the free slot was not taken")
	}
	if z.acquire(b) || z.acquire(c) {
		t.Fatal("took a busy slot")
	}
	if z.hurry(c) {
		t.Fatal("hurry took a busy slot")
	}
	if w := z.release(); w != c {
		t.Fatalf("release handed the slot to %p, want the hurried segment %p", w, c)
	}
	if w := z.release(); w != b {
		t.Fatalf("release handed the slot to %p, want the waiting segment %p", w, b)
	}
	if w := z.release(); w != nil || z.free != 1 {
		t.Fatalf("release with nobody waiting: %p, free %d", w, z.free)
	}
	// A segment queued behind a slot that was since given back (its
	// holder failed) takes it as soon as it is hurried.
	z.free = 0
	if z.acquire(a) {
		t.Fatal("took a busy slot")
	}
	z.free = 1
	if !z.hurry(a) || len(z.waiting) != 0 || z.free != 0 {
		t.Fatalf("hurry with a free slot: waiting %d, free %d", len(z.waiting), z.free)
	}
}
