package netpoll

import (
	"bytes"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/kframe"
)

// newTestWaiter returns a waiter as a Conn would own.
func newTestWaiter() *budgetWaiter { return &budgetWaiter{ready: make(chan struct{}, 1)} }

// TestBudgetQueues drives the pool directly: admissions wait in arrival
// order, grows go before admissions, a cancelled waiter leaves the queue
// and a grant that raced with the cancel is given back.
func TestBudgetQueues(t *testing.T) {
	b := newBudget(100)
	never := make(chan struct{})
	if !b.acquire(newTestWaiter(), 60, 0, false, never) {
		t.Fatal("first admission refused")
	}

	order := make(chan string, 4)
	var wg sync.WaitGroup
	wait := func(name string, n, held int64, grow bool, done chan struct{}) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b.acquire(newTestWaiter(), n, held, grow, done) {
				order <- name
			} else {
				order <- name + " cancelled"
			}
		}()
	}
	queued := func(admits, grows int) func() bool {
		return func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			n, m := 0, 0
			for w := b.admits.head; w != nil; w = w.next {
				n++
			}
			for w := b.grows.head; w != nil; w = w.next {
				m++
			}
			return n == admits && m == grows
		}
	}
	wait("admit-50", 50, 0, false, never)
	eventually(t, "admit-50 queued", queued(1, 0))
	cancel := make(chan struct{})
	wait("admit-10", 10, 0, false, cancel) // fits, but waits behind admit-50
	eventually(t, "admit-10 queued", queued(2, 0))
	// A grow holding 10 of the 60 wants 45: it does not fit (105) and is no
	// stalemate (50 are held by others); it waits ahead of both admissions.
	wait("grow-45", 45, 10, true, never)
	eventually(t, "grow-45 queued", queued(2, 1))
	close(cancel)
	if got := <-order; got != "admit-10 cancelled" {
		t.Fatalf("got %q, want the cancelled admission first", got)
	}
	b.release(50) // used 10: grow-45 fits (55), admit-50 still does not (105)
	if got := <-order; got != "grow-45" {
		t.Fatalf("got %q, want grow-45 first", got)
	}
	eventually(t, "admit-50 still queued", queued(1, 0))
	b.release(55) // used 0: admit-50 fits
	if got := <-order; got != "admit-50" {
		t.Fatalf("got %q, want admit-50", got)
	}
	wg.Wait()
	if got := b.inUse(); got != 50 {
		t.Fatalf("in use %d, want 50", got)
	}
	b.release(50)
	if got := b.inUse(); got != 0 {
		t.Fatalf("in use %d after releasing everything, want 0", got)
	}
}

// TestBudgetStalemate: when every byte in use is held by readers waiting to
// grow, the oldest is granted past the limit instead of all waiting forever.
func TestBudgetStalemate(t *testing.T) {
	b := newBudget(100)
	never := make(chan struct{})
	for range 2 {
		if !b.acquire(newTestWaiter(), 50, 0, false, never) {
			t.Fatal("admission refused")
		}
	}
	got := make(chan int64, 2)
	go func() { // first grower: holds 50, wants 40
		b.acquire(newTestWaiter(), 40, 50, true, never)
		got <- 40
	}()
	eventually(t, "first grower queued", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.grows.head != nil
	})
	// The second grower completes the stalemate: all 100 bytes are held by
	// the two waiters, so the first is granted (used 140), the second waits.
	go func() {
		b.acquire(newTestWaiter(), 30, 50, true, never)
		got <- 30
	}()
	if n := <-got; n != 40 {
		t.Fatalf("granted %d first, want the oldest grower (40)", n)
	}
	if u := b.inUse(); u != 140 {
		t.Fatalf("in use %d, want 140 (limit + one grow)", u)
	}
	b.release(90) // the first request answered: 50 in use, the 30 fits
	if n := <-got; n != 30 {
		t.Fatalf("granted %d, want 30", n)
	}
	b.release(80)
	if u := b.inUse(); u != 0 {
		t.Fatalf("in use %d, want 0", u)
	}
}

// TestBudgetBoundsEveryConnection: with a budget of four frames and a
// handler that holds every reply, eight connections get exactly four frames
// read between them; answering them lets the rest through, and the budget
// returns to zero.
func TestBudgetBoundsEveryConnection(t *testing.T) {
	const frameBytes, conns, perConn = 64 << 10, 8, 1
	held := make(chan heldReply, conns*perConn)
	var served atomic.Int32
	s, addr := startServer(t, Config{MaxQueuedBytes: 4 * frameBytes},
		handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
			served.Add(1)
			held <- heldReply{r, frame}
		}))
	cs := make([]*net.TCPConn, conns)
	for i := range cs {
		cs[i] = dial(t, addr)
		go func(c *net.TCPConn, i int) {
			var b []byte
			for j := range perConn {
				b = kframe.AppendFrame(b, request(uint32(i*perConn+j), frameBytes-4))
			}
			c.SetWriteDeadline(time.Now().Add(ioTimeout))
			c.Write(b)
		}(cs[i], i)
	}
	eventually(t, "four frames admitted", func() bool { return served.Load() == 4 })
	eventually(t, "the other readers waiting for the budget", func() bool {
		s.budget.mu.Lock()
		defer s.budget.mu.Unlock()
		n := 0
		for w := s.budget.admits.head; w != nil; w = w.next {
			n++
		}
		return n == conns-4
	})
	if got, want := s.QueuedBytes(), int64(4*frameBytes); got != want {
		t.Fatalf("QueuedBytes %d, want %d", got, want)
	}
	if got := served.Load(); got != 4 {
		t.Fatalf("served %d frames under a budget of 4", got)
	}
	var answer sync.WaitGroup
	answer.Add(1)
	go func() {
		defer answer.Done()
		for range conns * perConn {
			h := <-held
			if s.QueuedBytes() > 4*frameBytes {
				t.Errorf("QueuedBytes %d over the budget", s.QueuedBytes())
			}
			h.r.Send(h.frame[:4])
		}
	}()
	for i, c := range cs {
		for j := range perConn {
			got := readFrame(t, c)
			if want := uint32(i*perConn + j); binary.BigEndian.Uint32(got) != want {
				t.Fatalf("conn %d response %d carries %d", i, j, binary.BigEndian.Uint32(got))
			}
		}
	}
	answer.Wait()
	eventually(t, "budget back to 0", func() bool { return s.QueuedBytes() == 0 })
}

// TestBudgetRefusesFrameLargerThanBudget: a frame that could never be
// admitted is refused (one log line, connection closed) instead of waiting
// forever; other connections are served.
func TestBudgetRefusesFrameLargerThanBudget(t *testing.T) {
	logger, logs := newLogger(t)
	s, addr := startServer(t, Config{MaxQueuedBytes: 1 << 20, Logger: logger}, echo)
	c := dial(t, addr)
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 1<<20+1)
	c.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	if n := strings.Count(logs.String(), "refusing frame"); n != 1 {
		t.Fatalf("%d refusing-frame lines, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), ErrFrameOverBudget.Error()) {
		t.Fatalf("log does not say why:\n%s", logs)
	}
	other := dial(t, addr)
	req := request(7, 1<<20-4) // exactly the budget
	writeFrame(t, other, req)
	if got := readFrame(t, other); !bytes.Equal(got, req) {
		t.Fatal("echo of a budget-sized frame differs")
	}
	eventually(t, "budget back to 0", func() bool { return s.QueuedBytes() == 0 })
}

// TestBudgetReleasedWhenConnectionsCloseMidRequest covers every way a
// connection can die holding budget: a reply still with the handler, a
// ready reply not yet written (the client stopped reading), a payload only
// half sent, a reader waiting for admission, and bytes a handler reserved.
// After the clients go away the budget is back at zero and later clients
// get all of it.
func TestBudgetReleasedWhenConnectionsCloseMidRequest(t *testing.T) {
	const budgetBytes = 1 << 20
	held := make(chan *Reply, 16)
	s, addr := startServer(t, Config{MaxQueuedBytes: budgetBytes, QueuedMaxRequestBytes: -1, MaxInFlight: 4},
		handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
			switch frame[0] {
			case 'h': // hold: the test completes it after the close
				if !r.Reserve(1000) {
					t.Error("Reserve refused")
				}
				held <- r
			case 'b': // big answer the client never reads
				r.Send(make([]byte, 64<<20))
			default:
				r.Send(frame)
			}
		}))
	payload := func(tag byte, n int) []byte {
		p := make([]byte, n)
		p[0] = tag
		return p
	}

	// 1. A held reply with a reservation (100 KiB + 1000).
	c1 := dial(t, addr)
	writeFrame(t, c1, payload('h', 100<<10))
	r1 := <-held
	// 2. A stalled writer: the response is bigger than the socket buffers and
	// the client never reads, so the next frame's reply stays ready and
	// unwritten.
	c2 := dial(t, addr)
	writeFrame(t, c2, payload('b', 100<<10))
	writeFrame(t, c2, payload('e', 100<<10))
	// 3. Half a payload: admitted, never finished.
	c3 := dial(t, addr)
	half := kframe.AppendFrame(nil, payload('e', 300<<10))[:150<<10]
	c3.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c3.Write(half); err != nil {
		t.Fatal(err)
	}
	want := int64(100<<10 + 1000 + 2*(100<<10) + 300<<10)
	eventually(t, "four frames admitted", func() bool { return s.QueuedBytes() == want })
	// 4. A reader waiting for admission: 600 KiB does not fit.
	c4 := dial(t, addr)
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 600<<10)
	c4.Write(hdr[:])
	eventually(t, "c4 waiting for the budget", func() bool {
		s.budget.mu.Lock()
		defer s.budget.mu.Unlock()
		return s.budget.admits.head != nil
	})

	for _, c := range []*net.TCPConn{c1, c2, c3, c4} {
		c.Close()
	}
	eventually(t, "connections closed", func() bool { return s.NumConns() == 0 })
	r1.Send([]byte("late")) // dropped: its connection is gone
	eventually(t, "budget back to 0", func() bool { return s.QueuedBytes() == 0 })

	// The whole budget is usable again.
	c5 := dial(t, addr)
	req := payload('e', budgetBytes)
	writeFrame(t, c5, req)
	if got := readFrame(t, c5); !bytes.Equal(got, req) {
		t.Fatal("echo differs")
	}
	eventually(t, "budget back to 0 after the echo", func() bool { return s.QueuedBytes() == 0 })
}

// TestReserveRefusesWhatCannotFit: a reservation that, with its frame, is
// larger than the whole budget is refused at once rather than waiting.
func TestReserveRefusesWhatCannotFit(t *testing.T) {
	got := make(chan bool, 1)
	s, addr := startServer(t, Config{MaxQueuedBytes: 64 << 10},
		handlerFunc(func(_ *Conn, frame []byte, r *Reply) {
			got <- r.Reserve(64<<10 - int64(len(frame)) + 1)
			r.Close()
		}))
	c := dial(t, addr)
	writeFrame(t, c, request(1, 100))
	if <-got {
		t.Fatal("Reserve past the budget granted")
	}
	expectClosed(t, c)
	eventually(t, "budget back to 0", func() bool { return s.QueuedBytes() == 0 })
}
