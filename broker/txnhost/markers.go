package txnhost

// Transaction markers (issue 8): the coordinator's WriteTxnMarkers writer.
//
// When a transaction is prepared (EndTxn, a fence, a timeout, or Recover
// after a coordinator moved), the coordinator writes its COMMIT or ABORT
// marker into every partition of the transaction by sending
// WriteTxnMarkersRequest v1 to each partition's leader over the Kafka
// protocol — to this broker too, through the same path (its own listener),
// so the partition side (server's 27_write_txn_markers.go) has one entry
// point. Partitions are grouped by leader, one request per leader per
// round; a partition is retried (backoff 100 ms doubling to 2 s) until its
// leader answers NONE, or its topic no longer exists.
// TRANSACTION_COORDINATOR_FENCED or INVALID_PRODUCER_EPOCH mean a newer
// coordinator owns the transaction: sending stops and the transaction is
// left to it, as Kafka's TransactionMarkerRequestCompletionHandler does.

import (
	"context"
	"log/slog"
	"time"

	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	writeTxnMarkersVersion = 1
	markerBackoffMin       = 100 * time.Millisecond
	markerBackoffMax       = 2 * time.Second
)

// Target says where a partition's marker goes.
type Target int8

const (
	TargetLeader Target = iota // addr is the leader
	TargetRetry                // no leader now: retry later
	TargetGone                 // the topic or partition no longer exists: done
)

// MarkerWriter writes transaction markers to the partition leaders.
type MarkerWriter struct {
	Client *Client
	// Leader finds the leader of topic/partition.
	Leader func(topic string, partition int32) (addr string, t Target)
	Clock  Clock
	Log    *slog.Logger
}

// backoff waits for the next round; false if ctx ends first.
type backoff struct {
	clock Clock
	d     time.Duration
}

func (b *backoff) wait(ctx context.Context) bool {
	d := b.d
	b.d = min(2*b.d, markerBackoffMax)
	return sleep(ctx, b.clock, d)
}

// Send writes m's markers into every partition of the transaction,
// retrying until each is written or its topic is gone; it reports whether
// they all were. It gives up (false) when ctx ends, when current reports
// false before a round (the coordinator partition moved: the next
// coordinator recovers the transaction) or when a newer coordinator or
// producer epoch owns the transaction.
func (w *MarkerWriter) Send(ctx context.Context, m txn.Markers, current func() bool) bool {
	left := m.Partitions
	bo := backoff{clock: w.Clock, d: markerBackoffMin}
	for len(left) > 0 {
		if !current() {
			return false
		}
		byAddr := map[string][]txn.TopicPartition{}
		var retry []txn.TopicPartition
		for _, p := range left {
			addr, t := w.Leader(p.Topic, p.Partition)
			switch t {
			case TargetLeader:
				byAddr[addr] = append(byAddr[addr], p)
			case TargetRetry:
				retry = append(retry, p)
			}
		}
		var fenced bool
		for addr, parts := range byAddr {
			failed, stop := w.sendRequest(ctx, addr, m, parts)
			retry = append(retry, failed...)
			fenced = fenced || stop
		}
		if fenced {
			w.Log.Warn("txn: a newer coordinator or producer epoch owns the transaction; stopped writing its markers",
				"transactional_id", m.TransactionalID, "producer_id", m.ProducerID, "producer_epoch", m.ProducerEpoch)
			return false
		}
		left = retry
		if len(left) > 0 && (!bo.wait(ctx) || !current()) {
			return false
		}
	}
	return true
}

// sendRequest sends m for parts to the leader at addr; it returns the
// partitions to retry, and stop when the coordinator is fenced.
func (w *MarkerWriter) sendRequest(ctx context.Context, addr string, m txn.Markers, parts []txn.TopicPartition) (retry []txn.TopicPartition, stop bool) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = writeTxnMarkersVersion
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	for _, p := range parts { // sorted by topic (txn.Metadata.Partitions order)
		if n := len(mk.Topics); n == 0 || mk.Topics[n-1].Topic != p.Topic {
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = p.Topic
			mk.Topics = append(mk.Topics, t)
		}
		t := &mk.Topics[len(mk.Topics)-1]
		t.Partitions = append(t.Partitions, p.Partition)
	}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{mk}
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	if err := w.Client.RoundTrip(ctx, addr, req, resp); err != nil {
		if ctx.Err() == nil {
			w.Log.Warn("txn: sending transaction markers failed; retrying", "broker", addr, "transactional_id", m.TransactionalID, "err", err)
		}
		return parts, false
	}
	got := map[txn.TopicPartition]int16{}
	for _, rm := range resp.Markers {
		if rm.ProducerID != m.ProducerID {
			continue
		}
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				got[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.ErrorCode
			}
		}
	}
	for _, p := range parts {
		code, ok := got[p]
		switch {
		case !ok:
			retry = append(retry, p)
		case code == 0:
		case code == kerr.TransactionCoordinatorFenced.Code || code == kerr.InvalidProducerEpoch.Code:
			stop = true
		case code == kerr.UnknownTopicOrPartition.Code:
			if _, t := w.Leader(p.Topic, p.Partition); t != TargetGone {
				retry = append(retry, p)
			}
		case code == kerr.UnsupportedForMessageFormat.Code || code == kerr.UnsupportedVersion.Code:
			w.Log.Error("txn: a partition cannot take transaction markers; skipped", "topic", p.Topic, "partition", p.Partition,
				"err", kerr.ErrorForCode(code))
		default:
			retry = append(retry, p)
		}
	}
	return retry, stop
}
