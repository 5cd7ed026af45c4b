package engine

// Cluster support: what a broker of a replicated cluster needs from its
// engine beyond the single-broker API.
//
// In a cluster the controller owns topic ids: every broker holding a replica
// of a topic creates its local logs with the controller's id, so the id in
// each partition.metadata, in Metadata responses and in the controller's
// state is one and the same (Kafka's KRaft brokers do the same).
//
// # Replicas-only topics
//
// A broker keeps logs only for the partitions it is a replica of. Every
// broker still knows every topic (name, id, partition count, configs: the
// topic file), but a replicas-only topic (CreateReplicaTopic, or any topic
// once DropPartition removed one of its logs) hosts a partition only when
// its directory exists: Topic.Partition returns nil for the others, and the
// topic file records "replicas_only" so that Open does not recreate the
// missing directories (for other topics a missing directory is restarted
// empty, with a warning). HostPartition creates a log when the broker
// becomes a replica (a reassignment), DropPartition deletes one once it is
// no longer a replica (Kafka's StopReplica with delete). Internally the
// topic's log slice has nil entries for the partitions not hosted; only a
// replicas-only topic has them, and every walk over a topic's logs goes
// through Topic.hostedLogs.
//
// These calls serialize with the other admin calls on Engine.adminMu and
// publish a new log slice with one atomic store, as CreatePartitions does.

import (
	"errors"
	"fmt"
	"github.com/stratalog/strata/internal/vfs"
	"path/filepath"
	"slices"

	"encoding/hex"
)

// ControllerDirName is the directory inside the data directory where a
// broker keeps its controller (Raft) state. The engine leaves it alone
// instead of treating it as a stray partition directory.
const ControllerDirName = "controller"

// ErrNotHosted is returned for a partition of a known topic that has no log
// on this broker (it is not one of its replicas).
var ErrNotHosted = errors.New("engine: partition not hosted on this broker")

// CreateTopicWithID is CreateTopic with the topic id given by the caller (the
// controller) instead of a random one. A zero id is ErrInvalidTopic; an id
// already used by another local topic is ErrTopicExists.
func (e *Engine) CreateTopicWithID(name string, id [16]byte, partitions int32, configs map[string]string) (*Topic, error) {
	if id == ([16]byte{}) {
		return nil, ErrInvalidTopic
	}
	return e.createTopic(name, id, partitions, configs, nil)
}

// CreateReplicaTopic creates a replicas-only topic with the controller's id:
// partitions partitions of which only those in hosted get a local log
// (hosted may be empty: the topic is known here, no partition is stored).
func (e *Engine) CreateReplicaTopic(name string, id [16]byte, partitions int32, configs map[string]string, hosted []int32) (*Topic, error) {
	if id == ([16]byte{}) {
		return nil, ErrInvalidTopic
	}
	if hosted == nil {
		hosted = []int32{}
	}
	return e.createTopic(name, id, partitions, configs, hosted)
}

// createHostedLogs creates the logs of the partitions in hosted into logs
// (indexed by partition; a repeated partition is created once) and syncs
// the data directory; it returns the logs it created.
func (e *Engine) createHostedLogs(t *Topic, hosted []int32, logs []*Log) ([]*Log, error) {
	var created []*Log
	for _, p := range hosted {
		if logs[p] != nil {
			continue
		}
		l, err := e.createLog(t, p)
		if err != nil {
			e.discardLogs(created)
			return nil, e.createFailure("creating "+partitionDirName(t.name, p), err)
		}
		logs[p] = l
		created = append(created, l)
	}
	if err := e.fs.SyncDir(e.dir); err != nil {
		e.discardLogs(created)
		return nil, e.createFailure("syncing "+e.dir, err)
	}
	return created, nil
}

// GrowReplicaTopic grows a topic to total partitions without creating any
// log (HostPartition adds those this broker replicates); the topic becomes
// replicas-only. Keeping or shrinking the count is ErrInvalidPartitions.
func (e *Engine) GrowReplicaTopic(name string, total int32) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	t, _, err := e.growableTopic(name, total)
	if err != nil {
		return err
	}
	if err := writeFileAtomicReplicasOnly(e, t, total); err != nil {
		return err
	}
	t.replicasOnly.Store(true)
	logs := make([]*Log, total)
	copy(logs, t.logs())
	t.parts.Store(&logs)
	return nil
}

// HostPartition returns partition p's log, creating it empty first when this
// broker does not host it (it became a replica: a follower then fetches it
// from the leader).
func (e *Engine) HostPartition(name string, p int32) (*Log, error) {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if err := e.adminUsable(); err != nil {
		return nil, err
	}
	t := e.Topic(name)
	if t == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	if p < 0 || p >= t.Partitions() {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownTopic, name, p)
	}
	if l := t.Partition(p); l != nil {
		return l, nil
	}
	e.forgetCleanPoint(topicPartition{name, p}) // a log hosted here before starts dirty
	l, err := e.createLog(t, p)
	if err != nil {
		return nil, e.createFailure("creating "+partitionDirName(name, p), err)
	}
	if err := e.fs.SyncDir(e.dir); err != nil {
		e.discardLogs([]*Log{l})
		return nil, e.createFailure("syncing "+e.dir, err)
	}
	logs := slices.Clone(t.logs())
	logs[p] = l
	t.parts.Store(&logs)
	if err := e.writeRecoveryCheckpoint(); err != nil {
		return nil, e.ioFailure("writing "+recoveryPointFile, err)
	}
	return l, nil
}

// DropPartition deletes partition p's log from this broker (it is no longer
// a replica): the topic becomes replicas-only (its file says so before any
// directory goes), the log is closed (waiters and readers get
// ErrNotHosted; chunks already read stay readable until released), its
// directory is renamed aside and removed. A partition not hosted is a no-op.
func (e *Engine) DropPartition(name string, p int32) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if err := e.adminUsable(); err != nil {
		return err
	}
	t := e.Topic(name)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	l := t.Partition(p)
	if l == nil {
		return nil
	}
	if !t.replicasOnly.Load() {
		if err := writeFileAtomicReplicasOnly(e, t, t.Partitions()); err != nil {
			return err
		}
		t.replicasOnly.Store(true)
	}
	logs := slices.Clone(t.logs())
	logs[p] = nil
	t.parts.Store(&logs)
	l.shutdown(fmt.Errorf("%w: %s-%d", ErrNotHosted, name, p), true)
	to := sideName(e.dir, filepath.Base(l.dir), hex.EncodeToString(t.id[:]), deleteDirSuffix)
	if err := e.fs.Rename(l.dir, to); err != nil {
		e.logger.Warn("renaming dropped partition", "path", l.dir, "err", err)
		to = l.dir
	}
	if err := e.fs.SyncDir(e.dir); err != nil {
		e.logger.Warn("syncing data directory", "err", err)
	}
	if err := e.fs.RemoveAll(to); err != nil {
		e.logger.Warn("removing dropped partition", "path", to, "err", err)
	}
	e.forgetCleanPoint(topicPartition{name, p})
	if err := e.writeRecoveryCheckpoint(); err != nil {
		return e.ioFailure("writing "+recoveryPointFile, err)
	}
	return e.writeLogStartCheckpoint()
}

// ReplicasOnly reports whether the topic hosts only some of its partitions
// (see the file comment).
func (t *Topic) ReplicasOnly() bool { return t.replicasOnly.Load() }

// hostedLogs returns the topic's logs without the partitions not hosted
// here. Only a replicas-only topic has holes, so other topics pay nothing.
func (t *Topic) hostedLogs() []*Log {
	logs := t.logs()
	if !t.replicasOnly.Load() {
		return logs
	}
	out := make([]*Log, 0, len(logs))
	for _, l := range logs {
		if l != nil {
			out = append(out, l)
		}
	}
	return out
}

// formatTopicMetaOf is t's topic file with partitions and configs.
func formatTopicMetaOf(t *Topic, partitions int32, configs map[string]string) []byte {
	return formatTopicMetaFlags(t.name, t.id, partitions, configs, t.replicasOnly.Load())
}

// writeFileAtomicReplicasOnly rewrites t's topic file as replicas-only with
// total partitions. Caller holds adminMu.
func writeFileAtomicReplicasOnly(e *Engine, t *Topic, total int32) error {
	data := formatTopicMetaFlags(t.name, t.id, total, *t.overrides.Load(), true)
	if err := vfs.WriteFileAtomicFS(e.fs, e.topicFile(t.name), data); err != nil {
		return e.ioFailure("writing topic "+t.name, err)
	}
	return nil
}

// partitionHosted reports whether a replicas-only topic's partition p has a
// directory (Open).
func (e *Engine) partitionHosted(topic string, p int32) bool {
	_, err := e.fs.Stat(filepath.Join(e.dir, partitionDirName(topic, p)))
	return err == nil
}

// forgetCleanPoint drops the cleaner's checkpoint of one partition.
func (e *Engine) forgetCleanPoint(tp topicPartition) {
	c := &e.cl
	c.mu.Lock()
	defer c.mu.Unlock()
	e.loadCleanPointsLocked()
	if _, ok := c.points[tp]; !ok {
		return
	}
	delete(c.points, tp)
	if err := e.writeCheckpoint(cleanerCheckpointFile, c.points); err != nil {
		e.logger.Warn("rewriting "+cleanerCheckpointFile, "err", err)
	}
}
