package server

// DeleteGroups (API key 42), v0..v3.
//
// A group must exist (GROUP_ID_NOT_FOUND) and have no members
// (NON_EMPTY_GROUP). Its offsets and metadata are removed by tombstones in
// __consumer_offsets, written before the answer. v3 adds an error message.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(42, 0, 3, handleDeleteGroups) }

func handleDeleteGroups(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
	for i, id := range req.Groups {
		resp.Groups[i].Default()
		resp.Groups[i].Group = id
	}
	answer := func(codes []int16) {
		for i, code := range codes {
			resp.Groups[i].ErrorCode = code
			if code != 0 && req.Version >= 3 {
				if e := kerr.ErrorForCode(code); e != nil {
					resp.Groups[i].ErrorMessage = kmsg.StringPtr(e.Error())
				}
			}
		}
		rc.respond(resp)
	}
	// authz.go: Delete on each group; the others are answered
	// GROUP_AUTHORIZATION_FAILED and not deleted.
	groups, answer := s.deleteGroupsAllowed(rc, req.Groups, answer)
	c, code := s.groupCoordinator()
	if code != 0 {
		codes := make([]int16, len(req.Groups))
		for i := range codes {
			codes[i] = code
		}
		answer(codes)
		return
	}
	if len(groups) == 0 {
		answer(nil)
		return
	}
	c.DeleteGroups(groups, answer)
}
