package server

import (
	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeAcls v0..v3 (issue 20): the ACLs a filter selects (package
// auth's Filter: Kafka's AclBindingFilter rules), grouped by resource
// pattern. Kafka's answers: SECURITY_DISABLED without an authorizer,
// CLUSTER_AUTHORIZATION_FAILED without Describe on the cluster,
// INVALID_REQUEST for a filter with an unknown code. v0 filters are
// literal (pattern types came in v1).
func init() { register(29, 0, 3, handleDescribeAcls) }

func handleDescribeAcls(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	a := s.cfg.Authorizer
	switch {
	case a == nil:
		resp.ErrorCode = kerr.SecurityDisabled.Code
		resp.ErrorMessage = kmsg.StringPtr("No Authorizer is configured on the broker")
	case !s.authorizedCluster(rc, auth.OpDescribe):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	default:
		f := auth.Filter{
			ResourceType: auth.ResourceType(req.ResourceType), ResourceName: req.ResourceName,
			PatternType: aclPattern(rc, int8(req.ResourcePatternType)),
			Principal:   req.Principal, Host: req.Host,
			Operation: auth.Operation(req.Operation), Permission: auth.Permission(req.PermissionType),
		}
		if err := f.Validate(); err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			resp.ErrorMessage = kmsg.StringPtr(err.Error())
			break
		}
		resp.Resources = describeAclsResources(a.Describe(f))
	}
	rc.respond(resp)
}

// aclPattern is a request's pattern type: literal before v1, which has
// no field for it.
func aclPattern(rc *reqCtx, p int8) auth.PatternType {
	if rc.version == 0 {
		return auth.PatternLiteral
	}
	return auth.PatternType(p)
}

// describeAclsResources groups bindings (sorted by resource pattern, as
// Authorizer keeps them) by their resource pattern.
func describeAclsResources(bs []auth.Binding) []kmsg.DescribeACLsResponseResource {
	var out []kmsg.DescribeACLsResponseResource
	for _, b := range bs {
		n := len(out)
		if n == 0 || out[n-1].ResourceType != kmsg.ACLResourceType(b.ResourceType) ||
			out[n-1].ResourceName != b.ResourceName || out[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(b.PatternType) {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType = kmsg.ACLResourceType(b.ResourceType)
			r.ResourceName = b.ResourceName
			r.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			out = append(out, r)
			n++
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal, acl.Host = b.Principal, b.Host
		acl.Operation = kmsg.ACLOperation(b.Operation)
		acl.PermissionType = kmsg.ACLPermissionType(b.Permission)
		out[n-1].ACLs = append(out[n-1].ACLs, acl)
	}
	return out
}
