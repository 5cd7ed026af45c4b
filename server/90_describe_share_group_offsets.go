package server

// DescribeShareGroupOffsets (API key 90), v0..v1 (v1, Kafka 4.2, adds Lag,
// KIP-1226): each share-partition's start offset and leader epoch, and its
// lag (records at or past the start offset and below the high watermark
// that are not acknowledged or archived yet). Null topics: every
// share-partition the group has state for. A partition without state has
// start offset -1 (and lag -1), as in Kafka; a group unknown to the
// coordinator and without state is GROUP_ID_NOT_FOUND.

import (
	"slices"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(90, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	code, msg := s.shareErr()
	st := &s.groups.share
	var d durable
	if code == 0 {
		st.mu.Lock()
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
		case !s.shareGroupKnown(rg.GroupID):
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
		st.mu.Unlock()
	}
	s.waitDurable(d, func(error) { rc.respond(resp) })
}

// shareGroupKnown reports whether group has members or share-partition
// state (st.mu held).
func (s *Server) shareGroupKnown(group string) bool {
	st := &s.groups.share
	if st.groups.Group(group) != nil {
		return true
	}
	for k := range st.parts {
		if k.group == group {
			return true
		}
	}
	for k := range st.stored {
		if k.group == group {
			return true
		}
	}
	return false
}

// describeShareOffsets answers one group (st.mu held).
func (s *Server) describeShareOffsets(group string, topics []kmsg.DescribeShareGroupOffsetsRequestGroupTopic, d *durable) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	st := &s.groups.share
	if topics == nil { // every share-partition with state
		byName := map[string][]int32{}
		add := func(k sharePartKey) {
			if t := s.eng.TopicByID(k.topicID); t != nil && !t.Deleted() && !slices.Contains(byName[t.Name()], k.part) {
				byName[t.Name()] = append(byName[t.Name()], k.part)
			}
		}
		for k := range st.parts {
			if k.group == group {
				add(k)
			}
		}
		for k := range st.stored {
			if k.group == group {
				add(k)
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
				if sp := s.existingSharePart(group, t, p, d); sp != nil {
					op.StartOffset = sp.p.StartOffset()
					op.Lag = shareLag(sp.p, sp.log)
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		out = append(out, ot)
	}
	return out
}

// existingSharePart returns the share-partition if the group has state
// for it (restoring it from storage), nil otherwise (st.mu held).
func (s *Server) existingSharePart(group string, t *engine.Topic, p int32, d *durable) *sharePart {
	st := &s.groups.share
	k := sharePartKey{group: group, topicID: t.ID(), part: p}
	if _, ok := st.parts[k]; !ok {
		if _, ok := st.stored[k]; !ok {
			return nil
		}
	}
	sp, code := s.sharePartition(group, t, p, d)
	if code != 0 {
		return nil
	}
	return sp
}

// shareLag counts the records of a share-partition not done yet: those
// in its window that are not acknowledged or archived, and those past it
// below the high watermark.
func shareLag(p *share.Partition, l *engine.Log) int64 {
	hw := l.HighWatermark()
	var lag int64
	for o := p.StartOffset(); o < min(p.EndOffset(), hw); o++ {
		if st, _, _ := p.Record(o); st != share.Acknowledged && st != share.Archived {
			lag++
		}
	}
	if hw > p.EndOffset() {
		lag += hw - max(p.EndOffset(), p.StartOffset())
	}
	return lag
}
