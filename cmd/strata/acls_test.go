package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/stratalog/strata/server"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startACLsBroker serves an engine with an authorizer (super user
// User:admin) on a SASL_PLAINTEXT listener, PLAIN users admin and alice.
func startACLsBroker(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	eng, err := engine.Open(engine.Options{Dir: dir, Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.Open(auth.Config{SuperUsers: []string{"User:admin"}}, filepath.Join(dir, engine.AclsFile))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := server.New(server.Config{ClusterID: "acls-cli", AutoCreateTopics: true, Authorizer: a}, eng)
	l := server.Listener{Name: "SASL_PLAINTEXT", SASL: &sasl.Config{Mechanisms: []string{sasl.Plain},
		PlainUsers: map[string]string{"admin": "admin-pw", "alice": "alice-pw"}}}
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(ln, l) }()
	t.Cleanup(func() {
		s.Close()
		select {
		case <-done:
		case <-time.After(groupsTestTimeout):
			t.Error("Serve did not return")
		}
		eng.Close()
	})
	return ln.Addr().String()
}

func runACLsCLI(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := aclsMainEnv(args, &out, &errb, func(k string) string { return env[k] })
	return out.String() + errb.String(), err
}

func TestACLsCLIAddListRemove(t *testing.T) {
	addr := startACLsBroker(t)
	env := map[string]string{"STRATA_BROKERS": addr, "STRATA_SASL_PASSWORD": "admin-pw"}
	as := []string{"--sasl-mechanism", "plain", "--sasl-username", "admin"}

	out, err := runACLsCLI(t, env, append([]string{"add", "--allow-principal", "User:alice", "--topic", "orders",
		"--operation", "write", "--operation", "Describe"}, as...)...)
	if err != nil || strings.Count(out, "created ") != 2 {
		t.Fatalf("add: %v\n%s", err, out)
	}
	out, err = runACLsCLI(t, env, append([]string{"add", "--deny-principal", "User:alice", "--topic", "orders-",
		"--resource-pattern-type", "prefixed", "--operation", "READ"}, as...)...)
	if err != nil {
		t.Fatalf("add prefixed deny: %v\n%s", err, out)
	}

	out, err = runACLsCLI(t, env, append([]string{"list"}, as...)...)
	if err != nil {
		t.Fatalf("list: %v\n%s", err, out)
	}
	for _, want := range []string{"TOPIC     LITERAL   orders", "WRITE", "DESCRIBE", "PREFIXED  orders-", "DENY"} {
		if !strings.Contains(out, want) {
			t.Fatalf("list lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "User:alice"); n != 3 {
		t.Fatalf("list shows %d ACLs, want 3:\n%s", n, out)
	}
	// match: the ACLs that apply to orders-eu (the prefixed deny only).
	out, err = runACLsCLI(t, env, append([]string{"list", "--topic", "orders-eu", "--resource-pattern-type", "match", "--format", "json"}, as...)...)
	if err != nil || strings.Count(out, `"principal"`) != 1 || !strings.Contains(out, `"pattern_type": "PREFIXED"`) {
		t.Fatalf("list match orders-eu: %v\n%s", err, out)
	}

	out, err = runACLsCLI(t, env, append([]string{"remove", "--topic", "orders", "--operation", "write"}, as...)...)
	if err != nil || !strings.Contains(out, "1 ACL(s) deleted") {
		t.Fatalf("remove: %v\n%s", err, out)
	}
	out, err = runACLsCLI(t, env, append([]string{"list", "--principal", "User:alice"}, as...)...)
	if err != nil || strings.Count(out, "User:alice") != 2 || strings.Contains(out, "WRITE") {
		t.Fatalf("list after remove: %v\n%s", err, out)
	}

	// Alice may not manage ACLs.
	env["STRATA_SASL_PASSWORD"] = "alice-pw"
	out, err = runACLsCLI(t, env, "add", "--allow-principal", "User:alice", "--cluster", "--operation", "all",
		"--sasl-mechanism", "PLAIN", "--sasl-username", "alice")
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice add: %v, want CLUSTER_AUTHORIZATION_FAILED\n%s", err, out)
	}
}

func TestACLsCLIUsage(t *testing.T) {
	for _, args := range [][]string{
		{"add", "--topic", "t", "--operation", "read"},                                // no principal
		{"add", "--allow-principal", "User:a", "--operation", "read"},                 // no resource
		{"add", "--allow-principal", "User:a", "--topic", "t"},                        // no operation
		{"add", "--allow-principal", "alice", "--topic", "t", "--operation", "read"},  // principal without type
		{"add", "--allow-principal", "User:a", "--topic", "t", "--operation", "reed"}, // bad operation
		{"remove", "--principal", "User:a"},                                           // no resource
		{"list", "--resource-pattern-type", "fuzzy"},                                  // bad pattern
		{"list", "--sasl-mechanism", "GSSAPI"},                                        // unsupported mechanism
		{"add", "--allow-principal", "User:a", "--topic", "t", "--operation", "read", "--resource-pattern-type", "match"},
	} {
		_, err := runACLsCLI(t, map[string]string{}, args...)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

// countingRequestor answers CreateAcls and DeleteAcls and counts them.
type countingRequestor struct{ n int }

func (c *countingRequestor) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.n++
	switch r := req.(type) {
	case *kmsg.CreateACLsRequest:
		resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
		for range r.Creations {
			resp.Results = append(resp.Results, kmsg.NewCreateACLsResponseResult())
		}
		return resp, nil
	case *kmsg.DeleteACLsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
		for _, f := range r.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.Principal, m.Host = f.ResourceType, *f.ResourceName, "User:alice", "*"
			res.MatchingACLs = append(res.MatchingACLs, m)
			resp.Results = append(resp.Results, res)
		}
		return resp, nil
	}
	return nil, errors.New("unexpected request")
}

// acls add and remove send one request, whatever the number of brokers:
// in a cluster the ACLs are replicated metadata.
func TestACLsSendOneRequest(t *testing.T) {
	f := newACLsFlags(aclsVerbs[0])
	if _, err := parseFlags(f.fs, []string{"--allow-principal", "User:alice", "--topic", "a", "--topic", "b", "--operation", "read"}, aclsVerbs[0].doc, true, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var c countingRequestor
	var out bytes.Buffer
	if err := aclsAdd(context.Background(), &c, f.creations(), &out); err != nil || c.n != 1 || strings.Count(out.String(), "created ") != 2 {
		t.Fatalf("add: %v, %d requests\n%s", err, c.n, out.String())
	}
	f = newACLsFlags(aclsVerbs[2])
	if _, err := parseFlags(f.fs, []string{"--topic", "a"}, aclsVerbs[2].doc, true, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	c, out = countingRequestor{}, bytes.Buffer{}
	if err := aclsRemove(context.Background(), &c, f.filters(), &out); err != nil || c.n != 1 || !strings.Contains(out.String(), "1 ACL(s) deleted") {
		t.Fatalf("remove: %v, %d requests\n%s", err, c.n, out.String())
	}
}
