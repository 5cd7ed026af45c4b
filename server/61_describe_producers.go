package server

// DescribeProducers (API key 61), v0 (KIP-664): the producers a partition
// leader tracks (engine.Log.Producers: producer id, epoch, last sequence,
// last batch timestamp, coordinator epoch, open transaction start).
//
// Per partition: UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that
// does not exist, NOT_LEADER_OR_FOLLOWER where this broker is not the
// leader (cluster mode), as Kafka answers.

import (
	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(61, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	resp.Topics = make([]kmsg.DescribeProducersResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.DescribeProducersResponseTopicPartition, len(rt.Partitions))
		topic := s.eng.Topic(rt.Topic)
		allowed := s.authorized(rc, auth.OpRead, auth.ResourceTopic, rt.Topic) // authz.go
		for j, p := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = p
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if topic == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			if topic.Partition(p) == nil {
				sp.ErrorCode = s.noLogCode(topic, p) // NOT_LEADER_OR_FOLLOWER on a non-replica
				continue
			}
			if code := s.clusterPartitionCheck(topic, p); code != 0 {
				sp.ErrorCode = code
				continue
			}
			for _, ps := range topic.Partition(p).Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = ps.ProducerID, int32(ps.ProducerEpoch)
				ap.LastSequence, ap.LastTimestamp = ps.LastSequence, ps.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = ps.CoordinatorEpoch, ps.CurrentTxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
		}
	}
	rc.respond(resp)
}
