package server

// KIP-890 on the Produce path: a partition leader makes sure a
// transactional batch belongs to an ongoing transaction before it opens one
// in the partition.
//
// # Why
//
// A transactional batch that arrives after its transaction ended (a late
// retry of a producer that aborted, or whose transaction timed out) would
// otherwise open a transaction the coordinator does not know and never
// ends, holding the partition's last stable offset, and so every
// read_committed consumer, until an operator aborts it.
//
// # What the leader asks
//
// For a Produce request with a transactional id, every transactional batch
// whose producer has no transaction open in the partition at the batch's
// epoch (engine.Log.BeginTxnVerification) goes to the producer's
// transaction coordinator before it is appended:
//
//   - Produce v12+ while transaction.version 2 is finalized (TxnConfig.
//     TransactionVersion; KIP-890 part 2, "TV2"): the client sent no
//     AddPartitionsToTxn, the leader adds the partition itself
//     (txnAddImplicit: AddPartitions on the local coordinator, else
//     AddPartitionsToTxn v4 without VerifyOnly to the remote one;
//     txnhost.Host.PartitionsOp);
//   - otherwise, when TxnConfig.PartitionVerification is on (Kafka's
//     transaction.partition.verification.enable; part 1): the leader asks
//     whether the client added it (txnVerify: VerifyPartitions locally,
//     AddPartitionsToTxn v4 VerifyOnly remotely).
//
// The partitions of one request and producer go to the coordinator in one
// call. The answer per partition is NONE (append), or the code the Produce
// partition gets without being appended, as Kafka's
// AddPartitionsToTxnManager maps it: a partition not in the transaction is
// TRANSACTION_ABORTABLE for Produce v11+ (clients that know it) and
// INVALID_TXN_STATE below; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH; a
// coordinator that cannot be asked now (moving, loading) is
// NOT_ENOUGH_REPLICAS, which every client retries. CONCURRENT_TRANSACTIONS
// (the producer's previous transaction is still writing its markers) is
// NOT_ENOUGH_REPLICAS for verification; a TV2 add answered so is asked
// again every 20 ms for up to 100 ms (Kafka's KAFKA-18654: a TV2 client
// starts its next transaction as soon as EndTxn returns, before the
// markers are written, and franz-go would otherwise wait for a metadata
// refresh, seconds, before retrying), and after that Produce v12+ gets
// CONCURRENT_TRANSACTIONS itself (KAFKA-18662), which clients retry.
//
// Between the answer and the append the transaction can still end (a
// timeout abort writes its marker): the engine's verification guard,
// taken by BeginTxnVerification and released after the append
// (EndTxnVerification), makes such an append fail with INVALID_TXN_STATE
// (engine/txn.go).
//
// # Order: requests that wait, and requests behind them
//
// A request without a transactional id, or without a transactional batch,
// stays on Produce's synchronous path: no allocation, lock or goroutine is
// added for it (BenchmarkProduceHandler). A transactional request with
// nothing to ask (its transactions are open in its partitions) passes
// through its lanes (below) and its guards and is appended inline, on the
// connection's goroutine. A request with something to ask is appended
// after every question returned: every partition of the request, in
// request order, on the goroutine that delivered the last answer (a
// coordinator goroutine, or the connection's own when the coordinator is
// local and answered at once).
//
// Idempotent producers pipeline up to five requests per broker, and
// franz-go does so in later transactions of a producer (once a partition
// had a successful answer), so request N+1 with the next sequence numbers
// for a partition can arrive while request N waits for the coordinator. In
// Kafka it is verified on its own and, if it overtakes N, answered
// OUT_OF_ORDER_SEQUENCE_NUMBER (VerificationStateEntry's lowest sequence);
// Java clients retry that, but franz-go treats it as fatal for a
// transactional producer. Here it never overtakes: every transactional
// request that takes this path queues on a lane per (partition log,
// producer id) (produceLanes), and runs (asks, appends) only when it is
// first in every lane it is in; a request leaves its lanes right after its
// appends, and the requests it let through run next. Lanes are entered in
// arrival order under one mutex, so the oldest waiting request is first in
// all of its lanes: no cycle, always progress. N+1 thus finds N's
// transaction open and appends without asking, or, if N failed, asks for
// itself; the engine's sequence checks still refuse anything out of order,
// so nothing is written twice or out of order either way. A request
// resent on a new connection while its first copy waits (the client timed
// out) queues behind the copy and is then answered as a duplicate.
//
// # Concurrency
//
// produceLanes.mu guards the lanes and produceTxn.waiting; it is never held
// across an engine or coordinator call. produceTxn's parts are written by
// the coordinator callbacks (one group of parts each) and read by finish,
// which runs once, after the last callback's atomic decrement of pending.
// done callbacks of txnVerify and txnAddImplicit never block and run on
// the caller's goroutine or on one the coordinator's host owns, never on
// the engine's flusher, so appending from them is allowed.

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// produceAddRetryBackoff and produceAddRetryMax: a TV2 add answered
	// CONCURRENT_TRANSACTIONS is retried by the leader every 20 ms for up
	// to 100 ms (Kafka's add.partitions.to.txn.retry.backoff.ms and
	// add.partitions.to.txn.retry.backoff.max.ms defaults).
	produceAddRetryBackoff = 20 * time.Millisecond
	produceAddRetryMax     = 100 * time.Millisecond
	// produceFirstImplicitAddVersion: Produce v12+ from a TV2 client adds
	// its partitions to the transaction implicitly (KIP-890 part 2).
	produceFirstImplicitAddVersion = 12
	// produceFirstAbortableVersion: Produce v11+ clients know
	// TRANSACTION_ABORTABLE (Kafka's GENERIC_ERROR_SUPPORTED).
	produceFirstAbortableVersion = 11
)

// produceLaneKey is one producer in one partition log.
type produceLaneKey struct {
	log *engine.Log
	pid int64
}

// produceLanes queues the transactional produce requests that take the
// verification path, per (log, producer): the first request of a lane
// holds it until its appends are done.
type produceLanes struct {
	mu sync.Mutex
	m  map[produceLaneKey][]*produceTxn

	waited atomic.Int64 // requests that entered behind another (tests)
}

// produceTxnPart is one transactional batch of a request.
type produceTxnPart struct {
	ti, pi    int // topic and partition index in the request
	log       *engine.Log
	topic     string
	partition int32
	pid       int64
	epoch     int16
	guarded   bool  // BeginTxnVerification succeeded: EndTxnVerification owed
	ask       bool  // the coordinator is asked
	code      int16 // the coordinator's answer, mapped; 0: append
}

// produceTxn is a Produce request on the verification path.
type produceTxn struct {
	s           *Server
	rc          *reqCtx
	req         *kmsg.ProduceRequest
	add         bool // TV2: add implicitly (else verify)
	abortableOK bool
	parts       []produceTxnPart // in request order
	keys        []produceLaneKey // distinct lanes of parts
	waiting     int              // lanes where another request is first (under lanes.mu)
	pending     atomic.Int32     // coordinator calls not yet answered
	cursor      int              // verdict's position in parts (finish only)
}

// produceTxnStart takes a Produce request with a transactional id
// (handleProduce). It returns false when the request has no transactional
// batch for this broker to append, or neither verification nor TV2
// applies (the caller appends synchronously as usual); otherwise the
// request is answered from here.
func (s *Server) produceTxnStart(rc *reqCtx, req *kmsg.ProduceRequest) bool {
	add := rc.version >= produceFirstImplicitAddVersion && s.cfg.Txn.TransactionVersion >= 2
	if !add && !s.cfg.Txn.PartitionVerification {
		return false
	}
	var parts []produceTxnPart
	for i := range req.Topics {
		rt := &req.Topics[i]
		topic, code, _ := s.produceTopic(rc, rt)
		if code != 0 {
			continue // answered by the append path
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			h, err := record.ParseHeader(rp.Records)
			if err != nil || !h.Transactional() || h.ProducerID < 0 {
				continue // not transactional, or refused by the append path
			}
			l := topic.Partition(rp.Partition)
			if l == nil {
				continue
			}
			if code, _ := s.clusterProduceCheck(topic, rp.Partition, req.Acks); code != 0 {
				continue // not the leader: answered by the append path
			}
			parts = append(parts, produceTxnPart{ti: i, pi: j, log: l, topic: topic.Name(), partition: rp.Partition,
				pid: h.ProducerID, epoch: h.ProducerEpoch})
		}
	}
	if len(parts) == 0 {
		return false
	}
	p := &produceTxn{s: s, rc: rc, req: req, add: add, abortableOK: rc.version >= produceFirstAbortableVersion, parts: parts}
	// Distinct lanes: a linear scan for the usual few partitions, a set
	// for large requests.
	var seen map[produceLaneKey]bool
	if len(parts) > 8 {
		seen = make(map[produceLaneKey]bool, len(parts))
	}
	for _, pt := range parts {
		k := produceLaneKey{pt.log, pt.pid}
		dup := false
		if seen != nil {
			dup = seen[k]
			seen[k] = true
		} else {
			dup = slices.Contains(p.keys, k)
		}
		if !dup {
			p.keys = append(p.keys, k)
		}
	}
	if s.txn.lanes.enter(p) {
		p.start()
	}
	return true
}

// enter queues p on its lanes; it reports whether p is first in all.
func (ls *produceLanes) enter(p *produceTxn) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = make(map[produceLaneKey][]*produceTxn)
	}
	for _, k := range p.keys {
		q := ls.m[k]
		if len(q) > 0 {
			p.waiting++
		}
		ls.m[k] = append(q, p)
	}
	if p.waiting > 0 {
		ls.waited.Add(1)
	}
	return p.waiting == 0
}

// leave removes p, the first of each of its lanes, and returns the
// requests now first in all of theirs.
func (ls *produceLanes) leave(p *produceTxn) (ready []*produceTxn) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, k := range p.keys {
		q := ls.m[k]
		if len(q) == 0 || q[0] != p {
			// Invariant broken (never expected): drop p wherever it is
			// rather than wedge the lane.
			p.s.log.Error("produce: transactional request was not first in its lane", "pid", k.pid, "log", k.log.String())
			for i := range q {
				if q[i] == p {
					q = append(q[:i:i], q[i+1:]...)
					break
				}
			}
		} else {
			q[0] = nil
			q = q[1:]
			if len(q) > 0 {
				if h := q[0]; h.waiting > 0 {
					h.waiting--
					if h.waiting == 0 {
						ready = append(ready, h)
					}
				}
			}
		}
		if len(q) == 0 {
			delete(ls.m, k)
		} else {
			ls.m[k] = q
		}
	}
	return ready
}

// start runs once p is first in all its lanes: guard every part, ask the
// coordinator about those that need it, and finish when all answered.
func (p *produceTxn) start() {
	asks := 0
	for i := range p.parts {
		pt := &p.parts[i]
		verify, err := pt.log.BeginTxnVerification(pt.pid, pt.epoch)
		if err != nil {
			continue // closed or offline: the append reports it
		}
		pt.guarded, pt.ask = true, verify
		if verify {
			asks++
		}
	}
	if asks == 0 {
		p.finish()
		return
	}
	// One coordinator call per (producer id, epoch): normally one for the
	// whole request. Group the asked parts; pending counts the calls.
	type group struct {
		pid   int64
		epoch int16
		idx   []int
	}
	var groups []group
	for i := range p.parts {
		pt := &p.parts[i]
		if !pt.ask {
			continue
		}
		g := -1
		for k := range groups {
			if groups[k].pid == pt.pid && groups[k].epoch == pt.epoch {
				g = k
				break
			}
		}
		if g < 0 {
			groups = append(groups, group{pid: pt.pid, epoch: pt.epoch})
			g = len(groups) - 1
		}
		groups[g].idx = append(groups[g].idx, i)
	}
	p.pending.Store(int32(len(groups)))
	deadline := p.s.now().Add(produceAddRetryMax)
	for _, g := range groups {
		tps := make([]txn.TopicPartition, len(g.idx))
		for k, i := range g.idx {
			tps[k] = txn.TopicPartition{Topic: p.parts[i].topic, Partition: p.parts[i].partition}
		}
		p.ask(g.pid, g.epoch, g.idx, tps, deadline)
	}
}

// ask asks the coordinator about the parts idx (tps) of producer
// pid/epoch. A TV2 add answered CONCURRENT_TRANSACTIONS (the producer's
// previous transaction is still writing its markers: a TV2 client starts
// the next one as soon as EndTxn returns) is asked again every
// produceAddRetryBackoff until deadline, as Kafka does (KAFKA-18654), so
// the client does not have to retry; the last answer stands.
func (p *produceTxn) ask(pid int64, epoch int16, idx []int, tps []txn.TopicPartition, deadline time.Time) {
	s := p.s
	s.txn.coord.PartitionsOp(*p.req.TransactionID, pid, epoch, tps, p.add, p.abortableOK, p.add, func(codes []int16) {
		if p.add && p.s.now().Add(produceAddRetryBackoff).Before(deadline) && slices.Contains(codes, kerr.ConcurrentTransactions.Code) &&
			s.txn.coord.After(produceAddRetryBackoff,
				func() { p.ask(pid, epoch, idx, tps, deadline) },
				func() { p.answered(idx, codes) }) {
			return
		}
		p.answered(idx, codes)
	})
}

// answered records the codes of the parts idx; the last group's answer
// finishes the request.
func (p *produceTxn) answered(idx []int, codes []int16) {
	for k, i := range idx {
		p.parts[i].code = codes[k]
	}
	if p.pending.Add(-1) == 0 {
		p.finish()
	}
}

// finish appends the request (handleProduce's append path, with the
// coordinator's answers), releases the guards and the lanes, and starts the
// requests that were waiting for them.
func (p *produceTxn) finish() {
	p.s.produceAppend(p.rc, p.req, 0, "", p)
	for i := range p.parts {
		if pt := &p.parts[i]; pt.guarded {
			pt.log.EndTxnVerification(pt.pid)
		}
	}
	for _, next := range p.s.txn.lanes.leave(p) {
		next.start()
	}
}

// verdict returns the coordinator's refusal of partition j of topic i
// (0: append). produceAppend calls it in request order.
func (p *produceTxn) verdict(i, j int) (int16, string) {
	for p.cursor < len(p.parts) {
		pt := &p.parts[p.cursor]
		if pt.ti > i || pt.ti == i && pt.pi > j {
			return 0, ""
		}
		p.cursor++
		if pt.ti == i && pt.pi == j && pt.code != 0 {
			switch pt.code {
			case kerr.InvalidTxnState.Code, kerr.TransactionAbortable.Code:
				return pt.code, "the partition is not in an ongoing transaction of the producer (transaction coordinator)"
			}
			return pt.code, "the transaction coordinator refused the batch: " + kerr.ErrorForCode(pt.code).Error()
		}
	}
	return 0, ""
}

// txnAddImplicit adds topic/partition to the ongoing transaction of
// producer pid/epoch (KIP-890 part 2: a TV2 client's first batch to a
// partition, or TxnOffsetCommit v5 for the group's __consumer_offsets
// partition, adds it without an AddPartitionsToTxn from the client), on
// the local coordinator or through the remote one. done is called once
// with NONE or the error for the request (as txnVerify's).
func (s *Server) txnAddImplicit(id string, pid int64, epoch int16, topic string, partition int32, done func(code int16)) {
	s.txn.coord.PartitionsOp(id, pid, epoch, []txn.TopicPartition{{Topic: topic, Partition: partition}}, true, true, false,
		func(codes []int16) { done(codes[0]) })
}

// txnVerify calls done exactly once, possibly on another goroutine, with
// NONE if topic/partition is in the ongoing transaction of producer
// pid/epoch of transactional id id, else the error for the batch.
// abortableOK selects TRANSACTION_ABORTABLE (Produce v11+) over
// INVALID_TXN_STATE for a partition not in the transaction. done must not
// block.
func (s *Server) txnVerify(id string, pid int64, epoch int16, topic string, partition int32, abortableOK bool, done func(code int16)) {
	s.txn.coord.PartitionsOp(id, pid, epoch, []txn.TopicPartition{{Topic: topic, Partition: partition}}, false, abortableOK, false,
		func(codes []int16) { done(codes[0]) })
}
