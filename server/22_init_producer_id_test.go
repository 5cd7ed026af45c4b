package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// initPID sends InitProducerId v on c.
func initPID(t *testing.T, c *rawConn, v int16, txnID *string, corrID int32) kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.TransactionalID, req.TransactionTimeoutMillis = v, txnID, 60000
	req.ProducerID, req.ProducerEpoch = 77, 3 // v3+: ignored without a transactional id
	var resp kmsg.InitProducerIDResponse
	resp.Version = v
	c.roundTrip(req, corrID, &resp)
	return resp
}

// TestInitProducerIDEveryVersion: every advertised version hands out a new
// id with epoch 0; ids stay unique across a broker restart on the same data
// directory.
func TestInitProducerIDEveryVersion(t *testing.T) {
	dir := t.TempDir()
	seen := map[int64]bool{}
	for restart := 0; restart < 2; restart++ {
		addr, _, _ := startBroker(t, func(_ *Config, o *engine.Options) { o.Dir = dir })
		c := dialRaw(t, addr)
		for v := int16(0); v <= initProducerIDMaxVersion; v++ {
			resp := initPID(t, c, v, nil, int32(v))
			if resp.ErrorCode != 0 || resp.ProducerEpoch != 0 || resp.ProducerID < 0 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			if seen[resp.ProducerID] {
				t.Fatalf("v%d after %d restarts: producer id %d handed out twice", v, restart, resp.ProducerID)
			}
			seen[resp.ProducerID] = true
		}
		c.Close()
	}
}

// TestInitProducerIDTransactionalEveryVersion: with a transactional id
// every advertised version gets the id's producer id with the epoch bumped
// by each new instance; the current id and epoch of v3+ must match
// (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH before v4); an empty id is
// INVALID_REQUEST.
func TestInitProducerIDTransactionalEveryVersion(t *testing.T) {
	addr, _, _ := startBroker(t)
	c := dialRaw(t, addr)
	corr := int32(0)
	init := func(v int16, id string, pid int64, epoch int16) kmsg.InitProducerIDResponse {
		corr++
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = v, kmsg.StringPtr(id), 60000
		req.ProducerID, req.ProducerEpoch = pid, epoch
		var resp kmsg.InitProducerIDResponse
		resp.Version = v
		c.roundTrip(req, corr, &resp)
		return resp
	}
	first := init(0, "txn-a", -1, -1)
	if first.ErrorCode != 0 || first.ProducerID < 0 || first.ProducerEpoch != 0 {
		t.Fatalf("v0: %+v", first)
	}
	for v := int16(1); v <= initProducerIDMaxVersion; v++ {
		r := init(v, "txn-a", -1, -1)
		if r.ErrorCode != 0 || r.ProducerID != first.ProducerID || r.ProducerEpoch != int16(v) {
			t.Fatalf("v%d: %+v, want producer %d epoch %d", v, r, first.ProducerID, v)
		}
	}
	for v := int16(3); v <= initProducerIDMaxVersion; v++ {
		want := kerr.ProducerFenced.Code
		if v < 4 {
			want = kerr.InvalidProducerEpoch.Code
		}
		if r := init(v, "txn-a", first.ProducerID, 0); r.ErrorCode != want || r.ProducerID != -1 {
			t.Fatalf("v%d with a stale epoch: %+v, want %v", v, r, kerr.ErrorForCode(want))
		}
	}
	if r := init(4, "", -1, -1); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("empty transactional id: %+v", r)
	}
}

// idemProdBatch is one batch of n records "<prefix>-<i>" from producer
// pid/epoch starting at seq.
func idemProdBatch(t *testing.T, pid int64, epoch int16, seq int32, n int, prefix string) []byte {
	t.Helper()
	var b record.Builder
	ts := time.Now().UnixMilli()
	b.Reset(record.CodecNone, ts)
	b.SetProducer(pid, epoch, seq)
	for i := 0; i < n; i++ {
		b.Add(ts, nil, []byte(fmt.Sprintf("%s-%d", prefix, i)), nil)
	}
	out, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestProduceIdempotentCodes: a retried batch is answered with its original
// base offset (never an error), a gap OUT_OF_ORDER_SEQUENCE_NUMBER, an old
// epoch INVALID_PRODUCER_EPOCH, over every acks mode that answers.
func TestProduceIdempotentCodes(t *testing.T) {
	addr, _, eng := startBroker(t)
	prodTopic(t, eng, "idem", 1, nil)
	c := dialRaw(t, addr)
	pid := initPID(t, c, 4, nil, 1).ProducerID
	corr := int32(10)
	send := func(acks int16, epoch int16, seq int32, n int) kmsg.ProduceResponseTopicPartition {
		corr++
		return prodRaw(t, c, prodRequest(9, acks, "idem", [16]byte{}, 0, idemProdBatch(t, pid, epoch, seq, n, "v")), corr)
	}
	for _, acks := range []int16{-1, 1} {
		base := eng.Topic("idem").Partition(0).LogEndOffset()
		if p := send(acks, 0, int32(base), 3); p.ErrorCode != 0 || p.BaseOffset != base {
			t.Fatalf("acks=%d first: %+v", acks, p)
		}
		if p := send(acks, 0, int32(base), 3); p.ErrorCode != 0 || p.BaseOffset != base {
			t.Fatalf("acks=%d retry: %+v, want base offset %d", acks, p, base)
		}
		if p := send(acks, 0, int32(base)+4, 1); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
			t.Fatalf("acks=%d gap: %+v", acks, p)
		}
		if end := eng.Topic("idem").Partition(0).LogEndOffset(); end != base+3 {
			t.Fatalf("acks=%d: log end %d, want %d (retry and gap not written)", acks, end, base+3)
		}
	}
	if p := send(1, 1, 0, 1); p.ErrorCode != 0 {
		t.Fatalf("epoch bump: %+v", p)
	}
	if p := send(1, 0, 6, 1); p.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch: %+v", p)
	}
}

// TestProduceIdempotentFranz: franz-go's default producer (idempotent)
// gets a producer id and writes every record once, in order.
func TestProduceIdempotentFranz(t *testing.T) {
	addr, _, eng := startBroker(t)
	prodTopic(t, eng, "franz-idem", 1, nil)
	cl := newClient(t, addr, kgo.DefaultProduceTopic("franz-idem"), kgo.MaxBufferedRecords(100))
	ctx := testCtx(t)
	const n = 2000
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("p-%d", i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil || id < 0 || epoch != 0 {
		t.Fatalf("franz-go producer id %d epoch %d: idempotence not in use", id, epoch)
	}
	ps := eng.Topic("franz-idem").Partition(0).Producers()
	if len(ps) != 1 || ps[0].ProducerID != id || ps[0].LastSequence != n-1 {
		t.Fatalf("broker producer state %+v, want producer %d at sequence %d", ps, id, n-1)
	}
	checkInOrder(t, consumeAll(t, addr, "franz-idem", n), "p", 0)

	// DescribeProducers (61) reports the same through kadm.
	set := kadm.TopicsSet{}
	set.Add("franz-idem", 0)
	described, err := newAdmin(t, addr).DescribeProducers(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	var got []kadm.DescribedProducer
	described.EachPartition(func(p kadm.DescribedProducersPartition) {
		if p.Err != nil {
			t.Fatalf("DescribeProducers %s/%d: %v", p.Topic, p.Partition, p.Err)
		}
		got = append(got, p.ActiveProducers.Sorted()...)
	})
	if len(got) != 1 || got[0].ProducerID != id || got[0].ProducerEpoch != 0 || got[0].LastSequence != n-1 ||
		got[0].CurrentTxnStartOffset != -1 || got[0].LastTimestamp <= 0 {
		t.Fatalf("DescribeProducers: %+v", got)
	}
}

// TestDescribeProducersUnknown: a partition that does not exist is
// UNKNOWN_TOPIC_OR_PARTITION.
func TestDescribeProducersUnknown(t *testing.T) {
	addr, _, eng := startBroker(t)
	prodTopic(t, eng, "dp", 1, nil)
	c := dialRaw(t, addr)
	req := kmsg.NewPtrDescribeProducersRequest()
	for _, tp := range []string{"dp", "nope"} {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = tp, []int32{0, 3}
		req.Topics = append(req.Topics, rt)
	}
	var resp kmsg.DescribeProducersResponse
	c.roundTrip(req, 1, &resp)
	want := [][]int16{{0, kerr.UnknownTopicOrPartition.Code}, {kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code}}
	for i, tp := range resp.Topics {
		for j, p := range tp.Partitions {
			if p.ErrorCode != want[i][j] || len(p.ActiveProducers) != 0 {
				t.Fatalf("%s/%d: %+v", tp.Topic, p.Partition, p)
			}
		}
	}
}
