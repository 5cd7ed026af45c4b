package server

import (
	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeUserScramCredentials v0 (KIP-554, issue 20): the mechanisms and
// iteration counts of users' SCRAM credentials (Config.Scram), never
// their salts or keys; what `kafka-configs --describe --entity-type users`
// and kadm's DescribeUserSCRAMs show. No users (null or empty) describes
// every user; a user without credentials is RESOURCE_NOT_FOUND, a user
// named twice DUPLICATE_RESOURCE, as in Kafka. Needs Describe on the
// cluster (CLUSTER_AUTHORIZATION_FAILED). In a cluster the store holds
// the replicated credentials (cluster_security.go).
func init() { register(50, 0, 0, handleDescribeUserScramCredentials) }

// scramMechanisms are Kafka's ScramMechanism codes.
var scramMechanisms = map[int8]string{1: sasl.ScramSHA256, 2: sasl.ScramSHA512}

func scramMechanismCode(name string) int8 {
	for c, n := range scramMechanisms {
		if n == name {
			return c
		}
	}
	return 0
}

func handleDescribeUserScramCredentials(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.authorizedCluster(rc, auth.OpDescribe) { // authz.go
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		rc.respond(resp)
		return
	}
	store := s.cfg.Scram
	var users []string
	if len(req.Users) == 0 {
		users = store.Users()
	} else {
		for _, u := range req.Users {
			users = append(users, u.Name)
		}
	}
	seen := map[string]int{}
	for _, u := range users {
		seen[u]++
	}
	emitted := map[string]bool{}
	for _, u := range users {
		if emitted[u] {
			continue // one result per user, duplicated or not
		}
		emitted[u] = true
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u
		mechs := store.Mechanisms(u)
		switch {
		case seen[u] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u)
		case len(mechs) == 0:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + u)
		}
		if r.ErrorCode == 0 {
			for _, m := range mechs {
				c, _ := store.Get(u, m)
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism = scramMechanismCode(m)
				ci.Iterations = int32(c.Iterations)
				r.CredentialInfos = append(r.CredentialInfos, ci)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	rc.respond(resp)
}
