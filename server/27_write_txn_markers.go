package server

// WriteTxnMarkers (API key 27), v0..v1 (v1 flexible): a transaction
// coordinator (txn_*.go, possibly on this very broker) asks the leaders of a
// transaction's partitions to end it with a COMMIT or ABORT control batch.
//
// Each marker names a producer id and epoch, the outcome, the coordinator's
// epoch and the topics and partitions it wrote to. Per partition, in
// request order:
//
//	UNKNOWN_TOPIC_OR_PARTITION       no such topic or partition here
//	NOT_LEADER_OR_FOLLOWER           this broker does not lead it (cluster.go)
//	INVALID_PRODUCER_EPOCH           the marker's epoch is below the producer's
//	TRANSACTION_COORDINATOR_FENCED   the coordinator epoch is below the last
//	                                 one the partition saw for the producer
//	KAFKA_STORAGE_ERROR, ...         the append or its replication failed
//	REQUEST_TIMED_OUT                not durable within writeTxnMarkersTimeout
//
// The marker is appended with engine Log.AppendTxnMarker (which closes the
// producer's transaction, moves the last stable offset and, for ABORT,
// indexes the aborted transaction) and answered once it is as durable as an
// acks=all produce (Server.whenAcked: the high watermark passed it; in a
// cluster, the ISR has it). Only then is the partition reported written and
// s.txnMarkerWritten called (for __consumer_offsets partitions the group
// coordinator applies or drops the producer's staged offsets), so a
// coordinator never completes a transaction whose markers could still be
// lost. Markers go to internal topics (__consumer_offsets) too: the
// coordinator is the only writer of control batches, clients cannot produce
// them (record.Validate rejects control batches).
//
// Like Kafka, the broker does not check who sends the request (Kafka needs
// the CLUSTER_ACTION ACL; Strata has no ACLs yet).

import (
	"sync"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// writeTxnMarkersTimeout bounds the wait for durability (Kafka uses
// request.timeout.ms, 30 s by default).
const writeTxnMarkersTimeout = 30 * time.Second

func init() { register(27, 0, 1, handleWriteTxnMarkers) }

// markerWait is one appended partition the response waits on.
type markerWait struct {
	log       *engine.Log
	last      int64
	topic     string
	partition int32
	pid       int64
	commit    bool
	resp      *kmsg.WriteTxnMarkersResponseMarkerTopicPartition // nil once answered
}

// markersWait is a WriteTxnMarkers response waiting for durability; like
// produceWait, everything is guarded by mu and the last callback or the
// timer sends the response once.
type markersWait struct {
	s       *Server
	mu      sync.Mutex
	rc      *reqCtx
	resp    *kmsg.WriteTxnMarkersResponse
	waits   []markerWait
	pending int
	done    bool
	timer   *time.Timer
}

func handleWriteTxnMarkers(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	var waits []markerWait
	for i := range req.Markers {
		m := &req.Markers[i]
		rm := &resp.Markers[i]
		rm.ProducerID = m.ProducerID
		rm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for j := range m.Topics {
			mt := &m.Topics[j]
			rt := &rm.Topics[j]
			rt.Topic = mt.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(mt.Partitions))
			var topic *engine.Topic
			if s.eng != nil {
				topic = s.eng.Topic(mt.Topic)
			}
			for k, p := range mt.Partitions {
				rp := &rt.Partitions[k]
				rp.Partition = p
				l, last, code := s.writeTxnMarker(topic, p, m)
				if code != 0 {
					rp.ErrorCode = code
					continue
				}
				waits = append(waits, markerWait{log: l, last: last, topic: mt.Topic, partition: p,
					pid: m.ProducerID, commit: m.Committed, resp: rp})
			}
		}
	}
	if len(waits) == 0 {
		rc.respond(resp)
		return
	}
	w := &markersWait{s: s, rc: rc, resp: resp, waits: waits, pending: len(waits)}
	for i := range waits {
		// May run inline (already durable) or later on a flush worker or
		// the replica manager.
		s.whenAcked(waits[i].log, waits[i].last, func(err error) { w.acked(i, err) })
	}
	w.mu.Lock()
	if !w.done {
		w.timer = time.AfterFunc(writeTxnMarkersTimeout, w.expire)
	}
	w.mu.Unlock()
}

// writeTxnMarker appends m's marker to one partition and returns the log
// and the marker's offset, or an error code.
func (s *Server) writeTxnMarker(topic *engine.Topic, partition int32, m *kmsg.WriteTxnMarkersRequestMarker) (*engine.Log, int64, int16) {
	if topic == nil {
		return nil, 0, kerr.UnknownTopicOrPartition.Code
	}
	l := topic.Partition(partition)
	if l == nil {
		return nil, 0, kerr.UnknownTopicOrPartition.Code
	}
	if code := s.clusterPartitionCheck(topic, partition); code != 0 { // cluster.go
		return nil, 0, code
	}
	info, err := l.AppendTxnMarker(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed, l.LeaderEpoch())
	if err != nil {
		code := errCode(err)
		s.log.Debug("write txn markers: append failed", "topic", topic.Name(), "partition", partition,
			"producer", m.ProducerID, "err", err)
		return nil, 0, code
	}
	return l, info.LastOffset, 0
}

// acked records partition i's outcome; the last one sends the response. It
// runs on a flush worker (or inline) and must not block.
//
// The hook runs first, even after a timeout answered the request: the
// marker is durable either way, and the response never precedes the hooks
// of the partitions it reports written.
func (w *markersWait) acked(i int, err error) {
	mw := &w.waits[i] // fields other than resp are immutable
	if err == nil {
		w.s.txnMarkerWritten(mw.topic, mw.partition, mw.pid, mw.commit) // txnhooks.go
	}
	w.mu.Lock()
	if w.done || mw.resp == nil {
		w.mu.Unlock()
		return
	}
	if err != nil {
		mw.resp.ErrorCode = ackErrCode(err) // cluster.go
	}
	mw.resp = nil
	w.pending--
	if w.pending > 0 {
		w.mu.Unlock()
		return
	}
	w.done = true
	t := w.timer
	w.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	w.rc.respond(w.resp)
}

// expire answers REQUEST_TIMED_OUT for the partitions not yet durable (the
// coordinator retries them; the marker stays appended, and a second copy
// of a marker is harmless).
func (w *markersWait) expire() {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	w.done = true
	for i := range w.waits {
		if p := w.waits[i].resp; p != nil {
			p.ErrorCode = kerr.RequestTimedOut.Code
			w.waits[i].resp = nil
		}
	}
	w.mu.Unlock()
	w.rc.respond(w.resp)
}
