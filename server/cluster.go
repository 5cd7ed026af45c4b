package server

// Cluster mode (issue 5): the broker's part of a replicated cluster.
//
// With Config.Cluster.Controller nil the Server is a single broker: every
// topic is local, this broker leads every partition, admin requests call
// the engine directly. With a Controller the cluster metadata lives in the
// controller's Raft quorum and this file wires the broker to it:
//
//   - registration and heartbeats: broker/cluster's Membership (Join at
//     initCluster; ControlledShutdown and BrokerEpoch ask it).
//   - catching up: the watch goroutine acts only after the Membership
//     reports CaughtUp (this node's controller has applied the metadata up
//     to the broker's registration).
//   - the metadata view (watch goroutine): on every controller change it
//     builds an immutable view (broker/cluster's View: brokers, topics,
//     partitions with leader, ISR, epochs, reassignment), has
//     broker/cluster's Reconciler make the engine and the replica roles
//     match it (local replicas-only topics, logs created and dropped as
//     this broker becomes or stops being a replica, topic configs, leader
//     and follower roles), and then publishes it with one atomic store;
//     request handlers read it without locks. Publishing after the
//     reconcile means a handler that finds a partition in the view also
//     finds its local log and role in place.
//   - ISR changes: the replica manager's AlterPartition goes to the
//     controller through alterISR (broker/cluster's AlterISR) with this
//     broker's epoch; the replica manager is broker/cluster's
//     NewReplicaManager unless ClusterConfig.Replication says otherwise.
//   - request hooks: Produce and Fetch on a partition this broker does not
//     lead answer NOT_LEADER_OR_FOLLOWER (clients refresh metadata); admin
//     handlers propose controller commands and answer once this broker's
//     view has applied them, so a Metadata right after sees the change.
//
// # Goroutines and locks
//
// clusterState owns the watch goroutine and one per admin request waiting
// on a proposal, all tracked by wg and bounded by ctx, which closeCluster
// cancels before waiting; the Membership's heartbeat goroutine ends in its
// Close, which closeCluster calls in between. The view is replaced whole, never
// mutated. The Reconciler (and its roles) belongs to the watch goroutine
// alone. No lock of
// this file is held across a controller or engine call.

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/broker/cluster"
	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/replica"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ReplicaFetchConfig is how a follower fetches (replica.fetch.wait.max.ms,
// replica.fetch.min.bytes, replica.fetch.max.bytes,
// replica.fetch.response.max.bytes, replica.fetch.backoff.ms,
// replica.socket.timeout.ms); zero fields take Kafka's defaults.
type ReplicaFetchConfig struct {
	WaitMaxMs        int32
	MinBytes         int32
	MaxBytes         int32
	ResponseMaxBytes int32
	BackoffMs        int64
	SocketTimeoutMs  int64
}

// ClusterConfig configures replication and the controller (issue 5).
type ClusterConfig struct {
	// Controller is this node's member of the metadata quorum (voter or
	// observer); nil runs a single broker without a controller. The Server
	// does not close it: the caller closes it after Server.Close.
	Controller *controller.Controller
	// Rack is broker.rack ("" = none); placement spreads replicas over racks.
	Rack string
	// HeartbeatInterval is broker.heartbeat.interval.ms (default 2s; keep
	// it well below the controller's broker.session.timeout.ms).
	HeartbeatInterval time.Duration
	// MinInsyncReplicas is the broker default of min.insync.replicas (1).
	MinInsyncReplicas int
	// ReplicaLagTimeMax is replica.lag.time.max.ms (default 30s): a
	// follower not caught up for this long leaves the ISR.
	ReplicaLagTimeMax time.Duration
	// ReplicaFetch is how followers fetch from their leaders; zero fields
	// take Kafka's defaults (package replica).
	ReplicaFetch ReplicaFetchConfig
	// Replication, if set, is called once by New to build the replica
	// manager that runs leader and follower roles instead of the replica
	// package's Manager (tests).
	Replication func(ReplicationEnv) ReplicaManager
	// Dial opens connections to other brokers' inter-broker listeners
	// (follower fetches, transaction markers): TLS when that listener is
	// SSL (inter.broker.listener.name). nil: plain TCP.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Endpoints are every listener's advertised endpoint (AdvertisedEndpoint
	// of each bound listener), registered with the controller so that
	// Metadata, FindCoordinator and DescribeCluster answer a client with
	// the brokers' addresses on the listener it connected to, as Kafka
	// does. nil: the inter-broker listener's endpoint is the only one
	// registered and every client is told it.
	Endpoints []controller.Endpoint
}

// ReplicationEnv, PartitionRole and ReplicaManager are broker/cluster's:
// the replica manager's interface and what it gets from the broker.
type (
	ReplicationEnv = cluster.ReplicationEnv
	PartitionRole  = cluster.PartitionRole
	ReplicaManager = cluster.ReplicaManager
)

// Cluster key names that are topic configs but not engine (log) configs.
const (
	cfgMinInsync = cluster.ConfigMinInsync
	cfgUnclean   = cluster.ConfigUnclean
)

// The controller's metadata as request handlers see it: broker/cluster's
// immutable View.
type (
	clusterView   = cluster.View
	viewBroker    = cluster.Broker
	viewTopic     = cluster.Topic
	viewPartition = cluster.Partition
)

// DefaultHeartbeatInterval is Kafka's broker.heartbeat.interval.ms.
const DefaultHeartbeatInterval = cluster.DefaultHeartbeatInterval

// clusterState is the Server's part for replication and the controller.
type clusterState struct {
	ctl    *controller.Controller // nil: single broker
	repl   ReplicaManager         // nil: no replication
	view   atomic.Pointer[clusterView]
	member *cluster.Membership // registration and heartbeats: Epoch, CaughtUp
	// ready is closed once the first view after catching up on the
	// metadata is published; until then requests wait (awaitReady).
	ready chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	reconciler *cluster.Reconciler // watch goroutine only

	listeners listenerSet // listeners.go: every listener's advertised address (single broker or cluster)

	sec *cluster.SecuritySync // cluster_security.go: the replicated ACLs, credentials and quotas applied
}

// clustered reports whether the Server runs with a controller.
func (s *Server) clustered() bool { return s.cluster.ctl != nil }

// initCluster is called by New after the Server is built.
func (s *Server) initCluster() {
	c := &s.cluster
	c.ctl = s.cfg.Cluster.Controller
	if c.ctl == nil {
		return
	}
	if s.cfg.Cluster.MinInsyncReplicas <= 0 {
		s.cfg.Cluster.MinInsyncReplicas = 1
	}
	c.ready = make(chan struct{})
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.view.Store(cluster.EmptyView())
	env := ReplicationEnv{BrokerID: s.cfg.NodeID, BrokerAddr: s.brokerAddr, AlterISR: s.alterISR,
		BrokerEpoch: s.BrokerEpoch, Registration: s.registration}
	if f := s.cfg.Cluster.Replication; f != nil {
		c.repl = f(env)
	} else {
		rf := s.cfg.Cluster.ReplicaFetch
		c.repl = cluster.NewReplicaManager(env, replica.Config{
			Dial:                  s.cfg.Cluster.Dial,
			LagTimeMaxMs:          s.cfg.Cluster.ReplicaLagTimeMax.Milliseconds(),
			FetchWaitMaxMs:        rf.WaitMaxMs,
			FetchMinBytes:         rf.MinBytes,
			FetchMaxBytes:         rf.MaxBytes,
			FetchResponseMaxBytes: rf.ResponseMaxBytes,
			FetchBackoffMs:        rf.BackoffMs,
			SocketTimeoutMs:       rf.SocketTimeoutMs,
			Logger:                s.log,
			TierState:             s.tierState, // remote_tier.go
			// A fetch response's appends share one journal group.
			HoldAppends: s.eng.HoldJournal, ReleaseAppends: s.eng.ReleaseJournal,
		})
	}
	c.reconciler = cluster.NewReconciler(s.cfg.NodeID, s.eng, c.repl, s.cfg.Cluster.MinInsyncReplicas, s.log)
	c.member = cluster.Join(cluster.MembershipConfig{
		NodeID: s.cfg.NodeID, Controller: c.ctl, Rack: s.cfg.Cluster.Rack,
		HeartbeatInterval: s.cfg.Cluster.HeartbeatInterval, Advertised: s.Advertised, Log: s.log,
		OfflineDir: func() bool { return s.eng.Offline() != nil }, // KIP-112: the controller moves leadership away
		Listeners:  s.cfg.Cluster.Endpoints,
	})
	w := c.ctl.Watch()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer w.Close()
		s.watchLoop(w)
	}()
	s.startSecuritySync() // cluster_security.go
}

// closeCluster is called by Close after connections are closed.
func (s *Server) closeCluster() {
	c := &s.cluster
	if c.ctl == nil {
		return
	}
	c.cancel()
	c.member.Close()
	c.wg.Wait()
	if c.repl != nil {
		if err := c.repl.Close(); err != nil {
			s.log.Warn("closing replica manager", "err", err)
		}
	}
}

// ControlledShutdown asks the controller to move this broker's leaderships
// away (Kafka's controlled shutdown) and waits until it has, or ctx ends.
// Call it before Close; a single broker returns nil at once.
func (s *Server) ControlledShutdown(ctx context.Context) error {
	if s.cluster.ctl == nil {
		return nil
	}
	return s.cluster.member.ControlledShutdown(ctx)
}

// BrokerEpoch is the epoch of this broker's current registration (0 before
// it registered or in single-broker mode).
func (s *Server) BrokerEpoch() int64 {
	if s.cluster.ctl == nil {
		return 0
	}
	return s.cluster.member.Epoch()
}

// ---- the view ----

func (s *Server) watchLoop(w *controller.Watcher) {
	c := &s.cluster
	select {
	case <-c.member.CaughtUp():
	case <-c.ctx.Done():
		return
	}
	var retry <-chan time.Time
	first := true // build at once: the metadata caught up with may not signal w
	for {
		if !first {
			select {
			case <-c.ctx.Done():
				return
			case <-w.C():
			case <-retry:
			}
		}
		// Reconcile first, then publish: a handler that sees a partition in
		// the view finds its local log and its role already in place.
		v := cluster.BuildView(c.ctl)
		retry = nil
		if !c.reconciler.Reconcile(v) {
			retry = time.After(500 * time.Millisecond)
		}
		old := c.view.Swap(v)
		close(old.Changed)
		s.meterView(old, v) // metrics.go: ISR changes and elections
		if first {
			first = false
			close(c.ready)
		}
	}
}

// awaitReady holds a request until this broker has caught up on the
// metadata and published its first view (cluster mode; at once on a
// single broker), as Kafka enables request processing only after the
// broker's initial metadata catch-up: a restarted broker answering from an
// empty view would tell clients its topics do not exist
// (UNKNOWN_TOPIC_OR_PARTITION, which franz-go fails records on after four
// tries). False when the server stops first.
func (s *Server) awaitReady() bool {
	ready := s.cluster.ready
	if ready == nil {
		return true
	}
	select {
	case <-ready:
		return true
	default:
	}
	select {
	case <-ready:
		return true
	case <-s.cluster.ctx.Done():
		return false
	}
}

// waitView waits until this broker's view has applied metadata offset off.
func (s *Server) waitView(ctx context.Context, off int64) error {
	for {
		v := s.cluster.view.Load()
		if v.Offset >= off {
			return nil
		}
		select {
		case <-v.Changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// brokerAddr is ReplicationEnv.BrokerAddr.
func (s *Server) brokerAddr(id int32) (string, bool) {
	b, ok := s.cluster.view.Load().Broker(id)
	if !ok || b.Fenced {
		return "", false
	}
	return b.Host + ":" + strconv.Itoa(int(b.Port)), true
}

// controllerID is the Raft leader's node id, or -1 while there is none.
func (s *Server) controllerID() int32 {
	if id, ok := s.cluster.ctl.Leader(); ok {
		return id
	}
	return -1
}

// alterISR is ReplicationEnv.AlterISR.
func (s *Server) alterISR(ctx context.Context, topic string, partition, leaderEpoch, partitionEpoch int32, isr []int32, isrEpochs []int64) (controller.PartitionResult, error) {
	return cluster.AlterISR(ctx, s.cluster.ctl, s.cfg.NodeID, s.cluster.member.Epoch(), topic, partition, leaderEpoch, partitionEpoch, isr, isrEpochs)
}

// registration is ReplicationEnv.Registration: broker id's registration
// in this broker's view (KIP-903's checks of follower fetches).
func (s *Server) registration(id int32) replica.Registration {
	b, ok := s.cluster.view.Load().Broker(id)
	if !ok {
		return replica.Registration{}
	}
	return replica.Registration{Registered: true, Alive: !b.Fenced, Epoch: b.Epoch}
}

// splitClusterConfigs validates the cluster-level keys of a topic's configs
// and returns the engine's share.
func splitClusterConfigs(m map[string]string) (map[string]string, error) {
	if v, ok := m[cfgMinInsync]; ok {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return nil, newAPIError(kerr.InvalidConfig, "%s=%q: must be an integer >= 1", cfgMinInsync, v)
		}
	}
	if v, ok := m[cfgUnclean]; ok {
		if _, err := strconv.ParseBool(v); err != nil {
			return nil, newAPIError(kerr.InvalidConfig, "%s=%q: must be true or false", cfgUnclean, v)
		}
	}
	return engineConfigs(m), nil
}

// engineConfigs drops the cluster-level keys the engine does not know.
func engineConfigs(m map[string]string) map[string]string { return cluster.EngineConfigs(m) }

// minInsync is vt's min.insync.replicas (its config, else the broker's,
// dynamic or static: dynconfig.go).
func (s *Server) minInsync(vt *viewTopic) int {
	return cluster.MinInsync(vt, s.minInsyncDefault())
}

// ---- request hooks ----

// clusterPartitionCheck is the Produce and Fetch hook: 0 when this broker
// may serve topic's partition as leader, else the Kafka error code
// (NOT_LEADER_OR_FOLLOWER: clients refresh metadata and retry).
func (s *Server) clusterPartitionCheck(topic *engine.Topic, partition int32) int16 {
	if s.cluster.ctl == nil {
		return 0
	}
	vt := s.cluster.view.Load().Topics[topic.Name()]
	if vt == nil {
		if strings.HasPrefix(topic.Name(), "__") {
			return 0 // a coordinator's local internal topic
		}
		return kerr.UnknownTopicOrPartition.Code
	}
	if vt.ID != topic.ID() || partition < 0 || int(partition) >= len(vt.Parts) {
		return kerr.UnknownTopicOrPartition.Code
	}
	if vt.Parts[partition].Leader != s.cfg.NodeID {
		return kerr.NotLeaderForPartition.Code
	}
	return 0
}

// partitionExists reports whether topic/partition exists in the cluster
// (cluster mode: the controller's view; single broker: the engine), whether
// or not this broker hosts it. Group and transaction requests check
// partitions this way, as Kafka checks its metadata cache.
func (s *Server) partitionExists(topic string, partition int32) bool {
	if partition < 0 {
		return false
	}
	if s.clustered() {
		vt := s.cluster.view.Load().Topics[topic]
		return vt != nil && int(partition) < len(vt.Parts)
	}
	if s.eng == nil {
		return false
	}
	t := s.eng.Topic(topic)
	return t != nil && t.Partition(partition) != nil
}

// noLogCode is the error for a partition of a local topic that has no log
// here: in a cluster, NOT_LEADER_OR_FOLLOWER when the controller knows the
// partition (this broker is not one of its replicas; clients refresh
// metadata and go to the leader, as Kafka's ReplicaManager answers),
// otherwise UNKNOWN_TOPIC_OR_PARTITION.
func (s *Server) noLogCode(topic *engine.Topic, partition int32) int16 {
	if s.cluster.ctl != nil {
		vt := s.cluster.view.Load().Topics[topic.Name()]
		if vt != nil && vt.ID == topic.ID() && partition >= 0 && int(partition) < len(vt.Parts) {
			return kerr.NotLeaderForPartition.Code
		}
	}
	return kerr.UnknownTopicOrPartition.Code
}

// clusterProduceCheck is the Produce hook before Append: leadership, then
// the replica manager's check (NOT_ENOUGH_REPLICAS for acks=-1 below
// min.insync.replicas).
func (s *Server) clusterProduceCheck(topic *engine.Topic, partition int32, acks int16) (int16, string) {
	if code := s.clusterPartitionCheck(topic, partition); code != 0 {
		return code, ""
	}
	if s.cluster.repl == nil {
		return 0, ""
	}
	l := topic.Partition(partition)
	if l == nil {
		return 0, "" // producePartition answers UNKNOWN_TOPIC_OR_PARTITION
	}
	if err := s.cluster.repl.CheckProduce(l, acks); err != nil {
		return errCode(err), err.Error()
	}
	return 0, ""
}

// whenAcked calls fn once an acks=-1 append up to last may be acknowledged:
// durable here (single broker), or committed to the ISR (replicated).
func (s *Server) whenAcked(l *engine.Log, last int64, fn func(error)) {
	if s.cluster.repl != nil {
		s.cluster.repl.WaitReplicated(l, last, fn)
		return
	}
	l.WhenDurable(last, fn)
}

// goAdmin runs an admin request's controller work on a goroutine owned by
// the cluster state; ctx ends at timeout or when the Server closes.
func (s *Server) goAdmin(timeoutMs int32, fn func(ctx context.Context)) {
	d := time.Duration(timeoutMs) * time.Millisecond
	if d <= 0 || d > 5*time.Minute {
		d = 30 * time.Second
	}
	c := &s.cluster
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, d)
		defer cancel()
		fn(ctx)
	}()
}
