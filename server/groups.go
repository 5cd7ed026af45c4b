package server

// Consumer groups (issue 6): the Server's side of the group coordinator.
//
// The coordinator (package group) is pure membership and offset logic over
// a group.Log; offsetsLog implements that Log (and group.TxnLog, whose
// LoadTxn the coordinator loads with: txn_log.go) over the engine's
// __consumer_offsets topic (created on start with offsets.topic.num.partitions
// partitions and cleanup.policy=compact when absent). A write is one record
// batch appended to the group's partition; the coordinator is told when it
// is durable through engine.Log.WhenDurable, so an OffsetCommit or SyncGroup
// is answered only once its record survives a crash.
//
// On a single broker every partition of __consumer_offsets is loaded by
// initGroups, so this broker coordinates every group. In cluster mode the
// topic is created through the controller (offsets.topic.num.partitions
// partitions, replication min(3, live brokers), compacted) on the first
// FindCoordinator for a group, as Kafka does; the coordinator of a group is
// the leader of its partition. The leader loop of a coordhost.Host
// (broker/coordhost; owned by groupsState, started by initGroups, closed by
// closeGroups; the adapters are in coordhost.go) follows the cluster view:
// it loads a partition when this broker becomes its leader (again on every
// new leader epoch) and unloads it when leadership moves away, so after a
// coordinator fails the new leader replays the replicated commits and the
// group reforms there. The same host proposes the topic and names a
// group's coordinator (groupCoordinatorNode). Writes then wait for the ISR
// (acks=all) instead of the local fsync.

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/stratalog/strata/broker/coordhost"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/stratalog/strata/record"
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
	err   error              // why the coordinator is unavailable, if it is
	olog  *offsetsLog
	host  *coordhost.Host // with coord: follows leadership in cluster mode, proposes the topic
	share shareState      // share groups (share.go)
}

// offsetsTopicReplication is Kafka's offsets.topic.replication.factor: a
// proposal of __consumer_offsets asks for min(3, live brokers) replicas.
const offsetsTopicReplication = 3

// offsetsTopicConfigs are Kafka's offsets.topic.* topic configs.
func offsetsTopicConfigs() map[string]string {
	return map[string]string{
		"cleanup.policy": "compact",
		"segment.bytes":  strconv.Itoa(100 << 20), // offsets.topic.segment.bytes
	}
}

// Groups returns the group coordinator (nil if the server has no engine).
func (s *Server) Groups() *group.Coordinator { return s.groups.coord }

// initGroups is called by New after the Server is built. It loads every
// partition of an existing __consumer_offsets synchronously (unless
// ManualLoad), so the broker answers for its groups as soon as it serves.
func (s *Server) initGroups() {
	defer s.initShare() // share.go
	if s.eng == nil {
		s.groups.err = errors.New("no engine")
		return
	}
	olog := &offsetsLog{s: s, eng: s.eng, clustered: s.clustered()}
	s.groups.olog = olog
	n, err := olog.open(s.cfg.Groups.Coordinator.OffsetsPartitions, s.cfg.DefaultReplication)
	if err != nil {
		s.groups.err = err
		s.log.Error("groups: cannot open "+group.OffsetsTopic+"; group APIs answer COORDINATOR_NOT_AVAILABLE", "err", err)
		return
	}
	gcfg := s.cfg.Groups.Coordinator
	gcfg.OffsetsPartitions = n
	coord := group.New(gcfg, olog, nil, s.log)
	s.groups.coord = coord
	s.groups.host = coordhost.New(coordhost.Config{
		Topic: coordhost.Topic{
			Name:        group.OffsetsTopic,
			Partitions:  n,
			Replication: offsetsTopicReplication,
			Configs:     offsetsTopicConfigs(),
		},
		Name:      "groups",
		Load:      func(p, _ int32) error { return coord.LoadPartition(p) },
		Unload:    coord.UnloadPartition,
		Partition: func(key string, _ int32) int32 { return coord.PartitionFor(key) }, // what the coordinator shards by
		Creator:   hostCreator{s},
		Clock:     hostClock{s},
		Log:       s.log,
	})
	if s.clustered() {
		s.groups.host.Follow(hostSource{s})
		return
	}
	if s.cfg.Groups.ManualLoad {
		return
	}
	for p := int32(0); p < n; p++ {
		if err := s.groups.coord.LoadPartition(p); err != nil {
			s.log.Error("groups: loading partition failed", "partition", p, "err", err)
		}
	}
}

// closeGroups is called by Close after connections are closed.
func (s *Server) closeGroups() {
	s.closeShare() // share.go
	if s.groups.host != nil {
		s.groups.host.Close()
	}
	if s.groups.coord != nil {
		s.groups.coord.Close()
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

// offsetsLog is group.Log over the engine's __consumer_offsets topic. The
// topic is created on the first write, as Kafka creates it on first use, so
// a broker that never sees a group has no internal topic.
type offsetsLog struct {
	s          *Server
	clustered  bool // the topic is created through the controller, writes wait for the ISR
	eng        *engine.Engine
	partitions int32 // offsets.topic.num.partitions, or the existing topic's count

	mu    sync.Mutex
	topic *engine.Topic // nil until created or found

	txnMu sync.Mutex // serialises AppendTxn's sequence choice and append (txn_log.go)
}

// open finds the offsets topic if it exists and returns the partition count
// the coordinator shards by.
func (o *offsetsLog) open(partitions int32, _ int16) (int32, error) {
	if partitions <= 0 {
		partitions = group.DefaultOffsetsPartitions
	}
	o.partitions = partitions
	if t := o.eng.Topic(group.OffsetsTopic); t != nil {
		o.topic = t
		o.partitions = t.Partitions()
	}
	return o.partitions, nil
}

// get returns the topic, creating it if create and absent.
func (o *offsetsLog) get(create bool) (*engine.Topic, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.topic != nil && !o.topic.Deleted() {
		return o.topic, nil
	}
	if t := o.eng.Topic(group.OffsetsTopic); t != nil {
		o.topic = t
		return t, nil
	}
	if !create || o.clustered {
		return nil, nil
	}
	t, err := o.eng.CreateTopic(group.OffsetsTopic, o.partitions, offsetsTopicConfigs())
	if errors.Is(err, engine.ErrTopicExists) {
		t, err = o.eng.Topic(group.OffsetsTopic), nil
	}
	if err != nil || t == nil {
		return nil, fmt.Errorf("groups: creating %s: %w", group.OffsetsTopic, err)
	}
	o.topic = t
	return t, nil
}

var offsetsBuilders = sync.Pool{New: func() any { return new(record.Builder) }}

// appendLog returns the log of partition p to append to (creating the
// topic on a single broker): an error if the topic or partition is missing
// or, in a cluster, this broker does not lead it.
func (o *offsetsLog) appendLog(p int32) (*engine.Log, error) {
	t, err := o.get(true)
	if err == nil && t == nil {
		err = fmt.Errorf("%w: %s", engine.ErrUnknownTopic, group.OffsetsTopic)
	}
	if err != nil {
		return nil, err
	}
	if o.clustered {
		if code := o.s.clusterPartitionCheck(t, p); code != 0 {
			return nil, kerr.ErrorForCode(code)
		}
	}
	l := t.Partition(p)
	if l == nil {
		return nil, fmt.Errorf("%w: %s-%d", engine.ErrUnknownTopic, group.OffsetsTopic, p)
	}
	return l, nil
}

// Append implements group.Log.
func (o *offsetsLog) Append(p int32, recs []group.Record, done func(error)) {
	l, err := o.appendLog(p)
	if err != nil {
		done(err)
		return
	}
	b := offsetsBuilders.Get().(*record.Builder)
	now := o.s.now().UnixMilli()
	b.Reset(record.CodecNone, now)
	for _, r := range recs {
		b.Add(now, r.Key, r.Value, nil)
	}
	batch, err := b.AppendTo(nil)
	offsetsBuilders.Put(b)
	if err != nil {
		done(err)
		return
	}
	info, err := l.Append(batch, l.LeaderEpoch())
	if err != nil {
		done(err)
		return
	}
	o.s.whenAcked(l, info.LastOffset, done)
}

// Load implements group.Log. The coordinator loads through LoadTxn
// (txn_log.go: to the log end, with batch attributes and markers), since
// offsetsLog is a group.TxnLog; this is the plain view of the same scan.
func (o *offsetsLog) Load(p int32, fn func(key, value []byte) error) error {
	return o.LoadTxn(p, func(r group.LoadedRecord) error {
		if r.Marker != group.NoMarker {
			return nil
		}
		return fn(r.Key, r.Value)
	})
}

// groupCoordinatorNode returns the node that coordinates group key (cluster
// mode): the leader of its __consumer_offsets partition. Before the topic
// exists it starts its creation and answers COORDINATOR_NOT_AVAILABLE
// (clients retry), as Kafka does.
func (s *Server) groupCoordinatorNode(key string) (viewBroker, int16) {
	return s.coordinatorBroker(s.groups.host, key) // coordhost.go
}
