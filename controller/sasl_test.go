package controller

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/kframe"
	"github.com/stratalog/strata/internal/sasl"
)

// logLines collects a node's log output.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

func (l *logLines) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

const saslRefused = "controller port: authentication failed"

// saslSelf authenticates a dialled connection as cc.
func saslSelf(cc sasl.ClientCredentials) func(context.Context, net.Conn) error {
	return func(ctx context.Context, conn net.Conn) error { return sasl.Authenticate(ctx, conn, cc) }
}

// scramPort is the tweak that puts a node's port under SASL with
// SCRAM-SHA-512 as the broker does (cmd/strata controllerSecurity), users
// from store, the node authenticating as cc; logs (WARN and above) go to
// logs[id] when logs is not nil.
func scramPort(store *sasl.Store, cc sasl.ClientCredentials, logs map[int32]*logLines) func(int32, *Config) {
	return func(id int32, cfg *Config) {
		scfg := &sasl.Config{Mechanisms: []string{sasl.ScramSHA512}, Scram: store}
		cfg.AuthenticatePeer = func(conn net.Conn) (string, error) { return sasl.Serve(conn, scfg) }
		cfg.AuthenticateSelf = saslSelf(cc)
		if l := logs[id]; l != nil {
			cfg.Logger = l.logger()
		}
	}
}

func scramStore(t *testing.T, users ...string) *sasl.Store {
	t.Helper()
	store := sasl.NewStore()
	for i := 0; i+1 < len(users); i += 2 {
		c, err := sasl.NewCredential(sasl.ScramSHA512, users[i+1], 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Set(users[i], sasl.ScramSHA512, c); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

var brokerCreds = sasl.ClientCredentials{Mechanism: sasl.ScramSHA512, User: "broker", Password: "broker-secret"}

// TestSASLQuorum runs three nodes whose port (Raft and the controller RPC)
// needs SCRAM-SHA-512: they elect a leader, a follower forwards proposals
// over the RPC and all converge. A plain TCP peer and a peer with a wrong
// password or an unknown user are each closed with one WARN line, and
// nothing they sent is applied.
func TestSASLQuorum(t *testing.T) {
	store := scramStore(t, "broker", "broker-secret")
	logs := map[int32]*logLines{0: {}, 1: {}, 2: {}}
	c := newClusterWith(t, 3, scramPort(store, brokerCreds, logs))
	leader := c.leader()
	registerAll(t, c.follower(), 3) // forwarded over the RPC, replicated over Raft
	r := mustPropose(t, c.follower(), CreateTopic{Name: "t", ID: NewTopicID(), Partitions: 2, ReplicationFactor: 3})
	c.converged(r.Offset)
	for id, l := range logs {
		if n := l.count("controller port:"); n != 0 {
			t.Fatalf("node %d refused %d connections of its own quorum", id, n)
		}
	}

	addr := c.voters[leader.NodeID()]
	ll := logs[leader.NodeID()]
	refusals := 0
	expectRefusal := func(what string) {
		t.Helper()
		refusals++
		eventually(t, what+" logged", func() bool { return ll.count(saslRefused) >= refusals })
		if n := ll.count(saslRefused); n != refusals {
			t.Fatalf("%s: %d refusal lines, want %d", what, n, refusals)
		}
	}
	intruder := CreateTopic{Name: "intruder", ID: NewTopicID(), Partitions: 1, ReplicationFactor: 1}

	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if !refused(t, plain, proposeFrame(intruder)) {
		t.Error("a proposal without authentication was answered")
	}
	expectRefusal("a plain TCP peer")

	// A Raft peer without credentials: Raft's AppendEntries type byte (0)
	// first, as hashicorp/raft's transport opens a connection.
	plain, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if !refused(t, plain, []byte{0, 0x81, 0xa4, 'T', 'e', 'r', 'm', 99}) {
		t.Error("a Raft frame without authentication was answered")
	}
	expectRefusal("a plain Raft peer")

	for _, cc := range []sasl.ClientCredentials{
		{Mechanism: sasl.ScramSHA512, User: "broker", Password: "wrong"},
		{Mechanism: sasl.ScramSHA512, User: "nobody", Password: "broker-secret"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _, err := rpcCall(ctx, peerSecurity{authenticateSelf: saslSelf(cc)}, addr, rpcPropose, EncodeCommand(intruder))
		cancel()
		if !errors.Is(err, errNotSent) || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
			t.Errorf("a proposal as %s with a wrong password: %v", cc.User, err)
		}
		expectRefusal("a peer authenticating as " + cc.User)
	}

	// A peer that goes on after a failed exchange (a bad SCRAM token, a
	// mechanism the port does not enable) as if it had succeeded.
	for name, frames := range map[string][][]byte{
		"bad token": {
			kafkaRequest(17, 1, 1, appendKString(nil, sasl.ScramSHA512)),
			kafkaRequest(36, 1, 2, appendKBytes(nil, []byte("not scram"))),
		},
		"mechanism not enabled": {kafkaRequest(17, 1, 1, appendKString(nil, sasl.Plain))},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		for _, f := range frames {
			if _, err := conn.Write(f); err != nil {
				t.Fatal(err)
			}
			if _, err := kframe.ReadFrame(conn, 1<<20, nil); err != nil {
				t.Fatalf("%s: the SASL request was not answered: %v", name, err)
			}
		}
		if !refused(t, conn, proposeFrame(intruder)) {
			t.Errorf("%s: a proposal after a failed SASL exchange was answered", name)
		}
		expectRefusal(name)
	}

	// Nothing of theirs was applied.
	r = mustPropose(t, leader, CreateTopic{Name: "u", ID: NewTopicID(), Partitions: 1, ReplicationFactor: 3})
	s, err := DecodeState(c.converged(r.Offset))
	if err != nil {
		t.Fatal(err)
	}
	if s.Topic("intruder") != nil {
		t.Fatal("a proposal from outside the SASL quorum was applied")
	}
	if s.Topic("u") == nil || s.Topic("t") == nil {
		t.Fatal("the quorum's own topics are missing")
	}
}

// kafkaRequest is a request frame with header v1 (client id "x").
func kafkaRequest(key, version int16, corr int32, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = appendKString(b, "x")
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func appendKString(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint16(b, uint16(len(s))), s...)
}

func appendKBytes(b, p []byte) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(p))), p...)
}

// TestSASLAuthorizePeer: with AuthorizePrincipal, a user whose password is
// right but who is not a broker is closed after authenticating, with one
// line, and its proposal is not applied.
func TestSASLAuthorizePeer(t *testing.T) {
	store := scramStore(t, "broker", "broker-secret", "app", "app-secret")
	logs := map[int32]*logLines{0: {}, 1: {}, 2: {}}
	base := scramPort(store, brokerCreds, logs)
	c := newClusterWith(t, 3, func(id int32, cfg *Config) {
		base(id, cfg)
		cfg.AuthorizePrincipal = func(_ net.Addr, principal string) error {
			if principal != "User:broker" {
				return errors.New(principal + " has no ClusterAction on the cluster")
			}
			return nil
		}
	})
	leader := c.leader()
	registerAll(t, c.follower(), 3)

	app := sasl.ClientCredentials{Mechanism: sasl.ScramSHA512, User: "app", Password: "app-secret"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	intruder := CreateTopic{Name: "intruder", ID: NewTopicID(), Partitions: 1, ReplicationFactor: 1}
	if _, _, err := rpcCall(ctx, peerSecurity{authenticateSelf: saslSelf(app)}, c.voters[leader.NodeID()], rpcPropose, EncodeCommand(intruder)); err == nil {
		t.Fatal("a proposal from an authenticated non-broker was answered")
	}
	ll := logs[leader.NodeID()]
	eventually(t, "the refusal logged", func() bool { return ll.count("controller port: peer not authorized") == 1 })
	if n := ll.count("principal=User:app"); n != 1 {
		t.Fatalf("%d lines name the refused principal, want 1", n)
	}
	r := mustPropose(t, leader, CreateTopic{Name: "u", ID: NewTopicID(), Partitions: 1, ReplicationFactor: 3})
	s, err := DecodeState(c.converged(r.Offset))
	if err != nil {
		t.Fatal(err)
	}
	if s.Topic("intruder") != nil || s.Topic("u") == nil {
		t.Fatal("the unauthorized peer's proposal was applied, or the quorum's own is missing")
	}
}

// TestSASLObserverNeedsCredentials: an observer (a broker beyond the
// quorum) with the right password joins and applies changes; one with a
// wrong password is never added to the Raft configuration and cannot
// propose.
func TestSASLObserverNeedsCredentials(t *testing.T) {
	store := scramStore(t, "broker", "broker-secret")
	clock := &manualClock{}
	ln0, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	voters := map[int32]string{0: ln0.Addr().String()}
	var vlog logLines
	vcfg := testConfig(0, voters, t.TempDir(), ln0, clock)
	scramPort(store, brokerCreds, nil)(0, &vcfg)
	vcfg.Logger = vlog.logger()
	v, err := New(vcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()

	startObserver := func(id int32, cc sasl.ClientCredentials) *Controller {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(id, voters, t.TempDir(), ln, clock)
		cfg.RaftAddr = ln.Addr().String()
		scramPort(store, cc, nil)(id, &cfg)
		o, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	good := startObserver(7, brokerCreds)
	defer good.Close()
	r := mustPropose(t, good, RegisterBroker{ID: 7, IncarnationID: NewIncarnationID(), Host: "h", Port: 1})
	if err := good.WaitApplied(testCtx(t), r.Offset); err != nil {
		t.Fatalf("the observer with credentials did not apply its own registration: %v", err)
	}

	bad := startObserver(8, sasl.ClientCredentials{Mechanism: sasl.ScramSHA512, User: "broker", Password: "wrong"})
	defer bad.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := bad.Propose(ctx, RegisterBroker{ID: 8, IncarnationID: NewIncarnationID(), Host: "h", Port: 2}); err == nil {
		t.Fatal("an observer with a wrong password proposed")
	}
	if vlog.count(saslRefused) == 0 {
		t.Fatal("the voter did not log the refused observer")
	}
	f := v.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == "8" {
			t.Fatalf("the observer with a wrong password joined: %+v", f.Configuration().Servers)
		}
	}
	if _, ok := v.State().Broker(8); ok {
		t.Fatal("the observer's registration was applied")
	}
}

// TestNewRefusesHalfPeerAuth: authentication on the port needs both
// sides, and AuthorizePrincipal needs a principal.
func TestNewRefusesHalfPeerAuth(t *testing.T) {
	cfg := testConfig(0, map[int32]string{0: "127.0.0.1:0"}, t.TempDir(), nil, &manualClock{})
	scramPort(sasl.NewStore(), brokerCreds, nil)(0, &cfg)
	cfg.AuthenticateSelf = nil
	if c, err := New(cfg); err == nil {
		c.Close()
		t.Fatal("New accepted AuthenticatePeer without AuthenticateSelf")
	}
	cfg.AuthenticatePeer = nil
	cfg.AuthorizePrincipal = func(net.Addr, string) error { return nil }
	if c, err := New(cfg); err == nil {
		c.Close()
		t.Fatal("New accepted AuthorizePrincipal without AuthenticatePeer")
	}
}
