package server

// AlterShareGroupOffsets (API key 91), v0: sets share-partitions' start
// offsets (Partition.ResetStart: the in-flight window empties, the state
// epoch goes up, the new state is persisted before the answer). Only for
// a group without members (NON_EMPTY_GROUP otherwise, as in Kafka); a
// share-partition without state is created at the offset. A negative
// offset is INVALID_REQUEST; an unknown topic or partition
// UNKNOWN_TOPIC_OR_PARTITION. In a cluster the group's coordinator
// answers (NOT_COORDINATOR elsewhere) and forwards the partitions led by
// other brokers to their leaders, which own the share-partitions' state;
// such a forwarded request (fromBroker) resets the partitions led here.

import (
	"context"
	"maps"
	"slices"

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
	fwd := s.fromBroker(rc) // the group's coordinator, for partitions led here
	if !fwd {
		if code := s.groupAuthorized(rc, req.GroupID, 0); code != 0 { // authz.go: Read on the group
			fail(code, "")
			return
		}
		if code, msg := s.shareCoordinatorErr(req.GroupID); code != 0 { // share_cluster.go
			fail(code, msg)
			return
		}
	}
	st := s.groups.share
	st.Lock()
	if g := st.Groups().Group(req.GroupID); !fwd && g != nil && len(g.Members) > 0 {
		st.Unlock()
		fail(kerr.NonEmptyGroup.Code, "The group has active members.")
		return
	}
	if !fwd && st.Groups().Group(req.GroupID) == nil && s.isClassicOrConsumerGroup(req.GroupID) {
		st.Unlock()
		fail(kerr.GroupIDNotFound.Code, "Group "+req.GroupID+" is not a share group.")
		return
	}
	// In a cluster the partitions led elsewhere are forwarded to their
	// leaders, which own the share-partitions' state.
	type slot struct{ t, p int }
	remote := map[int32]*kmsg.AlterShareGroupOffsetsRequest{}
	slots := map[int32][]slot{}
	var d durable
	for ti, rt := range req.Topics {
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
			if fwd || s.authorized(rc, auth.OpRead, auth.ResourceTopic, rt.Topic) {
				if l := s.shareElsewhere(rt.Topic, rp.Partition); !fwd && t != nil && l >= 0 {
					r := remote[l]
					if r == nil {
						r = kmsg.NewPtrAlterShareGroupOffsetsRequest()
						r.GroupID = req.GroupID
						remote[l] = r
					}
					if len(r.Topics) == 0 || r.Topics[len(r.Topics)-1].Topic != rt.Topic {
						r.Topics = append(r.Topics, kmsg.AlterShareGroupOffsetsRequestTopic{Topic: rt.Topic})
					}
					r.Topics[len(r.Topics)-1].Partitions = append(r.Topics[len(r.Topics)-1].Partitions, rp)
					slots[l] = append(slots[l], slot{ti, len(ot.Partitions)})
					code = 0
				} else {
					code, msg = st.Reset(req.GroupID, t, rp.Partition, rp.StartOffset, &d)
				}
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
		if len(remote) == 0 {
			rc.respond(resp)
			return
		}
		c := st.cluster
		c.fanOut(slices.Sorted(maps.Keys(remote)), func(ctx context.Context, id int32, addr string) {
			r := remote[id]
			rr := r.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
			err := c.forwardTo(ctx, id, addr, r, rr)
			if err == nil {
				err = kerr.ErrorForCode(rr.ErrorCode)
			}
			answers := map[string]map[int32]kmsg.AlterShareGroupOffsetsResponseTopicPartition{}
			for _, t := range rr.Topics {
				for _, p := range t.Partitions {
					if answers[t.Topic] == nil {
						answers[t.Topic] = map[int32]kmsg.AlterShareGroupOffsetsResponseTopicPartition{}
					}
					answers[t.Topic][p.Partition] = p
				}
			}
			for _, sl := range slots[id] {
				op := &resp.Topics[sl.t].Partitions[sl.p]
				a, ok := answers[resp.Topics[sl.t].Topic][op.Partition]
				switch {
				case err != nil:
					op.ErrorCode, op.ErrorMessage = forwardCode(err)
				case !ok:
					op.ErrorCode = kerr.UnknownServerError.Code
				default:
					op.ErrorCode, op.ErrorMessage = a.ErrorCode, a.ErrorMessage
				}
			}
		}, func() { rc.respond(resp) })
	})
}
