package server

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCreatePartitionsEveryVersion(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := mustCreate(t, eng, "grow", 1)
	c := dialRaw(t, addr)
	for v := int16(0); v <= 3; v++ {
		want := int32(2 + v)
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.SetVersion(v)
		req.TimeoutMillis = 30000
		req.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "grow", Count: want}}
		resp := kmsg.NewPtrCreatePartitionsResponse()
		c.roundTrip(req, 37, resp)
		if len(resp.Topics) != 1 || resp.Topics[0].Topic != "grow" || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("v%d: %+v", v, resp.Topics)
		}
		if got := tp.Partitions(); got != want {
			t.Fatalf("v%d: %d partitions, want %d", v, got, want)
		}
		md := metadata(t, c, 12, names("grow"), false)
		if len(md.Topics[0].Partitions) != int(want) {
			t.Fatalf("v%d: metadata shows %d partitions", v, len(md.Topics[0].Partitions))
		}
	}
}

func TestCreatePartitionsRefusals(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := mustCreate(t, eng, "three", 3)
	mustCreate(t, eng, "dup", 1)
	assigned := mustCreate(t, eng, "assigned", 1)
	c := dialRaw(t, addr)
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.SetVersion(3)
	req.Topics = []kmsg.CreatePartitionsRequestTopic{
		{Topic: "three", Count: 3},
		{Topic: "three-less", Count: 2},
		{Topic: "missing", Count: 4},
		{Topic: "dup", Count: 2},
		{Topic: "dup", Count: 3},
		{Topic: "assigned", Count: 3, Assignment: []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{0}}, {Replicas: []int32{0}}}},
		{Topic: "huge", Count: 1 << 30},
	}
	// "three-less" shares nothing with "three"; make it exist with 3 partitions.
	mustCreate(t, eng, "three-less", 3)
	mustCreate(t, eng, "huge", 1)
	resp := kmsg.NewPtrCreatePartitionsResponse()
	c.roundTrip(req, 1, resp)
	want := map[string]int16{
		"three":      kerr.InvalidPartitions.Code,
		"three-less": kerr.InvalidPartitions.Code,
		"missing":    kerr.UnknownTopicOrPartition.Code,
		"dup":        kerr.InvalidRequest.Code,
		"assigned":   0,
		"huge":       kerr.InvalidPartitions.Code,
	}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d answers: %+v", len(resp.Topics), resp.Topics)
	}
	for _, r := range resp.Topics {
		if code, ok := want[r.Topic]; !ok || r.ErrorCode != code {
			t.Fatalf("%s: code %d (%v), want %d", r.Topic, r.ErrorCode, r.ErrorMessage, code)
		}
		if r.ErrorCode != 0 && r.ErrorMessage == nil {
			t.Fatalf("%s: no error message", r.Topic)
		}
	}
	if tp.Partitions() != 3 || eng.Topic("dup").Partitions() != 1 || assigned.Partitions() != 3 || eng.Topic("huge").Partitions() != 1 {
		t.Fatal("engine state does not match the answers")
	}

	bad := kmsg.NewPtrCreatePartitionsRequest()
	bad.SetVersion(3)
	bad.Topics = []kmsg.CreatePartitionsRequestTopic{
		{Topic: "three", Count: 4, Assignment: []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{1}}}},
		{Topic: "assigned", Count: 5, Assignment: []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{0}}}},
	}
	resp = kmsg.NewPtrCreatePartitionsResponse()
	c.roundTrip(bad, 2, resp)
	for _, r := range resp.Topics {
		if r.ErrorCode != kerr.InvalidReplicaAssignment.Code {
			t.Fatalf("%s: code %d, want INVALID_REPLICA_ASSIGNMENT", r.Topic, r.ErrorCode)
		}
	}
	if tp.Partitions() != 3 || assigned.Partitions() != 3 {
		t.Fatal("refused assignment changed the topic")
	}
}

func TestCreatePartitionsThroughKadm(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := mustCreate(t, eng, "kadm-grow", 2)
	adm := newAdmin(t, addr)
	ctx := testCtx(t)

	v, err := adm.ValidateCreatePartitions(ctx, 3, "kadm-grow")
	if err != nil || v["kadm-grow"].Err != nil || tp.Partitions() != 2 {
		t.Fatalf("validate only: %v %+v, %d partitions", err, v, tp.Partitions())
	}
	r, err := adm.CreatePartitions(ctx, 3, "kadm-grow")
	if err != nil || r["kadm-grow"].Err != nil || tp.Partitions() != 5 {
		t.Fatalf("add 3: %v %+v, %d partitions", err, r, tp.Partitions())
	}
	r, err = adm.UpdatePartitions(ctx, 4, "kadm-grow")
	if err != nil || !errors.Is(r["kadm-grow"].Err, kerr.InvalidPartitions) || tp.Partitions() != 5 {
		t.Fatalf("shrink: %v %+v, %d partitions", err, r, tp.Partitions())
	}
}
