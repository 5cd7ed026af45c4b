package server

// DescribeGroups (API key 15), v0..v6.
//
// Each group's state, protocol type, selected protocol and members with
// their subscription metadata (Stable and CompletingRebalance) and
// assignment (Stable). A KIP-848 consumer group is answered in the same
// classic shape, as Kafka 4 does (group.Coordinator.Describe): protocol
// type "consumer", its server-side assignor as the protocol, its own state
// name, and in every state each member with a ConsumerProtocolSubscription
// (v0: its subscribed topic names) as metadata and a
// ConsumerProtocolAssignment (the partitions it owns now) as assignment.
// A group that does not exist is state "Dead" with no error before v6 and
// GROUP_ID_NOT_FOUND from v6 (KIP-1043), as Kafka. Authorized operations
// are not computed (no ACLs): the field keeps its "not requested" value.

import (
	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(15, 0, 6, handleDescribeGroups) }

func handleDescribeGroups(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	resp.Groups = make([]kmsg.DescribeGroupsResponseGroup, len(req.Groups))
	c, ccode := s.groupCoordinator()
	for i, id := range req.Groups {
		g := &resp.Groups[i]
		g.Default()
		g.Group = id
		g.State = "Dead"
		g.Members = []kmsg.DescribeGroupsResponseGroupMember{}
		if !s.authorized(rc, auth.OpDescribe, auth.ResourceGroup, id) { // authz.go
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			continue
		}
		if ccode != 0 {
			g.ErrorCode = ccode
			continue
		}
		d, found, code := c.Describe(id)
		if code != 0 {
			g.ErrorCode = code
			continue
		}
		if !found {
			if req.Version >= 6 {
				g.ErrorCode = kerr.GroupIDNotFound.Code
				g.ErrorMessage = kmsg.StringPtr("group " + id + " not found")
			}
			continue
		}
		g.State, g.ProtocolType, g.Protocol = d.StateName, d.ProtocolType, d.Protocol
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = s.authorizedOps(rc, auth.ResourceGroup, id, groupAuthorizedOps) // authz.go
		}
		for _, m := range d.Members {
			gm := kmsg.NewDescribeGroupsResponseGroupMember()
			gm.MemberID, gm.ClientID, gm.ClientHost = m.MemberID, m.ClientID, m.ClientHost
			if m.InstanceID != "" {
				gm.InstanceID = kmsg.StringPtr(m.InstanceID)
			}
			gm.ProtocolMetadata, gm.MemberAssignment = m.Metadata, m.Assignment
			if gm.ProtocolMetadata == nil {
				gm.ProtocolMetadata = []byte{}
			}
			if gm.MemberAssignment == nil {
				gm.MemberAssignment = []byte{}
			}
			g.Members = append(g.Members, gm)
		}
	}
	rc.respond(resp)
}
