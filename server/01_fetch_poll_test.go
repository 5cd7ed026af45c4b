package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/kframe"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// manyPartitionFetch is a fetch of every partition of tp at offset 0.
func manyPartitionFetch(tp *engine.Topic, name string, parts int32, minBytes int32) *kmsg.FetchRequest {
	req := fetchRequest(12, tp, name, 0, 0, 1<<20)
	req.Topics[0].Partitions = req.Topics[0].Partitions[:0]
	for p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<20
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	req.MinBytes = minBytes
	req.MaxWaitMillis = 600_000 // a hang guard: answers here come from data
	return req
}

// pendingPolls is the number of long polls parked on s.
func pendingPolls(s *Server) int {
	s.polls.mu.Lock()
	defer s.polls.mu.Unlock()
	return len(s.polls.m)
}

// TestFetchLongPollNoGoroutines: many clients long-polling many partitions
// cost no goroutine while they wait; an append to one partition answers
// every poll with that partition's records.
func TestFetchLongPollNoGoroutines(t *testing.T) {
	const parts, clients = 300, 20
	addr, s, eng := startBroker(t)
	tp := prodTopic(t, eng, "wide", parts, nil)
	conns := make([]*rawConn, clients)
	for i := range conns {
		conns[i] = dialRaw(t, addr)
	}
	// Every connection has its reader and writer; let them start.
	eventually(t, "connections registered", func() bool { return s.np.NumConns() == clients })
	base := runtime.NumGoroutine()

	req := manyPartitionFetch(tp, "wide", parts, 1)
	for i, c := range conns {
		c.writeFrame(encodeRequest(req, int32(i), "poll"))
	}
	eventually(t, "every fetch parked", func() bool { return pendingPolls(s) == clients })
	// A goroutine per poll would add 20; allow a few for the engine's own
	// background work.
	if got := runtime.NumGoroutine(); got > base+5 {
		t.Fatalf("%d long polls over %d partitions: goroutines %d -> %d", clients, parts, base, got)
	}

	fetchProduce(t, tp, parts-1, 3, 3, "late")
	for i, c := range conns {
		b, err := c.readFrame()
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		var resp kmsg.FetchResponse
		resp.SetVersion(12)
		decodeResponse(t, b, int32(i), &resp)
		ps := resp.Topics[0].Partitions
		_, values := fetchValues(t, ps[parts-1].RecordBatches)
		if len(values) != 3 || values[2] != "late-2" || ps[parts-1].HighWatermark != 3 {
			t.Fatalf("client %d: last partition got %v (hw %d)", i, values, ps[parts-1].HighWatermark)
		}
	}
	if n := pendingPolls(s); n != 0 {
		t.Fatalf("%d polls still listed after answering", n)
	}
}

// TestFetchLongPollMinBytes: data below MinBytes keeps the poll waiting;
// the append that crosses it answers with everything.
func TestFetchLongPollMinBytes(t *testing.T) {
	addr, s, eng := startBroker(t)
	tp := prodTopic(t, eng, "minb", 4, nil)
	c := dialRaw(t, addr)
	req := manyPartitionFetch(tp, "minb", 4, 4096)
	c.writeFrame(encodeRequest(req, 7, "poll"))
	eventually(t, "fetch parked", func() bool { return pendingPolls(s) == 1 })

	// Each small batch is ~100 bytes: these wake the poll, which reads,
	// finds less than MinBytes and parks again.
	for i := range 5 {
		fetchProduce(t, tp, int32(i%4), 1, 1, "small")
		eventually(t, "poll parked again", func() bool {
			s.polls.mu.Lock()
			defer s.polls.mu.Unlock()
			for f := range s.polls.m {
				f.mu.Lock()
				waiting := f.phase == pollWaiting
				f.mu.Unlock()
				return waiting
			}
			return false
		})
	}
	if n := pendingPolls(s); n != 1 {
		t.Fatalf("answered below MinBytes (%d polls pending)", n)
	}
	big := string(bytes.Repeat([]byte("x"), 5000))
	fetchProduce(t, tp, 2, 1, 1, big)
	b, err := c.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	var resp kmsg.FetchResponse
	resp.SetVersion(12)
	decodeResponse(t, b, 7, &resp)
	total := 0
	for _, p := range resp.Topics[0].Partitions {
		_, values := fetchValues(t, p.RecordBatches)
		total += len(values)
	}
	if total != 6 {
		t.Fatalf("answer carries %d records, want 6", total)
	}
}

// TestFetchLongPollServerClose: closing the server ends parked polls.
func TestFetchLongPollServerClose(t *testing.T) {
	addr, s, eng := startBroker(t)
	tp := prodTopic(t, eng, "shut", 8, nil)
	c := dialRaw(t, addr)
	c.writeFrame(encodeRequest(manyPartitionFetch(tp, "shut", 8, 1), 1, "poll"))
	eventually(t, "fetch parked", func() bool { return pendingPolls(s) == 1 })
	s.Close()
	if n := pendingPolls(s); n != 0 {
		t.Fatalf("%d polls pending after Close", n)
	}
	c.expectClosed()
}

// eventually polls cond (bounded) until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestFetchLongPollRaces: the test appends while raw consumers long-poll
// with short MaxWait (timers race wakes) and varying MinBytes; every request
// gets exactly one response, in order, and each consumer reads every record
// of every partition exactly once, in offset order.
func TestFetchLongPollRaces(t *testing.T) {
	const parts, perPart, consumers = 4, 60, 3
	addr, s, eng := startBroker(t)
	tp := prodTopic(t, eng, "race", parts, nil)

	errs := make(chan error, consumers)
	for k := range consumers {
		c := dialRaw(t, addr)
		go func() { errs <- raceConsumer(c, tp, k, parts, perPart) }()
	}
	for i := range perPart {
		for p := range int32(parts) {
			fetchProduce(t, tp, p, 1, 1, fmt.Sprintf("p%d", i))
		}
	}
	for range consumers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "no poll left pending", func() bool { return pendingPolls(s) == 0 })
}

// raceConsumer fetches every partition until it has perPart records of
// each. It runs on its own goroutine, so it reports errors instead of
// failing the test.
func raceConsumer(c *rawConn, tp *engine.Topic, k, parts, perPart int) error {
	next := make([]int64, parts)
	for corr := int32(1); ; corr++ {
		done := true
		for _, n := range next {
			done = done && n == int64(perPart)
		}
		if done {
			return nil
		}
		req := manyPartitionFetch(tp, "race", int32(parts), int32(1+(int(corr)*37+k)%2000))
		req.MaxWaitMillis = int32(1 + (int(corr)+k)%20)
		for p := range req.Topics[0].Partitions {
			req.Topics[0].Partitions[p].FetchOffset = next[p]
		}
		if _, err := c.Write(kframe.AppendFrame(nil, encodeRequest(req, corr, "race"))); err != nil {
			return err
		}
		b, err := c.readFrame()
		if err != nil {
			return fmt.Errorf("consumer %d request %d: %v", k, corr, err)
		}
		// Response header: correlation id, empty tags (v12 is flexible).
		if len(b) < 5 || int32(binary.BigEndian.Uint32(b)) != corr || b[4] != 0 {
			return fmt.Errorf("consumer %d request %d: bad response header", k, corr)
		}
		var resp kmsg.FetchResponse
		resp.SetVersion(12)
		if err := resp.ReadFrom(b[5:]); err != nil {
			return fmt.Errorf("consumer %d request %d: %v", k, corr, err)
		}
		for p, rp := range resp.Topics[0].Partitions {
			if rp.ErrorCode != 0 {
				return fmt.Errorf("consumer %d partition %d: error %d", k, p, rp.ErrorCode)
			}
			batches := rp.RecordBatches
			for len(batches) > 0 {
				batch, rest, _, err := record.Next(batches)
				if err != nil || !record.CheckCRC(batch) {
					return fmt.Errorf("consumer %d partition %d: bad batch: %v", k, p, err)
				}
				batches = rest
				err = record.Iterate(batch, func(h *record.Header, r *record.Record) error {
					o := h.BaseOffset + int64(r.OffsetDelta)
					if o < next[p] {
						return nil // the batch holding next[p] starts earlier
					}
					if o != next[p] || string(r.Value) != fmt.Sprintf("p%d-0", o) {
						return fmt.Errorf("offset %d value %q, want offset %d", o, r.Value, next[p])
					}
					next[p]++
					return nil
				})
				if err != nil {
					return fmt.Errorf("consumer %d partition %d: %v", k, p, err)
				}
			}
		}
	}
}
