package segment

import "testing"

// zeroWriter is a ringWriter with a zero-fill step of n bytes left and
// 1 MiB zero-fill writes, as startPrewrite leaves it.
func zeroWriter(n int64, unpaced bool) *ringWriter {
	w := &ringWriter{zero: make([]byte, 1<<20)}
	w.preEnd = n
	w.unpaced.Store(unpaced)
	return w
}

// TestZeroSchedulerPacing: a paced zero-fill waits until the appends have
// earned its write (5/4 of each appended byte, capped), a short-lead one
// goes at once, an urgent one jumps the queue, and the slot is handed on
// only to a segment that may go.
func TestZeroSchedulerPacing(t *testing.T) {
	z := zeroScheduler{free: 1}
	paced := zeroWriter(4<<20, false)
	if z.acquire(paced) {
		t.Fatal("a paced zero-fill took the slot with no credit")
	}
	if w := z.earn(512 << 10); w != nil {
		t.Fatalf("640 KiB of credit let a 1 MiB write go")
	}
	if w := z.earn(512 << 10); w != paced {
		t.Fatalf("1.25 MiB of credit: earn returned %p, want the paced segment", w)
	}
	if z.free != 0 || z.credit != (1<<20+1<<18)-(1<<20) {
		t.Fatalf("after the write: free %d credit %d", z.free, z.credit)
	}

	// The slot is busy: a short-lead segment queues, and gets it from the
	// release whatever the credit.
	short := zeroWriter(1<<20, true)
	if z.acquire(short) {
		t.Fatal("took a busy slot")
	}
	if w := z.release(); w != short {
		t.Fatalf("release handed the slot to %p, want the short-lead segment", w)
	}

	// Another paced segment waits behind the first one's next write;
	// hurrying it puts it first and, with the slot free, lets it go.
	other := zeroWriter(4<<20, false)
	if z.acquire(paced) || z.acquire(other) {
		t.Fatal("took a busy slot")
	}
	if w := z.release(); w != nil {
		t.Fatalf("release handed the slot to %p with %d bytes of credit", w, z.credit)
	}
	if z.free != 1 {
		t.Fatalf("free %d after release with nobody able to go", z.free)
	}
	if !z.hurry(other) {
		t.Fatal("hurry did not let the urgent segment take the free slot")
	}
	if len(z.waiting) != 1 || z.waiting[0] != paced {
		t.Fatalf("waiting %v, want only the first paced segment", z.waiting)
	}

	// Credit is capped: a long pause in zero-fill does not bank a burst.
	z.release()
	z.earn(1 << 30)
	if z.credit > zeroCreditCap {
		t.Fatalf("credit %d above the cap %d", z.credit, zeroCreditCap)
	}
}
