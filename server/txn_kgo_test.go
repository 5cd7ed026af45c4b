package server

// Transactions end to end with franz-go: a transactional producer's
// commits and aborts as read_committed and read_uncommitted consumers see
// them, fencing by a second producer instance, and a GroupTransactSession
// copy (consume-transform-produce with the input offsets in the
// transaction) restarted mid-way, checked for exactly-once output. The
// producer and copy tests run every transaction flow of txnFlows (KIP-890
// part 2 and the older one) and check from the client's requests which
// flow ran; late batches of an aborted transaction are refused whatever
// the flow.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func txnTestConfig(c *Config, e *engine.Options) {
	groupTestConfig(c, e)
	c.Txn.AbortInterval = 100 * time.Millisecond
	c.Txn.TransactionVersion = 2
	c.Txn.PartitionVerification = true
}

// txnFlow is one way clients and the broker run transactions.
type txnFlow struct {
	name string
	tv   int16     // the broker's transaction.version
	opts []kgo.Opt // client options
	tv2  bool      // KIP-890 part 2 expected: no AddPartitionsToTxn/AddOffsetsToTxn, Produce v12+
}

// txnFlows: TV2 (the default), the broker at transaction.version 1 (the
// client adds partitions itself; Produce v11 is verified, part 1), and a
// TV2 broker with a client capped at Produce v11 (franz-go then keeps the
// old flow: KIP-890p2 needs Produce v12+).
func txnFlows() []txnFlow {
	capped := kversion.Stable()
	capped.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	return []txnFlow{
		{name: "tv2", tv: 2, tv2: true},
		{name: "tv1", tv: 1},
		{name: "tv2-broker-produce-v11", tv: 2, opts: []kgo.Opt{kgo.MaxVersions(capped)}},
	}
}

// config is txnTestConfig at the flow's transaction.version.
func (f txnFlow) config(c *Config, e *engine.Options) {
	txnTestConfig(c, e)
	c.Txn.TransactionVersion = f.tv
}

// newTxnClient is newClient, connected before it returns: franz-go picks
// its transaction flow (KIP-890 part 2 or not) from the broker's
// ApiVersions at BeginTransaction, and runs a transaction begun before it
// knew them in the old flow.
func newTxnClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := newClient(t, addr, opts...)
	if err := cl.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return cl
}

// txnReqCounter counts a client's requests by key (a kgo write hook).
type txnReqCounter struct {
	mu    sync.Mutex
	byKey map[int16]int
}

func newTxnReqCounter() *txnReqCounter {
	return &txnReqCounter{byKey: map[int16]int{}}
}

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (c *txnReqCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	c.byKey[key]++
	c.mu.Unlock()
}

// check asserts the flow the client ran.
func (c *txnReqCounter) check(t *testing.T, f txnFlow, wantOffsetsAdds bool) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	adds, offs, produces := c.byKey[int16(kmsg.AddPartitionsToTxn)], c.byKey[int16(kmsg.AddOffsetsToTxn)], c.byKey[int16(kmsg.Produce)]
	if produces == 0 {
		t.Fatalf("%s: the client sent no Produce", f.name)
	}
	if f.tv2 {
		if adds != 0 || offs != 0 {
			t.Fatalf("%s: the client sent %d AddPartitionsToTxn and %d AddOffsetsToTxn, want none (KIP-890 part 2)", f.name, adds, offs)
		}
		return
	}
	if adds == 0 {
		t.Fatalf("%s: the client sent no AddPartitionsToTxn: not the pre-KIP-890p2 flow", f.name)
	}
	if wantOffsetsAdds && offs == 0 {
		t.Fatalf("%s: the client sent no AddOffsetsToTxn", f.name)
	}
}

// consumeValues reads topic from the start with the isolation level until
// every want value (a prefix set) is seen and then the sentinel; it returns
// every value read before the sentinel, in order per partition.
func consumeUntilSentinel(t *testing.T, addr, topic string, committed bool, sentinels int) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx := testCtx(t)
	var out []string
	seen := 0
	for seen < sentinels {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consuming %s: %v after %d values, %d sentinels", topic, err, len(out), seen)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consuming %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "sentinel" {
				seen++
				return
			}
			out = append(out, string(r.Value))
		})
	}
	return out
}

// produceSentinels writes a non-transactional "sentinel" record to every
// partition of topic: consumers stop once they have read them all.
func produceSentinels(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < partitions; p++ {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: p, Value: []byte("sentinel")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTxnProducerCommitAbort(t *testing.T) {
	for _, f := range txnFlows() {
		t.Run(f.name, func(t *testing.T) { testTxnProducerCommitAbort(t, f) })
	}
}

func testTxnProducerCommitAbort(t *testing.T, f txnFlow) {
	addr, _, _ := startBroker(t, f.config)
	admin := newClient(t, addr)
	createTxnTestTopic(t, admin, "out", 2)
	reqs := newTxnReqCounter()
	p := newTxnClient(t, addr, append([]kgo.Opt{kgo.TransactionalID("commit-abort"), kgo.DefaultProduceTopic("out"),
		kgo.TransactionTimeout(30 * time.Second), kgo.WithHooks(reqs)}, f.opts...)...)
	ctx := testCtx(t)
	run := func(prefix string, n int, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			p.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("EndTransaction(%v): %v", commit, err)
		}
	}
	run("c1", 50, kgo.TryCommit)
	run("ab", 50, kgo.TryAbort)
	run("c2", 50, kgo.TryCommit)
	reqs.check(t, f, false)
	produceSentinels(t, addr, "out", 2)

	committed := consumeUntilSentinel(t, addr, "out", true, 2)
	if len(committed) != 100 {
		t.Errorf("read_committed read %d records, want 100", len(committed))
	}
	for _, v := range committed {
		if strings.HasPrefix(v, "ab-") {
			t.Fatalf("read_committed returned aborted record %q", v)
		}
	}
	all := consumeUntilSentinel(t, addr, "out", false, 2)
	if len(all) != 150 {
		t.Errorf("read_uncommitted read %d records, want 150 (aborted ones included)", len(all))
	}
}

func TestTxnProducerFenced(t *testing.T) {
	addr, _, _ := startBroker(t, txnTestConfig)
	admin := newClient(t, addr)
	createTxnTestTopic(t, admin, "out", 1)
	ctx := testCtx(t)
	opts := []kgo.Opt{kgo.TransactionalID("fence"), kgo.DefaultProduceTopic("out"), kgo.TransactionTimeout(30 * time.Second)}
	a := newClient(t, addr, opts...)
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := a.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A second instance with the same transactional id fences the first and
	// aborts its open transaction.
	b := newClient(t, addr, opts...)
	if err := b.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := b.ProduceSync(ctx, &kgo.Record{Value: []byte("live")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := b.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	err := a.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer's commit: %v, want PRODUCER_FENCED", err)
	}
	produceSentinels(t, addr, "out", 1)
	if got := consumeUntilSentinel(t, addr, "out", true, 1); len(got) != 1 || got[0] != "live" {
		t.Fatalf("read_committed: %q, want only the live producer's record", got)
	}
}

// TestTxnGroupTransactSessionCopy copies 20,000 records from "in" to "out"
// in transactions that commit the input offsets too; the copier is killed
// with a transaction open half way and a new one takes over.
func TestTxnGroupTransactSessionCopy(t *testing.T) {
	for _, f := range txnFlows() {
		t.Run(f.name, func(t *testing.T) { testTxnGroupTransactSessionCopy(t, f) })
	}
}

func testTxnGroupTransactSessionCopy(t *testing.T, f txnFlow) {
	const total = 20000
	addr, _, _ := startBroker(t, f.config)
	admin := newClient(t, addr)
	createTxnTestTopic(t, admin, "in", 2)
	createTxnTestTopic(t, admin, "out", 2)
	ctx := testCtx(t)
	src := newClient(t, addr, kgo.DefaultProduceTopic("in"))
	for i := 0; i < total; i++ {
		src.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 97)), Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	reqs := newTxnReqCounter()
	session := func() *kgo.GroupTransactSession {
		s, err := kgo.NewGroupTransactSession(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.TransactionalID("copier"),
			kgo.ConsumerGroup("copy"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.TransactionTimeout(5 * time.Second),
			kgo.SessionTimeout(6 * time.Second), kgo.FetchMaxWait(100 * time.Millisecond),
			kgo.DefaultProduceTopic("out"), kgo.FetchMaxPartitionBytes(32 << 10), kgo.WithHooks(reqs)}, f.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// copyN runs transactions until at least n input records are committed
	// (or the input is exhausted), then returns the count so far.
	copied, txns := 0, 0
	copyN := func(s *kgo.GroupTransactSession, n int, ctx context.Context) {
		for copied < n {
			fs := s.PollRecords(ctx, 500)
			if ctx.Err() != nil {
				t.Fatalf("copy: %v after %d records", ctx.Err(), copied)
			}
			if err := s.Begin(); err != nil {
				t.Fatal(err)
			}
			k := 0
			fs.EachRecord(func(r *kgo.Record) {
				k++
				s.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
			})
			ok, err := s.End(ctx, kgo.TryCommit)
			if err != nil {
				t.Fatalf("End: %v", err)
			}
			if ok {
				copied += k
				txns++
			}
		}
	}
	first := session()
	copyN(first, total/2, ctx)
	// Die with a transaction open: records produced, offsets not committed.
	fs := first.PollRecords(ctx, 500)
	if err := first.Begin(); err != nil {
		t.Fatal(err)
	}
	fs.EachRecord(func(r *kgo.Record) {
		first.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
	})
	if err := first.Client().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	first.Client().Close()
	firstCopied, firstTxns := copied, txns

	second := session()
	defer second.Close()
	// The rest: until the whole input is copied once.
	for copied < total {
		before := copied
		copyN(second, copied+1, ctx)
		if copied == before {
			t.Fatal("no progress")
		}
	}
	if copied != total {
		t.Fatalf("copied %d records, want %d", copied, total)
	}
	t.Logf("first copier: %d records in %d transactions, then died with one open; second: %d records in %d transactions",
		firstCopied, firstTxns, copied-firstCopied, txns-firstTxns)
	if firstCopied == 0 || firstCopied == total {
		t.Fatalf("the first copier copied %d of %d records: no restart mid-way", firstCopied, total)
	}
	reqs.check(t, f, true)
	produceSentinels(t, addr, "out", 2)
	out := consumeUntilSentinel(t, addr, "out", true, 2)
	count := map[string]int{}
	for _, v := range out {
		count[v]++
	}
	for i := 0; i < total; i++ {
		if c := count[strconv.Itoa(i)]; c != 1 {
			t.Fatalf("input record %d is in the output %d times (output %d records)", i, c, len(out))
		}
	}
	if len(out) != total {
		t.Fatalf("output has %d records, want %d", len(out), total)
	}
	// The dead copier's open transaction was aborted, not lost: its
	// records are in the log, visible to read_uncommitted only.
	if all := consumeUntilSentinel(t, addr, "out", false, 2); len(all) <= total {
		t.Fatalf("read_uncommitted read %d records, want the aborted ones beyond %d", len(all), total)
	}
}

// partitionOffsets returns the read_committed (LSO) and read_uncommitted
// (HW) latest offsets of topic/partition.
func partitionOffsets(t *testing.T, adm *kadm.Client, topic string, partition int32) (lso, hw int64) {
	t.Helper()
	c, err := adm.ListCommittedOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	e, err := adm.ListEndOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	co, _ := c.Lookup(topic, partition)
	eo, _ := e.Lookup(topic, partition)
	if co.Err != nil || eo.Err != nil {
		t.Fatalf("list offsets: %v %v", co.Err, eo.Err)
	}
	return co.Offset, eo.Offset
}

// TestTxnLateBatchRefused: a transactional batch that arrives after its
// transaction was aborted (a late retry) is refused, in the partition the
// transaction wrote to and in one it never touched, and neither moves the
// log end nor holds the last stable offset. The expected codes are
// Kafka's: INVALID_TXN_STATE for Produce v10-, TRANSACTION_ABORTABLE for
// v11+, INVALID_PRODUCER_EPOCH once a TV2 abort bumped the epoch.
func TestTxnLateBatchRefused(t *testing.T) {
	for _, tc := range []struct {
		flow    txnFlow
		version int16 // of the late Produce
		want    int16
	}{
		{txnFlows()[1], 9, kerr.InvalidTxnState.Code},
		{txnFlows()[1], 11, kerr.TransactionAbortable.Code},
		{txnFlows()[1], 13, kerr.TransactionAbortable.Code}, // TV1 broker: v13 is verified, not added
		{txnFlows()[0], 13, kerr.InvalidProducerEpoch.Code},
		{txnFlows()[0], 11, kerr.InvalidProducerEpoch.Code},
	} {
		t.Run(fmt.Sprintf("%s/v%d", tc.flow.name, tc.version), func(t *testing.T) {
			addr, _, eng := startBroker(t, tc.flow.config)
			admin := newClient(t, addr)
			adm := kadm.NewClient(admin)
			createTxnTestTopic(t, admin, "late", 2)
			p := newTxnClient(t, addr, kgo.TransactionalID("late"), kgo.DefaultProduceTopic("late"),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
			ctx := testCtx(t)
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := p.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("aborted")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			pid, epoch, err := p.ProducerID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.EndTransaction(ctx, kgo.TryAbort); err != nil {
				t.Fatal(err)
			}
			// Until its markers are written the transaction is still
			// ending: a batch then is retried (NOT_ENOUGH_REPLICAS) or,
			// at the epoch of the open transaction, joins it and is
			// aborted with it. Late means after that.
			waitTxnState(t, admin, "late", "CompleteAbort")
			raw := dialRaw(t, addr)
			id := eng.Topic("late").ID()
			for i, late := range []struct {
				partition int32
				seq       int32
			}{{0, 1}, {1, 0}} {
				lso0, hw0 := partitionOffsets(t, adm, "late", late.partition)
				req := prodRequest(tc.version, -1, "late", id, late.partition, txnTestBatch(t, pid, epoch, late.seq, true, "late", 2))
				req.TransactionID = kmsg.StringPtr("late")
				if got := prodRaw(t, raw, req, int32(i+1)); got.ErrorCode != tc.want {
					t.Fatalf("late batch to partition %d (producer %d epoch %d): %v, want %v", late.partition, pid, epoch,
						kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(tc.want))
				}
				lso, hw := partitionOffsets(t, adm, "late", late.partition)
				if hw != hw0 || lso != hw {
					t.Fatalf("partition %d after the late batch: LSO %d HW %d, want both %d", late.partition, lso, hw, hw0)
				}
				if lso0 != hw0 {
					t.Fatalf("partition %d before the late batch: LSO %d HW %d", late.partition, lso0, hw0)
				}
			}
			// The producer itself goes on: its next transaction commits.
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := p.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("next")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			produceSentinels(t, addr, "late", 2)
			if got := consumeUntilSentinel(t, addr, "late", true, 2); len(got) != 1 || got[0] != "next" {
				t.Fatalf("read_committed: %q, want only the committed record", got)
			}
		})
	}
}

// TestTxnPipelinedFirstBatches pipelines, on one connection, the first
// batch of a TV2 transaction in a partition (the broker adds the partition
// to the transaction: a coordinator write it waits for) and the next
// batches of the same producer: they must not overtake it, so all are
// appended, in sequence order, with no OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestTxnPipelinedFirstBatches(t *testing.T) {
	addr, s, eng := startBroker(t, txnTestConfig)
	admin := newClient(t, addr)
	createTxnTestTopic(t, admin, "pipe", 2)
	id := eng.Topic("pipe").ID()
	raw := dialRaw(t, addr)
	corr := int32(0)
	for round := 0; round < 5; round++ {
		txnID := fmt.Sprintf("pipe-%d", round)
		pid, epoch := initTxnProducer(t, admin, txnID, 30000)
		const batches = 4
		for i := 0; i < batches; i++ {
			// Partition 0 and 1 in one request, as a client draining both.
			req := prodRequest(13, -1, "pipe", id, 0, txnTestBatch(t, pid, epoch, int32(2*i), true, "p0", 2))
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = 1, txnTestBatch(t, pid, epoch, int32(3*i), true, "p1", 3)
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
			req.TransactionID = kmsg.StringPtr(txnID)
			corr++
			raw.writeFrame(encodeRequest(req, corr, "pipe"))
		}
		last := [2]int64{-1, -1}
		for i := 0; i < batches; i++ {
			b, err := raw.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			var resp kmsg.ProduceResponse
			resp.SetVersion(13)
			decodeResponse(t, b, corr-batches+1+int32(i), &resp)
			for _, p := range resp.Topics[0].Partitions {
				if p.ErrorCode != 0 {
					t.Fatalf("round %d request %d partition %d: %v", round, i, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
				if p.BaseOffset <= last[p.Partition] {
					t.Fatalf("round %d request %d partition %d at %d, after %d", round, i, p.Partition, p.BaseOffset, last[p.Partition])
				}
				last[p.Partition] = p.BaseOffset
			}
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, pid, epoch, true
		if resp := issue[*kmsg.EndTxnResponse](t, admin, end); resp.ErrorCode != 0 {
			t.Fatalf("EndTxn: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	// The first request of each round waits for the coordinator's write;
	// the three behind it were dispatched meanwhile and queued.
	if n := s.txn.lanes.waited.Load(); n == 0 {
		t.Fatal("no request ever waited behind another: the overtaking case was not exercised")
	} else {
		t.Logf("%d of %d requests queued behind an earlier one", n, 5*4)
	}
	s.txn.lanes.mu.Lock()
	left := len(s.txn.lanes.m)
	s.txn.lanes.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d lanes left after every request was answered", left)
	}
	produceSentinels(t, addr, "pipe", 2)
	if got := consumeUntilSentinel(t, addr, "pipe", true, 2); len(got) != 5*4*(2+3) {
		t.Fatalf("read_committed read %d records, want %d", len(got), 5*4*(2+3))
	}
}

// TestTxnClusterTV2: a TV2 producer on a 3-broker cluster, whose partition
// leaders are mostly not its transaction coordinator: they add the
// partitions remotely (AddPartitionsToTxn v4 from broker to coordinator)
// and verification is on; commits and aborts come out right for
// read_committed consumers, and the client never sent AddPartitionsToTxn.
func TestTxnClusterTV2(t *testing.T) {
	brokers, _ := startInCluster(t, 3)
	// The cluster harness has no server options: set the transaction
	// flow before any client connects (only Produce and ApiVersions read
	// these fields).
	for _, b := range brokers {
		b.s.cfg.Txn.TransactionVersion, b.s.cfg.Txn.PartitionVerification = 2, true
		b.s.txn.finalized = finalizedFeatures(2)
	}
	seeds := []string{brokers[0].addr, brokers[1].addr, brokers[2].addr}
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...))
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	waitRegistered(t, brokers)
	ct, err := adm.CreateTopic(ctx, 3, 3, nil, "tv2")
	if err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}
	reqs := newTxnReqCounter()
	p := newTxnClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.TransactionalID("cluster-tv2"), kgo.DefaultProduceTopic("tv2"),
		kgo.TransactionTimeout(20*time.Second), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.WithHooks(reqs))
	want := 0
	for round, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 30; i++ {
			p.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("r%d-%d", round, i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("EndTransaction: %v", err)
		}
		if commit {
			want += 30
		}
	}
	reqs.check(t, txnFlow{name: "cluster-tv2", tv2: true}, false)
	// At least one partition's leader is not the coordinator: its adds went
	// over the wire.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKey = 1, "cluster-tv2"
	coord := issue[*kmsg.FindCoordinatorResponse](t, cl, fc).NodeID
	remote := 0
	for _, mp := range clusterTopic(issue[*kmsg.MetadataResponse](t, cl, kmsg.NewPtrMetadataRequest()), "tv2").Partitions {
		if mp.Leader != coord {
			remote++
		}
	}
	if remote == 0 {
		t.Fatalf("every partition is led by the coordinator %d: no remote add tested", coord)
	}
	produceSentinels(t, seeds[0], "tv2", 3)
	got := consumeUntilSentinel(t, seeds[0], "tv2", true, 3)
	if len(got) != want {
		t.Fatalf("read_committed read %d records, want %d", len(got), want)
	}
	for _, v := range got {
		if strings.HasPrefix(v, "r1-") {
			t.Fatalf("read_committed returned aborted record %q", v)
		}
	}
}
