package server

import (
	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteAcls v0..v3 (issue 20): removes the ACLs each filter selects
// (Kafka's AclBindingFilter rules) and answers, per filter, the ACLs it
// removed. Kafka's answers: SECURITY_DISABLED without an authorizer,
// CLUSTER_AUTHORIZATION_FAILED without Alter on the cluster,
// INVALID_REQUEST for a filter with an unknown code. The removal is
// written to acls.json before the answer; in a cluster it goes to the
// replicated metadata (cluster_security.go).
func init() { register(31, 0, 3, handleDeleteAcls) }

func handleDeleteAcls(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	fail := func(i int, code int16, msg string) {
		resp.Results[i].ErrorCode = code
		if msg != "" {
			resp.Results[i].ErrorMessage = kmsg.StringPtr(msg)
		}
	}
	a := s.cfg.Authorizer
	switch {
	case a == nil:
		for i := range resp.Results {
			fail(i, kerr.SecurityDisabled.Code, "No Authorizer is configured on the broker")
		}
	case !s.authorizedCluster(rc, auth.OpAlter):
		for i := range resp.Results {
			fail(i, kerr.ClusterAuthorizationFailed.Code, "")
		}
	default:
		var filters []auth.Filter
		var at []int
		for i, f := range req.Filters {
			af := auth.Filter{
				ResourceType: auth.ResourceType(f.ResourceType), ResourceName: f.ResourceName,
				PatternType: aclPattern(rc, int8(f.ResourcePatternType)),
				Principal:   f.Principal, Host: f.Host,
				Operation: auth.Operation(f.Operation), Permission: auth.Permission(f.PermissionType),
			}
			if err := af.Validate(); err != nil {
				fail(i, kerr.InvalidRequest.Code, err.Error())
				continue
			}
			filters, at = append(filters, af), append(at, i)
		}
		if len(filters) == 0 {
			break
		}
		if s.clustered() {
			s.clusterDeleteAcls(rc, resp, filters, at)
			return
		}
		deleted, err := a.Delete(filters)
		if err != nil {
			s.log.Warn("delete ACLs failed", "err", err)
			for _, i := range at {
				fail(i, kerr.UnknownServerError.Code, err.Error())
			}
			break
		}
		fillDeleteAcls(s, rc, resp, deleted, at)
	}
	rc.respond(resp)
}
