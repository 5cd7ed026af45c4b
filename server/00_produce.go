package server

// Produce (API key 0), v0..v13; v0..v2 answer UNSUPPORTED_VERSION.
//
// Versions 0-2 carry message sets (magic 0/1), which Strata does not store.
// They are still advertised because librdkafka enables compression only when
// Produce v0 is in the broker's range; a client that actually sends them gets
// UNSUPPORTED_VERSION on every partition.
//
// For v3+ each partition's bytes must be exactly one RecordBatch (magic 2), as
// Kafka requires; engine Log.Append validates it (CRC, counts, size) and
// assigns offsets by patching the batch in place in the request frame, which
// netpoll keeps valid until the reply completes, so nothing is copied here.
//
// Acks:
//
//	0   append, then no response; if any partition failed the connection is
//	    closed after earlier responses, which is how Kafka tells an acks=0
//	    producer to refresh its metadata.
//	1   respond once every partition is appended (written, not yet durable).
//	-1  respond once every appended partition is durable (Log.WhenDurable on
//	    its last offset; the high watermark covers it). A durability failure
//	    is KAFKA_STORAGE_ERROR for that partition. If TimeoutMillis passes
//	    first, the partitions still waiting answer REQUEST_TIMED_OUT (their
//	    records stay appended, as in Kafka). The countdown and the timer race
//	    under one mutex; whichever finishes first sends the one response.
//
// Blackhole (Config.Blackhole, `strata serve --blackhole`): a benchmark
// baseline. Each partition's batch is checked as far as its header (one
// batch, parseable, magic 2) and answered at once as if appended, at offsets
// counted per partition from the log end offset at first use; nothing is
// stored, acks=-1 answers without waiting, and the HW never moves, so
// consumers see nothing. What remains is the cost of the network, the
// protocol and the request decoding.
//
// Idempotent producers (batches with a producer id): the engine checks
// sequence numbers and epochs (engine/producers.go). A retried batch is
// answered with the base offset it got when first written and is not written
// again (acks=-1 waits for that original to be durable); a sequence gap is
// OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH.
//
// Transactional batches (engine/txn.go): the first one of a producer opens
// its transaction in the partition (the last stable offset stops there until
// the coordinator's marker, WriteTxnMarkers, ends it). A producer with an
// open transaction that sends a non-transactional batch gets
// INVALID_TXN_STATE, a fenced epoch INVALID_PRODUCER_EPOCH, a transactional
// batch without a producer id INVALID_RECORD, one in a request without a
// transactional id TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as in Kafka.
//
// KIP-890 (txn_verify.go): a request with a transactional id whose
// transactional batches would open a transaction in a partition first has
// the transaction coordinator verify (part 1) or add (part 2, Produce v12+
// under transaction.version 2) those partitions; such a request is
// appended, in request order, once every answer is in, and a refused
// partition is answered with the coordinator's code and not appended.
// Requests of the same producer to the same partition never overtake one
// that waits. Every other request (all non-transactional traffic) takes the
// synchronous path: produceAppend on the connection's goroutine.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	produceMaxVersion          = 13 // kmsg's newest Produce
	produceFirstBatchVersion   = 3  // RecordBatch (magic 2) records
	produceFirstZstdVersion    = 7  // zstd batches need Produce v7+ (KIP-110)
	produceFirstTopicIDVersion = 13 // topics by id (KIP-516)

	// adminClientID may produce to internal topics when the broker has no
	// authorizer, as in Kafka (mayProduceInternal).
	adminClientID = "__admin_client"
)

func init() { register(0, 0, produceMaxVersion, handleProduce) }

// internalTopics are Kafka's internal topics; only the brokers may produce
// to them (mayProduceInternal).
var internalTopics = map[string]bool{
	"__consumer_offsets":    true,
	"__transaction_state":   true,
	"__share_group_state":   true,
	"__cluster_metadata":    true,
	"__remote_log_metadata": true,
}

// produceDurable is one appended partition an acks=-1 request waits on.
type produceDurable struct {
	log  *engine.Log
	last int64 // last offset appended
	resp *kmsg.ProduceResponseTopicPartition
}

func handleProduce(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.ProduceRequest)

	// Whole-request errors apply to every partition.
	var reqErr int16
	var reqMsg string
	switch {
	case rc.version < produceFirstBatchVersion:
		reqErr = kerr.UnsupportedVersion.Code
		reqMsg = fmt.Sprintf("Produce v%d (message sets) is not supported; use v%d+ (record batches)", rc.version, produceFirstBatchVersion)
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		reqErr = kerr.InvalidRequiredAcks.Code
		reqMsg = fmt.Sprintf("acks must be 0, 1 or -1, not %d", req.Acks)
	case req.TransactionID != nil && !s.authorized(rc, auth.OpWrite, auth.ResourceTransactionalID, *req.TransactionID): // authz.go
		reqErr = kerr.TransactionalIDAuthorizationFailed.Code
	}
	// Transactional batches may need the coordinator first (KIP-890,
	// txn_verify.go); that path answers the request itself.
	if reqErr == 0 && req.TransactionID != nil && !s.cfg.Blackhole && s.produceTxnStart(rc, req) {
		return
	}
	s.produceAppend(rc, req, reqErr, reqMsg, nil)
}

// produceAppend appends every partition of req in request order and
// answers rc (now, or once durable for acks=-1). reqErr, if not 0, answers
// every partition instead. tx is nil on the synchronous path; on the
// verification path (txn_verify.go) it holds the coordinator's answers, and
// a partition it refused is answered with that code and not appended.
func (s *Server) produceAppend(rc *reqCtx, req *kmsg.ProduceRequest, reqErr int16, reqMsg string, tx *produceTxn) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var durable []produceDurable
	failed := false
	var recordBytes int
	txnID := req.TransactionID != nil
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	if req.Acks == -1 && !s.cfg.Blackhole {
		n := 0
		for i := range req.Topics {
			n += len(req.Topics[i].Partitions)
		}
		durable = make([]produceDurable, 0, n)
	}
	if req.Acks == -1 && !s.cfg.Blackhole && holdJournal(req) {
		// One journal group for the request's partitions (engine/journal.go,
		// "Holding the next group open"); released when the loop ends,
		// panics included.
		s.eng.HoldJournal()
		defer s.eng.ReleaseJournal()
	}
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))

		topicErr, topicMsg := reqErr, reqMsg
		var topic *engine.Topic
		if topicErr == 0 {
			topic, topicErr, topicMsg = s.produceTopic(rc, rt)
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			recordBytes += len(rp.Records)
			sp.Default()
			sp.Partition = rp.Partition
			code, msg := topicErr, topicMsg
			var info engine.AppendInfo
			var l *engine.Log
			if code == 0 && tx != nil {
				code, msg = tx.verdict(i, j)
			}
			if code == 0 {
				code, msg = s.clusterProduceCheck(topic, rp.Partition, req.Acks) // cluster.go
			}
			if code == 0 && s.cfg.Blackhole {
				info, code, msg = s.blackholePartition(topic, rp)
			} else if code == 0 {
				l, info, code, msg = producePartition(rc, topic, rp, txnID)
			}
			if code != 0 {
				sp.ErrorCode = code
				if msg != "" {
					sp.ErrorMessage = &msg
				}
				failed = true
				continue
			}
			sp.BaseOffset = info.BaseOffset
			sp.LogAppendTime = info.LogAppendTime
			sp.LogStartOffset = info.LogStartOffset
			if req.Acks == -1 && l != nil {
				durable = append(durable, produceDurable{log: l, last: info.LastOffset, resp: sp})
			}
		}
	}

	resp.ThrottleMillis = s.throttle(rc, auth.QuotaProducerByteRate, float64(recordBytes)) // quota.go
	switch {
	case req.Acks == 0 && failed:
		rc.close(fmt.Errorf("acks=0 produce failed on at least one partition"))
	case req.Acks == 0:
		rc.skip()
	case len(durable) > 0:
		waitDurable(s, rc, resp, durable, req.TimeoutMillis)
	default:
		rc.respond(resp)
	}
}

// sumFramesFrom is the smallest request frame whose 1 KiB blocks the
// connection's reader checksums as they arrive (netpoll.Config.SumFramesFrom):
// a produce request this large is no longer in the CPU's caches when its
// batches are checked after the whole frame is read, and the batches' CRCs
// then combine the sums (engine.Log.AppendSummed).
const sumFramesFrom = 256 << 10

// holdJournal reports whether req's appends should share one journal
// group: it touches more than one partition. Requests of any size hold it
// (the journal takes a held stage anyway once it fills half its staging
// buffer). Until session 50 only requests up to 1 MiB held it: in
// session 17 a keyed closed loop (~2.2 MB requests) lost throughput when
// the journal wrote nothing while a request's appends ran; with today's
// journal (ref groups written from the segments' chunks, O_DIRECT) the
// same workload, at ~5.6 MB requests, gained: 103.3-118.0 %, median
// 113.4 % over 4 alternated rounds, one group and one device flush per
// request instead of ~2.1 (docs/performance.md, "Session 50").
func holdJournal(req *kmsg.ProduceRequest) bool {
	parts := 0
	for i := range req.Topics {
		parts += len(req.Topics[i].Partitions)
		if parts > 1 {
			return true
		}
	}
	return false
}

// produceTopic resolves a request topic (by name before v13, by id after);
// the principal needs Write on it (TOPIC_AUTHORIZATION_FAILED, before
// whether it exists, as Kafka); Kafka's internal topics take writes only
// from the brokers (mayProduceInternal).
func (s *Server) produceTopic(rc *reqCtx, rt *kmsg.ProduceRequestTopic) (*engine.Topic, int16, string) {
	var t *engine.Topic
	if rc.version >= produceFirstTopicIDVersion {
		if t = s.eng.TopicByID(rt.TopicID); t == nil {
			return nil, kerr.UnknownTopicID.Code, ""
		}
		if !s.authorized(rc, auth.OpWrite, auth.ResourceTopic, t.Name()) {
			return nil, kerr.TopicAuthorizationFailed.Code, ""
		}
	} else if !s.authorized(rc, auth.OpWrite, auth.ResourceTopic, rt.Topic) {
		return nil, kerr.TopicAuthorizationFailed.Code, ""
	} else if t = s.eng.Topic(rt.Topic); t == nil {
		if internalTopics[rt.Topic] && !s.mayProduceInternal(rc) {
			return nil, kerr.InvalidTopicException.Code, "cannot produce to internal topic " + rt.Topic
		}
		return nil, kerr.UnknownTopicOrPartition.Code, ""
	}
	if internalTopics[t.Name()] && !s.mayProduceInternal(rc) {
		return nil, kerr.InvalidTopicException.Code, "cannot produce to internal topic " + t.Name()
	}
	return t, 0, ""
}

// mayProduceInternal reports whether rc may write to an internal topic.
// With an authorizer that is an authorization, not a name a client picks:
// the principal needs ClusterAction on the cluster (the brokers' own
// principals, which follower fetches need it for, and super users), and
// the client id grants nothing. Without one, Kafka's rule: only the client
// id adminClientID, which the brokers' own clients use.
func (s *Server) mayProduceInternal(rc *reqCtx) bool {
	if s.cfg.Authorizer != nil {
		return s.authorizedCluster(rc, auth.OpClusterAction)
	}
	return rc.client == adminClientID
}

// producePartition checks and appends one partition's batch; txnID says
// whether the request carries a transactional id.
func producePartition(rc *reqCtx, topic *engine.Topic, rp *kmsg.ProduceRequestTopicPartition, txnID bool) (*engine.Log, engine.AppendInfo, int16, string) {
	l := topic.Partition(rp.Partition)
	if l == nil {
		return nil, engine.AppendInfo{}, kerr.UnknownTopicOrPartition.Code, ""
	}
	if len(rp.Records) == 0 {
		return nil, engine.AppendInfo{}, kerr.InvalidRecord.Code, "a produce request must have one record batch per partition"
	}
	// A header we cannot parse is left to Append, which classifies it.
	if h, err := record.ParseHeader(rp.Records); err == nil {
		if int64(h.Size()) < int64(len(rp.Records)) {
			return nil, engine.AppendInfo{}, kerr.InvalidRecord.Code, "a produce request must have exactly one record batch per partition"
		}
		if h.Codec() == record.CodecZstd && rc.version < produceFirstZstdVersion {
			return nil, engine.AppendInfo{}, kerr.UnsupportedCompressionType.Code, "zstd needs produce v7+"
		}
		if h.Transactional() && !txnID {
			// Kafka refuses the request: a transaction needs the id the
			// coordinator verifies against (txn_verify.go).
			return nil, engine.AppendInfo{}, kerr.TransactionalIDAuthorizationFailed.Code, "a transactional batch needs a produce request with a transactional id"
		}
	}
	sums, at := rc.sumsFor(rp.Records)
	info, err := l.AppendSummed(rp.Records, l.LeaderEpoch(), sums, at)
	if err != nil {
		return nil, engine.AppendInfo{}, errCode(err), err.Error()
	}
	return l, info, 0, ""
}

// waitDurable sends resp once every partition in waits is durable, or when
// timeoutMs passes (REQUEST_TIMED_OUT for the partitions still waiting).
func waitDurable(s *Server, rc *reqCtx, resp *kmsg.ProduceResponse, waits []produceDurable, timeoutMs int32) {
	w := newAckWait(len(waits), func(i int, err error) {
		if err != nil {
			p := waits[i].resp
			p.ErrorCode = ackErrCode(err) // errors.go
			msg := err.Error()
			p.ErrorMessage = &msg
		}
	}, func(i int) {
		p := waits[i].resp
		p.ErrorCode = kerr.RequestTimedOut.Code
		msg := "timed out waiting for the records to become durable"
		p.ErrorMessage = &msg
	}, func() { rc.respond(resp) })
	for i := range waits {
		// May run inline (already durable) or later on the flusher.
		s.whenAcked(waits[i].log, waits[i].last, func(err error) { w.ack(i, err) }) // cluster.go
	}
	w.start(time.Duration(timeoutMs) * time.Millisecond)
}

// blackholeState is --blackhole mode's per-partition offset counters: a
// produce request is answered at once as if appended, at offsets counted
// here, and nothing is stored. next maps *engine.Log to *atomic.Int64 (the
// next offset); lookups take no lock.
type blackholeState struct {
	next sync.Map
}

// blackholePartition answers one partition without storing its batch.
func (s *Server) blackholePartition(topic *engine.Topic, rp *kmsg.ProduceRequestTopicPartition) (engine.AppendInfo, int16, string) {
	l := topic.Partition(rp.Partition)
	if l == nil {
		return engine.AppendInfo{}, kerr.UnknownTopicOrPartition.Code, ""
	}
	h, err := record.ParseHeader(rp.Records)
	if err != nil || int64(h.Size()) != int64(len(rp.Records)) || h.LastOffsetDelta < 0 {
		return engine.AppendInfo{}, kerr.CorruptMessage.Code, "a produce request must have exactly one valid record batch per partition"
	}
	v, ok := s.blackhole.next.Load(l)
	if !ok {
		n := new(atomic.Int64)
		n.Store(l.LogEndOffset())
		v, _ = s.blackhole.next.LoadOrStore(l, n)
	}
	count := int64(h.LastOffsetDelta) + 1
	last := v.(*atomic.Int64).Add(count) - 1
	return engine.AppendInfo{BaseOffset: last - count + 1, LastOffset: last, LogAppendTime: -1, LogStartOffset: l.LogStartOffset()}, 0, ""
}
