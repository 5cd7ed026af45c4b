package server

// ShareGroupDescribe (API key 77), v1: the share groups' members, epochs
// and assignments (share.Groups). An unknown group is GROUP_ID_NOT_FOUND
// (a group known only by its share-partitions' state is Empty);
// the state is "Empty" without members, else "Stable" (share groups need
// no rebalance: a member's new assignment takes effect at once).
// Describe on the group is required (GROUP_AUTHORIZATION_FAILED); the
// authorized operations are computed when asked for.

import (
	"iter"
	"maps"
	"slices"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/broker/sharehost"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(77, 1, 1, handleShareGroupDescribe) }

func mapsKeys[V any](m map[string]V) iter.Seq[string] { return maps.Keys(m) }

func handleShareGroupDescribe(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	code, msg := s.shareErr()
	st := s.groups.share
	var rk sharehost.Replicas
	if code == 0 {
		// In a cluster, the groups unknown here are looked for in this
		// broker's replicas of the state topic before the lock is taken.
		var ids []string
		for _, id := range req.GroupIDs {
			if id != "" && s.authorized(rc, auth.OpDescribe, auth.ResourceGroup, id) {
				ids = append(ids, id)
			}
		}
		rk = st.ReplicaKeys(ids, true)
		st.Lock()
		defer st.Unlock()
	}
	for _, id := range req.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID = id
		var sg *share.Group
		if code == 0 {
			sg = st.Groups().Group(id)
		}
		switch {
		case code != 0:
			g.ErrorCode, g.ErrorMessage = code, kmsg.StringPtr(msg)
		case !s.authorized(rc, auth.OpDescribe, auth.ResourceGroup, id): // authz.go
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		case id == "":
			g.ErrorCode = kerr.InvalidGroupID.Code
		case sg == nil && !st.Known(id, rk):
			g.ErrorCode, g.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr("Group "+id+" not found.")
		case sg == nil:
			// Known by its share-partitions' state only (after a
			// restart: members are not persisted), as ListGroups lists
			// it: Empty, without members.
			g.GroupState, g.Assignor = "Empty", share.AssignorSimple
			if req.IncludeAuthorizedOperations {
				g.AuthorizedOperations = s.authorizedOps(rc, auth.ResourceGroup, id, groupAuthorizedOps) // authz.go
			}
		default:
			g.GroupState = sg.State()
			g.GroupEpoch, g.AssignmentEpoch = sg.Epoch, sg.AssignmentEpoch
			g.Assignor = share.AssignorSimple
			if req.IncludeAuthorizedOperations {
				g.AuthorizedOperations = s.authorizedOps(rc, auth.ResourceGroup, id, groupAuthorizedOps) // authz.go
			}
			for _, mid := range slices.Sorted(mapsKeys(sg.Members)) {
				m := sg.Members[mid]
				gm := kmsg.NewShareGroupDescribeResponseGroupMember()
				gm.MemberID, gm.MemberEpoch = m.ID, m.Epoch
				gm.ClientID, gm.ClientHost = m.ClientID, m.ClientHost
				if m.RackID != "" {
					gm.RackID = kmsg.StringPtr(m.RackID)
				}
				gm.SubscribedTopicNames = slices.Clone(m.Topics)
				for _, name := range slices.Sorted(mapsKeys(m.Assignment)) {
					tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
					tp.Topic, tp.Partitions = name, slices.Clone(m.Assignment[name])
					if t := s.eng.Topic(name); t != nil {
						tp.TopicID = t.ID()
					}
					gm.Assignment.TopicPartitions = append(gm.Assignment.TopicPartitions, tp)
				}
				g.Members = append(g.Members, gm)
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	rc.respond(resp)
}
