package server

// AddPartitionsToTxn (API key 24), v0..v4.
//
// v0..v3 (clients): add the partitions to the producer's transaction on
// its coordinator (broker/txnhost, through txn_coord.go's txnCoordinator). As in Kafka, partitions of unknown
// topics are answered UNKNOWN_TOPIC_OR_PARTITION and then every other
// partition OPERATION_NOT_ATTEMPTED, without touching the transaction;
// otherwise every partition shares the coordinator's answer, after waiting
// out a previous transaction's markers (txnhost.Host.ClientAdd).
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.
//
// v4 (KIP-890 part 1, sent by brokers): a batch of transactions, each
// answered on its own (one coordinator call per transaction), with
// VerifyOnly asking whether the partitions are already in the
// transaction (NONE, or TRANSACTION_ABORTABLE per partition) without
// adding them. The top-level error code is set only for a request the
// broker cannot serve at all. v5 (KIP-890 part 2) is v4 from brokers that
// add partitions on behalf of TV2 clients (VerifyOnly false).

import (
	"sync"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(24, 0, 5, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 && !s.authorizedCluster(rc, auth.OpClusterAction) { // authz.go: v4+ is a broker's request
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		rc.respond(resp)
		return
	}
	if req.Version < 4 {
		tps, topics := addPartitionsV3(req.Topics)
		resp.Topics = make([]kmsg.AddPartitionsToTxnResponseTopic, len(topics))
		set := func(code func(t, p int) int16) {
			for i, rt := range topics {
				st := &resp.Topics[i]
				st.Topic = rt.topic
				st.Partitions = make([]kmsg.AddPartitionsToTxnResponseTopicPartition, len(rt.parts))
				for j, p := range rt.parts {
					st.Partitions[j] = kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p, ErrorCode: code(i, j)}
				}
			}
		}
		// authz.go: Write on the transactional id and on each topic.
		txnOK := s.authorized(rc, auth.OpWrite, auth.ResourceTransactionalID, req.TransactionalID)
		denied, anyDenied := make([]bool, len(topics)), false
		for i, rt := range topics {
			if !s.authorized(rc, auth.OpWrite, auth.ResourceTopic, rt.topic) {
				denied[i], anyDenied = true, true
			}
		}
		if !txnOK || anyDenied {
			set(func(t, p int) int16 {
				switch {
				case !txnOK:
					return kerr.TransactionalIDAuthorizationFailed.Code
				case denied[t]:
					return kerr.TopicAuthorizationFailed.Code
				}
				return kerr.OperationNotAttempted.Code
			})
			rc.respond(resp)
			return
		}
		if unknown := s.unknownTxnPartitions(topics); unknown != nil {
			set(func(t, p int) int16 {
				if unknown[t][p] {
					return kerr.UnknownTopicOrPartition.Code
				}
				return kerr.OperationNotAttempted.Code
			})
			rc.respond(resp)
			return
		}
		s.txn.coord.ClientAdd(req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps, func(r txn.Reply) {
			code := txnErrCode(r.Err, req.Version < 2)
			set(func(int, int) int16 { return code })
			rc.respond(resp)
		})
		return
	}

	resp.Transactions = make([]kmsg.AddPartitionsToTxnResponseTransaction, len(req.Transactions))
	var mu sync.Mutex
	left := 1 // this goroutine's share, plus one per transaction answered asynchronously
	finish := func() {
		mu.Lock()
		left--
		last := left == 0
		mu.Unlock()
		if last {
			rc.respond(resp)
		}
	}
	for i := range req.Transactions {
		rtx := &req.Transactions[i]
		st := &resp.Transactions[i]
		st.TransactionalID = rtx.TransactionalID
		in := make([]kmsg.AddPartitionsToTxnRequestTopic, len(rtx.Topics))
		for k, t := range rtx.Topics {
			in[k] = kmsg.AddPartitionsToTxnRequestTopic{Topic: t.Topic, Partitions: t.Partitions}
		}
		tps, topics := addPartitionsV3(in)
		st.Topics = make([]kmsg.AddPartitionsToTxnResponseTransactionTopic, len(topics))
		set := func(code func(t, p int) int16) {
			for k, rt := range topics {
				tt := &st.Topics[k]
				tt.Topic = rt.topic
				tt.Partitions = make([]kmsg.AddPartitionsToTxnResponseTransactionTopicPartition, len(rt.parts))
				for j, p := range rt.parts {
					tt.Partitions[j] = kmsg.AddPartitionsToTxnResponseTransactionTopicPartition{Partition: p, ErrorCode: code(k, j)}
				}
			}
		}
		var unknown [][]bool
		if !rtx.VerifyOnly { // a leader verifying its own partition knows it exists
			unknown = s.unknownTxnPartitions(topics)
		}
		if unknown != nil {
			set(func(t, p int) int16 {
				if unknown[t][p] {
					return kerr.UnknownTopicOrPartition.Code
				}
				return kerr.OperationNotAttempted.Code
			})
			continue
		}
		id, pid, epoch := rtx.TransactionalID, rtx.ProducerID, rtx.ProducerEpoch
		if rtx.VerifyOnly {
			var code txn.ErrorCode
			var per []txn.ErrorCode
			vcode := s.txn.coord.View(s.txn.coord.PartitionFor(id), func(c *txn.Coordinator) {
				code, per = c.VerifyPartitions(id, pid, epoch, tps)
			})
			idx := 0
			pos := make([][]int, len(topics))
			for k, rt := range topics {
				pos[k] = make([]int, len(rt.parts))
				for j := range rt.parts {
					pos[k][j] = idx
					idx++
				}
			}
			set(func(t, p int) int16 {
				switch {
				case vcode != 0:
					return vcode
				case code != txn.None:
					return int16(code)
				}
				return int16(per[pos[t][p]])
			})
			continue
		}
		mu.Lock()
		left++
		mu.Unlock()
		s.txn.coord.Do(id, func(c *txn.Coordinator, nowMs int64) (txn.Step, error) {
			return c.AddPartitions(id, pid, epoch, tps, nowMs), nil
		}, func(r txn.Reply) {
			set(func(int, int) int16 { return int16(r.Err) })
			finish()
		})
	}
	finish()
}

// txnTopic is one topic of a request in request order, partitions
// deduplicated.
type txnTopic struct {
	topic string
	parts []int32
}

// addPartitionsV3 flattens the request's topics: the partitions in
// request order (a topic listed twice is merged, a partition listed twice
// once) and the same grouped by topic for the response.
func addPartitionsV3(in []kmsg.AddPartitionsToTxnRequestTopic) ([]txn.TopicPartition, []txnTopic) {
	var tps []txn.TopicPartition
	var topics []txnTopic
	idx := map[string]int{}
	seen := map[txn.TopicPartition]bool{}
	for _, t := range in {
		i, ok := idx[t.Topic]
		if !ok {
			i = len(topics)
			idx[t.Topic] = i
			topics = append(topics, txnTopic{topic: t.Topic})
		}
		for _, p := range t.Partitions {
			tp := txn.TopicPartition{Topic: t.Topic, Partition: p}
			if seen[tp] {
				continue
			}
			seen[tp] = true
			tps = append(tps, tp)
			topics[i].parts = append(topics[i].parts, p)
		}
	}
	return tps, topics
}

// unknownTxnPartitions returns, per topic and partition, whether the
// partition does not exist; nil if every one exists.
func (s *Server) unknownTxnPartitions(topics []txnTopic) [][]bool {
	var out [][]bool
	for i, t := range topics {
		for j, p := range t.parts {
			if s.partitionExists(t.topic, p) {
				continue
			}
			if out == nil {
				out = make([][]bool, len(topics))
				for k := range topics {
					out[k] = make([]bool, len(topics[k].parts))
				}
			}
			out[i][j] = true
		}
	}
	return out
}
