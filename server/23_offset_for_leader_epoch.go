package server

// OffsetForLeaderEpoch (API key 23), v0..v4.
//
// For each partition, the largest leader epoch <= the requested one and the
// offset where it ended (the log end offset for the current epoch), from
// engine Log.EndOffsetForEpoch; an epoch older than any we know answers
// epoch -1 and offset -1 with no error, as Kafka does. Consumers use it to
// detect log truncation after a leader change (KIP-320). CurrentLeaderEpoch
// (v2+, -1 = skip) is fenced like Fetch. In a cluster only the partition's
// leader answers (NOT_LEADER_OR_FOLLOWER otherwise), unless ReplicaID (v3+)
// is -2, Kafka's debug id.

import (
	"github.com/stratalog/strata/auth"
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
		// authz.go: Describe on the topic; a follower's request (replica
		// id >= 0) ClusterAction on the cluster.
		allowed := s.authorized(rc, auth.OpDescribe, auth.ResourceTopic, rt.Topic)
		if req.ReplicaID >= 0 {
			allowed = s.authorizedCluster(rc, auth.OpClusterAction)
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
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
			// Only the leader answers, except to a debug client (replica id -2),
			// as in Kafka; followers ask it to truncate exactly (replica/doc.go).
			if code := s.clusterPartitionCheck(topic, rp.Partition); code != 0 && req.ReplicaID != -2 {
				sp.ErrorCode = code
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
