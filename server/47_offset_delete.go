package server

// OffsetDelete (API key 47), v0 (KIP-496): removes committed offsets of a
// group. The group must exist (GROUP_ID_NOT_FOUND); while it has members,
// offsets of topics they subscribe to are refused per partition
// (GROUP_SUBSCRIBED_TO_TOPIC). Deleting an offset that is not committed
// succeeds. Tombstones are written to __consumer_offsets before answering.

import (
	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.Topics = make([]kmsg.OffsetDeleteResponseTopic, len(req.Topics))
	type ref struct{ t, p int }
	var refs []ref
	var tps []group.TopicPartition
	// authz.go: Delete on the group, Read on each topic.
	if !s.authorized(rc, auth.OpDelete, auth.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		rc.respond(resp)
		return
	}
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetDeleteResponseTopicPartition, len(rt.Partitions))
		topicOK := s.authorized(rc, auth.OpRead, auth.ResourceTopic, rt.Topic)
		for j, rp := range rt.Partitions {
			st.Partitions[j].Partition = rp.Partition
			if !topicOK {
				st.Partitions[j].ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if !s.partitionExists(rt.Topic, rp.Partition) {
				st.Partitions[j].ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			tps = append(tps, group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
			refs = append(refs, ref{i, j})
		}
	}
	c, code := s.groupCoordinator()
	if code != 0 {
		resp.ErrorCode = code
		rc.respond(resp)
		return
	}
	c.DeleteOffsets(req.Group, tps, func(top int16, codes []int16) {
		resp.ErrorCode = top
		if top == 0 {
			for k, r := range refs {
				resp.Topics[r.t].Partitions[r.p].ErrorCode = codes[k]
			}
		}
		rc.respond(resp)
	})
}
