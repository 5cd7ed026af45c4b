package replica_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFetchResponseAppendsShareOneGroup: a follower catching up on eight
// partitions at once gets one fetch response carrying all of them, and
// its Manager holds the journal over that response's appends
// (Config.HoldAppends): no journal group is written between the first
// append and the last, so the response's records become durable in one
// group and one device flush. The hold ends before the fetcher waits for
// durability (the catch-up would hang until the socket timeout
// otherwise), and the follower ends byte-identical to the leader.
func TestFetchResponseAppendsShareOneGroup(t *testing.T) {
	var mu sync.Mutex
	holds := 0
	var inside []string // groups written while a hold was open
	var heldAt uint64   // the follower's journal groups when the open hold began
	groupsOf := func(nd *node) uint64 {
		st, ok := nd.eng.JournalStats()
		if !ok {
			t.Errorf("node %d has no journal", nd.id)
		}
		return st.Groups
	}
	c := newClusterWith(t, 2, 30000, 1, func(c *testCluster) {
		c.parts = 8
		c.journal = true
		// A fetcher waiting for durability inside the hold would wait out
		// this bound before going on: past the hang guard, so it fails.
		c.socketTimeoutMs = 2 * hangGuard.Milliseconds()
		c.hold = func(nd *node) {
			mu.Lock()
			defer mu.Unlock()
			holds++
			heldAt = groupsOf(nd)
		}
		c.release = func(nd *node) {
			mu.Lock()
			defer mu.Unlock()
			if g := groupsOf(nd); g != heldAt {
				inside = append(inside, fmt.Sprintf("hold %d: groups %d at its start, %d at its end", holds, heldAt, g))
			}
		}
	})
	leader, follower := c.nodes[1], c.nodes[2]

	// The follower is away while every partition takes records; it comes
	// back with the leader's address unknown until all eight partitions
	// are its, so that its first fetch asks for all of them.
	follower.stop()
	for part := range c.parts {
		for i := range 3 {
			appendOne(t, leader.logAt(part), fmt.Sprintf("p%d-%d", part, i))
		}
	}
	c.startWithEveryPartition(follower, leader)

	for part := range c.parts {
		ll, fl := leader.logAt(part), follower.logAt(part)
		end := ll.LogEndOffset()
		eventually(t, fmt.Sprintf("partition %d's follower to hold the leader's end %d durably", part, end),
			func() bool { return fl.DurableEnd() == end })
		if got, want := logBytes(t, fl), logBytes(t, ll); !bytes.Equal(got, want) {
			t.Fatalf("partition %d: follower holds %d bytes differing from the leader's %d", part, len(got), len(want))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if holds == 0 {
		t.Fatal("no fetch response's appends held the journal, although one response carried eight partitions")
	}
	if len(inside) > 0 {
		t.Fatalf("journal groups written while a fetch response's appends held it: %v", inside)
	}
}

// TestFetchResponseErrorsOutsideHold: a response that restarts one
// partition's log (its end is below the leader's log start; with tiered
// storage the restart asks remote storage, for up to tierStateTimeout)
// and carries records for two others handles the restart before it holds
// the journal, so no acknowledgement of the follower's broker waits for
// it.
func TestFetchResponseErrorsOutsideHold(t *testing.T) {
	c := newClusterWith(t, 2, 300, 1, func(c *testCluster) {
		c.parts = 3
		c.journal = true
		c.hold = func(nd *node) { c.logger.Info("test: journal held", "node", nd.id) }
		c.release = func(nd *node) { c.logger.Info("test: journal released", "node", nd.id) }
	})
	leader, follower := c.nodes[1], c.nodes[2]
	follower.stop()
	c.appendWhileAway(t, leader)
	ll0 := leader.logAt(0)
	eventually(t, "partition 0's HW to reach its end", func() bool { return ll0.HighWatermark() == ll0.LogEndOffset() })
	start, err := ll0.DeleteRecords(ll0.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	c.startWithEveryPartition(follower, leader)
	eventually(t, "partition 0's follower log to restart at the leader's log start", func() bool {
		return follower.logAt(0).LogStartOffset() == start
	})
	for part := int32(1); part < c.parts; part++ {
		end := leader.logAt(part).LogEndOffset()
		eventually(t, fmt.Sprintf("partition %d's follower to hold %d durably", part, end),
			func() bool { return follower.logAt(part).DurableEnd() == end })
	}

	held, restarts, holds := false, 0, 0
	for _, line := range strings.Split(c.logs.String(), "\n") {
		switch {
		case strings.Contains(line, "test: journal held"):
			held = true
			holds++
		case strings.Contains(line, "test: journal released"):
			held = false
		case strings.Contains(line, "restarting it"):
			restarts++
			if held {
				t.Fatalf("a log restarted while a fetch response's appends held the journal:\n%s", c.logs.String())
			}
		}
	}
	if restarts == 0 || holds == 0 {
		t.Fatalf("%d restarts and %d holds: the test needs both", restarts, holds)
	}
}

// appendWhileAway waits, partition by partition, until the ISR is the
// leader alone (the other broker is stopped; no ISR change is pushed
// while it comes back), then appends three records to the partition.
func (c *testCluster) appendWhileAway(t *testing.T, leader *node) {
	t.Helper()
	for part := range c.parts {
		eventually(t, fmt.Sprintf("partition %d's ISR to shrink to the leader", part), func() bool {
			st, _ := leader.mgr.Status(testTopic, part)
			return slices.Equal(st.ISR, []int32{leader.id})
		})
		for i := range 3 {
			appendOne(t, leader.logAt(part), fmt.Sprintf("p%d-%d", part, i))
		}
	}
}

// startWithEveryPartition starts nd with leader's address unknown until
// every partition of the topic is nd's, so that nd's first fetch from
// leader asks for all of them at once.
func (c *testCluster) startWithEveryPartition(nd, leader *node) {
	c.mu.Lock()
	c.isolated[leader.id] = true
	c.mu.Unlock()
	nd.start()
	c.push()
	c.mu.Lock()
	c.isolated[leader.id] = false
	c.mu.Unlock()
}

// TestFirstFetchCarriesPartitionsAddedWhileDialing: a broker back from a
// restart is handed its partitions one by one; those added while its
// fetcher connects to their leader go into the first fetch with the one
// that started the connection, not into fetches of their own. The first
// partition's dial is held until the other two are the follower's: the
// first response then carries records for all three, so when the fetcher
// first holds the journal over a response's appends none of the three has
// a record yet.
func TestFirstFetchCarriesPartitionsAddedWhileDialing(t *testing.T) {
	dialing := make(chan struct{}, 1)
	gate := make(chan struct{})
	var gateOn atomic.Bool // armed once the follower is about to come back
	var armed sync.Once
	var mu sync.Mutex
	var firstHold []int64 // the follower's log ends when it first held the journal
	var c *testCluster
	c = newClusterWith(t, 2, 300, 1, func(tc *testCluster) {
		tc.parts = 3
		tc.journal = true
		tc.dial = func(nd *node, ctx context.Context, addr string) (net.Conn, error) {
			if nd.id == 2 && gateOn.Load() {
				armed.Do(func() {
					dialing <- struct{}{}
					select {
					case <-gate:
					case <-ctx.Done():
					}
				})
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
		tc.hold = func(nd *node) {
			mu.Lock()
			defer mu.Unlock()
			if nd.id == 2 && firstHold == nil {
				for part := range c.parts {
					firstHold = append(firstHold, nd.logAt(part).LogEndOffset())
				}
			}
		}
		tc.release = func(*node) {}
	})
	var opened sync.Once
	openGate := func() { opened.Do(func() { close(gate) }) }
	t.Cleanup(openGate) // before the cluster stops: a held dial would wait out its timeout
	leader, follower := c.nodes[1], c.nodes[2]
	follower.stop()
	c.appendWhileAway(t, leader)
	gateOn.Store(true)
	follower.start()
	c.pushMu.Lock()
	c.pushPartition(0)
	select {
	case <-dialing:
	case <-time.After(hangGuard):
		c.pushMu.Unlock()
		t.Fatal("the follower's fetcher never dialed the leader")
	}
	c.pushPartition(1)
	c.pushPartition(2)
	c.pushMu.Unlock()
	openGate()

	for part := range c.parts {
		end := leader.logAt(part).LogEndOffset()
		eventually(t, fmt.Sprintf("partition %d's follower to hold %d durably", part, end),
			func() bool { return follower.logAt(part).DurableEnd() == end })
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(firstHold, []int64{0, 0, 0}) {
		t.Fatalf("log ends when the follower first held the journal: %v, want [0 0 0] (one response for all three)", firstHold)
	}
}
