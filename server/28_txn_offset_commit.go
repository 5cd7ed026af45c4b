package server

// TxnOffsetCommit (API key 28), v0..v3.
//
// A transactional producer commits its consumer's offsets as part of its
// transaction (after AddOffsetsToTxn). The group coordinator (package
// group, TxnCommit) writes them to the group's __consumer_offsets
// partition as a transactional batch of the producer and stages them until
// the transaction's marker: COMMIT makes them the group's committed
// offsets, ABORT drops them (txnhooks.go). v3 (KIP-447) carries the
// member id, generation and instance id, checked as Kafka does
// (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID); the group is
// created if it does not exist. Partitions of unknown topics are
// UNKNOWN_TOPIC_OR_PARTITION. v4 is v3 for clients that know
// TRANSACTION_ABORTABLE; v5 (KIP-890 part 2) adds the group's
// __consumer_offsets partition to the transaction itself (the client sends
// no AddOffsetsToTxn): the offsets are written only once the transaction
// coordinator has it (txnAddImplicit), and its error, if any, answers every
// partition. v6 (topic ids) is not advertised.

import (
	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(28, 0, 5, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	type ref struct{ t, p int }
	var refs []ref
	creq := group.TxnCommitRequest{Group: req.Group, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Generation: -1}
	if req.Version >= 3 {
		creq.Generation, creq.MemberID = req.Generation, req.MemberID
		if req.InstanceID != nil {
			creq.InstanceID = *req.InstanceID
		}
	}
	// authz.go: Write on the transactional id, Read on the group, then
	// Read on each topic.
	var denied int16
	switch {
	case !s.authorized(rc, auth.OpWrite, auth.ResourceTransactionalID, req.TransactionalID):
		denied = kerr.TransactionalIDAuthorizationFailed.Code
	case !s.authorized(rc, auth.OpRead, auth.ResourceGroup, req.Group):
		denied = kerr.GroupAuthorizationFailed.Code
	}
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(rt.Partitions))
		topicCode := denied
		if topicCode == 0 && !s.authorized(rc, auth.OpRead, auth.ResourceTopic, rt.Topic) {
			topicCode = kerr.TopicAuthorizationFailed.Code
		}
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Partition = rp.Partition
			if topicCode != 0 {
				sp.ErrorCode = topicCode
				continue
			}
			if !s.partitionExists(rt.Topic, rp.Partition) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			co := group.CommitOffset{TP: group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition},
				Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch}
			if req.Version < 2 {
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
	commit := func() {
		c.TxnCommit(creq, func(codes []int16) {
			for k, r := range refs {
				resp.Topics[r.t].Partitions[r.p].ErrorCode = codes[k]
			}
			rc.respond(resp)
		})
	}
	if req.Version < 5 {
		commit()
		return
	}
	s.txnAddImplicit(req.TransactionalID, req.ProducerID, req.ProducerEpoch, group.OffsetsTopic, c.PartitionFor(req.Group), func(code int16) {
		if code == 0 {
			commit()
			return
		}
		if code == kerr.NotEnoughReplicas.Code { // txnAddImplicit's "retry later", for a produce
			code = kerr.CoordinatorNotAvailable.Code
		}
		for _, r := range refs {
			resp.Topics[r.t].Partitions[r.p].ErrorCode = code
		}
		rc.respond(resp)
	})
}
