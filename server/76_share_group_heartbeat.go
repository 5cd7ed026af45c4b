package server

// ShareGroupHeartbeat (API key 76), v1 (Kafka 4.1 and 4.2; v0 was
// KIP-932's early access): share-group membership (share.Groups: member
// ids are the client's, epoch 0 joins with SubscribedTopicNames, -1
// leaves, a stale epoch is FENCED_MEMBER_EPOCH, sessions time out after
// group.share.session.timeout.ms) and the assignment of the subscribed
// topics' partitions by KIP-932's simple assignor (a partition may be given
// to several members). A member that leaves has its acquired records
// released at once; one that times out, at the share tick (in a cluster,
// at every broker: sharehost.Host.MemberGone). Assignments
// travel by topic id. A group id the group coordinator has as a classic or
// consumer group is GROUP_ID_NOT_FOUND ("Group g is not a share group.",
// as Kafka says); the other way round (JoinGroup or
// ConsumerGroupHeartbeat on a share group's id) is not checked yet.

import (
	"slices"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(76, 1, 1, handleShareGroupHeartbeat) }

// isClassicOrConsumerGroup reports whether the group coordinator has a
// classic or KIP-848 group of that id: a share group cannot take it.
func (s *Server) isClassicOrConsumerGroup(id string) bool {
	c, code := s.groupCoordinator()
	if code != 0 {
		return false
	}
	_, found, _ := c.Describe(id)
	return found
}

func handleShareGroupHeartbeat(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	if code, msg := s.shareErr(); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		rc.respond(resp)
		return
	}
	if code := s.groupAuthorized(rc, req.GroupID, 0); code != 0 { // authz.go: Read on the group
		resp.ErrorCode = code
		rc.respond(resp)
		return
	}
	for _, t := range req.SubscribedTopicNames {
		if !s.authorized(rc, auth.OpDescribe, auth.ResourceTopic, t) {
			resp.ErrorCode, resp.ErrorMessage = kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr("not authorized to describe topic "+t)
			rc.respond(resp)
			return
		}
	}
	if code, msg := s.shareCoordinatorErr(req.GroupID); code != 0 { // share_cluster.go
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		rc.respond(resp)
		return
	}
	var catalog share.Catalog = engineCatalog{s.eng}
	if s.clustered() {
		catalog = viewCatalog{s}
	}
	st := s.groups.share
	nowMs := s.now().UnixMilli()
	st.Lock()
	if req.MemberEpoch == 0 && st.Groups().Group(req.GroupID) == nil && s.isClassicOrConsumerGroup(req.GroupID) {
		st.Unlock()
		resp.ErrorCode, resp.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr("Group "+req.GroupID+" is not a share group.")
		rc.respond(resp)
		return
	}
	r := st.Groups().Heartbeat(nowMs, share.HeartbeatRequest{
		Group: req.GroupID, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		RackID: req.RackID, Topics: req.SubscribedTopicNames,
		ClientID: rc.client, ClientHost: clientHost(rc),
	}, catalog)
	if r.Left != nil {
		st.MemberGone(nowMs, r.Left.Group, r.Left.Member)
	}
	st.Unlock()
	if r.Err != 0 {
		resp.ErrorCode = r.Err
		if r.Msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(r.Msg)
		}
		rc.respond(resp)
		return
	}
	resp.MemberID = kmsg.StringPtr(req.MemberID)
	resp.MemberEpoch = r.MemberEpoch
	resp.HeartbeatIntervalMillis = r.IntervalMs
	if r.HasAssignment {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for _, name := range slices.Sorted(mapsKeys(r.Assignment)) {
			id, ok := s.shareTopicID(name)
			if !ok {
				continue
			}
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = id, r.Assignment[name]
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	rc.respond(resp)
}
