package txnhost

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// markerBroker answers WriteTxnMarkers with codes per partition from a
// script (one entry per request; missing: NONE) and records the requests.
type markerBroker struct {
	mu     sync.Mutex
	rounds []map[txn.TopicPartition]int16
	seen   [][]txn.TopicPartition
}

func (mb *markerBroker) handle(key, version int16, frame []byte) kmsg.Response {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = version
	// The request header v2: key, version, corr, client id, tags.
	n := int(int16(frame[8])<<8 | int16(frame[9]))
	body := frame[10+max(n, 0)+1:]
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	if err := req.ReadFrom(body); err != nil {
		return resp
	}
	mb.mu.Lock()
	defer mb.mu.Unlock()
	var codes map[txn.TopicPartition]int16
	if len(mb.rounds) > 0 {
		codes, mb.rounds = mb.rounds[0], mb.rounds[1:]
	}
	var got []txn.TopicPartition
	for _, m := range req.Markers {
		rm := kmsg.WriteTxnMarkersResponseMarker{ProducerID: m.ProducerID}
		for _, t := range m.Topics {
			rt := kmsg.WriteTxnMarkersResponseMarkerTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				tp := txn.TopicPartition{Topic: t.Topic, Partition: p}
				got = append(got, tp)
				rt.Partitions = append(rt.Partitions, kmsg.WriteTxnMarkersResponseMarkerTopicPartition{Partition: p, ErrorCode: codes[tp]})
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	mb.seen = append(mb.seen, got)
	return resp
}

func TestMarkerWriterRetriesUntilWritten(t *testing.T) {
	a, b, gone := txn.TopicPartition{Topic: "a", Partition: 0}, txn.TopicPartition{Topic: "b", Partition: 1}, txn.TopicPartition{Topic: "gone", Partition: 0}
	mb := &markerBroker{rounds: []map[txn.TopicPartition]int16{{b: kerr.NotLeaderForPartition.Code}}}
	fb := startFakeBroker(t, mb.handle)
	addr := fb.ln.Addr().String()
	client := NewClient("test", nil, realClock{})
	defer client.Close()
	noLeaderOnce := true
	clock := &fakeClock{}
	w := MarkerWriter{Client: client, Clock: clock, Log: slog.Default(), Leader: func(topic string, p int32) (string, Target) {
		switch {
		case topic == "gone":
			return "", TargetGone
		case topic == "a" && noLeaderOnce:
			noLeaderOnce = false
			return "", TargetRetry
		}
		return addr, TargetLeader
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := txn.Markers{TransactionalID: "t", ProducerID: 9, ProducerEpoch: 1, Commit: true, Partitions: []txn.TopicPartition{a, b, gone}}
	if !w.Send(ctx, m, func() bool { return true }) {
		t.Fatal("Send gave up")
	}
	// Round 1: b only (a has no leader, gone is skipped), refused; round
	// 2: a and b, written.
	if len(mb.seen) != 2 || len(mb.seen[0]) != 1 || mb.seen[0][0] != b || len(mb.seen[1]) != 2 {
		t.Fatalf("requests %v", mb.seen)
	}
	if len(clock.sleeps) != 1 || clock.sleeps[0] != markerBackoffMin {
		t.Fatalf("backoffs %v", clock.sleeps)
	}

	// A fenced coordinator stops; so does a partition that moved away.
	mb.rounds = []map[txn.TopicPartition]int16{{a: kerr.TransactionCoordinatorFenced.Code}}
	if w.Send(ctx, m, func() bool { return true }) {
		t.Fatal("Send went on after TRANSACTION_COORDINATOR_FENCED")
	}
	if w.Send(ctx, m, func() bool { return false }) {
		t.Fatal("Send went on for a coordinator partition no longer loaded")
	}
}
