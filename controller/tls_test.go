package controller

import (
	"bufio"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/tlstest"
)

// mutualTLS is the tweak that puts node id's port under mutual TLS with
// certificates of ca.
func mutualTLS(t *testing.T, ca *tlstest.CA) func(int32, *Config) {
	dir := t.TempDir()
	return func(id int32, cfg *Config) {
		leaf := ca.Server(t, dir, fmt.Sprintf("node-%d", id))
		cfg.ServerTLS = &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, ClientCAs: ca.Pool}
		cfg.ClientTLS = func(name string) *tls.Config {
			return &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, RootCAs: ca.Pool, ServerName: name}
		}
	}
}

// proposeFrame is a controller RPC propose request carrying cmd.
func proposeFrame(cmd Command) []byte {
	data := EncodeCommand(cmd)
	req := []byte{rpcMagic, rpcVersion}
	req = binary.BigEndian.AppendUint32(req, uint32(1+len(data)))
	req = append(req, rpcPropose)
	return append(req, data...)
}

// refused reports whether conn is closed by the server without an answer
// after sending req.
func refused(t *testing.T, conn net.Conn, req []byte) bool {
	t.Helper()
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(req); err != nil {
		return true
	}
	_, _, err := readFrame(bufio.NewReader(conn))
	return err != nil
}

// TestMutualTLSQuorum runs three nodes whose port (Raft and the controller
// RPC) is mutual TLS: they elect a leader, a follower forwards proposals
// and all converge; a plain TCP peer, a TLS peer without a certificate and
// one whose certificate another CA signed are each closed without their
// proposal being applied.
func TestMutualTLSQuorum(t *testing.T) {
	ca := tlstest.NewCA(t, t.TempDir(), "cluster")
	c := newClusterWith(t, 3, mutualTLS(t, ca))
	leader := c.leader()
	registerAll(t, c.follower(), 3) // forwarded over the RPC, replicated over Raft
	r := mustPropose(t, c.follower(), CreateTopic{Name: "t", ID: NewTopicID(), Partitions: 2, ReplicationFactor: 3})
	c.converged(r.Offset)

	addr := c.voters[leader.NodeID()]
	intruder := CreateTopic{Name: "intruder", ID: NewTopicID(), Partitions: 1, ReplicationFactor: 1}
	req := proposeFrame(intruder)

	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if !refused(t, plain, req) {
		t.Error("a plain TCP proposal was answered")
	}
	noCert, err := tls.Dial("tcp", addr, tlstest.ClientConfig(ca, nil))
	if err == nil {
		if !refused(t, noCert, req) {
			t.Error("a TLS peer without a client certificate was answered")
		}
	}
	other := tlstest.NewCA(t, t.TempDir(), "other")
	stranger := other.Client(t, t.TempDir(), pkix.Name{CommonName: "stranger"})
	cfg := tlstest.ClientConfig(ca, stranger) // trusts the cluster, presents another CA's certificate
	wrongCA, err := tls.Dial("tcp", addr, cfg)
	if err == nil {
		if !refused(t, wrongCA, req) {
			t.Error("a TLS peer whose certificate another CA signed was answered")
		}
	}

	// Nothing of theirs was applied: one more proposal through the quorum
	// and every node agrees without the intruder's topic.
	r = mustPropose(t, leader, CreateTopic{Name: "u", ID: NewTopicID(), Partitions: 1, ReplicationFactor: 3})
	enc := c.converged(r.Offset)
	s, err := DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if s.Topic("intruder") != nil {
		t.Fatal("a proposal from outside the mutual-TLS quorum was applied")
	}
	if s.Topic("u") == nil || s.Topic("t") == nil {
		t.Fatal("the quorum's own topics are missing")
	}
}

// TestNewRefusesHalfTLS: mutual TLS needs both sides' configurations.
func TestNewRefusesHalfTLS(t *testing.T) {
	ca := tlstest.NewCA(t, t.TempDir(), "cluster")
	cfg := testConfig(0, map[int32]string{0: "127.0.0.1:0"}, t.TempDir(), nil, &manualClock{})
	mutualTLS(t, ca)(0, &cfg)
	cfg.ClientTLS = nil
	if c, err := New(cfg); err == nil {
		c.Close()
		t.Fatal("New accepted ServerTLS without ClientTLS")
	}
}

// TestMutualTLSAuthorizePeer: with AuthorizePeer, a certificate the trust
// store verifies is not enough: a client of the same CA whose certificate
// names no broker is closed, and its proposal never applied, while the
// brokers' own certificates form the quorum.
func TestMutualTLSAuthorizePeer(t *testing.T) {
	ca := tlstest.NewCA(t, t.TempDir(), "cluster")
	base := mutualTLS(t, ca)
	c := newClusterWith(t, 3, func(id int32, cfg *Config) {
		base(id, cfg)
		cfg.AuthorizePeer = func(_ net.Addr, st tls.ConnectionState) error {
			if len(st.PeerCertificates) == 0 || !strings.HasPrefix(st.PeerCertificates[0].Subject.CommonName, "node-") {
				return errors.New("not a broker")
			}
			return nil
		}
	})
	leader := c.leader()
	registerAll(t, c.follower(), 3)

	app := ca.Client(t, t.TempDir(), pkix.Name{CommonName: "app"}) // same CA, not a broker
	conn, err := tls.Dial("tcp", c.voters[leader.NodeID()], tlstest.ClientConfig(ca, app))
	if err == nil && !refused(t, conn, proposeFrame(CreateTopic{Name: "intruder", ID: NewTopicID(), Partitions: 1, ReplicationFactor: 1})) {
		t.Error("a client certificate that names no broker was answered")
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
