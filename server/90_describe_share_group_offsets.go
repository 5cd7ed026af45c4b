package server

// DescribeShareGroupOffsets (API key 90), v0..v1 (v1, Kafka 4.2, adds Lag,
// KIP-1226): each share-partition's start offset and leader epoch, and its
// lag (records at or past the start offset and below the high watermark
// that are not acknowledged or archived yet). Null topics: every
// share-partition the group has state for. A partition without state has
// start offset -1 (and lag -1), as in Kafka; a group unknown to the
// coordinator and without state is GROUP_ID_NOT_FOUND.

import (
	"github.com/stratalog/strata/broker/sharehost"
	"slices"

	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(90, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	code, msg := s.shareErr()
	st := s.groups.share
	var d durable
	if code == 0 {
		st.Lock()
	}
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		switch {
		case code != 0:
			g.ErrorCode, g.ErrorMessage = code, kmsg.StringPtr(msg)
		case rg.GroupID == "":
			g.ErrorCode = kerr.InvalidGroupID.Code
		case !s.authorized(rc, auth.OpDescribe, auth.ResourceGroup, rg.GroupID): // authz.go
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		case !st.Known(rg.GroupID):
			g.ErrorCode, g.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr("Group "+rg.GroupID+" not found.")
		default:
			g.Topics = s.describeShareOffsets(rg.GroupID, rg.Topics, &d)
			for i := range g.Topics {
				if !s.authorized(rc, auth.OpDescribe, auth.ResourceTopic, g.Topics[i].Topic) {
					for j := range g.Topics[i].Partitions {
						p := &g.Topics[i].Partitions[j]
						p.ErrorCode, p.StartOffset, p.Lag = kerr.TopicAuthorizationFailed.Code, -1, -1
					}
				}
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	if code == 0 {
		st.Unlock()
	}
	s.waitDurable(d, func(error) { rc.respond(resp) })
}

// describeShareOffsets answers one group (st.mu held).
func (s *Server) describeShareOffsets(group string, topics []kmsg.DescribeShareGroupOffsetsRequestGroupTopic, d *durable) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	st := s.groups.share
	if topics == nil { // every share-partition with state
		byName := map[string][]int32{}
		for _, k := range st.GroupKeys(group) {
			if t := s.eng.TopicByID(k.TopicID); t != nil && !t.Deleted() && !slices.Contains(byName[t.Name()], k.Part) {
				byName[t.Name()] = append(byName[t.Name()], k.Part)
			}
		}
		for _, name := range slices.Sorted(mapsKeys(byName)) {
			ps := byName[name]
			slices.Sort(ps)
			topics = append(topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: name, Partitions: ps})
		}
	}
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for _, rt := range topics {
		ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		ot.Topic = rt.Topic
		t := s.eng.Topic(rt.Topic)
		if t != nil && t.Deleted() {
			t = nil
		}
		if t != nil {
			ot.TopicID = t.ID()
		}
		for _, p := range rt.Partitions {
			op := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			op.Partition = p
			op.StartOffset, op.LeaderEpoch = -1, -1
			switch {
			case t == nil || t.Partition(p) == nil:
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				op.LeaderEpoch = t.Partition(p).LeaderEpoch()
				if sp := st.Existing(group, t, p, d); sp != nil {
					op.StartOffset = sp.P.StartOffset()
					op.Lag = sharehost.Lag(sp)
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		out = append(out, ot)
	}
	return out
}
