package server

import (
	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterClientQuotas v0..v1 (KIP-546): each entry's operations set or
// remove quota types of one entity, all or none (kept in quotas.json).
// Needs AlterConfigs on the cluster (CLUSTER_AUTHORIZATION_FAILED); an
// unknown entity type, a repeated one, an unknown quota type or a value
// Kafka refuses is INVALID_REQUEST for that entry; ValidateOnly checks
// without applying. The quota types are auth.QuotaTypes: the byte rates
// in whole bytes per second, request_percentage in percent of one
// request-handler thread (any positive number: 200 is two threads). In a
// cluster the valid entries go to the replicated metadata, one controller
// command per entry (cluster_security.go), and every broker applies them.
func init() { register(49, 0, 1, handleAlterClientQuotas) }

func handleAlterClientQuotas(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := s.authorizedCluster(rc, auth.OpAlterConfigs)
	cluster := s.clustered() && !req.ValidateOnly
	pending := make([][]auth.QuotaChange, len(req.Entries)) // cluster: each entry's changes to propose
	for i, en := range req.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range en.Entity {
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = p.Type, p.Name
			out.Entity = append(out.Entity, re)
		}
		fail := func(code int16, msg string) {
			out.ErrorCode = code
			if msg != "" {
				out.ErrorMessage = kmsg.StringPtr(msg)
			}
		}
		ent, bad, ok := quotaEntity(en.Entity)
		switch {
		case !allowed:
			fail(kerr.ClusterAuthorizationFailed.Code, "")
		case s.cfg.Quotas == nil && !s.clustered():
			fail(kerr.InvalidRequest.Code, "this broker keeps no client quotas")
		case !ok:
			fail(kerr.InvalidRequest.Code, "unknown or repeated entity type "+bad)
		default:
			changes := make([]auth.QuotaChange, 0, len(en.Ops))
			for _, op := range en.Ops {
				changes = append(changes, auth.QuotaChange{Entity: ent, Type: op.Key, Value: op.Value, Remove: op.Remove})
			}
			var err error
			if req.ValidateOnly || cluster {
				err = auth.NewQuotas(auth.QuotaConfig{}).Alter(changes)
			} else {
				err = s.cfg.Quotas.Alter(changes)
			}
			if err != nil {
				fail(kerr.InvalidRequest.Code, err.Error())
			} else if cluster {
				pending[i] = changes
			}
		}
		resp.Entries = append(resp.Entries, out)
	}
	if !cluster {
		rc.respond(resp)
		return
	}
	s.clusterAlterQuotas(pending, func(errs []error) {
		for i, err := range errs {
			if err != nil {
				resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = apiErrCode(err), errMessage(err)
			}
		}
		rc.respond(resp)
	})
}
