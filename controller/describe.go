package controller

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Describing the quorum (KIP-919, DescribeQuorum and DescribeCluster on
// a controller listener). hashicorp/raft keeps its followers' match
// indexes and last contacts to itself, so a node asks every member of
// the Raft configuration for its own figures over the controller RPC
// (kind rpcDescribe, empty payload; answer: nodeInfo) and reports what
// each answered, when, and the Kafka endpoints it serves controller
// clients on. A member that does not answer within the call's time
// keeps the figures and times of its last answer to this node (none:
// -1).
//
// Offsets: Raft indexes start at 1, Kafka offsets at 0, so a log of
// entries 1..N is offsets 0..N-1 and its end offset is N: a member's
// LogEndOffset is its last Raft index and the high watermark the
// leader's commit index.

// QuorumMember is one member of the Raft configuration as DescribeQuorum
// reports it.
type QuorumMember struct {
	ID int32
	// Voter: a voter of the quorum (else an observer, a Raft non-voter).
	Voter bool
	// LogEndOffset is the member's last Raft index (-1: never heard from).
	LogEndOffset int64
	// LastFetchMs is when this node last heard the member's figures (ms
	// since the epoch, Config.Now; -1: never); LastCaughtUpMs when the
	// member last answered with a log reaching the leader's commit index
	// as this node knew it before asking (-1: never).
	LastFetchMs, LastCaughtUpMs int64
	// Endpoints are the member's controller listeners
	// (SetKafkaEndpoints), as it last told them.
	Endpoints []Endpoint
}

// QuorumInfo is the quorum as this node sees it.
type QuorumInfo struct {
	LeaderID      int32 // -1: no leader known
	Term          uint64
	HighWatermark int64 // the leader's commit index (this node's when the leader did not answer)
	Voters        []QuorumMember
	Observers     []QuorumMember
}

// nodeInfo is the rpcDescribe answer.
type nodeInfo struct {
	term, lastIndex, commitIndex uint64
	leader                       bool
	endpoints                    []Endpoint
}

func appendNodeInfo(b []byte, n nodeInfo) []byte {
	b = appendInt(b, int64(n.term))
	b = appendInt(b, int64(n.lastIndex))
	b = appendInt(b, int64(n.commitIndex))
	b = appendBool(b, n.leader)
	return appendEndpoints(b, n.endpoints)
}

func decodeNodeInfo(p []byte) (nodeInfo, error) {
	r := &reader{b: p}
	n := nodeInfo{term: uint64(r.int64()), lastIndex: uint64(r.int64()), commitIndex: uint64(r.int64()), leader: r.bool()}
	n.endpoints = readEndpoints(r)
	return n, r.done()
}

// describeState is the Controller's memory of the members' answers.
type describeState struct {
	endpoints atomic.Pointer[[]Endpoint] // this node's controller listeners
	mu        sync.Mutex
	seen      map[int32]QuorumMember // the last answer of each member, by id
	// flight is the DescribeQuorum under way, which concurrent callers
	// share (one fan-out at a time, however many clients ask).
	flightMu sync.Mutex
	flight   *describeFlight
}

type describeFlight struct {
	done chan struct{}
	q    QuorumInfo
	err  error
}

// SetKafkaEndpoints sets the Kafka-protocol listeners on which this node
// serves controller clients (controller.listener.names): what its
// rpcDescribe answers tell the other nodes, for DescribeCluster and
// DescribeQuorum v2.
func (c *Controller) SetKafkaEndpoints(eps []Endpoint) {
	eps = append([]Endpoint(nil), eps...)
	c.desc.endpoints.Store(&eps)
}

func (c *Controller) localInfo() nodeInfo {
	n := nodeInfo{}
	if p := c.desc.endpoints.Load(); p != nil {
		n.endpoints = *p
	}
	<-c.raftReady
	if c.raft == nil {
		return n
	}
	n.term, n.lastIndex, n.commitIndex = c.raft.CurrentTerm(), c.raft.LastIndex(), c.raft.CommitIndex()
	n.leader = c.raft.State() == raft.Leader
	return n
}

// handleDescribe answers rpcDescribe with this node's figures.
func (c *Controller) handleDescribe(payload []byte) (byte, []byte) {
	if len(payload) != 0 {
		return statusFailed, []byte("bad describe request")
	}
	return statusOK, appendNodeInfo(nil, c.localInfo())
}

// describeTimeout bounds one member's answer to DescribeQuorum.
const describeTimeout = 2 * time.Second

// DescribeQuorum asks every member of the Raft configuration for its
// figures (in parallel, each within describeTimeout) and returns the
// quorum as this node sees it, voters and observers sorted by id. Callers
// that ask while an answer is being gathered share it; ctx bounds the
// wait.
func (c *Controller) DescribeQuorum(ctx context.Context) (QuorumInfo, error) {
	d := &c.desc
	d.flightMu.Lock()
	f := d.flight
	if f == nil {
		f = &describeFlight{done: make(chan struct{})}
		d.flight = f
		go func() { // ends within describeTimeout
			f.q, f.err = c.describeQuorum(context.Background())
			d.flightMu.Lock()
			d.flight = nil
			d.flightMu.Unlock()
			close(f.done)
		}()
	}
	d.flightMu.Unlock()
	select {
	case <-f.done:
		return f.q, f.err
	case <-ctx.Done():
		return QuorumInfo{}, ctx.Err()
	}
}

func (c *Controller) describeQuorum(ctx context.Context) (QuorumInfo, error) {
	<-c.raftReady
	if c.raft == nil {
		return QuorumInfo{}, ErrClosed
	}
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return QuorumInfo{}, fmt.Errorf("controller: raft configuration: %w", err)
	}
	servers := f.Configuration().Servers
	leaderID, _ := c.Leader()
	self := c.localInfo()
	// Caught up: at least the commit index known before asking.
	target := self.commitIndex
	type answer struct {
		info nodeInfo
		ok   bool
	}
	answers := make([]answer, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		id, err := strconv.ParseInt(string(s.ID), 10, 32)
		if err != nil {
			continue
		}
		if int32(id) == c.cfg.NodeID {
			answers[i] = answer{self, true}
			continue
		}
		wg.Add(1)
		go func(i int, addr string) { // ends within describeTimeout
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, describeTimeout)
			defer cancel()
			st, body, err := rpcCall(cctx, c.cfg.peerSecurity(), addr, rpcDescribe, nil)
			if err != nil || st != statusOK {
				return
			}
			if n, err := decodeNodeInfo(body); err == nil {
				answers[i] = answer{n, true}
			}
		}(i, string(s.Address))
	}
	wg.Wait()
	now := c.cfg.Now().UnixMilli()
	q := QuorumInfo{LeaderID: leaderID, Term: self.term, HighWatermark: int64(self.commitIndex)}
	for _, a := range answers {
		if a.ok && a.info.leader {
			q.Term, q.HighWatermark = a.info.term, int64(a.info.commitIndex)
		}
	}
	c.desc.mu.Lock()
	defer c.desc.mu.Unlock()
	if c.desc.seen == nil {
		c.desc.seen = map[int32]QuorumMember{}
	}
	for i, s := range servers {
		id64, err := strconv.ParseInt(string(s.ID), 10, 32)
		if err != nil {
			continue
		}
		id := int32(id64)
		m, known := c.desc.seen[id]
		if !known {
			m = QuorumMember{ID: id, LogEndOffset: -1, LastFetchMs: -1, LastCaughtUpMs: -1}
		}
		m.Voter = s.Suffrage == raft.Voter
		if a := answers[i]; a.ok {
			m.LogEndOffset, m.LastFetchMs, m.Endpoints = int64(a.info.lastIndex), now, a.info.endpoints
			if a.info.lastIndex >= target {
				m.LastCaughtUpMs = now
			}
		}
		c.desc.seen[id] = m
		if m.Voter {
			q.Voters = append(q.Voters, m)
		} else {
			q.Observers = append(q.Observers, m)
		}
	}
	sortMembers(q.Voters)
	sortMembers(q.Observers)
	return q, nil
}

func sortMembers(ms []QuorumMember) {
	for i := 1; i < len(ms); i++ { // a handful of members
		for j := i; j > 0 && ms[j].ID < ms[j-1].ID; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
}
