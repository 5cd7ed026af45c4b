package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// secBroker is one in-process broker of a secured test cluster: its own
// controller voter, an authorizer (super user admin), a SCRAM store and
// client quotas kept in its data directory, a PLAINTEXT listener (the
// registered one) and a SASL_PLAINTEXT listener with SCRAM-SHA-512.
type secBroker struct {
	id               int32
	dataDir, ctlDir  string
	addr             string // the SASL listener
	s                *Server
	eng              *engine.Engine
	ctl              *controller.Controller
	logs             *logBuffer
	plainLn, saslLn  net.Listener
	served, saslDone chan error
	running          bool
}

// carolDescribe is in every broker's acls.json before the cluster first
// starts: the ACLs brokers kept before the metadata carried them.
var carolDescribe = auth.Binding{ResourceType: auth.ResourceCluster, ResourceName: auth.ClusterName, PatternType: auth.PatternLiteral,
	Principal: "User:carol", Host: "*", Operation: auth.OpDescribe, Permission: auth.PermissionAllow}

func startSecCluster(t *testing.T, n int) ([]*secBroker, map[int32]string) {
	t.Helper()
	voters, lns := quorumListeners(t, n)
	var bs []*secBroker
	for i := int32(0); i < int32(n); i++ {
		b := &secBroker{id: i, dataDir: t.TempDir(), ctlDir: t.TempDir()}
		a, err := auth.Open(auth.Config{}, filepath.Join(b.dataDir, engine.AclsFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Create([]auth.Binding{carolDescribe}); err != nil {
			t.Fatal(err)
		}
		b.start(t, voters, lns[i])
		bs = append(bs, b)
	}
	return bs, voters
}

func (b *secBroker) start(t *testing.T, voters map[int32]string, ln net.Listener) {
	t.Helper()
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctl, err := controller.New(controller.Config{
		NodeID: b.id, Voters: voters, DataDir: b.ctlDir, Listener: ln,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		SessionTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	authz, err := auth.Open(auth.Config{SuperUsers: []string{"User:admin"}}, filepath.Join(b.dataDir, engine.AclsFile))
	if err != nil {
		t.Fatal(err)
	}
	quotas, err := auth.OpenQuotas(auth.QuotaConfig{}, filepath.Join(b.dataDir, engine.QuotasFile))
	if err != nil {
		t.Fatal(err)
	}
	store, err := sasl.OpenStore(filepath.Join(b.dataDir, "scram-credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := store.Get("admin", sasl.ScramSHA512); !ok { // strata.scram.credentials's part
		c, err := sasl.NewCredential(sasl.ScramSHA512, "admin-secret", sasl.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Set("admin", sasl.ScramSHA512, c); err != nil {
			t.Fatal(err)
		}
	}
	eng, err := engine.Open(engine.Options{Dir: b.dataDir, Log: engine.DefaultLogConfig(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	b.plainLn, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.saslLn, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{
		NodeID: b.id, ClusterID: "strata-test-cluster", NumPartitions: 1, Logger: logger,
		Authorizer: authz, Quotas: quotas, Scram: store,
		Cluster: ClusterConfig{Controller: ctl, HeartbeatInterval: 100 * time.Millisecond, ReplicaLagTimeMax: 2 * time.Second},
	}, eng)
	b.served, b.saslDone = make(chan error, 1), make(chan error, 1)
	go func(ln net.Listener, ch chan error) { ch <- s.Serve(ln) }(b.plainLn, b.served)
	l := Listener{Name: "SASL_PLAINTEXT", SASL: &sasl.Config{Mechanisms: []string{sasl.ScramSHA512}, Scram: store}}
	go func(ln net.Listener, ch chan error) { ch <- s.ServeListener(ln, l) }(b.saslLn, b.saslDone)
	b.addr, b.s, b.eng, b.ctl, b.logs, b.running = b.saslLn.Addr().String(), s, eng, ctl, logs, true
	t.Cleanup(func() {
		if t.Failed() && b.running {
			t.Logf("broker %d logs:\n%s", b.id, logs)
		}
		b.stop(t)
	})
}

func (b *secBroker) stop(t *testing.T) {
	if !b.running {
		return
	}
	b.running = false
	if err := b.s.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Errorf("broker %d: Server.Close: %v", b.id, err)
	}
	b.plainLn.Close()
	b.saslLn.Close()
	for _, ch := range []chan error{b.served, b.saslDone} {
		select {
		case <-ch:
		case <-time.After(testTimeout):
			t.Errorf("broker %d: a listener did not stop after Close", b.id)
		}
	}
	if err := b.ctl.Close(); err != nil {
		t.Logf("broker %d: controller close: %v", b.id, err)
	}
	if err := b.eng.Close(); err != nil {
		t.Errorf("broker %d: engine.Close: %v", b.id, err)
	}
}

func (b *secBroker) restart(t *testing.T, voters map[int32]string) {
	t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 100; i++ { // the port was ours a moment ago
		if ln, err = net.Listen("tcp", voters[b.id]); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	b.start(t, voters, ln)
}

var adminMech = scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()

// secRequest sends req to the broker at addr alone, over a new connection
// that authenticates with mech (a failed login is the error).
func secRequest(ctx context.Context, addr string, mech kgosasl.Mechanism, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(mech), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// waitSec polls check (at most 400 times, 50ms apart) until it returns "".
func waitSec(t *testing.T, what string, check func() string) {
	t.Helper()
	last := ""
	for i := 0; i < 400; i++ {
		if last = check(); last == "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: %s", what, last)
}

func describeClusterACLs(ctx context.Context, addr string, mech kgosasl.Mechanism) (*kmsg.DescribeACLsResponse, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := secRequest(ctx, addr, mech, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.DescribeACLsResponse), nil
}

func aliceClusterACL(perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeCluster, auth.ClusterName, kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationDescribe, perm
	return c
}

func secCreateACLs(t *testing.T, ctx context.Context, addr string, mech kgosasl.Mechanism, cs ...kmsg.CreateACLsRequestCreation) []int16 {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = cs
	resp, err := secRequest(ctx, addr, mech, req)
	if err != nil {
		t.Fatal(err)
	}
	var codes []int16
	for _, r := range resp.(*kmsg.CreateACLsResponse).Results {
		codes = append(codes, r.ErrorCode)
	}
	return codes
}

func alterAlice(t *testing.T, ctx context.Context, addr string, del bool) int16 {
	t.Helper()
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	if del {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = "alice", 2
		req.Deletions = append(req.Deletions, d)
	} else {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt = "alice", 2, 4096, []byte("alice-salt-01234")
		var err error
		if u.SaltedPassword, err = sasl.SaltedPassword(sasl.ScramSHA512, "alice-secret", u.Salt, 4096); err != nil {
			t.Fatal(err)
		}
		req.Upsertions = append(req.Upsertions, u)
	}
	resp, err := secRequest(ctx, addr, adminMech, req)
	if err != nil {
		t.Fatal(err)
	}
	rs := resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results
	if len(rs) != 1 || rs[0].User != "alice" {
		t.Fatalf("AlterUserScramCredentials results %+v", rs)
	}
	return rs[0].ErrorCode
}

// aliceDescribe is what alice's DescribeAcls on addr gets: a login error,
// or the response's error code.
func aliceDescribe(ctx context.Context, addr string) (int16, error) {
	resp, err := describeClusterACLs(ctx, addr, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
	if err != nil {
		return 0, err
	}
	return resp.ErrorCode, nil
}

// aliceQuota is what DescribeClientQuotas on addr answers for user alice.
func aliceQuota(ctx context.Context, addr string) (float64, error) {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType, c.Match = auth.EntityUser, 0, kmsg.StringPtr("alice")
	req.Components = append(req.Components, c)
	resp, err := secRequest(ctx, addr, adminMech, req)
	if err != nil {
		return 0, err
	}
	r := resp.(*kmsg.DescribeClientQuotasResponse)
	if r.ErrorCode != 0 {
		return 0, kerr.ErrorForCode(r.ErrorCode)
	}
	for _, e := range r.Entries {
		for _, v := range e.Values {
			if v.Key == auth.QuotaProducerByteRate {
				return v.Value, nil
			}
		}
	}
	return 0, nil
}

// TestClusterSecurityReplicated: ACLs, SCRAM credentials and client quotas
// changed through one broker of a three-broker cluster are enforced by
// the others, with Kafka's error codes, and survive a broker restart; the
// ACLs every broker kept in acls.json before seed the metadata once.
func TestClusterSecurityReplicated(t *testing.T) {
	bs, voters := startSecCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The ACL every acls.json held is in the metadata and on every broker.
	for _, b := range bs {
		waitSec(t, fmt.Sprintf("the seeded ACL on broker %d", b.id), func() string {
			resp, err := describeClusterACLs(ctx, b.addr, adminMech)
			if err != nil {
				return err.Error()
			}
			if resp.ErrorCode != 0 || len(resp.Resources) != 1 || len(resp.Resources[0].ACLs) != 1 || resp.Resources[0].ACLs[0].Principal != "User:carol" {
				return fmt.Sprintf("code %d, resources %+v", resp.ErrorCode, resp.Resources)
			}
			return ""
		})
	}

	// A SCRAM user created through broker 0 logs in on broker 2, where it
	// has no ACL yet.
	if code := alterAlice(t, ctx, bs[0].addr, false); code != 0 {
		t.Fatalf("upsert alice through broker 0: %v", kerr.ErrorForCode(code))
	}
	waitSec(t, "alice's login on broker 2", func() string {
		code, err := aliceDescribe(ctx, bs[2].addr)
		if err != nil {
			return err.Error()
		}
		if code != kerr.ClusterAuthorizationFailed.Code {
			return fmt.Sprintf("DescribeAcls without an ACL: %v", kerr.ErrorForCode(code))
		}
		return ""
	})

	// An ALLOW created through broker 0 is enforced on broker 2.
	if codes := secCreateACLs(t, ctx, bs[0].addr, adminMech, aliceClusterACL(kmsg.ACLPermissionTypeAllow)); codes[0] != 0 {
		t.Fatalf("CreateAcls through broker 0: %v", kerr.ErrorForCode(codes[0]))
	}
	waitSec(t, "alice allowed on broker 2", func() string {
		code, err := aliceDescribe(ctx, bs[2].addr)
		if err != nil || code != 0 {
			return fmt.Sprintf("%v %v", err, kerr.ErrorForCode(code))
		}
		return ""
	})
	// Kafka's refusals: alice lacks Alter on the cluster; a filter-only
	// pattern type is not a binding.
	if codes := secCreateACLs(t, ctx, bs[2].addr, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
		aliceClusterACL(kmsg.ACLPermissionTypeAllow)); codes[0] != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("CreateAcls by alice: %v", kerr.ErrorForCode(codes[0]))
	}
	bad := aliceClusterACL(kmsg.ACLPermissionTypeAllow)
	bad.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	if codes := secCreateACLs(t, ctx, bs[1].addr, adminMech, bad); codes[0] != kerr.InvalidRequest.Code {
		t.Fatalf("CreateAcls with pattern type ANY: %v", kerr.ErrorForCode(codes[0]))
	}

	// A DENY created through broker 1 wins on broker 2.
	if codes := secCreateACLs(t, ctx, bs[1].addr, adminMech, aliceClusterACL(kmsg.ACLPermissionTypeDeny)); codes[0] != 0 {
		t.Fatalf("CreateAcls DENY through broker 1: %v", kerr.ErrorForCode(codes[0]))
	}
	waitSec(t, "alice denied on broker 2", func() string {
		code, err := aliceDescribe(ctx, bs[2].addr)
		if err != nil || code != kerr.ClusterAuthorizationFailed.Code {
			return fmt.Sprintf("%v %v", err, kerr.ErrorForCode(code))
		}
		return ""
	})

	// A quota set through broker 0 is described and enforced on broker 2.
	qreq := kmsg.NewPtrAlterClientQuotasRequest()
	en := kmsg.NewAlterClientQuotasRequestEntry()
	ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ent.Type, ent.Name = auth.EntityUser, kmsg.StringPtr("alice")
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = auth.QuotaProducerByteRate, 1024
	en.Entity, en.Ops = append(en.Entity, ent), append(en.Ops, op)
	qreq.Entries = append(qreq.Entries, en)
	resp, err := secRequest(ctx, bs[0].addr, adminMech, qreq)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode; code != 0 {
		t.Fatalf("AlterClientQuotas through broker 0: %v", kerr.ErrorForCode(code))
	}
	waitSec(t, "alice's quota on broker 2", func() string {
		v, err := aliceQuota(ctx, bs[2].addr)
		if err != nil || v != 1024 {
			return fmt.Sprintf("%v %v", v, err)
		}
		if lim, ok := bs[2].s.cfg.Quotas.Limit(auth.QuotaProducerByteRate, "alice", "any-client"); !ok || lim != 1024 {
			return fmt.Sprintf("broker 2 limits alice to %v (%v)", lim, ok)
		}
		return ""
	})

	// Broker 2 restarts: the credential, the DENY and the quota are there.
	bs[2].stop(t)
	bs[2].restart(t, voters)
	waitSec(t, "after broker 2's restart", func() string {
		code, err := aliceDescribe(ctx, bs[2].addr)
		if err != nil || code != kerr.ClusterAuthorizationFailed.Code {
			return fmt.Sprintf("alice: %v %v", err, kerr.ErrorForCode(code))
		}
		if v, err := aliceQuota(ctx, bs[2].addr); err != nil || v != 1024 {
			return fmt.Sprintf("quota %v %v", v, err)
		}
		return ""
	})

	// The DENY deleted through the restarted broker 2: alice is allowed on
	// broker 0 again.
	dreq := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Principal, f.Operation, f.PermissionType = kmsg.StringPtr("User:alice"), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeDeny
	dreq.Filters = append(dreq.Filters, f)
	dresp, err := secRequest(ctx, bs[2].addr, adminMech, dreq)
	if err != nil {
		t.Fatal(err)
	}
	if r := dresp.(*kmsg.DeleteACLsResponse).Results[0]; r.ErrorCode != 0 || len(r.MatchingACLs) != 1 || r.MatchingACLs[0].PermissionType != kmsg.ACLPermissionTypeDeny {
		t.Fatalf("DeleteAcls through broker 2: %+v", r)
	}
	waitSec(t, "alice allowed again on broker 0", func() string {
		code, err := aliceDescribe(ctx, bs[0].addr)
		if err != nil || code != 0 {
			return fmt.Sprintf("%v %v", err, kerr.ErrorForCode(code))
		}
		return ""
	})

	// alice's credential deleted through broker 1: her login fails on
	// broker 0; deleting it again is RESOURCE_NOT_FOUND, as in Kafka.
	if code := alterAlice(t, ctx, bs[1].addr, true); code != 0 {
		t.Fatalf("delete alice through broker 1: %v", kerr.ErrorForCode(code))
	}
	if code := alterAlice(t, ctx, bs[0].addr, true); code != kerr.ResourceNotFound.Code {
		t.Fatalf("delete alice twice: %v", kerr.ErrorForCode(code))
	}
	waitSec(t, "alice's login refused on broker 0", func() string {
		if _, err := aliceDescribe(ctx, bs[0].addr); err == nil {
			return "alice still logs in"
		}
		return ""
	})
	// Every broker's acls.json is its copy of the metadata's ACLs.
	for _, b := range bs {
		a, err := auth.Open(auth.Config{}, filepath.Join(b.dataDir, engine.AclsFile))
		if err != nil {
			t.Fatal(err)
		}
		waitSec(t, fmt.Sprintf("broker %d's acls.json", b.id), func() string {
			if a, err = auth.Open(auth.Config{}, filepath.Join(b.dataDir, engine.AclsFile)); err != nil || len(a.All()) != 2 {
				return fmt.Sprintf("%v %v", err, a.All())
			}
			return ""
		})
	}
}
