package server

// ListGroups (API key 16), v0..v5.
//
// Every group this broker coordinates, with its protocol type, state (v4+)
// and type (v5+: "classic", "consumer" for KIP-848 groups, whose states
// are Empty, Assigning, Reconciling and Stable, or "share" for share
// groups, Empty or Stable). v4's states filter and v5's
// types filter are case-insensitive, as in Kafka; an unknown state name
// matches nothing. While a __consumer_offsets partition
// is loading the answer carries COORDINATOR_LOAD_IN_PROGRESS with the groups
// known so far.

import (
	"strings"

	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	groupTypeClassic  = "classic"
	groupTypeConsumer = "consumer"
	groupTypeShare    = "share" // KIP-932 share groups (share.go), protocol type "share" as in Kafka
)

func init() { register(16, 0, 5, handleListGroups) }

func handleListGroups(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.Groups = []kmsg.ListGroupsResponseGroup{}
	c, code := s.groupCoordinator()
	if code != 0 {
		resp.ErrorCode = code
		rc.respond(resp)
		return
	}
	list, loading := c.List()
	if loading {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
	}
	wantType := func(consumer bool) bool {
		if len(req.TypesFilter) == 0 {
			return true
		}
		want := groupTypeClassic
		if consumer {
			want = groupTypeConsumer
		}
		for _, t := range req.TypesFilter {
			if strings.EqualFold(t, want) {
				return true
			}
		}
		return false
	}
	wantState := func(name string) bool {
		if len(req.StatesFilter) == 0 {
			return true
		}
		for _, f := range req.StatesFilter {
			if strings.EqualFold(f, name) {
				return true
			}
		}
		return false
	}
	// authz.go: Describe on the cluster lists every group, else only
	// the groups the principal may Describe.
	all := s.authorizedCluster(rc, auth.OpDescribe)
	for _, l := range list {
		if !wantType(l.Consumer) || !wantState(l.StateName) {
			continue
		}
		if !all && !s.authorized(rc, auth.OpDescribe, auth.ResourceGroup, l.Group) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.Group, l.ProtocolType, l.StateName, groupTypeClassic
		if l.Consumer {
			g.GroupType = groupTypeConsumer
		}
		resp.Groups = append(resp.Groups, g)
	}
	for _, l := range s.shareGroupListings() { // share.go
		if !typeWanted(req.TypesFilter, groupTypeShare) || !wantState(l.state) {
			continue
		}
		if !all && !s.authorized(rc, auth.OpDescribe, auth.ResourceGroup, l.id) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.id, groupTypeShare, l.state, groupTypeShare
		resp.Groups = append(resp.Groups, g)
	}
	rc.respond(resp)
}

// typeWanted reports whether v5's types filter lets typ through.
func typeWanted(filter []string, typ string) bool {
	if len(filter) == 0 {
		return true
	}
	for _, t := range filter {
		if strings.EqualFold(t, typ) {
			return true
		}
	}
	return false
}
