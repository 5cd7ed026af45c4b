package netpoll

import "sync"

// budget is the broker-wide pool of request bytes read and not yet answered
// (Config.MaxQueuedBytes, Kafka's queued.max.request.bytes: KIP-72's memory
// pool). A reader takes a frame's payload size from it after reading the
// size prefix and before reading (or allocating) the payload; a handler may
// take more for what it derives from the frame (Reply.Reserve: the decoded
// request). Everything a slot took goes back when the slot is freed: after
// its response is written, or when it is dropped because the connection
// died.
//
// Waiters are served first come, first served, in two queues: grows
// (Reply.Reserve: the waiter already holds its frame) before admissions (a
// new frame: the waiter holds nothing), so a request that is half admitted
// finishes before new ones start. A waiter is granted when its bytes fit
// under the limit. One exception prevents a deadlock: when every byte in use
// is held by readers waiting to grow (nobody else will give bytes back), the
// first grow waiter is granted past the limit. used therefore stays at most
// limit, or limit + one grow while that stalemate lasts; a grow larger than
// limit minus its own frame is refused (Reserve returns false).
//
// budget's lock is a leaf: it is taken with no other lock held, and nothing
// is called while it is held.
type budget struct {
	limit int64

	mu   sync.Mutex
	used int64
	// heldByGrowers is the bytes held by the grow waiters (their frames).
	heldByGrowers int64
	grows         waitQueue
	admits        waitQueue
}

// budgetWaiter is one blocked reader. Each Conn owns one (its reader waits
// for at most one thing at a time), so waiting does not allocate.
type budgetWaiter struct {
	n       int64         // bytes wanted
	held    int64         // bytes the waiter already holds (grows only)
	granted bool          // set under budget.mu when the bytes were taken for it
	ready   chan struct{} // buffered(1): signalled once when granted
	next    *budgetWaiter
}

// waitQueue is an intrusive FIFO of waiters.
type waitQueue struct{ head, tail *budgetWaiter }

func (q *waitQueue) push(w *budgetWaiter) {
	w.next = nil
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next = w
	}
	q.tail = w
}

func (q *waitQueue) pop() *budgetWaiter {
	w := q.head
	q.head = w.next
	if q.head == nil {
		q.tail = nil
	}
	w.next = nil
	return w
}

// remove unlinks w (a linear walk: only a closing connection's waiter is
// removed, and queues are at most one waiter per connection).
func (q *waitQueue) remove(w *budgetWaiter) {
	var prev *budgetWaiter
	for x := q.head; x != nil; prev, x = x, x.next {
		if x != w {
			continue
		}
		if prev == nil {
			q.head = x.next
		} else {
			prev.next = x.next
		}
		if q.tail == x {
			q.tail = prev
		}
		x.next = nil
		return
	}
}

func newBudget(limit int64) *budget { return &budget{limit: limit} }

// tryTake takes n bytes if they fit and nobody is waiting ahead.
func (b *budget) tryTake(n int64, grow bool) bool {
	if b.grows.head != nil || (!grow && b.admits.head != nil) {
		return false
	}
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// acquire takes n bytes for a new frame (grow=false, held=0) or for more of
// an admitted one (grow=true, held = what its slot already holds), waiting
// while they do not fit. It returns false, with nothing taken, when done is
// closed first.
func (b *budget) acquire(w *budgetWaiter, n, held int64, grow bool, done <-chan struct{}) bool {
	b.mu.Lock()
	if b.tryTake(n, grow) {
		b.mu.Unlock()
		return true
	}
	w.n, w.held, w.granted = n, held, false
	if grow {
		b.heldByGrowers += held
		b.grows.push(w)
	} else {
		b.admits.push(w)
	}
	wake := b.grantLocked()
	b.mu.Unlock()
	signal(wake)

	select {
	case <-w.ready:
		return true
	case <-done:
	}
	b.mu.Lock()
	granted := w.granted
	if granted {
		// Granted while the connection was closing: give the bytes back.
		b.used -= n
	} else if grow {
		b.heldByGrowers -= held
		b.grows.remove(w)
	} else {
		b.admits.remove(w)
	}
	wake = b.grantLocked()
	b.mu.Unlock()
	signal(wake)
	if granted {
		// Its grantor signals after unlocking: take the token, so the
		// channel is empty for the next wait.
		<-w.ready
	}
	return false
}

// release gives n bytes back and grants the waiters that now fit.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		b.mu.Unlock()
		panic("netpoll: request budget released more than it took")
	}
	wake := b.grantLocked()
	b.mu.Unlock()
	signal(wake)
}

// grantLocked grants queued waiters in order while they fit (grows first),
// and returns them linked through next for signal.
func (b *budget) grantLocked() *budgetWaiter {
	var first, last *budgetWaiter
	add := func(w *budgetWaiter) {
		w.granted = true
		if last == nil {
			first = w
		} else {
			last.next = w
		}
		last = w
	}
	for b.grows.head != nil {
		w := b.grows.head
		stalemate := b.used == b.heldByGrowers
		if b.used+w.n > b.limit && !stalemate {
			return first
		}
		b.grows.pop()
		b.heldByGrowers -= w.held
		b.used += w.n
		add(w)
	}
	for b.admits.head != nil {
		w := b.admits.head
		if b.used+w.n > b.limit {
			break
		}
		b.admits.pop()
		b.used += w.n
		add(w)
	}
	return first
}

// signal wakes the granted waiters linked from w.
func signal(w *budgetWaiter) {
	for w != nil {
		next := w.next
		w.next = nil
		w.ready <- struct{}{}
		w = next
	}
}

// inUse returns the bytes taken and not yet given back.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
