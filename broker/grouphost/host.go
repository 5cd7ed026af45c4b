package grouphost

import (
	"errors"
	"log/slog"
	"strconv"

	"github.com/stratalog/strata/broker/coordhost"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
)

// Config is what the host gets from the broker.
type Config struct {
	// Engine holds __consumer_offsets; nil: no coordinator (Err says so).
	Engine *engine.Engine
	// Coordinator holds the group.* settings; zero fields take Kafka's
	// defaults (OffsetsPartitions is offsets.topic.num.partitions, or the
	// existing topic's count).
	Coordinator group.Config
	// ManualLoad leaves every partition unloaded at start on a single
	// broker (a caller loads them through Coordinator().LoadPartition).
	ManualLoad bool
	// Cluster is the view the leader loop follows; nil on a single
	// broker, which creates the topic itself and loads every partition.
	Cluster coordhost.Source
	// LeaderCheck, in cluster mode, is the broker's leadership check before
	// an append to partition p of t: 0, or the Kafka error code
	// (NOT_LEADER_OR_FOLLOWER). nil: none.
	LeaderCheck func(t *engine.Topic, p int32) int16
	// WhenAcked calls fn once an append up to last may be acknowledged as
	// an acks=all produce (durable here, or committed to the ISR).
	WhenAcked func(l *engine.Log, last int64, fn func(error))
	// Creator proposes the topic to the controller (cluster mode).
	Creator coordhost.Creator
	// Clock is the host's only source of time (record timestamps, the
	// leader loop's retries).
	Clock coordhost.Clock
	Log   *slog.Logger
}

// Host is the group coordinator on the partitions of __consumer_offsets
// this broker leads.
type Host struct {
	coord *group.Coordinator // nil without an engine
	err   error              // why coord is nil
	route *coordhost.Host    // with coord: follows leadership, proposes the topic
}

// TopicReplication is Kafka's offsets.topic.replication.factor: a proposal
// of __consumer_offsets asks for min(3, live brokers) replicas.
const TopicReplication = 3

// TopicConfigs are Kafka's offsets.topic.* topic configs.
func TopicConfigs() map[string]string {
	return map[string]string{
		"cleanup.policy": "compact",
		"segment.bytes":  strconv.Itoa(100 << 20), // offsets.topic.segment.bytes
	}
}

// New builds the host. On a single broker it loads every partition of an
// existing __consumer_offsets synchronously (unless ManualLoad), so the
// broker answers for its groups as soon as it serves; in cluster mode the
// leader loop loads the partitions this broker leads.
func New(cfg Config) *Host {
	h := &Host{}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Engine == nil {
		h.err = errors.New("no engine")
		return h
	}
	olog := &offsetsLog{eng: cfg.Engine, clustered: cfg.Cluster != nil, check: cfg.LeaderCheck,
		whenAcked: cfg.WhenAcked, clock: cfg.Clock}
	n := olog.open(cfg.Coordinator.OffsetsPartitions)
	gcfg := cfg.Coordinator
	gcfg.OffsetsPartitions = n
	coord := group.New(gcfg, olog, nil, cfg.Log)
	h.coord = coord
	h.route = coordhost.New(coordhost.Config{
		Topic: coordhost.Topic{
			Name:        group.OffsetsTopic,
			Partitions:  n,
			Replication: TopicReplication,
			Configs:     TopicConfigs(),
		},
		Name:      "groups",
		Load:      func(p, _ int32) error { return coord.LoadPartition(p) },
		Unload:    coord.UnloadPartition,
		Partition: func(key string, _ int32) int32 { return coord.PartitionFor(key) }, // what the coordinator shards by
		Creator:   cfg.Creator,
		Clock:     cfg.Clock,
		Log:       cfg.Log,
	})
	if cfg.Cluster != nil {
		h.route.Follow(cfg.Cluster)
		return h
	}
	if cfg.ManualLoad {
		return h
	}
	for p := int32(0); p < n; p++ {
		if err := coord.LoadPartition(p); err != nil {
			cfg.Log.Error("groups: loading partition failed", "partition", p, "err", err)
		}
	}
	return h
}

// Coordinator returns the group coordinator, nil when there is none (Err
// says why).
func (h *Host) Coordinator() *group.Coordinator { return h.coord }

// Err is why there is no coordinator (nil when there is one).
func (h *Host) Err() error { return h.err }

// Route is the coordhost.Host that names a group's coordinator and
// proposes the topic (nil without a coordinator).
func (h *Host) Route() *coordhost.Host { return h.route }

// Close stops the leader loop, then the coordinator.
func (h *Host) Close() {
	if h.route != nil {
		h.route.Close()
	}
	if h.coord != nil {
		h.coord.Close()
	}
}
