package server

import (
	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeClientQuotas v0..v1 (KIP-546): the quotas of the entities the
// filter selects (quota.go). Needs DescribeConfigs on the cluster
// (CLUSTER_AUTHORIZATION_FAILED); an unknown entity or match type is
// INVALID_REQUEST.
func init() { register(48, 0, 1, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !s.authorizedCluster(rc, auth.OpDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		rc.respond(resp)
		return
	}
	parts := make([]auth.QuotaFilterPart, 0, len(req.Components))
	for _, c := range req.Components {
		p := auth.QuotaFilterPart{EntityType: c.EntityType, Match: auth.QuotaMatch(c.MatchType)}
		if c.Match != nil {
			p.Name = *c.Match
		}
		if p.Match == auth.MatchExact && c.Match == nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			resp.ErrorMessage = kmsg.StringPtr("an exact match needs a name")
			rc.respond(resp)
			return
		}
		parts = append(parts, p)
	}
	if s.cfg.Quotas != nil {
		found, err := s.cfg.Quotas.Describe(parts, req.Strict)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			resp.ErrorMessage = kmsg.StringPtr(err.Error())
			rc.respond(resp)
			return
		}
		for _, d := range found {
			e := kmsg.NewDescribeClientQuotasResponseEntry()
			entityParts(d.Entity, func(typ string, name *string) {
				p := kmsg.NewDescribeClientQuotasResponseEntryEntity()
				p.Type, p.Name = typ, name
				e.Entity = append(e.Entity, p)
			})
			for _, k := range auth.QuotaTypes {
				if v, ok := d.Values[k]; ok {
					val := kmsg.NewDescribeClientQuotasResponseEntryValue()
					val.Key, val.Value = k, v
					e.Values = append(e.Values, val)
				}
			}
			resp.Entries = append(resp.Entries, e)
		}
	}
	rc.respond(resp)
}
