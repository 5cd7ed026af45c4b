package txnhost

// The transaction coordinator's host (issue 8): txn.Coordinator on the
// leaders of __transaction_state.
//
// __transaction_state has Config.StatePartitions partitions (Kafka's
// transaction.state.log.num.partitions, 50), cleanup.policy=compact; a
// transactional id belongs to partition abs(javaHashCode(id)) % n, and the
// leader of that partition is its coordinator (FindCoordinator key type 1).
// On a single broker (Config.Cluster nil) the topic is created locally on
// first use and every partition is coordinated here; in cluster mode it is
// created through the controller (Config.Creator; replication
// min(StateReplication, live brokers), min.insync.replicas min(2,
// replication) as Kafka's transaction.state.log.min.isr) on the first
// FindCoordinator for a transaction, and the leader loop of a
// coordhost.Host follows the cluster view: it loads a partition when this
// broker becomes its leader (again on every new leader epoch, which is the
// coordinator epoch markers carry) and unloads it when leadership moves
// away (load, unload).
//
// Loading replays the partition (txn.Coordinator.Load per record, then
// Recover, whose steps finish the transactions the previous coordinator had
// prepared). A request finds its partition's part, calls the coordinator
// under the part's mutex and executes the returned txn.Step after unlocking
// (run): the Write is appended to the partition as a one-record batch and
// acknowledged like an acks=all produce (Config.WhenAcked), then WriteDone
// gives the next step; Markers are written by a goroutine (sendMarkers,
// MarkerWriter) that retries every partition until its marker is written or
// its topic is gone, then calls MarkersDone and writes the Complete record;
// the Reply answers the client as soon as it is known (EndTxn is answered
// once PrepareCommit/PrepareAbort is durable, as in Kafka; the markers
// follow).
//
// # Goroutines and locks
//
// The coordhost.Host owns the tick goroutine (every AbortInterval: tick,
// Tick on each loaded partition, aborting timed-out transactions and
// expiring idle ids) and the leader loop (cluster mode); wg tracks one
// goroutine per transaction whose markers are being written or whose write
// completion continues the step chain, and the waits of After. Close
// cancels ctx, closes the coordhost.Host and waits for wg. A part's mutex
// guards its coordinator and is never held across an engine append, a
// network call or another part's mutex. Every load and unload bumps the
// part's generation: a step continuation of an older generation stops (the
// new leader's Recover redoes what is unfinished).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/broker/coordhost"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// StateTopic is the transaction coordinator's internal topic.
const StateTopic = "__transaction_state"

// Defaults of Config (Kafka's).
const (
	DefaultStatePartitions  = 50
	DefaultStateReplication = 3
	DefaultAbortInterval    = 10 * time.Second
)

// Cluster is what the host needs of a replicated broker.
type Cluster interface {
	// Source hands out the cluster view the leader loop follows and
	// requests are routed by.
	coordhost.Source
	// WriteCheck returns the code refusing an acks=all append to
	// partition p of t on this broker now (not its leader, fewer in-sync
	// replicas than min.insync.replicas); 0: allowed.
	WriteCheck(t *engine.Topic, p int32) int16
	// BrokerAddr returns the address of broker id when it is registered
	// and not fenced.
	BrokerAddr(id int32) (string, bool)
}

// Config configures a Host.
type Config struct {
	NodeID      int32
	Coordinator txn.Config // transaction.max.timeout.ms, transactional.id.expiration.ms
	// StatePartitions is transaction.state.log.num.partitions (an
	// existing __transaction_state keeps its own count);
	// StateReplication is transaction.state.log.replication.factor
	// (cluster mode, capped by the live brokers); AbortInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms. Zero:
	// the defaults.
	StatePartitions  int32
	StateReplication int16
	AbortInterval    time.Duration

	// Engine holds __transaction_state. ProducerIDs hands out blocks of
	// producer ids unique in the cluster (ControllerBlocks, or a
	// txn.FileBlockSource on a single broker); NoProducerIDs says why it
	// is nil. Without either the host coordinates nothing (every request
	// COORDINATOR_NOT_AVAILABLE); without an engine it still hands out
	// producer ids.
	Engine        *engine.Engine
	ProducerIDs   txn.BlockSource
	NoProducerIDs error
	// Cluster is the replicated broker; nil: a single broker.
	Cluster Cluster
	// Creator proposes __transaction_state to the controller (cluster
	// mode).
	Creator coordhost.Creator
	// WhenAcked calls done once an append to l up to last may be
	// acknowledged as an acks=all produce is (durable here, or committed
	// to the in-sync replicas).
	WhenAcked func(l *engine.Log, last int64, done func(error))
	// Dial connects to another broker's inter-broker listener (TLS if
	// SSL); nil: plain TCP.
	Dial  func(ctx context.Context, addr string) (net.Conn, error)
	Clock Clock
	Log   *slog.Logger // nil: slog.Default()
}

type partState int8

const (
	unloaded partState = iota
	loading
	loaded
)

// part is the coordinator of one __transaction_state partition.
type part struct {
	p     int32
	mu    sync.Mutex
	state partState
	gen   uint64 // bumped by every load and unload
	coord *txn.Coordinator
	epoch int32 // leader epoch the partition was loaded at (coordinator epoch)
}

// Host hosts the transaction coordinator on the __transaction_state
// partitions this broker leads. Its methods are safe for concurrent use.
type Host struct {
	cfg      Config
	log      *slog.Logger
	ready    bool           // an engine to coordinate on and producer ids
	ids      *txn.IDManager // nil without Config.ProducerIDs
	nparts   int32
	parts    []*part
	host     *coordhost.Host // the leader loop (cluster mode), the tick, the topic's proposal
	createMu sync.Mutex      // single broker: local creation

	ctx    context.Context
	cancel context.CancelFunc
	goMu   sync.Mutex // orders goOwned's wg.Add before Close's Wait
	closed bool       // under goMu
	wg     sync.WaitGroup

	client   *Client // markers, remote verification
	markers  MarkerWriter
	selfAddr atomic.Pointer[string] // a local listener's address (NoteListener), for markers to this broker

	// clientAddWaits counts client adds that found the producer's previous
	// transaction still completing and waited for it (ClientAdd).
	clientAddWaits atomic.Int64
	// markerGate, when a test sets it before the first transaction, holds
	// every marker send until it receives from the channel.
	markerGate atomic.Pointer[chan struct{}]
}

// New returns a host and starts its goroutines: the tick, and the leader
// loop in cluster mode (a single broker loads every partition of an
// existing __transaction_state now).
func New(cfg Config) *Host {
	if cfg.StatePartitions <= 0 {
		cfg.StatePartitions = DefaultStatePartitions
	}
	if cfg.StateReplication <= 0 {
		cfg.StateReplication = DefaultStateReplication
	}
	if cfg.AbortInterval <= 0 {
		cfg.AbortInterval = DefaultAbortInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	h := &Host{cfg: cfg, log: cfg.Log}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if cfg.ProducerIDs != nil {
		h.ids = txn.NewIDManager(cfg.ProducerIDs)
	}
	if cfg.Engine == nil || h.ids == nil {
		return h
	}
	h.nparts = cfg.StatePartitions
	if t := cfg.Engine.Topic(StateTopic); t != nil {
		h.nparts = t.Partitions()
	}
	h.parts = make([]*part, h.nparts)
	for i := range h.parts {
		h.parts[i] = &part{p: int32(i)}
	}
	h.client = NewClient(fmt.Sprintf("strata-txn-coordinator-%d", cfg.NodeID), cfg.Dial, cfg.Clock)
	h.markers = MarkerWriter{Client: h.client, Leader: h.markerLeader, Clock: cfg.Clock, Log: h.log}
	h.host = coordhost.New(coordhost.Config{
		Topic: coordhost.Topic{
			Name:        StateTopic,
			Partitions:  h.nparts,
			Replication: cfg.StateReplication,
			// transaction.state.log.min.isr (2): a transition is durable
			// only once two replicas have it, capped by the replication
			// factor.
			MinInsync: 2,
			Configs:   StateTopicConfigs(),
		},
		Name:      "txn",
		Load:      h.load,
		Unload:    h.unload,
		Partition: group.PartitionFor, // over the view's partition count
		Creator:   cfg.Creator,
		Clock:     cfg.Clock,
		Log:       h.log,
	})
	h.ready = true
	if cfg.Cluster != nil {
		h.host.Follow(cfg.Cluster)
	} else if cfg.Engine.Topic(StateTopic) != nil {
		h.loadAllLocal()
	}
	h.host.Every(cfg.AbortInterval, h.tick)
	return h
}

// Close stops every goroutine of the host and waits for them.
func (h *Host) Close() {
	h.goMu.Lock()
	h.closed = true
	h.goMu.Unlock()
	h.cancel()
	if !h.ready {
		return
	}
	h.host.Close()
	h.wg.Wait()
	h.client.Close()
}

// Ready reports whether the host coordinates anything (it has an engine
// and producer ids).
func (h *Host) Ready() bool { return h.ready }

// Partitions is the partition count of __transaction_state the host
// coordinates on.
func (h *Host) Partitions() int32 { return h.nparts }

// PartitionFor returns the __transaction_state partition of id.
func (h *Host) PartitionFor(id string) int32 {
	return group.PartitionFor(id, h.nparts)
}

// Route is the coordhost.Host that names the coordinator of a
// transactional id in a view (FindCoordinator); nil when not Ready.
func (h *Host) Route() *coordhost.Host {
	if !h.ready {
		return nil
	}
	return h.host
}

// NoteListener records the address markers to this broker are sent to: the
// listener itself (a wildcard address as loopback), not the advertised
// address, which need not be reachable from inside (NAT, containers). The
// first address noted stays.
func (h *Host) NoteListener(a net.Addr) {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	addr := net.JoinHostPort(host, port)
	h.selfAddr.CompareAndSwap(nil, &addr)
}

// goOwned runs fn on a goroutine owned by the host; false (fn not run)
// once it is closing.
func (h *Host) goOwned(fn func()) bool {
	h.goMu.Lock()
	if h.closed {
		h.goMu.Unlock()
		return false
	}
	h.wg.Add(1)
	h.goMu.Unlock()
	go func() {
		defer h.wg.Done()
		fn()
	}()
	return true
}

// After runs retry after d on a goroutine of the host, or giveUp if the
// host closes first. It returns false, running neither, when the host has
// closed already.
func (h *Host) After(d time.Duration, retry, giveUp func()) bool {
	return h.goOwned(func() {
		c, stop := h.cfg.Clock.After(d)
		defer stop()
		select {
		case <-c:
			retry()
		case <-h.ctx.Done():
			giveUp()
		}
	})
}

// ---- the topic ----

// EnsureTopic makes sure __transaction_state exists (single broker:
// created here and every partition loaded; cluster mode: its creation
// proposed to the controller). It returns 0 when the topic exists, else
// COORDINATOR_NOT_AVAILABLE.
func (h *Host) EnsureTopic() int16 {
	if !h.ready {
		return kerr.CoordinatorNotAvailable.Code
	}
	if h.cfg.Cluster != nil {
		v := h.cfg.Cluster.View()
		if v == nil || !h.host.Ensure(v) {
			return kerr.CoordinatorNotAvailable.Code
		}
		return 0
	}
	eng := h.cfg.Engine
	if eng.Topic(StateTopic) != nil {
		return 0
	}
	h.createMu.Lock()
	defer h.createMu.Unlock()
	if eng.Topic(StateTopic) != nil {
		return 0
	}
	_, err := eng.CreateTopic(StateTopic, h.nparts, StateTopicConfigs())
	if err != nil && !errors.Is(err, engine.ErrTopicExists) {
		h.log.Error("txn: creating "+StateTopic, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	h.loadAllLocal()
	return 0
}

// StateTopicConfigs are Kafka's transaction.state.log.* topic configs.
func StateTopicConfigs() map[string]string {
	return map[string]string{
		"cleanup.policy": "compact",
		"segment.bytes":  strconv.Itoa(100 << 20), // transaction.state.log.segment.bytes
	}
}

// coordinator returns the broker coordinating transactional id (cluster
// mode): the leader of its __transaction_state partition, when it is
// registered and not fenced, with its address; else
// COORDINATOR_NOT_AVAILABLE (before the topic exists, its proposal is
// started).
func (h *Host) coordinator(id string) (node int32, addr string, code int16) {
	v := h.cfg.Cluster.View()
	if v == nil || !h.ready {
		return -1, "", kerr.CoordinatorNotAvailable.Code
	}
	leader, ok := h.host.Coordinator(v, id)
	if !ok {
		return -1, "", kerr.CoordinatorNotAvailable.Code
	}
	addr, ok = h.cfg.Cluster.BrokerAddr(leader)
	if !ok {
		return -1, "", kerr.CoordinatorNotAvailable.Code
	}
	return leader, addr, 0
}

// ---- loading and unloading ----

// loadAllLocal loads every partition (single broker).
func (h *Host) loadAllLocal() {
	t := h.cfg.Engine.Topic(StateTopic)
	if t == nil {
		return
	}
	for p := int32(0); p < h.nparts; p++ {
		l := t.Partition(p)
		if l == nil {
			continue
		}
		if err := h.load(p, l.LeaderEpoch()); err != nil {
			h.log.Error("txn: loading a coordinator partition failed", "partition", p, "err", err)
		}
	}
}

// load replays partition p and becomes its coordinator at epoch.
func (h *Host) load(p int32, epoch int32) error {
	if p < 0 || int(p) >= len(h.parts) {
		return fmt.Errorf("txn: partition %d out of range", p)
	}
	tp := h.parts[p]
	tp.mu.Lock()
	tp.state = loading
	tp.gen++
	gen := tp.gen
	tp.coord = nil
	tp.mu.Unlock()

	coord := txn.NewCoordinator(h.cfg.Coordinator, epoch)
	var err error
	if t := h.cfg.Engine.Topic(StateTopic); t == nil {
		err = fmt.Errorf("%w: %s", engine.ErrUnknownTopic, StateTopic)
	} else if l := t.Partition(p); l == nil {
		err = fmt.Errorf("%w: %s-%d", engine.ErrUnknownTopic, StateTopic, p)
	} else {
		bad := 0
		err = ScanLog(l, func(hd *record.Header, r *record.Record) error {
			if hd.Control() {
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
			h.log.Error("txn: skipped undecodable "+StateTopic+" records", "partition", p, "records", bad)
		}
	}
	nowMs := h.nowMs()
	tp.mu.Lock()
	if tp.gen != gen {
		tp.mu.Unlock()
		return nil
	}
	if err != nil {
		tp.state = unloaded
		tp.mu.Unlock()
		return fmt.Errorf("txn: loading %s-%d: %w", StateTopic, p, err)
	}
	tp.coord, tp.epoch, tp.state = coord, epoch, loaded
	steps := coord.Recover(nowMs)
	tp.mu.Unlock()
	for _, st := range steps {
		h.run(tp, gen, stepID(st), st, nil)
	}
	return nil
}

// unload stops coordinating partition p.
func (h *Host) unload(p int32) {
	if p < 0 || int(p) >= len(h.parts) {
		return
	}
	tp := h.parts[p]
	tp.mu.Lock()
	tp.gen++
	tp.state, tp.coord = unloaded, nil
	tp.mu.Unlock()
}

// tick aborts timed-out transactions and expires idle ids (every
// AbortInterval, on the coordhost.Host's tick goroutine).
func (h *Host) tick(now time.Time) {
	nowMs := now.UnixMilli()
	for _, tp := range h.parts {
		tp.mu.Lock()
		if tp.state != loaded {
			tp.mu.Unlock()
			continue
		}
		gen := tp.gen
		steps := tp.coord.Tick(nowMs)
		tp.mu.Unlock()
		for _, st := range steps {
			if st.Write != nil && st.Write.State == txn.PrepareAbort {
				h.log.Info("txn: aborting a timed-out transaction", "transactional_id", st.Write.TransactionalID,
					"producer_id", st.Write.ProducerID, "timeout_ms", st.Write.TimeoutMs)
			}
			h.run(tp, gen, stepID(st), st, nil)
		}
	}
}

func (h *Host) nowMs() int64 { return h.cfg.Clock.Now().UnixMilli() }

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

// ReplyErr is a reply carrying only an error code.
func ReplyErr(code int16) txn.Reply {
	return txn.Reply{Err: txn.ErrorCode(code), ProducerID: txn.NoProducerID, ProducerEpoch: txn.NoProducerEpoch}
}

// Do runs fn on the coordinator of transactional id id and executes the
// step it returns; reply is called exactly once (possibly later, from
// another goroutine) with the answer for the client. An empty id is
// INVALID_REQUEST; a partition not coordinated here NOT_COORDINATOR, or
// COORDINATOR_LOAD_IN_PROGRESS while it loads; an error from fn (a
// producer id that could not be allocated) COORDINATOR_LOAD_IN_PROGRESS,
// which clients retry.
func (h *Host) Do(id string, fn func(c *txn.Coordinator, nowMs int64) (txn.Step, error), reply func(txn.Reply)) {
	if !h.ready {
		reply(ReplyErr(kerr.CoordinatorNotAvailable.Code))
		return
	}
	if id == "" {
		reply(ReplyErr(kerr.InvalidRequest.Code))
		return
	}
	if h.cfg.Cluster == nil {
		if code := h.EnsureTopic(); code != 0 {
			reply(ReplyErr(code))
			return
		}
	}
	tp := h.parts[h.PartitionFor(id)]
	tp.mu.Lock()
	switch tp.state {
	case unloaded:
		tp.mu.Unlock()
		reply(ReplyErr(kerr.NotCoordinator.Code))
		return
	case loading:
		tp.mu.Unlock()
		reply(ReplyErr(kerr.CoordinatorLoadInProgress.Code))
		return
	}
	gen := tp.gen
	st, err := fn(tp.coord, h.nowMs())
	tp.mu.Unlock()
	if err != nil {
		h.log.Warn("txn: allocating a producer id", "err", err)
		reply(ReplyErr(kerr.CoordinatorLoadInProgress.Code))
		return
	}
	h.run(tp, gen, id, st, reply)
}

// View reads the coordinator of __transaction_state partition p under its
// lock (Describe, List, verification). code is non-zero if p is not
// coordinated here now.
func (h *Host) View(p int32, fn func(c *txn.Coordinator)) int16 {
	if !h.ready || p < 0 || int(p) >= len(h.parts) {
		return kerr.CoordinatorNotAvailable.Code
	}
	tp := h.parts[p]
	tp.mu.Lock()
	defer tp.mu.Unlock()
	switch tp.state {
	case unloaded:
		return kerr.NotCoordinator.Code
	case loading:
		return kerr.CoordinatorLoadInProgress.Code
	}
	fn(tp.coord)
	return 0
}

// run executes st for id on part tp (generation gen): the write, then
// the reply, then the markers. reply may be nil (no client waits).
func (h *Host) run(tp *part, gen uint64, id string, st txn.Step, reply func(txn.Reply)) {
	if st.Write != nil && st.HasReply && reply != nil {
		// The answer is known before this write (the Complete record of
		// a transaction with no markers to write): the client's next
		// request waits on CONCURRENT_TRANSACTIONS until it is durable.
		reply(st.Reply)
		reply = nil
	}
	if st.Write != nil {
		md := st.Write
		h.write(tp, gen, md, func(ok bool) {
			// Continue off the acknowledging goroutine: the next step
			// may append again or start marker sends.
			if !h.goOwned(func() { h.writeDone(tp, gen, id, ok, reply) }) && reply != nil {
				reply(ReplyErr(kerr.CoordinatorNotAvailable.Code))
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
		h.log.Error("txn: coordinator step left a request unanswered", "transactional_id", id)
		reply(ReplyErr(kerr.UnknownServerError.Code))
	}
	if st.Markers != nil {
		m := *st.Markers
		h.goOwned(func() { h.sendMarkers(tp, gen, m) })
	}
}

// writeDone feeds a write's outcome back to the coordinator.
func (h *Host) writeDone(tp *part, gen uint64, id string, ok bool, reply func(txn.Reply)) {
	tp.mu.Lock()
	if tp.gen != gen || tp.state != loaded {
		tp.mu.Unlock()
		if reply != nil {
			reply(ReplyErr(kerr.NotCoordinator.Code))
		}
		return
	}
	next := tp.coord.WriteDone(id, ok, h.nowMs())
	tp.mu.Unlock()
	h.run(tp, gen, id, next, reply)
}

// write appends md's record to tp's partition and calls done once with
// whether it is committed (acks=all). It fails if the partition moved or
// its leader epoch is no longer the one it was loaded at.
func (h *Host) write(tp *part, gen uint64, md *txn.Metadata, done func(ok bool)) {
	fail := func(err error) {
		h.log.Warn("txn: writing "+StateTopic+" failed", "partition", tp.p, "transactional_id", md.TransactionalID, "err", err)
		done(false)
	}
	t := h.cfg.Engine.Topic(StateTopic)
	if t == nil {
		fail(engine.ErrUnknownTopic)
		return
	}
	l := t.Partition(tp.p)
	if l == nil {
		fail(engine.ErrUnknownTopic)
		return
	}
	clustered := h.cfg.Cluster != nil
	if clustered {
		// Leadership, and min.insync.replicas as for an acks=all produce.
		if code := h.cfg.Cluster.WriteCheck(t, tp.p); code != 0 {
			fail(kerr.ErrorForCode(code))
			return
		}
	}
	tp.mu.Lock()
	stale := tp.gen != gen || (clustered && tp.epoch != l.LeaderEpoch())
	tp.mu.Unlock()
	if stale {
		fail(kerr.NotCoordinator)
		return
	}
	key := txn.EncodeKey(nil, md.TransactionalID)
	value := txn.EncodeValue(nil, md) // nil for Dead: a tombstone
	var b record.Builder
	now := h.nowMs()
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
	h.cfg.WhenAcked(l, info.LastOffset, func(err error) {
		if err != nil {
			fail(err)
			return
		}
		done(true)
	})
}

// ---- markers ----

// markerLeader finds the leader of topic/partition (MarkerWriter.Leader).
func (h *Host) markerLeader(topic string, partition int32) (addr string, t Target) {
	self := func() (string, Target) {
		if a := h.selfAddr.Load(); a != nil {
			return *a, TargetLeader
		}
		return "", TargetRetry // not serving yet
	}
	if h.cfg.Cluster == nil {
		et := h.cfg.Engine.Topic(topic)
		if et == nil || et.Partition(partition) == nil {
			return "", TargetGone
		}
		return self()
	}
	v := h.cfg.Cluster.View()
	if v == nil {
		return "", TargetRetry
	}
	n, ok := v.Partitions(topic)
	if !ok || partition < 0 || partition >= n {
		return "", TargetGone
	}
	leader := v.Leader(topic, partition)
	if leader == h.cfg.NodeID {
		return self()
	}
	addr, ok = h.cfg.Cluster.BrokerAddr(leader)
	if !ok {
		return "", TargetRetry
	}
	return addr, TargetLeader
}

// sendMarkers writes m's markers (on a goroutine of the host), then
// completes the transaction: MarkersDone's Complete record is written,
// retried (backoff as the markers') until it is or the partition is
// unloaded. It gives up when tp is unloaded or reloaded (the next
// coordinator recovers the transaction) or the host closes.
func (h *Host) sendMarkers(tp *part, gen uint64, m txn.Markers) {
	ctx := h.ctx
	current := func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return tp.gen == gen && tp.state == loaded
	}
	if gate := h.markerGate.Load(); gate != nil {
		select {
		case <-*gate:
		case <-ctx.Done():
			return
		}
	}
	if !h.markers.Send(ctx, m, current) {
		return
	}
	// Every marker is written: log Complete*, retrying a failed write.
	bo := backoff{clock: h.cfg.Clock, d: markerBackoffMin}
	for {
		tp.mu.Lock()
		if tp.gen != gen || tp.state != loaded {
			tp.mu.Unlock()
			return
		}
		st := tp.coord.MarkersDone(m.TransactionalID, h.nowMs())
		tp.mu.Unlock()
		if st.Write == nil {
			return
		}
		okc := make(chan bool, 1)
		h.write(tp, gen, st.Write, func(ok bool) { okc <- ok })
		var ok bool
		select {
		case ok = <-okc:
		case <-ctx.Done():
			return
		}
		tp.mu.Lock()
		if tp.gen != gen || tp.state != loaded {
			tp.mu.Unlock()
			return
		}
		tp.coord.WriteDone(m.TransactionalID, ok, h.nowMs())
		tp.mu.Unlock()
		if ok || !bo.wait(ctx) || !current() {
			return
		}
	}
}

// ---- test hooks ----

// HoldMarkers makes every marker send of transactions prepared from now
// on wait until it receives from gate (tests).
func (h *Host) HoldMarkers(gate chan struct{}) { h.markerGate.Store(&gate) }

// ClientAddWaits counts the client adds that waited out a previous
// transaction's markers (ClientAdd; tests).
func (h *Host) ClientAddWaits() int64 { return h.clientAddWaits.Load() }
