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
//     builds an immutable clusterView (brokers, topics, partitions with
//     leader, ISR, epochs, reassignment) and publishes it with one atomic
//     store; request handlers read it without locks. Then it reconciles the
//     engine with the view: topics the controller knows are created locally
//     with the controller's topic id and partition count as replicas-only
//     topics (engine/cluster.go): every broker knows every topic, but holds
//     a log only for the partitions it is a replica of. A partition this
//     broker becomes a replica of (a reassignment adding it) gets an empty
//     log that its follower role fills from the leader; one it is no longer
//     a replica of (the reassignment that removed it completed: until then
//     the controller lists it among the replicas) loses its role and then
//     its log (Kafka's StopReplica with delete). Topics it no longer knows
//     are deleted (names starting with
//     "__" that the controller never knew are left alone: coordinators create
//     them locally), and role changes (leader / follower / none, by leader
//     epoch and partition epoch) go to the ReplicaManager (package replica
//     unless ClusterConfig.Replication says otherwise). The view is
//     published after the reconcile, so a handler that finds a partition
//     in it also finds its local log and role in place.
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
// mutated. The roles map belongs to the watch goroutine alone. No lock of
// this file is held across a controller or engine call.

import (
	"context"
	"errors"
	"maps"
	"net"
	"sort"
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
	// Replication, if set, is called once by New to build the replica
	// manager that runs leader and follower roles instead of the replica
	// package's Manager (tests).
	Replication func(ReplicationEnv) ReplicaManager
	// Dial opens connections to other brokers' inter-broker listeners
	// (follower fetches, transaction markers): TLS when that listener is
	// SSL (inter.broker.listener.name). nil: plain TCP.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
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
	cfgMinInsync = "min.insync.replicas"
	cfgUnclean   = "unclean.leader.election.enable"
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

	roles   map[rolesKey]appliedRole     // watch goroutine only
	configs map[string]map[string]string // watch goroutine only: controller configs applied per topic

	listeners listenerSet // listeners.go: every listener's advertised address (single broker or cluster)

	sec securitySync // cluster_security.go: the replicated ACLs, credentials and quotas applied
}

type rolesKey struct {
	topic string
	part  int32
}

type appliedRole struct {
	id             [16]byte
	leader         bool
	leaderEpoch    int32
	partitionEpoch int32
	minISR         int
}

// clusterView is an immutable snapshot of the controller state for request
// handlers. changed is closed when a newer view replaces it.
type clusterView struct {
	offset  int64
	brokers []viewBroker // registered brokers, ascending id
	topics  map[string]*viewTopic
	byID    map[[16]byte]*viewTopic
	changed chan struct{}
}

type viewBroker struct {
	id     int32
	host   string
	port   int32
	rack   string
	fenced bool // fenced or shutting down
}

type viewTopic struct {
	name    string
	id      [16]byte
	configs map[string]string
	parts   []viewPartition
}

type viewPartition struct {
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32
	offline        []int32 // replicas that are not registered, fenced or shutting down
	adding         []int32
	removing       []int32
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
	c.roles = make(map[rolesKey]appliedRole)
	c.configs = make(map[string]map[string]string)
	c.ready = make(chan struct{})
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.view.Store(&clusterView{topics: map[string]*viewTopic{}, byID: map[[16]byte]*viewTopic{}, changed: make(chan struct{})})
	env := ReplicationEnv{BrokerID: s.cfg.NodeID, BrokerAddr: s.brokerAddr, AlterISR: s.alterISR}
	if f := s.cfg.Cluster.Replication; f != nil {
		c.repl = f(env)
	} else {
		c.repl = cluster.NewReplicaManager(env, replica.Config{
			Dial:         s.cfg.Cluster.Dial,
			LagTimeMaxMs: s.cfg.Cluster.ReplicaLagTimeMax.Milliseconds(),
			Logger:       s.log,
		})
	}
	c.member = cluster.Join(cluster.MembershipConfig{
		NodeID: s.cfg.NodeID, Controller: c.ctl, Rack: s.cfg.Cluster.Rack,
		HeartbeatInterval: s.cfg.Cluster.HeartbeatInterval, Advertised: s.Advertised, Log: s.log,
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
		v := buildView(c.ctl)
		retry = nil
		if !s.reconcile(v) {
			retry = time.After(500 * time.Millisecond)
		}
		old := c.view.Swap(v)
		close(old.changed)
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

func buildView(ctl *controller.Controller) *clusterView {
	v := &clusterView{changed: make(chan struct{})}
	ctl.Read(func(st *controller.State) {
		v.offset = st.Offset()
		live := map[int32]bool{}
		for _, b := range st.Brokers() {
			v.brokers = append(v.brokers, viewBroker{id: b.ID, host: b.Host, port: b.Port, rack: b.Rack, fenced: !b.Live()})
			live[b.ID] = b.Live()
		}
		topics := st.Topics()
		v.topics = make(map[string]*viewTopic, len(topics))
		v.byID = make(map[[16]byte]*viewTopic, len(topics))
		for _, t := range topics {
			vt := &viewTopic{name: t.Name, id: t.ID, configs: make(map[string]string, len(t.Configs)),
				parts: make([]viewPartition, len(t.Partitions))}
			for k, val := range t.Configs {
				vt.configs[k] = val
			}
			for i := range t.Partitions {
				p := &t.Partitions[i]
				vp := viewPartition{
					leader: p.Leader, leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch,
					replicas: cloneIDs(p.Replicas), isr: cloneIDs(p.ISR),
					adding: cloneIDs(p.Adding), removing: cloneIDs(p.Removing),
				}
				for _, r := range p.Replicas {
					if !live[r] {
						vp.offline = append(vp.offline, r)
					}
				}
				vt.parts[i] = vp
			}
			v.topics[t.Name] = vt
			v.byID[t.ID] = vt
		}
	})
	return v
}

func cloneIDs(v []int32) []int32 {
	if len(v) == 0 {
		return []int32{}
	}
	return append(make([]int32, 0, len(v)), v...)
}

// waitView waits until this broker's view has applied metadata offset off.
func (s *Server) waitView(ctx context.Context, off int64) error {
	for {
		v := s.cluster.view.Load()
		if v.offset >= off {
			return nil
		}
		select {
		case <-v.changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// broker returns a registered broker of v.
func (v *clusterView) broker(id int32) (viewBroker, bool) {
	i := sort.Search(len(v.brokers), func(i int) bool { return v.brokers[i].id >= id })
	if i < len(v.brokers) && v.brokers[i].id == id {
		return v.brokers[i], true
	}
	return viewBroker{}, false
}

// liveBrokers counts the unfenced brokers.
func (v *clusterView) liveBrokers() int {
	n := 0
	for _, b := range v.brokers {
		if !b.fenced {
			n++
		}
	}
	return n
}

// brokerAddr is ReplicationEnv.BrokerAddr.
func (s *Server) brokerAddr(id int32) (string, bool) {
	b, ok := s.cluster.view.Load().broker(id)
	if !ok || b.fenced {
		return "", false
	}
	return b.host + ":" + strconv.Itoa(int(b.port)), true
}

// controllerID is the Raft leader's node id, or -1 while there is none.
func (s *Server) controllerID() int32 {
	if id, ok := s.cluster.ctl.Leader(); ok {
		return id
	}
	return -1
}

// alterISR is ReplicationEnv.AlterISR.
func (s *Server) alterISR(ctx context.Context, topic string, partition, leaderEpoch, partitionEpoch int32, isr []int32) (controller.PartitionResult, error) {
	return cluster.AlterISR(ctx, s.cluster.ctl, s.cfg.NodeID, s.cluster.member.Epoch(), topic, partition, leaderEpoch, partitionEpoch, isr)
}

// ---- reconciling the engine and the roles with the view ----

// reconcile makes the local logs and roles match v; false means something
// failed and should be retried.
func (s *Server) reconcile(v *clusterView) bool {
	ok := true
	self := s.cfg.NodeID
	names := make([]string, 0, len(v.topics))
	for n := range v.topics {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		vt := v.topics[name]
		et := s.eng.Topic(name)
		if et != nil && et.ID() != vt.id {
			s.stopRoles(name)
			if err := s.eng.DeleteTopic(name); err != nil {
				s.log.Warn("cluster: deleting stale local topic", "topic", name, "err", err)
				ok = false
				continue
			}
			s.log.Info("cluster: deleted local topic replaced by a new one", "topic", name)
			et = nil
		}
		n := int32(len(vt.parts))
		if et == nil {
			var hosted []int32
			for i := range vt.parts {
				if containsID(vt.parts[i].replicas, self) {
					hosted = append(hosted, int32(i))
				}
			}
			var err error
			et, err = s.eng.CreateReplicaTopic(name, vt.id, n, engineConfigs(vt.configs), hosted)
			if err != nil {
				s.log.Warn("cluster: creating local topic", "topic", name, "err", err)
				ok = false
				continue
			}
			s.log.Info("cluster: created local topic", "topic", name, "partitions", n, "replicas_here", hosted)
		} else if et.Partitions() < n {
			if err := s.eng.GrowReplicaTopic(name, n); err != nil {
				s.log.Warn("cluster: adding local partitions", "topic", name, "err", err)
				ok = false
				continue
			}
		}
		if last, seen := s.cluster.configs[name]; !seen || !maps.Equal(last, vt.configs) {
			// The controller's configs changed (AlterConfigs or
			// IncrementalAlterConfigs on any broker), or this is the first look
			// since start: make the engine's overrides match them.
			if want := engineConfigs(vt.configs); !maps.Equal(et.Overrides(), want) {
				if err := s.eng.SetTopicConfig(name, want); err != nil {
					s.log.Warn("cluster: applying topic configs", "topic", name, "err", err)
					ok = false
					continue
				}
				s.log.Info("cluster: applied topic configs", "topic", name, "configs", vt.configs)
			}
			s.cluster.configs[name] = vt.configs
		}
		minISR := s.minInsync(vt)
		for i := range vt.parts {
			vp := &vt.parts[i]
			key := rolesKey{name, int32(i)}
			cur, had := s.cluster.roles[key]
			isReplica := containsID(vp.replicas, self)
			if !isReplica {
				if had {
					s.stopRole(key) // the replica manager lets go of the log first
				}
				if et.Partition(int32(i)) != nil {
					if err := s.eng.DropPartition(name, int32(i)); err != nil {
						s.log.Warn("cluster: deleting the log of a partition not replicated here", "topic", name, "partition", i, "err", err)
						ok = false
						continue
					}
					s.log.Info("cluster: deleted the log of a partition no longer replicated here", "topic", name, "partition", i)
				}
				continue
			}
			leader := vp.leader == self
			want := appliedRole{id: vt.id, leader: leader, leaderEpoch: vp.leaderEpoch, partitionEpoch: vp.partitionEpoch, minISR: minISR}
			if had && cur == want {
				continue
			}
			l := et.Partition(int32(i))
			if l == nil {
				var err error
				if l, err = s.eng.HostPartition(name, int32(i)); err != nil {
					s.log.Warn("cluster: creating the log of a new replica", "topic", name, "partition", i, "err", err)
					ok = false
					continue
				}
				s.log.Info("cluster: created the log of a new replica", "topic", name, "partition", i)
			}
			if s.cluster.repl != nil {
				role := PartitionRole{Log: l, Topic: name, Partition: int32(i), Leader: vp.leader,
					LeaderEpoch: vp.leaderEpoch, PartitionEpoch: vp.partitionEpoch,
					Replicas: vp.replicas, ISR: vp.isr, MinISR: minISR}
				var err error
				if leader {
					err = s.cluster.repl.BecomeLeader(role)
				} else {
					err = s.cluster.repl.BecomeFollower(role)
				}
				if errors.Is(err, replica.ErrStaleState) {
					err = nil // the manager already has a newer state
				}
				if err != nil {
					s.log.Warn("cluster: role change failed", "topic", name, "partition", i, "leader", leader,
						"leader_epoch", vp.leaderEpoch, "err", err)
					ok = false
					continue
				}
			}
			if !had || cur.leader != leader || cur.leaderEpoch != want.leaderEpoch {
				s.log.Debug("cluster: role", "topic", name, "partition", i, "leader", vp.leader, "leader_epoch", vp.leaderEpoch)
			}
			s.cluster.roles[key] = want
		}
	}
	for _, et := range s.eng.Topics() {
		name := et.Name()
		if v.topics[name] != nil {
			continue
		}
		if strings.HasPrefix(name, "__") && !s.hadRoles(name) {
			continue // a coordinator's local internal topic
		}
		s.stopRoles(name)
		delete(s.cluster.configs, name)
		if err := s.eng.DeleteTopic(name); err != nil && !errors.Is(err, engine.ErrUnknownTopic) {
			s.log.Warn("cluster: deleting local topic", "topic", name, "err", err)
			ok = false
			continue
		}
		s.log.Info("cluster: deleted local topic", "topic", name)
	}
	return ok
}

func (s *Server) hadRoles(topic string) bool {
	for k := range s.cluster.roles {
		if k.topic == topic {
			return true
		}
	}
	return false
}

func (s *Server) stopRoles(topic string) {
	for k := range s.cluster.roles {
		if k.topic == topic {
			s.stopRole(k)
		}
	}
}

func (s *Server) stopRole(k rolesKey) {
	if s.cluster.repl != nil {
		s.cluster.repl.Stop(k.topic, k.part)
	}
	delete(s.cluster.roles, k)
}

// engineConfigs drops the cluster-level keys the engine does not know.
func engineConfigs(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k != cfgMinInsync && k != cfgUnclean {
			out[k] = v
		}
	}
	return out
}

func (s *Server) minInsync(vt *viewTopic) int {
	if v, ok := vt.configs[cfgMinInsync]; ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return s.cfg.Cluster.MinInsyncReplicas
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

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// ---- request hooks ----

// clusterPartitionCheck is the Produce and Fetch hook: 0 when this broker
// may serve topic's partition as leader, else the Kafka error code
// (NOT_LEADER_OR_FOLLOWER: clients refresh metadata and retry).
func (s *Server) clusterPartitionCheck(topic *engine.Topic, partition int32) int16 {
	if s.cluster.ctl == nil {
		return 0
	}
	vt := s.cluster.view.Load().topics[topic.Name()]
	if vt == nil {
		if strings.HasPrefix(topic.Name(), "__") {
			return 0 // a coordinator's local internal topic
		}
		return kerr.UnknownTopicOrPartition.Code
	}
	if vt.id != topic.ID() || partition < 0 || int(partition) >= len(vt.parts) {
		return kerr.UnknownTopicOrPartition.Code
	}
	if vt.parts[partition].leader != s.cfg.NodeID {
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
		vt := s.cluster.view.Load().topics[topic]
		return vt != nil && int(partition) < len(vt.parts)
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
		vt := s.cluster.view.Load().topics[topic.Name()]
		if vt != nil && vt.id == topic.ID() && partition >= 0 && int(partition) < len(vt.parts) {
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
