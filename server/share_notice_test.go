package server

import (
	"context"
	"errors"
	"sync"
	"testing"

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
