package server

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/stratalog/strata/internal/tlstest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// ctlNode is one controller-only node of a test: its voter and the Server
// on its controller listener.
type ctlNode struct {
	ctl  *controller.Controller
	s    *Server
	addr string // the controller listener
}

// startControllers starts n controller-only nodes on 127.0.0.1, each
// serving a PLAINTEXT CONTROLLER listener.
func startControllers(t *testing.T, n int) []*ctlNode {
	t.Helper()
	return startControllersOn(t, n, Listener{Name: "CONTROLLER", Controller: true})
}

// startControllersOn starts n controller-only nodes on 127.0.0.1, each
// serving a controller listener like l (its TLS, SASL), registered under
// l.Name.
func startControllersOn(t *testing.T, n int, l Listener) []*ctlNode {
	t.Helper()
	voters, lns := quorumListeners(t, n)
	var nodes []*ctlNode
	for i := int32(0); i < int32(n); i++ {
		ctl, err := controller.New(controller.Config{
			NodeID: i, Voters: voters, DataDir: t.TempDir(), Listener: lns[i],
			Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
			HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
			LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		kln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		host, port := AdvertisedEndpoint("", 0, kln.Addr())
		ctl.SetKafkaEndpoints([]controller.Endpoint{{Name: l.Name, Host: host, Port: port}})
		s := New(Config{NodeID: i, ClusterID: "strata-test-cluster", ControllerOnly: true,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Cluster: ClusterConfig{Controller: ctl}}, nil)
		served := make(chan error, 1)
		go func() { served <- s.ServeListener(kln, l) }()
		t.Cleanup(func() {
			s.Close()
			<-served
			ctl.Close()
		})
		nodes = append(nodes, &ctlNode{ctl: ctl, s: s, addr: kln.Addr().String()})
	}
	return nodes
}

// quorumLeader waits until every node knows the same leader.
func quorumLeader(t *testing.T, nodes []*ctlNode) int32 {
	t.Helper()
	for range 500 { // 10 s
		id, ok := nodes[0].ctl.Leader()
		agree := ok
		for _, n := range nodes[1:] {
			if other, ok := n.ctl.Leader(); !ok || other != id {
				agree = false
			}
		}
		if agree {
			return id
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no quorum leader")
	return -1
}

// quorumSettled reports whether a DescribeQuorum answer shows a committed
// entry held by every voter.
func quorumSettled(r *kmsg.DescribeQuorumResponse) bool {
	if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return false
	}
	p := r.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark < 1 {
		return false
	}
	for _, v := range p.CurrentVoters {
		if v.LogEndOffset < 1 || v.LastFetchTimestamp <= 0 {
			return false
		}
	}
	return true
}

// TestControllerListener: a controller-only node's controller listener
// answers ApiVersions with the controller APIs only, DescribeCluster
// (EndpointType=2) with the three controllers and the active one,
// DescribeQuorum with the leader and the three voters (v2: their
// listeners), refuses brokers (MISMATCHED_ENDPOINT_TYPE) and closes the
// connection on an API it does not serve (Metadata).
func TestControllerListener(t *testing.T) {
	nodes := startControllers(t, 3)
	leader := quorumLeader(t, nodes)
	follower := nodes[(leader+1)%3]

	c := dialRaw(t, follower.addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	avr := kmsg.NewPtrApiVersionsResponse()
	c.roundTrip(av, 1, avr)
	var keys []int16
	for _, k := range avr.ApiKeys {
		keys = append(keys, k.ApiKey)
	}
	if avr.ErrorCode != 0 || !slices.Equal(keys, []int16{17, 18, 36, 55, 60}) {
		t.Fatalf("ApiVersions: error %d, keys %v", avr.ErrorCode, keys)
	}
	for v, typ := range map[int16]int8{0: endpointBrokers, 1: endpointBrokers} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(v)
		req.EndpointType = typ
		resp := kmsg.NewPtrDescribeClusterResponse()
		c.roundTrip(req, 2, resp)
		if resp.ErrorCode != kerr.MismatchedEndpointType.Code || len(resp.Brokers) != 0 {
			t.Fatalf("DescribeCluster v%d brokers on a controller: %+v", v, resp)
		}
	}

	// franz-go with the controller listener as its seed.
	cl, err := kgo.NewClient(kgo.SeedBrokers(follower.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seed := cl.SeedBrokers()[0]
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.EndpointType = endpointControllers
	r, err := seed.Request(testCtx(t), dc)
	if err != nil {
		t.Fatal(err)
	}
	dcr := r.(*kmsg.DescribeClusterResponse)
	if dcr.ErrorCode != 0 || dcr.EndpointType != endpointControllers || dcr.ClusterID != "strata-test-cluster" || dcr.ControllerID != leader || len(dcr.Brokers) != 3 {
		t.Fatalf("DescribeCluster controllers: %+v", dcr)
	}
	for i, b := range dcr.Brokers {
		if b.NodeID != int32(i) || net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) != nodes[i].addr {
			t.Fatalf("controller %d: %+v, listening on %s", i, b, nodes[i].addr)
		}
	}
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dqt := kmsg.NewDescribeQuorumRequestTopic()
	dqt.Topic = "__cluster_metadata"
	dqt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{dqt}
	// The answering node asks the leader for the figures and falls back on
	// its own when the leader does not answer in time (a loaded machine):
	// its commit index can still be 0 just after the election. Ask until
	// the quorum's first entry is committed and every voter has it.
	var dqr *kmsg.DescribeQuorumResponse
	for range 500 { // 10 s
		r, err = seed.Request(testCtx(t), dq)
		if err != nil {
			t.Fatal(err)
		}
		dqr = r.(*kmsg.DescribeQuorumResponse)
		if quorumSettled(dqr) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if dqr.Version != 2 || dqr.ErrorCode != 0 || len(dqr.Topics) != 1 || len(dqr.Topics[0].Partitions) != 1 || len(dqr.Nodes) != 3 {
		t.Fatalf("DescribeQuorum: %+v", dqr)
	}
	p := dqr.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderID != leader || p.LeaderEpoch < 1 || p.HighWatermark < 1 || len(p.CurrentVoters) != 3 || len(p.Observers) != 0 {
		t.Fatalf("DescribeQuorum partition: %+v", p)
	}
	for i, v := range p.CurrentVoters {
		if v.ReplicaID != int32(i) || v.LogEndOffset < 1 || v.LastFetchTimestamp <= 0 {
			t.Fatalf("voter %d: %+v", i, v)
		}
	}
	for i, n := range dqr.Nodes {
		if n.NodeID != int32(i) || len(n.Listeners) != 1 || n.Listeners[0].Name != "CONTROLLER" ||
			net.JoinHostPort(n.Listeners[0].Host, strconv.Itoa(int(n.Listeners[0].Port))) != nodes[i].addr {
			t.Fatalf("node %d: %+v", i, n)
		}
	}
	// Another partition of the metadata log is unknown.
	dq.Topics[0].Partitions[0].Partition = 1
	r, err = seed.Request(testCtx(t), dq)
	if err != nil {
		t.Fatal(err)
	}
	if code := r.(*kmsg.DescribeQuorumResponse).ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("DescribeQuorum of partition 1: error %d", code)
	}

	// Metadata is not served: the connection is closed.
	c.writeFrame(encodeRequest(kmsg.NewPtrMetadataRequest(), 3, "raw-test"))
	c.expectClosed()
}

// TestBrokerDescribeQuorum: brokers answer DescribeQuorum (kafka-metadata-quorum
// --bootstrap-server) from their own member of the quorum, and a broker
// listener still refuses DescribeCluster for controllers.
func TestBrokerDescribeQuorum(t *testing.T) {
	brokers, _ := startInCluster(t, 3)
	waitRegistered(t, brokers)
	adm := newClient(t, brokers[1].addr)
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	r, err := adm.Request(testCtx(t), dq)
	if err != nil {
		t.Fatal(err)
	}
	dqr := r.(*kmsg.DescribeQuorumResponse)
	leader, _ := brokers[1].ctl.Leader()
	if dqr.ErrorCode != 0 || len(dqr.Topics) != 1 {
		t.Fatalf("%+v", dqr)
	}
	p := dqr.Topics[0].Partitions[0]
	if p.LeaderID != leader || len(p.CurrentVoters) != 3 || p.HighWatermark < 1 {
		t.Fatalf("%+v (leader %d)", p, leader)
	}
	for i, v := range p.CurrentVoters {
		if v.ReplicaID != int32(i) || v.LogEndOffset < 1 {
			t.Fatalf("voter %d: %+v", i, v)
		}
	}
}

// TestSingleBrokerDescribeQuorum: a single broker is the only voter and
// the leader.
func TestSingleBrokerDescribeQuorum(t *testing.T) {
	addr, _, _ := startBroker(t, func(c *Config, _ *engine.Options) { c.NodeID = 4 })
	c := dialRaw(t, addr)
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.SetVersion(1)
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	resp := kmsg.NewPtrDescribeQuorumResponse()
	c.roundTrip(dq, 1, resp)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].LeaderID != 4 ||
		len(resp.Topics[0].Partitions[0].CurrentVoters) != 1 || resp.Topics[0].Partitions[0].CurrentVoters[0].ReplicaID != 4 {
		t.Fatalf("%+v", resp)
	}
}

// TestControllerListenerSASL: a SASL_PLAINTEXT controller listener
// authenticates first, as a broker's does: DescribeCluster before
// authenticating closes the connection; after PLAIN it is answered for
// the super user. With the authorizer, DescribeCluster needs ALTER on the
// cluster and DescribeQuorum DESCRIBE (CLUSTER_AUTHORIZATION_FAILED), as
// in Kafka's ControllerApis.
func TestControllerListenerSASL(t *testing.T) {
	authz, err := auth.Open(auth.Config{SuperUsers: []string{"User:admin"}}, filepath.Join(t.TempDir(), "acls.json"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var ctl *controller.Controller
	ctl, err = controller.New(controller.Config{
		NodeID: 0, Voters: map[int32]string{0: ln.Addr().String()}, DataDir: t.TempDir(), Listener: ln,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	kln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port := AdvertisedEndpoint("", 0, kln.Addr())
	ctl.SetKafkaEndpoints([]controller.Endpoint{{Name: "CONTROLLER", Host: host, Port: port}})
	s := New(Config{NodeID: 0, ClusterID: "strata-test-cluster", ControllerOnly: true, Authorizer: authz,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Cluster: ClusterConfig{Controller: ctl}}, nil)
	served := make(chan error, 1)
	go func() {
		served <- s.ServeListener(kln, Listener{Name: "CONTROLLER", Controller: true,
			SASL: &sasl.Config{Mechanisms: []string{sasl.Plain}, PlainUsers: map[string]string{"admin": "admin-secret", "alice": "alice-secret"}}})
	}()
	defer func() { s.Close(); <-served }()
	quorumLeader(t, []*ctlNode{{ctl: ctl}})

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.SetVersion(1)
	dc.EndpointType = endpointControllers
	anon := dialRaw(t, kln.Addr().String())
	anon.writeFrame(encodeRequest(dc, 1, "raw-test"))
	anon.expectClosed()

	c := dialRaw(t, kln.Addr().String())
	if ar := plainAuth(c, "admin", "admin-secret", 1, 1); ar.ErrorCode != 0 {
		t.Fatalf("PLAIN: error %d", ar.ErrorCode)
	}
	resp := kmsg.NewPtrDescribeClusterResponse()
	c.roundTrip(dc, 3, resp)
	if resp.ErrorCode != 0 || resp.ControllerID != 0 || len(resp.Brokers) != 1 ||
		net.JoinHostPort(resp.Brokers[0].Host, strconv.Itoa(int(resp.Brokers[0].Port))) != kln.Addr().String() {
		t.Fatalf("DescribeCluster after PLAIN: %+v", resp)
	}

	// alice: neither, then DESCRIBE on the cluster: DescribeQuorum only.
	a := dialRaw(t, kln.Addr().String())
	if ar := plainAuth(a, "alice", "alice-secret", 1, 1); ar.ErrorCode != 0 {
		t.Fatalf("PLAIN alice: error %d", ar.ErrorCode)
	}
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.SetVersion(2)
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	check := func(corr int32, wantDC, wantDQ int16) {
		t.Helper()
		dcr := kmsg.NewPtrDescribeClusterResponse()
		a.roundTrip(dc, corr, dcr)
		dqr := kmsg.NewPtrDescribeQuorumResponse()
		a.roundTrip(dq, corr+1, dqr)
		if dcr.ErrorCode != wantDC || dqr.ErrorCode != wantDQ {
			t.Fatalf("alice: DescribeCluster error %d (want %d), DescribeQuorum error %d (want %d)", dcr.ErrorCode, wantDC, dqr.ErrorCode, wantDQ)
		}
	}
	denied := kerr.ClusterAuthorizationFailed.Code
	check(10, denied, denied)
	if err := authz.Create([]auth.Binding{{ResourceType: auth.ResourceCluster, ResourceName: auth.ClusterName, PatternType: auth.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: auth.OpDescribe, Permission: auth.PermissionAllow}}); err != nil {
		t.Fatal(err)
	}
	check(20, denied, 0)
}

// TestControllerListenerSSL: an SSL controller listener (and a SASL_SSL
// one) serves franz-go seeded with it over TLS as the PLAINTEXT one does:
// DescribeCluster (EndpointType=2) names the three controllers on that
// listener and the active one, DescribeQuorum the leader and the three
// voters. A client without TLS gets no answer (the handshake fails and
// the connection is closed); on SASL_SSL, TLS without SASL is closed too.
func TestControllerListenerSSL(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "controller")
	nodes := startControllersOn(t, 3, Listener{Name: "CONTROLLER", Protocol: "SSL", Controller: true,
		TLS: &tls.Config{Certificates: []tls.Certificate{srv.TLS}}})
	leader := quorumLeader(t, nodes)
	follower := nodes[(leader+1)%3]
	clientTLS := tlstest.ClientConfig(ca, nil)

	seed := func(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Broker {
		t.Helper()
		return newClient(t, addr, opts...).SeedBrokers()[0]
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.EndpointType = endpointControllers
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}

	b := seed(t, follower.addr, kgo.DialTLSConfig(clientTLS))
	r, err := b.Request(testCtx(t), dc)
	if err != nil {
		t.Fatal(err)
	}
	dcr := r.(*kmsg.DescribeClusterResponse)
	if dcr.ErrorCode != 0 || dcr.EndpointType != endpointControllers || dcr.ClusterID != "strata-test-cluster" || dcr.ControllerID != leader || len(dcr.Brokers) != 3 {
		t.Fatalf("DescribeCluster controllers over TLS: %+v", dcr)
	}
	for i, br := range dcr.Brokers {
		if br.NodeID != int32(i) || net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port))) != nodes[i].addr {
			t.Fatalf("controller %d: %+v, listening on %s", i, br, nodes[i].addr)
		}
	}
	r, err = b.Request(testCtx(t), dq)
	if err != nil {
		t.Fatal(err)
	}
	dqr := r.(*kmsg.DescribeQuorumResponse)
	if dqr.ErrorCode != 0 || len(dqr.Topics) != 1 || len(dqr.Topics[0].Partitions) != 1 {
		t.Fatalf("DescribeQuorum over TLS: %+v", dqr)
	}
	if p := dqr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderID != leader || len(p.CurrentVoters) != 3 || p.HighWatermark < 1 {
		t.Fatalf("DescribeQuorum partition over TLS: %+v", p)
	}

	// Without TLS: the server reads no ClientHello and closes.
	ctx := testCtx(t)
	if _, err := seed(t, follower.addr).Request(ctx, dq); err == nil || ctx.Err() != nil {
		t.Fatalf("DescribeQuorum without TLS: error %v (context: %v), want the connection closed", err, ctx.Err())
	}
	raw := dialRaw(t, follower.addr)
	raw.writeFrame(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1, "raw-test"))
	raw.expectClosed()

	// SASL_SSL: TLS and PLAIN.
	sslNodes := startControllersOn(t, 1, Listener{Name: "CONTROLLER", Protocol: "SASL_SSL", Controller: true,
		TLS:  &tls.Config{Certificates: []tls.Certificate{srv.TLS}},
		SASL: &sasl.Config{Mechanisms: []string{sasl.Plain}, PlainUsers: map[string]string{"admin": "admin-secret"}}})
	quorumLeader(t, sslNodes)
	addr := sslNodes[0].addr
	b = seed(t, addr, kgo.DialTLSConfig(clientTLS), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if r, err = b.Request(testCtx(t), dq); err != nil {
		t.Fatal(err)
	}
	if dqr := r.(*kmsg.DescribeQuorumResponse); dqr.ErrorCode != 0 || len(dqr.Topics) != 1 ||
		dqr.Topics[0].Partitions[0].LeaderID != 0 || len(dqr.Topics[0].Partitions[0].CurrentVoters) != 1 {
		t.Fatalf("DescribeQuorum over SASL_SSL: %+v", dqr)
	}
	if r, err = b.Request(testCtx(t), dc); err != nil {
		t.Fatal(err)
	}
	if dcr := r.(*kmsg.DescribeClusterResponse); dcr.ErrorCode != 0 || len(dcr.Brokers) != 1 ||
		net.JoinHostPort(dcr.Brokers[0].Host, strconv.Itoa(int(dcr.Brokers[0].Port))) != addr {
		t.Fatalf("DescribeCluster over SASL_SSL: %+v", dcr)
	}
	ctx = testCtx(t)
	if _, err := seed(t, addr, kgo.DialTLSConfig(clientTLS)).Request(ctx, dq); err == nil || ctx.Err() != nil {
		t.Fatalf("DescribeQuorum over TLS without SASL: error %v (context: %v), want the connection closed", err, ctx.Err())
	}
	if _, err := seed(t, addr, kgo.DialTLSConfig(clientTLS), kgo.SASL(plain.Auth{User: "admin", Pass: "wrong"}.AsMechanism())).Request(ctx, dq); err == nil || ctx.Err() != nil {
		t.Fatalf("DescribeQuorum with a wrong password: error %v (context: %v)", err, ctx.Err())
	}
}
