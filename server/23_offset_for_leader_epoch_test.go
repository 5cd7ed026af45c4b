package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func offsetForEpochRequest(topic string, p, epoch, current int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.CurrentLeaderEpoch = p, epoch, current
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestOffsetForLeaderEpochClient(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "ofle", 1, nil)
	fetchProduce(t, tp, 0, 7, 3, "o")
	cl := newClient(t, addr)

	resp := issue[*kmsg.OffsetForLeaderEpochResponse](t, cl, offsetForEpochRequest("ofle", 0, 0, -1))
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderEpoch != 0 || p.EndOffset != 7 {
		t.Fatalf("epoch 0: error %d epoch %d end %d, want 0 0 7", p.ErrorCode, p.LeaderEpoch, p.EndOffset)
	}
	// An epoch later than any the log has seen is unknown: -1, -1, no
	// error (Kafka's answer).
	resp = issue[*kmsg.OffsetForLeaderEpochResponse](t, cl, offsetForEpochRequest("ofle", 0, 5, 0))
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderEpoch != -1 || p.EndOffset != -1 {
		t.Fatalf("epoch 5: error %d epoch %d end %d", p.ErrorCode, p.LeaderEpoch, p.EndOffset)
	}
	resp = issue[*kmsg.OffsetForLeaderEpochResponse](t, cl, offsetForEpochRequest("ofle", 0, 0, 3))
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownLeaderEpoch.Code || p.EndOffset != -1 {
		t.Fatalf("newer current epoch: error %d end %d", p.ErrorCode, p.EndOffset)
	}

	// franz-go's sharded Request answers unknown partitions itself (from
	// metadata); ask the broker directly.
	c := dialRaw(t, addr)
	for i, tc := range []struct {
		name string
		req  *kmsg.OffsetForLeaderEpochRequest
	}{
		{"unknown topic", offsetForEpochRequest("nope", 0, 0, -1)},
		{"unknown partition", offsetForEpochRequest("ofle", 4, 0, -1)},
	} {
		tc.req.Version = 4
		var resp kmsg.OffsetForLeaderEpochResponse
		c.roundTrip(tc.req, int32(i+1), &resp)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.EndOffset != -1 {
			t.Errorf("%s: error %d end %d", tc.name, p.ErrorCode, p.EndOffset)
		}
	}
}

func TestOffsetForLeaderEpochVersions(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "oflv", 1, nil)
	fetchProduce(t, tp, 0, 2, 2, "o")
	c := dialRaw(t, addr)
	for v := int16(0); v <= 4; v++ {
		req := offsetForEpochRequest("oflv", 0, 0, -1)
		req.Version = v
		var resp kmsg.OffsetForLeaderEpochResponse
		c.roundTrip(req, int32(v+1), &resp)
		p := resp.Topics[0].Partitions[0]
		wantEpoch := int32(0)
		if v == 0 {
			wantEpoch = -1 // not on the wire before v1: kmsg default
		}
		if p.ErrorCode != 0 || p.EndOffset != 2 || p.LeaderEpoch != wantEpoch {
			t.Fatalf("v%d: error %d epoch %d end %d", v, p.ErrorCode, p.LeaderEpoch, p.EndOffset)
		}
	}
}
