package cluster

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/controller"
)

// TestSecuritySyncSeedsThenFollows: a broker's local ACL seeds a new
// cluster's metadata, and an ACL created through the controller afterwards
// reaches the broker's Authorizer, with Wait returning once it has.
func TestSecuritySyncSeedsThenFollows(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctl, err := controller.New(controller.Config{NodeID: 0, Voters: map[int32]string{0: ln.Addr().String()},
		DataDir: t.TempDir(), Listener: ln, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()

	local := auth.Binding{ResourceType: auth.ResourceTopic, ResourceName: "orders", PatternType: auth.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: auth.OpRead, Permission: auth.PermissionAllow}
	az := auth.New(auth.Config{})
	if err := az.Create([]auth.Binding{local}); err != nil {
		t.Fatal(err)
	}
	s := NewSecuritySync(ctl, SecurityStores{Authorizer: az}, quiet)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	caughtUp := make(chan struct{})
	close(caughtUp)
	w := ctl.Watch()
	defer w.Close()
	done := make(chan struct{})
	runCtx, stop := context.WithCancel(ctx)
	go func() {
		defer close(done)
		s.Run(runCtx, caughtUp, w)
	}()
	defer func() { stop(); <-done }()

	if err := s.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var acls []controller.ACL
	ctl.Read(func(st *controller.State) { acls = st.ACLs() })
	if len(acls) != 1 || BindingOf(acls[0]) != local {
		t.Fatalf("the metadata after the seed holds %v, want the broker's local ACL", acls)
	}

	added := local
	added.Principal = "User:bob"
	r, err := ctl.Propose(ctx, controller.CreateACLs{ACLs: []controller.ACL{ACLOf(added)}})
	if err != nil || r.Code != 0 {
		t.Fatalf("create through the controller: %v %v", err, r.Err())
	}
	if err := s.Wait(ctx, r.Offset); err != nil {
		t.Fatal(err)
	}
	got := az.All()
	if len(got) != 2 {
		t.Fatalf("the Authorizer after Wait holds %v, want alice's and bob's ACLs", got)
	}
}

// With NoSeed (a controller-only node) the local stores seed nothing:
// the local ACL stays out of the metadata and in the Authorizer until the
// cluster's ACLs are seeded by another node, and from then on the
// replicated ACLs replace the local ones.
func TestSecuritySyncNoSeedOnlyApplies(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctl, err := controller.New(controller.Config{NodeID: 0, Voters: map[int32]string{0: ln.Addr().String()},
		DataDir: t.TempDir(), Listener: ln, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	local := auth.Binding{ResourceType: auth.ResourceTopic, ResourceName: "orders", PatternType: auth.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: auth.OpRead, Permission: auth.PermissionAllow}
	az := auth.New(auth.Config{})
	if err := az.Create([]auth.Binding{local}); err != nil {
		t.Fatal(err)
	}
	s := NewSecuritySync(ctl, SecurityStores{Authorizer: az, NoSeed: true}, quiet)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	caughtUp := make(chan struct{})
	close(caughtUp)
	w := ctl.Watch()
	defer w.Close()
	done := make(chan struct{})
	runCtx, stop := context.WithCancel(ctx)
	go func() {
		defer close(done)
		s.Run(runCtx, caughtUp, w)
	}()
	defer func() { stop(); <-done }()

	// Some metadata, so that the sync has applied an offset past 0.
	r, err := ctl.Propose(ctx, controller.Tick{SessionTimeoutMs: 9000})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(ctx, r.Offset); err != nil {
		t.Fatal(err)
	}
	var seeded uint8
	ctl.Read(func(st *controller.State) { seeded = st.SecuritySeeded() })
	if seeded != 0 {
		t.Fatalf("a NoSeed sync seeded kinds %b", seeded)
	}
	if got := az.All(); len(got) != 1 || got[0] != local {
		t.Fatalf("the Authorizer holds %v before any seed, want its local ACL", got)
	}

	// Another node seeds the ACLs (bob's): they replace the local ones.
	bob := local
	bob.Principal = "User:bob"
	r, err = ctl.Propose(ctx, controller.SeedSecurity{Kinds: controller.SecurityACLs, ACLs: []controller.ACL{ACLOf(bob)}})
	if err != nil || r.Code != 0 {
		t.Fatalf("seed: %v %v", err, r.Err())
	}
	if err := s.Wait(ctx, r.Offset); err != nil {
		t.Fatal(err)
	}
	if got := az.All(); len(got) != 1 || got[0] != bob {
		t.Fatalf("the Authorizer holds %v after another node's seed, want bob's ACL", got)
	}
}
