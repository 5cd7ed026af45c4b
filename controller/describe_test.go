package controller

import (
	"fmt"
	"testing"
	"time"
)

// TestDescribeQuorum: a follower describes a three-voter quorum with the
// leader, each voter's log end offset and controller listeners (asked
// over the controller RPC), and, once a voter stops, keeps that voter's
// last answer with its old fetch time.
func TestDescribeQuorum(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	for id, nd := range c.nodes {
		nd.SetKafkaEndpoints([]Endpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 19000 + id}})
	}
	r := mustPropose(t, l, RegisterBroker{ID: 7, IncarnationID: NewIncarnationID(), Host: "h", Port: 1})
	c.converged(r.Offset)
	f := c.follower()
	q, err := f.DescribeQuorum(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if q.LeaderID != l.NodeID() || q.Term == 0 || q.HighWatermark < r.Offset {
		t.Fatalf("quorum %+v: want leader %d, a term, high watermark >= %d", q, l.NodeID(), r.Offset)
	}
	if len(q.Voters) != 3 || len(q.Observers) != 0 {
		t.Fatalf("voters %+v observers %+v", q.Voters, q.Observers)
	}
	now := c.clock.now().UnixMilli()
	for i, v := range q.Voters {
		if v.ID != int32(i) || !v.Voter || v.LogEndOffset < r.Offset || v.LastFetchMs != now || v.LastCaughtUpMs != now {
			t.Fatalf("voter %d: %+v (now %d, offset %d)", i, v, now, r.Offset)
		}
		if len(v.Endpoints) != 1 || v.Endpoints[0].Port != 19000+v.ID || v.Endpoints[0].Name != "CONTROLLER" {
			t.Fatalf("voter %d endpoints %+v", v.ID, v.Endpoints)
		}
	}
	// A stopped voter keeps its last answer; the others are fetched anew.
	var down int32 = -1
	for id := range c.nodes {
		if id != l.NodeID() && id != f.NodeID() {
			down = id
		}
	}
	c.stop(down)
	c.clock.advance(5 * time.Second)
	q, err = f.DescribeQuorum(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range q.Voters {
		want := now + 5000
		if v.ID == down {
			want = now
		}
		if v.LastFetchMs != want || len(v.Endpoints) != 1 {
			t.Fatalf("voter %d (down %d): %+v, want last fetch %d", v.ID, down, v, want)
		}
	}
}

// TestDescribeQuorumConcurrent: callers asking at once share answers and
// each gets the whole quorum.
func TestDescribeQuorumConcurrent(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			q, err := l.DescribeQuorum(testCtx(t))
			if err == nil && (len(q.Voters) != 3 || q.LeaderID != l.NodeID()) {
				err = fmt.Errorf("quorum %+v", q)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
