package server

import (
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// startACLBroker starts a broker with the StandardAuthorizer's rules, its
// ACLs kept in aclPath, super user User:admin, and a SASL listener:
// PLAIN users admin and alice, SCRAM-SHA-512 user bob. It returns the
// SASL listener's address and the authorizer.
func startACLBroker(t *testing.T, aclPath string) (string, *auth.Authorizer) {
	t.Helper()
	a, err := auth.Open(auth.Config{SuperUsers: []string{"User:admin"}}, aclPath)
	if err != nil {
		t.Fatal(err)
	}
	store := sasl.NewStore()
	c, err := sasl.NewCredential(sasl.ScramSHA512, "bob-secret", sasl.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Set("bob", sasl.ScramSHA512, c); err != nil {
		t.Fatal(err)
	}
	_, s, _ := startBroker(t, func(c *Config, _ *engine.Options) {
		c.Scram = store
		c.Authorizer = a
	})
	l := Listener{Name: "SASL_PLAINTEXT", SASL: &sasl.Config{
		Mechanisms: []string{sasl.Plain, sasl.ScramSHA512},
		PlainUsers: map[string]string{"admin": "admin-secret", "alice": "alice-secret"},
		Scram:      store,
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(ln, l) }()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String(), a
}

func asPlain(user string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism())
}

func asBob() kgo.Opt {
	return kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism())
}

// produceErr produces one record to topic and returns its error.
func produceErr(t *testing.T, cl *kgo.Client, topic string) error {
	t.Helper()
	return cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

func createACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	rs, err := adm.CreateACLs(testCtx(t), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Err != nil {
			t.Fatalf("create ACL %+v: %v %s", r, r.Err, r.ErrMessage)
		}
	}
}

func TestACLProduceNeedsWrite(t *testing.T) {
	addr, _ := startACLBroker(t, filepath.Join(t.TempDir(), engine.AclsFile))
	ctx := testCtx(t)
	admin := newAdmin(t, addr, asPlain("admin"))
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}

	// No ACL at all: the topic is hidden and writes are refused.
	alice := newClient(t, addr, asPlain("alice"), kgo.DisableIdempotentWrite(), kgo.RecordRetries(1))
	if err := produceErr(t, alice, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// Describe only: Metadata answers, Produce refuses per partition.
	createACLs(t, admin, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpDescribe))
	// (Metadata now answers, so the refusal is Produce's.)
	if err := produceErr(t, alice, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce with Describe only: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if md, err := newAdmin(t, addr, asPlain("alice")).Metadata(ctx, "orders"); err != nil || md.Topics["orders"].Err != nil {
		t.Fatalf("metadata with Describe: %v %v", err, md.Topics["orders"].Err)
	}

	// Write: an idempotent producer (InitProducerId needs Write on some
	// topic) writes.
	createACLs(t, admin, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite))
	alice2 := newClient(t, addr, asPlain("alice"))
	if err := produceErr(t, alice2, "orders"); err != nil {
		t.Fatalf("produce with Write: %v", err)
	}
	// Another topic stays closed.
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "payments"); err != nil {
		t.Fatal(err)
	}
	if err := produceErr(t, alice, "payments"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to another topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// DeleteAcls removes the Write: refused again.
	dels, err := admin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").Operations(kadm.OpWrite))
	if err != nil {
		t.Fatal(err)
	}
	if len(dels) != 1 || dels[0].Err != nil || len(dels[0].Deleted) != 1 || dels[0].Deleted[0].Operation != kadm.OpWrite {
		t.Fatalf("DeleteACLs = %+v", dels)
	}
	if err := produceErr(t, alice, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce after DeleteAcls: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

func TestACLMetadataHidesTopics(t *testing.T) {
	addr, _ := startACLBroker(t, filepath.Join(t.TempDir(), engine.AclsFile))
	ctx := testCtx(t)
	admin := newAdmin(t, addr, asPlain("admin"))
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "public"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "secret"); err != nil {
		t.Fatal(err)
	}
	createACLs(t, admin, kadm.NewACLs().Allow("User:bob").Topics("public").Operations(kadm.OpRead))

	bobCl := newClient(t, addr, asBob())
	bob := kadm.NewClient(bobCl)
	tds, err := bob.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := tds.Names(); !slices.Equal(got, []string{"public"}) {
		t.Fatalf("bob lists %v, want [public]", got)
	}
	md := issue[*kmsg.MetadataResponse](t, bobCl, func() kmsg.Request {
		r := kmsg.NewPtrMetadataRequest()
		for _, n := range []string{"public", "secret", "unknown"} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			r.Topics = append(r.Topics, rt)
		}
		r.AllowAutoTopicCreation = true
		r.IncludeTopicAuthorizedOperations = true
		return r
	}())
	codes := map[string]int16{}
	for _, mt := range md.Topics {
		codes[*mt.Topic] = mt.ErrorCode
		if mt.ErrorCode != 0 && len(mt.Partitions) != 0 {
			t.Errorf("%s: refused with partitions", *mt.Topic)
		}
	}
	for _, mt := range md.Topics {
		// Read, and Describe which Read implies: nothing else.
		if *mt.Topic == "public" && mt.AuthorizedOperations != 1<<auth.OpRead|1<<auth.OpDescribe {
			t.Errorf("public: authorized operations %b, want Read and Describe", mt.AuthorizedOperations)
		}
	}
	dc := issue[*kmsg.DescribeClusterResponse](t, bobCl, func() kmsg.Request {
		r := kmsg.NewPtrDescribeClusterRequest()
		r.IncludeClusterAuthorizedOperations = true
		return r
	}())
	if dc.ClusterAuthorizedOperations != 0 {
		t.Errorf("bob's cluster operations %b, want none", dc.ClusterAuthorizedOperations)
	}
	want := map[string]int16{"public": 0, "secret": kerr.TopicAuthorizationFailed.Code, "unknown": kerr.TopicAuthorizationFailed.Code}
	for n, c := range want {
		if codes[n] != c {
			t.Errorf("metadata %s: code %d, want %d", n, codes[n], c)
		}
	}
	// The refused auto-creation created nothing.
	all, err := admin.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if all.Has("unknown") {
		t.Fatal("a principal without Create auto-created a topic")
	}
	if !all.Has("secret") || !all.Has("public") {
		t.Fatalf("the super user lists %v", all.Names())
	}
}

func TestACLSuperUserAndAdminChecks(t *testing.T) {
	addr, _ := startACLBroker(t, filepath.Join(t.TempDir(), engine.AclsFile))
	ctx := testCtx(t)
	// The super user does everything without an ACL: auto-creates,
	// produces, consumes in a group (commits), deletes topics.
	produceConsume(t, addr, "super", asPlain("admin"))
	admin := newAdmin(t, addr, asPlain("admin"))
	if _, err := admin.CommitOffsets(ctx, "g1", kadm.OffsetsFromRecords(kgo.Record{Topic: "super", Partition: 0, Offset: 1})); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.DeleteTopics(ctx, "super"); err != nil {
		t.Fatal(err)
	}

	// Alice may not manage ACLs, create or delete topics, or use a group.
	alice := newAdmin(t, addr, asPlain("alice"))
	rs, err := alice.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("x").Operations(kadm.OpAll))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || !errors.Is(rs[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice CreateAcls: %+v, want CLUSTER_AUTHORIZATION_FAILED", rs)
	}
	if ds, err := alice.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations()); err != nil || len(ds) != 1 ||
		!errors.Is(ds[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice DescribeAcls: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, ds)
	}
	if r, err := alice.CreateTopic(ctx, 1, 1, nil, "mine"); err == nil && !errors.Is(r.Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice CreateTopics: %v, want TOPIC_AUTHORIZATION_FAILED", r.Err)
	}
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "kept"); err != nil {
		t.Fatal(err)
	}
	drs, err := alice.DeleteTopics(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if r := drs["kept"]; !errors.Is(r.Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice DeleteTopics: %v, want TOPIC_AUTHORIZATION_FAILED", r.Err)
	}
	createACLs(t, admin, kadm.NewACLs().Allow("User:alice").Topics("kept").Operations(kadm.OpRead))
	fo, err := alice.FetchOffsets(ctx, "g1")
	if !errors.Is(err, kerr.GroupAuthorizationFailed) && !errors.Is(fo.Error(), kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice OffsetFetch without group ACL: %v / %v, want GROUP_AUTHORIZATION_FAILED", err, fo.Error())
	}
	cr, err := alice.CommitOffsets(ctx, "g1", kadm.OffsetsFromRecords(kgo.Record{Topic: "kept", Partition: 0, Offset: 0}))
	if err == nil {
		err = cr.Error()
	}
	if !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice OffsetCommit without group ACL: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	// With Read on the group a consumer in the group reads and commits.
	createACLs(t, admin, kadm.NewACLs().Allow("User:alice").Groups("g1").Operations(kadm.OpRead))
	cr, err = alice.CommitOffsets(ctx, "g1", kadm.OffsetsFromRecords(kgo.Record{Topic: "kept", Partition: 0, Offset: 0}))
	if err == nil {
		err = cr.Error()
	}
	if err != nil {
		t.Fatalf("alice OffsetCommit with ACLs: %v", err)
	}
	dg := issue[*kmsg.DescribeGroupsResponse](t, newClient(t, addr, asPlain("alice")), func() kmsg.Request {
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups, r.IncludeAuthorizedOperations = []string{"g1"}, true
		return r
	}())
	if g := dg.Groups[0]; g.ErrorCode != 0 || g.AuthorizedOperations != 1<<auth.OpRead|1<<auth.OpDescribe {
		t.Fatalf("alice DescribeGroups g1: code %d, operations %b, want Read and Describe", g.ErrorCode, g.AuthorizedOperations)
	}
	// A transactional id without Write is refused at InitProducerId.
	txn := newClient(t, addr, asPlain("alice"), kgo.TransactionalID("tx-alice"))
	err = txn.BeginTransaction() // franz-go initializes the producer id here
	if err == nil {
		err = txn.ProduceSync(ctx, &kgo.Record{Topic: "kept", Value: []byte("v")}).FirstErr()
	}
	if err == nil || !strings.Contains(err.Error(), kerr.TransactionalIDAuthorizationFailed.Message) { // franz-go wraps it in its fatal producer id error
		t.Fatalf("transactional produce without Write on the id: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
}

func TestACLsSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), engine.AclsFile)
	t.Run("create", func(t *testing.T) {
		addr, _ := startACLBroker(t, path)
		admin := newAdmin(t, addr, asPlain("admin"))
		createACLs(t, admin, kadm.NewACLs().Allow("User:alice").Topics("logs-").
			ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite, kadm.OpCreate))
	})
	t.Run("after restart", func(t *testing.T) {
		addr, a := startACLBroker(t, path)
		if n := len(a.All()); n != 2 {
			t.Fatalf("%d ACLs after restart, want 2", n)
		}
		admin := newAdmin(t, addr, asPlain("admin"))
		ds, err := admin.DescribeACLs(testCtx(t), kadm.NewACLs().Topics("logs-app").ResourcePatternType(kadm.ACLPatternMatch).
			Allow().AllowHosts().Operations())
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || len(ds[0].Described) != 2 || ds[0].Described[0].Pattern != kadm.ACLPatternPrefixed || ds[0].Described[0].Name != "logs-" {
			t.Fatalf("DescribeAcls MATCH logs-app = %+v", ds)
		}
		// Alice auto-creates and writes a topic under the prefix.
		alice := newClient(t, addr, asPlain("alice"), kgo.AllowAutoTopicCreation())
		if err := produceErr(t, alice, "logs-app"); err != nil {
			t.Fatalf("produce under the prefix after restart: %v", err)
		}
	})
}

func TestACLApisWithoutAuthorizer(t *testing.T) {
	addr, _, _ := startBroker(t)
	adm := newAdmin(t, addr)
	rs, err := adm.CreateACLs(testCtx(t), kadm.NewACLs().Allow("User:alice").Topics("x").Operations(kadm.OpRead))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || !errors.Is(rs[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("CreateAcls without an authorizer: %+v, want SECURITY_DISABLED", rs)
	}
	// And everything else is allowed, as before.
	produceConsume(t, addr, "open")
}

// aclCase is one request of the authorization matrix and where its
// answer's authorization error is.
type aclCase struct {
	name string
	req  func() kmsg.Request
	code func(kmsg.Response) int16
	want int16 // the error a principal without ACLs gets
}

func aclMatrix() []aclCase {
	tp := func(codes ...int16) int16 { // the first non-zero code, else 0
		for _, c := range codes {
			if c != 0 {
				return c
			}
		}
		return 0
	}
	taf, gaf, caf, tiaf := kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code,
		kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code
	return []aclCase{
		{"ListOffsets", func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = "m"
			p := kmsg.NewListOffsetsRequestTopicPartition()
			t.Partitions = append(t.Partitions, p)
			r.Topics = append(r.Topics, t)
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode }, taf},
		{"DeleteRecords", func() kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			t := kmsg.NewDeleteRecordsRequestTopic()
			t.Topic = "m"
			t.Partitions = append(t.Partitions, kmsg.DeleteRecordsRequestTopicPartition{Partition: 0, Offset: 0})
			r.Topics = append(r.Topics, t)
			r.TimeoutMillis = 5000
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode }, taf},
		{"CreatePartitions", func() kmsg.Request {
			r := kmsg.NewPtrCreatePartitionsRequest()
			t := kmsg.NewCreatePartitionsRequestTopic()
			t.Topic, t.Count = "m", 2
			r.Topics = append(r.Topics, t)
			r.TimeoutMillis, r.ValidateOnly = 5000, true
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode }, taf},
		{"DescribeConfigs topic", func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "m"
			r.Resources = append(r.Resources, rr)
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode }, taf},
		{"DescribeConfigs broker", func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
			r.Resources = append(r.Resources, rr)
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode }, caf},
		{"IncrementalAlterConfigs", func() kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "m"
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "retention.ms", kmsg.StringPtr("100000")
			rr.Configs = append(rr.Configs, c)
			r.Resources = append(r.Resources, rr)
			r.ValidateOnly = true
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode }, taf},
		{"DescribeGroups", func() kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{"mg"}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode }, gaf},
		{"DeleteGroups", func() kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{"mg"}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode }, gaf},
		{"FindCoordinator group", func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKey, r.CoordinatorKeys = "mg", []string{"mg"}
			return r
		}, func(r kmsg.Response) int16 {
			fr := r.(*kmsg.FindCoordinatorResponse)
			if len(fr.Coordinators) > 0 {
				return fr.Coordinators[0].ErrorCode
			}
			return fr.ErrorCode
		}, gaf},
		{"FindCoordinator txn", func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorType = 1
			r.CoordinatorKey, r.CoordinatorKeys = "mt", []string{"mt"}
			return r
		}, func(r kmsg.Response) int16 {
			fr := r.(*kmsg.FindCoordinatorResponse)
			if len(fr.Coordinators) > 0 {
				return fr.Coordinators[0].ErrorCode
			}
			return fr.ErrorCode
		}, tiaf},
		{"OffsetDelete", func() kmsg.Request {
			r := kmsg.NewPtrOffsetDeleteRequest()
			r.Group = "mg"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetDeleteResponse).ErrorCode }, gaf},
		{"InitProducerId idempotent", func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionTimeoutMillis = -1
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, caf},
		{"InitProducerId transactional", func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID, r.TransactionTimeoutMillis = kmsg.StringPtr("mt"), 60000
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, tiaf},
		{"EndTxn", func() kmsg.Request {
			r := kmsg.NewPtrEndTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch = "mt", 1, 0
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode }, tiaf},
		{"AddOffsetsToTxn", func() kmsg.Request {
			r := kmsg.NewPtrAddOffsetsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = "mt", 1, 0, "mg"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode }, tiaf},
		{"DescribeTransactions", func() kmsg.Request {
			r := kmsg.NewPtrDescribeTransactionsRequest()
			r.TransactionalIDs = []string{"mt"}
			return r
		}, func(r kmsg.Response) int16 {
			return r.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
		}, tiaf},
		{"DescribeProducers", func() kmsg.Request {
			r := kmsg.NewPtrDescribeProducersRequest()
			t := kmsg.NewDescribeProducersRequestTopic()
			t.Topic, t.Partitions = "m", []int32{0}
			r.Topics = append(r.Topics, t)
			return r
		}, func(r kmsg.Response) int16 {
			return r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
		}, taf},
		{"OffsetForLeaderEpoch", func() kmsg.Request {
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			r.ReplicaID = -1
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = "m"
			p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			p.CurrentLeaderEpoch, p.LeaderEpoch = -1, 0
			t.Partitions = append(t.Partitions, p)
			r.Topics = append(r.Topics, t)
			return r
		}, func(r kmsg.Response) int16 {
			return r.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
		}, taf},
		{"WriteTxnMarkers", func() kmsg.Request {
			r := kmsg.NewPtrWriteTxnMarkersRequest()
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID, m.ProducerEpoch, m.Committed = 1, 0, false
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic, t.Partitions = "m", []int32{0}
			m.Topics = append(m.Topics, t)
			r.Markers = append(r.Markers, m)
			return r
		}, func(r kmsg.Response) int16 {
			return r.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
		}, caf},
		{"Fetch as a follower", func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.ReplicaID, r.MaxBytes, r.SessionEpoch = 1, 1<<20, -1
			r.ReplicaState.ID = 1
			t := kmsg.NewFetchRequestTopic()
			t.Topic = "m"
			p := kmsg.NewFetchRequestTopicPartition()
			p.PartitionMaxBytes, p.CurrentLeaderEpoch = 1<<20, -1
			t.Partitions = append(t.Partitions, p)
			r.Topics = append(r.Topics, t)
			return r
		}, nil, taf}, // answered below: the fetch names its topic by id
		{"DescribeUserScramCredentials", func() kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() },
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode }, caf},
		{"AlterUserScramCredentials", func() kmsg.Request {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			d.Name, d.Mechanism = "bob", 2
			r.Deletions = append(r.Deletions, d)
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode }, caf},
		{"ElectLeaders", func() kmsg.Request {
			r := kmsg.NewPtrElectLeadersRequest()
			r.TimeoutMillis = 5000
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ElectLeadersResponse).ErrorCode }, caf},
		{"ListPartitionReassignments", func() kmsg.Request {
			r := kmsg.NewPtrListPartitionReassignmentsRequest()
			r.TimeoutMillis = 5000
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode }, caf},
		{"DescribeLogDirs", func() kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() },
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeLogDirsResponse).ErrorCode }, caf},
		{"DeleteTopics", func() kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.TopicNames = []string{"m"}
			t := kmsg.NewDeleteTopicsRequestTopic()
			t.Topic = kmsg.StringPtr("m")
			r.Topics = append(r.Topics, t)
			r.TimeoutMillis = 5000
			return r
		}, func(r kmsg.Response) int16 { return tp(r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode) }, taf},
	}
}

// TestACLMatrix sends each checked request as a principal without ACLs
// (refused with Kafka's error) and as the super user (never refused for
// authorization).
func TestACLMatrix(t *testing.T) {
	addr, _ := startACLBroker(t, filepath.Join(t.TempDir(), engine.AclsFile))
	ctx := testCtx(t)
	admin := newAdmin(t, addr, asPlain("admin"))
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "m"); err != nil {
		t.Fatal(err)
	}
	authCodes := map[int16]bool{kerr.TopicAuthorizationFailed.Code: true, kerr.GroupAuthorizationFailed.Code: true,
		kerr.ClusterAuthorizationFailed.Code: true, kerr.TransactionalIDAuthorizationFailed.Code: true}
	alice := newClient(t, addr, asPlain("alice"))
	super := newClient(t, addr, asPlain("admin"))
	var topicID [16]byte
	md, err := admin.Metadata(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	topicID = md.Topics["m"].ID
	for _, c := range aclMatrix() {
		for _, who := range []struct {
			name string
			cl   *kgo.Client
		}{{"alice", alice}, {"admin", super}} {
			req := c.req()
			if f, ok := req.(*kmsg.FetchRequest); ok {
				f.Topics[0].TopicID = topicID
			}
			resp, err := who.cl.SeedBrokers()[0].Request(ctx, req)
			if err != nil {
				t.Fatalf("%s as %s: %v", c.name, who.name, err)
			}
			var code int16
			if c.code != nil {
				code = c.code(resp)
			} else {
				code = resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
			}
			switch {
			case who.name == "alice" && code != c.want:
				t.Errorf("%s without ACLs: code %d, want %d", c.name, code, c.want)
			case who.name == "admin" && authCodes[code]:
				t.Errorf("%s as the super user: refused with %d", c.name, code)
			}
		}
	}
}

// TestACLInternalTopicsNeedClusterAction: with an authorizer, writing to an
// internal topic is an authorization (ClusterAction on the cluster, which
// the brokers' principals hold), not the client id __admin_client, which
// anyone can set: alice with Write on __consumer_offsets and that client id
// is refused, and allowed once she holds ClusterAction; the super user is
// allowed with any client id.
func TestACLInternalTopicsNeedClusterAction(t *testing.T) {
	addr, _ := startACLBroker(t, filepath.Join(t.TempDir(), engine.AclsFile))
	ctx := testCtx(t)
	admin := newAdmin(t, addr, asPlain("admin"))
	// A committed offset makes the group coordinator create __consumer_offsets.
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.AddOffset("orders", 0, 0, -1)
	if _, err := admin.CommitOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}
	createACLs(t, admin, kadm.NewACLs().Allow("User:alice").Topics("__consumer_offsets").Operations(kadm.OpWrite, kadm.OpDescribe))
	produce := func(cl *kgo.Client) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "__consumer_offsets", Partition: 0, Key: []byte("k"), Value: []byte("v")}).FirstErr()
	}
	opts := []kgo.Opt{kgo.ClientID("__admin_client"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DisableIdempotentWrite(), kgo.RecordRetries(1)}
	alice := newClient(t, addr, append([]kgo.Opt{asPlain("alice")}, opts...)...)
	if err := produce(alice); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("alice (Write, client id __admin_client) to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	createACLs(t, admin, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpClusterAction))
	alice2 := newClient(t, addr, append([]kgo.Opt{asPlain("alice")}, opts[1:]...)...) // any client id
	if err := produce(alice2); err != nil {
		t.Fatalf("alice with ClusterAction: %v", err)
	}
	super := newClient(t, addr, append([]kgo.Opt{asPlain("admin")}, opts[1:]...)...)
	if err := produce(super); err != nil {
		t.Fatalf("super user: %v", err)
	}
}
