package main

import (
	"log/slog"
	"path/filepath"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/config"
)

// openAuthorizer returns the broker's authorizer (issue 20): nil without
// authorizer.class.name (every request allowed, as Kafka without one),
// else Kafka's StandardAuthorizer rules (package auth) with super.users
// and allow.everyone.if.no.acl.found, its ACLs kept in the data
// directory's acls.json. In a cluster the ACLs are replicated metadata
// (broker/cluster's SecuritySync applies them here) and acls.json is this
// broker's copy of them (docs/security.md).
func openAuthorizer(cfg config.Broker, dir string, logger *slog.Logger) (*auth.Authorizer, error) {
	if cfg.Authorizer == "" {
		return nil, nil
	}
	a, err := auth.Open(auth.Config{
		SuperUsers:   auth.ParseSuperUsers(cfg.SuperUsers),
		AllowIfNoACL: cfg.AllowEveryoneIfNoACL,
	}, filepath.Join(dir, engine.AclsFile))
	if err != nil {
		return nil, err
	}
	logger.Info("authorization on", "authorizer", cfg.Authorizer, "acls", len(a.All()),
		"super_users", a.Config().SuperUsers, "allow_everyone_if_no_acl_found", cfg.AllowEveryoneIfNoACL)
	if len(a.Config().SuperUsers) == 0 {
		logger.Warn("authorizer on without super.users: only ACLs grant anything, and CreateAcls needs Alter on the cluster; brokers of a cluster need ClusterAction")
	}
	return a, nil
}

// openQuotas returns the broker's client quotas (issue 20), kept in the
// data directory's quotas.json and managed with AlterClientQuotas; like
// the ACLs, replicated metadata in a cluster.
func openQuotas(dir string, logger *slog.Logger) (*auth.Quotas, error) {
	q, err := auth.OpenQuotas(auth.QuotaConfig{}, filepath.Join(dir, engine.QuotasFile))
	if err != nil {
		return nil, err
	}
	if q.Active() {
		logger.Info("client quotas on", "file", engine.QuotasFile)
	}
	return q, nil
}
