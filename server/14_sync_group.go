package server

// SyncGroup (API key 14), v0..v5.
//
// Followers wait (the reqCtx is completed later) until the leader's
// assignment is written to __consumer_offsets; the leader's request is
// answered at the same time. v5 checks the protocol type and name against
// the group's (INCONSISTENT_GROUP_PROTOCOL) and echoes them. A member that
// joined and sends no SyncGroup within the rebalance timeout is removed by
// the coordinator (group.Group's pending syncs, as Kafka's
// expirePendingSync): its late SyncGroup gets UNKNOWN_MEMBER_ID.

import (
	"github.com/stratalog/strata/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(14, 0, 5, handleSyncGroup) }

func handleSyncGroup(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	answer := func(r group.SyncResult) {
		resp.ErrorCode = r.Err
		resp.MemberAssignment = r.Assignment
		if resp.MemberAssignment == nil {
			resp.MemberAssignment = []byte{}
		}
		if r.Err == 0 && req.Version >= 5 {
			resp.ProtocolType = kmsg.StringPtr(r.ProtocolType)
			resp.Protocol = kmsg.StringPtr(r.Protocol)
		}
		rc.respond(resp)
	}
	c, code := s.groupCoordinator()
	code = s.groupAuthorized(rc, req.Group, code) // authz.go: Read on the group
	if code != 0 {
		answer(group.SyncResult{Err: code})
		return
	}
	sr := group.SyncRequest{
		Group: req.Group, MemberID: req.MemberID, Generation: req.Generation,
		ProtocolType: req.ProtocolType, Protocol: req.Protocol,
	}
	if req.InstanceID != nil {
		sr.InstanceID = *req.InstanceID
	}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			if _, dup := sr.Assignments[a.MemberID]; dup {
				answer(group.SyncResult{Err: kerr.InvalidRequest.Code})
				return
			}
			sr.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	c.Sync(sr, answer)
}
