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
	"time"

	"github.com/stratalog/strata/auth"
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
	resp      *kmsg.WriteTxnMarkersResponseMarkerTopicPartition
}

func handleWriteTxnMarkers(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	var waits []markerWait
	// authz.go: a broker's request, ClusterAction on the cluster.
	clusterOK := s.authorizedCluster(rc, auth.OpClusterAction)
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
				if !clusterOK {
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
					continue
				}
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
	w := newAckWait(len(waits), func(i int, err error) {
		if err != nil {
			waits[i].resp.ErrorCode = ackErrCode(err) // errors.go
		}
	}, func(i int) {
		// The coordinator retries; the marker stays appended, and a
		// second copy of a marker is harmless.
		waits[i].resp.ErrorCode = kerr.RequestTimedOut.Code
	}, func() { rc.respond(resp) })
	for i := range waits {
		mw := &waits[i]
		// May run inline (already durable) or later on a flush worker or
		// the replica manager. The hook runs first, even after the
		// deadline answered the request: the marker is durable either
		// way, and the response never precedes the hooks of the
		// partitions it reports written.
		s.whenAcked(mw.log, mw.last, func(err error) {
			if err == nil {
				s.txnMarkerWritten(mw.topic, mw.partition, mw.pid, mw.commit) // txnhooks.go
			}
			w.ack(i, err)
		})
	}
	w.start(writeTxnMarkersTimeout)
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
