package server

// JoinGroup (API key 11), v0..v9.
//
// The request waits (the reqCtx is completed later, from the coordinator's
// timer goroutine or another member's request) until the rebalance
// completes; see package group. v4+ first joins get MEMBER_ID_REQUIRED with
// the member id to rejoin with (KIP-394). v0 has no rebalance timeout: the
// session timeout is used. The client host is the connection's remote
// address, as Kafka reports it.

import (
	"github.com/stratalog/strata/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(11, 0, 9, handleJoinGroup) }

func handleJoinGroup(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	answer := func(r group.JoinResult) {
		resp.ErrorCode = r.Err
		resp.Generation = r.Generation
		resp.MemberID = r.MemberID
		resp.LeaderID = r.LeaderID
		if r.Err == 0 {
			resp.Protocol = kmsg.StringPtr(r.Protocol)
			if req.Version >= 7 {
				resp.ProtocolType = kmsg.StringPtr(r.ProtocolType)
			}
		}
		if r.SkipAssignment {
			if req.Version >= 9 {
				resp.SkipAssignment = true
			} else {
				// Before KIP-814 a returning static leader is told nothing:
				// it syncs as a follower and gets its old assignment.
				resp.LeaderID, r.Members = "", nil
			}
		}
		resp.Members = make([]kmsg.JoinGroupResponseMember, len(r.Members))
		for i, m := range r.Members {
			rm := &resp.Members[i]
			rm.Default()
			rm.MemberID, rm.ProtocolMetadata = m.MemberID, m.Metadata
			if m.InstanceID != "" {
				rm.InstanceID = kmsg.StringPtr(m.InstanceID)
			}
		}
		rc.respond(resp)
	}
	c, code := s.groupCoordinator()
	code = s.groupAuthorized(rc, req.Group, code) // authz.go: Read on the group
	if code != 0 {
		answer(group.JoinResult{Err: code, MemberID: req.MemberID, Generation: -1})
		return
	}
	jr := group.JoinRequest{
		Group:                req.Group,
		MemberID:             req.MemberID,
		ClientID:             rc.client,
		ClientHost:           clientHost(rc),
		ProtocolType:         req.ProtocolType,
		SessionTimeoutMs:     req.SessionTimeoutMillis,
		RebalanceTimeoutMs:   req.RebalanceTimeoutMillis,
		RequireKnownMemberID: req.Version >= 4,
	}
	if req.Version == 0 {
		jr.RebalanceTimeoutMs = req.SessionTimeoutMillis
	}
	if req.InstanceID != nil {
		jr.InstanceID = *req.InstanceID
	}
	jr.Protocols = make([]group.Protocol, len(req.Protocols))
	for i, p := range req.Protocols {
		jr.Protocols[i] = group.Protocol{Name: p.Name, Metadata: p.Metadata}
	}
	c.Join(jr, answer)
}

// clientHost is the client's address as Kafka's DescribeGroups shows it
// ("/127.0.0.1").
func clientHost(rc *reqCtx) string {
	a := remoteAddr(rc.conn)
	if a == "" {
		return ""
	}
	host := a
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] == ':' {
			host = a[:i]
			break
		}
	}
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	return "/" + host
}
