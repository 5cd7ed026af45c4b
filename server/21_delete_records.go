package server

// DeleteRecords (API key 21), v0..v2.
//
// Each partition's log start offset moves up to Offset (-1 = the high
// watermark) with engine Log.DeleteRecords, which deletes the segments that
// lie wholly below it; LowWatermark is the new log start. An offset below -1
// or above the high watermark is OFFSET_OUT_OF_RANGE. A topic whose
// cleanup.policy does not include "delete" (compact only) answers
// POLICY_VIOLATION, as in Kafka. A single broker has no followers to wait
// for, so TimeoutMillis is not needed: the answer is immediate.

import (
	"strings"

	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(21, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		topic := s.eng.Topic(rt.Topic)
		allowed := s.authorized(rc, auth.OpDelete, auth.ResourceTopic, rt.Topic) // authz.go
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
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
			if code := s.clusterPartitionCheck(topic, rp.Partition); code != 0 { // leader only (cluster.go)
				sp.ErrorCode = code
				continue
			}
			if !strings.Contains(topic.Config().CleanupPolicy, "delete") {
				sp.ErrorCode = kerr.PolicyViolation.Code
				continue
			}
			if rp.Offset < -1 {
				sp.ErrorCode = kerr.OffsetOutOfRange.Code
				continue
			}
			low, err := l.DeleteRecords(rp.Offset) // -1 = the high watermark
			if err != nil {
				sp.ErrorCode = errCode(err)
				continue
			}
			if low, err = s.remoteDeleteRecords(l, rp.Offset, low); err != nil { // remote.go: tiered storage
				s.log.Warn("delete records: remote log start", "topic", l.Topic(), "partition", l.Partition(), "err", err)
				sp.ErrorCode = kerr.KafkaStorageError.Code
				continue
			}
			sp.LowWatermark = low
		}
	}
	rc.respond(resp)
}
