package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func runUsersCLI(t *testing.T, env map[string]string, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := usersMainEnv(args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return out.String() + errb.String(), err
}

// Mistakes on the command line are usage errors, found before connecting
// (the brokers are an address nothing listens on).
func TestUsersCLIUsage(t *testing.T) {
	env := map[string]string{"STRATA_BROKERS": "127.0.0.1:1"}
	for _, args := range [][]string{
		{"create", "--password", "p"},                               // no name
		{"create", "a", "b", "--password", "p"},                     // two names
		{"create", "a"},                                             // no password
		{"create", "a", "--password", "p", "--mechanism", "PLAIN"},  // not SCRAM
		{"create", "a", "--password", "p", "--iterations", "1000"},  // below Kafka's range
		{"create", "a", "--password", "p", "--iterations", "20000"}, // above it
		{"delete"}, // no name
		{"delete", "a", "--mechanism", "SCRAM-SHA-1"}, // not a mechanism
		{"list", "--format", "yaml"},                  // bad format
		{"list", "--sasl-mechanism", "GSSAPI"},        // unsupported login mechanism
		{"rename", "a"},                               // unknown verb
	} {
		_, err := runUsersCLI(t, env, "", args...)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	// --password - with nothing on standard input is an error too.
	if _, err := runUsersCLI(t, env, "", "create", "a", "--password", "-"); err == nil {
		t.Error("--password - with empty standard input: no error")
	}
}

// create sends a random salt, the iteration count and the salted password
// (PBKDF2 with the mechanism's HMAC), a new salt each time; the password
// itself is nowhere in the request's bytes at any version.
func TestScramUpsertionSendsNoPassword(t *testing.T) {
	const pw = "correct horse battery staple"
	for _, mech := range []string{sasl.ScramSHA256, sasl.ScramSHA512} {
		u, err := scramUpsertion("alice", mech, pw, 8192)
		if err != nil {
			t.Fatal(err)
		}
		if u.Name != "alice" || u.Iterations != 8192 || scramMechanismName(u.Mechanism) != mech || len(u.Salt) != 32 {
			t.Fatalf("%s: upsertion %+v", mech, u)
		}
		want, _ := sasl.SaltedPassword(mech, pw, u.Salt, 8192)
		if !bytes.Equal(u.SaltedPassword, want) {
			t.Fatalf("%s: salted password is not PBKDF2(password, salt, 8192)", mech)
		}
		again, _ := scramUpsertion("alice", mech, pw, 8192)
		if bytes.Equal(again.Salt, u.Salt) {
			t.Fatalf("%s: the same salt twice", mech)
		}
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		req.Upsertions = append(req.Upsertions, u)
		for v := req.GetVersion(); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			if b := req.AppendTo(nil); bytes.Contains(b, []byte(pw)) {
				t.Fatalf("%s: the password is in the request (v%d)", mech, v)
			}
		}
	}
}
