package server

// LeaveGroup (API key 13), v0..v5.
//
// v0..v2 remove one member by id; v3+ remove a batch (KIP-345), each by
// member id or by group.instance.id (static members leave with member id
// ""), with a code per member. Leaving triggers a rebalance of the rest.

import (
	"github.com/stratalog/strata/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(13, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	c, code := s.groupCoordinator()
	code = s.groupAuthorized(rc, req.Group, code) // authz.go: Read on the group
	if code != 0 {
		resp.ErrorCode = code
		rc.respond(resp)
		return
	}
	var members []group.LeaveMember
	if req.Version < 3 {
		members = []group.LeaveMember{{MemberID: req.MemberID}}
	} else {
		if len(req.Members) == 0 {
			resp.ErrorCode = kerr.InvalidRequest.Code
			rc.respond(resp)
			return
		}
		members = make([]group.LeaveMember, len(req.Members))
		for i, m := range req.Members {
			members[i].MemberID = m.MemberID
			if m.InstanceID != nil {
				members[i].InstanceID = *m.InstanceID
			}
		}
	}
	top, codes := c.Leave(req.Group, members)
	resp.ErrorCode = top
	if top == 0 && req.Version < 3 {
		resp.ErrorCode = codes[0]
	}
	if top == 0 && req.Version >= 3 {
		resp.Members = make([]kmsg.LeaveGroupResponseMember, len(req.Members))
		for i, m := range req.Members {
			rm := &resp.Members[i]
			rm.Default()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, codes[i]
		}
	}
	rc.respond(resp)
}
