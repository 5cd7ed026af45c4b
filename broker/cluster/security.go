package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/internal/sasl"
)

// SecurityStores are the broker's stores the replicated security state is
// applied to; a nil store is neither seeded nor applied.
type SecurityStores struct {
	Authorizer *auth.Authorizer
	Scram      *sasl.Store
	Quotas     *auth.Quotas
	// NoSeed: apply the replicated state only, never seed it from these
	// stores (a controller-only node, whose stores check its controller
	// port's peers and were never a broker's).
	NoSeed bool
}

// SecuritySync applies the controller's replicated ACLs, SCRAM credentials
// and client quotas (controller/security.go) to this broker's stores, as
// Kafka's brokers apply them from the metadata log: Run waits until the
// broker has caught up with the metadata, seeds the kinds the cluster has
// never had (controller.SeedSecurity: this broker's local stores, which
// hold what a broker kept before the cluster replicated them, or the
// bootstrap credentials of a new cluster; the first broker's seed wins,
// later seeds change nothing), then replaces each store's content with the
// State's whenever the State's security offset moves. The local files
// become this broker's copy of the replicated state: what it enforces after
// a restart until it has caught up again. Wait lets an admin request
// answer once this broker has applied its change.
type SecuritySync struct {
	ctl    *controller.Controller
	stores SecurityStores
	log    *slog.Logger

	mu      sync.Mutex
	offset  int64         // metadata offset whose security state is applied
	changed chan struct{} // closed when offset moves
}

// NewSecuritySync returns a SecuritySync of ctl's state into stores.
func NewSecuritySync(ctl *controller.Controller, stores SecurityStores, log *slog.Logger) *SecuritySync {
	return &SecuritySync{ctl: ctl, stores: stores, log: log, changed: make(chan struct{})}
}

// Run seeds, then applies every change w signals (retrying a store that
// refused every 500 ms), until ctx ends. It starts once caughtUp is closed
// (the broker has caught up with the metadata). The caller owns the
// goroutine that runs it and w.
func (s *SecuritySync) Run(ctx context.Context, caughtUp <-chan struct{}, w *controller.Watcher) {
	select {
	case <-caughtUp:
	case <-ctx.Done():
		return
	}
	for !s.stores.NoSeed && !s.seed(ctx) {
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	applied := int64(-1) // the security offset applied
	var retry <-chan time.Time
	for {
		if ok, secOff := s.apply(applied); ok {
			applied, retry = secOff, nil
		} else {
			retry = time.After(500 * time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.C():
		case <-retry:
		}
	}
}

// seed proposes this broker's local state for the kinds the cluster has
// not seeded; true once nothing is left to seed.
func (s *SecuritySync) seed(ctx context.Context) bool {
	var seeded uint8
	s.ctl.Read(func(st *controller.State) { seeded = st.SecuritySeeded() })
	cmd := controller.SeedSecurity{}
	if a := s.stores.Authorizer; a != nil && seeded&controller.SecurityACLs == 0 {
		cmd.Kinds |= controller.SecurityACLs
		for _, b := range a.All() {
			cmd.ACLs = append(cmd.ACLs, ACLOf(b))
		}
	}
	if st := s.stores.Scram; st != nil && seeded&controller.SecurityScram == 0 {
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
	if q := s.stores.Quotas; q != nil && seeded&controller.SecurityQuotas == 0 {
		cmd.Kinds |= controller.SecurityQuotas
		for e, vs := range q.All() {
			for _, k := range auth.QuotaTypes {
				if v, ok := vs[k]; ok {
					cmd.Quotas = append(cmd.Quotas, controller.QuotaOp{Entity: QuotaEntityOf(e), Key: k, Value: v})
				}
			}
		}
	}
	if cmd.Kinds == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := s.ctl.Propose(ctx, cmd)
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
	if err := s.ctl.WaitApplied(ctx, r.Offset); err != nil {
		s.log.Warn("cluster: waiting for the security seed", "err", err)
		return false
	}
	return true
}

// apply applies the State's security part to this broker's stores when its
// security offset differs from applied; ok false means a store refused and
// it should be retried. It publishes the metadata offset read (Wait).
func (s *SecuritySync) apply(applied int64) (ok bool, secOff int64) {
	var (
		off    int64
		seeded uint8
		acls   []controller.ACL
		creds  []controller.ScramCredential
		quotas []controller.ClientQuota
	)
	s.ctl.Read(func(st *controller.State) {
		off, secOff, seeded = st.Offset(), st.SecurityOffset(), st.SecuritySeeded()
		if secOff != applied {
			acls, creds, quotas = st.ACLs(), st.ScramCredentials(), st.ClientQuotas()
		}
	})
	ok = true
	if secOff != applied {
		// A kind the metadata has not taken over yet (not seeded: this
		// node's controller has not applied the seed) keeps the local state.
		if a := s.stores.Authorizer; a != nil && seeded&controller.SecurityACLs != 0 {
			bs := make([]auth.Binding, 0, len(acls))
			for _, x := range acls {
				if b := BindingOf(x); b.Validate() == nil {
					bs = append(bs, b)
				}
			}
			if err := a.Replace(bs); err != nil {
				s.log.Warn("cluster: applying ACLs", "err", err)
				ok = false
			}
		}
		if st := s.stores.Scram; st != nil && seeded&controller.SecurityScram != 0 {
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
		if q := s.stores.Quotas; q != nil && seeded&controller.SecurityQuotas != 0 {
			limits := make(map[auth.QuotaEntity]map[string]float64, len(quotas))
			for _, cq := range quotas {
				vs := map[string]float64{}
				for k, v := range cq.Values {
					if auth.ValidQuota(k, v) == nil {
						vs[k] = v
					}
				}
				limits[AuthQuotaEntityOf(cq.Entity)] = vs
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
		s.mu.Lock()
		if off > s.offset {
			s.offset = off
			close(s.changed)
			s.changed = make(chan struct{})
		}
		s.mu.Unlock()
	}
	return ok, secOff
}

// Wait waits until this broker has applied the security state of metadata
// offset off (1: the seed, when nothing else was ever applied).
func (s *SecuritySync) Wait(ctx context.Context, off int64) error {
	for {
		s.mu.Lock()
		cur, ch := s.offset, s.changed
		s.mu.Unlock()
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

// ---- conversions between auth's types and the controller's ----

// ACLOf is b as the controller stores it.
func ACLOf(b auth.Binding) controller.ACL {
	return controller.ACL{ResourceType: int8(b.ResourceType), ResourceName: b.ResourceName, PatternType: int8(b.PatternType),
		Principal: b.Principal, Host: b.Host, Operation: int8(b.Operation), Permission: int8(b.Permission)}
}

// BindingOf is a as package auth knows it.
func BindingOf(a controller.ACL) auth.Binding {
	return auth.Binding{ResourceType: auth.ResourceType(a.ResourceType), ResourceName: a.ResourceName,
		PatternType: auth.PatternType(a.PatternType), Principal: a.Principal, Host: a.Host,
		Operation: auth.Operation(a.Operation), Permission: auth.Permission(a.Permission)}
}

// QuotaEntityOf is e as the controller stores it.
func QuotaEntityOf(e auth.QuotaEntity) controller.QuotaEntity {
	n := func(x auth.EntityName) controller.QuotaName {
		return controller.QuotaName{Set: x.Set, Default: x.Default, Name: x.Name}
	}
	return controller.QuotaEntity{User: n(e.User), ClientID: n(e.ClientID)}
}

// AuthQuotaEntityOf is e as package auth knows it.
func AuthQuotaEntityOf(e controller.QuotaEntity) auth.QuotaEntity {
	n := func(x controller.QuotaName) auth.EntityName {
		return auth.EntityName{Set: x.Set, Default: x.Default, Name: x.Name}
	}
	return auth.QuotaEntity{User: n(e.User), ClientID: n(e.ClientID)}
}
