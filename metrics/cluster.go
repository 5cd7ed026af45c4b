package metrics

import "github.com/prometheus/client_golang/prometheus"

// Cluster events, counted by the broker from the changes of its metadata
// view, and the controller's Raft figures, read at scrape time.
const (
	ISRShrinks      = "strata_isr_shrinks_total"
	ISRExpands      = "strata_isr_expands_total"
	LeaderElections = "strata_leader_elections_total"

	ControllerRole         = "strata_controller_role"
	ControllerVoter        = "strata_controller_voter"
	ControllerTerm         = "strata_controller_raft_term"
	ControllerCommitIndex  = "strata_controller_raft_commit_index"
	ControllerAppliedIndex = "strata_controller_raft_applied_index"
	ControllerLastIndex    = "strata_controller_raft_last_index"
)

// ControllerRoles are the values of ControllerRole's label "role": one
// series each, 1 for this node's role and 0 for the others.
var ControllerRoles = []string{"leader", "follower", "candidate", "shutdown"}

// ISRShrink counts n in-sync replica set shrinks of partitions this broker
// leads.
func (b *Broker) ISRShrink(n int) {
	if b != nil && n > 0 {
		b.isrShrinks.Add(uint64(n))
	}
}

// ISRExpand counts n in-sync replica set expansions of partitions this
// broker leads.
func (b *Broker) ISRExpand(n int) {
	if b != nil && n > 0 {
		b.isrExpands.Add(uint64(n))
	}
}

// LeaderElection counts n partitions whose leadership moved to this
// broker.
func (b *Broker) LeaderElection(n int) {
	if b != nil && n > 0 {
		b.elections.Add(uint64(n))
	}
}

// RaftStats are a controller node's Raft figures at a scrape.
type RaftStats struct {
	Role                                       string // one of ControllerRoles
	Voter                                      bool
	Term, CommitIndex, AppliedIndex, LastIndex uint64
}

// SetController sets the source of the controller's figures, called at
// each scrape; ok false (no controller: a single broker) reports nothing.
func (b *Broker) SetController(f func() (RaftStats, bool)) { b.controller.Store(&f) }

var (
	descISRShrinks = prometheus.NewDesc(ISRShrinks,
		"In-sync replica set shrinks of partitions this broker leads, as its metadata showed them (changes applied together are seen as one).", nil, nil)
	descISRExpands = prometheus.NewDesc(ISRExpands,
		"In-sync replica set expansions of partitions this broker leads, as its metadata showed them.", nil, nil)
	descElections = prometheus.NewDesc(LeaderElections,
		"Partitions whose leadership moved to this broker (a new leader epoch with this broker as leader; a topic's first leaders not counted). Summed over the brokers: the cluster's elections.", nil, nil)
	descControllerRole = prometheus.NewDesc(ControllerRole,
		"This node's Raft role in the controller quorum: 1 for the current role, 0 for the others.", []string{"role"}, nil)
	descControllerVoter = prometheus.NewDesc(ControllerVoter,
		"1 if this node is a voter of the controller quorum, 0 for a non-voter.", nil, nil)
	descControllerTerm = prometheus.NewDesc(ControllerTerm,
		"The controller quorum's current Raft term as this node knows it.", nil, nil)
	descControllerCommit = prometheus.NewDesc(ControllerCommitIndex,
		"The last Raft log index this node knows committed.", nil, nil)
	descControllerApplied = prometheus.NewDesc(ControllerAppliedIndex,
		"The last Raft log index applied to this node's metadata state.", nil, nil)
	descControllerLast = prometheus.NewDesc(ControllerLastIndex,
		"The last index of this node's Raft log.", nil, nil)
)

func (b *Broker) collectCluster(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descISRShrinks, prometheus.CounterValue, float64(b.isrShrinks.Load()))
	ch <- prometheus.MustNewConstMetric(descISRExpands, prometheus.CounterValue, float64(b.isrExpands.Load()))
	ch <- prometheus.MustNewConstMetric(descElections, prometheus.CounterValue, float64(b.elections.Load()))
	f := b.controller.Load()
	if f == nil || *f == nil {
		return
	}
	s, ok := (*f)()
	if !ok {
		return
	}
	for _, r := range ControllerRoles {
		v := 0.0
		if r == s.Role {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descControllerRole, prometheus.GaugeValue, v, r)
	}
	voter := 0.0
	if s.Voter {
		voter = 1
	}
	ch <- prometheus.MustNewConstMetric(descControllerVoter, prometheus.GaugeValue, voter)
	for _, g := range []struct {
		d *prometheus.Desc
		v uint64
	}{{descControllerTerm, s.Term}, {descControllerCommit, s.CommitIndex}, {descControllerApplied, s.AppliedIndex}, {descControllerLast, s.LastIndex}} {
		ch <- prometheus.MustNewConstMetric(g.d, prometheus.GaugeValue, float64(g.v))
	}
}
