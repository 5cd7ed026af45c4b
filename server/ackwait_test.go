package server

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// ackWait sends exactly one response: after the last acknowledgement, or
// at the deadline with the partitions still open marked expired; an
// acknowledgement after the deadline changes nothing.
func TestAckWait(t *testing.T) {
	type outcome struct {
		settled []error
		expired []bool
		sent    atomic.Int32
	}
	mk := func(n int) (*ackWait, *outcome) {
		o := &outcome{settled: make([]error, n), expired: make([]bool, n)}
		for i := range o.settled {
			o.settled[i] = errors.New("unset")
		}
		w := newAckWait(n, func(i int, err error) { o.settled[i] = err }, func(i int) { o.expired[i] = true },
			func() { o.sent.Add(1) })
		return w, o
	}

	// All acknowledged inline before start: answered at once, no timer.
	w, o := mk(2)
	w.ack(0, nil)
	w.ack(1, errors.New("fsync failed"))
	w.start(time.Hour)
	if o.sent.Load() != 1 || w.timer != nil || o.settled[0] != nil || o.settled[1] == nil {
		t.Fatalf("inline: sent %d, timer %v, settled %v", o.sent.Load(), w.timer != nil, o.settled)
	}
	w.ack(1, nil) // a duplicate changes nothing
	if o.sent.Load() != 1 {
		t.Fatal("a second response")
	}

	// The deadline first: partition 1 expires, its late ack is dropped.
	w, o = mk(2)
	w.start(time.Millisecond)
	w.ack(0, nil)
	deadline := time.Now().Add(10 * time.Second)
	for o.sent.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	w.ack(1, nil)
	w.mu.Lock()
	defer w.mu.Unlock()
	if o.sent.Load() != 1 || !o.expired[1] || o.expired[0] || o.settled[0] != nil || o.settled[1] == nil {
		t.Fatalf("deadline: sent %d, expired %v, settled %v", o.sent.Load(), o.expired, o.settled)
	}
}
