package server

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFollowerFetchReadsPastHWAndLongPollsOnLogEnd: a Fetch with a replica
// id is served to the log end (past the HW, which a consumer does not see),
// its long poll wakes on an append although the HW does not move, and the
// follower's next fetch offset is what moves the leader's HW.
func TestFollowerFetchReadsPastHWAndLongPollsOnLogEnd(t *testing.T) {
	addr, s, eng := startBroker(t)
	tp := prodTopic(t, eng, "follow", 1, nil)
	fetchProduce(t, tp, 0, 3, 3, "old")
	l := tp.Partition(0)
	m := replica.New(replica.Config{BrokerID: 0, BrokerAddr: func(int32) (string, bool) { return "", false }, Logger: s.log})
	t.Cleanup(func() { m.Close() })
	if err := m.BecomeLeader(replica.Partition{Log: l, Topic: "follow", Partition: 0, Leader: 0, LeaderEpoch: 4,
		PartitionEpoch: 1, Replicas: []int32{0, 1}, ISR: []int32{0, 1}, MinISR: 1}); err != nil {
		t.Fatal(err)
	}
	// Raw connections, so the request goes out at exactly v12 with
	// ReplicaID set (franz-go would negotiate v18, where the replica id
	// lives in ReplicaState).
	rc := dialRaw(t, addr)
	corr := int32(0)
	fetch := func(req *kmsg.FetchRequest) kmsg.FetchResponseTopicPartition {
		t.Helper()
		corr++
		var resp kmsg.FetchResponse
		rc.roundTrip(req, corr, &resp)
		return resp.Topics[0].Partitions[0]
	}

	follow := func(offset int64, wait int32) *kmsg.FetchRequest {
		req := fetchRequest(12, tp, "follow", 0, offset, 1<<20)
		req.ReplicaID = 1
		req.MaxWaitMillis = wait
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = 4
		return req
	}
	// A stale epoch is fenced.
	stale := follow(0, 0)
	stale.Topics[0].Partitions[0].CurrentLeaderEpoch = 3
	if p := fetch(stale); p.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("stale epoch: error %d", p.ErrorCode)
	}
	// Caught up at 3: the leader's HW can reach 3.
	if p := fetch(follow(3, 0)); p.ErrorCode != 0 {
		t.Fatalf("follower fetch: error %d", p.ErrorCode)
	}

	poll := dialRaw(t, addr)
	poll.writeFrame(encodeRequest(follow(3, 60_000), 1, "raw-follower"))
	done := make(chan []byte, 1)
	go func() {
		b, err := poll.readFrame()
		if err != nil {
			b = nil
		}
		done <- b
	}()
	waitLog(t, s, "fetch: long poll waiting")
	var b record.Builder
	b.Reset(record.CodecNone, time.Now().UnixMilli())
	b.Add(time.Now().UnixMilli(), nil, []byte("new-0"), nil)
	b.Add(time.Now().UnixMilli(), nil, []byte("new-1"), nil)
	batch, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(batch, l.LeaderEpoch()); err != nil { // not durable-waited: the HW needs follower 1
		t.Fatal(err)
	}
	var frame []byte
	select {
	case frame = <-done:
	case <-time.After(testTimeout):
		t.Fatal("follower long poll did not wake on the append")
	}
	if frame == nil {
		t.Fatal("follower long poll: connection failed")
	}
	resp := new(kmsg.FetchResponse)
	resp.SetVersion(12)
	decodeResponse(t, frame, 1, resp)
	p := resp.Topics[0].Partitions[0]
	offsets, values := fetchValues(t, p.RecordBatches)
	if p.ErrorCode != 0 || len(values) != 2 || offsets[0] != 3 || p.HighWatermark != 3 {
		t.Fatalf("follower long poll: error %d hw %d records %v at %v", p.ErrorCode, p.HighWatermark, values, offsets)
	}
	// A consumer does not see past the HW: follower 1 holds only 3.
	cons := fetch(fetchRequest(12, tp, "follow", 0, 3, 1<<20))
	if cons.ErrorCode != 0 || len(cons.RecordBatches) != 0 || cons.HighWatermark != 3 {
		t.Fatalf("consumer past the HW: error %d hw %d %d bytes", cons.ErrorCode, cons.HighWatermark, len(cons.RecordBatches))
	}
	// The follower's next fetch at 5 says it holds 5 durably: the HW follows.
	fetch(follow(5, 0))
	deadline := time.Now().Add(testTimeout)
	for l.HighWatermark() != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("HW %d after the follower fetched at 5", l.HighWatermark())
		}
		time.Sleep(time.Millisecond)
	}
	// A replica the partition does not have is refused.
	other := follow(5, 0)
	other.ReplicaID = 7
	if p := fetch(other); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch from a non-replica: error %d", p.ErrorCode)
	}
}

// TestFollowerFetchBelowLogStartAndBytes: a follower fetching below the
// leader's log start gets OFFSET_OUT_OF_RANGE with the leader's log start,
// where it restarts (replica/fetcher.go); at the log start it receives the
// leader's batches byte for byte, past the HW, including a tail still in
// the tail cache (Log.ReadReplicaMem).
func TestFollowerFetchBelowLogStartAndBytes(t *testing.T) {
	addr, s, eng := startBroker(t)
	tp := prodTopic(t, eng, "fls", 1, nil)
	// A follower waiting at the head, so that appends are cached
	// (engine/tailcache.go caches only logs read at the head).
	if rr, err := tp.Partition(0).ReadReplicaMem(0, 1, true); err != nil {
		t.Fatal(err)
	} else {
		rr.Release()
	}
	fetchProduce(t, tp, 0, 20, 4, "old")
	l := tp.Partition(0)
	start, err := l.DeleteRecords(10)
	if err != nil || start != 8 && start != 10 {
		t.Fatalf("DeleteRecords(10) = %d, %v", start, err)
	}
	m := replica.New(replica.Config{BrokerID: 0, BrokerAddr: func(int32) (string, bool) { return "", false }, Logger: s.log})
	t.Cleanup(func() { m.Close() })
	if err := m.BecomeLeader(replica.Partition{Log: l, Topic: "fls", Partition: 0, Leader: 0, LeaderEpoch: 2,
		PartitionEpoch: 1, Replicas: []int32{0, 1}, ISR: []int32{0, 1}, MinISR: 1}); err != nil {
		t.Fatal(err)
	}
	// Past the HW (follower 1 has not fetched yet): only a follower sees it.
	var b record.Builder
	b.Reset(record.CodecNone, time.Now().UnixMilli())
	b.Add(time.Now().UnixMilli(), nil, []byte("tail"), nil)
	batch, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(batch, l.LeaderEpoch()); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, addr)
	corr := int32(0)
	follow := func(offset int64) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := fetchRequest(12, tp, "fls", 0, offset, 1<<20)
		req.ReplicaID = 1
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = 2
		corr++
		var resp kmsg.FetchResponse
		rc.roundTrip(req, corr, &resp)
		return resp.Topics[0].Partitions[0]
	}
	if p := follow(start - 1); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != start {
		t.Fatalf("fetch below the log start: error %d log start %d, want %d, %d", p.ErrorCode, p.LogStartOffset, kerr.OffsetOutOfRange.Code, start)
	}
	p := follow(start)
	if p.ErrorCode != 0 || p.LogStartOffset != start {
		t.Fatalf("fetch at the log start: error %d log start %d", p.ErrorCode, p.LogStartOffset)
	}
	// The log's own bytes from start, read until the log end.
	var want []byte
	for off := start; off < l.LogEndOffset(); {
		rr, err := l.ReadReplicaMem(off, 1<<20, true)
		if err != nil || len(rr.Chunks) == 0 {
			t.Fatalf("ReadReplicaMem(%d): %d chunks, %v", off, len(rr.Chunks), err)
		}
		for _, c := range rr.Chunks {
			if c.File == nil {
				want = append(want, c.Buf...)
				continue
			}
			buf := make([]byte, c.Len)
			if _, err := c.File.ReadAt(buf, c.Pos); err != nil {
				t.Fatal(err)
			}
			want = append(want, buf...)
		}
		rr.Release()
		for rest := want; len(rest) > 0; {
			_, r, h, err := record.Next(rest)
			if err != nil {
				t.Fatal(err)
			}
			off = h.LastOffset() + 1
			rest = r
		}
	}
	if !bytes.Equal(p.RecordBatches, want) {
		t.Fatalf("follower got %d bytes, the log holds %d from %d", len(p.RecordBatches), len(want), start)
	}
	// Whole batches: the first one holds the log start (batches of 4).
	offsets, values := fetchValues(t, p.RecordBatches)
	first := start - start%4
	for i, v := range values {
		w := "tail"
		if i < len(values)-1 {
			w = fmt.Sprintf("old-%d", offsets[i])
		}
		if offsets[i] != first+int64(i) || v != w {
			t.Fatalf("record %d: %q at %d, want %q at %d", i, v, offsets[i], w, first+int64(i))
		}
	}
	if len(values) != int(21-first) {
		t.Fatalf("follower fetch holds %d records from %d, want through the unreplicated tail at 20", len(values), first)
	}
}
