package server

// OffsetForLeaderEpoch (API key 23), v0..v4.
//
// For each partition, the largest leader epoch <= the requested one and the
// offset where it ended (the log end offset for the current epoch), from
// engine Log.EndOffsetForEpoch; an epoch older than any we know answers
// epoch -1 and offset -1 with no error, as Kafka does. Consumers use it to
// detect log truncation after a leader change (KIP-320). CurrentLeaderEpoch
// (v2+, -1 = skip) is fenced like Fetch. ReplicaID (v3+) needs no check: a
// single broker serves every caller as the leader.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(23, 0, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		topic := s.eng.Topic(rt.Topic)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			if topic == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			l := topic.Partition(rp.Partition)
			if l == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			if code := leaderEpochCheck(rp.CurrentLeaderEpoch, l.LeaderEpoch()); code != 0 {
				sp.ErrorCode = code
				continue
			}
			sp.LeaderEpoch, sp.EndOffset = l.EndOffsetForEpoch(rp.LeaderEpoch)
		}
	}
	rc.respond(resp)
}
