package rlm

import (
	"context"
	"fmt"
)

// Each broker materializes the remote-log metadata of the user partitions
// it replicates only (Kafka's TopicBasedRemoteLogMetadataManager does the
// same), when the MetadataTopic says which those are (ReplicaSet): the
// events of other partitions are skipped as they are consumed, and only
// their keys are remembered. A partition this broker starts replicating
// later (a reassignment adds it, a topic is created) has its metadata
// partition read again from offset 0 for it: at the next pass the
// consumer stops, the partition becomes pending on a replay of that
// metadata partition, and the consumer restarts there (materializer,
// events.go). Until the replay has passed where the partition's events
// were skipped, the metadata partition's position is the replay's, so a
// new leader is not ready and a new follower's RemoteLogAuxState finds
// nothing yet (both retried). A partition no longer replicated has its
// metadata dropped at the next pass. The data of deleted topics is
// materialized by the leader of their metadata partition, which deletes
// it.

// ReplicaSet is the optional part of a MetadataTopic that says which user
// partitions this broker replicates. Without it every partition is
// materialized.
type ReplicaSet interface {
	// Replicates reports whether this broker holds (or is being added
	// as) a replica of the partition; true while that is not known yet.
	Replicates(topicID [16]byte, partition int32) bool
}

// wantFunc is the materializer's filter for MetadataTopic t: the user
// partitions this broker replicates, and those of deleted topics in the
// metadata partitions it leads (nil: every partition).
func wantFunc(t MetadataTopic) func(k tp, mp int32) bool {
	rs, ok := t.(ReplicaSet)
	if !ok {
		return nil
	}
	return func(k tp, mp int32) bool {
		return rs.Replicates(k.id, k.p) || (t.TopicGone(k.id) && t.LeadsMetadataPartition(mp))
	}
}

// needsReplay reports whether a skipped partition is now wanted.
func (x *materializer) needsReplay() bool {
	if x.want == nil {
		return false
	}
	for k, mp := range x.skipped {
		if x.want(k, mp) {
			return true
		}
	}
	return false
}

// refresh applies a change of the wanted partitions: materialized ones no
// longer wanted are dropped (returned), and, with replays allowed (the
// consumer is stopped), skipped ones now wanted become pending on a
// replay of their metadata partition from offset 0 (restart: the consumer
// must start again from position). A replay already under way starts
// over, its pending partitions' state dropped too.
func (x *materializer) refresh(allowReplay bool) (dropped []tp, restart bool) {
	if x.want == nil {
		return nil, false
	}
	for k, mp := range x.mps {
		if _, p := x.pending[k]; !p && !x.want(k, mp) {
			delete(x.parts, k)
			delete(x.epochs, k)
			delete(x.mps, k)
			x.skipped[k] = mp
			dropped = append(dropped, k)
		}
	}
	if !allowReplay {
		return dropped, false
	}
	replays := map[int32]bool{}
	for k, mp := range x.skipped {
		if !x.want(k, mp) {
			continue
		}
		delete(x.skipped, k)
		x.mps[k] = mp
		x.pending[k] = x.next[mp]
		replays[mp] = true
	}
	for mp := range replays {
		if x.replay[mp] > 0 {
			for k, end := range x.pending {
				if x.mps[k] == mp && end < x.next[mp] {
					delete(x.parts, k)
					delete(x.epochs, k)
					x.pending[k] = x.next[mp]
					dropped = append(dropped, k)
				}
			}
		}
		x.replay[mp] = 0
		restart = true
	}
	return dropped, restart
}

// refreshAssignment follows a change of the partitions this broker
// replicates (cluster mode; at the start of each pass).
func (m *Manager) refreshAssignment() {
	c := m.cl
	c.matMu.Lock()
	need := c.mat.needsReplay()
	c.matMu.Unlock()
	if need {
		m.stopConsumer()
	}
	c.matMu.Lock()
	dropped, restart := c.mat.refresh(need)
	m.mu.Lock()
	for _, k := range dropped {
		delete(m.parts, k)
	}
	m.mu.Unlock()
	c.matMu.Unlock()
	for _, k := range dropped {
		m.streams.forget(k)
	}
	if len(dropped) > 0 || restart {
		m.log.Info("remote-log metadata: replicated partitions changed", "dropped", len(dropped), "replay", restart)
	}
	if need {
		m.startConsumer()
	}
}

// startConsumer starts the metadata consumer at the materializer's
// positions.
func (m *Manager) startConsumer() {
	c := m.cl
	if m.ctx.Err() != nil {
		return // closing
	}
	c.matMu.Lock()
	from := map[int32]int64{}
	for mp := range c.mat.next {
		from[mp] = c.mat.position(mp)
	}
	c.matMu.Unlock()
	ctx, cancel := context.WithCancel(m.ctx)
	done := make(chan struct{})
	c.consumerMu.Lock()
	c.stopConsumer, c.consumerDone = cancel, done
	c.consumerMu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(done)
		c.t.Consume(ctx, func(mp int32) int64 { return from[mp] }, m.applyRecord)
	}()
}

// stopConsumer stops the metadata consumer and waits until it applies
// nothing more.
func (m *Manager) stopConsumer() {
	c := m.cl
	c.consumerMu.Lock()
	cancel, done := c.stopConsumer, c.consumerDone
	c.consumerMu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// partitionKey is a user partition and its metadata partition in the
// cluster snapshot.
type partitionKey struct {
	TopicID   string `json:"topicId"`
	Partition int32  `json:"partition"`
	MP        int32  `json:"metadataPartition"`
}

func (k partitionKey) tp() (tp, error) {
	id, err := parseTopicID(k.TopicID)
	if err != nil {
		return tp{}, fmt.Errorf("rlm: %s: %w", clusterSnapshotName, err)
	}
	return tp{id, k.Partition}, nil
}
