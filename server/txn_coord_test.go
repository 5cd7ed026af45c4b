package server

import (
	"errors"
	"github.com/stratalog/strata/broker/txnhost"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// tv1Versions pins a client to Kafka 3.9's versions: EndTxn v4, the
// transaction flow before KIP-890 part 2 (v5 bumps the epoch at every end).
var tv1Versions = kgo.MaxVersions(kversion.V3_9_0())

// txnBroker is a broker over a data directory that a test stops and
// starts again (startBroker's are closed only at cleanup).
type txnBroker struct {
	t    *testing.T
	dir  string
	opts []func(*Config, *engine.Options)

	addr   string
	s      *Server
	eng    *engine.Engine
	served chan error
	logs   *logBuffer
}

func newTxnBroker(t *testing.T, opts ...func(*Config, *engine.Options)) *txnBroker {
	b := &txnBroker{t: t, dir: t.TempDir(), opts: opts}
	b.start()
	t.Cleanup(func() {
		if b.s != nil {
			b.stop()
		}
	})
	return b
}

func (b *txnBroker) start() {
	t := b.t
	t.Helper()
	b.logs = &logBuffer{}
	logger := slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := Config{NodeID: 0, ClusterID: "strata-test-cluster", NumPartitions: 1, AutoCreateTopics: true, Logger: logger}
	eopts := engine.Options{Dir: b.dir, Log: engine.DefaultLogConfig(), Logger: logger}
	for _, o := range b.opts {
		o(&cfg, &eopts)
	}
	cfg.LogDefaults = eopts.Log
	eng, err := engine.Open(eopts)
	if err != nil {
		t.Fatalf("engine.Open: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.eng, b.s, b.addr = eng, New(cfg, eng), ln.Addr().String()
	brokerLogs.Store(b.s, b.logs)
	b.served = make(chan error, 1)
	go func() { b.served <- b.s.Serve(ln) }()
}

func (b *txnBroker) stop() {
	t := b.t
	t.Helper()
	if err := b.s.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Errorf("Server.Close: %v", err)
	}
	select {
	case <-b.served:
	case <-time.After(testTimeout):
		t.Errorf("Server.Serve did not return after Close")
	}
	if err := b.eng.Close(); err != nil {
		t.Errorf("engine.Close: %v", err)
	}
	if t.Failed() {
		t.Logf("broker logs:\n%s", b.logs)
	}
	brokerLogs.Delete(b.s)
	b.s, b.eng = nil, nil
}

func (b *txnBroker) restart() {
	b.stop()
	b.start()
}

// describeTxn returns the coordinator's view of id.
func describeTxn(t *testing.T, cl *kgo.Client, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp := issue[*kmsg.DescribeTransactionsResponse](t, cl, req)
	if len(resp.TransactionStates) != 1 {
		t.Fatalf("DescribeTransactions: %d states", len(resp.TransactionStates))
	}
	return resp.TransactionStates[0]
}

// waitTxnState waits (bounded) until id is in state.
func waitTxnState(t *testing.T, cl *kgo.Client, id, state string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		st := describeTxn(t, cl, id)
		if st.ErrorCode == 0 && st.State == state {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction %s: state %q (error %d), want %s", id, st.State, st.ErrorCode, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func initTxnProducer(t *testing.T, cl *kgo.Client, id string, timeoutMs int32) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr(id)
	req.TransactionTimeoutMillis = timeoutMs
	for deadline := time.Now().Add(testTimeout); ; {
		resp := issue[*kmsg.InitProducerIDResponse](t, cl, req)
		if resp.ErrorCode == kerr.ConcurrentTransactions.Code && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("InitProducerId %s: %v", id, kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp.ProducerID, resp.ProducerEpoch
	}
}

func addPartitionsReq(id string, pid int64, epoch int16, topic string, parts ...int32) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: parts}}
	return req
}

func addPartitionsCodes(resp *kmsg.AddPartitionsToTxnResponse) []int16 {
	var out []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

// TestTxnCoordinatorProtocol drives the coordinator with raw requests:
// ids and epochs, fencing, errors of old versions, the state machine as
// DescribeTransactions and ListTransactions show it, markers and
// persistence across a restart.
func TestTxnCoordinatorProtocol(t *testing.T) {
	b := newTxnBroker(t)
	cl := newClient(t, b.addr, tv1Versions)
	createTxnTestTopic(t, cl, "in", 2)

	// FindCoordinator for a transaction: this broker.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKey, fc.CoordinatorKeys = 1, "tx", []string{"tx", ""}
	fresp := issue[*kmsg.FindCoordinatorResponse](t, cl, fc)
	byKey := map[string]kmsg.FindCoordinatorResponseCoordinator{}
	for _, c := range fresp.Coordinators {
		byKey[c.Key] = c
	}
	if len(byKey) != 2 || byKey["tx"].ErrorCode != 0 || byKey["tx"].NodeID != 0 || byKey[""].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("FindCoordinator: %+v", fresp.Coordinators)
	}

	pid, epoch := initTxnProducer(t, cl, "tx", 60000)
	if pid < 0 || epoch != 0 {
		t.Fatalf("first InitProducerId: %d/%d", pid, epoch)
	}
	// A second producer instance: same id, next epoch (fences the first).
	pid2, epoch2 := initTxnProducer(t, cl, "tx", 60000)
	if pid2 != pid || epoch2 != 1 {
		t.Fatalf("second InitProducerId: %d/%d, want %d/1", pid2, epoch2, pid)
	}
	bad := kmsg.NewPtrInitProducerIDRequest()
	bad.TransactionalID, bad.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 0
	if r := issue[*kmsg.InitProducerIDResponse](t, cl, bad); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("timeout 0: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	raw := dialRaw(t, b.addr)
	corr := int32(0)
	addV := func(version int16, req *kmsg.AddPartitionsToTxnRequest) []int16 {
		corr++
		req.Version = version
		resp := kmsg.NewPtrAddPartitionsToTxnResponse()
		raw.roundTrip(req, corr, resp)
		return addPartitionsCodes(resp)
	}
	// The fenced epoch: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before.
	if got := addV(3, addPartitionsReq("tx", pid, 0, "in", 0)); got[0] != kerr.ProducerFenced.Code {
		t.Fatalf("v3 with the fenced epoch: %v", got)
	}
	if got := addV(1, addPartitionsReq("tx", pid, 0, "in", 0)); got[0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("v1 with the fenced epoch: %v", got)
	}
	if got := addV(3, addPartitionsReq("tx", pid+1, 1, "in", 0)); got[0] != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("another producer id: %v", got)
	}
	unknown := addPartitionsReq("tx", pid, 1, "in", 0)
	unknown.Topics = append(unknown.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: "nope", Partitions: []int32{0}})
	if got := addV(3, unknown); got[0] != kerr.OperationNotAttempted.Code || got[1] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", got)
	}
	if got := addV(3, addPartitionsReq("tx", pid, 1, "in", 0, 1)); got[0] != 0 || got[1] != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", got)
	}
	st := describeTxn(t, cl, "tx")
	if st.ErrorCode != 0 || st.State != "Ongoing" || st.ProducerID != pid || st.ProducerEpoch != 1 || st.TimeoutMillis != 60000 ||
		st.StartTimestamp <= 0 || len(st.Topics) != 1 || st.Topics[0].Topic != "in" || len(st.Topics[0].Partitions) != 2 {
		t.Fatalf("DescribeTransactions: %+v", st)
	}
	lreq := kmsg.NewPtrListTransactionsRequest()
	lreq.StateFilters = []string{"Ongoing", "Bogus"}
	lresp := issue[*kmsg.ListTransactionsResponse](t, cl, lreq)
	if lresp.ErrorCode != 0 || len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != "tx" ||
		len(lresp.UnknownStateFilters) != 1 || lresp.UnknownStateFilters[0] != "Bogus" {
		t.Fatalf("ListTransactions: %+v", lresp)
	}
	if st := describeTxn(t, cl, "nobody"); st.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("unknown id: %v", kerr.ErrorForCode(st.ErrorCode))
	}

	// EndTxn with a wrong outcome for the state, then commit.
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "tx", pid, 1, true
	if r := issue[*kmsg.EndTxnResponse](t, cl, end); r.ErrorCode != 0 {
		t.Fatalf("EndTxn commit: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// The markers reach both partitions of "in" and the transaction completes.
	waitTxnState(t, cl, "tx", "CompleteCommit")
	if r := issue[*kmsg.EndTxnResponse](t, cl, end); r.ErrorCode != 0 {
		t.Fatalf("retried EndTxn commit: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	end.Commit = false
	if r := issue[*kmsg.EndTxnResponse](t, cl, end); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	for p := int32(0); p < 2; p++ {
		if got := controlBatches(t, b.eng, "in", p); got != 1 {
			t.Fatalf("partition %d holds %d control batches, want 1 COMMIT marker", p, got)
		}
	}

	// An open transaction survives a restart and is still Ongoing; the
	// next InitProducerId aborts it (fencing) and then bumps the epoch.
	if got := addV(3, addPartitionsReq("tx", pid, 1, "in", 1)); got[0] != 0 {
		t.Fatalf("second transaction: %v", got)
	}
	b.restart()
	cl2 := newClient(t, b.addr, tv1Versions)
	st = waitTxnState(t, cl2, "tx", "Ongoing")
	if st.ProducerID != pid || st.ProducerEpoch != 1 {
		t.Fatalf("after restart: %+v", st)
	}
	pid3, epoch3 := initTxnProducer(t, cl2, "tx", 60000)
	if pid3 != pid || epoch3 != 3 {
		t.Fatalf("InitProducerId over an open transaction: %d/%d, want %d/3 (abort at 2, then the bump)", pid3, epoch3, pid)
	}
	if got := controlBatches(t, b.eng, "in", 1); got != 2 {
		t.Fatalf("partition 1 holds %d control batches, want COMMIT and ABORT", got)
	}
}

// TestTxnTimeoutAborts: a transaction left open past its timeout is
// aborted by the coordinator, fencing its producer.
func TestTxnTimeoutAborts(t *testing.T) {
	b := newTxnBroker(t, func(c *Config, _ *engine.Options) { c.Txn.AbortInterval = 50 * time.Millisecond })
	cl := newClient(t, b.addr, tv1Versions)
	createTxnTestTopic(t, cl, "in", 1)
	pid, epoch := initTxnProducer(t, cl, "slow", 200)
	add := addPartitionsReq("slow", pid, epoch, "in", 0)
	if got := addPartitionsCodes(issue[*kmsg.AddPartitionsToTxnResponse](t, cl, add)); got[0] != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", got)
	}
	// A transactional batch holds the partition's last stable offset at
	// its first offset until the timeout aborts the transaction; then the
	// LSO moves past the ABORT marker and read_committed sees nothing.
	txnID := "slow"
	if r := txnProduce(t, cl, b.eng, "in", txnTestBatch(t, pid, epoch, 0, true, "hung", 3), &txnID); r.ErrorCode != 0 {
		t.Fatalf("transactional produce: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	adm := kadm.NewClient(cl)
	st := waitTxnState(t, cl, "slow", "CompleteAbort")
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(10 * time.Millisecond) {
		lso, end := lsoOf(t, adm, "in")
		if lso == end && end == 4 { // 3 records + the marker
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the timeout abort: LSO %d, log end %d; want both 4", lso, end)
		}
	}
	if p := fetchCommitted(t, cl, b.eng, "in", 0); len(p.AbortedTransactions) != 1 ||
		p.AbortedTransactions[0].ProducerID != pid || p.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("read_committed fetch: aborted transactions %+v, want producer %d from offset 0", p.AbortedTransactions, pid)
	}
	if st.ProducerEpoch != epoch+1 {
		t.Fatalf("aborted with epoch %d, want %d", st.ProducerEpoch, epoch+1)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "slow", pid, epoch, true
	if r := issue[*kmsg.EndTxnResponse](t, cl, end); r.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("EndTxn of the timed-out producer: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := controlBatches(t, b.eng, "in", 0); got != 1 {
		t.Fatalf("%d control batches, want the ABORT marker", got)
	}
}

// controlBatches counts the control batches of a partition.
func controlBatches(t *testing.T, eng *engine.Engine, topic string, p int32) int {
	t.Helper()
	l := eng.Topic(topic).Partition(p)
	n := 0
	if err := txnhost.ScanLog(l, func(h *record.Header, _ *record.Record) error {
		if h.Control() {
			n++ // one record per marker batch
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// createTopic creates topic with n partitions through kadm.
func createTxnTestTopic(t *testing.T, cl *kgo.Client, topic string, n int32) {
	t.Helper()
	resp, err := kadm.NewClient(cl).CreateTopics(testCtx(t), n, 1, nil, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
}

// TestTxnInitProducerIDBump: KIP-360 (InitProducerId v3+ with the current
// id and epoch) bumps the epoch; a stale epoch is fenced, as
// INVALID_PRODUCER_EPOCH below v4; a retried bump gets the same epoch.
func TestTxnInitProducerIDBump(t *testing.T) {
	addr, _, _ := startBroker(t, txnTestConfig)
	cl := newClient(t, addr)
	pid, epoch := initTxnProducer(t, cl, "bump", 10000)
	raw := dialRaw(t, addr)
	corr := int32(0)
	init := func(version int16, p int64, e int16) *kmsg.InitProducerIDResponse {
		corr++
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = version
		req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = kmsg.StringPtr("bump"), 10000, p, e
		resp := kmsg.NewPtrInitProducerIDResponse()
		raw.roundTrip(req, corr, resp)
		return resp
	}
	if r := init(4, pid, epoch); r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != epoch+1 {
		t.Fatalf("bump: %+v", r)
	}
	// The retry of that bump (the client missed the answer): same epoch.
	if r := init(4, pid, epoch); r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != epoch+1 {
		t.Fatalf("retried bump: %+v", r)
	}
	if r := init(4, pid+5, 0); r.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("another producer id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := init(4, pid, epoch+7); r.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("v4 unknown epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := init(3, pid, epoch+7); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("v3 unknown epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := init(4, pid, -1); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("id without epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := init(2, -1, -1); r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != epoch+2 {
		t.Fatalf("v2 new instance: %+v", r)
	}
}

// TestTxnAddPartitionsBatched: AddPartitionsToTxn v4 (sent by partition
// leaders, KIP-890) answers each transaction of the batch, and VerifyOnly
// reports membership without adding.
func TestTxnAddPartitionsBatched(t *testing.T) {
	addr, _, _ := startBroker(t, txnTestConfig)
	cl := newClient(t, addr)
	createTxnTestTopic(t, cl, "in", 2)
	pa, ea := initTxnProducer(t, cl, "a", 10000)
	pb, eb := initTxnProducer(t, cl, "b", 10000)
	raw := dialRaw(t, addr)
	corr := int32(0)
	batch := func(txns ...kmsg.AddPartitionsToTxnRequestTransaction) map[string][]int16 {
		corr++
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 4
		req.Transactions = txns
		resp := kmsg.NewPtrAddPartitionsToTxnResponse()
		raw.roundTrip(req, corr, resp)
		if resp.ErrorCode != 0 {
			t.Fatalf("top-level error %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		out := map[string][]int16{}
		for _, tx := range resp.Transactions {
			for _, tt := range tx.Topics {
				for _, p := range tt.Partitions {
					out[tx.TransactionalID] = append(out[tx.TransactionalID], p.ErrorCode)
				}
			}
		}
		return out
	}
	tx := func(id string, pid int64, epoch int16, verify bool, parts ...int32) kmsg.AddPartitionsToTxnRequestTransaction {
		return kmsg.AddPartitionsToTxnRequestTransaction{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, VerifyOnly: verify,
			Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "in", Partitions: parts}}}
	}
	got := batch(tx("a", pa, ea, false, 0), tx("b", pb, eb+1, false, 1))
	if len(got["a"]) != 1 || got["a"][0] != 0 || len(got["b"]) != 1 || got["b"][0] != kerr.ProducerFenced.Code {
		t.Fatalf("batched add: %v", got)
	}
	got = batch(tx("a", pa, ea, true, 0, 1))
	if len(got["a"]) != 2 || got["a"][0] != 0 || got["a"][1] != kerr.TransactionAbortable.Code {
		t.Fatalf("verify: %v", got)
	}
	if st := describeTxn(t, cl, "a"); len(st.Topics) != 1 || len(st.Topics[0].Partitions) != 1 {
		t.Fatalf("verify-only added partitions: %+v", st)
	}

	// ListTransactions filters: producer id, duration, pattern.
	lreq := kmsg.NewPtrListTransactionsRequest()
	lreq.ProducerIDFilters = []int64{pb}
	if r := issue[*kmsg.ListTransactionsResponse](t, cl, lreq); len(r.TransactionStates) != 1 || r.TransactionStates[0].TransactionalID != "b" ||
		r.TransactionStates[0].TransactionState != "Empty" {
		t.Fatalf("producer filter: %+v", r.TransactionStates)
	}
	lreq = kmsg.NewPtrListTransactionsRequest()
	lreq.TransactionalIDPattern = kmsg.StringPtr("a|z")
	if r := issue[*kmsg.ListTransactionsResponse](t, cl, lreq); len(r.TransactionStates) != 1 || r.TransactionStates[0].TransactionalID != "a" {
		t.Fatalf("pattern filter: %+v", r.TransactionStates)
	}
	lreq.TransactionalIDPattern = kmsg.StringPtr("(")
	if r := issue[*kmsg.ListTransactionsResponse](t, cl, lreq); r.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad pattern: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	lreq = kmsg.NewPtrListTransactionsRequest()
	lreq.StateFilters = []string{"Ongoing"}
	lreq.DurationFilterMillis = 3_600_000
	if r := issue[*kmsg.ListTransactionsResponse](t, cl, lreq); len(r.TransactionStates) != 0 {
		t.Fatalf("duration filter: %+v", r.TransactionStates)
	}
}

// TestTxnOffsetCommitThroughMarkers: offsets committed in a transaction
// become the group's committed offsets only with the COMMIT marker, are
// dropped by ABORT, and stay staged across a restart until the
// transaction ends.
func TestTxnOffsetCommitThroughMarkers(t *testing.T) {
	b := newTxnBroker(t, txnTestConfig)
	cl := newClient(t, b.addr, tv1Versions)
	createTxnTestTopic(t, cl, "in", 1)
	pid, epoch := initTxnProducer(t, cl, "offs", 60000)
	txnCommit := func(cl *kgo.Client, offset int64) {
		t.Helper()
		ao := kmsg.NewPtrAddOffsetsToTxnRequest()
		ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "offs", pid, epoch, "g"
		for deadline := time.Now().Add(testTimeout); ; time.Sleep(10 * time.Millisecond) {
			r := issue[*kmsg.AddOffsetsToTxnResponse](t, cl, ao)
			if r.ErrorCode == kerr.ConcurrentTransactions.Code && time.Now().Before(deadline) {
				continue // the previous transaction is still completing
			}
			if r.ErrorCode != 0 {
				t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(r.ErrorCode))
			}
			break
		}
		oc := kmsg.NewPtrTxnOffsetCommitRequest()
		oc.TransactionalID, oc.Group, oc.ProducerID, oc.ProducerEpoch = "offs", "g", pid, epoch
		oc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{
			{Partition: 0, Offset: offset, LeaderEpoch: -1}, {Partition: 9, Offset: 1}}}}
		r := issue[*kmsg.TxnOffsetCommitResponse](t, cl, oc)
		if c := r.Topics[0].Partitions; c[0].ErrorCode != 0 || c[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("TxnOffsetCommit: %+v", c)
		}
	}
	end := func(cl *kgo.Client, commit bool) {
		t.Helper()
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "offs", pid, epoch, commit
		if r := issue[*kmsg.EndTxnResponse](t, cl, req); r.ErrorCode != 0 {
			t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	fetched := func(cl *kgo.Client) int64 {
		t.Helper()
		resp, err := kadm.NewClient(cl).FetchOffsets(testCtx(t), "g")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := resp.Lookup("in", 0); ok {
			return o.At
		}
		return -1
	}
	waitFetched := func(cl *kgo.Client, want int64) {
		t.Helper()
		for deadline := time.Now().Add(testTimeout); fetched(cl) != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("committed offset %d, want %d", fetched(cl), want)
			}
		}
	}

	stable := func(cl *kgo.Client, requireStable bool) (int64, int16) {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 7
		req.Group, req.RequireStable = "g", requireStable
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "in", Partitions: []int32{0}}}
		r := issue[*kmsg.OffsetFetchResponse](t, cl, req)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Fatalf("OffsetFetch: %+v", r)
		}
		p := r.Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	txnCommit(cl, 42)
	if got := fetched(cl); got != -1 {
		t.Fatalf("offset visible before the transaction ended: %d", got)
	}
	// KIP-447: require_stable tells a consumer to wait for the transaction.
	if off, code := stable(cl, true); code != kerr.UnstableOffsetCommit.Code || off != -1 {
		t.Fatalf("require_stable with a pending transactional offset: %d %v, want -1 UNSTABLE_OFFSET_COMMIT",
			off, kerr.ErrorForCode(code))
	}
	if off, code := stable(cl, false); code != 0 || off != -1 {
		t.Fatalf("OffsetFetch without require_stable: %d %v, want -1 and no error", off, kerr.ErrorForCode(code))
	}
	end(cl, true)
	waitFetched(cl, 42)
	if off, code := stable(cl, true); code != 0 || off != 42 {
		t.Fatalf("require_stable after the commit: %d %v, want 42", off, kerr.ErrorForCode(code))
	}

	txnCommit(cl, 50)
	end(cl, false)
	waitTxnState(t, cl, "offs", "CompleteAbort")
	if got := fetched(cl); got != 42 {
		t.Fatalf("after an aborted transaction: %d, want 42", got)
	}

	// Staged in the log when the broker restarts: still pending after the
	// load, applied by the marker of the commit that follows.
	txnCommit(cl, 60)
	b.restart()
	cl = newClient(t, b.addr, tv1Versions)
	waitTxnState(t, cl, "offs", "Ongoing")
	if got := fetched(cl); got != 42 {
		t.Fatalf("after a restart with a transaction open: %d, want 42", got)
	}
	if pids := b.s.Groups().PendingTxnProducers("g"); len(pids) != 1 || pids[0] != pid {
		t.Fatalf("pending producers after the load: %v, want [%d]", pids, pid)
	}
	end(cl, true)
	waitFetched(cl, 60)
	if pids := b.s.Groups().PendingTxnProducers("g"); len(pids) != 0 {
		t.Fatalf("pending producers after the commit: %v", pids)
	}
	// And the log says the same after another restart.
	b.restart()
	cl = newClient(t, b.addr)
	waitFetched(cl, 60)
}

// TestTxnRecoverPreparedOnLoad: a coordinator that finds a transaction in
// PrepareCommit when it loads its partition (the previous one stopped
// before the markers were written) writes the markers and completes it.
func TestTxnRecoverPreparedOnLoad(t *testing.T) {
	b := newTxnBroker(t, txnTestConfig)
	cl := newClient(t, b.addr)
	createTxnTestTopic(t, cl, "in", 2)
	pid, epoch := initTxnProducer(t, cl, "rec", 60000)
	if got := addPartitionsCodes(issue[*kmsg.AddPartitionsToTxnResponse](t, cl, addPartitionsReq("rec", pid, epoch, "in", 0, 1))); got[0] != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", got)
	}
	b.stop()

	// What the stopped coordinator would have logged for EndTxn(commit)
	// before dying: the same transaction in PrepareCommit.
	eng, err := engine.Open(engine.Options{Dir: b.dir, Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	p := group.PartitionFor("rec", DefaultTxnStatePartitions)
	l := eng.Topic(txnStateTopic).Partition(p)
	coord := txn.NewCoordinator(txn.Config{}, 0)
	if err := txnhost.ScanLog(l, func(_ *record.Header, r *record.Record) error { return coord.Load(r.Key, r.Value) }); err != nil {
		t.Fatal(err)
	}
	md, _, ok := coord.Get("rec")
	if !ok || md.State != txn.Ongoing {
		t.Fatalf("logged state %+v", md)
	}
	md.State = txn.PrepareCommit
	var bld record.Builder
	bld.Reset(record.CodecNone, time.Now().UnixMilli())
	bld.Add(time.Now().UnixMilli(), txn.EncodeKey(nil, "rec"), txn.EncodeValue(nil, &md), nil)
	batch, err := bld.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Append(batch, l.LeaderEpoch())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	l.WhenDurable(info.LastOffset, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	b.start()
	cl = newClient(t, b.addr)
	waitTxnState(t, cl, "rec", "CompleteCommit")
	for part := int32(0); part < 2; part++ {
		if got := controlBatches(t, b.eng, "in", part); got != 1 {
			t.Fatalf("partition %d: %d control batches, want the COMMIT marker", part, got)
		}
	}
}

// TestTxnTV2EndTxnBumps: the KIP-890 part 2 flow with raw requests: the
// partition and the group's offsets partition are added implicitly (as a
// partition leader and TxnOffsetCommit v5 do), and EndTxn v5 bumps the
// epoch with every end.
func TestTxnTV2EndTxnBumps(t *testing.T) {
	addr, s, eng := startBroker(t, txnTestConfig)
	cl := newClient(t, addr)
	createTxnTestTopic(t, cl, "in", 1)
	pid, e0 := initTxnProducer(t, cl, "tv2", 60000)
	added := make(chan int16, 1)
	s.txnAddImplicit("tv2", pid, e0, "in", 0, func(code int16) { added <- code })
	if code := <-added; code != 0 {
		t.Fatalf("implicit add: %v", kerr.ErrorForCode(code))
	}
	raw := dialRaw(t, addr)
	oc := kmsg.NewPtrTxnOffsetCommitRequest()
	oc.Version = 5
	oc.TransactionalID, oc.Group, oc.ProducerID, oc.ProducerEpoch, oc.Generation = "tv2", "g", pid, e0, -1
	oc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}}}
	ocResp := kmsg.NewPtrTxnOffsetCommitResponse()
	raw.roundTrip(oc, 1, ocResp)
	if code := ocResp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("TxnOffsetCommit v5: %v", kerr.ErrorForCode(code))
	}
	if st := describeTxn(t, cl, "tv2"); st.State != "Ongoing" || len(st.Topics) != 2 {
		t.Fatalf("after the implicit adds: %+v", st)
	}
	end := func(corr int32, epoch int16, commit bool) *kmsg.EndTxnResponse {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = 5
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "tv2", pid, epoch, commit
		resp := kmsg.NewPtrEndTxnResponse()
		raw.roundTrip(req, corr, resp)
		return resp
	}
	if r := end(2, e0, true); r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != e0+1 {
		t.Fatalf("EndTxn v5: %+v", r)
	}
	st := waitTxnState(t, cl, "tv2", "CompleteCommit")
	if st.ProducerEpoch != e0+1 {
		t.Fatalf("completed with epoch %d, want %d", st.ProducerEpoch, e0+1)
	}
	if got := controlBatches(t, eng, "in", 0); got != 1 {
		t.Fatalf("%d control batches, want the COMMIT marker", got)
	}
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(10 * time.Millisecond) {
		if got, _ := s.Groups().Fetch("g", nil); len(got) == 1 && got[0].Offset.Offset == 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the transaction's offset was never committed")
		}
	}
	// A retry of that end (the client missed the answer) gets the same answer.
	if r := end(3, e0, true); r.ErrorCode != 0 || r.ProducerEpoch != e0+1 {
		t.Fatalf("retried EndTxn v5: %+v", r)
	}
	// An abort with nothing added is allowed and bumps again.
	if r := end(4, e0+1, false); r.ErrorCode != 0 || r.ProducerEpoch != e0+2 {
		t.Fatalf("empty abort: %+v", r)
	}
	// The old epoch is fenced.
	s.txnAddImplicit("tv2", pid, e0, "in", 0, func(code int16) { added <- code })
	if code := <-added; code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("implicit add with a fenced epoch: %v", kerr.ErrorForCode(code))
	}
}

// TestTxnIDExpires: a transactional id idle for
// transactional.id.expiration.ms is forgotten (a tombstone in
// __transaction_state); the next InitProducerId gets a new producer id.
func TestTxnIDExpires(t *testing.T) {
	b := newTxnBroker(t, func(c *Config, _ *engine.Options) {
		c.Txn.AbortInterval, c.Txn.IDExpirationMs = 20*time.Millisecond, 200
	})
	cl := newClient(t, b.addr)
	pid, _ := initTxnProducer(t, cl, "idle", 10000)
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(10 * time.Millisecond) {
		if st := describeTxn(t, cl, "idle"); st.ErrorCode == kerr.TransactionalIDNotFound.Code {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle transactional id was never expired")
		}
	}
	// The id's last record in __transaction_state is a tombstone.
	l := b.eng.Topic(txnStateTopic).Partition(group.PartitionFor("idle", DefaultTxnStatePartitions))
	tombstone := false
	if err := txnhost.ScanLog(l, func(_ *record.Header, r *record.Record) error {
		if id, err := txn.DecodeKey(r.Key); err == nil && id == "idle" {
			tombstone = r.Value == nil
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !tombstone {
		t.Fatal("no tombstone for the expired id")
	}
	b.restart()
	cl = newClient(t, b.addr)
	if pid2, epoch := initTxnProducer(t, cl, "idle", 10000); pid2 == pid || epoch != 0 {
		t.Fatalf("InitProducerId after expiry: %d/%d, want a new id (old %d) at epoch 0", pid2, epoch, pid)
	}
}

// TestTxnMarkersSkipDeletedTopic: a topic deleted while in a transaction
// does not hold the transaction up: its markers are skipped, the others
// written.
func TestTxnMarkersSkipDeletedTopic(t *testing.T) {
	addr, _, eng := startBroker(t, txnTestConfig)
	cl := newClient(t, addr, tv1Versions)
	createTxnTestTopic(t, cl, "keep", 1)
	createTxnTestTopic(t, cl, "gone", 1)
	pid, epoch := initTxnProducer(t, cl, "del", 60000)
	add := addPartitionsReq("del", pid, epoch, "keep", 0)
	add.Topics = append(add.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: "gone", Partitions: []int32{0}})
	if got := addPartitionsCodes(issue[*kmsg.AddPartitionsToTxnResponse](t, cl, add)); got[0] != 0 || got[1] != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", got)
	}
	if dr, err := kadm.NewClient(cl).DeleteTopics(testCtx(t), "gone"); err != nil || dr.Error() != nil || eng.Topic("gone") != nil {
		t.Fatalf("deleting: %v %v", err, dr.Error())
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "del", pid, epoch, true
	if r := issue[*kmsg.EndTxnResponse](t, cl, end); r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	waitTxnState(t, cl, "del", "CompleteCommit")
	if got := controlBatches(t, eng, "keep", 0); got != 1 {
		t.Fatalf("%d control batches in keep-0, want the COMMIT marker", got)
	}
}

// TestTxnClientAddWaitsForMarkers: a client's AddPartitionsToTxn that
// arrives while the producer's previous transaction is still writing its
// markers waits for them instead of answering CONCURRENT_TRANSACTIONS at
// once (kafkajs retries that only after about 300 ms), and gets that answer
// only when the markers take longer than txnClientAddWait.
func TestTxnClientAddWaitsForMarkers(t *testing.T) {
	b := newTxnBroker(t, txnTestConfig)
	gate := make(chan struct{})
	b.s.txn.host.HoldMarkers(gate)
	cl := newClient(t, b.addr, tv1Versions)
	createTxnTestTopic(t, cl, "in", 2)
	pid, epoch := initTxnProducer(t, cl, "wait", 60000)
	add := func(p int32) <-chan int16 {
		out := make(chan int16, 1)
		go func() {
			resp, err := cl.Request(testCtx(t), addPartitionsReq("wait", pid, epoch, "in", p))
			if err != nil {
				t.Errorf("AddPartitionsToTxn: %v", err)
				out <- -1
				return
			}
			out <- addPartitionsCodes(resp.(*kmsg.AddPartitionsToTxnResponse))[0]
		}()
		return out
	}
	commit := func() {
		t.Helper()
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "wait", pid, epoch, true
		if r := issue[*kmsg.EndTxnResponse](t, cl, end); r.ErrorCode != 0 {
			t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if code := <-add(0); code != 0 {
		t.Fatalf("first AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
	}
	commit() // answered once PrepareCommit is durable; the markers wait at the gate

	// The next transaction's add waits for the markers, then succeeds.
	waiting := add(1)
	for deadline := time.Now().Add(testTimeout); b.s.txn.host.ClientAddWaits() == 0; time.Sleep(time.Millisecond) {
		select {
		case code := <-waiting:
			t.Fatalf("AddPartitionsToTxn answered %v while the markers were held", kerr.ErrorForCode(code))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the add never waited for the previous transaction")
		}
	}
	gate <- struct{}{}
	if code := <-waiting; code != 0 {
		t.Fatalf("AddPartitionsToTxn after the markers: %v", kerr.ErrorForCode(code))
	}
	waitTxnState(t, cl, "wait", "Ongoing")

	// Markers held past txnClientAddWait: the client gets the error and
	// retries as it always could.
	commit()
	if code := <-add(0); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("AddPartitionsToTxn with the markers held: %v, want CONCURRENT_TRANSACTIONS", kerr.ErrorForCode(code))
	}
	gate <- struct{}{}
	waitTxnState(t, cl, "wait", "CompleteCommit")
	if code := <-add(0); code != 0 {
		t.Fatalf("AddPartitionsToTxn after the transaction completed: %v", kerr.ErrorForCode(code))
	}
}
