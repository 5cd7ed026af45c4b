package txnhost

// Partitions of a transaction asked about by a partition leader (KIP-890),
// and a client's adds that wait out the previous transaction.
//
// PartitionsOp is the coordinator side of the Produce path's verification
// (part 1: are these partitions in the producer's ongoing transaction?) and
// of the implicit adds of a TV2 client (part 2), on the local coordinator
// or through the remote one (AddPartitionsToTxn v4 over Client). ClientAdd
// is AddPartitionsToTxn v0..v3 and AddOffsetsToTxn: a client's add answered
// CONCURRENT_TRANSACTIONS is asked again for a short while, so a producer
// that starts its next transaction as soon as EndTxn returns does not wait
// for its own retry backoff.

import (
	"context"
	"time"

	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// verifyTimeout bounds a remote verification.
const verifyTimeout = 5 * time.Second

// PartitionsOp verifies (add false) or adds (add true) tps in the ongoing
// transaction of producer pid/epoch of transactional id id, on the local
// coordinator or through the remote one: done gets one code per tps entry,
// in order, exactly once, possibly on another goroutine (one the host
// owns), and must not block. The codes are what the Produce partition gets
// (0: append): a partition not in the transaction is TRANSACTION_ABORTABLE
// when abortableOK (Produce v11+) and INVALID_TXN_STATE otherwise;
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH; a coordinator that cannot be
// asked now (moving, loading) is NOT_ENOUGH_REPLICAS, which every client
// retries; CONCURRENT_TRANSACTIONS stays as it is when concurrentOK
// (Produce v12+ clients know it, Kafka's KAFKA-18662) and is
// NOT_ENOUGH_REPLICAS otherwise.
func (h *Host) PartitionsOp(id string, pid int64, epoch int16, tps []txn.TopicPartition, add, abortableOK, concurrentOK bool, done func(codes []int16)) {
	notIn := kerr.InvalidTxnState.Code
	if abortableOK {
		notIn = kerr.TransactionAbortable.Code
	}
	codes := make([]int16, len(tps))
	finish := func() {
		for i, code := range codes {
			if code == kerr.TransactionAbortable.Code {
				code = notIn
			}
			switch code {
			case kerr.ConcurrentTransactions.Code:
				if !concurrentOK {
					code = kerr.NotEnoughReplicas.Code // retriable for the producer
				}
			case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code:
				code = kerr.NotEnoughReplicas.Code // retriable for the producer
			case kerr.ProducerFenced.Code:
				code = kerr.InvalidProducerEpoch.Code
			}
			codes[i] = code
		}
		done(codes)
	}
	all := func(code int16) {
		for i := range codes {
			codes[i] = code
		}
		finish()
	}
	if id == "" {
		all(kerr.InvalidRequest.Code)
		return
	}
	local := h.cfg.Cluster == nil
	var addr string
	if !local {
		node, a, code := h.coordinator(id)
		if code != 0 {
			all(code)
			return
		}
		if node == h.cfg.NodeID {
			local = true
		} else {
			addr = a
		}
	}
	if local && add {
		h.Do(id, func(c *txn.Coordinator, nowMs int64) (txn.Step, error) {
			return c.AddPartitions(id, pid, epoch, tps, nowMs), nil
		}, func(r txn.Reply) { all(int16(r.Err)) })
		return
	}
	if local {
		var code txn.ErrorCode
		var per []txn.ErrorCode
		vcode := h.View(h.PartitionFor(id), func(c *txn.Coordinator) {
			code, per = c.VerifyPartitions(id, pid, epoch, tps)
		})
		switch {
		case vcode != 0:
			all(vcode)
		case code != txn.None:
			all(int16(code))
		default:
			for i := range codes {
				codes[i] = int16(per[i])
			}
			finish()
		}
		return
	}
	if !h.goOwned(func() {
		h.partitionsRemote(addr, id, pid, epoch, tps, !add, codes)
		finish()
	}) {
		all(kerr.CoordinatorNotAvailable.Code)
	}
}

// partitionsRemote asks the coordinator at addr to verify or add tps
// and fills codes (one per tps entry).
func (h *Host) partitionsRemote(addr, id string, pid int64, epoch int16, tps []txn.TopicPartition, verifyOnly bool, codes []int16) {
	ctx, cancel := context.WithTimeout(h.ctx, verifyTimeout)
	defer cancel()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	tx := kmsg.AddPartitionsToTxnRequestTransaction{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, VerifyOnly: verifyOnly}
	for _, tp := range tps {
		k := -1
		for i := range tx.Topics {
			if tx.Topics[i].Topic == tp.Topic {
				k = i
				break
			}
		}
		if k < 0 {
			tx.Topics = append(tx.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: tp.Topic})
			k = len(tx.Topics) - 1
		}
		tx.Topics[k].Partitions = append(tx.Topics[k].Partitions, tp.Partition)
	}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
	for i := range codes {
		codes[i] = kerr.CoordinatorNotAvailable.Code // unless answered
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if err := h.client.RoundTrip(ctx, addr, req, resp); err != nil {
		h.log.Warn("txn: asking a transaction coordinator about partitions failed", "coordinator", addr, "transactional_id", id, "err", err)
		return
	}
	if resp.ErrorCode != 0 {
		for i := range codes {
			codes[i] = resp.ErrorCode
		}
		return
	}
	for _, rtx := range resp.Transactions {
		if rtx.TransactionalID != id {
			continue
		}
		for _, t := range rtx.Topics {
			for _, p := range t.Partitions {
				for i, tp := range tps {
					if tp.Topic == t.Topic && tp.Partition == p.Partition {
						codes[i] = p.ErrorCode
					}
				}
			}
		}
	}
}

const (
	// clientAddBackoff and clientAddWait: a client's AddPartitionsToTxn
	// (v0..v3) or AddOffsetsToTxn answered CONCURRENT_TRANSACTIONS is
	// asked again every clientAddBackoff (doubling to
	// clientAddBackoffMax) for up to clientAddWait before that answer
	// goes out. A producer that starts its next transaction as soon as
	// EndTxn returns finds the last one still writing its markers (a few
	// ms: one durable write per partition leader, then the Complete
	// record); clients retry the error only after their own backoff
	// (kafkajs about 300 ms, librdkafka 20 ms), which made a kafkajs loop
	// of one-record transactions take 159-266 ms per transaction. Kafka
	// does the same wait on the broker for TV2 adds (KAFKA-18654) and
	// proposed it for these requests (KAFKA-9878). Markers stuck for
	// longer (a partition without a leader) still end in the error, well
	// inside a client's request timeout.
	clientAddBackoff    = 2 * time.Millisecond
	clientAddBackoffMax = 20 * time.Millisecond
	clientAddWait       = 500 * time.Millisecond
)

// ClientAdd adds tps to transactional id's transaction for a client
// request (AddPartitionsToTxn below v4, AddOffsetsToTxn), waiting out
// CONCURRENT_TRANSACTIONS as clientAddWait says, then calls reply once.
func (h *Host) ClientAdd(id string, pid int64, epoch int16, tps []txn.TopicPartition, reply func(txn.Reply)) {
	deadline := h.cfg.Clock.Now().Add(clientAddWait)
	backoff := clientAddBackoff
	var ask func()
	ask = func() {
		h.Do(id, func(c *txn.Coordinator, nowMs int64) (txn.Step, error) {
			return c.AddPartitions(id, pid, epoch, tps, nowMs), nil
		}, func(r txn.Reply) {
			if r.Err == txn.ConcurrentTransactions && h.cfg.Clock.Now().Add(backoff).Before(deadline) {
				if backoff == clientAddBackoff {
					h.clientAddWaits.Add(1)
				}
				wait := backoff
				backoff = min(2*backoff, clientAddBackoffMax)
				if h.After(wait, ask, func() { reply(r) }) {
					return
				}
			}
			reply(r)
		})
	}
	ask()
}
