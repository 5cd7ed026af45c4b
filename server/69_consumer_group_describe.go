package server

// ConsumerGroupDescribe (API key 69), v0..v1: KIP-848 groups with their
// epochs, assignor and members (subscription, current and target
// assignment). A missing group, or a classic one, is GROUP_ID_NOT_FOUND, as
// in Kafka. Authorized operations are not computed.

import (
	"slices"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(69, 0, 1, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	c, ccode := s.groupCoordinator()
	resp.Groups = make([]kmsg.ConsumerGroupDescribeResponseGroup, len(req.Groups))
	for i, id := range req.Groups {
		g := &resp.Groups[i]
		g.Default()
		g.Group = id
		g.State = "Dead"
		if !s.authorized(rc, auth.OpDescribe, auth.ResourceGroup, id) { // authz.go
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			continue
		}
		if ccode != 0 {
			g.ErrorCode = ccode
			continue
		}
		d, found, consumer, code := c.ConsumerDescribe(id)
		switch {
		case code != 0:
			g.ErrorCode = code
			continue
		case !found:
			g.ErrorCode, g.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr("group "+id+" not found")
			continue
		case !consumer:
			g.ErrorCode, g.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr("group "+id+" is not a consumer group")
			continue
		}
		g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = s.authorizedOps(rc, auth.ResourceGroup, id, groupAuthorizedOps) // authz.go
		}
		for _, m := range d.Members {
			gm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			gm.MemberID, gm.MemberEpoch, gm.ClientID, gm.ClientHost = m.MemberID, m.Epoch, m.ClientID, m.ClientHost
			if m.InstanceID != "" {
				gm.InstanceID = kmsg.StringPtr(m.InstanceID)
			}
			if m.RackID != "" {
				gm.RackID = kmsg.StringPtr(m.RackID)
			}
			if m.Regex != "" {
				gm.SubscribedTopicRegex = kmsg.StringPtr(m.Regex)
			}
			gm.SubscribedTopics = m.Topics
			if gm.SubscribedTopics == nil {
				gm.SubscribedTopics = []string{}
			}
			gm.Assignment = describeAssignment(s.eng, m.Assigned)
			gm.TargetAssignment = describeAssignment(s.eng, m.Target)
			if req.Version >= 1 {
				gm.MemberType = 1 // consumer protocol (KIP-1099)
			}
			g.Members = append(g.Members, gm)
		}
		if g.Members == nil {
			g.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
		}
	}
	rc.respond(resp)
}

func describeAssignment(eng *engine.Engine, a map[string][]int32) kmsg.Assignment {
	out := kmsg.NewAssignment()
	out.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	names := make([]string, 0, len(a))
	for t := range a {
		names = append(names, t)
	}
	slices.Sort(names)
	for _, name := range names {
		tp := kmsg.NewAssignmentTopicPartition()
		tp.Topic, tp.Partitions = name, a[name]
		if t := eng.Topic(name); t != nil {
			tp.TopicID = t.ID()
		}
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	return out
}
