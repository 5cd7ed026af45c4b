package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchProduce appends n records ("<prefix>-i") to partition p of topic
// through the engine, per records a batch, each durable before the next.
func fetchProduce(t *testing.T, tp *engine.Topic, p int32, n, per int, prefix string) {
	t.Helper()
	var b record.Builder
	for i := 0; i < n; i += per {
		ts := time.Now().UnixMilli()
		b.Reset(record.CodecNone, ts)
		for j := i; j < min(i+per, n); j++ {
			b.Add(ts, nil, []byte(fmt.Sprintf("%s-%d", prefix, j)), nil)
		}
		batch, err := b.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		appendDurable(t, tp.Partition(p), batch)
	}
}

// appendAt appends one record with timestamp ts to partition p.
func appendAt(t *testing.T, tp *engine.Topic, p int32, ts int64, value []byte) {
	t.Helper()
	var b record.Builder
	b.Reset(record.CodecNone, ts)
	b.Add(ts, nil, value, nil)
	batch, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	appendDurable(t, tp.Partition(p), batch)
}

// appendDurable appends batch to l and waits (bounded) until it is below the
// high watermark.
func appendDurable(t *testing.T, l *engine.Log, batch []byte) {
	t.Helper()
	if err := appendWait(l, batch); err != nil {
		t.Fatal(err)
	}
}

// appendWait is appendDurable returning its error, for goroutines other
// than the test's.
func appendWait(l *engine.Log, batch []byte) error {
	info, err := l.Append(batch, l.LeaderEpoch())
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	l.WhenDurable(info.LastOffset, func(err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-time.After(testTimeout):
		return errors.New("append never became durable")
	}
}

// fetchRequest is a one-partition fetch at version v.
func fetchRequest(v int16, tp *engine.Topic, name string, p int32, offset int64, partMax int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = 1 << 30
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = name
	if tp != nil {
		rt.TopicID = tp.ID()
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, partMax
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchValues decodes the record values of a partition's record batches.
func fetchValues(t *testing.T, batches []byte) (offsets []int64, values []string) {
	t.Helper()
	for len(batches) > 0 {
		batch, rest, _, err := record.Next(batches)
		if err != nil {
			t.Fatalf("records: %v", err)
		}
		if !record.CheckCRC(batch) {
			t.Fatalf("batch CRC mismatch on the wire")
		}
		err = record.Iterate(batch, func(h *record.Header, r *record.Record) error {
			offsets = append(offsets, h.BaseOffset+int64(r.OffsetDelta))
			values = append(values, string(r.Value))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		batches = rest
	}
	return offsets, values
}

func TestFetchConsumeInOrder(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "ordered", 3, nil)
	cl := prodClient(t, addr, kgo.DefaultProduceTopic("ordered"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const perPartition = 500
	var recs []*kgo.Record
	for i := 0; i < perPartition; i++ {
		for p := int32(0); p < 3; p++ {
			recs = append(recs, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("p%d-%d", p, i))})
		}
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, iso := range []kgo.IsolationLevel{kgo.ReadUncommitted(), kgo.ReadCommitted()} {
		got := consumeAll(t, addr, tp.Name(), 3*perPartition, kgo.FetchIsolationLevel(iso),
			kgo.FetchMaxPartitionBytes(4<<10)) // many round trips
		byPart := map[int32][]*kgo.Record{}
		for _, r := range got {
			byPart[r.Partition] = append(byPart[r.Partition], r)
		}
		for p := int32(0); p < 3; p++ {
			checkInOrder(t, byPart[p], fmt.Sprintf("p%d", p), 0)
		}
	}
}

// TestFetchLongPollWakesOnProduce parks a fetch with a 60 s MaxWait at the
// log end, produces one record, and expects the fetch to answer with it
// within a 30 s context: only a wake-up by the append can do that.
func TestFetchLongPollWakesOnProduce(t *testing.T) {
	addr, s, eng := startBroker(t)
	tp := prodTopic(t, eng, "longpoll", 1, nil)
	fetchProduce(t, tp, 0, 3, 3, "old")
	fetcher := newClient(t, addr)
	req := fetchRequest(fetchMaxVersion, tp, "longpoll", 0, 3, 1<<20)
	req.MaxWaitMillis = 60_000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		resp kmsg.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := fetcher.Request(ctx, req)
		done <- result{resp, err}
	}()
	waitLog(t, s, "fetch: long poll waiting")
	producer := prodClient(t, addr, kgo.DefaultProduceTopic("longpoll"))
	if err := producer.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("wake")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("long poll did not answer after the produce: %v", r.err)
	}
	resp := r.resp.(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[0]
	offsets, values := fetchValues(t, p.RecordBatches)
	if p.ErrorCode != 0 || len(values) != 1 || values[0] != "wake" || offsets[0] != 3 || p.HighWatermark != 4 {
		t.Fatalf("long poll answer: error %d hw %d records %v at %v", p.ErrorCode, p.HighWatermark, values, offsets)
	}

	// The same through a franz-go consumer with a 60 s FetchMaxWait.
	consumer := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"longpoll": {0: kgo.NewOffset().At(4)}}),
		kgo.FetchMaxWait(60*time.Second))
	polled := make(chan kgo.Fetches, 1)
	go func() { polled <- consumer.PollFetches(ctx) }()
	waitLogCount(t, s, "fetch: long poll waiting", 2)
	if err := producer.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("wake-2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := <-polled
	if ctx.Err() != nil {
		t.Fatal("consumer long poll did not wake")
	}
	recs := fs.Records()
	if len(recs) != 1 || string(recs[0].Value) != "wake-2" || recs[0].Offset != 4 {
		t.Fatalf("consumer got %d records (errors %v)", len(recs), fs.Errors())
	}
}

// waitLogCount waits (bounded) until substr appears n times in s's logs.
func waitLogCount(t *testing.T, s *Server, substr string, n int) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for bytes.Count([]byte(logsOf(s)), []byte(substr)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("broker logged %q fewer than %d times", substr, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFetchLongPollTimeout: nothing arrives, the fetch answers empty at
// MaxWait.
func TestFetchLongPollTimeout(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "quiet", 1, nil)
	c := dialRaw(t, addr)
	req := fetchRequest(12, tp, "quiet", 0, 0, 1<<20)
	req.MaxWaitMillis = 20
	var resp kmsg.FetchResponse
	c.roundTrip(req, 1, &resp)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 0 {
		t.Fatalf("timed-out long poll: error %d, %d record bytes, hw %d", p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
	}
}

// TestFetchLongPollConnectionClosed: a client that disconnects while its
// fetch waits ends the wait (the server's Close at cleanup would hang on a
// request left pending).
func TestFetchLongPollConnectionClosed(t *testing.T) {
	addr, s, eng := startBroker(t)
	tp := prodTopic(t, eng, "gone", 1, nil)
	c := dialRaw(t, addr)
	req := fetchRequest(12, tp, "gone", 0, 0, 1<<20)
	req.MaxWaitMillis = 600_000
	c.writeFrame(encodeRequest(req, 1, "raw"))
	waitLog(t, s, "fetch: long poll waiting")
	c.Close()
	waitLog(t, s, "fetch: long poll ended: connection closed")
}

// TestFetchLargeRecord: a 2 MiB record arrives whole through fetch limits of
// 64 KiB (the first batch of a response is never cut).
func TestFetchLargeRecord(t *testing.T) {
	addr, _, eng := startBroker(t)
	prodTopic(t, eng, "big", 1, map[string]string{"max.message.bytes": fmt.Sprint(4 << 20)})
	big := bytes.Repeat([]byte("0123456789abcdef"), (2<<20)/16)
	cl := prodClient(t, addr, kgo.DefaultProduceTopic("big"), kgo.ProducerBatchMaxBytes(4<<20),
		kgo.MaxBufferedBytes(16<<20))
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("small-0")}, &kgo.Record{Value: big}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("small-2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(t, addr, "big", 3, kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(64<<10))
	if string(got[0].Value) != "small-0" || !bytes.Equal(got[1].Value, big) || string(got[2].Value) != "small-2" {
		t.Fatalf("records: %q, %d bytes, %q", got[0].Value, len(got[1].Value), got[2].Value)
	}
}

// TestFetchEveryVersion fetches real records at each served version on a raw
// socket (the handler's framing plus sendfile, decoded by kmsg).
func TestFetchEveryVersion(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "fv", 1, nil)
	fetchProduce(t, tp, 0, 10, 4, "r")
	c := dialRaw(t, addr)
	for v := int16(fetchMinVersion); v <= fetchMaxVersion; v++ {
		var resp kmsg.FetchResponse
		c.roundTrip(fetchRequest(v, tp, "fv", 0, 5, 1<<20), int32(v), &resp)
		if v >= 7 && (resp.ErrorCode != 0 || resp.SessionID != 0) {
			t.Fatalf("v%d: top-level error %d session %d", v, resp.ErrorCode, resp.SessionID)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: response shape", v)
		}
		if v >= fetchFirstTopicIDVersion && resp.Topics[0].TopicID != tp.ID() || v < fetchFirstTopicIDVersion && resp.Topics[0].Topic != "fv" {
			t.Fatalf("v%d: topic not echoed", v)
		}
		p := resp.Topics[0].Partitions[0]
		offsets, values := fetchValues(t, p.RecordBatches)
		// Offset 5 is inside the second batch (4..7): whole batches come back.
		if p.ErrorCode != 0 || p.HighWatermark != 10 || p.LastStableOffset != 10 || len(offsets) != 6 || offsets[0] != 4 || values[5] != "r-9" {
			t.Fatalf("v%d: error %d hw %d lso %d offsets %v", v, p.ErrorCode, p.HighWatermark, p.LastStableOffset, offsets)
		}
		if v >= 5 && p.LogStartOffset != 0 {
			t.Fatalf("v%d: log start %d", v, p.LogStartOffset)
		}
		if p.AbortedTransactions != nil {
			t.Fatalf("v%d: read_uncommitted got an aborted-transactions array", v)
		}
	}
}

// TestFetchBudgets: the first partition's first batch always comes back, the
// response budget is then spent, and the next partition gets nothing.
func TestFetchBudgets(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "budget", 2, nil)
	fetchProduce(t, tp, 0, 20, 5, "a")
	fetchProduce(t, tp, 1, 20, 5, "b")
	c := dialRaw(t, addr)
	req := fetchRequest(11, tp, "budget", 0, 0, 1<<20)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 1, 0, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	req.MaxBytes = 1 // smaller than any batch
	var resp kmsg.FetchResponse
	c.roundTrip(req, 1, &resp)
	ps := resp.Topics[0].Partitions
	o0, _ := fetchValues(t, ps[0].RecordBatches)
	o1, _ := fetchValues(t, ps[1].RecordBatches)
	if len(o0) != 5 || len(o1) != 0 || ps[1].ErrorCode != 0 || ps[1].HighWatermark != 20 {
		t.Fatalf("budget: partition 0 got %d records, partition 1 got %d (error %d hw %d)", len(o0), len(o1), ps[1].ErrorCode, ps[1].HighWatermark)
	}

	// Partition budget: 1 byte each, response budget large: each partition
	// still gets nothing past the first response batch.
	req.MaxBytes = 1 << 30
	req.Topics[0].Partitions[0].PartitionMaxBytes = 1
	req.Topics[0].Partitions[1].PartitionMaxBytes = 1
	c.roundTrip(req, 2, &resp)
	ps = resp.Topics[0].Partitions
	o0, _ = fetchValues(t, ps[0].RecordBatches)
	o1, _ = fetchValues(t, ps[1].RecordBatches)
	if len(o0) != 5 || len(o1) != 0 {
		t.Fatalf("partition budgets: got %d and %d records", len(o0), len(o1))
	}
}

// TestFetchBrokerMaxBytes: fetch.max.bytes caps a response whatever the
// request asks for.
func TestFetchBrokerMaxBytes(t *testing.T) {
	addr, _, eng := startBroker(t, func(c *Config, _ *engine.Options) { c.FetchMaxBytes = 1 })
	tp := prodTopic(t, eng, "capped", 2, nil)
	fetchProduce(t, tp, 0, 10, 5, "a")
	fetchProduce(t, tp, 1, 10, 5, "b")
	c := dialRaw(t, addr)
	req := fetchRequest(12, tp, "capped", 0, 0, 1<<20)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 1, 0, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	var resp kmsg.FetchResponse
	c.roundTrip(req, 1, &resp)
	o0, _ := fetchValues(t, resp.Topics[0].Partitions[0].RecordBatches)
	o1, _ := fetchValues(t, resp.Topics[0].Partitions[1].RecordBatches)
	if len(o0) != 5 || len(o1) != 0 {
		t.Fatalf("fetch.max.bytes=1: got %d and %d records, want one batch (5) and none", len(o0), len(o1))
	}
}

// TestFetchSessions: sessions are never created (id 0); an incremental
// fetch of an unknown session gets FETCH_SESSION_ID_NOT_FOUND; a full fetch
// naming an old session id is served.
func TestFetchErrors(t *testing.T) {
	addr, _, eng := startBroker(t)
	tp := prodTopic(t, eng, "ferr", 1, nil)
	fetchProduce(t, tp, 0, 10, 10, "e")
	if _, err := tp.Partition(0).DeleteRecords(3); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, addr)
	for i, tc := range []struct {
		name   string
		req    *kmsg.FetchRequest
		want   int16
		hw     int64
		starts int64
	}{
		{"unknown topic", fetchRequest(12, nil, "nope", 0, 0, 1<<20), kerr.UnknownTopicOrPartition.Code, -1, -1},
		{"unknown topic id", fetchRequest(13, nil, "", 0, 0, 1<<20), kerr.UnknownTopicID.Code, -1, -1},
		{"unknown partition", fetchRequest(12, tp, "ferr", 5, 0, 1<<20), kerr.UnknownTopicOrPartition.Code, -1, -1},
		{"before log start", fetchRequest(12, tp, "ferr", 0, 1, 1<<20), kerr.OffsetOutOfRange.Code, 10, 3},
		{"past log end", fetchRequest(12, tp, "ferr", 0, 11, 1<<20), kerr.OffsetOutOfRange.Code, 10, 3},
		{"newer leader epoch", func() *kmsg.FetchRequest {
			r := fetchRequest(12, tp, "ferr", 0, 3, 1<<20)
			r.Topics[0].Partitions[0].CurrentLeaderEpoch = 7
			return r
		}(), kerr.UnknownLeaderEpoch.Code, -1, -1},
		{"follower fetch", func() *kmsg.FetchRequest {
			r := fetchRequest(12, tp, "ferr", 0, 3, 1<<20)
			r.ReplicaID = 1
			return r
		}(), kerr.NotLeaderForPartition.Code, -1, -1},
		{"follower fetch v15", func() *kmsg.FetchRequest {
			r := fetchRequest(15, tp, "ferr", 0, 3, 1<<20)
			r.ReplicaState.ID, r.ReplicaState.Epoch = 1, 1
			return r
		}(), kerr.NotLeaderForPartition.Code, -1, -1},
	} {
		var resp kmsg.FetchResponse
		c.roundTrip(tc.req, int32(i+1), &resp)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != tc.want || p.HighWatermark != tc.hw || (tc.req.Version >= 5 && p.LogStartOffset != tc.starts) || len(p.RecordBatches) != 0 {
			t.Errorf("%s: error %d hw %d start %d (%d record bytes); want error %d hw %d start %d",
				tc.name, p.ErrorCode, p.HighWatermark, p.LogStartOffset, len(p.RecordBatches), tc.want, tc.hw, tc.starts)
		}
	}
	// The current epoch (0) is accepted.
	req := fetchRequest(12, tp, "ferr", 0, 3, 1<<20)
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = 0
	var resp kmsg.FetchResponse
	c.roundTrip(req, 100, &resp)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LogStartOffset != 3 {
		t.Fatalf("current epoch: error %d start %d", p.ErrorCode, p.LogStartOffset)
	}
}
