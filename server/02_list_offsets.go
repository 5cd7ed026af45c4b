package server

// ListOffsets (API key 2), v1..v11.
//
// Timestamp selects the answer, as in Kafka (special values are honoured at
// every version; a client only sends a value its version defines):
//
//	-1 latest            the high watermark (read_committed: the last stable
//	                     offset, engine/txn.go)
//	-2 earliest          the log start offset
//	-3 max timestamp     the record with the largest timestamp (KIP-734)
//	-4 earliest local    the local log start offset (KIP-405)
//	-5 latest tiered     the last offset copied to remote storage, -1 when
//	                     none or remote storage is off (KIP-1005; remote.go)
//	-6 earliest pending  offset -1: nothing to upload (KIP-1023)
//	   upload
//	>= 0 (or other)      the first offset whose timestamp >= Timestamp
//
// Answers are never at or past the high watermark (read_committed: the last
// stable offset): a timestamp (or max timestamp) whose record is not yet
// committed is "not found", offset -1 and timestamp -1, as Kafka answers. LeaderEpoch (v4+) is the partition's epoch,
// which every batch carries on a single broker.
//
// A partition named twice in one request answers INVALID_REQUEST for every
// occurrence, as in Kafka. v0 (old-style offset lists) is not served.

import (
	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	listOffsetsMinVersion = 1
	listOffsetsMaxVersion = 11

	listOffsetsLatest          = -1
	listOffsetsEarliest        = -2
	listOffsetsMaxTimestamp    = -3
	listOffsetsEarliestLocal   = -4
	listOffsetsLatestTiered    = -5
	listOffsetsEarliestPending = -6
)

func init() { register(2, listOffsetsMinVersion, listOffsetsMaxVersion, handleListOffsets) }

func handleListOffsets(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	dups := listOffsetsDuplicates(req)

	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		topic := s.eng.Topic(rt.Topic)
		allowed := s.authorized(rc, auth.OpDescribe, auth.ResourceTopic, rt.Topic) // authz.go
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			if dups[listOffsetsKey{rt.Topic, rp.Partition}] {
				sp.ErrorCode = kerr.InvalidRequest.Code
				continue
			}
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if topic == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			l := topic.Partition(rp.Partition)
			if l == nil {
				sp.ErrorCode = s.noLogCode(topic, rp.Partition) // cluster.go: not a replica here
				continue
			}
			// Consumers ask the leader; replica id -2 (debugging tools)
			// and followers may read any replica (cluster.go).
			if req.ReplicaID == -1 {
				if code := s.clusterPartitionCheck(topic, rp.Partition); code != 0 {
					sp.ErrorCode = code
					continue
				}
			}
			listOffsetsPartition(l, rp, req.IsolationLevel, sp)
			s.remoteListOffsets(l, rp, sp, req.ReplicaID == -1) // remote.go: tiered storage
		}
	}
	rc.respond(resp)
}

// listOffsetsPartition answers one partition into sp (already defaulted:
// offset, timestamp and epoch -1).
func listOffsetsPartition(l *engine.Log, rp *kmsg.ListOffsetsRequestTopicPartition, isolation int8, sp *kmsg.ListOffsetsResponseTopicPartition) {
	epoch := l.LeaderEpoch()
	if code := leaderEpochCheck(rp.CurrentLeaderEpoch, epoch); code != 0 {
		sp.ErrorCode = code
		return
	}
	if isolation != 0 && isolation != 1 {
		sp.ErrorCode = kerr.InvalidRequest.Code
		return
	}
	// hw is the end of what the isolation level may read: read_committed
	// stops at the last stable offset, as Kafka's lastFetchableOffset.
	hw := l.HighWatermark()
	if isolation == 1 {
		hw = l.LastStableOffset()
	}
	switch rp.Timestamp {
	case listOffsetsLatest:
		sp.Offset, sp.LeaderEpoch = hw, epoch
	case listOffsetsEarliest, listOffsetsEarliestLocal:
		sp.Offset, sp.LeaderEpoch = l.LogStartOffset(), epoch
	case listOffsetsLatestTiered, listOffsetsEarliestPending:
		// No tiered storage: nothing uploaded, nothing pending (Kafka
		// answers -1 with epoch -1 when remote storage is off).
	case listOffsetsMaxTimestamp:
		off, ts := l.MaxTimestamp()
		if off >= 0 && off < hw {
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, ts, epoch
		}
	default:
		off, ts, found := l.OffsetForTimestamp(rp.Timestamp)
		if found && off < hw {
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, ts, epoch
		}
	}
}

type listOffsetsKey struct {
	topic     string
	partition int32
}

// listOffsetsDuplicates returns the partitions named more than once, nil if
// none (a single-partition request allocates nothing).
func listOffsetsDuplicates(req *kmsg.ListOffsetsRequest) map[listOffsetsKey]bool {
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	if n < 2 {
		return nil
	}
	seen := make(map[listOffsetsKey]bool, n)
	var dups map[listOffsetsKey]bool
	for i := range req.Topics {
		for _, p := range req.Topics[i].Partitions {
			k := listOffsetsKey{req.Topics[i].Topic, p.Partition}
			if seen[k] {
				if dups == nil {
					dups = make(map[listOffsetsKey]bool)
				}
				dups[k] = true
			}
			seen[k] = true
		}
	}
	return dups
}
