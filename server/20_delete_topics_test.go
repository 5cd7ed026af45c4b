package server

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDeleteTopicsEveryVersion(t *testing.T) {
	addr, _, eng := startBroker(t, noAutoCreate)
	c := dialRaw(t, addr)
	for v := int16(0); v <= 6; v++ {
		name := fmt.Sprintf("doomed-v%d", v)
		tp := mustCreate(t, eng, name, 2)
		id := tp.ID()
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.SetVersion(v)
		req.TimeoutMillis = 30000
		if v < 6 {
			req.TopicNames = []string{name, "never-was"}
		} else {
			req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr(name)}, {Topic: kmsg.StringPtr("never-was")}}
		}
		resp := kmsg.NewPtrDeleteTopicsResponse()
		c.roundTrip(req, 20, resp)
		if len(resp.Topics) != 2 {
			t.Fatalf("v%d: %d answers", v, len(resp.Topics))
		}
		if r := resp.Topics[0]; *r.Topic != name || r.ErrorCode != 0 || (v >= 6 && r.TopicID != id) {
			t.Fatalf("v%d: %+v", v, r)
		}
		if r := resp.Topics[1]; *r.Topic != "never-was" || r.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d unknown: %+v", v, r)
		}
		if eng.Topic(name) != nil || eng.TopicByID(id) != nil {
			t.Fatalf("v%d: topic still in the engine", v)
		}
		md := metadata(t, c, 12, names(name), false)
		if md.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d: metadata still lists the deleted topic: %+v", v, md.Topics[0])
		}
	}
}

func TestDeleteTopicsByIDAndBadEntries(t *testing.T) {
	addr, _, eng := startBroker(t)
	byID := mustCreate(t, eng, "by-id", 1)
	twice := mustCreate(t, eng, "twice", 1)
	c := dialRaw(t, addr)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(6)
	unknown := [16]byte{1, 2, 3}
	req.Topics = []kmsg.DeleteTopicsRequestTopic{
		{TopicID: byID.ID()},
		{TopicID: unknown},
		{Topic: kmsg.StringPtr("twice")},
		{Topic: kmsg.StringPtr("twice")},
		{Topic: kmsg.StringPtr("by-name-and-id"), TopicID: twice.ID()},
		{},
	}
	resp := kmsg.NewPtrDeleteTopicsResponse()
	c.roundTrip(req, 1, resp)
	want := []int16{0, kerr.UnknownTopicID.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d answers", len(resp.Topics))
	}
	for i, code := range want {
		if resp.Topics[i].ErrorCode != code {
			t.Fatalf("entry %d: %+v, want code %d", i, resp.Topics[i], code)
		}
	}
	if r := resp.Topics[0]; r.Topic == nil || *r.Topic != "by-id" || r.TopicID != byID.ID() {
		t.Fatalf("by id: %+v", r)
	}
	if eng.Topic("by-id") != nil {
		t.Fatal("topic named by id not deleted")
	}
	if eng.Topic("twice") == nil {
		t.Fatal("topic named twice was deleted")
	}
}

func TestDeleteTopicsThroughKadm(t *testing.T) {
	addr, _, eng := startBroker(t, noAutoCreate)
	mustCreate(t, eng, "kadm-doomed", 3)
	adm := newAdmin(t, addr)
	ctx := testCtx(t)
	resp, err := adm.DeleteTopics(ctx, "kadm-doomed", "kadm-never")
	if err != nil {
		t.Fatal(err)
	}
	if r := resp["kadm-doomed"]; r.Err != nil {
		t.Fatalf("delete: %v", r.Err)
	}
	if r := resp["kadm-never"]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown: %v", r.Err)
	}
	if eng.Topic("kadm-doomed") != nil {
		t.Fatal("still there")
	}
	// The name is free again.
	if cr, err := adm.CreateTopic(ctx, 1, 1, nil, "kadm-doomed"); err != nil || cr.Err != nil {
		t.Fatalf("re-create: %v %v", err, cr.Err)
	}
}
