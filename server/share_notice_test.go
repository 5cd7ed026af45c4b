package server

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterShareLeaveNoticeRetried: in a 3-broker cluster a share
// member holding records on a partition led by a broker other than the
// group's coordinator leaves; the coordinator's first notice to each
// other broker fails (as when a connection drops). The notice is sent
// again, and the records are available at the leader once more: another
// member acquires them with delivery count 2 while their one-hour
// acquisition lock has not expired.
func TestClusterShareLeaveNoticeRetried(t *testing.T) {
	brokers := startShareCluster(t, 3, nil)
	st := newShareTopology(t, brokers, "tasks", 3, 2, nil)
	const group = "leavers"
	setGroupConfig(t, st.cl, group, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "3600000")
	coord := st.coordinator(t, group)
	p := st.notLedBy(t, coord)
	leaderAddr, ok := brokers[coord].s.brokerAddr(st.leaders[p])
	if !ok {
		t.Fatalf("broker %d has no address at broker %d", st.leaders[p], coord)
	}
	st.produce(t, p, 4)
	st.heartbeat(t, coord, group, "holder", 0)
	held, _ := st.acquire(t, group, "holder", p, 4, 20)
	if len(held) < 4 {
		t.Fatalf("the holder acquired %v on %s-%d", held, st.topic, p)
	}

	// Every broker's first notice fails; the later ones go through.
	var mu sync.Mutex
	sends := map[string]int{}
	c := brokers[coord].s.groups.share.cluster
	send := func(ctx context.Context, addr string, req kmsg.Request, resp kmsg.Response) error {
		mu.Lock()
		sends[addr]++
		n := sends[addr]
		mu.Unlock()
		if n == 1 {
			return errors.New("injected: the connection dropped")
		}
		return c.forward(ctx, addr, req, resp)
	}
	c.noticeSend.Store(&send)

	st.heartbeat(t, coord, group, "holder", -1)
	// At most 40 fetches of up to 200 ms (the lock lasts an hour).
	again, _ := st.acquire(t, group, "other", p, len(held), 40)
	for o := range held {
		if again[o] != 2 {
			t.Fatalf("after the holder left (coordinator %d, leader %d), another member acquired %v, want %v again with delivery count 2",
				coord, st.leaders[p], again, held)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if sends[leaderAddr] < 2 {
		t.Fatalf("notices sent to the leader %d: %d, want the failed one and a retry", st.leaders[p], sends[leaderAddr])
	}
}

// fakeNoticeClock is a noticeClock whose waits end at once, moving its
// time on by them.
type fakeNoticeClock struct {
	now   time.Time
	waits []time.Duration
}

func (c *fakeNoticeClock) Now() time.Time { return c.now }

func (c *fakeNoticeClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch, func() bool { return false }
}

// TestRetryNoticeBounds: a member-gone notice is retried with a doubling
// backoff until acknowledged; it stops when the broker is no longer live
// or when the next wait would pass its bound.
func TestRetryNoticeBounds(t *testing.T) {
	start := time.Unix(1000, 0)
	live := func() (string, bool) { return "127.0.0.1:1", true }
	failing := errors.New("injected")

	t.Run("acknowledged on the third attempt", func(t *testing.T) {
		clock := &fakeNoticeClock{now: start}
		n := 0
		acked, attempts, err := retryNotice(context.Background(), clock, start.Add(time.Minute), live, func(string) error {
			if n++; n < 3 {
				return failing
			}
			return nil
		})
		if !acked || attempts != 3 || err != nil {
			t.Fatalf("acked %v after %d attempts (%v), want acked after 3", acked, attempts, err)
		}
		if want := []time.Duration{noticeBackoffMin, 2 * noticeBackoffMin}; !slices.Equal(clock.waits, want) {
			t.Fatalf("waits %v, want %v", clock.waits, want)
		}
	})
	t.Run("never acknowledged: bounded", func(t *testing.T) {
		clock := &fakeNoticeClock{now: start}
		until := start.Add(10 * time.Second)
		acked, attempts, err := retryNotice(context.Background(), clock, until, live, func(string) error { return failing })
		// Waits 0.1+0.2+0.4+0.8+1.6+2+2+2 = 9.1 s between nine
		// attempts; the next wait (2 s) would end past 10 s.
		if acked || err != failing || attempts != 9 {
			t.Fatalf("acked %v after %d attempts (%v), want given up after 9 with the last error", acked, attempts, err)
		}
		if clock.now.After(until) {
			t.Fatalf("retried until %v, past the bound %v", clock.now, until)
		}
	})
	t.Run("the broker is gone", func(t *testing.T) {
		clock := &fakeNoticeClock{now: start}
		calls := 0
		gone := func() (string, bool) { calls++; return "127.0.0.1:1", calls == 1 }
		acked, attempts, _ := retryNotice(context.Background(), clock, start.Add(time.Minute), gone, func(string) error { return failing })
		if acked || attempts != 1 {
			t.Fatalf("acked %v after %d attempts, want one attempt then stopped", acked, attempts)
		}
	})
	t.Run("the broker closes", func(t *testing.T) {
		clock := &fakeNoticeClock{now: start}
		ctx, cancel := context.WithCancel(context.Background())
		acked, attempts, _ := retryNotice(ctx, clock, start.Add(time.Minute), live, func(string) error { cancel(); return failing })
		if acked || attempts != 1 {
			t.Fatalf("acked %v after %d attempts, want one attempt then stopped", acked, attempts)
		}
	})
}
