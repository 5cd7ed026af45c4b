package cluster

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/replica"
)

// Cluster-level topic config keys: topic configs the controller keeps that
// are not engine (log) configs.
const (
	ConfigMinInsync = "min.insync.replicas"
	ConfigUnclean   = "unclean.leader.election.enable"
)

// Reconciler makes the broker's engine and replica roles match the
// controller's views, one view at a time (Kafka's metadata publisher and
// ReplicaManager.applyDelta): topics the controller knows are created
// locally with the controller's topic id and partition count as
// replicas-only topics (engine/cluster.go): every broker knows every topic,
// but holds a log only for the partitions it is a replica of. A partition
// this broker becomes a replica of (a reassignment adding it) gets an empty
// log that its follower role fills from the leader; one it is no longer a
// replica of (the reassignment that removed it completed: until then the
// controller lists it among the replicas) loses its role and then its log
// (Kafka's StopReplica with delete). Topics it no longer knows are deleted
// (names starting with "__" that the controller never knew are left alone:
// coordinators create them locally); topic configs changed in the
// controller are applied to the engine; role changes (leader / follower /
// none, by leader epoch and partition epoch) go to the ReplicaManager.
//
// A Reconciler belongs to one goroutine (the broker's metadata watcher):
// its methods are not safe for concurrent use.
type Reconciler struct {
	nodeID  int32
	eng     *engine.Engine
	repl    ReplicaManager // nil: no replication
	minISR  atomic.Int64   // min.insync.replicas, the broker default (SetMinInsync)
	log     *slog.Logger
	roles   map[rolesKey]appliedRole
	configs map[string]map[string]string // controller configs applied per topic
}

// NewReconciler returns a Reconciler for broker nodeID's engine; repl may
// be nil (no replication); minISR is the broker default of
// min.insync.replicas.
func NewReconciler(nodeID int32, eng *engine.Engine, repl ReplicaManager, minISR int, log *slog.Logger) *Reconciler {
	r := &Reconciler{nodeID: nodeID, eng: eng, repl: repl, log: log,
		roles: make(map[rolesKey]appliedRole), configs: make(map[string]map[string]string)}
	r.minISR.Store(int64(minISR))
	return r
}

// SetMinInsync changes the broker default of min.insync.replicas (a
// dynamic broker config); safe to call while Reconcile runs. The next
// Reconcile gives the partitions without their own value their roles
// with it.
func (r *Reconciler) SetMinInsync(n int) { r.minISR.Store(int64(n)) }

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

// Reconcile makes the local logs and the replica roles match v; false
// means something failed and should be retried (with the next view or a
// timer).
func (r *Reconciler) Reconcile(v *View) bool {
	ok := true
	self := r.nodeID
	names := make([]string, 0, len(v.Topics))
	for n := range v.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		vt := v.Topics[name]
		et := r.eng.Topic(name)
		if et != nil && et.ID() != vt.ID {
			r.stopRoles(name)
			if err := r.eng.DeleteTopic(name); err != nil {
				r.log.Warn("cluster: deleting stale local topic", "topic", name, "err", err)
				ok = false
				continue
			}
			r.log.Info("cluster: deleted local topic replaced by a new one", "topic", name)
			et = nil
		}
		n := int32(len(vt.Parts))
		if et == nil {
			var hosted []int32
			for i := range vt.Parts {
				if slices.Contains(vt.Parts[i].Replicas, self) {
					hosted = append(hosted, int32(i))
				}
			}
			var err error
			et, err = r.eng.CreateReplicaTopic(name, vt.ID, n, EngineConfigs(vt.Configs), hosted)
			if err != nil {
				r.log.Warn("cluster: creating local topic", "topic", name, "err", err)
				ok = false
				continue
			}
			r.log.Info("cluster: created local topic", "topic", name, "partitions", n, "replicas_here", hosted)
		} else if et.Partitions() < n {
			if err := r.eng.GrowReplicaTopic(name, n); err != nil {
				r.log.Warn("cluster: adding local partitions", "topic", name, "err", err)
				ok = false
				continue
			}
		}
		if last, seen := r.configs[name]; !seen || !maps.Equal(last, vt.Configs) {
			// The controller's configs changed (AlterConfigs or
			// IncrementalAlterConfigs on any broker), or this is the first look
			// since start: make the engine's overrides match them.
			if want := EngineConfigs(vt.Configs); !maps.Equal(et.Overrides(), want) {
				if err := r.eng.SetTopicConfig(name, want); err != nil {
					r.log.Warn("cluster: applying topic configs", "topic", name, "err", err)
					ok = false
					continue
				}
				r.log.Info("cluster: applied topic configs", "topic", name, "configs", vt.Configs)
			}
			r.configs[name] = vt.Configs
		}
		minISR := MinInsync(vt, int(r.minISR.Load()))
		for i := range vt.Parts {
			vp := &vt.Parts[i]
			key := rolesKey{name, int32(i)}
			cur, had := r.roles[key]
			isReplica := slices.Contains(vp.Replicas, self)
			if !isReplica {
				if had {
					r.stopRole(key) // the replica manager lets go of the log first
				}
				if et.Partition(int32(i)) != nil {
					if err := r.eng.DropPartition(name, int32(i)); err != nil {
						r.log.Warn("cluster: deleting the log of a partition not replicated here", "topic", name, "partition", i, "err", err)
						ok = false
						continue
					}
					r.log.Info("cluster: deleted the log of a partition no longer replicated here", "topic", name, "partition", i)
				}
				continue
			}
			leader := vp.Leader == self
			want := appliedRole{id: vt.ID, leader: leader, leaderEpoch: vp.LeaderEpoch, partitionEpoch: vp.PartitionEpoch, minISR: minISR}
			if had && cur == want {
				continue
			}
			l := et.Partition(int32(i))
			if l == nil {
				var err error
				if l, err = r.eng.HostPartition(name, int32(i)); err != nil {
					r.log.Warn("cluster: creating the log of a new replica", "topic", name, "partition", i, "err", err)
					ok = false
					continue
				}
				r.log.Info("cluster: created the log of a new replica", "topic", name, "partition", i)
			}
			if r.repl != nil {
				role := PartitionRole{Log: l, Topic: name, Partition: int32(i), Leader: vp.Leader,
					LeaderEpoch: vp.LeaderEpoch, PartitionEpoch: vp.PartitionEpoch,
					Replicas: vp.Replicas, ISR: vp.ISR, MinISR: minISR}
				var err error
				if leader {
					err = r.repl.BecomeLeader(role)
				} else {
					err = r.repl.BecomeFollower(role)
				}
				if errors.Is(err, replica.ErrStaleState) {
					err = nil // the manager already has a newer state
				}
				if err != nil {
					r.log.Warn("cluster: role change failed", "topic", name, "partition", i, "leader", leader,
						"leader_epoch", vp.LeaderEpoch, "err", err)
					ok = false
					continue
				}
			}
			if !had || cur.leader != leader || cur.leaderEpoch != want.leaderEpoch {
				r.log.Debug("cluster: role", "topic", name, "partition", i, "leader", vp.Leader, "leader_epoch", vp.LeaderEpoch)
			}
			r.roles[key] = want
		}
	}
	for _, et := range r.eng.Topics() {
		name := et.Name()
		if v.Topics[name] != nil {
			continue
		}
		if strings.HasPrefix(name, "__") && !r.hadRoles(name) {
			continue // a coordinator's local internal topic
		}
		r.stopRoles(name)
		delete(r.configs, name)
		if err := r.eng.DeleteTopic(name); err != nil && !errors.Is(err, engine.ErrUnknownTopic) {
			r.log.Warn("cluster: deleting local topic", "topic", name, "err", err)
			ok = false
			continue
		}
		r.log.Info("cluster: deleted local topic", "topic", name)
	}
	return ok
}

func (r *Reconciler) hadRoles(topic string) bool {
	for k := range r.roles {
		if k.topic == topic {
			return true
		}
	}
	return false
}

func (r *Reconciler) stopRoles(topic string) {
	for k := range r.roles {
		if k.topic == topic {
			r.stopRole(k)
		}
	}
}

func (r *Reconciler) stopRole(k rolesKey) {
	if r.repl != nil {
		r.repl.Stop(k.topic, k.part)
	}
	delete(r.roles, k)
}

// engineConfigs drops the cluster-level keys the engine does not know.
func EngineConfigs(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k != ConfigMinInsync && k != ConfigUnclean {
			out[k] = v
		}
	}
	return out
}

// MinInsync is t's min.insync.replicas: its topic config, or def (the
// broker default) when it has none or an invalid one.
func MinInsync(t *Topic, def int) int {
	if v, ok := t.Configs[ConfigMinInsync]; ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return def
}
