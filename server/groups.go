package server

// Consumer groups (issue 6): the Server's side of the group coordinator.
//
// The coordinator (package group) is pure membership and offset logic; its
// host is broker/grouphost (grouphost.Host: the group.Log over
// __consumer_offsets, created locally on a single broker or proposed to
// the controller in a cluster, and the leader loop that loads the
// partitions this broker leads). This file builds the host from the
// Server's parts (the adapters are in coordhost.go) and keeps the entry
// points the group handlers and FindCoordinator use.

import (
	"github.com/stratalog/strata/broker/grouphost"
	"github.com/stratalog/strata/group"
	"github.com/twmb/franz-go/pkg/kerr"
)

// GroupsConfig configures the consumer-group coordinator (issue 6).
type GroupsConfig struct {
	// Coordinator holds the group.* settings (session timeout bounds,
	// initial rebalance delay, group.max.size, offset.metadata.max.bytes,
	// offsets.topic.num.partitions); zero fields take Kafka's defaults.
	Coordinator group.Config
	// ManualLoad leaves every __consumer_offsets partition unloaded at
	// start; the cluster layer loads those this broker leads.
	ManualLoad bool
	// Share configures share groups (KIP-932, share.go), which the group
	// coordinator hosts as in Kafka.
	Share ShareConfig
}

// groupsState is the Server's part for the consumer-group coordinator (issue 6).
type groupsState struct {
	coord *group.Coordinator // nil without an engine
	host  *grouphost.Host
	share shareState // share groups (share.go)
}

// Groups returns the group coordinator (nil if the server has no engine).
func (s *Server) Groups() *group.Coordinator { return s.groups.coord }

// initGroups is called by New after the Server is built.
func (s *Server) initGroups() {
	defer s.initShare() // share.go
	cfg := grouphost.Config{
		Engine:      s.eng,
		Coordinator: s.cfg.Groups.Coordinator,
		ManualLoad:  s.cfg.Groups.ManualLoad,
		LeaderCheck: s.clusterPartitionCheck,
		WhenAcked:   s.whenAcked,
		Creator:     hostCreator{s},
		Clock:       hostClock{s},
		Log:         s.log,
	}
	if s.clustered() {
		cfg.Cluster = hostSource{s}
	}
	s.groups.host = grouphost.New(cfg)
	s.groups.coord = s.groups.host.Coordinator()
}

// closeGroups is called by Close after connections are closed.
func (s *Server) closeGroups() {
	s.closeShare() // share.go
	if s.groups.host != nil {
		s.groups.host.Close()
	}
}

// groupCoordinator returns the coordinator, or the error code to answer
// when there is none.
func (s *Server) groupCoordinator() (*group.Coordinator, int16) {
	if s.groups.coord == nil {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	return s.groups.coord, 0
}

// groupCoordinatorNode returns the node that coordinates group key (cluster
// mode): the leader of its __consumer_offsets partition. Before the topic
// exists it starts its creation and answers COORDINATOR_NOT_AVAILABLE
// (clients retry), as Kafka does.
func (s *Server) groupCoordinatorNode(key string) (viewBroker, int16) {
	return s.coordinatorBroker(s.groups.host.Route(), key) // coordhost.go
}
