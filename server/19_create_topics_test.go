package server

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func createReq(v int16, validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(v)
	req.TimeoutMillis = 30000
	req.ValidateOnly = validateOnly
	req.Topics = topics
	return req
}

func newTopic(name string, partitions int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	for i := 0; i+1 < len(configs); i += 2 {
		t.Configs = append(t.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: configs[i], Value: kmsg.StringPtr(configs[i+1])})
	}
	return t
}

func createTopics(t *testing.T, c *rawConn, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	t.Helper()
	resp := kmsg.NewPtrCreateTopicsResponse()
	c.roundTrip(req, 19, resp)
	if len(resp.Topics) == 0 && len(req.Topics) > 0 {
		t.Fatal("empty CreateTopics response")
	}
	return resp
}

// TestCreateTopicsEveryVersion creates one topic per version with a config
// override and checks the engine and the version-specific response fields.
func TestCreateTopicsEveryVersion(t *testing.T) {
	addr, _, eng := startBroker(t, func(c *Config, _ *engine.Options) { c.NumPartitions = 2 })
	c := dialRaw(t, addr)
	for v := int16(0); v <= 7; v++ {
		name := fmt.Sprintf("created-v%d", v)
		resp := createTopics(t, c, createReq(v, false, newTopic(name, -1, -1, "retention.ms", "1234")))
		tp := eng.Topic(name)
		if tp == nil || tp.Partitions() != 2 || tp.Config().RetentionMs != 1234 {
			t.Fatalf("v%d: topic not created as asked", v)
		}
		r := resp.Topics[0]
		if r.Topic != name || r.ErrorCode != 0 {
			t.Fatalf("v%d: %+v", v, r)
		}
		if v >= 5 {
			if r.NumPartitions != 2 || r.ReplicationFactor != 1 {
				t.Fatalf("v%d: echoes %d partitions, rf %d", v, r.NumPartitions, r.ReplicationFactor)
			}
			got := map[string]kmsg.CreateTopicsResponseTopicConfig{}
			for _, cfg := range r.Configs {
				got[cfg.Name] = cfg
			}
			for _, k := range engine.TopicKeys() {
				if _, ok := got[k]; !ok {
					t.Fatalf("v%d: config %s missing from the response", v, k)
				}
			}
			if rc := got["retention.ms"]; *rc.Value != "1234" || rc.Source != int8(kmsg.ConfigSourceDynamicTopicConfig) {
				t.Fatalf("v%d: retention.ms %+v", v, rc)
			}
			if sb := got["segment.bytes"]; *sb.Value != "1073741824" || sb.Source != int8(kmsg.ConfigSourceDefaultConfig) {
				t.Fatalf("v%d: segment.bytes %+v", v, sb)
			}
		}
		if v >= 7 && r.TopicID != tp.ID() {
			t.Fatalf("v%d: topic id %x, engine %x", v, r.TopicID, tp.ID())
		}
	}
}

// TestCreateTopicsRefusals: each bad entry gets its own error, and a good
// entry in the same request is still created.
func TestCreateTopicsRefusals(t *testing.T) {
	addr, _, eng := startBroker(t)
	mustCreate(t, eng, "exists", 1)
	c := dialRaw(t, addr)

	assign := func(name string, replicas ...[]int32) kmsg.CreateTopicsRequestTopic {
		tp := newTopic(name, -1, -1)
		for p, r := range replicas {
			tp.ReplicaAssignment = append(tp.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(p), Replicas: r})
		}
		return tp
	}
	nullValue := newTopic("null-config", 1, 1)
	nullValue.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms"}}
	bothCounts := assign("both", []int32{0})
	bothCounts.NumPartitions = 1
	gap := assign("gap", []int32{0}, []int32{0})
	gap.ReplicaAssignment[1].Partition = 5

	cases := []struct {
		topic kmsg.CreateTopicsRequestTopic
		want  *kerr.Error
		msg   string
	}{
		{newTopic("ok-one", 3, 1), nil, ""},
		{newTopic("exists", 1, 1), kerr.TopicAlreadyExists, "already exists"},
		{newTopic("rf3", 1, 3), kerr.InvalidReplicationFactor, "single-broker"},
		{newTopic("rf0", 1, 0), kerr.InvalidReplicationFactor, ""},
		{newTopic("p0", 0, 1), kerr.InvalidPartitions, ""},
		{newTopic("p-big", 1<<20, 1), kerr.InvalidPartitions, ""},
		{newTopic("bad/name", 1, 1), kerr.InvalidTopicException, ""},
		{newTopic("..", 1, 1), kerr.InvalidTopicException, ""},
		{newTopic(strings.Repeat("x", 250), 1, 1), kerr.InvalidTopicException, ""},
		{newTopic("bad-config", 1, 1, "retention.ms", "soon"), kerr.InvalidConfig, "retention.ms"},
		{newTopic("unknown-config", 1, 1, "no.such.key", "1"), kerr.InvalidConfig, "no.such.key"},
		{newTopic("dup-config", 1, 1, "retention.ms", "1", "retention.ms", "2"), kerr.InvalidRequest, ""},
		{nullValue, kerr.InvalidConfig, ""},
		{assign("assigned", []int32{0}, []int32{0}), nil, ""},
		{assign("other-broker", []int32{0}, []int32{1}), kerr.InvalidReplicaAssignment, "one broker"},
		{assign("two-replicas", []int32{0, 0}), kerr.InvalidReplicaAssignment, ""},
		{assign("no-replicas", []int32{}), kerr.InvalidReplicaAssignment, ""},
		{gap, kerr.InvalidReplicaAssignment, ""},
		{bothCounts, kerr.InvalidRequest, ""},
	}
	var topics []kmsg.CreateTopicsRequestTopic
	for _, tc := range cases {
		topics = append(topics, tc.topic)
	}
	resp := createTopics(t, c, createReq(7, false, topics...))
	if len(resp.Topics) != len(cases) {
		t.Fatalf("%d answers for %d topics", len(resp.Topics), len(cases))
	}
	for i, tc := range cases {
		r := resp.Topics[i]
		if r.Topic != tc.topic.Topic {
			t.Fatalf("answer %d is for %q, want %q", i, r.Topic, tc.topic.Topic)
		}
		if r.ErrorCode != codeOf(tc.want) {
			t.Errorf("%s: %v, want %v (%v)", tc.topic.Topic, kerr.ErrorForCode(r.ErrorCode), tc.want, r.ErrorMessage)
			continue
		}
		if tc.want == nil {
			tp := eng.Topic(tc.topic.Topic)
			if tp == nil || r.TopicID != tp.ID() || r.NumPartitions != tp.Partitions() {
				t.Errorf("%s: not created as answered (%+v)", tc.topic.Topic, r)
			}
			continue
		}
		if r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, tc.msg) {
			t.Errorf("%s: message %v does not mention %q", tc.topic.Topic, r.ErrorMessage, tc.msg)
		}
		if r.NumPartitions != -1 || r.ReplicationFactor != -1 || len(r.Configs) != 0 {
			t.Errorf("%s: failure carries layout %+v", tc.topic.Topic, r)
		}
		if tc.topic.Topic != "exists" && eng.Topic(tc.topic.Topic) != nil {
			t.Errorf("%s: created despite %v", tc.topic.Topic, tc.want)
		}
	}
	if tp := eng.Topic("assigned"); tp == nil || tp.Partitions() != 2 {
		t.Fatal("manual assignment did not create 2 partitions")
	}
}

func TestCreateTopicsDuplicateInRequest(t *testing.T) {
	addr, _, eng := startBroker(t)
	c := dialRaw(t, addr)
	resp := createTopics(t, c, createReq(7, false, newTopic("twice", 1, 1), newTopic("once", 1, 1), newTopic("twice", 2, 1)))
	if len(resp.Topics) != 2 {
		t.Fatalf("%d answers, want one per distinct name", len(resp.Topics))
	}
	if r := resp.Topics[0]; r.Topic != "twice" || r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("duplicate: %+v", r)
	}
	if r := resp.Topics[1]; r.Topic != "once" || r.ErrorCode != 0 {
		t.Fatalf("single: %+v", r)
	}
	if eng.Topic("twice") != nil || eng.Topic("once") == nil {
		t.Fatal("engine state does not match the answers")
	}
}

func TestCreateTopicsValidateOnly(t *testing.T) {
	addr, _, eng := startBroker(t)
	c := dialRaw(t, addr)
	resp := createTopics(t, c, createReq(7, true,
		newTopic("dry", 4, 1, "cleanup.policy", "compact"),
		newTopic("dry-bad", 1, 1, "cleanup.policy", "shred")))
	if eng.Topic("dry") != nil {
		t.Fatal("ValidateOnly created the topic")
	}
	r := resp.Topics[0]
	if r.ErrorCode != 0 || r.NumPartitions != 4 || r.ReplicationFactor != 1 {
		t.Fatalf("validate-only answer %+v", r)
	}
	found := false
	for _, cfg := range r.Configs {
		if cfg.Name == "cleanup.policy" {
			found = *cfg.Value == "compact" && cfg.Source == int8(kmsg.ConfigSourceDynamicTopicConfig)
		}
	}
	if !found {
		t.Fatalf("validate-only configs %+v", r.Configs)
	}
	if resp.Topics[1].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("bad config under ValidateOnly: %+v", resp.Topics[1])
	}
}

// TestCreateTopicsThroughKadm: the admin client path, with the broker's
// own defaults (-1 counts) and a topic config.
func TestCreateTopicsThroughKadm(t *testing.T) {
	addr, _, eng := startBroker(t, func(c *Config, _ *engine.Options) { c.NumPartitions = 5 })
	adm := newAdmin(t, addr)
	ctx := testCtx(t)
	resp, err := adm.CreateTopic(ctx, -1, -1, map[string]*string{"max.message.bytes": kmsg.StringPtr("2048")}, "via-kadm")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	tp := eng.Topic("via-kadm")
	if tp == nil || tp.Partitions() != 5 || tp.Config().MaxMessageBytes != 2048 || resp.NumPartitions != 5 || resp.ID != tp.ID() {
		t.Fatalf("created %+v", resp)
	}
	if c, ok := resp.Configs["max.message.bytes"]; !ok || c.MaybeValue() != "2048" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("configs %+v", resp.Configs)
	}
	// kadm.CreateTopic returns the topic's error as its error too.
	again, err := adm.CreateTopic(ctx, 1, 1, nil, "via-kadm")
	if !errors.Is(err, kerr.TopicAlreadyExists) || !errors.Is(again.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("second create: %v %v", err, again.Err)
	}
	rf, err := adm.CreateTopic(ctx, 1, 3, nil, "rf-three")
	if !errors.Is(err, kerr.InvalidReplicationFactor) || !errors.Is(rf.Err, kerr.InvalidReplicationFactor) {
		t.Fatalf("rf 3: %v %v", err, rf.Err)
	}
	if !strings.Contains(rf.ErrMessage, "single-broker") {
		t.Fatalf("rf 3 message %q", rf.ErrMessage)
	}
}

// codeOf is the wire code of a kerr error; 0 for nil.
func codeOf(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}
