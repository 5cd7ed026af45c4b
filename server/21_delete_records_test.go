package server

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDeleteRecordsAdmin(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "dr", 1, nil)
	fetchProduce(t, tp, 0, 10, 2, "d")
	adm := newAdmin(t, addr)
	ctx := testCtx(t)

	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 5})
	res, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res.Lookup("dr", 0)
	if !ok || r.Err != nil || r.LowWatermark != 5 {
		t.Fatalf("delete before 5: %+v", r)
	}
	starts, err := adm.ListStartOffsets(ctx, "dr")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("dr", 0); o.Offset != 5 {
		t.Fatalf("start offset after delete: %d", o.Offset)
	}
	// Consuming from the start begins at the new low watermark. Offset 5 is
	// in the middle of the batch 4..5; the consumer drops offset 4.
	got := consumeAll(t, addr, "dr", 5)
	checkInOrder(t, got, "d", 5)

	// Past the high watermark: OFFSET_OUT_OF_RANGE, nothing moves.
	os = nil
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 11})
	res, err = adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("dr", 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete past the HW: %v", r.Err)
	}
	// -1 means the high watermark: everything goes.
	os = nil
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: -1})
	res, err = adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("dr", 0); r.Err != nil || r.LowWatermark != 10 {
		t.Fatalf("delete to the HW: %+v", r)
	}
	if start := tp.Partition(0).LogStartOffset(); start != 10 {
		t.Fatalf("log start %d", start)
	}
}

func TestDeleteRecordsErrors(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "dre", 1, nil)
	fetchProduce(t, tp, 0, 4, 4, "x")
	prodTopic(t, eng, "compacted", 1, map[string]string{"cleanup.policy": "compact"})
	c := dialRaw(t, addr)
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.Version = v
		for _, x := range []struct {
			topic  string
			p      int32
			offset int64
		}{{"dre", 0, 2}, {"dre", 0, -7}, {"dre", 3, 1}, {"nope", 0, 1}, {"compacted", 0, 0}} {
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = x.topic
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = x.p, x.offset
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		var resp kmsg.DeleteRecordsResponse
		c.roundTrip(req, int32(v+1), &resp)
		want := []struct {
			code int16
			low  int64
		}{{0, 2}, {kerr.OffsetOutOfRange.Code, -1}, {kerr.UnknownTopicOrPartition.Code, -1},
			{kerr.UnknownTopicOrPartition.Code, -1}, {kerr.PolicyViolation.Code, -1}}
		for i, w := range want {
			p := resp.Topics[i].Partitions[0]
			if p.ErrorCode != w.code || p.LowWatermark != w.low {
				t.Errorf("v%d case %d: error %d low %d, want %d %d", v, i, p.ErrorCode, p.LowWatermark, w.code, w.low)
			}
		}
	}
}
