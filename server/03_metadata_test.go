package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func noAutoCreate(c *Config, _ *engine.Options) { c.AutoCreateTopics = false }

func mustCreate(t *testing.T, eng *engine.Engine, name string, partitions int32) *engine.Topic {
	t.Helper()
	tp, err := eng.CreateTopic(name, partitions, nil)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return tp
}

// metadata sends a Metadata request at version v on a raw connection.
func metadata(t *testing.T, c *rawConn, v int16, topics []kmsg.MetadataRequestTopic, allowAuto bool) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(v)
	req.Topics = topics
	req.AllowAutoTopicCreation = allowAuto
	resp := kmsg.NewPtrMetadataResponse()
	c.roundTrip(req, int32(v)+100, resp)
	return resp
}

func names(ns ...string) []kmsg.MetadataRequestTopic {
	out := []kmsg.MetadataRequestTopic{}
	for _, n := range ns {
		out = append(out, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(n)})
	}
	return out
}

// checkTopic asserts mt describes tp as led by node with every partition.
func checkTopic(t *testing.T, mt kmsg.MetadataResponseTopic, tp *engine.Topic, node int32, version int16) {
	t.Helper()
	if mt.ErrorCode != 0 || mt.Topic == nil || *mt.Topic != tp.Name() {
		t.Fatalf("topic entry %+v for %s", mt, tp.Name())
	}
	if version >= 10 && mt.TopicID != tp.ID() {
		t.Fatalf("%s: topic id %x, engine says %x", tp.Name(), mt.TopicID, tp.ID())
	}
	if int32(len(mt.Partitions)) != tp.Partitions() {
		t.Fatalf("%s: %d partitions, want %d", tp.Name(), len(mt.Partitions), tp.Partitions())
	}
	if version >= 8 && mt.AuthorizedOperations != authorizedOpsUnset {
		t.Fatalf("%s: authorized operations %d without being asked", tp.Name(), mt.AuthorizedOperations)
	}
	for i, p := range mt.Partitions {
		if p.ErrorCode != 0 || p.Partition != int32(i) || p.Leader != node ||
			len(p.Replicas) != 1 || p.Replicas[0] != node || len(p.ISR) != 1 || p.ISR[0] != node || len(p.OfflineReplicas) != 0 {
			t.Fatalf("%s partition %d: %+v", tp.Name(), i, p)
		}
		if version >= 7 && p.LeaderEpoch != tp.Partition(int32(i)).LeaderEpoch() {
			t.Fatalf("%s partition %d: leader epoch %d", tp.Name(), i, p.LeaderEpoch)
		}
	}
}

// TestMetadataEveryVersion asks for all topics, some topics and none at
// every version, with a non-zero node id and an advertised address.
func TestMetadataEveryVersion(t *testing.T) {
	const node = 7
	addr, _, eng := startBroker(t, noAutoCreate, func(c *Config, _ *engine.Options) {
		c.NodeID = node
		c.AdvertisedHost, c.AdvertisedPort = "broker.example", 19092
	})
	b := mustCreate(t, eng, "bravo", 3)
	a := mustCreate(t, eng, "alpha", 1)
	c := dialRaw(t, addr)
	for v := int16(0); v <= 12; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			check := func(resp *kmsg.MetadataResponse, want ...*engine.Topic) {
				t.Helper()
				if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != node ||
					resp.Brokers[0].Host != "broker.example" || resp.Brokers[0].Port != 19092 || resp.Brokers[0].Rack != nil {
					t.Fatalf("brokers %+v", resp.Brokers)
				}
				if v >= 1 && resp.ControllerID != node {
					t.Fatalf("controller %d", resp.ControllerID)
				}
				if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != "strata-test-cluster") {
					t.Fatalf("cluster id %v", resp.ClusterID)
				}
				if len(resp.Topics) != len(want) {
					t.Fatalf("%d topics, want %d: %+v", len(resp.Topics), len(want), resp.Topics)
				}
				for i, tp := range want {
					checkTopic(t, resp.Topics[i], tp, node, v)
				}
			}
			if v == 0 {
				check(metadata(t, c, v, []kmsg.MetadataRequestTopic{}, false), a, b) // v0: empty = all
			} else {
				check(metadata(t, c, v, nil, false), a, b) // null = all, sorted by name
				check(metadata(t, c, v, []kmsg.MetadataRequestTopic{}, false))
			}
			check(metadata(t, c, v, names("bravo"), false), b)
			check(metadata(t, c, v, names("bravo", "alpha", "bravo"), false), b, a) // request order, once each

			resp := metadata(t, c, v, names("alpha", "missing", "bad/name"), false)
			if len(resp.Topics) != 3 {
				t.Fatalf("%d topics", len(resp.Topics))
			}
			checkTopic(t, resp.Topics[0], a, node, v)
			if e := resp.Topics[1]; e.ErrorCode != kerr.UnknownTopicOrPartition.Code || *e.Topic != "missing" || len(e.Partitions) != 0 {
				t.Fatalf("missing topic: %+v", e)
			}
			if e := resp.Topics[2]; e.ErrorCode != kerr.InvalidTopicException.Code || *e.Topic != "bad/name" {
				t.Fatalf("invalid topic: %+v", e)
			}
			if eng.Topic("missing") != nil {
				t.Fatal("topic created with auto-create off")
			}
		})
	}
}

func TestMetadataTopicByID(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := mustCreate(t, eng, "by-id", 2)
	c := dialRaw(t, addr)
	unknown := [16]byte{9, 9, 9}
	resp := metadata(t, c, 12, []kmsg.MetadataRequestTopic{{TopicID: tp.ID()}, {TopicID: unknown}}, true)
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics", len(resp.Topics))
	}
	checkTopic(t, resp.Topics[0], tp, 0, 12)
	if e := resp.Topics[1]; e.ErrorCode != kerr.UnknownTopicID.Code || e.TopicID != unknown || e.Topic != nil {
		t.Fatalf("unknown id: %+v", e)
	}
}

func TestMetadataAuthorizedOperations(t *testing.T) {
	addr, _, eng := startBroker(t)
	mustCreate(t, eng, "ops", 1)
	c := dialRaw(t, addr)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(10)
	req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = true, true
	resp := kmsg.NewPtrMetadataResponse()
	c.roundTrip(req, 1, resp)
	if resp.AuthorizedOperations != clusterAuthorizedOps || len(resp.Topics) != 1 || resp.Topics[0].AuthorizedOperations != topicAuthorizedOps {
		t.Fatalf("cluster ops %b, topics %+v", resp.AuthorizedOperations, resp.Topics)
	}
	if topicAuthorizedOps&(1<<aclRead) == 0 || topicAuthorizedOps&(1<<aclWrite) == 0 || topicAuthorizedOps&1 != 0 {
		t.Fatalf("topic ops %b", topicAuthorizedOps)
	}
}

// TestMetadataAutoCreate: v4+ creates only when the request allows it,
// v0..v3 whenever the broker does; the new topic gets num.partitions. The
// answer that creates it says LEADER_NOT_AVAILABLE with no partitions, as
// Kafka's does; the next request describes it, ready, with no error.
func TestMetadataAutoCreate(t *testing.T) {
	addr, _, eng := startBroker(t, func(c *Config, _ *engine.Options) { c.NumPartitions = 3 })
	c := dialRaw(t, addr)

	resp := metadata(t, c, 12, names("auto-no"), false)
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || eng.Topic("auto-no") != nil {
		t.Fatalf("created although the request did not allow it: %+v", resp.Topics[0])
	}
	for _, v := range []int16{12, 4, 3, 0} {
		name := "auto-v" + strconv.Itoa(int(v))
		resp := metadata(t, c, v, names(name), true)
		tp := eng.Topic(name)
		if tp == nil || tp.Partitions() != 3 {
			t.Fatalf("v%d: topic not auto-created with 3 partitions", v)
		}
		if mt := resp.Topics[0]; len(resp.Topics) != 1 || mt.ErrorCode != kerr.LeaderNotAvailable.Code ||
			len(mt.Partitions) != 0 || mt.Topic == nil || *mt.Topic != name {
			t.Fatalf("v%d: the creating answer is %+v, want LEADER_NOT_AVAILABLE without partitions", v, resp.Topics)
		}
		resp = metadata(t, c, v, names(name), true)
		checkTopic(t, resp.Topics[0], tp, 0, v)
	}
	resp = metadata(t, c, 12, names("bad name"), true)
	if resp.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("invalid name: %+v", resp.Topics[0])
	}
}

// TestClusterMetadataAutoCreate: in cluster mode too, the answer that
// creates a topic through the controller says LEADER_NOT_AVAILABLE with no
// partitions (Kafka's), and the next request shows its leader.
func TestClusterMetadataAutoCreate(t *testing.T) {
	brokers, _ := startInCluster(t, 1)
	waitRegistered(t, brokers)
	c := dialRaw(t, brokers[0].addr)
	resp := metadata(t, c, 12, names("auto-cluster"), true)
	if mt := resp.Topics[0]; len(resp.Topics) != 1 || mt.ErrorCode != kerr.LeaderNotAvailable.Code || len(mt.Partitions) != 0 {
		t.Fatalf("the creating answer is %+v, want LEADER_NOT_AVAILABLE without partitions", resp.Topics)
	}
	resp = metadata(t, c, 12, names("auto-cluster"), true)
	if mt := resp.Topics[0]; mt.ErrorCode != 0 || len(mt.Partitions) != 1 || mt.Partitions[0].Leader != 0 {
		t.Fatalf("after creation %+v, want one partition led by broker 0", resp.Topics)
	}
}

// TestFranzGoProducesToAutoCreatedTopic: a kgo producer's metadata request
// creates the topic and the record lands in it.
func TestFranzGoProducesToAutoCreatedTopic(t *testing.T) {
	addr, _, eng := startBroker(t)
	cl := newClient(t, addr, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("fresh"))
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tp := eng.Topic("fresh")
	if tp == nil {
		t.Fatal("topic not created")
	}
	if hw, err := tp.HighWatermark(0); err != nil || hw != 1 {
		t.Fatalf("high watermark %d, %v", hw, err)
	}
}

func TestMetadataThroughKadm(t *testing.T) {
	addr, _, eng := startBroker(t, noAutoCreate, func(c *Config, _ *engine.Options) { c.NodeID = 3 })
	tp := mustCreate(t, eng, "kadm-topic", 4)
	adm := newAdmin(t, addr)
	md, err := adm.Metadata(context.Background(), "kadm-topic", "kadm-missing")
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster != "strata-test-cluster" || md.Controller != 3 || len(md.Brokers) != 1 || md.Brokers[0].NodeID != 3 {
		t.Fatalf("cluster %+v", md)
	}
	d := md.Topics["kadm-topic"]
	if d.Err != nil || d.ID != tp.ID() || len(d.Partitions) != 4 || d.Partitions[2].Leader != 3 {
		t.Fatalf("topic %+v", d)
	}
	if !errors.Is(md.Topics["kadm-missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("missing topic: %v", md.Topics["kadm-missing"].Err)
	}
}

// TestMetadataMarksInternalTopics: __consumer_offsets (created by the group
// coordinator) is reported internal, as Kafka does; an ordinary topic is not.
func TestMetadataMarksInternalTopics(t *testing.T) {
	addr, _, eng := startBroker(t, noAutoCreate)
	mustCreate(t, eng, "plain", 1)
	if eng.Topic("__consumer_offsets") == nil {
		mustCreate(t, eng, "__consumer_offsets", 1)
	}
	c := dialRaw(t, addr)
	resp := metadata(t, c, 12, nil, false)
	seen := map[string]bool{}
	for _, mt := range resp.Topics {
		name := *mt.Topic
		seen[name] = true
		if want := name == "__consumer_offsets"; mt.IsInternal != want {
			t.Errorf("%s: IsInternal = %v, want %v", name, mt.IsInternal, want)
		}
	}
	if !seen["plain"] || !seen["__consumer_offsets"] {
		t.Fatalf("metadata listed %v", seen)
	}
}
