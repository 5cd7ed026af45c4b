package server

// OffsetFetch (API key 9), v1..v9.
//
// v1..v7 ask for one group, v8+ for a batch (KIP-709). A null topic list
// (v2+) asks for every committed offset of the group. A partition without a
// commit answers offset -1 and empty metadata, no error, as Kafka.
// Coordinator errors go into the top-level code (v2..v7), the group's code
// (v8+) and, for v1 (which has no top-level code), every partition.
// require_stable (v7+, KIP-447): a partition for which a transaction has
// staged an offset (TxnOffsetCommit) that is not committed or aborted yet
// answers UNSTABLE_OFFSET_COMMIT with offset -1, so a consumer that starts
// while a transaction is ending retries instead of resuming from an offset
// the transaction is about to replace. v9's member
// id and epoch are for KIP-848 groups and are not checked for classic ones.
// v0 (ZooKeeper offsets) and v10 (topic ids) are not advertised.

import (
	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(9, 1, 9, handleOffsetFetch) }

func handleOffsetFetch(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		resp.Groups = make([]kmsg.OffsetFetchResponseGroup, len(req.Groups))
		for i := range req.Groups {
			rg := &req.Groups[i]
			var topics []kmsg.OffsetFetchRequestTopic
			if rg.Topics != nil {
				topics = make([]kmsg.OffsetFetchRequestTopic, len(rg.Topics))
				for j, t := range rg.Topics {
					topics[j] = kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions}
				}
			}
			out, code := s.offsetFetchGroup(rc, rg.Group, topics, rg.Topics == nil, req.RequireStable)
			g := &resp.Groups[i]
			g.Default()
			g.Group, g.ErrorCode = rg.Group, code
			g.Topics = make([]kmsg.OffsetFetchResponseGroupTopic, len(out))
			for j, t := range out {
				gt := &g.Topics[j]
				gt.Default()
				gt.Topic = t.Topic
				gt.Partitions = make([]kmsg.OffsetFetchResponseGroupTopicPartition, len(t.Partitions))
				for k, p := range t.Partitions {
					gt.Partitions[k] = kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p.Partition,
						Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode}
				}
			}
		}
		rc.respond(resp)
		return
	}
	out, code := s.offsetFetchGroup(rc, req.Group, req.Topics, req.Topics == nil && req.Version >= 2, req.RequireStable)
	resp.Topics = out
	if req.Version >= 2 {
		resp.ErrorCode = code
	} else if code != 0 {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
	}
	rc.respond(resp)
}

// offsetFetchGroup answers one group: the asked partitions (all committed
// ones if all) and the group-level error code. On a coordinator error the
// asked partitions come back with offset -1. rc's principal needs
// Describe on the group (GROUP_AUTHORIZATION_FAILED) and on each topic:
// an asked topic it may not describe is TOPIC_AUTHORIZATION_FAILED, and
// left out of an all-topics answer, as Kafka (authz.go).
func (s *Server) offsetFetchGroup(rc *reqCtx, groupID string, topics []kmsg.OffsetFetchRequestTopic, all, requireStable bool) ([]kmsg.OffsetFetchResponseTopic, int16) {
	var tps []group.TopicPartition
	var denied []kmsg.OffsetFetchResponseTopic
	if !all {
		tps = []group.TopicPartition{}
		for _, t := range topics {
			if !s.authorized(rc, auth.OpDescribe, auth.ResourceTopic, t.Topic) {
				denied = append(denied, offsetFetchDenied(t))
				continue
			}
			for _, p := range t.Partitions {
				tps = append(tps, group.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	c, code := s.groupCoordinator()
	if code == 0 && !s.authorized(rc, auth.OpDescribe, auth.ResourceGroup, groupID) {
		code = kerr.GroupAuthorizationFailed.Code
	}
	var got []group.FetchedOffset
	if code == 0 {
		got, code = c.Fetch(groupID, tps)
	}
	if code != 0 {
		got = make([]group.FetchedOffset, len(tps))
		for i, tp := range tps {
			got[i] = group.FetchedOffset{TP: tp, Offset: group.Offset{Offset: -1, LeaderEpoch: -1}}
		}
	}
	var out []kmsg.OffsetFetchResponseTopic
	idx := map[string]int{}
	for _, f := range got {
		if all && !s.authorized(rc, auth.OpDescribe, auth.ResourceTopic, f.TP.Topic) {
			continue
		}
		i, ok := idx[f.TP.Topic]
		if !ok {
			i = len(out)
			idx[f.TP.Topic] = i
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = f.TP.Topic
			out = append(out, t)
		}
		p := kmsg.NewOffsetFetchResponseTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = f.TP.Partition, f.Offset.Offset, f.LeaderEpoch
		p.Metadata = kmsg.StringPtr(f.Metadata)
		if requireStable && code == 0 && c.HasPendingTxnOffsets(groupID, f.TP) {
			p.Offset, p.LeaderEpoch, p.Metadata = -1, -1, kmsg.StringPtr("")
			p.ErrorCode = kerr.UnstableOffsetCommit.Code
		}
		out[i].Partitions = append(out[i].Partitions, p)
	}
	out = append(out, denied...)
	if out == nil {
		out = []kmsg.OffsetFetchResponseTopic{}
	}
	return out, code
}

// offsetFetchDenied answers a topic the principal may not describe.
func offsetFetchDenied(t kmsg.OffsetFetchRequestTopic) kmsg.OffsetFetchResponseTopic {
	out := kmsg.NewOffsetFetchResponseTopic()
	out.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
		rp.Metadata = kmsg.StringPtr("")
		rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		out.Partitions = append(out.Partitions, rp)
	}
	return out
}
