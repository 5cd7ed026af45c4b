package server

import (
	"errors"

	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateAcls v0..v3 (issue 20): adds ACLs, one result per creation.
// Kafka's answers: SECURITY_DISABLED without an authorizer,
// CLUSTER_AUTHORIZATION_FAILED without Alter on the cluster,
// INVALID_REQUEST for a binding Kafka's controller refuses
// (auth.Binding.Validate); the valid ones are created together and kept
// in the data directory's acls.json before the answer. In a cluster they
// go to the replicated metadata (cluster_security.go) and every broker
// applies them; the answer comes once this broker has.
func init() { register(30, 0, 3, handleCreateAcls) }

func handleCreateAcls(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	fail := func(code int16, msg string) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode = code
			if msg != "" {
				resp.Results[i].ErrorMessage = kmsg.StringPtr(msg)
			}
		}
	}
	a := s.cfg.Authorizer
	switch {
	case a == nil:
		fail(kerr.SecurityDisabled.Code, "No Authorizer is configured on the broker")
	case !s.authorizedCluster(rc, auth.OpAlter):
		fail(kerr.ClusterAuthorizationFailed.Code, "")
	default:
		var valid []auth.Binding
		var at []int
		for i, c := range req.Creations {
			b := auth.Binding{
				ResourceType: auth.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
				PatternType: aclPattern(rc, int8(c.ResourcePatternType)),
				Principal:   c.Principal, Host: c.Host,
				Operation: auth.Operation(c.Operation), Permission: auth.Permission(c.PermissionType),
			}
			if err := b.Validate(); err != nil {
				resp.Results[i].ErrorCode = kerr.InvalidRequest.Code
				resp.Results[i].ErrorMessage = kmsg.StringPtr(err.Error())
				continue
			}
			valid, at = append(valid, b), append(at, i)
		}
		if len(valid) == 0 {
			break
		}
		if s.clustered() {
			s.clusterCreateAcls(rc, resp, valid, at)
			return
		}
		if err := a.Create(valid); err != nil {
			code := kerr.UnknownServerError.Code
			if errors.Is(err, auth.ErrInvalid) {
				code = kerr.InvalidRequest.Code
			}
			s.log.Warn("create ACLs failed", "err", err)
			for _, i := range at {
				resp.Results[i].ErrorCode = code
				resp.Results[i].ErrorMessage = kmsg.StringPtr(err.Error())
			}
			break
		}
		for _, b := range valid {
			s.log.Info("ACL created", "acl", b.String(), "by", rc.principal())
		}
	}
	rc.respond(resp)
}
