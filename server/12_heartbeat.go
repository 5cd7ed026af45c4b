package server

// Heartbeat (API key 12), v0..v4: keeps a member's session alive; answers
// REBALANCE_IN_PROGRESS while the group rebalances (the member rejoins).

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	c, code := s.groupCoordinator()
	code = s.groupAuthorized(rc, req.Group, code) // authz.go: Read on the group
	if code == 0 {
		inst := ""
		if req.InstanceID != nil {
			inst = *req.InstanceID
		}
		code = c.Heartbeat(req.Group, req.MemberID, inst, req.Generation)
	}
	resp.ErrorCode = code
	rc.respond(resp)
}
