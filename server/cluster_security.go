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
//   - The security goroutine (one per Server, on the cluster's wg and ctx)
//     waits until the broker has caught up with the metadata, seeds the
//     kinds the cluster has never had (controller.SeedSecurity: this
//     broker's acls.json, quotas.json and SCRAM file, which hold what a
//     broker kept before the cluster replicated them, or the
//     strata.scram.credentials of a new cluster; the first broker's seed
//     wins, later seeds change nothing), then applies the State's ACLs,
//     credentials and quotas to the Authorizer, the SCRAM store and the
//     Quotas whenever the State's security offset moves. The local files
//     become this broker's copy of the replicated state: what it enforces
//     after a restart until it has caught up again.
//
// No lock of this file is held across a controller call.

import (
	"context"
	"sync"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// securitySync is what the security goroutine has applied.
type securitySync struct {
	mu      sync.Mutex
	offset  int64         // metadata offset whose security state is applied
	changed chan struct{} // closed when offset moves
}

// startSecuritySync starts the security goroutine (initCluster).
func (s *Server) startSecuritySync() {
	c := &s.cluster
	c.sec.changed = make(chan struct{})
	w := c.ctl.Watch()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer w.Close()
		s.securityLoop(w)
	}()
}

func (s *Server) securityLoop(w *controller.Watcher) {
	c := &s.cluster
	select {
	case <-c.member.CaughtUp():
	case <-c.ctx.Done():
		return
	}
	for !s.seedSecurity() {
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	applied := int64(-1) // the security offset applied
	var retry <-chan time.Time
	for {
		if ok, secOff := s.applySecurity(applied); ok {
			applied, retry = secOff, nil
		} else {
			retry = time.After(500 * time.Millisecond)
		}
		select {
		case <-c.ctx.Done():
			return
		case <-w.C():
		case <-retry:
		}
	}
}

// seedSecurity proposes this broker's local state for the kinds the
// cluster has not seeded; true once nothing is left to seed.
func (s *Server) seedSecurity() bool {
	var seeded uint8
	s.cluster.ctl.Read(func(st *controller.State) { seeded = st.SecuritySeeded() })
	cmd := controller.SeedSecurity{}
	if a := s.cfg.Authorizer; a != nil && seeded&controller.SecurityACLs == 0 {
		cmd.Kinds |= controller.SecurityACLs
		for _, b := range a.All() {
			cmd.ACLs = append(cmd.ACLs, aclOf(b))
		}
	}
	if st := s.cfg.Scram; st != nil && seeded&controller.SecurityScram == 0 {
		cmd.Kinds |= controller.SecurityScram
		for _, u := range st.Users() {
			for _, m := range st.Mechanisms(u) {
				if c, ok := st.Get(u, m); ok {
					cmd.Scram = append(cmd.Scram, controller.ScramCredential{User: u, Mechanism: m,
						Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: int32(c.Iterations)})
				}
			}
		}
	}
	if q := s.cfg.Quotas; q != nil && seeded&controller.SecurityQuotas == 0 {
		cmd.Kinds |= controller.SecurityQuotas
		for e, vs := range q.All() {
			for _, k := range auth.QuotaTypes {
				if v, ok := vs[k]; ok {
					cmd.Quotas = append(cmd.Quotas, controller.QuotaOp{Entity: entityOf(e), Key: k, Value: v})
				}
			}
		}
	}
	if cmd.Kinds == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(s.cluster.ctx, 10*time.Second)
	defer cancel()
	r, err := s.cluster.ctl.Propose(ctx, cmd)
	if err != nil {
		s.log.Warn("cluster: seeding the security metadata", "err", err)
		return false
	}
	if r.Code != 0 {
		// A local entry the controller refuses: seed nothing of it rather
		// than retry forever; the kinds stay unseeded for other brokers.
		s.log.Error("cluster: the controller refused this broker's local ACLs, credentials or quotas", "err", r.Err())
		return true
	}
	s.log.Info("cluster: security metadata", "seed", r.Message, "acls", len(cmd.ACLs), "credentials", len(cmd.Scram),
		"quotas", len(cmd.Quotas), "offset", r.Offset)
	// The seed (this one or an earlier one) is applied here before any
	// of it replaces a store (applySecurity also skips unseeded kinds).
	if err := s.cluster.ctl.WaitApplied(ctx, r.Offset); err != nil {
		s.log.Warn("cluster: waiting for the security seed", "err", err)
		return false
	}
	return true
}

// applySecurity applies the State's security part to this broker's stores
// when its security offset differs from applied; ok false means a store
// refused and it should be retried. It publishes the metadata offset read.
func (s *Server) applySecurity(applied int64) (ok bool, secOff int64) {
	var (
		off    int64
		seeded uint8
		acls   []controller.ACL
		creds  []controller.ScramCredential
		quotas []controller.ClientQuota
	)
	s.cluster.ctl.Read(func(st *controller.State) {
		off, secOff, seeded = st.Offset(), st.SecurityOffset(), st.SecuritySeeded()
		if secOff != applied {
			acls, creds, quotas = st.ACLs(), st.ScramCredentials(), st.ClientQuotas()
		}
	})
	ok = true
	if secOff != applied {
		// A kind the metadata has not taken over yet (not seeded: this
		// node's controller has not applied the seed) keeps the local state.
		if a := s.cfg.Authorizer; a != nil && seeded&controller.SecurityACLs != 0 {
			bs := make([]auth.Binding, 0, len(acls))
			for _, x := range acls {
				if b := bindingOf(x); b.Validate() == nil {
					bs = append(bs, b)
				}
			}
			if err := a.Replace(bs); err != nil {
				s.log.Warn("cluster: applying ACLs", "err", err)
				ok = false
			}
		}
		if st := s.cfg.Scram; st != nil && seeded&controller.SecurityScram != 0 {
			have := map[[2]string]bool{}
			for _, u := range st.Users() {
				for _, m := range st.Mechanisms(u) {
					have[[2]string{u, m}] = true
				}
			}
			err := st.Update(func(tx *sasl.StoreTx) error {
				for k := range have {
					tx.Delete(k[0], k[1])
				}
				for _, c := range creds {
					tx.Set(c.User, c.Mechanism, sasl.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey,
						ServerKey: c.ServerKey, Iterations: int(c.Iterations)})
				}
				return nil
			})
			if err != nil {
				s.log.Warn("cluster: applying SCRAM credentials", "err", err)
				ok = false
			}
		}
		if q := s.cfg.Quotas; q != nil && seeded&controller.SecurityQuotas != 0 {
			limits := make(map[auth.QuotaEntity]map[string]float64, len(quotas))
			for _, cq := range quotas {
				vs := map[string]float64{}
				for k, v := range cq.Values {
					if auth.ValidQuota(k, v) == nil {
						vs[k] = v
					}
				}
				limits[quotaEntityOf(cq.Entity)] = vs
			}
			if err := q.Replace(limits); err != nil {
				s.log.Warn("cluster: applying client quotas", "err", err)
				ok = false
			}
		}
		if ok {
			s.log.Info("cluster: applied security metadata", "offset", secOff, "acls", len(acls), "credentials", len(creds), "quota_entities", len(quotas))
		}
	}
	if ok {
		sec := &s.cluster.sec
		sec.mu.Lock()
		if off > sec.offset {
			sec.offset = off
			close(sec.changed)
			sec.changed = make(chan struct{})
		}
		sec.mu.Unlock()
	}
	return ok, secOff
}

// waitSecurity waits until this broker has applied the security state of
// metadata offset off.
func (s *Server) waitSecurity(ctx context.Context, off int64) error {
	sec := &s.cluster.sec
	for {
		sec.mu.Lock()
		cur, ch := sec.offset, sec.changed
		sec.mu.Unlock()
		if cur >= off {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ---- conversions ----

func aclOf(b auth.Binding) controller.ACL {
	return controller.ACL{ResourceType: int8(b.ResourceType), ResourceName: b.ResourceName, PatternType: int8(b.PatternType),
		Principal: b.Principal, Host: b.Host, Operation: int8(b.Operation), Permission: int8(b.Permission)}
}

func bindingOf(a controller.ACL) auth.Binding {
	return auth.Binding{ResourceType: auth.ResourceType(a.ResourceType), ResourceName: a.ResourceName,
		PatternType: auth.PatternType(a.PatternType), Principal: a.Principal, Host: a.Host,
		Operation: auth.Operation(a.Operation), Permission: auth.Permission(a.Permission)}
}

func entityOf(e auth.QuotaEntity) controller.QuotaEntity {
	n := func(x auth.EntityName) controller.QuotaName {
		return controller.QuotaName{Set: x.Set, Default: x.Default, Name: x.Name}
	}
	return controller.QuotaEntity{User: n(e.User), ClientID: n(e.ClientID)}
}

func quotaEntityOf(e controller.QuotaEntity) auth.QuotaEntity {
	n := func(x controller.QuotaName) auth.EntityName {
		return auth.EntityName{Set: x.Set, Default: x.Default, Name: x.Name}
	}
	return auth.QuotaEntity{User: n(e.User), ClientID: n(e.ClientID)}
}

// ---- admin requests ----

// proposeSecurity proposes cmd and waits until this broker has applied
// it; a refusal is the controller's Kafka error.
func (s *Server) proposeSecurity(ctx context.Context, cmd controller.Command) (controller.Result, error) {
	// Not before this broker's seed: a change would mark its kind seeded
	// and the broker's local state of that kind would never be seeded.
	if err := s.waitSecurity(ctx, 1); err != nil {
		return controller.Result{}, newAPIError(kerr.RequestTimedOut, "this broker has not caught up with the security metadata: %v", err)
	}
	r, err := s.cluster.ctl.Propose(ctx, cmd)
	if err != nil {
		return r, proposeErr(err)
	}
	if r.Code != 0 {
		return r, resultErr(r.Code, r.Message)
	}
	if err := s.waitSecurity(ctx, r.Offset); err != nil {
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
			cmd.ACLs = append(cmd.ACLs, aclOf(b))
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
				all = append(all, bindingOf(a))
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
						cmd.ACLs = append(cmd.ACLs, aclOf(b))
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
				cmd.Ops = append(cmd.Ops, controller.QuotaOp{Entity: entityOf(c.Entity), Key: c.Type, Value: c.Value, Remove: c.Remove})
			}
			if _, err := s.proposeSecurity(ctx, cmd); err != nil {
				errs[i] = err
			}
		}
		done(errs)
	})
}
