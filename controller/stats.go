package controller

import "github.com/hashicorp/raft"

// RaftStats are this node's Raft figures, for the broker's metrics.
type RaftStats struct {
	// Role is "leader", "follower", "candidate" or "shutdown" (Raft's
	// state of this node).
	Role string
	// Voter reports whether this node is a voter of the quorum (else it
	// replicates the log as a non-voter).
	Voter bool
	// Term is the current Raft term; CommitIndex the last log index known
	// committed; AppliedIndex the last index applied to the State;
	// LastIndex the last index in this node's log.
	Term, CommitIndex, AppliedIndex, LastIndex uint64
}

// RaftStats returns this node's Raft figures; safe for concurrent use,
// also after Close (Role "shutdown").
func (c *Controller) RaftStats() RaftStats {
	if c == nil || c.raft == nil {
		return RaftStats{Role: "shutdown"}
	}
	r := c.raft
	st := RaftStats{Voter: c.voter, Term: r.CurrentTerm(), CommitIndex: r.CommitIndex(), AppliedIndex: r.AppliedIndex(), LastIndex: r.LastIndex()}
	switch r.State() {
	case raft.Leader:
		st.Role = "leader"
	case raft.Candidate:
		st.Role = "candidate"
	case raft.Follower:
		st.Role = "follower"
	default:
		st.Role = "shutdown"
	}
	return st
}
