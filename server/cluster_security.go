package server

// Cluster mode's security state (issue 20): ACLs, SCRAM credentials and
// client quotas live in the controller's replicated State
// (controller/security.go), as Kafka keeps them in its metadata log, and
// every broker applies them.
//
//   - Admin requests (CreateAcls, DeleteAcls, AlterUserScramCredentials,
//     AlterClientQuotas) are validated here as on a single broker, then
//     proposed to the controller; the answer waits until this broker has
//     applied the change, so a Describe on the same broker right after
//     sees it. DeleteAcls resolves its filters against the controller's
//     State and proposes the exact bindings they match.
//   - broker/cluster's SecuritySync, run by the security goroutine (one per
//     Server, on the cluster's wg and ctx), seeds the kinds the cluster has
//     never had from this broker's acls.json, quotas.json and SCRAM file,
//     then applies the State's ACLs, credentials and quotas to the
//     Authorizer, the SCRAM store and the Quotas whenever they change.
//
// No lock of this file is held across a controller call.

import (
	"context"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/broker/cluster"
	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startSecuritySync starts the security goroutine (initCluster).
func (s *Server) startSecuritySync() {
	c := &s.cluster
	c.sec = cluster.NewSecuritySync(c.ctl, cluster.SecurityStores{Authorizer: s.cfg.Authorizer, Scram: s.cfg.Scram, Quotas: s.cfg.Quotas}, s.log)
	w := c.ctl.Watch()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer w.Close()
		c.sec.Run(c.ctx, c.member.CaughtUp(), w)
	}()
}

// ---- admin requests ----

// proposeSecurity proposes cmd and waits until this broker has applied
// it; a refusal is the controller's Kafka error.
func (s *Server) proposeSecurity(ctx context.Context, cmd controller.Command) (controller.Result, error) {
	// Not before this broker's seed: a change would mark its kind seeded
	// and the broker's local state of that kind would never be seeded.
	if err := s.cluster.sec.Wait(ctx, 1); err != nil {
		return controller.Result{}, newAPIError(kerr.RequestTimedOut, "this broker has not caught up with the security metadata: %v", err)
	}
	r, err := s.cluster.ctl.Propose(ctx, cmd)
	if err != nil {
		return r, proposeErr(err)
	}
	if r.Code != 0 {
		return r, resultErr(r.Code, r.Message)
	}
	if err := s.cluster.sec.Wait(ctx, r.Offset); err != nil {
		return r, newAPIError(kerr.RequestTimedOut, "the change is in the metadata but this broker has not applied it yet: %v", err)
	}
	return r, nil
}

// clusterCreateAcls proposes the valid bindings (at their request
// indexes) and answers resp.
func (s *Server) clusterCreateAcls(rc *reqCtx, resp *kmsg.CreateACLsResponse, valid []auth.Binding, at []int) {
	s.goAdmin(0, func(ctx context.Context) {
		cmd := controller.CreateACLs{}
		for _, b := range valid {
			cmd.ACLs = append(cmd.ACLs, cluster.ACLOf(b))
		}
		if _, err := s.proposeSecurity(ctx, cmd); err != nil {
			s.log.Warn("create ACLs failed", "err", err)
			for _, i := range at {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = apiErrCode(err), errMessage(err)
			}
		} else {
			for _, b := range valid {
				s.log.Info("ACL created", "acl", b.String(), "by", rc.principal())
			}
		}
		rc.respond(resp)
	})
}

// clusterDeleteAcls resolves filters against the controller's ACLs,
// proposes the deletion of the matches and answers, per filter, what it
// matched.
func (s *Server) clusterDeleteAcls(rc *reqCtx, resp *kmsg.DeleteACLsResponse, filters []auth.Filter, at []int) {
	s.goAdmin(0, func(ctx context.Context) {
		var all []auth.Binding
		s.cluster.ctl.Read(func(st *controller.State) {
			for _, a := range st.ACLs() {
				all = append(all, cluster.BindingOf(a))
			}
		})
		deleted := make([][]auth.Binding, len(filters))
		var cmd controller.DeleteACLs
		gone := map[auth.Binding]bool{}
		for k, f := range filters {
			for _, b := range all {
				if f.Matches(b) {
					deleted[k] = append(deleted[k], b)
					if !gone[b] {
						gone[b] = true
						cmd.ACLs = append(cmd.ACLs, cluster.ACLOf(b))
					}
				}
			}
		}
		if len(cmd.ACLs) > 0 {
			if _, err := s.proposeSecurity(ctx, cmd); err != nil {
				s.log.Warn("delete ACLs failed", "err", err)
				for _, i := range at {
					resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = apiErrCode(err), errMessage(err)
				}
				rc.respond(resp)
				return
			}
		}
		fillDeleteAcls(s, rc, resp, deleted, at)
		rc.respond(resp)
	})
}

// fillDeleteAcls puts each filter's deleted bindings into its result.
func fillDeleteAcls(s *Server, rc *reqCtx, resp *kmsg.DeleteACLsResponse, deleted [][]auth.Binding, at []int) {
	for k, i := range at {
		for _, b := range deleted[k] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType = kmsg.ACLResourceType(b.ResourceType)
			m.ResourceName = b.ResourceName
			m.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			m.Principal, m.Host = b.Principal, b.Host
			m.Operation = kmsg.ACLOperation(b.Operation)
			m.PermissionType = kmsg.ACLPermissionType(b.Permission)
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			s.log.Info("ACL deleted", "acl", b.String(), "by", rc.principal())
		}
	}
}

// scramChange is one of a user's changes in AlterUserScramCredentials.
type scramChange struct {
	del  bool
	mech string
	cred sasl.ScramCredential
}

// clusterAlterScram proposes each user's changes (one command per user:
// all of a user's changes or none, as Kafka) and calls done with each
// user's error (nil: applied).
func (s *Server) clusterAlterScram(order []string, changes map[string][]scramChange, done func(errs map[string]error)) {
	s.goAdmin(0, func(ctx context.Context) {
		errs := map[string]error{}
		for _, user := range order {
			cs, ok := changes[user]
			if !ok {
				continue
			}
			var cmd controller.AlterScram
			for _, c := range cs {
				if c.del {
					cmd.Deletes = append(cmd.Deletes, controller.ScramKey{User: user, Mechanism: c.mech})
				} else {
					cmd.Upserts = append(cmd.Upserts, controller.ScramCredential{User: user, Mechanism: c.mech,
						Salt: c.cred.Salt, StoredKey: c.cred.StoredKey, ServerKey: c.cred.ServerKey, Iterations: int32(c.cred.Iterations)})
				}
			}
			if _, err := s.proposeSecurity(ctx, cmd); err != nil {
				errs[user] = err
			}
		}
		done(errs)
	})
}

// clusterAlterQuotas proposes each entry's operations (nil: the entry
// failed already) and calls done with each entry's error.
func (s *Server) clusterAlterQuotas(entries [][]auth.QuotaChange, done func(errs []error)) {
	s.goAdmin(0, func(ctx context.Context) {
		errs := make([]error, len(entries))
		for i, changes := range entries {
			if changes == nil {
				continue
			}
			var cmd controller.AlterClientQuotas
			for _, c := range changes {
				cmd.Ops = append(cmd.Ops, controller.QuotaOp{Entity: cluster.QuotaEntityOf(c.Entity), Key: c.Type, Value: c.Value, Remove: c.Remove})
			}
			if _, err := s.proposeSecurity(ctx, cmd); err != nil {
				errs[i] = err
			}
		}
		done(errs)
	})
}
