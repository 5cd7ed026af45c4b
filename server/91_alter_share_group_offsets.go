package server

// AlterShareGroupOffsets (API key 91), v0: sets share-partitions' start
// offsets (Partition.ResetStart: the in-flight window empties, the state
// epoch goes up, the new state is persisted before the answer). Only for
// a group without members (NON_EMPTY_GROUP otherwise, as in Kafka); a
// share-partition without state is created at the offset. A negative
// offset is INVALID_REQUEST; an unknown topic or partition
// UNKNOWN_TOPIC_OR_PARTITION.

import (
	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(91, 0, 0, handleAlterShareGroupOffsets) }

func handleAlterShareGroupOffsets(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	fail := func(code int16, msg string) {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		rc.respond(resp)
	}
	if code, msg := s.shareGroupErr(req.GroupID); code != 0 {
		fail(code, msg)
		return
	}
	if code := s.groupAuthorized(rc, req.GroupID, 0); code != 0 { // authz.go: Read on the group
		fail(code, "")
		return
	}
	st := s.groups.share
	st.Lock()
	if g := st.Groups().Group(req.GroupID); g != nil && len(g.Members) > 0 {
		st.Unlock()
		fail(kerr.NonEmptyGroup.Code, "The group has active members.")
		return
	}
	if st.Groups().Group(req.GroupID) == nil && s.isClassicOrConsumerGroup(req.GroupID) {
		st.Unlock()
		fail(kerr.GroupIDNotFound.Code, "Group "+req.GroupID+" is not a share group.")
		return
	}
	var d durable
	for _, rt := range req.Topics {
		ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t := s.eng.Topic(rt.Topic)
		if t != nil && t.Deleted() {
			t = nil
		}
		if t != nil {
			ot.TopicID = t.ID()
		}
		for _, rp := range rt.Partitions {
			op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			code, msg := kerr.TopicAuthorizationFailed.Code, ""
			if s.authorized(rc, auth.OpRead, auth.ResourceTopic, rt.Topic) {
				code, msg = st.Reset(req.GroupID, t, rp.Partition, rp.StartOffset, &d)
			}
			if code != 0 {
				op.ErrorCode = code
				if msg != "" {
					op.ErrorMessage = kmsg.StringPtr(msg)
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	st.Unlock()
	s.waitDurable(d, func(err error) {
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = kerr.KafkaStorageError.Code, kmsg.StringPtr(err.Error())
		}
		rc.respond(resp)
	})
}
