package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func lit(rt ResourceType, name, principal string, op Operation, perm Permission) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: PatternLiteral, Principal: principal, Host: "*", Operation: op, Permission: perm}
}

func pre(rt ResourceType, name, principal string, op Operation, perm Permission) Binding {
	b := lit(rt, name, principal, op, perm)
	b.PatternType = PatternPrefixed
	return b
}

func TestAuthorize(t *testing.T) {
	const alice, bob = "User:alice", "User:bob"
	type req struct {
		principal, host string
		op              Operation
		rt              ResourceType
		name            string
	}
	cases := []struct {
		name  string
		cfg   Config
		acls  []Binding
		req   req
		allow bool
	}{
		{"no acls, default deny", Config{}, nil, req{alice, "1.2.3.4", OpRead, ResourceTopic, "t"}, false},
		{"no acls, allow everyone", Config{AllowIfNoACL: true}, nil, req{alice, "1.2.3.4", OpRead, ResourceTopic, "t"}, true},
		{"super user with no acls", Config{SuperUsers: []string{alice}}, nil, req{alice, "h", OpAlter, ResourceCluster, ClusterName}, true},
		{"super user beats deny", Config{SuperUsers: []string{alice}}, []Binding{lit(ResourceTopic, "t", alice, OpAll, PermissionDeny)}, req{alice, "h", OpRead, ResourceTopic, "t"}, true},
		{"super user list is exact", Config{SuperUsers: []string{alice}}, nil, req{"User:alice2", "h", OpRead, ResourceTopic, "t"}, false},
		{"literal allow", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpRead, PermissionAllow)}, req{alice, "h", OpRead, ResourceTopic, "t"}, true},
		{"literal allow other name", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpRead, PermissionAllow)}, req{alice, "h", OpRead, ResourceTopic, "t2"}, false},
		{"literal allow other type", Config{}, []Binding{lit(ResourceGroup, "t", alice, OpRead, PermissionAllow)}, req{alice, "h", OpRead, ResourceTopic, "t"}, false},
		{"literal allow other principal", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpRead, PermissionAllow)}, req{bob, "h", OpRead, ResourceTopic, "t"}, false},
		{"other principal's acl turns off allow-everyone", Config{AllowIfNoACL: true}, []Binding{lit(ResourceTopic, "t", alice, OpRead, PermissionAllow)}, req{bob, "h", OpRead, ResourceTopic, "t"}, false},
		{"other operation's acl turns off allow-everyone", Config{AllowIfNoACL: true}, []Binding{lit(ResourceTopic, "t", bob, OpWrite, PermissionAllow)}, req{bob, "h", OpRead, ResourceTopic, "t"}, false},
		{"acl on another resource keeps allow-everyone", Config{AllowIfNoACL: true}, []Binding{lit(ResourceTopic, "u", alice, OpRead, PermissionDeny)}, req{bob, "h", OpRead, ResourceTopic, "t"}, true},
		{"wildcard principal", Config{}, []Binding{lit(ResourceTopic, "t", WildcardPrincipal, OpRead, PermissionAllow)}, req{bob, "h", OpRead, ResourceTopic, "t"}, true},
		{"wildcard resource", Config{}, []Binding{lit(ResourceTopic, "*", alice, OpWrite, PermissionAllow)}, req{alice, "h", OpWrite, ResourceTopic, "anything"}, true},
		{"wildcard resource is per type", Config{}, []Binding{lit(ResourceGroup, "*", alice, OpRead, PermissionAllow)}, req{alice, "h", OpRead, ResourceTopic, "anything"}, false},
		{"prefixed allow", Config{}, []Binding{pre(ResourceTopic, "orders-", alice, OpWrite, PermissionAllow)}, req{alice, "h", OpWrite, ResourceTopic, "orders-eu"}, true},
		{"prefixed needs the prefix", Config{}, []Binding{pre(ResourceTopic, "orders-", alice, OpWrite, PermissionAllow)}, req{alice, "h", OpWrite, ResourceTopic, "orders"}, false},
		{"prefixed star is not a wildcard", Config{}, []Binding{pre(ResourceTopic, "*", alice, OpWrite, PermissionAllow)}, req{alice, "h", OpWrite, ResourceTopic, "orders"}, false},
		{"literal name is not a prefix", Config{}, []Binding{lit(ResourceTopic, "orders", alice, OpWrite, PermissionAllow)}, req{alice, "h", OpWrite, ResourceTopic, "orders-eu"}, false},
		{"deny wins over allow", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpRead, PermissionAllow), lit(ResourceTopic, "t", alice, OpRead, PermissionDeny)}, req{alice, "h", OpRead, ResourceTopic, "t"}, false},
		{"prefixed deny wins over literal allow", Config{}, []Binding{lit(ResourceTopic, "orders-eu", alice, OpRead, PermissionAllow), pre(ResourceTopic, "orders", alice, OpRead, PermissionDeny)}, req{alice, "h", OpRead, ResourceTopic, "orders-eu"}, false},
		{"wildcard deny wins over literal allow", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpAll, PermissionAllow), lit(ResourceTopic, "*", WildcardPrincipal, OpRead, PermissionDeny)}, req{alice, "h", OpRead, ResourceTopic, "t"}, false},
		{"deny all denies read", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpRead, PermissionAllow), lit(ResourceTopic, "t", alice, OpAll, PermissionDeny)}, req{alice, "h", OpRead, ResourceTopic, "t"}, false},
		{"deny read does not deny describe", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpWrite, PermissionAllow), lit(ResourceTopic, "t", alice, OpRead, PermissionDeny)}, req{alice, "h", OpDescribe, ResourceTopic, "t"}, true},
		{"deny of another host does not apply", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpRead, PermissionAllow), {ResourceType: ResourceTopic, ResourceName: "t", PatternType: PatternLiteral, Principal: alice, Host: "10.0.0.9", Operation: OpRead, Permission: PermissionDeny}}, req{alice, "10.0.0.1", OpRead, ResourceTopic, "t"}, true},
		{"deny of the host applies", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpRead, PermissionAllow), {ResourceType: ResourceTopic, ResourceName: "t", PatternType: PatternLiteral, Principal: alice, Host: "10.0.0.9", Operation: OpRead, Permission: PermissionDeny}}, req{alice, "10.0.0.9", OpRead, ResourceTopic, "t"}, false},
		{"allow from another host", Config{}, []Binding{{ResourceType: ResourceTopic, ResourceName: "t", PatternType: PatternLiteral, Principal: alice, Host: "10.0.0.9", Operation: OpRead, Permission: PermissionAllow}}, req{alice, "10.0.0.1", OpRead, ResourceTopic, "t"}, false},
		{"all allows anything", Config{}, []Binding{lit(ResourceCluster, ClusterName, alice, OpAll, PermissionAllow)}, req{alice, "h", OpClusterAction, ResourceCluster, ClusterName}, true},
		{"read implies describe", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpRead, PermissionAllow)}, req{alice, "h", OpDescribe, ResourceTopic, "t"}, true},
		{"write implies describe", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpWrite, PermissionAllow)}, req{alice, "h", OpDescribe, ResourceTopic, "t"}, true},
		{"delete implies describe", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpDelete, PermissionAllow)}, req{alice, "h", OpDescribe, ResourceTopic, "t"}, true},
		{"alter implies describe", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpAlter, PermissionAllow)}, req{alice, "h", OpDescribe, ResourceTopic, "t"}, true},
		{"create does not imply describe", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpCreate, PermissionAllow)}, req{alice, "h", OpDescribe, ResourceTopic, "t"}, false},
		{"alter configs implies describe configs", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpAlterConfigs, PermissionAllow)}, req{alice, "h", OpDescribeConfigs, ResourceTopic, "t"}, true},
		{"alter does not imply describe configs", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpAlter, PermissionAllow)}, req{alice, "h", OpDescribeConfigs, ResourceTopic, "t"}, false},
		{"describe implies nothing", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpDescribe, PermissionAllow)}, req{alice, "h", OpRead, ResourceTopic, "t"}, false},
		{"read does not imply write", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpRead, PermissionAllow)}, req{alice, "h", OpWrite, ResourceTopic, "t"}, false},
		{"anonymous", Config{}, []Binding{lit(ResourceTopic, "t", Anonymous, OpRead, PermissionAllow)}, req{Anonymous, "h", OpRead, ResourceTopic, "t"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New(c.cfg)
			if err := a.Create(c.acls); err != nil {
				t.Fatal(err)
			}
			r := c.req
			if got := a.Authorize(r.principal, r.host, r.op, r.rt, r.name); got != c.allow {
				t.Fatalf("Authorize(%s %s %s %s %q) = %v, want %v", r.principal, r.host, r.op, r.rt, r.name, got, c.allow)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestFilterMatches(t *testing.T) {
	const alice = "User:alice"
	acls := map[string]Binding{
		"lit-t":      lit(ResourceTopic, "orders-eu", alice, OpRead, PermissionAllow),
		"lit-star":   lit(ResourceTopic, "*", alice, OpRead, PermissionAllow),
		"pre-orders": pre(ResourceTopic, "orders-", alice, OpWrite, PermissionDeny),
		"pre-o":      pre(ResourceTopic, "o", "User:bob", OpWrite, PermissionAllow),
		"grp":        lit(ResourceGroup, "orders-eu", alice, OpRead, PermissionAllow),
	}
	any := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	with := func(mod func(*Filter)) Filter { f := any; mod(&f); return f }
	cases := []struct {
		name string
		f    Filter
		want []string
	}{
		{"everything", any, []string{"lit-t", "lit-star", "pre-orders", "pre-o", "grp"}},
		{"topics", with(func(f *Filter) { f.ResourceType = ResourceTopic }), []string{"lit-t", "lit-star", "pre-orders", "pre-o"}},
		{"any pattern, exact name", with(func(f *Filter) { f.ResourceName = ptr("orders-eu") }), []string{"lit-t", "grp"}},
		{"any pattern, star is a name", with(func(f *Filter) { f.ResourceName = ptr("*") }), []string{"lit-star"}},
		{"literal pattern", with(func(f *Filter) { f.PatternType = PatternLiteral }), []string{"lit-t", "lit-star", "grp"}},
		{"prefixed pattern, exact prefix", with(func(f *Filter) { f.PatternType = PatternPrefixed; f.ResourceName = ptr("orders-") }), []string{"pre-orders"}},
		{"prefixed pattern is not match", with(func(f *Filter) { f.PatternType = PatternPrefixed; f.ResourceName = ptr("orders-eu") }), nil},
		{"match", with(func(f *Filter) {
			f.ResourceType = ResourceTopic
			f.PatternType = PatternMatch
			f.ResourceName = ptr("orders-eu")
		}), []string{"lit-t", "lit-star", "pre-orders", "pre-o"}},
		{"match other name", with(func(f *Filter) {
			f.ResourceType = ResourceTopic
			f.PatternType = PatternMatch
			f.ResourceName = ptr("payments")
		}), []string{"lit-star"}},
		{"match without name", with(func(f *Filter) { f.PatternType = PatternMatch }), []string{"lit-t", "lit-star", "pre-orders", "pre-o", "grp"}},
		{"principal", with(func(f *Filter) { f.Principal = ptr("User:bob") }), []string{"pre-o"}},
		{"principal is exact, not wildcard", with(func(f *Filter) { f.Principal = ptr(WildcardPrincipal) }), nil},
		{"host", with(func(f *Filter) { f.Host = ptr("*") }), []string{"lit-t", "lit-star", "pre-orders", "pre-o", "grp"}},
		{"host other", with(func(f *Filter) { f.Host = ptr("1.1.1.1") }), nil},
		{"operation", with(func(f *Filter) { f.Operation = OpWrite }), []string{"pre-orders", "pre-o"}},
		{"operation all is exact", with(func(f *Filter) { f.Operation = OpAll }), nil},
		{"permission", with(func(f *Filter) { f.Permission = PermissionDeny }), []string{"pre-orders"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := map[string]bool{}
			for _, w := range c.want {
				want[w] = true
			}
			for k, b := range acls {
				if got := c.f.Matches(b); got != want[k] {
					t.Errorf("%s: Matches = %v, want %v", k, got, want[k])
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := lit(ResourceTopic, "t", "User:a", OpRead, PermissionAllow)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func(*Binding){
		"any resource":       func(b *Binding) { b.ResourceType = ResourceAny },
		"match pattern":      func(b *Binding) { b.PatternType = PatternMatch },
		"any pattern":        func(b *Binding) { b.PatternType = PatternAny },
		"any operation":      func(b *Binding) { b.Operation = OpAny },
		"any permission":     func(b *Binding) { b.Permission = PermissionAny },
		"empty name":         func(b *Binding) { b.ResourceName = "" },
		"principal no colon": func(b *Binding) { b.Principal = "alice" },
		"cluster name":       func(b *Binding) { b.ResourceType = ResourceCluster; b.ResourceName = "c" },
		"empty host":         func(b *Binding) { b.Host = "" },
	}
	for name, mod := range bad {
		b := good
		mod(&b)
		if err := b.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
		if err := New(Config{}).Create([]Binding{b}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Create = %v, want ErrInvalid", name, err)
		}
	}
	if err := (Filter{ResourceType: ResourceAny, PatternType: PatternUnknown, Operation: OpAny, Permission: PermissionAny}).Validate(); err == nil {
		t.Error("filter with unknown pattern type accepted")
	}
}

func TestPersistence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acls.json")
	a, err := Open(Config{}, path)
	if err != nil {
		t.Fatal(err)
	}
	b1 := lit(ResourceTopic, "t", "User:a", OpRead, PermissionAllow)
	b2 := pre(ResourceGroup, "g", "User:a", OpRead, PermissionAllow)
	if err := a.Create([]Binding{b1, b2, b1}); err != nil {
		t.Fatal(err)
	}
	if n := len(a.All()); n != 2 {
		t.Fatalf("%d bindings after creating one twice", n)
	}
	a2, err := Open(Config{}, path)
	if err != nil {
		t.Fatal(err)
	}
	if !a2.Authorize("User:a", "h", OpRead, ResourceGroup, "g1") || !a2.Authorize("User:a", "h", OpRead, ResourceTopic, "t") {
		t.Fatal("reopened authorizer lost its ACLs")
	}
	del, err := a2.Delete([]Filter{{ResourceType: ResourceTopic, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}})
	if err != nil || len(del) != 1 || len(del[0]) != 1 || del[0][0] != b1 {
		t.Fatalf("Delete = %v, %v", del, err)
	}
	a3, err := Open(Config{}, path)
	if err != nil {
		t.Fatal(err)
	}
	if all := a3.All(); len(all) != 1 || all[0] != b2 {
		t.Fatalf("after delete and reopen: %v", all)
	}
	raw, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(raw), `"resource_type": "GROUP"`) || !strings.Contains(string(raw), `"pattern_type": "PREFIXED"`) ||
		!strings.Contains(string(raw), `"operation": "READ"`) || !strings.Contains(string(raw), `"permission": "ALLOW"`) {
		t.Fatalf("acls.json does not name the enums: %v\n%s", err, raw)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"acls":[{"resource_type":1,"resource_name":"x","pattern_type":3,"principal":"User:a","host":"*","operation":3,"permission":3}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{}, path); err == nil {
		t.Fatal("a file with an invalid ACL opened")
	}
	// Codes are read as well as names; an unknown name is refused.
	if err := os.WriteFile(path, []byte(`{"acls":[{"resource_type":2,"resource_name":"x","pattern_type":"LITERAL","principal":"User:a","host":"*","operation":3,"permission":"ALLOW"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if a4, err := Open(Config{}, path); err != nil || !a4.Authorize("User:a", "h", OpRead, ResourceTopic, "x") {
		t.Fatalf("a file with codes: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"acls":[{"resource_type":"TOPICS","resource_name":"x","pattern_type":"LITERAL","principal":"User:a","host":"*","operation":"READ","permission":"ALLOW"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{}, path); err == nil {
		t.Fatal("a file with an unknown resource type opened")
	}
}

func TestParseSuperUsers(t *testing.T) {
	got := ParseSuperUsers(" User:admin ;User:broker;; ")
	if len(got) != 2 || got[0] != "User:admin" || got[1] != "User:broker" {
		t.Fatalf("ParseSuperUsers = %q", got)
	}
}

func TestAuthorizeByResourceType(t *testing.T) {
	const alice = "User:alice"
	cases := []struct {
		name  string
		cfg   Config
		acls  []Binding
		allow bool
	}{
		{"nothing", Config{}, nil, false},
		{"allow everyone, no acls", Config{AllowIfNoACL: true}, nil, true},
		{"super user", Config{SuperUsers: []string{alice}}, nil, true},
		{"one literal write", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpWrite, PermissionAllow)}, true},
		{"one prefixed write", Config{}, []Binding{pre(ResourceTopic, "t", alice, OpWrite, PermissionAllow)}, true},
		{"read does not count", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpRead, PermissionAllow)}, false},
		{"all counts", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpAll, PermissionAllow)}, true},
		{"group write does not count", Config{}, []Binding{lit(ResourceGroup, "t", alice, OpWrite, PermissionAllow)}, false},
		{"literal denied", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpWrite, PermissionAllow), lit(ResourceTopic, "t", alice, OpWrite, PermissionDeny)}, false},
		{"dominated by prefix deny", Config{}, []Binding{lit(ResourceTopic, "orders-eu", alice, OpWrite, PermissionAllow), pre(ResourceTopic, "orders", alice, OpWrite, PermissionDeny)}, false},
		{"other literal denied", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpWrite, PermissionAllow), lit(ResourceTopic, "u", alice, OpWrite, PermissionDeny)}, true},
		{"wildcard deny", Config{}, []Binding{lit(ResourceTopic, "t", alice, OpWrite, PermissionAllow), lit(ResourceTopic, "*", alice, OpWrite, PermissionDeny)}, false},
		{"wildcard allow", Config{}, []Binding{lit(ResourceTopic, "*", WildcardPrincipal, OpWrite, PermissionAllow)}, true},
		{"other principal", Config{}, []Binding{lit(ResourceTopic, "t", "User:bob", OpWrite, PermissionAllow)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New(c.cfg)
			if err := a.Create(c.acls); err != nil {
				t.Fatal(err)
			}
			if got := a.AuthorizeByResourceType(alice, "h", OpWrite, ResourceTopic); got != c.allow {
				t.Fatalf("AuthorizeByResourceType = %v, want %v", got, c.allow)
			}
		})
	}
}

// Authorize reads a snapshot while ACLs change (go test -race).
func TestAuthorizeConcurrentWithChanges(t *testing.T) {
	a := New(Config{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			b := lit(ResourceTopic, "t", "User:a", OpRead, PermissionAllow)
			if err := a.Create([]Binding{b}); err != nil {
				t.Error(err)
				return
			}
			if _, err := a.Delete([]Filter{{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for {
		select {
		case <-done:
			if len(a.All()) != 0 {
				t.Fatalf("ACLs left: %v", a.All())
			}
			return
		default:
			a.Authorize("User:a", "h", OpRead, ResourceTopic, "t")
		}
	}
}

// BenchmarkAuthorize10k is the authorizer's cost per check with 10,000
// ACLs: literal and prefixed ones over many topics and principals.
func BenchmarkAuthorize10k(b *testing.B) {
	a := New(Config{})
	var bs []Binding
	for i := 0; i < 5000; i++ {
		name := "topic-" + string(rune('a'+i%26)) + "-" + itoa(i)
		bs = append(bs, lit(ResourceTopic, name, "User:u"+itoa(i%100), OpRead, PermissionAllow))
		bs = append(bs, pre(ResourceTopic, name[:8]+itoa(i), "User:u"+itoa(i%100), OpWrite, PermissionAllow))
	}
	if err := a.Create(bs); err != nil {
		b.Fatal(err)
	}
	if n := len(a.All()); n != 10000 {
		b.Fatalf("%d ACLs", n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Authorize("User:u7", "10.0.0.1", OpRead, ResourceTopic, "topic-h-107")
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}
