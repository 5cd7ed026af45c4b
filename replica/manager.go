package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratalog/strata/internal/clocks"
)

// Defaults, Kafka's.
const (
	DefaultLagTimeMaxMs          = 30000    // replica.lag.time.max.ms
	DefaultFetchMaxBytes         = 1 << 20  // replica.fetch.max.bytes
	DefaultFetchResponseMaxBytes = 10 << 20 // replica.fetch.response.max.bytes
	DefaultFetchWaitMaxMs        = 500      // replica.fetch.wait.max.ms
	DefaultFetchMinBytes         = 1        // replica.fetch.min.bytes
	DefaultFetchBackoffMs        = 1000     // replica.fetch.backoff.ms
	DefaultSocketTimeoutMs       = 30000    // replica.socket.timeout.ms
)

// Config configures a Manager. Zero values take the defaults above.
type Config struct {
	BrokerID int32 // this broker's id (the replica id in its Fetch requests)

	// BrokerAddr returns the host:port of a live broker's listener; false
	// when unknown (the fetcher backs off and asks again).
	BrokerAddr func(id int32) (hostport string, ok bool)

	// ISR carries the leader's ISR changes to the controller. nil: ISR
	// changes are never proposed (the ISR stays as BecomeLeader gave it).
	ISR ISRUpdater

	// BrokerEpoch returns this broker's current registration epoch, sent
	// in every Fetch as ReplicaState.ReplicaEpoch (KIP-903); nil, or a
	// value <= 0 (not registered yet), sends -1 (no epoch).
	BrokerEpoch func() int64
	// Registration is this broker's metadata view of broker id's
	// registration (Kafka's metadata cache): as a leader the Manager
	// refuses a follower's fetch carrying an older broker epoch than the
	// registered one, and adds a follower to the ISR only when it is
	// alive and its fetches carry the registered epoch (or none). nil:
	// epochs are not checked.
	Registration func(id int32) Registration

	// TierState builds a follower's log from remote storage when its
	// leader answers OFFSET_MOVED_TO_TIERED_STORAGE (tiered.go); nil:
	// the log restarts empty at the leader's local log start.
	TierState TierStateFunc

	// HoldAppends and ReleaseAppends bracket a fetch response's appends
	// when it carries records for more than one partition (the engine's
	// HoldJournal and ReleaseJournal): the appends then share one journal
	// group and one device flush, as a produce request's do, instead of
	// whatever the journal's writer finds staged each time it is free.
	// nil: not held.
	HoldAppends, ReleaseAppends func()

	LagTimeMaxMs          int64 // replica.lag.time.max.ms
	FetchMaxBytes         int32 // replica.fetch.max.bytes (per partition)
	FetchResponseMaxBytes int32 // replica.fetch.response.max.bytes
	FetchWaitMaxMs        int32 // replica.fetch.wait.max.ms
	FetchMinBytes         int32 // replica.fetch.min.bytes
	FetchBackoffMs        int64 // replica.fetch.backoff.ms
	SocketTimeoutMs       int64 // replica.socket.timeout.ms

	// Dial opens a connection to a leader (default: net.Dialer with the
	// socket timeout).
	Dial func(ctx context.Context, addr string) (net.Conn, error)

	Logger *slog.Logger
	// Now is the only clock the package reads: follower fetch times, the
	// ISR checks, backoffs, the fetchers' socket deadlines (so it must
	// track the wall clock when fetchers dial real brokers). Default:
	// the wall clock (clocks.Or).
	Now func() time.Time
}

// ISRUpdater is Kafka's AlterPartition path from a partition leader to the
// controller. It blocks until the controller committed or refused the
// change (or ctx ends). A refusal is a *kerr.Error (FENCED_LEADER_EPOCH,
// INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA, NOT_CONTROLLER, ...); any
// other error is treated as "unknown outcome" and the change is proposed
// again later.
type ISRUpdater interface {
	AlterPartition(ctx context.Context, req AlterPartition) (AlterPartitionResult, error)
}

// AlterPartition is one proposed ISR change.
type AlterPartition struct {
	Topic          string
	Partition      int32
	LeaderEpoch    int32   // the leader epoch the leader holds
	PartitionEpoch int32   // the partition epoch the leader knows
	ISR            []int32 // the proposed ISR, leader included
	// ISREpochs is, per ISR member, the broker epoch its fetches carried
	// (KIP-903), which the controller checks against the member's
	// registration (INELIGIBLE_REPLICA when it is not the current one);
	// -1: not checked (this broker, or a follower whose fetches carry
	// none).
	ISREpochs []int64
}

// Registration is a broker's registration in the metadata view
// (Config.Registration).
type Registration struct {
	Registered bool  // the broker is registered
	Alive      bool  // registered, not fenced and not shutting down
	Epoch      int64 // its registration's broker epoch
}

// AlterPartitionResult is the partition as the controller committed it.
type AlterPartitionResult struct {
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// Partition is the controller's state of one partition as this broker
// applies it.
type Partition struct {
	Log            *engine.Log
	Topic          string
	Partition      int32
	Leader         int32 // -1: no leader
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	MinISR         int // min.insync.replicas; <= 0 means 1
}

// FollowerStatus is the leader's view of one follower.
type FollowerStatus struct {
	ID             int32
	FetchOffset    int64 // = durable offset; -1 before its first fetch
	LastCaughtUpMs int64
	LastFetchMs    int64
	BrokerEpoch    int64 // the broker epoch its last counted fetch carried; -1 none
}

// Status is a partition's replication state (tests, metrics, admin).
type Status struct {
	Role           engine.Role
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	PendingISR     []int32 // an AlterPartition in flight, nil if none
	HighWatermark  int64
	LogEndOffset   int64
	DurableEnd     int64
	Followers      []FollowerStatus // leader only, in replica order
	Damaged        bool             // not eligible to lead until re-fetched
	FetchState     string           // follower: "truncating", "fetching", "idle" (no leader)
}

// ErrStaleState is returned by BecomeLeader/BecomeFollower for a state
// older than the one applied (lower leader epoch, or same leader epoch and
// lower partition epoch).
var ErrStaleState = errors.New("replica: partition state older than the applied one")

type tp struct {
	topic string
	part  int32
}

// Manager owns the replicated partitions of one broker.
type Manager struct {
	cfg     Config
	coreCfg coreConfig
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // fetchers, ISR checker, AlterPartition calls

	mu       sync.Mutex
	parts    map[tp]*partition
	byLog    sync.Map // *engine.Log -> *partition; written under mu, read without it (produce path)
	fetchers map[int32]*fetcher
	closed   bool
}

// New returns a running Manager (its ISR checker started); Close stops it.
func New(cfg Config) *Manager {
	if cfg.LagTimeMaxMs <= 0 {
		cfg.LagTimeMaxMs = DefaultLagTimeMaxMs
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if cfg.FetchResponseMaxBytes <= 0 {
		cfg.FetchResponseMaxBytes = DefaultFetchResponseMaxBytes
	}
	if cfg.FetchWaitMaxMs <= 0 {
		cfg.FetchWaitMaxMs = DefaultFetchWaitMaxMs
	}
	if cfg.FetchMinBytes <= 0 {
		cfg.FetchMinBytes = DefaultFetchMinBytes
	}
	if cfg.FetchBackoffMs <= 0 {
		cfg.FetchBackoffMs = DefaultFetchBackoffMs
	}
	if cfg.SocketTimeoutMs <= 0 {
		cfg.SocketTimeoutMs = DefaultSocketTimeoutMs
	}
	cfg.Now = clocks.Or(cfg.Now)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: time.Duration(cfg.SocketTimeoutMs) * time.Millisecond}
		cfg.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		cfg: cfg,
		coreCfg: coreConfig{self: cfg.BrokerID, lagMs: cfg.LagTimeMaxMs, backoffMs: cfg.FetchBackoffMs,
			canAlter: cfg.ISR != nil, registration: cfg.Registration},
		log:      cfg.Logger.With("component", "replica", "broker", cfg.BrokerID),
		ctx:      ctx,
		cancel:   cancel,
		parts:    map[tp]*partition{},
		fetchers: map[int32]*fetcher{},
	}
	m.wg.Add(1)
	go m.runISRChecker()
	return m
}

func (m *Manager) nowMs() int64 { return m.cfg.Now().UnixMilli() }

// brokerEpoch is the broker epoch this broker's fetches carry: -1 when
// unknown (no Config.BrokerEpoch, not registered yet).
func (m *Manager) brokerEpoch() int64 {
	if m.cfg.BrokerEpoch == nil {
		return -1
	}
	if e := m.cfg.BrokerEpoch(); e > 0 {
		return e
	}
	return -1
}

// FollowerFetchEpoch is Log.FollowerFetch with the broker epoch the fetch
// carried (Fetch v15+ ReplicaState, KIP-903; -1 none): the server calls it
// for a replica fetch of l, which this Manager leads. A fetch from an older
// incarnation of the broker than the registered one is refused with
// NOT_LEADER_OR_FOLLOWER and does not count (see core.followerFetch).
func (m *Manager) FollowerFetchEpoch(l *engine.Log, replicaID int32, brokerEpoch, fetchOffset int64) error {
	m.mu.Lock()
	p := m.parts[tp{l.Topic(), l.Partition()}]
	m.mu.Unlock()
	if p == nil || p.log != l {
		return engine.ErrNotReplicated
	}
	return p.followerFetch(replicaID, brokerEpoch, fetchOffset)
}

// Close stops every fetcher, the ISR checker and in-flight AlterPartition
// calls, and waits for them. Logs keep their role; their handlers go inert.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	fs := make([]*fetcher, 0, len(m.fetchers))
	for _, f := range m.fetchers {
		fs = append(fs, f)
	}
	clear(m.fetchers)
	for _, p := range m.parts {
		p.mu.Lock()
		p.c.halt()
		p.publishLocked()
		p.mu.Unlock()
	}
	m.mu.Unlock()
	m.cancel()
	for _, f := range fs {
		f.close()
	}
	m.wg.Wait()
	return nil
}

// partitionFor returns (creating) the state of st's partition. Caller holds m.mu.
func (m *Manager) partitionFor(st *Partition) (*partition, error) {
	if st.Log == nil {
		return nil, fmt.Errorf("replica: %s-%d: no log", st.Topic, st.Partition)
	}
	k := tp{st.Topic, st.Partition}
	p := m.parts[k]
	if p != nil && p.log != st.Log {
		// The log was recreated (topic deleted and created again).
		m.detachLocked(p)
		p = nil
	}
	if p == nil {
		p = newPartition(m, k, st.Log)
		m.parts[k] = p
		m.byLog.Store(st.Log, p)
	}
	return p, nil
}

// detachLocked removes p from the manager and its fetcher. Caller holds m.mu.
func (m *Manager) detachLocked(p *partition) {
	p.mu.Lock()
	p.c.remove()
	p.publishLocked()
	src := p.fetchFrom
	p.fetchFrom = -1
	p.mu.Unlock()
	if src >= 0 {
		m.removeFromFetcherLocked(src, p)
	}
	delete(m.parts, p.key)
	m.byLog.CompareAndDelete(p.log, p)
}

func validState(st *Partition) error {
	if st.LeaderEpoch < 0 || st.PartitionEpoch < 0 {
		return fmt.Errorf("replica: %s-%d: negative epochs %d/%d", st.Topic, st.Partition, st.LeaderEpoch, st.PartitionEpoch)
	}
	return nil
}

// BecomeLeader makes this broker the leader of st's partition (st.Leader
// must be Config.BrokerID), or applies a newer ISR / replica set / partition
// epoch to a partition it already leads. A new leader epoch is recorded in
// the log's epoch cache at its log end before it returns, so appends after
// it carry the epoch. A damaged log (engine Log.Damaged) is refused with
// kerr.KafkaStorageError.
func (m *Manager) BecomeLeader(st Partition) error {
	if st.Leader != m.cfg.BrokerID {
		return fmt.Errorf("replica: %s-%d: BecomeLeader with leader %d on broker %d", st.Topic, st.Partition, st.Leader, m.cfg.BrokerID)
	}
	if err := validState(&st); err != nil {
		return err
	}
	if !slices.Contains(st.ISR, m.cfg.BrokerID) {
		return fmt.Errorf("replica: %s-%d: leader %d not in ISR %v", st.Topic, st.Partition, st.Leader, st.ISR)
	}
	m.mu.Lock()
	hw, err := m.becomeLeaderLocked(&st)
	m.mu.Unlock()
	// Outside m.mu: advancing the HW runs produce callbacks inline.
	if err == nil && hw >= 0 {
		st.Log.AdvanceHighWatermark(hw)
	}
	return err
}

// becomeLeaderLocked is BecomeLeader under m.mu; it returns the HW to
// apply (-1: none yet).
func (m *Manager) becomeLeaderLocked(st *Partition) (int64, error) {
	if m.closed {
		return -1, engine.ErrClosed
	}
	p, err := m.partitionFor(st)
	if err != nil {
		return -1, err
	}
	damaged := st.Log.Damaged() // outside p.mu: the first call reads the directory
	p.mu.Lock()
	newEpoch, err := p.c.prepareLeader(st, damaged)
	if err != nil {
		p.mu.Unlock()
		return -1, err
	}
	src := p.fetchFrom
	p.fetchFrom = -1
	p.mu.Unlock()
	if newEpoch && src >= 0 {
		// Stop following first: the fetcher must not append after the
		// new epoch starts.
		m.removeFromFetcherLocked(src, p)
	}
	if newEpoch {
		if err := st.Log.AssignLeaderEpoch(st.LeaderEpoch); err != nil {
			return -1, err
		}
	}
	p.mu.Lock()
	hw := p.execLocked(p.c.becomeLeader(st, newEpoch, m.nowMs(), p.posLocked()))
	p.mu.Unlock()
	st.Log.SetLeader(p.h)
	if newEpoch {
		m.log.Info("leading partition", "topic", st.Topic, "partition", st.Partition, "leaderEpoch", st.LeaderEpoch,
			"partitionEpoch", st.PartitionEpoch, "isr", st.ISR, "logEnd", st.Log.LogEndOffset())
	}
	return hw, nil
}

// BecomeFollower makes this broker a follower of st's partition, fetching
// from st.Leader (none while st.Leader is -1). On a new leader epoch or
// leader the partition first truncates its divergent tail (OffsetForLeaderEpoch)
// and then fetches.
func (m *Manager) BecomeFollower(st Partition) error {
	if st.Leader == m.cfg.BrokerID {
		return fmt.Errorf("replica: %s-%d: BecomeFollower with this broker (%d) as leader", st.Topic, st.Partition, st.Leader)
	}
	if err := validState(&st); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return engine.ErrClosed
	}
	p, err := m.partitionFor(&st)
	if err != nil {
		return err
	}
	p.mu.Lock()
	changed, err := p.c.becomeFollower(&st)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	p.publishLocked()
	src := p.fetchFrom
	if changed {
		p.fetchFrom = -1
	}
	p.mu.Unlock()
	st.Log.SetFollower(p.h)
	if !changed {
		return nil
	}
	if src >= 0 {
		m.removeFromFetcherLocked(src, p)
	}
	if st.Leader >= 0 {
		p.mu.Lock()
		p.fetchFrom = st.Leader
		p.mu.Unlock()
		m.addToFetcherLocked(st.Leader, p, st.LeaderEpoch)
	}
	m.log.Info("following partition", "topic", st.Topic, "partition", st.Partition, "leader", st.Leader,
		"leaderEpoch", st.LeaderEpoch, "logEnd", st.Log.LogEndOffset())
	return nil
}

// Stop ends replication of a partition on this broker (deleted, or
// reassigned away): its fetcher drops it, produce checks refuse it, and
// the log's handler goes inert (the log keeps its role).
func (m *Manager) Stop(topic string, partition int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.parts[tp{topic, partition}]; p != nil {
		m.detachLocked(p)
	}
}

// lookup returns the partition state of l, nil if the Manager does not
// replicate it. Lock-free: it is on the produce path.
func (m *Manager) lookup(l *engine.Log) *partition {
	if v, ok := m.byLog.Load(l); ok {
		return v.(*partition)
	}
	return nil
}

// CheckProduce is called before appending a produce to l: a log the
// Manager replicates must be led here (kerr.NotLeaderForPartition), and
// acks=-1 needs at least min.insync.replicas in the ISR
// (kerr.NotEnoughReplicas). Logs the Manager does not replicate pass.
func (m *Manager) CheckProduce(l *engine.Log, acks int16) error {
	p := m.lookup(l)
	if p == nil {
		return nil
	}
	return checkProduce(p.isLeader.Load(), p.isrLen.Load(), p.minISR.Load(), acks, l)
}

// WaitReplicated calls fn once the HW of l passed lastOffset (every ISR
// member holds the batch durably): fn(nil); or
// kerr.NotEnoughReplicasAfterAppend when the ISR was below
// min.insync.replicas by then; kerr.NotLeaderForPartition when this broker
// stopped leading l (the offset may hold other data after a truncation);
// or the log's error. fn must not block. For logs the Manager does not
// replicate it is Log.WhenDurable.
func (m *Manager) WaitReplicated(l *engine.Log, lastOffset int64, fn func(error)) {
	p := m.lookup(l)
	if p == nil {
		l.WhenDurable(lastOffset, fn)
		return
	}
	gen := p.leaderGen.Load()
	if !p.isLeader.Load() {
		fn(kerr.NotLeaderForPartition)
		return
	}
	l.WhenDurable(lastOffset, func(err error) {
		fn(ackResult(err, p.leaderGen.Load() == gen, p.isLeader.Load(), p.isrLen.Load(), p.minISR.Load()))
	})
}

// Status returns the replication state of a partition; false if the
// Manager does not replicate it.
func (m *Manager) Status(topic string, partition int32) (Status, bool) {
	m.mu.Lock()
	p := m.parts[tp{topic, partition}]
	m.mu.Unlock()
	if p == nil {
		return Status{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{
		HighWatermark: p.log.HighWatermark(),
		LogEndOffset:  p.log.LogEndOffset(),
		DurableEnd:    p.log.DurableEnd(),
		Damaged:       p.log.Damaged(),
	}
	p.c.status(&st)
	if st.Role != engine.RoleLeader {
		st.FetchState = p.fetchState()
	}
	return st, true
}

// addToFetcherLocked hands p to the fetcher of src, starting it if needed.
// Caller holds m.mu.
func (m *Manager) addToFetcherLocked(src int32, p *partition, epoch int32) {
	f := m.fetchers[src]
	if f == nil {
		f = newFetcher(m, src)
		m.fetchers[src] = f
		m.wg.Add(1)
		go f.run()
	}
	f.add(p, epoch)
}

// removeFromFetcherLocked takes p out of src's fetcher and waits until the
// fetcher no longer touches p's log; the fetcher stops when it has no
// partitions left. Caller holds m.mu.
func (m *Manager) removeFromFetcherLocked(src int32, p *partition) {
	f := m.fetchers[src]
	if f == nil {
		return
	}
	if f.remove(p) == 0 {
		delete(m.fetchers, src)
		f.close()
	}
}
