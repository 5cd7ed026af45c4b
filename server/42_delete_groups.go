package server

// DeleteGroups (API key 42), v0..v3.
//
// A group must exist (GROUP_ID_NOT_FOUND) and have no members
// (NON_EMPTY_GROUP). A classic or consumer group's offsets and metadata
// are removed by tombstones in __consumer_offsets, written before the
// answer. A share group (KIP-932: one the share coordinator knows by its
// members or its share-partitions' state) is deleted with its
// share-partitions' state by tombstones in __share_group_state, written
// before the answer (share.go's deleteShareGroup); its group configs stay.
// In a cluster the group's coordinator has the leaders of its
// share-partitions delete theirs before it answers.
// v3 adds an error message.

import (
	"sync"

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
	if len(groups) == 0 {
		answer(nil)
		return
	}

	// Share groups first (share.go); the rest go to the group coordinator.
	// codes is answered once every share group's tombstones are durable
	// and the coordinator has answered.
	codes := make([]int16, len(groups))
	var (
		mu      sync.Mutex
		left    = 1
		classic []string
		at      []int // classic[k] is groups[at[k]]
	)
	finish := func() {
		mu.Lock()
		left--
		last := left == 0
		mu.Unlock()
		if last {
			answer(codes)
		}
	}
	for i, id := range groups {
		mu.Lock()
		left++
		mu.Unlock()
		if !s.deleteShareGroup(rc, id, func(code int16) {
			mu.Lock()
			codes[i] = code
			mu.Unlock()
			finish()
		}) {
			mu.Lock()
			left--
			mu.Unlock()
			classic, at = append(classic, id), append(at, i)
		}
	}
	if len(classic) == 0 {
		finish()
		return
	}
	c, code := s.groupCoordinator()
	if code != 0 {
		for _, i := range at {
			codes[i] = code
		}
		finish()
		return
	}
	c.DeleteGroups(classic, func(cc []int16) {
		mu.Lock()
		for k, i := range at {
			if k < len(cc) {
				codes[i] = cc[k]
			}
		}
		mu.Unlock()
		finish()
	})
}
