package server

// OffsetCommit (API key 8), v0..v9.
//
// Group-managed commits carry the member id and generation; the coordinator
// refuses stale ones (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
// REBALANCE_IN_PROGRESS during CompletingRebalance, FENCED_INSTANCE_ID).
// A commit with generation -1 and no member id (v0, or a client doing its
// own assignment) is allowed while the group has no members, creating the
// group if needed. For KIP-848 consumer groups the generation is the member
// epoch: the current one (or the previous, after a missed heartbeat answer)
// is accepted, another is STALE_MEMBER_EPOCH. Partitions of topics that do not exist are
// UNKNOWN_TOPIC_OR_PARTITION; metadata longer than
// offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE. The answer is
// sent once the commit records are durable in __consumer_offsets. v2..v4's
// retention time is ignored (offsets are kept while the group exists, as
// Kafka 3+ does with offsets.retention.minutes measured from when the group
// became empty — expiry is not implemented). v10 (topic ids) is not
// advertised.

import (
	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(8, 0, 9, handleOffsetCommit) }

func handleOffsetCommit(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	type ref struct{ t, p int }
	var refs []ref
	creq := group.CommitRequest{Group: req.Group, Generation: req.Generation, MemberID: req.MemberID}
	if req.InstanceID != nil {
		creq.InstanceID = *req.InstanceID
	}
	// authz.go: Read on the group (GROUP_AUTHORIZATION_FAILED for every
	// partition), then on each topic (TOPIC_AUTHORIZATION_FAILED).
	groupOK := s.authorized(rc, auth.OpRead, auth.ResourceGroup, req.Group)
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		topicOK := groupOK && s.authorized(rc, auth.OpRead, auth.ResourceTopic, rt.Topic)
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			if !groupOK {
				sp.ErrorCode = kerr.GroupAuthorizationFailed.Code
				continue
			}
			if !topicOK {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if !s.partitionExists(rt.Topic, rp.Partition) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			co := group.CommitOffset{TP: group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition},
				Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch}
			if req.Version < 6 {
				co.LeaderEpoch = -1
			}
			if rp.Metadata != nil {
				co.Metadata = *rp.Metadata
			}
			creq.Offsets = append(creq.Offsets, co)
			refs = append(refs, ref{i, j})
		}
	}
	c, code := s.groupCoordinator()
	if code == 0 && req.Group == "" {
		code = kerr.InvalidGroupID.Code
	}
	if code != 0 || len(creq.Offsets) == 0 {
		for _, r := range refs {
			resp.Topics[r.t].Partitions[r.p].ErrorCode = code
		}
		rc.respond(resp)
		return
	}
	c.Commit(creq, func(codes []int16) {
		for k, r := range refs {
			resp.Topics[r.t].Partitions[r.p].ErrorCode = codes[k]
		}
		rc.respond(resp)
	})
}
