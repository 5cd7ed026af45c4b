package server

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listOffsetsRequest asks for one partition at timestamp ts.
func listOffsetsRequest(v int16, topic string, p int32, ts int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = v
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestListOffsetsAdmin(t *testing.T) {
	addr, _, eng := startBroker(t)
	prodTopic(t, eng, "lo", 1, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	cl := prodClient(t, addr, kgo.DefaultProduceTopic("lo"))
	for i := 0; i < 10; i++ {
		// One record per batch, timestamps base+0s, base+1s, ...
		r := &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := newAdmin(t, addr)
	ctx := testCtx(t)
	starts, err := adm.ListStartOffsets(ctx, "lo")
	if err != nil || starts.Error() != nil {
		t.Fatal(err, starts.Error())
	}
	if o, _ := starts.Lookup("lo", 0); o.Offset != 0 {
		t.Fatalf("start offset %d", o.Offset)
	}
	ends, err := adm.ListEndOffsets(ctx, "lo")
	if err != nil || ends.Error() != nil {
		t.Fatal(err, ends.Error())
	}
	if o, _ := ends.Lookup("lo", 0); o.Offset != 10 || o.LeaderEpoch != 0 {
		t.Fatalf("end offset %d epoch %d", o.Offset, o.LeaderEpoch)
	}
	after, err := adm.ListOffsetsAfterMilli(ctx, base.Add(4500*time.Millisecond).UnixMilli(), "lo")
	if err != nil || after.Error() != nil {
		t.Fatal(err, after.Error())
	}
	if o, _ := after.Lookup("lo", 0); o.Offset != 5 || o.Timestamp != base.Add(5*time.Second).UnixMilli() {
		t.Fatalf("after 4.5s: offset %d timestamp %d", o.Offset, o.Timestamp)
	}
	exact, err := adm.ListOffsetsAfterMilli(ctx, base.Add(2*time.Second).UnixMilli(), "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := exact.Lookup("lo", 0); o.Offset != 2 {
		t.Fatalf("at 2s: offset %d", o.Offset)
	}
	// Past every record: kadm falls back to the end offset when we say -1.
	future, err := adm.ListOffsetsAfterMilli(ctx, time.Now().Add(time.Hour).UnixMilli(), "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := future.Lookup("lo", 0); o.Offset != 10 {
		t.Fatalf("future: offset %d", o.Offset)
	}
}

// TestListOffsetsSpecial covers every special timestamp and every version on
// a raw socket.
func TestListOffsetsSpecial(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "spec", 1, nil)
	l := tp.Partition(0)
	now := time.Now().UnixMilli()
	// Timestamps 100, 300 (the max), 200, at offsets 0, 1, 2.
	for i, ts := range []int64{now - 100, now + 300, now + 200} {
		appendAt(t, tp, 0, ts, []byte{byte(i)})
	}
	if _, err := l.DeleteRecords(1); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, addr)
	corr := int32(0)
	ask := func(v int16, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		corr++
		var resp kmsg.ListOffsetsResponse
		c.roundTrip(listOffsetsRequest(v, "spec", 0, ts), corr, &resp)
		if len(resp.Topics) != 1 || resp.Topics[0].Topic != "spec" || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: response shape", v)
		}
		return resp.Topics[0].Partitions[0]
	}
	for v := int16(listOffsetsMinVersion); v <= listOffsetsMaxVersion; v++ {
		if p := ask(v, -1); p.ErrorCode != 0 || p.Offset != 3 || p.Timestamp != -1 {
			t.Fatalf("v%d latest: %+v", v, p)
		}
		if p := ask(v, -2); p.ErrorCode != 0 || p.Offset != 1 {
			t.Fatalf("v%d earliest: %+v", v, p)
		}
		if p := ask(v, now+150); p.ErrorCode != 0 || p.Offset != 1 || p.Timestamp != now+300 {
			t.Fatalf("v%d by time: %+v", v, p)
		}
		if v >= 4 {
			if p := ask(v, -1); p.LeaderEpoch != 0 {
				t.Fatalf("v%d: leader epoch %d", v, p.LeaderEpoch)
			}
		}
	}
	for _, tc := range []struct {
		ts, offset, timestamp int64
	}{
		{-3, 1, now + 300}, // max timestamp
		{-4, 1, -1},        // earliest local = log start
		{-5, -1, -1},       // latest tiered: nothing tiered
		{-6, -1, -1},       // earliest pending upload: nothing
		{now + 1000, -1, -1},
	} {
		if p := ask(listOffsetsMaxVersion, tc.ts); p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.timestamp {
			t.Fatalf("timestamp %d: offset %d timestamp %d, want %d %d", tc.ts, p.Offset, p.Timestamp, tc.offset, tc.timestamp)
		}
	}
	// read_committed sees the same latest offset (no transactions).
	req := listOffsetsRequest(5, "spec", 0, -1)
	req.IsolationLevel = 1
	var resp kmsg.ListOffsetsResponse
	c.roundTrip(req, 1000, &resp)
	if p := resp.Topics[0].Partitions[0]; p.Offset != 3 {
		t.Fatalf("read_committed latest: %d", p.Offset)
	}
}

func TestListOffsetsErrors(t *testing.T) {
	addr, _, eng := startBroker(t)
	prodTopic(t, eng, "loe", 2, nil)
	c := dialRaw(t, addr)

	req := listOffsetsRequest(7, "loe", 0, -1)
	dup := kmsg.NewListOffsetsRequestTopicPartition()
	dup.Partition, dup.Timestamp = 0, -2
	other := kmsg.NewListOffsetsRequestTopicPartition()
	other.Partition, other.Timestamp = 1, -1
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, dup, other)
	var resp kmsg.ListOffsetsResponse
	c.roundTrip(req, 1, &resp)
	ps := resp.Topics[0].Partitions
	if ps[0].ErrorCode != kerr.InvalidRequest.Code || ps[1].ErrorCode != kerr.InvalidRequest.Code || ps[2].ErrorCode != 0 {
		t.Fatalf("duplicates: errors %d %d %d", ps[0].ErrorCode, ps[1].ErrorCode, ps[2].ErrorCode)
	}

	for i, tc := range []struct {
		name string
		req  *kmsg.ListOffsetsRequest
		want int16
	}{
		{"unknown topic", listOffsetsRequest(7, "nope", 0, -1), kerr.UnknownTopicOrPartition.Code},
		{"unknown partition", listOffsetsRequest(7, "loe", 9, -1), kerr.UnknownTopicOrPartition.Code},
		{"newer epoch", func() *kmsg.ListOffsetsRequest {
			r := listOffsetsRequest(7, "loe", 0, -1)
			r.Topics[0].Partitions[0].CurrentLeaderEpoch = 2
			return r
		}(), kerr.UnknownLeaderEpoch.Code},
	} {
		var resp kmsg.ListOffsetsResponse
		c.roundTrip(tc.req, int32(10+i), &resp)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != tc.want || p.Offset != -1 {
			t.Errorf("%s: error %d offset %d, want %d", tc.name, p.ErrorCode, p.Offset, tc.want)
		}
	}
}

func TestListOffsetsDuplicatesUnit(t *testing.T) {
	mk := func(parts ...[2]any) *kmsg.ListOffsetsRequest {
		req := kmsg.NewPtrListOffsetsRequest()
		for _, p := range parts {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = p[0].(string)
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p[1].(int32)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	if d := listOffsetsDuplicates(mk([2]any{"a", int32(0)})); d != nil {
		t.Fatalf("single partition: %v", d)
	}
	if d := listOffsetsDuplicates(mk([2]any{"a", int32(0)}, [2]any{"a", int32(1)}, [2]any{"b", int32(0)})); d != nil {
		t.Fatalf("distinct partitions: %v", d)
	}
	// The same partition under two topic entries is still a duplicate.
	d := listOffsetsDuplicates(mk([2]any{"a", int32(0)}, [2]any{"b", int32(0)}, [2]any{"a", int32(0)}))
	if len(d) != 1 || !d[listOffsetsKey{"a", 0}] {
		t.Fatalf("duplicates: %v", d)
	}
}

func TestLeaderEpochCheck(t *testing.T) {
	for _, tc := range []struct {
		client, ours int32
		want         int16
	}{
		{-1, 0, 0}, {-1, 5, 0}, {0, 0, 0}, {3, 3, 0},
		{1, 0, kerr.UnknownLeaderEpoch.Code},
		{2, 3, kerr.FencedLeaderEpoch.Code},
	} {
		if got := leaderEpochCheck(tc.client, tc.ours); got != tc.want {
			t.Errorf("leaderEpochCheck(%d, %d) = %d, want %d", tc.client, tc.ours, got, tc.want)
		}
	}
}
