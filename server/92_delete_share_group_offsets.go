package server

// DeleteShareGroupOffsets (API key 92), v0: forgets a share group's state
// for whole topics (every share-partition of the topic: tombstones in
// __share_group_state, written before the answer), so the next
// consumption starts where share.auto.offset.reset says. Only for a group
// without members (NON_EMPTY_GROUP otherwise); an unknown topic is
// UNKNOWN_TOPIC_OR_PARTITION; a group unknown to the share coordinator
// is GROUP_ID_NOT_FOUND. In a cluster the group's coordinator answers
// (NOT_COORDINATOR elsewhere), forgetting the share-partitions it leads
// and forwarding the topics to the leaders of the others; such a
// forwarded request (fromBroker) forgets the partitions led here.

import (
	"context"
	"maps"
	"slices"
	"sync"

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
	fwd := s.fromBroker(rc) // the group's coordinator, for partitions led here
	if !fwd {
		if !s.authorized(rc, auth.OpDelete, auth.ResourceGroup, req.GroupID) { // authz.go
			fail(kerr.GroupAuthorizationFailed.Code, "")
			return
		}
		if code, msg := s.shareCoordinatorErr(req.GroupID); code != 0 { // share_cluster.go
			fail(code, msg)
			return
		}
	}
	st := s.groups.share
	var rk sharehost.Replicas
	if !fwd {
		rk = st.ReplicaKeys([]string{req.GroupID}, true) // without the lock
	}
	st.Lock()
	switch g := st.Groups().Group(req.GroupID); {
	case fwd:
	case g != nil && len(g.Members) > 0:
		st.Unlock()
		fail(kerr.NonEmptyGroup.Code, "The group has active members.")
		return
	case !st.Known(req.GroupID, rk):
		st.Unlock()
		fail(kerr.GroupIDNotFound.Code, "Group "+req.GroupID+" not found.")
		return
	}
	// In a cluster each partition's leader deletes its share-partition:
	// the topics with partitions led elsewhere are forwarded there.
	remote := map[int32]*kmsg.DeleteShareGroupOffsetsRequest{}
	slots := map[int32][]int{}
	var d durable
	for ti, rt := range req.Topics {
		ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		if !fwd && !s.authorized(rc, auth.OpRead, auth.ResourceTopic, rt.Topic) {
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
			if st.Clustered() {
				l := s.groups.share.cluster.leaderOf(rt.Topic, p)
				switch {
				case l == s.cfg.NodeID:
				case fwd:
					continue // another leader's
				case l < 0:
					ot.ErrorCode, ot.ErrorMessage = kerr.LeaderNotAvailable.Code, kmsg.StringPtr("a partition of the topic has no leader")
					continue
				default:
					if len(slots[l]) == 0 || slots[l][len(slots[l])-1] != ti {
						r := remote[l]
						if r == nil {
							r = kmsg.NewPtrDeleteShareGroupOffsetsRequest()
							r.GroupID = req.GroupID
							remote[l] = r
						}
						r.Topics = append(r.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: rt.Topic})
						slots[l] = append(slots[l], ti)
					}
					continue
				}
			}
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
		if len(remote) == 0 {
			rc.respond(resp)
			return
		}
		var mu sync.Mutex
		c := st.cluster
		c.fanOut(slices.Sorted(maps.Keys(remote)), func(ctx context.Context, id int32, addr string) {
			r := remote[id]
			rr := r.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
			err := c.forwardTo(ctx, id, addr, r, rr)
			if err == nil {
				err = kerr.ErrorForCode(rr.ErrorCode)
			}
			answers := map[string]kmsg.DeleteShareGroupOffsetsResponseTopic{}
			for _, t := range rr.Topics {
				answers[t.Topic] = t
			}
			mu.Lock()
			defer mu.Unlock()
			for _, ti := range slots[id] {
				ot := &resp.Topics[ti]
				if ot.ErrorCode != 0 {
					continue
				}
				a, ok := answers[ot.Topic]
				switch {
				case err != nil:
					ot.ErrorCode, ot.ErrorMessage = forwardCode(err)
				case !ok:
					ot.ErrorCode = kerr.UnknownServerError.Code
				default:
					ot.ErrorCode, ot.ErrorMessage = a.ErrorCode, a.ErrorMessage
				}
			}
		}, func() { rc.respond(resp) })
	})
}
