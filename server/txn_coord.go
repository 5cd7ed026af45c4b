package server

// The transaction coordinator (issue 8): hosting txn.Coordinator on the
// leaders of __transaction_state.
//
// __transaction_state has TxnConfig.StatePartitions partitions (Kafka's
// transaction.state.log.num.partitions, 50), cleanup.policy=compact; a
// transactional id belongs to partition abs(javaHashCode(id)) % n, and the
// leader of that partition is its coordinator (FindCoordinator key type 1).
// On a single broker the topic is created locally on first use and every
// partition is coordinated here; in cluster mode it is created through the
// controller (replication min(StateReplication, live brokers),
// min.insync.replicas min(2, replication) as Kafka's
// transaction.state.log.min.isr) on the first
// FindCoordinator for a transaction, and the leader loop of a
// coordhost.Host (broker/coordhost, as groups.go uses for
// __consumer_offsets; the adapters are in coordhost.go) follows the cluster
// view: it loads a partition when this broker becomes its leader (again on
// every new leader epoch, which is the coordinator epoch markers carry) and
// unloads it when leadership moves away (txnLoad, txnUnload).
//
// Loading replays the partition (txn.Coordinator.Load per record, then
// Recover, whose steps finish the transactions the previous coordinator had
// prepared). A request finds its partition's txnPart, calls the
// coordinator under the part's mutex and executes the returned txn.Step
// after unlocking (txnRun): the Write is appended to the partition as a
// one-record batch and acknowledged like an acks=all produce (whenAcked),
// then WriteDone gives the next step; Markers are sent by a goroutine
// (txnSendMarkers, txn_markers.go) that retries every partition until its
// marker is written or its topic is gone, then calls MarkersDone and writes
// the Complete record; the Reply answers the client as soon as it is known
// (EndTxn is answered once PrepareCommit/PrepareAbort is durable, as in
// Kafka; the markers follow).
//
// KIP-890: txn_verify.go gives partition leaders the coordinator's view
// of a partition (txnVerify, part 1) and adds a partition for a TV2 client
// (txnAddImplicit, part 2: TxnOffsetCommit v5 uses it); EndTxn v5 bumps
// the epoch at every end (txn.Coordinator). Clients use the TV2 flow only
// when ApiVersions advertises the transaction.version feature at 2, which
// needs Produce to add partitions implicitly first.
//
// # Goroutines and locks
//
// txnCoordState's host owns the tick goroutine (every AbortInterval:
// txnTick, Tick on each loaded partition, aborting timed-out transactions
// and expiring idle ids) and the leader loop (cluster mode); wg tracks one
// goroutine per transaction whose markers are being written or whose write
// completion continues the step chain. closeTxnCoordinator cancels ctx,
// closes the host and waits for wg. A txnPart's mutex guards its
// coordinator and is never held across an engine append, a network call or
// another part's mutex. Every load and unload bumps the part's generation: a step
// continuation of an older generation stops (the new leader's Recover
// redoes what is unfinished).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/broker/coordhost"
	"github.com/stratalog/strata/broker/txnhost"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// txnStateTopic is the transaction coordinator's internal topic.
const txnStateTopic = "__transaction_state"

type txnPartState int8

const (
	txnUnloaded txnPartState = iota
	txnLoading
	txnLoaded
)

// txnPart is the coordinator of one __transaction_state partition.
type txnPart struct {
	p     int32
	mu    sync.Mutex
	state txnPartState
	gen   uint64 // bumped by every load and unload
	coord *txn.Coordinator
	epoch int32 // leader epoch the partition was loaded at (coordinator epoch)
}

// txnCoordState is the Server's transaction coordinator.
type txnCoordState struct {
	ready    bool // initTxnCoordinator ran
	nparts   int32
	parts    []*txnPart
	cfg      txn.Config
	host     *coordhost.Host // the leader loop (cluster mode), the tick, the topic's proposal
	createMu sync.Mutex      // single broker: local creation

	ctx    context.Context
	cancel context.CancelFunc
	goMu   sync.Mutex // orders txnGo's wg.Add before closeTxnCoordinator's Wait
	closed bool       // under goMu
	wg     sync.WaitGroup

	markers      *txnhost.Client        // the coordinator's Kafka client (markers, remote verification)
	markerWriter txnhost.MarkerWriter   // txn_markers.go
	selfAddr     atomic.Pointer[string] // a local listener's address (noteListener), for markers to this broker

	// clientAddWaits counts client adds that found the producer's previous
	// transaction still completing and waited for it (txnClientAdd).
	clientAddWaits atomic.Int64
	// markerGate, when a test sets it before the first transaction, holds
	// every marker send until it receives from the channel.
	markerGate atomic.Pointer[chan struct{}]
}

// initTxnCoordinator is called by initTxn.
func (s *Server) initTxnCoordinator() {
	c := &s.txn.coord
	if s.eng == nil {
		return
	}
	tc := s.cfg.Txn
	if tc.StatePartitions <= 0 {
		tc.StatePartitions = DefaultTxnStatePartitions
	}
	if tc.StateReplication <= 0 {
		tc.StateReplication = DefaultTxnStateReplication
	}
	if tc.AbortInterval <= 0 {
		tc.AbortInterval = DefaultTxnAbortInterval
	}
	s.cfg.Txn = tc
	c.cfg = txn.Config{MaxTimeoutMs: tc.MaxTimeoutMs, IDExpirationMs: tc.IDExpirationMs}
	c.nparts = tc.StatePartitions
	if t := s.eng.Topic(txnStateTopic); t != nil {
		c.nparts = t.Partitions()
	}
	c.parts = make([]*txnPart, c.nparts)
	for i := range c.parts {
		c.parts[i] = &txnPart{p: int32(i)}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.markers = txnhost.NewClient(fmt.Sprintf("strata-txn-coordinator-%d", s.cfg.NodeID), s.cfg.Cluster.Dial, hostClock{s})
	c.markerWriter = txnhost.MarkerWriter{Client: c.markers, Leader: s.markerLeader, Clock: hostClock{s}, Log: s.log}
	c.host = coordhost.New(coordhost.Config{
		Topic: coordhost.Topic{
			Name:        txnStateTopic,
			Partitions:  c.nparts,
			Replication: tc.StateReplication,
			// transaction.state.log.min.isr (2): a transition is durable
			// only once two replicas have it, capped by the replication
			// factor.
			MinInsync: 2,
			Configs:   txnStateTopicConfigs(),
		},
		Name:      "txn",
		Load:      s.txnLoad,
		Unload:    s.txnUnload,
		Partition: group.PartitionFor, // over the view's partition count
		Creator:   hostCreator{s},
		Clock:     hostClock{s},
		Log:       s.log,
	})
	c.ready = true
	if s.clustered() {
		c.host.Follow(hostSource{s})
	} else if s.eng.Topic(txnStateTopic) != nil {
		s.txnLoadAllLocal()
	}
	c.host.Every(tc.AbortInterval, s.txnTick)
}

// closeTxnCoordinator stops every goroutine of the coordinator.
func (s *Server) closeTxnCoordinator() {
	c := &s.txn.coord
	if !c.ready {
		return
	}
	c.goMu.Lock()
	c.closed = true
	c.goMu.Unlock()
	c.cancel()
	c.host.Close()
	c.wg.Wait()
	c.markers.Close()
}

// txnGo runs fn on a goroutine owned by the coordinator; false (fn not
// run) once the server is closing.
func (s *Server) txnGo(fn func()) bool {
	c := &s.txn.coord
	c.goMu.Lock()
	if c.closed {
		c.goMu.Unlock()
		return false
	}
	c.wg.Add(1)
	c.goMu.Unlock()
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// txnAfter runs retry after d on a goroutine of the coordinator (txnGo), or
// giveUp if the coordinator stops first. It returns false, running
// neither, when the coordinator has stopped already.
func (s *Server) txnAfter(d time.Duration, retry, giveUp func()) bool {
	ctx := s.txn.coord.ctx
	return s.txnGo(func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			retry()
		case <-ctx.Done():
			giveUp()
		}
	})
}

// txnPartitionFor returns the __transaction_state partition of id.
func (s *Server) txnPartitionFor(id string) int32 {
	return group.PartitionFor(id, s.txn.coord.nparts)
}

// ---- the topic ----

// txnEnsureTopic makes sure __transaction_state exists (single broker:
// created here and every partition loaded; cluster mode: its creation
// proposed to the controller). It returns 0 when the topic exists.
func (s *Server) txnEnsureTopic() int16 {
	c := &s.txn.coord
	if !c.ready {
		return kerr.CoordinatorNotAvailable.Code
	}
	if s.clustered() {
		v := s.cluster.view.Load()
		if v == nil || !c.host.Ensure(hostView{s: s, v: v}) {
			return kerr.CoordinatorNotAvailable.Code
		}
		return 0
	}
	if s.eng.Topic(txnStateTopic) != nil {
		return 0
	}
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if s.eng.Topic(txnStateTopic) != nil {
		return 0
	}
	_, err := s.eng.CreateTopic(txnStateTopic, c.nparts, txnStateTopicConfigs())
	if err != nil && !errors.Is(err, engine.ErrTopicExists) {
		s.log.Error("txn: creating "+txnStateTopic, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	s.txnLoadAllLocal()
	return 0
}

// txnStateTopicConfigs are Kafka's transaction.state.log.* topic configs.
func txnStateTopicConfigs() map[string]string {
	return map[string]string{
		"cleanup.policy": "compact",
		"segment.bytes":  strconv.Itoa(100 << 20), // transaction.state.log.segment.bytes
	}
}

// txnCoordinatorNode returns the broker coordinating transactional id
// (cluster mode): the leader of its __transaction_state partition. Before
// the topic exists it starts its proposal and answers
// COORDINATOR_NOT_AVAILABLE (clients retry).
func (s *Server) txnCoordinatorNode(id string) (viewBroker, int16) {
	return s.coordinatorBroker(s.txn.coord.host, id) // coordhost.go
}

// ---- loading and unloading ----

// txnLoadAllLocal loads every partition (single broker).
func (s *Server) txnLoadAllLocal() {
	t := s.eng.Topic(txnStateTopic)
	if t == nil {
		return
	}
	for p := int32(0); p < s.txn.coord.nparts; p++ {
		l := t.Partition(p)
		if l == nil {
			continue
		}
		if err := s.txnLoad(p, l.LeaderEpoch()); err != nil {
			s.log.Error("txn: loading a coordinator partition failed", "partition", p, "err", err)
		}
	}
}

// txnLoad replays partition p and becomes its coordinator at epoch.
func (s *Server) txnLoad(p int32, epoch int32) error {
	c := &s.txn.coord
	if p < 0 || int(p) >= len(c.parts) {
		return fmt.Errorf("txn: partition %d out of range", p)
	}
	tp := c.parts[p]
	tp.mu.Lock()
	tp.state = txnLoading
	tp.gen++
	gen := tp.gen
	tp.coord = nil
	tp.mu.Unlock()

	coord := txn.NewCoordinator(c.cfg, epoch)
	var err error
	if t := s.eng.Topic(txnStateTopic); t == nil {
		err = fmt.Errorf("%w: %s", engine.ErrUnknownTopic, txnStateTopic)
	} else if l := t.Partition(p); l == nil {
		err = fmt.Errorf("%w: %s-%d", engine.ErrUnknownTopic, txnStateTopic, p)
	} else {
		bad := 0
		err = scanLog(l, func(h *record.Header, r *record.Record) error {
			if h.Control() {
				return nil
			}
			if coord.Load(r.Key, r.Value) != nil {
				bad++
			}
			return nil
		})
		if bad > 0 {
			// Kafka fails the load; a record we cannot read is skipped so
			// the other ids stay usable, and reported.
			s.log.Error("txn: skipped undecodable "+txnStateTopic+" records", "partition", p, "records", bad)
		}
	}
	nowMs := s.now().UnixMilli()
	tp.mu.Lock()
	if tp.gen != gen {
		tp.mu.Unlock()
		return nil
	}
	if err != nil {
		tp.state = txnUnloaded
		tp.mu.Unlock()
		return fmt.Errorf("txn: loading %s-%d: %w", txnStateTopic, p, err)
	}
	tp.coord, tp.epoch, tp.state = coord, epoch, txnLoaded
	steps := coord.Recover(nowMs)
	tp.mu.Unlock()
	for _, st := range steps {
		s.txnRun(tp, gen, stepID(st), st, nil)
	}
	return nil
}

// txnUnload stops coordinating partition p.
func (s *Server) txnUnload(p int32) {
	c := &s.txn.coord
	if p < 0 || int(p) >= len(c.parts) {
		return
	}
	tp := c.parts[p]
	tp.mu.Lock()
	tp.gen++
	tp.state, tp.coord = txnUnloaded, nil
	tp.mu.Unlock()
}

// txnTick aborts timed-out transactions and expires idle ids (every
// AbortInterval, on the host's tick goroutine).
func (s *Server) txnTick(now time.Time) {
	nowMs := now.UnixMilli()
	for _, tp := range s.txn.coord.parts {
		tp.mu.Lock()
		if tp.state != txnLoaded {
			tp.mu.Unlock()
			continue
		}
		gen := tp.gen
		steps := tp.coord.Tick(nowMs)
		tp.mu.Unlock()
		for _, st := range steps {
			if st.Write != nil && st.Write.State == txn.PrepareAbort {
				s.log.Info("txn: aborting a timed-out transaction", "transactional_id", st.Write.TransactionalID,
					"producer_id", st.Write.ProducerID, "timeout_ms", st.Write.TimeoutMs)
			}
			s.txnRun(tp, gen, stepID(st), st, nil)
		}
	}
}

// stepID is the transactional id a step without a request is about.
func stepID(st txn.Step) string {
	switch {
	case st.Write != nil:
		return st.Write.TransactionalID
	case st.Markers != nil:
		return st.Markers.TransactionalID
	}
	return ""
}

// ---- requests and steps ----

// txnReplyErr is a reply carrying only an error code.
func txnReplyErr(code int16) txn.Reply {
	return txn.Reply{Err: txn.ErrorCode(code), ProducerID: txn.NoProducerID, ProducerEpoch: txn.NoProducerEpoch}
}

// txnDo runs fn on the coordinator of transactional id id and executes the
// step it returns; reply is called exactly once (possibly later, from
// another goroutine) with the answer for the client. An empty id is left to
// fn (the coordinator answers INVALID_REQUEST).
func (s *Server) txnDo(id string, fn func(c *txn.Coordinator, nowMs int64) (txn.Step, error), reply func(txn.Reply)) {
	c := &s.txn.coord
	if !c.ready {
		reply(txnReplyErr(kerr.CoordinatorNotAvailable.Code))
		return
	}
	if id == "" {
		reply(txnReplyErr(kerr.InvalidRequest.Code))
		return
	}
	if !s.clustered() {
		if code := s.txnEnsureTopic(); code != 0 {
			reply(txnReplyErr(code))
			return
		}
	}
	tp := c.parts[s.txnPartitionFor(id)]
	tp.mu.Lock()
	switch tp.state {
	case txnUnloaded:
		tp.mu.Unlock()
		reply(txnReplyErr(kerr.NotCoordinator.Code))
		return
	case txnLoading:
		tp.mu.Unlock()
		reply(txnReplyErr(kerr.CoordinatorLoadInProgress.Code))
		return
	}
	gen := tp.gen
	st, err := fn(tp.coord, s.now().UnixMilli())
	tp.mu.Unlock()
	if err != nil {
		s.log.Warn("txn: allocating a producer id", "err", err)
		reply(txnReplyErr(kerr.CoordinatorLoadInProgress.Code))
		return
	}
	s.txnRun(tp, gen, id, st, reply)
}

// txnView reads a loaded coordinator under its lock (Describe/List).
// code is non-zero if id's partition is not coordinated here now.
func (s *Server) txnView(p int32, fn func(c *txn.Coordinator)) int16 {
	c := &s.txn.coord
	if !c.ready || p < 0 || int(p) >= len(c.parts) {
		return kerr.CoordinatorNotAvailable.Code
	}
	tp := c.parts[p]
	tp.mu.Lock()
	defer tp.mu.Unlock()
	switch tp.state {
	case txnUnloaded:
		return kerr.NotCoordinator.Code
	case txnLoading:
		return kerr.CoordinatorLoadInProgress.Code
	}
	fn(tp.coord)
	return 0
}

// newProducerID is the coordinator's newID.
func (s *Server) newProducerID() (int64, error) {
	if s.txn.ids == nil {
		return -1, fmt.Errorf("no producer id source: %v", s.txn.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), producerIDBlockTimeout)
	defer cancel()
	return s.txn.ids.Next(ctx)
}

// txnRun executes st for id on part tp (generation gen): the write, then
// the reply, then the markers. reply may be nil (no client waits).
func (s *Server) txnRun(tp *txnPart, gen uint64, id string, st txn.Step, reply func(txn.Reply)) {
	if st.Write != nil && st.HasReply && reply != nil {
		// The answer is known before this write (the Complete record of
		// a transaction with no markers to write): the client's next
		// request waits on CONCURRENT_TRANSACTIONS until it is durable.
		reply(st.Reply)
		reply = nil
	}
	if st.Write != nil {
		md := st.Write
		s.txnWrite(tp, gen, md, func(ok bool) {
			// Continue off the acknowledging goroutine: the next step
			// may append again or start marker sends.
			if !s.txnGo(func() { s.txnWriteDone(tp, gen, id, ok, reply) }) && reply != nil {
				reply(txnReplyErr(kerr.CoordinatorNotAvailable.Code))
			}
		})
		return
	}
	if st.HasReply && reply != nil {
		reply(st.Reply)
		reply = nil
	}
	if reply != nil {
		// A step without a reply for a waiting client is a coordinator
		// bug; never leave the client hanging.
		s.log.Error("txn: coordinator step left a request unanswered", "transactional_id", id)
		reply(txnReplyErr(kerr.UnknownServerError.Code))
	}
	if st.Markers != nil {
		m := *st.Markers
		s.txnGo(func() { s.txnSendMarkers(tp, gen, m) })
	}
}

// txnWriteDone feeds a write's outcome back to the coordinator.
func (s *Server) txnWriteDone(tp *txnPart, gen uint64, id string, ok bool, reply func(txn.Reply)) {
	tp.mu.Lock()
	if tp.gen != gen || tp.state != txnLoaded {
		tp.mu.Unlock()
		if reply != nil {
			reply(txnReplyErr(kerr.NotCoordinator.Code))
		}
		return
	}
	next := tp.coord.WriteDone(id, ok, s.now().UnixMilli())
	tp.mu.Unlock()
	s.txnRun(tp, gen, id, next, reply)
}

// txnWrite appends md's record to tp's partition and calls done once with
// whether it is committed (acks=all). It fails if the partition moved or
// its leader epoch is no longer the one it was loaded at.
func (s *Server) txnWrite(tp *txnPart, gen uint64, md *txn.Metadata, done func(ok bool)) {
	fail := func(err error) {
		s.log.Warn("txn: writing "+txnStateTopic+" failed", "partition", tp.p, "transactional_id", md.TransactionalID, "err", err)
		done(false)
	}
	t := s.eng.Topic(txnStateTopic)
	if t == nil {
		fail(engine.ErrUnknownTopic)
		return
	}
	l := t.Partition(tp.p)
	if l == nil {
		fail(engine.ErrUnknownTopic)
		return
	}
	if s.clustered() {
		// Leadership, and min.insync.replicas as for an acks=all produce.
		if code, _ := s.clusterProduceCheck(t, tp.p, -1); code != 0 {
			fail(kerr.ErrorForCode(code))
			return
		}
	}
	tp.mu.Lock()
	stale := tp.gen != gen || (s.clustered() && tp.epoch != l.LeaderEpoch())
	tp.mu.Unlock()
	if stale {
		fail(kerr.NotCoordinator)
		return
	}
	key := txn.EncodeKey(nil, md.TransactionalID)
	value := txn.EncodeValue(nil, md) // nil for Dead: a tombstone
	var b record.Builder
	now := s.now().UnixMilli()
	b.Reset(record.CodecNone, now)
	b.Add(now, key, value, nil)
	batch, err := b.AppendTo(nil)
	if err != nil {
		fail(err)
		return
	}
	info, err := l.Append(batch, l.LeaderEpoch())
	if err != nil {
		fail(err)
		return
	}
	s.whenAcked(l, info.LastOffset, func(err error) {
		if err != nil {
			fail(err)
			return
		}
		done(true)
	})
}
