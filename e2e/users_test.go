package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// runStrata runs `strata CMD args...` against addr, authenticated as
// user with SCRAM-SHA-512 (password in $STRATA_SASL_PASSWORD), and
// returns its output and exit error.
func runStrata(addr, user, pass string, args ...string) (string, error) {
	cmd := exec.Command(strataBin, append(args, "--brokers", addr, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", user)...)
	cmd.Env = append(os.Environ(), "STRATA_SASL_PASSWORD="+pass)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// login authenticates to the broker at addr alone with mech and sends a
// Metadata request (which any authenticated principal may send).
func login(ctx context.Context, addr string, mech kgosasl.Mechanism) error {
	_, err := onlyBroker(ctx, addr, mech, kmsg.NewPtrMetadataRequest())
	return err
}

// TestUsersWithTheBinary (issue 20): `strata users` against `strata
// serve` with SASL SCRAM and the StandardAuthorizer. The admin creates
// dave (SCRAM-SHA-256, 8192 iterations) with the binary; franz-go logs in
// as dave; list shows his mechanism and iterations, never a secret; the
// password reaches neither the broker's logs nor its credential file; a
// user without Alter on the cluster may not create users; after delete
// dave's login fails with SASL_AUTHENTICATION_FAILED, and deleting him
// again is RESOURCE_NOT_FOUND. The password is also read from standard
// input (--password -).
func TestUsersWithTheBinary(t *testing.T) {
	addr := freeAddr(t)
	b := startBrokerProps(t, addr, aclProps(addr))
	ctx := testCtx(t, 2*time.Minute)
	dave := scram.Auth{User: "dave", Pass: "dave-secret"}.AsSha256Mechanism()
	if err := login(ctx, addr, dave); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("dave before create: %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	out, err := runStrata(addr, "admin", "admin-secret", "users", "create", "dave", "--password", "dave-secret",
		"--mechanism", "scram-sha-256", "--iterations", "8192")
	if err != nil || !strings.Contains(out, "user dave: SCRAM-SHA-256 credential set (8192 iterations)") {
		t.Fatalf("strata users create: %v\n%s", err, out)
	}
	if err := login(ctx, addr, dave); err != nil {
		t.Fatalf("dave after create: %v", err)
	}
	// A second mechanism, its password from standard input.
	cmd := exec.Command(strataBin, "users", "create", "dave", "--password", "-", "--brokers", addr,
		"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "admin")
	cmd.Env = append(os.Environ(), "STRATA_SASL_PASSWORD=admin-secret")
	cmd.Stdin = strings.NewReader("dave-other-secret\n")
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("strata users create --password -: %v\n%s", err, o)
	}
	if err := login(ctx, addr, scram.Auth{User: "dave", Pass: "dave-other-secret"}.AsSha512Mechanism()); err != nil {
		t.Fatalf("dave with SCRAM-SHA-512: %v", err)
	}

	out, err = runStrata(addr, "admin", "admin-secret", "users", "list")
	if err != nil {
		t.Fatalf("strata users list: %v\n%s", err, out)
	}
	for _, want := range []string{"USER", "admin  SCRAM-SHA-512  4096", "dave   SCRAM-SHA-256  8192", "dave   SCRAM-SHA-512  4096"} {
		if !strings.Contains(out, want) {
			t.Fatalf("strata users list lacks %q:\n%s", want, out)
		}
	}
	out, err = runStrata(addr, "admin", "admin-secret", "users", "list", "dave", "--format", "json")
	if err != nil || strings.Count(out, `"mechanism"`) != 2 || strings.Contains(out, "admin") {
		t.Fatalf("strata users list dave --format json: %v\n%s", err, out)
	}
	stored, err := os.ReadFile(filepath.Join(b.dataDir, "scram-credentials.json"))
	if err != nil || !strings.Contains(string(stored), `"dave"`) {
		t.Fatalf("scram-credentials.json: %v\n%s", err, stored)
	}
	for _, s := range []string{"dave-secret", "dave-other-secret"} {
		if strings.Contains(string(stored), s) || strings.Contains(b.logs.String(), s) {
			t.Fatalf("password %q in the credential file or the broker's logs", s)
		}
	}

	// bob (SCRAM, no ACLs) may not manage users.
	out, err = runStrata(addr, "bob", "bob-secret", "users", "create", "mallory", "--password", "m-secret")
	if err == nil || !strings.Contains(out, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("bob's create: %v, want CLUSTER_AUTHORIZATION_FAILED\n%s", err, out)
	}

	out, err = runStrata(addr, "admin", "admin-secret", "users", "delete", "dave", "--mechanism", "SCRAM-SHA-512")
	if err != nil || !strings.Contains(out, "SCRAM-SHA-512 credential(s) deleted") {
		t.Fatalf("strata users delete --mechanism: %v\n%s", err, out)
	}
	if err := login(ctx, addr, dave); err != nil {
		t.Fatalf("dave's SCRAM-SHA-256 after deleting SCRAM-SHA-512: %v", err)
	}
	out, err = runStrata(addr, "admin", "admin-secret", "users", "delete", "dave")
	if err != nil || !strings.Contains(out, "user dave: SCRAM-SHA-256 credential(s) deleted") {
		t.Fatalf("strata users delete: %v\n%s", err, out)
	}
	if err := login(ctx, addr, dave); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("dave after delete: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	out, err = runStrata(addr, "admin", "admin-secret", "users", "delete", "dave")
	if err == nil || !strings.Contains(out, "RESOURCE_NOT_FOUND") {
		t.Fatalf("deleting dave again: %v, want RESOURCE_NOT_FOUND\n%s", err, out)
	}
}

// TestClusterUsersAndACLsWithTheBinary (issue 20): two `strata serve`
// brokers with a controller quorum. `strata users create` and `strata
// acls add`, given only the first broker, send one request; the second
// broker then lets carol log in and allows her DescribeAcls (Describe on
// the cluster). `strata acls remove` and `strata users delete` through
// the first broker take both away on the second.
func TestClusterUsersAndACLsWithTheBinary(t *testing.T) {
	voters := []string{"0@" + freeAddr(t), "1@" + freeAddr(t)}
	var brokers []*broker
	for i := range voters {
		addr := freeAddr(t)
		props := saslProps("SASL_PLAINTEXT", addr) + clusterProps +
			"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:admin\n"
		brokers = append(brokers, startBrokerProps(t, addr, props,
			"--node-id", strconv.Itoa(i), "--controller-quorum", strings.Join(voters, ",")))
	}
	ctx := testCtx(t, 2*time.Minute)
	first, second := brokers[0].addr, brokers[1].addr
	admin := func(args ...string) string {
		t.Helper()
		var out string
		var err error
		// The first broker may still be joining the quorum: bounded retries.
		for i := 0; i < 100; i++ {
			if out, err = runStrata(first, "admin", "admin-secret", args...); err == nil {
				return out
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("strata %q: %v\n%s", args, err, out)
		return ""
	}
	carol := scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism()
	// carolOnSecond is carol's DescribeAcls on the second broker alone:
	// nil, a login error or the request's error.
	carolOnSecond := func() error {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		resp, err := onlyBroker(ctx, second, carol, req)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.(*kmsg.DescribeACLsResponse).ErrorCode)
	}
	// waitFor polls carolOnSecond until ok accepts its answer (the second
	// broker follows the metadata within its lag; bounded).
	waitFor := func(what string, ok func(error) bool) {
		t.Helper()
		var err error
		for i := 0; i < 200; i++ {
			if err = carolOnSecond(); ok(err) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: carol on the second broker: %v\n%s", what, err, brokers[1].logs)
	}

	if out := admin("users", "create", "carol", "--password", "carol-secret"); !strings.Contains(out, "credential set") {
		t.Fatalf("strata users create:\n%s", out)
	}
	waitFor("after users create", func(err error) bool { return errors.Is(err, kerr.ClusterAuthorizationFailed) })
	if out := admin("acls", "add", "--allow-principal", "User:carol", "--cluster", "--operation", "Describe"); strings.Count(out, "created ") != 1 {
		t.Fatalf("strata acls add:\n%s", out)
	}
	waitFor("after acls add", func(err error) bool { return err == nil })
	if out := admin("acls", "list", "--principal", "User:carol"); strings.Count(out, "User:carol") != 1 {
		t.Fatalf("strata acls list:\n%s", out)
	}

	if out := admin("acls", "remove", "--cluster", "--principal", "User:carol"); !strings.Contains(out, "1 ACL(s) deleted") {
		t.Fatalf("strata acls remove:\n%s", out)
	}
	waitFor("after acls remove", func(err error) bool { return errors.Is(err, kerr.ClusterAuthorizationFailed) })
	if out := admin("users", "delete", "carol"); !strings.Contains(out, "deleted") {
		t.Fatalf("strata users delete:\n%s", out)
	}
	waitFor("after users delete", func(err error) bool { return errors.Is(err, kerr.SaslAuthenticationFailed) })
}
