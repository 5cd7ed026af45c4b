package server

// DeleteShareGroupOffsets (API key 92), v0: forgets a share group's state
// for whole topics (every share-partition of the topic: tombstones in
// __share_group_state, written before the answer), so the next
// consumption starts where share.auto.offset.reset says. Only for a group
// without members (NON_EMPTY_GROUP otherwise); an unknown topic is
// UNKNOWN_TOPIC_OR_PARTITION; a group unknown to the share coordinator
// is GROUP_ID_NOT_FOUND.

import (
	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/broker/sharehost"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(92, 0, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
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
	if !s.authorized(rc, auth.OpDelete, auth.ResourceGroup, req.GroupID) { // authz.go
		fail(kerr.GroupAuthorizationFailed.Code, "")
		return
	}
	st := s.groups.share
	st.Lock()
	switch g := st.Groups().Group(req.GroupID); {
	case g != nil && len(g.Members) > 0:
		st.Unlock()
		fail(kerr.NonEmptyGroup.Code, "The group has active members.")
		return
	case !st.Known(req.GroupID):
		st.Unlock()
		fail(kerr.GroupIDNotFound.Code, "Group "+req.GroupID+" not found.")
		return
	}
	var d durable
	for _, rt := range req.Topics {
		ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		if !s.authorized(rc, auth.OpRead, auth.ResourceTopic, rt.Topic) {
			ot.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		t := s.eng.Topic(rt.Topic)
		if t == nil || t.Deleted() {
			ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		ot.TopicID = t.ID()
		for p := range t.Partitions() {
			k := sharehost.Key{Group: req.GroupID, TopicID: t.ID(), Part: p}
			if err := st.Forget(k, &d); err != nil {
				ot.ErrorCode, ot.ErrorMessage = kerr.KafkaStorageError.Code, kmsg.StringPtr(err.Error())
				break
			}
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
