package controller

import "testing"

// RaftStats: one leader and two voting followers in the same term, the
// leader's applied index moving with a proposal and reached by the
// followers; a closed node reports "shutdown".
func TestRaftStats(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	registerAll(t, l, 1)
	ls := l.RaftStats()
	if ls.Role != "leader" || !ls.Voter || ls.Term == 0 || ls.CommitIndex == 0 || ls.LastIndex < ls.CommitIndex {
		t.Fatalf("leader: %+v", ls)
	}
	r := mustPropose(t, l, RegisterBroker{ID: 1, IncarnationID: NewIncarnationID(), Host: "127.0.0.1", Port: 9093})
	eventually(t, "every node applied the proposal", func() bool {
		for _, nd := range c.nodes {
			if nd.Offset() < r.Offset {
				return false
			}
		}
		return true
	})
	after := l.RaftStats()
	if after.AppliedIndex <= ls.AppliedIndex || after.CommitIndex < after.AppliedIndex {
		t.Fatalf("leader after a proposal: %+v (before %+v)", after, ls)
	}
	f := c.follower()
	eventually(t, "the follower's applied index reaches the leader's", func() bool {
		return f.RaftStats().AppliedIndex >= after.AppliedIndex
	})
	fs := f.RaftStats()
	if fs.Role != "follower" || !fs.Voter || fs.Term != after.Term {
		t.Fatalf("follower: %+v, leader %+v", fs, after)
	}
	id := f.NodeID()
	c.stop(id)
	if st := f.RaftStats(); st.Role != "shutdown" {
		t.Fatalf("closed node: %+v", st)
	}
}
