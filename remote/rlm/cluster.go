package rlm

// Cluster mode (Options.Metadata): the remote-log metadata replicated
// through the internal topic __remote_log_metadata, as KIP-405's
// TopicBasedRemoteLogMetadataManager (docs/tiered-storage.md).
//
//   - Every broker consumes every partition of the metadata topic from its
//     start (Options.Metadata.Consume) and applies the events of the user
//     partitions it replicates in order (materializer, events.go;
//     assigned.go) to the per-partition state the manager reads:
//     CopiedEnd (local retention of followers and leader alike),
//     LogStart, the segments Read serves.
//   - Only a user partition's leader copies segments, deletes remote ones
//     and cleans up interrupted copies. Each change is an Event published
//     with acks=all to the metadata partition of the user partition
//     (MetadataPartition); the leader acts on it only once its own
//     consumer has applied it (as it waits for its file's fsync on a
//     single broker). An event from an older leader epoch than the
//     partition's newest is ignored by every broker, and its publisher
//     gets errFenced.
//   - A leader is ready for a partition at an epoch once its consumer has
//     applied its metadata partition up to the end offset it had when the
//     leadership was seen (Kafka's "ready" state): until then it neither
//     copies, deletes nor serves remote reads (ErrNotReady, retriable).
//     It then resumes copying at the CopiedEnd the metadata holds, so
//     there is one copy per partition, and serves and deletes by retention
//     the segments older leaders copied.
//   - Segments of a topic the cluster no longer has are deleted by the
//     leader of their metadata partition, with events of the highest
//     epoch, then the partition's metadata is dropped
//     (DELETE_PARTITION_FINISHED).
//
// The materialized state and the consumer's positions are saved to
// Dir/cluster.snapshot after each pass that applied something (atomically
// and durably), and loaded at Open: a restart consumes only what follows
// (the per-partition files of the single broker are not written in this
// mode).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"path/filepath"
	"sync"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/vfs"
)

// MetadataTopic is the cluster's __remote_log_metadata topic as the
// manager uses it (the broker implements it over its cluster view and a
// Kafka client of its own brokers).
type MetadataTopic interface {
	// Partitions is the topic's partition count, 0 while it does not
	// exist.
	Partitions() int32
	// Ensure starts the topic's creation if it does not exist yet
	// (asynchronous; Partitions says when it is there).
	Ensure()
	// Publish appends value with key to metadata partition mp, acks=all,
	// and returns its offset.
	Publish(ctx context.Context, mp int32, key, value []byte) (int64, error)
	// EndOffset is metadata partition mp's high watermark.
	EndOffset(ctx context.Context, mp int32) (int64, error)
	// Consume hands every record of the topic, from offset from(mp) of
	// each partition mp and in its order, to apply, until ctx ends; it
	// waits for the topic to exist.
	Consume(ctx context.Context, from func(mp int32) int64, apply func(mp int32, offset int64, value []byte))
	// Leadership is this broker's role for a user partition: the
	// partition's leader epoch and whether this broker leads it.
	Leadership(topic string, topicID [16]byte, partition int32) (epoch int32, leader bool)
	// TopicGone reports whether the cluster's metadata has no topic with
	// this id (false while that is not known).
	TopicGone(topicID [16]byte) bool
	// LeadsMetadataPartition reports whether this broker leads metadata
	// partition mp.
	LeadsMetadataPartition(mp int32) bool
	// BrokerID is this broker's node id (recorded in events).
	BrokerID() int32
}

// ErrNotReady answers a remote read of a partition this broker leads but
// whose remote-log metadata it has not caught up with yet (cluster mode),
// or does not lead: retriable (the server answers KAFKA_STORAGE_ERROR).
var ErrNotReady = errors.New("rlm: remote-log metadata not caught up yet")

// readyTimeout bounds a pass's wait for the metadata to catch up and
// publishTimeout a publish and the wait for its application.
const (
	readyTimeout   = 10 * time.Second
	publishTimeout = 30 * time.Second
)

// clusterMeta is the manager's cluster-mode state.
type clusterMeta struct {
	t MetadataTopic
	// matMu guards mat; posCh is closed (and replaced) after every
	// applied record, waking waiters for positions.
	matMu sync.Mutex
	mat   *materializer
	posCh chan struct{}
	saved int64 // mat.applied at the last snapshot saved
	// epochMu guards ready: per led partition the epoch it was found
	// caught up at.
	epochMu sync.Mutex
	ready   map[tp]int32
	wg      sync.WaitGroup
	// consumerMu guards the running consumer's cancel and done (it is
	// restarted for replays, assigned.go).
	consumerMu   sync.Mutex
	stopConsumer context.CancelFunc
	consumerDone chan struct{}
}

// startCluster starts the metadata consumer (Open, cluster mode).
func (m *Manager) startCluster(mat *materializer) {
	c := &clusterMeta{t: m.o.Metadata, mat: mat, posCh: make(chan struct{}), ready: map[tp]int32{}, saved: mat.applied}
	m.cl = c
	mat.want = wantFunc(c.t) // assigned.go: only the partitions this broker replicates
	for k, pm := range mat.parts {
		m.parts[k] = pm
	}
	m.startConsumer()
}

// clusterSnapshotName is the file in Options.Dir holding the cluster
// mode's materialized state (not ".json": the single broker's loader
// reads those).
const clusterSnapshotName = "cluster.snapshot"

// clusterSnapshotVersion 2 added Skipped; version 1 (every partition
// materialized) still loads.
const clusterSnapshotVersion = 2

type clusterSnapshot struct {
	Version    int              `json:"version"`
	Positions  map[int32]int64  `json:"positions"` // metadata partition -> next offset
	Epochs     []snapshotEpoch  `json:"epochs"`
	Partitions []*partitionMeta `json:"partitions"`
	// Skipped are the partitions whose events were skipped (version 2;
	// assigned.go), pending replays included: a pass after the load
	// replays them if they are wanted.
	Skipped []partitionKey `json:"skipped,omitempty"`
	// Materialized are the metadata partitions of Partitions (version 2).
	Materialized []partitionKey `json:"materialized,omitempty"`
}

type snapshotEpoch struct {
	TopicID   string `json:"topicId"`
	Partition int32  `json:"partition"`
	Epoch     int32  `json:"epoch"`
}

// loadClusterSnapshot reads Dir's snapshot (an empty materializer when
// there is none).
func loadClusterSnapshot(fsys vfs.FS, dir string) (*materializer, error) {
	x := newMaterializer()
	b, err := vfs.ReadFileLimit(fsys, filepath.Join(dir, clusterSnapshotName), 256<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return x, nil
	}
	if err != nil {
		return nil, err
	}
	var snap clusterSnapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return nil, fmt.Errorf("rlm: %s: %w", clusterSnapshotName, err)
	}
	if snap.Version != clusterSnapshotVersion && snap.Version != 1 {
		return nil, fmt.Errorf("rlm: %s: version %d", clusterSnapshotName, snap.Version)
	}
	for mp, n := range snap.Positions {
		x.next[mp] = n
	}
	for _, e := range snap.Epochs {
		id, err := parseTopicID(e.TopicID)
		if err != nil {
			return nil, fmt.Errorf("rlm: %s: %w", clusterSnapshotName, err)
		}
		x.epochs[tp{id, e.Partition}] = e.Epoch
	}
	for _, pm := range snap.Partitions {
		id, err := parseTopicID(pm.TopicID)
		if err != nil {
			return nil, fmt.Errorf("rlm: %s: %w", clusterSnapshotName, err)
		}
		x.parts[tp{id, pm.Partition}] = pm
	}
	for _, sk := range snap.Skipped {
		k, err := sk.tp()
		if err != nil {
			return nil, err
		}
		x.skipped[k] = sk.MP
	}
	for _, mk := range snap.Materialized {
		k, err := mk.tp()
		if err != nil {
			return nil, err
		}
		x.mps[k] = mk.MP
	}
	return x, nil
}

// saveClusterSnapshot writes the materialized state and positions when
// records were applied since the last save.
func (m *Manager) saveClusterSnapshot() error {
	c := m.cl
	c.matMu.Lock()
	if c.mat.applied == c.saved {
		c.matMu.Unlock()
		return nil
	}
	applied := c.mat.applied
	snap := clusterSnapshot{Version: clusterSnapshotVersion, Positions: maps.Clone(c.mat.next)}
	// A partition pending on a replay is saved as skipped: its state is
	// not whole yet.
	for k, e := range c.mat.epochs {
		if _, p := c.mat.pending[k]; !p {
			snap.Epochs = append(snap.Epochs, snapshotEpoch{TopicID: fmt.Sprintf("%x", k.id[:]), Partition: k.p, Epoch: e})
		}
	}
	for k, pm := range c.mat.parts {
		if _, p := c.mat.pending[k]; !p {
			snap.Partitions = append(snap.Partitions, pm) // immutable once published
		}
	}
	for k, mp := range c.mat.mps {
		if _, p := c.mat.pending[k]; !p {
			snap.Materialized = append(snap.Materialized, partitionKey{TopicID: fmt.Sprintf("%x", k.id[:]), Partition: k.p, MP: mp})
		}
	}
	for k, mp := range c.mat.skipped {
		snap.Skipped = append(snap.Skipped, partitionKey{TopicID: fmt.Sprintf("%x", k.id[:]), Partition: k.p, MP: mp})
	}
	for k := range c.mat.pending {
		snap.Skipped = append(snap.Skipped, partitionKey{TopicID: fmt.Sprintf("%x", k.id[:]), Partition: k.p, MP: c.mat.mps[k]})
	}
	c.matMu.Unlock()
	b, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomicFS(m.o.FS, filepath.Join(m.o.Dir, clusterSnapshotName), b); err != nil {
		return fmt.Errorf("rlm: saving %s: %w", clusterSnapshotName, err)
	}
	c.matMu.Lock()
	c.saved = max(c.saved, applied)
	c.matMu.Unlock()
	return nil
}

// applyRecord applies one record of metadata partition mp (the consumer's
// callback).
func (m *Manager) applyRecord(mp int32, offset int64, value []byte) {
	c := m.cl
	c.matMu.Lock()
	k, pm, applied, err := c.mat.apply(mp, offset, value)
	if applied {
		m.mu.Lock()
		if pm == nil {
			delete(m.parts, k)
		} else {
			m.parts[k] = pm
		}
		m.mu.Unlock()
	}
	close(c.posCh)
	c.posCh = make(chan struct{})
	c.matMu.Unlock()
	if err != nil {
		m.log.Warn("remote-log metadata record skipped", "partition", mp, "offset", offset, "err", err)
	}
	if applied && pm == nil {
		m.streams.forget(k)
	}
}

// waitApplied waits until this broker has applied metadata partition mp
// up to (not including) end.
func (m *Manager) waitApplied(ctx context.Context, mp int32, end int64) error {
	c := m.cl
	for {
		c.matMu.Lock()
		pos, ch := c.mat.position(mp), c.posCh
		c.matMu.Unlock()
		if pos >= end {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("rlm: metadata partition %d applied to %d, waiting for %d: %w", mp, pos, end, ctx.Err())
		}
	}
}

// metaPartition is k's metadata partition; ok false while the topic does
// not exist (its creation is then started).
func (m *Manager) metaPartition(k tp) (int32, bool) {
	n := m.cl.t.Partitions()
	if n <= 0 {
		m.cl.t.Ensure()
		return 0, false
	}
	return MetadataPartition(k.id, k.p, n), true
}

// publish is update in cluster mode: ev goes to k's metadata partition,
// and the call returns once this broker applied it.
func (m *Manager) publish(k tp, ev Event) error {
	mp, ok := m.metaPartition(k)
	if !ok {
		return fmt.Errorf("rlm: the metadata topic does not exist yet")
	}
	ev.Broker = m.cl.t.BrokerID()
	ctx, cancel := context.WithTimeout(m.ctx, publishTimeout)
	defer cancel()
	off, err := m.cl.t.Publish(ctx, mp, EventKey(k.id, k.p), EncodeEvent(ev))
	if err != nil {
		return fmt.Errorf("rlm: publishing %s of %s-%d: %w", ev.Type, ev.Topic, ev.Partition, err)
	}
	if err := m.waitApplied(ctx, mp, off+1); err != nil {
		return err
	}
	m.cl.matMu.Lock()
	newest := m.cl.mat.epochs[k]
	m.cl.matMu.Unlock()
	if newest > ev.LeaderEpoch {
		return fmt.Errorf("%w (%s of %s-%d at epoch %d, newest %d)", errFenced, ev.Type, ev.Topic, ev.Partition, ev.LeaderEpoch, newest)
	}
	return nil
}

// leaderReady reports whether this broker leads l and has applied its
// metadata partition up to the end it had when the leadership at the
// current epoch was first seen (waiting up to readyTimeout for it).
func (m *Manager) leaderReady(ctx context.Context, l *engine.Log) (bool, error) {
	k := tp{l.TopicID(), l.Partition()}
	epoch, lead := m.cl.t.Leadership(l.Topic(), k.id, k.p)
	if !lead {
		return false, nil
	}
	m.cl.epochMu.Lock()
	e, ok := m.cl.ready[k]
	m.cl.epochMu.Unlock()
	if ok && e == epoch {
		return true, nil
	}
	mp, ok := m.metaPartition(k)
	if !ok {
		return false, nil
	}
	wctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	end, err := m.cl.t.EndOffset(wctx, mp)
	if err != nil {
		return false, fmt.Errorf("rlm: end of metadata partition %d: %w", mp, err)
	}
	if err := m.waitApplied(wctx, mp, end); err != nil {
		return false, err
	}
	m.cl.epochMu.Lock()
	m.cl.ready[k] = epoch
	m.cl.epochMu.Unlock()
	m.log.Info("remote-log metadata caught up; leading the partition's remote log", "log", fmt.Sprintf("%s-%d", l.Topic(), k.p), "epoch", epoch, "metadataPartition", mp, "end", end)
	return true, nil
}

// Ready reports whether the manager's answers about a partition this
// broker leads are current: always on a single broker; in cluster mode
// once it leads the partition and its consumer has caught up with the
// partition's remote-log metadata at the current leader epoch (until
// then LogStart, HighestTieredOffset and OffsetForTimestamp answer from
// a view that may be partial, and Read answers ErrNotReady). A leader
// not ready yet kicks a pass, which makes it ready.
func (m *Manager) Ready(topicID [16]byte, partition int32) bool {
	if m.cl == nil {
		return true
	}
	t := m.o.Engine.TopicByID(topicID)
	if t == nil {
		return false
	}
	if !m.readable(t.Name(), tp{topicID, partition}) {
		m.Kick()
		return false
	}
	return true
}

// readable reports whether Read may serve k (cluster mode): this broker
// leads it and is ready at the current epoch.
func (m *Manager) readable(topic string, k tp) bool {
	epoch, lead := m.cl.t.Leadership(topic, k.id, k.p)
	if !lead {
		return false
	}
	m.cl.epochMu.Lock()
	e, ok := m.cl.ready[k]
	m.cl.epochMu.Unlock()
	return ok && e == epoch
}

// epochOf is the epoch this broker's events about k carry: the leader
// epoch it was found ready at (cluster mode), 0 on a single broker.
func (m *Manager) epochOf(k tp) int32 {
	if m.cl == nil {
		return 0
	}
	m.cl.epochMu.Lock()
	defer m.cl.epochMu.Unlock()
	return m.cl.ready[k]
}

// leaderEpochNow is the epoch for an event about k published outside a
// pass (DeleteRecords): the current leader epoch; an error when this
// broker does not lead k (cluster mode).
func (m *Manager) leaderEpochNow(k tp, topic string) (int32, error) {
	if m.cl == nil {
		return 0, nil
	}
	epoch, lead := m.cl.t.Leadership(topic, k.id, k.p)
	if !lead {
		return 0, fmt.Errorf("rlm: %s-%d: not the leader", topic, k.p)
	}
	return epoch, nil
}

// cleanupPartition deletes the objects of k's segments left
// COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED by this or an older
// leader (cluster mode; the leader, once ready, before it copies).
func (m *Manager) cleanupPartition(ctx context.Context, k tp) error {
	pm := m.get(k)
	if pm == nil {
		return nil
	}
	var errs []error
	for _, s := range pm.Segments {
		if s.State == CopyStarted || s.State == DeleteStarted {
			if err := m.deleteSegment(ctx, k, pm.Topic, s, m.epochOf(k)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// goneEpoch is the epoch of the events deleting a deleted topic's remote
// data: above every leader's, so nothing of an old leader comes after.
const goneEpoch = math.MaxInt32

// cleanupGone deletes the remote segments of topics the cluster no longer
// has, on the broker leading their metadata partition, and then drops
// their metadata (cluster mode).
func (m *Manager) cleanupGone(ctx context.Context) error {
	m.refreshAssignment() // assigned.go: the partitions this broker replicates
	m.mu.Lock()
	parts := make(map[tp]*partitionMeta, len(m.parts))
	for k, v := range m.parts {
		parts[k] = v
	}
	m.mu.Unlock()
	var errs []error
	for k, pm := range parts {
		if !m.cl.t.TopicGone(k.id) {
			continue
		}
		mp, ok := m.metaPartition(k)
		if !ok || !m.cl.t.LeadsMetadataPartition(mp) {
			continue
		}
		failed := false
		for _, s := range pm.Segments {
			if err := m.deleteSegment(ctx, k, pm.Topic, s, goneEpoch); err != nil {
				errs = append(errs, err)
				failed = true
				break
			}
		}
		if !failed {
			errs = append(errs, m.update(k, pm.Topic, Event{Type: EventPartitionDeleted, LeaderEpoch: goneEpoch}))
		}
	}
	return errors.Join(errs...)
}
