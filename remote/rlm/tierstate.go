package rlm

import (
	"context"
	"fmt"
)

// TierState is what a follower restarting its log at its leader's local
// log start takes from remote storage instead of fetching the tiered part
// of the log (KIP-405's follower path, Kafka's buildRemoteLogAuxState):
// the offset to restart at (the end of the remote segment holding the
// offset just below the leader's local log start), and that segment's
// copied leader-epoch checkpoint and producer snapshot.
type TierState struct {
	Offset int64
	// Epochs is the segment's .leader-epoch-checkpoint object (the
	// leader-epoch-checkpoint file format), nil when it has none.
	Epochs []byte
	// ProducerSnapshot is its .snapshot object (the engine's producer
	// snapshot at Offset), nil when the segment was copied without one.
	ProducerSnapshot []byte
}

// RemoteLogAuxState finds, in the remote-log metadata this broker has
// materialized, the COPY_SEGMENT_FINISHED segment holding offset
// leaderLocalStart-1 (one ending exactly at leaderLocalStart first, else
// the one reaching furthest: remote segments of different leaders may
// overlap) and reads its leader-epoch checkpoint and producer snapshot
// objects, checked against their checksums like every remote read. It does
// not need this broker to lead the partition: followers call it.
//
// Errors: ErrNotRemote when no such segment is known (yet: a follower's
// metadata may lag the leader's; the caller retries), ErrCorrupt for an
// object that does not match its checksum, a store error otherwise.
func (m *Manager) RemoteLogAuxState(ctx context.Context, topicID [16]byte, partition int32, leaderLocalStart int64) (TierState, error) {
	pm := m.get(tp{topicID, partition})
	if pm == nil {
		return TierState{}, fmt.Errorf("%w: no remote-log metadata for partition %d", ErrNotRemote, partition)
	}
	target := leaderLocalStart - 1
	var seg *Segment
	for i := range pm.Segments {
		s := &pm.Segments[i]
		if s.State != CopyFinished || s.Base > target || s.End <= target || target < pm.LogStart {
			continue
		}
		if seg == nil || (seg.End != leaderLocalStart && (s.End == leaderLocalStart || s.End > seg.End)) {
			seg = s
		}
	}
	if seg == nil {
		return TierState{}, fmt.Errorf("%w: no remote segment of %s-%d holds offset %d", ErrNotRemote, pm.Topic, partition, target)
	}
	st := TierState{Offset: seg.End}
	var err error
	if _, ok := seg.Files[KindEpochs]; ok {
		if st.Epochs, err = m.object(ctx, pm.Topic, partition, seg, KindEpochs); err != nil {
			return TierState{}, err
		}
	}
	if _, ok := seg.Files[KindSnapshot]; ok {
		if st.ProducerSnapshot, err = m.object(ctx, pm.Topic, partition, seg, KindSnapshot); err != nil {
			return TierState{}, err
		}
	}
	return st, nil
}
