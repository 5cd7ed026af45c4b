package server

// Tiered storage's follower path (KIP-405): the leader side answers a
// follower's fetch below its local log start OFFSET_MOVED_TO_TIERED_STORAGE
// (error 109) when remote storage holds that offset, and the follower side
// (replica.Config.TierState) builds the restarted log's leader epochs and
// producer state from the remote segment below the leader's local start
// (rlm.Manager.RemoteLogAuxState) instead of starting empty.
//
// Kafka's answer carries the whole log's start and its follower asks the
// leader for the local start (ListOffsets -4); a Strata leader's answers to
// followers carry its local log start (the follower's log follows it), so
// error 109 carries it too and the follower restarts from it.

import (
	"context"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/remote/rlm"
	"github.com/stratalog/strata/replica"
	"github.com/twmb/franz-go/pkg/kerr"
)

// movedToTiered is readReplica's answer code for a follower's fetch at
// offset that the engine answered code (OFFSET_OUT_OF_RANGE): error 109
// when offset lies below l's local log start and at or above its remote
// log start, else code unchanged.
func (s *Server) movedToTiered(l *engine.Log, offset int64, code int16) int16 {
	r := s.remoteLog()
	if r == nil || offset >= l.LogStartOffset() || !l.Config().RemoteStorageEnable {
		return code
	}
	if start, ok := r.LogStart(l.TopicID(), l.Partition()); ok && start <= offset {
		return kerr.OffsetMovedToTieredStorage.Code
	}
	return code
}

// remoteAux is the optional part of a RemoteLog that gives a follower
// its remote state (*rlm.Manager implements it).
type remoteAux interface {
	RemoteLogAuxState(ctx context.Context, topicID [16]byte, partition int32, leaderLocalStart int64) (rlm.TierState, error)
}

// tierState is the replica manager's TierState hook.
func (s *Server) tierState(ctx context.Context, l *engine.Log, leaderLocalStart int64) (replica.TierState, error) {
	r, ok := s.remoteLog().(remoteAux)
	if !ok {
		// No object store on this broker: the log restarts empty at the
		// leader's local start, as before KIP-405's follower path.
		return replica.TierState{Offset: leaderLocalStart}, nil
	}
	st, err := r.RemoteLogAuxState(ctx, l.TopicID(), l.Partition(), leaderLocalStart)
	if err != nil {
		return replica.TierState{}, err
	}
	return replica.TierState{Offset: st.Offset, Epochs: st.Epochs, ProducerSnapshot: st.ProducerSnapshot}, nil
}
