package controller

import (
	"bytes"
	"math/rand"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func testCred(user, mech string, fill byte) ScramCredential {
	n := ScramKeyLen(mech)
	return ScramCredential{User: user, Mechanism: mech, Salt: []byte("salt-" + user), Iterations: 4096,
		StoredKey: bytes.Repeat([]byte{fill}, n), ServerKey: bytes.Repeat([]byte{fill + 1}, n)}
}

var (
	aclAliceRead = ACL{ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 3, Permission: 3}
	aclBobDeny   = ACL{ResourceType: 4, ResourceName: "kafka-cluster", PatternType: 3, Principal: "User:bob", Host: "*", Operation: 8, Permission: 2}
	userAlice    = QuotaEntity{User: QuotaName{Set: true, Name: "alice"}}
	userDefault  = QuotaEntity{User: QuotaName{Set: true, Default: true}, ClientID: QuotaName{Set: true, Name: "c1"}}
)

// secApply applies c (round-tripped through its encoding, as Raft would
// carry it), checks the invariants and the wanted code.
func secApply(t *testing.T, s *State, c Command, code int16) Result {
	t.Helper()
	dec, err := DecodeCommand(EncodeCommand(c))
	if err != nil {
		t.Fatalf("%T: decode: %v", c, err)
	}
	r := s.Apply(dec)
	if r.Code != code {
		t.Fatalf("%T: code %d (%s), want %d", c, r.Code, r.Message, code)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("%T: %v", c, err)
	}
	return r
}

// TestSecurityApplyAndSnapshot applies every security command, with the
// refusals Kafka answers, and checks that the State's snapshot restores
// the same ACLs, credentials, quotas and seeded kinds.
func TestSecurityApplyAndSnapshot(t *testing.T) {
	s := NewState()
	secApply(t, s, CreateACLs{ACLs: []ACL{aclAliceRead, aclBobDeny, aclAliceRead}}, 0)
	if got := s.ACLs(); !slices.Equal(got, []ACL{aclAliceRead, aclBobDeny}) {
		t.Fatalf("ACLs %+v", got)
	}
	bad := aclAliceRead
	bad.PatternType = 1 // ANY: a filter's, not a binding's
	secApply(t, s, CreateACLs{ACLs: []ACL{aclBobDeny, bad}}, kerr.InvalidRequest.Code)
	if len(s.ACLs()) != 2 {
		t.Fatal("a refused CreateACLs changed the ACLs")
	}

	alice256, alice512 := testCred("alice", "SCRAM-SHA-256", 1), testCred("alice", "SCRAM-SHA-512", 3)
	secApply(t, s, AlterScram{Upserts: []ScramCredential{alice256, alice512}}, 0)
	secApply(t, s, AlterScram{Deletes: []ScramKey{{"bob", "SCRAM-SHA-256"}}}, kerr.ResourceNotFound.Code)
	unknown := testCred("carol", "SCRAM-SHA-256", 5)
	unknown.Mechanism = "SCRAM-MD5"
	secApply(t, s, AlterScram{Upserts: []ScramCredential{unknown}}, kerr.UnsupportedSaslMechanism.Code)
	few := testCred("carol", "SCRAM-SHA-256", 5)
	few.Iterations = 100
	secApply(t, s, AlterScram{Upserts: []ScramCredential{few}}, kerr.UnacceptableCredential.Code)
	// all or none: a valid upsert with a missing deletion changes nothing
	secApply(t, s, AlterScram{Upserts: []ScramCredential{testCred("carol", "SCRAM-SHA-256", 5)},
		Deletes: []ScramKey{{"dave", "SCRAM-SHA-512"}}}, kerr.ResourceNotFound.Code)
	secApply(t, s, AlterScram{Deletes: []ScramKey{{"alice", "SCRAM-SHA-256"}}}, 0)
	if got := s.ScramCredentials(); len(got) != 1 || got[0].Mechanism != "SCRAM-SHA-512" || !bytes.Equal(got[0].StoredKey, alice512.StoredKey) {
		t.Fatalf("credentials %+v", got)
	}

	secApply(t, s, AlterClientQuotas{Ops: []QuotaOp{
		{Entity: userAlice, Key: "producer_byte_rate", Value: 1024},
		{Entity: userAlice, Key: "consumer_byte_rate", Value: 2048},
		{Entity: userDefault, Key: "request_percentage", Value: 12.5},
	}}, 0)
	secApply(t, s, AlterClientQuotas{Ops: []QuotaOp{{Entity: userAlice, Key: "producer_byte_rate", Value: -1}}}, kerr.InvalidRequest.Code)
	secApply(t, s, AlterClientQuotas{Ops: []QuotaOp{{Entity: QuotaEntity{}, Key: "producer_byte_rate", Value: 1}}}, kerr.InvalidRequest.Code)
	secApply(t, s, AlterClientQuotas{Ops: []QuotaOp{{Entity: userAlice, Key: "consumer_byte_rate", Remove: true}}}, 0)
	qs := s.ClientQuotas()
	if len(qs) != 2 || qs[0].Entity != userAlice || len(qs[0].Values) != 1 || qs[0].Values["producer_byte_rate"] != 1024 ||
		qs[1].Values["request_percentage"] != 12.5 {
		t.Fatalf("quotas %+v", qs)
	}
	if s.SecuritySeeded() != SecurityACLs|SecurityScram|SecurityQuotas {
		t.Fatalf("seeded %#x after changes of every kind", s.SecuritySeeded())
	}
	r := secApply(t, s, DeleteACLs{ACLs: []ACL{aclBobDeny, bad}}, 0)
	if got := s.ACLs(); !slices.Equal(got, []ACL{aclAliceRead}) || s.SecurityOffset() != r.Offset {
		t.Fatalf("after DeleteACLs: %+v, security offset %d, command %d", got, s.SecurityOffset(), r.Offset)
	}

	// snapshot and restore
	enc := s.AppendTo(nil)
	back, err := DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.AppendTo(nil), enc) {
		t.Fatal("restored state encodes differently")
	}
	if !slices.Equal(back.ACLs(), s.ACLs()) || back.SecurityOffset() != s.SecurityOffset() || back.SecuritySeeded() != s.SecuritySeeded() {
		t.Fatalf("restored security %+v", back.ACLs())
	}
	if c := back.ScramCredentials(); len(c) != 1 || !bytes.Equal(c[0].ServerKey, alice512.ServerKey) || c[0].Iterations != 4096 {
		t.Fatalf("restored credentials %+v", c)
	}
	if q := back.ClientQuotas(); len(q) != 2 || q[1].Entity != userDefault || q[1].Values["request_percentage"] != 12.5 {
		t.Fatalf("restored quotas %+v", q)
	}
	cl := s.Clone()
	secApply(t, cl, CreateACLs{ACLs: []ACL{aclBobDeny}}, 0)
	secApply(t, cl, AlterClientQuotas{Ops: []QuotaOp{{Entity: userAlice, Key: "producer_byte_rate", Value: 1}}}, 0)
	if len(s.ACLs()) != 1 || s.ClientQuotas()[0].Values["producer_byte_rate"] != 1024 {
		t.Fatal("a clone shares security state with its original")
	}
	// a corrupted snapshot is refused, never half-restored
	for i := len(enc) - 40; i < len(enc)-4; i++ {
		b := slices.Clone(enc)
		b[i] ^= 0x40
		if _, err := DecodeState(b); err == nil {
			t.Fatalf("flipping byte %d of the snapshot went unnoticed", i)
		}
	}
}

// TestSecuritySeedOnce: the first seed of a kind is taken, later ones and
// seeds of a kind already changed are not, so a seed never brings back
// what was deleted.
func TestSecuritySeedOnce(t *testing.T) {
	s := NewState()
	secApply(t, s, AlterScram{Upserts: []ScramCredential{testCred("admin", "SCRAM-SHA-512", 7)}}, 0)
	r := secApply(t, s, SeedSecurity{Kinds: SecurityACLs | SecurityScram | SecurityQuotas,
		ACLs:   []ACL{aclAliceRead},
		Scram:  []ScramCredential{testCred("admin", "SCRAM-SHA-512", 9), testCred("broker", "SCRAM-SHA-512", 9)},
		Quotas: []QuotaOp{{Entity: userAlice, Key: "producer_byte_rate", Value: 10}}}, 0)
	if r.Message != "seeded" || !slices.Equal(s.ACLs(), []ACL{aclAliceRead}) || len(s.ClientQuotas()) != 1 {
		t.Fatalf("first seed: %q %+v %+v", r.Message, s.ACLs(), s.ClientQuotas())
	}
	if c := s.ScramCredentials(); len(c) != 1 || c[0].StoredKey[0] != 7 {
		t.Fatalf("a seed of a kind already changed was taken: %+v", c)
	}
	secApply(t, s, DeleteACLs{ACLs: []ACL{aclAliceRead}}, 0)
	r = secApply(t, s, SeedSecurity{Kinds: SecurityACLs | SecurityQuotas, ACLs: []ACL{aclAliceRead, aclBobDeny},
		Quotas: []QuotaOp{{Entity: userAlice, Key: "producer_byte_rate", Value: 99}}}, 0)
	if r.Message != "already seeded" || len(s.ACLs()) != 0 || s.ClientQuotas()[0].Values["producer_byte_rate"] != 10 {
		t.Fatalf("second seed: %q %+v %+v", r.Message, s.ACLs(), s.ClientQuotas())
	}
	secApply(t, s, SeedSecurity{Kinds: 8}, kerr.InvalidRequest.Code)
}

// TestSecurityDecodeBounds: truncated security commands are refused.
func TestSecurityDecodeBounds(t *testing.T) {
	for _, c := range []Command{
		CreateACLs{ACLs: []ACL{aclAliceRead}},
		AlterScram{Upserts: []ScramCredential{testCred("a", "SCRAM-SHA-256", 1)}, Deletes: []ScramKey{{"b", "SCRAM-SHA-512"}}},
		AlterClientQuotas{Ops: []QuotaOp{{Entity: userDefault, Key: "k", Value: 1.5}}},
		SeedSecurity{Kinds: 7, ACLs: []ACL{aclBobDeny}},
	} {
		b := EncodeCommand(c)
		for n := 2; n < len(b); n++ {
			if _, err := DecodeCommand(b[:n]); err == nil {
				t.Fatalf("%T truncated to %d of %d bytes decoded", c, n, len(b))
			}
		}
		if _, err := DecodeCommand(append(b, 0)); err == nil {
			t.Fatalf("%T with a trailing byte decoded", c)
		}
	}
}

// TestSecurityThroughRaft: security commands proposed through a
// follower are applied on every node, and a node restarted from its
// snapshot has them.
func TestSecurityThroughRaft(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()
	follower := c.follower()
	mustPropose(t, follower, CreateACLs{ACLs: []ACL{aclAliceRead}})
	r := mustPropose(t, follower, AlterScram{Upserts: []ScramCredential{testCred("alice", "SCRAM-SHA-512", 2)}})
	enc := c.converged(r.Offset)
	st, err := DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.ACLs(), []ACL{aclAliceRead}) || len(st.ScramCredentials()) != 1 {
		t.Fatalf("converged state: %+v %+v", st.ACLs(), st.ScramCredentials())
	}
	// a snapshot restores it (fsm.Restore, as a lagging node would)
	snap, err := leader.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f := newFSM(func() {}, nil)
	if err := f.Restore(nopCloser{bytes.NewReader(snap.(*fsmSnapshot).data)}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.state.ACLs(), []ACL{aclAliceRead}) || f.state.ScramCredentials()[0].User != "alice" {
		t.Fatal("restored FSM lacks the security state")
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// securityCommands is one of each security command, and AlterBrokerConfigs
// (fuzz seeds).
func securityCommands() []Command {
	return []Command{
		CreateACLs{ACLs: []ACL{aclAliceRead, aclBobDeny}},
		DeleteACLs{ACLs: []ACL{aclBobDeny}},
		AlterScram{Upserts: []ScramCredential{testCred("alice", "SCRAM-SHA-256", 1)}, Deletes: []ScramKey{{"bob", "SCRAM-SHA-512"}}},
		AlterClientQuotas{Ops: []QuotaOp{{Entity: userAlice, Key: "producer_byte_rate", Value: 1024}, {Entity: userDefault, Key: "k", Remove: true}}},
		SeedSecurity{Kinds: SecurityACLs | SecurityQuotas, ACLs: []ACL{aclAliceRead}, Quotas: []QuotaOp{{Entity: userAlice, Key: "k", Value: 2}}},
		AlterBrokerConfigs{Broker: DefaultBrokerConfigs, Set: map[string]string{"log.retention.ms": "1000"}, Delete: []string{"max.connections"}}, // brokerconfigs.go
	}
}

// TestSecurityReplayDeterministic: random security commands applied to a
// State, to a copy fed their encodings, and to a copy restored from a
// snapshot taken midway, end in equal encodings.
func TestSecurityReplayDeterministic(t *testing.T) {
	rng := rand.New(rand.NewSource(20))
	users := []string{"alice", "bob", "carol"}
	mechs := []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}
	acl := func() ACL {
		return ACL{ResourceType: int8(2 + rng.Intn(4)), ResourceName: []string{"a", "b", "*"}[rng.Intn(3)], PatternType: int8(3 + rng.Intn(2)),
			Principal: "User:" + users[rng.Intn(3)], Host: "*", Operation: int8(2 + rng.Intn(13)), Permission: int8(2 + rng.Intn(2))}
	}
	entity := func() QuotaEntity {
		e := QuotaEntity{User: QuotaName{Set: true, Name: users[rng.Intn(3)]}}
		if rng.Intn(2) == 0 {
			e.ClientID = QuotaName{Set: true, Default: true}
		}
		return e
	}
	a, b := NewState(), NewState()
	var restored *State
	for i := 0; i < 500; i++ {
		var c Command
		switch rng.Intn(5) {
		case 0:
			c = CreateACLs{ACLs: []ACL{acl(), acl()}}
		case 1:
			acls := a.ACLs()
			if len(acls) > 0 {
				c = DeleteACLs{ACLs: []ACL{acls[rng.Intn(len(acls))], acl()}}
			} else {
				c = DeleteACLs{ACLs: []ACL{acl()}}
			}
		case 2:
			u, m := users[rng.Intn(3)], mechs[rng.Intn(2)]
			if rng.Intn(3) == 0 {
				c = AlterScram{Deletes: []ScramKey{{u, m}}}
			} else {
				c = AlterScram{Upserts: []ScramCredential{testCred(u, m, byte(rng.Intn(200)))}}
			}
		case 3:
			c = AlterClientQuotas{Ops: []QuotaOp{{Entity: entity(), Key: "producer_byte_rate", Value: float64(1 + rng.Intn(1000)), Remove: rng.Intn(3) == 0}}}
		default:
			c = SeedSecurity{Kinds: uint8(rng.Intn(8)), ACLs: []ACL{acl()}, Quotas: []QuotaOp{{Entity: entity(), Key: "consumer_byte_rate", Value: 5}}}
		}
		ra := a.Apply(c)
		dec, err := DecodeCommand(EncodeCommand(c))
		if err != nil {
			t.Fatal(err)
		}
		if rb := b.Apply(dec); rb.Code != ra.Code || rb.Offset != ra.Offset {
			t.Fatalf("command %d: results %+v and %+v", i, ra, rb)
		}
		if restored != nil {
			restored.Apply(dec)
		}
		if err := a.Check(); err != nil {
			t.Fatalf("command %d (%T): %v", i, c, err)
		}
		if i == 250 {
			if restored, err = DecodeState(a.AppendTo(nil)); err != nil {
				t.Fatal(err)
			}
		}
	}
	ea := a.AppendTo(nil)
	if !bytes.Equal(ea, b.AppendTo(nil)) || !bytes.Equal(ea, restored.AppendTo(nil)) {
		t.Fatal("replicas of the security state diverged")
	}
	if len(a.ACLs()) == 0 || len(a.ScramCredentials()) == 0 || len(a.ClientQuotas()) == 0 {
		t.Fatalf("the run left no state to compare: %d ACLs, %d credentials, %d quotas", len(a.ACLs()), len(a.ScramCredentials()), len(a.ClientQuotas()))
	}
}
