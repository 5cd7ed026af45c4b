package server

import (
	"sync"
	"time"
)

// ackWait is a response waiting for its appended partitions to be
// acknowledged (durable, and replicated where the cluster asks): Produce
// with acks=-1 and WriteTxnMarkers. The last partition's acknowledgement,
// or the deadline if it comes first, sends the response; whichever gets
// there first wins, and every outcome is recorded under mu. Partitions
// are numbered 0..n-1 by the caller, who keeps their response fields.
type ackWait struct {
	mu      sync.Mutex
	open    []bool // partitions still waiting
	pending int
	done    bool
	timer   *time.Timer

	// settle records partition i's outcome (err nil: acknowledged),
	// expired marks it timed out; both run under mu. respond sends the
	// response, outside mu, once.
	settle  func(i int, err error)
	expired func(i int)
	respond func()
}

// newAckWait makes the wait for n partitions; start it once every
// partition's acknowledgement callback is registered.
func newAckWait(n int, settle func(i int, err error), expired func(i int), respond func()) *ackWait {
	w := &ackWait{open: make([]bool, n), pending: n, settle: settle, expired: expired, respond: respond}
	for i := range w.open {
		w.open[i] = true
	}
	return w
}

// start arms the deadline (unless every partition was acknowledged
// inline already).
func (w *ackWait) start(timeout time.Duration) {
	w.mu.Lock()
	if !w.done {
		w.timer = time.AfterFunc(max(timeout, 0), w.expire)
	}
	w.mu.Unlock()
}

// ack records partition i's outcome; the last one sends the response. It
// runs on a flush worker, the replica manager or inline, and must not
// block: encoding and handing the response to netpoll does not. An ack
// after the deadline answered is dropped.
func (w *ackWait) ack(i int, err error) {
	w.mu.Lock()
	if w.done || !w.open[i] {
		w.mu.Unlock()
		return
	}
	w.settle(i, err)
	w.open[i] = false
	w.pending--
	if w.pending > 0 {
		w.mu.Unlock()
		return
	}
	w.done = true
	t := w.timer
	w.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	w.respond()
}

// expire answers for the partitions not yet acknowledged as timed out.
func (w *ackWait) expire() {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	w.done = true
	for i, open := range w.open {
		if open {
			w.expired(i)
			w.open[i] = false
		}
	}
	w.mu.Unlock()
	w.respond()
}
