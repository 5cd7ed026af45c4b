package server

import (
	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterUserScramCredentials v0 (KIP-554, issue 20): `kafka-configs --alter
// --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users`. The
// client salts the password (salt, iterations, Hi(password)); the broker
// keeps the derived stored and server keys (Config.Scram, a file in the
// data directory), so the password never reaches it. Kafka's checks, one
// result per user: an unknown mechanism is UNSUPPORTED_SASL_MECHANISM;
// iterations outside 4096..16384, an empty name, salt or salted password
// UNACCEPTABLE_CREDENTIAL; a user and mechanism named twice
// DUPLICATE_RESOURCE; deleting a credential that does not exist
// RESOURCE_NOT_FOUND. A user's changes apply only when all of them are
// valid. New SASL connections use the new credentials at once; open ones
// stay authenticated.
//
// In a cluster each user's changes go to the replicated metadata, one
// controller command per user (cluster_security.go), and every broker
// applies them to its store; the answer comes once this broker has.
// Needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED).
func init() { register(51, 0, 0, handleAlterUserScramCredentials) }

func handleAlterUserScramCredentials(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !s.authorizedCluster(rc, auth.OpAlter) { // authz.go
		resp.Results = scramAlterDenied(req)
		rc.respond(resp)
		return
	}

	type change = scramChange
	var order []string
	errs := map[string]*kmsg.AlterUserSCRAMCredentialsResponseResult{}
	changes := map[string][]change{}
	seen := map[[2]string]bool{}
	fail := func(user string, code int16, msg string) {
		if _, ok := errs[user]; !ok {
			if _, ok := changes[user]; !ok {
				order = append(order, user)
			}
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode, r.ErrorMessage = user, code, kmsg.StringPtr(msg)
			errs[user] = &r
		}
	}
	add := func(user string, mech int8, c change) bool {
		if user == "" {
			fail(user, kerr.UnacceptableCredential.Code, "Username must not be empty")
			return false
		}
		name, ok := scramMechanisms[mech]
		if !ok {
			fail(user, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
			return false
		}
		if seen[[2]string{user, name}] {
			fail(user, kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
			return false
		}
		seen[[2]string{user, name}] = true
		c.mech = name
		if _, ok := changes[user]; !ok {
			if _, failed := errs[user]; !failed {
				order = append(order, user)
			}
		}
		changes[user] = append(changes[user], c)
		return true
	}
	for _, d := range req.Deletions {
		add(d.Name, d.Mechanism, change{del: true})
	}
	for _, u := range req.Upsertions {
		name := scramMechanisms[u.Mechanism]
		switch {
		case u.Iterations < sasl.MinIterations && name != "":
			fail(u.Name, kerr.UnacceptableCredential.Code, "Too few iterations")
			continue
		case u.Iterations > sasl.MaxIterations && name != "":
			fail(u.Name, kerr.UnacceptableCredential.Code, "Too many iterations")
			continue
		}
		var cred sasl.ScramCredential
		if name != "" {
			var err error
			if cred, err = sasl.CredentialFromSalted(name, u.SaltedPassword, u.Salt, int(u.Iterations)); err != nil {
				fail(u.Name, kerr.UnacceptableCredential.Code, "Invalid salt or salted password")
				continue
			}
		}
		add(u.Name, u.Mechanism, change{cred: cred})
	}

	finish := func() {
		for _, user := range order {
			if r := errs[user]; r != nil {
				resp.Results = append(resp.Results, *r)
				continue
			}
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User = user
			resp.Results = append(resp.Results, r)
		}
		rc.respond(resp)
	}
	if s.clustered() {
		todo := map[string][]scramChange{}
		for _, user := range order {
			if errs[user] == nil {
				todo[user] = changes[user]
			}
		}
		s.clusterAlterScram(order, todo, func(perr map[string]error) {
			for user, err := range perr {
				fail(user, apiErrCode(err), *errMessage(err))
			}
			finish()
		})
		return
	}
	store := s.cfg.Scram
	for _, user := range order {
		if errs[user] != nil {
			continue
		}
		if store == nil {
			fail(user, kerr.InvalidRequest.Code, "this broker keeps no SCRAM credentials")
			continue
		}
		err := store.Update(func(tx *sasl.StoreTx) error {
			for _, c := range changes[user] {
				if c.del {
					if !tx.Delete(user, c.mech) {
						return errNoCredential
					}
				} else {
					tx.Set(user, c.mech, c.cred)
				}
			}
			return nil
		})
		switch {
		case err == errNoCredential:
			fail(user, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
		case err != nil:
			s.log.Error("storing SCRAM credentials", "user", user, "err", err)
			fail(user, kerr.UnknownServerError.Code, "storing the credentials failed")
		}
	}
	finish()
}

type scramError string

func (e scramError) Error() string { return string(e) }

const errNoCredential = scramError("no such credential")
