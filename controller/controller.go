package controller

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/stratalog/strata/internal/clocks"
)

// Errors returned by Controller methods.
var (
	// ErrClosed: the Controller was closed.
	ErrClosed = errors.New("controller: closed")
	// ErrUnknownOutcome: the proposal reached a leader but no answer came
	// back (leadership lost, connection cut, context ended); it may or may
	// not have been applied. Read the state to find out.
	ErrUnknownOutcome = errors.New("controller: proposal outcome unknown")
	// ErrNotLeader is returned by ProposeLocal on a node that is not the
	// Raft leader.
	ErrNotLeader = errors.New("controller: not the leader")
)

// Config configures a Controller. Zero durations take the defaults below.
type Config struct {
	NodeID int32
	// RaftAddr is the address to listen on for Raft and the controller
	// RPC; "" means Voters[NodeID]. The address others reach this node at
	// is always Voters[NodeID] for a voter, RaftAddr for an observer.
	RaftAddr string
	// Voters are the quorum's node ids and Raft addresses (ParseQuorum of
	// --controller-quorum). A node not among them runs as an observer: a
	// Raft non-voter that asks the leader to add it and then receives
	// every change, for brokers beyond the quorum.
	Voters map[int32]string
	// DataDir holds raft.db (log and stable store, bbolt) and snapshots/.
	// Give the controller its own directory, not a directory of partitions.
	DataDir string
	Logger  *slog.Logger
	// Listener, if set, is used instead of listening on RaftAddr (tests,
	// socket activation). The Controller closes it.
	Listener net.Listener
	// ServerTLS and ClientTLS, both set or both nil, put the node's port
	// (Raft and the controller RPC) under mutual TLS: the listener
	// handshakes with ServerTLS and requires a client certificate that its
	// trust store verifies (tls.RequireAndVerifyClientCert whatever
	// ServerTLS says), and the node dials its peers with
	// ClientTLS(host of the peer's address), which presents this node's
	// certificate. A connection whose handshake fails is closed with one
	// log line and never reaches Raft or the RPC handler. nil: plain TCP,
	// to be kept on a network only the brokers reach.
	ServerTLS *tls.Config
	ClientTLS func(serverName string) *tls.Config
	// AuthorizePeer, with ServerTLS, is asked about every accepted
	// connection once its handshake verified the peer's certificate: an
	// error closes the connection (one WARN line with the error) before
	// Raft or the RPC sees a byte. The broker passes the authorizer's
	// ClusterAction check of the certificate's principal, as Kafka checks
	// controller requests. nil: every verified certificate is a peer.
	AuthorizePeer func(remote net.Addr, state tls.ConnectionState) error
	// AuthenticatePeer and AuthenticateSelf, both set or both nil, make
	// every connection to the node's port authenticate before Raft or the
	// RPC sees a byte (inside the TLS session when ServerTLS is set too).
	// The mux calls AuthenticatePeer on each accepted connection, under
	// the first-byte deadline: it runs the server side of the exchange and
	// returns the peer's principal ("User:name"), or an error, which
	// closes the connection with one WARN line. The node calls
	// AuthenticateSelf on each connection it dials (Raft's and the RPC's)
	// before it writes anything. Neither may read past its exchange. The
	// broker passes SASL (sasl.Serve, sasl.Authenticate with the
	// inter-broker credentials): see sasl.go.
	AuthenticatePeer func(conn net.Conn) (principal string, err error)
	AuthenticateSelf func(ctx context.Context, conn net.Conn) error
	// AuthorizePrincipal, with AuthenticatePeer, is asked about the
	// principal of every connection that authenticated: an error closes
	// it (one WARN line) before Raft or the RPC sees a byte. The broker
	// passes the authorizer's ClusterAction check. nil: every
	// authenticated principal is a peer.
	AuthorizePrincipal func(remote net.Addr, principal string) error

	HeartbeatTimeout   time.Duration // default 500ms
	ElectionTimeout    time.Duration // default 500ms
	LeaderLeaseTimeout time.Duration // default 250ms; at most HeartbeatTimeout
	CommitTimeout      time.Duration // default 50ms
	SnapshotInterval   time.Duration // default 2m (Raft checks this often whether to snapshot)
	SnapshotThreshold  uint64        // default 8192 log entries since the last snapshot
	TrailingLogs       uint64        // default 10240 entries kept after a snapshot

	// SessionTimeout is broker.session.timeout.ms (default 9s): the leader
	// fences brokers whose last heartbeat is older.
	SessionTimeout time.Duration
	// TickInterval is how often the leader checks broker sessions
	// (default SessionTimeout/8, at least 50ms).
	TickInterval time.Duration
	// Now is the clock stamped into RegisterBroker, BrokerHeartbeat and
	// Tick commands by the leader (default clocks.Wall).
	Now clocks.Clock

	// DisableAutoLeaderRebalance is auto.leader.rebalance.enable=false: the
	// leader never moves leaderships back to preferred replicas by itself
	// (ElectLeaders still does). See rebalance.go.
	DisableAutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds
	// (default 300s): how often the leader checks the leader imbalance; the
	// first check comes one interval after it gained leadership. It is
	// checked on the driver's TickInterval, so it is at least that.
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePerBrokerPercentage is
	// leader.imbalance.per.broker.percentage: a broker's preferred
	// partitions move back once more than this share of them is led by
	// others. 0 takes the default 10; a negative value means 0 (any).
	LeaderImbalancePerBrokerPercentage int
}

// wallClock is the package's wall clock (clocks.Wall): Config.Now's
// default, and the clock of socket deadlines (serveRPC, mux.classify),
// which stays the wall clock whatever Now a test injects, since a
// deadline is an instant on the wall clock (a manual clock's 1970 would
// time every connection out at once).
var wallClock = clocks.Wall

func (c *Config) setDefaults() error {
	if c.NodeID < 0 {
		return fmt.Errorf("controller: node id %d", c.NodeID)
	}
	if len(c.Voters) == 0 {
		return fmt.Errorf("controller: no voters")
	}
	if (c.ServerTLS == nil) != (c.ClientTLS == nil) {
		return fmt.Errorf("controller: ServerTLS and ClientTLS go together (mutual TLS)")
	}
	if err := c.checkPeerAuth(); err != nil { // sasl.go
		return err
	}
	if c.RaftAddr == "" {
		c.RaftAddr = c.Voters[c.NodeID]
	}
	if c.RaftAddr == "" && c.Listener == nil {
		return fmt.Errorf("controller: node %d is not a voter and has no RaftAddr", c.NodeID)
	}
	if c.DataDir == "" {
		return fmt.Errorf("controller: no data directory")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, 500*time.Millisecond)
	def(&c.ElectionTimeout, 500*time.Millisecond)
	def(&c.LeaderLeaseTimeout, min(250*time.Millisecond, c.HeartbeatTimeout))
	def(&c.CommitTimeout, 50*time.Millisecond)
	def(&c.SnapshotInterval, 2*time.Minute)
	def(&c.SessionTimeout, DefaultSessionTimeoutMs*time.Millisecond)
	def(&c.TickInterval, max(c.SessionTimeout/8, 50*time.Millisecond))
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.Now == nil {
		c.Now = wallClock
	}
	def(&c.LeaderImbalanceCheckInterval, DefaultLeaderImbalanceCheckIntervalMs*time.Millisecond)
	switch {
	case c.LeaderImbalancePerBrokerPercentage == 0:
		c.LeaderImbalancePerBrokerPercentage = DefaultLeaderImbalancePerBrokerPct
	case c.LeaderImbalancePerBrokerPercentage < 0:
		c.LeaderImbalancePerBrokerPercentage = 0
	}
	return nil
}

// Controller is one node of the metadata quorum: hashicorp/raft running the
// State as its FSM, a bbolt log store, a file snapshot store and a TCP
// transport shared with the controller RPC. See the package doc for the
// goroutines and the lock order.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	voter    bool
	selfAddr string

	raft *raft.Raft
	// raftReady is closed once raft is set (or New failed): the controller
	// RPC accepts connections before, and waits for it.
	raftReady chan struct{}
	trans     *raft.NetworkTransport
	mux       *mux
	store     *raftboltdb.BoltStore
	fsm       *fsm

	watchMu  sync.Mutex
	watchers map[*Watcher]struct{}

	desc describeState // describe.go: the members' last answers to DescribeQuorum

	ctx       context.Context // canceled by Close; parent of every internal wait
	cancel    context.CancelFunc
	closing   <-chan struct{} // ctx.Done()
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup // the driver goroutine and RPC handlers' waits
}

// New opens (or creates) the node's Raft state in cfg.DataDir, starts Raft
// and, when the state is empty and the node is a voter, bootstraps the
// cluster with cfg.Voters (every voter does the same; the first to win an
// election proceeds, the identical configurations agree).
func New(cfg Config) (*Controller, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	_, voter := cfg.Voters[cfg.NodeID]
	c := &Controller{
		cfg: cfg, log: cfg.Logger.With("component", "controller", "node", cfg.NodeID), voter: voter,
		watchers: make(map[*Watcher]struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.closing = c.ctx.Done()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			c.cancel()
			c.teardown()
		}
	}()

	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.RaftAddr); err != nil {
			return nil, fmt.Errorf("controller: %w", err)
		}
	}
	if cfg.ServerTLS != nil {
		ln = tls.NewListener(ln, requireClientCert(cfg.ServerTLS))
	}
	c.selfAddr = cfg.Voters[cfg.NodeID]
	if !voter {
		c.selfAddr = cfg.RaftAddr
		if c.selfAddr == "" {
			c.selfAddr = ln.Addr().String()
		}
	}
	adv, err := net.ResolveTCPAddr("tcp", c.selfAddr)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("controller: advertise address %q: %w", c.selfAddr, err)
	}
	c.raftReady = make(chan struct{})
	defer closeOnce(c.raftReady)
	c.mux = newMux(ln, adv, c.serveRPC, cfg.peerSecurity(), c.log)
	hl := newHclog(cfg.Logger, "raft")
	c.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: c.mux, MaxPool: 3, Timeout: 10 * time.Second, Logger: hl,
	})

	c.store, err = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.DataDir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("controller: log store: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, hl)
	if err != nil {
		return nil, fmt.Errorf("controller: snapshot store: %w", err)
	}
	c.fsm = newFSM(c.notifyWatchers, func(idx uint64, err error) {
		c.log.Error("undecodable metadata command applied as a no-op", "index", idx, "err", err)
	})

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(int(cfg.NodeID)))
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.Logger = hl
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	hasState, err := raft.HasExistingState(c.store, c.store, snaps)
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	c.raft, err = raft.NewRaft(rc, c.fsm, c.store, c.store, snaps, c.trans)
	closeOnce(c.raftReady)
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	if !hasState && voter {
		var servers []raft.Server
		for _, id := range sortedIDs(cfg.Voters) {
			servers = append(servers, raft.Server{
				Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(id))), Address: raft.ServerAddress(cfg.Voters[id]),
			})
		}
		err := c.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return nil, fmt.Errorf("controller: bootstrap: %w", err)
		}
	}
	c.wg.Add(1)
	go c.drive()
	ok = true
	return c, nil
}

func sortedIDs(m map[int32]string) []int32 {
	ids := make([]int32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Close stops the node: the driver, Raft, the transport and the stores.
// It is idempotent; proposals in flight end with ErrClosed or
// ErrUnknownOutcome.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.closeErr = c.teardown()
		c.wg.Wait()
		c.watchMu.Lock()
		for w := range c.watchers {
			delete(c.watchers, w)
		}
		c.watchMu.Unlock()
	})
	return c.closeErr
}

func (c *Controller) teardown() error {
	var errs []error
	if c.raft != nil {
		errs = append(errs, c.raft.Shutdown().Error())
	}
	if c.trans != nil {
		errs = append(errs, c.trans.Close()) // closes the mux
	} else if c.mux != nil {
		errs = append(errs, c.mux.Close())
	}
	if c.mux != nil {
		c.mux.Close() // idempotent; waits for the RPC handlers
	}
	if c.store != nil {
		errs = append(errs, c.store.Close())
	}
	return errors.Join(errs...)
}

// ---- reading ----

// Read calls fn with the current State under the read lock. fn must not
// block, keep references past its return, or call the Controller.
func (c *Controller) Read(fn func(*State)) {
	c.fsm.mu.RLock()
	defer c.fsm.mu.RUnlock()
	fn(c.fsm.state)
}

// State returns a deep copy of the current State.
func (c *Controller) State() *State {
	var s *State
	c.Read(func(st *State) { s = st.Clone() })
	return s
}

// Offset is the metadata offset this node has applied.
func (c *Controller) Offset() int64 {
	c.fsm.mu.RLock()
	defer c.fsm.mu.RUnlock()
	return c.fsm.state.offset
}

// WaitApplied waits until this node has applied metadata offset off (for
// example a Result.Offset returned to a proposal made through another node).
func (c *Controller) WaitApplied(ctx context.Context, off int64) error {
	for {
		c.fsm.mu.RLock()
		cur, ch := c.fsm.state.offset, c.fsm.changed
		c.fsm.mu.RUnlock()
		if cur >= off {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.closing:
			return ErrClosed
		}
	}
}

// Watcher delivers a signal after metadata changes. Signals coalesce: after
// a receive, read the State (and its Offset) to see everything that has
// changed since the previous one.
type Watcher struct {
	c  chan struct{}
	ct *Controller
}

// C receives after every applied command or restored snapshot (coalesced).
func (w *Watcher) C() <-chan struct{} { return w.c }

// Close stops the signals.
func (w *Watcher) Close() {
	w.ct.watchMu.Lock()
	delete(w.ct.watchers, w)
	w.ct.watchMu.Unlock()
}

// Watch subscribes to metadata changes. The first signal is pending at
// once, so a watcher reads the initial state through the same path.
func (c *Controller) Watch() *Watcher {
	w := &Watcher{c: make(chan struct{}, 1), ct: c}
	w.c <- struct{}{}
	c.watchMu.Lock()
	c.watchers[w] = struct{}{}
	c.watchMu.Unlock()
	return w
}

func (c *Controller) notifyWatchers() {
	c.watchMu.Lock()
	for w := range c.watchers {
		select {
		case w.c <- struct{}{}:
		default:
		}
	}
	c.watchMu.Unlock()
}

// ---- leadership ----

// Leader returns the Raft leader's node id, if known.
func (c *Controller) Leader() (int32, bool) {
	_, id := c.raft.LeaderWithID()
	if id == "" {
		return -1, false
	}
	n, err := strconv.ParseInt(string(id), 10, 32)
	if err != nil {
		return -1, false
	}
	return int32(n), true
}

// LeaderAddr returns the Raft leader's address, if known.
func (c *Controller) LeaderAddr() (string, bool) {
	addr, _ := c.raft.LeaderWithID()
	return string(addr), addr != ""
}

// IsLeader reports whether this node is the Raft leader.
func (c *Controller) IsLeader() bool { return c.raft.State() == raft.Leader }

// NodeID is this node's id.
func (c *Controller) NodeID() int32 { return c.cfg.NodeID }

// ---- proposing ----

// Propose commits cmd through the Raft leader and returns the Result of
// applying it. On a follower the command is forwarded to the leader over
// the controller RPC; while there is no leader, or it moves, Propose retries
// until ctx ends. Errors: ctx's error, ErrClosed, or ErrUnknownOutcome
// (wrapped) when the command may have been applied. A Result with a
// non-zero Code is a refusal by the state machine, not an error here.
// Time fields left zero (RegisterBroker.NowMs, BrokerHeartbeat.NowMs,
// Tick.NowMs) are stamped with the leader's clock.
func (c *Controller) Propose(ctx context.Context, cmd Command) (Result, error) {
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	data := EncodeCommand(cmd)
	backoff := 10 * time.Millisecond
	for {
		select {
		case <-c.closing:
			return Result{}, ErrClosed
		default:
		}
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		var (
			r   Result
			err error
		)
		if c.IsLeader() {
			r, err = c.proposeLocal(ctx, data)
		} else if addr, ok := c.LeaderAddr(); ok {
			r, err = c.forward(ctx, addr, data)
		} else {
			err = ErrNotLeader
		}
		if err == nil || !errors.Is(err, ErrNotLeader) {
			return r, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Result{}, ctx.Err()
		case <-c.closing:
			t.Stop()
			return Result{}, ErrClosed
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

// ProposeLocal commits cmd if this node is the leader, else returns
// ErrNotLeader without forwarding.
func (c *Controller) ProposeLocal(ctx context.Context, cmd Command) (Result, error) {
	return c.proposeLocal(ctx, EncodeCommand(cmd))
}

// stamp fills zero time fields with this node's clock. Only the leader
// stamps, so every time in the log comes from the leader of its term.
func (c *Controller) stamp(data []byte) []byte {
	if len(data) < 2 {
		return data
	}
	switch CommandType(data[1]) {
	case TypeRegisterBroker, TypeBrokerHeartbeat, TypeTick:
	default:
		return data
	}
	cmd, err := DecodeCommand(data)
	if err != nil {
		return data
	}
	now := c.cfg.Now().UnixMilli()
	switch v := cmd.(type) {
	case RegisterBroker:
		if v.NowMs == 0 {
			v.NowMs = now
			return EncodeCommand(v)
		}
	case BrokerHeartbeat:
		if v.NowMs == 0 {
			v.NowMs = now
			return EncodeCommand(v)
		}
	case Tick:
		if v.NowMs == 0 {
			v.NowMs = now
			return EncodeCommand(v)
		}
	}
	return data
}

// proposeLocal applies encoded command data through this node's Raft.
func (c *Controller) proposeLocal(ctx context.Context, data []byte) (Result, error) {
	select {
	case <-c.raftReady:
	default:
		select { // only while New is still starting Raft
		case <-c.raftReady:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	if c.raft == nil || c.raft.State() != raft.Leader {
		return Result{}, ErrNotLeader
	}
	if _, err := DecodeCommand(data); err != nil {
		return Result{}, err
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(dl.Sub(wallClock()), time.Millisecond) // a context deadline is a wall-clock instant
	}
	f := c.raft.Apply(c.stamp(data), timeout)
	done := make(chan struct{})
	go func() { // ends when Raft resolves the future (at the latest on Shutdown)
		_ = f.Error()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return Result{}, fmt.Errorf("%w: %v", ErrUnknownOutcome, ctx.Err())
	case <-c.closing:
		return Result{}, fmt.Errorf("%w: %v", ErrUnknownOutcome, ErrClosed)
	}
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return Result{}, ErrNotLeader // not appended: safe to retry
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return Result{}, fmt.Errorf("%w: %v", ErrNotLeader, err)
		case errors.Is(err, raft.ErrRaftShutdown):
			return Result{}, ErrClosed
		default:
			return Result{}, fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
		}
	}
	r, ok := f.Response().(Result)
	if !ok {
		return Result{}, fmt.Errorf("%w: unexpected FSM response %T", ErrUnknownOutcome, f.Response())
	}
	return r, nil
}

// forward sends encoded command data to the leader at addr.
func (c *Controller) forward(ctx context.Context, addr string, data []byte) (Result, error) {
	status, body, err := rpcCall(ctx, c.cfg.peerSecurity(), addr, rpcPropose, data)
	if err != nil {
		if errors.Is(err, errNotSent) {
			return Result{}, fmt.Errorf("%w: %v", ErrNotLeader, err) // retry: not applied
		}
		return Result{}, fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
	}
	switch status {
	case statusOK:
		r, err := DecodeResult(body)
		if err != nil {
			return Result{}, fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
		}
		return r, nil
	case statusNotLeader:
		return Result{}, ErrNotLeader
	case statusUnknown:
		return Result{}, fmt.Errorf("%w: leader %s: %s", ErrUnknownOutcome, addr, body)
	default:
		return Result{}, fmt.Errorf("controller: leader %s refused: %s", addr, body)
	}
}

// serveRPC answers one controller RPC connection (one request).
func (c *Controller) serveRPC(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(wallClock().Add(firstByteTimeout))
	br := bufio.NewReader(conn)
	ver, err := br.ReadByte()
	if err != nil || ver != rpcVersion {
		return
	}
	kind, payload, err := readFrame(br)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	_ = conn.SetDeadline(wallClock().Add(35 * time.Second))
	var status byte
	var out []byte
	switch kind {
	case rpcPropose:
		r, err := c.proposeLocal(ctx, payload)
		switch {
		case err == nil:
			status, out = statusOK, AppendResult(nil, r)
		case errors.Is(err, ErrNotLeader), errors.Is(err, ErrClosed):
			status = statusNotLeader
		case errors.Is(err, ErrUnknownOutcome):
			status, out = statusUnknown, []byte(err.Error())
		default:
			status, out = statusFailed, []byte(err.Error())
		}
	case rpcJoin:
		status, out = c.handleJoin(payload)
	case rpcDescribe:
		status, out = c.handleDescribe(payload) // describe.go
	default:
		status, out = statusFailed, []byte("unknown rpc kind")
	}
	_ = writeFrame(conn, status, out)
}

// handleJoin adds an observer as a Raft non-voter (leader only).
func (c *Controller) handleJoin(payload []byte) (byte, []byte) {
	r := &reader{b: payload}
	id, addr := r.int32(), r.string()
	if err := r.done(); err != nil || id < 0 || addr == "" {
		return statusFailed, []byte("bad join request")
	}
	if _, isVoter := c.cfg.Voters[id]; isVoter {
		return statusFailed, []byte("node " + strconv.Itoa(int(id)) + " is a voter")
	}
	<-c.raftReady // closed by New on every path
	if c.raft == nil || c.raft.State() != raft.Leader {
		return statusNotLeader, nil
	}
	err := c.raft.AddNonvoter(raft.ServerID(strconv.Itoa(int(id))), raft.ServerAddress(addr), 0, 10*time.Second).Error()
	switch {
	case err == nil:
		return statusOK, nil
	case errors.Is(err, raft.ErrNotLeader):
		return statusNotLeader, nil
	default:
		return statusUnknown, []byte(err.Error())
	}
}

// ---- the driver ----

// drive is the Controller's one goroutine of its own (besides RPC
// handlers): on the leader it proposes Ticks — a session reset on gaining
// leadership, then a Tick whenever some broker's session has expired by
// this node's clock — and, every LeaderImbalanceCheckInterval, the
// automatic preferred-leader elections (rebalance.go); on an observer it
// asks to join until it is in the Raft configuration.
func (c *Controller) drive() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.TickInterval)
	defer t.Stop()
	var leaderTerm uint64 // term in which this node last reset sessions
	var nextRebalance time.Time
	joined := c.voter
	for {
		select {
		case <-c.closing:
			return
		case <-t.C:
		}
		if !joined {
			joined = c.tryJoin()
			continue
		}
		if !c.IsLeader() {
			leaderTerm = 0
			continue
		}
		term := c.raft.CurrentTerm()
		if term != leaderTerm {
			if !c.resetSessions(term) {
				continue
			}
			leaderTerm = term
			nextRebalance = c.cfg.Now().Add(c.cfg.LeaderImbalanceCheckInterval)
			continue
		}
		c.expireSessions()
		if now := c.cfg.Now(); !c.cfg.DisableAutoLeaderRebalance && !now.Before(nextRebalance) {
			nextRebalance = now.Add(c.cfg.LeaderImbalanceCheckInterval)
			if c.rebalanceLeaders() {
				nextRebalance = now // more to move: the next batch on the next tick
			}
		}
	}
}

// driverCtx bounds one proposal of the driver.
func (c *Controller) driverCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, 5*c.cfg.TickInterval+c.cfg.ElectionTimeout)
}

// resetSessions proposes the Tick{ResetSessions} of a new leader; it
// reports whether it was applied.
func (c *Controller) resetSessions(term uint64) bool {
	ctx, cancel := c.driverCtx()
	defer cancel()
	tick := Tick{NowMs: c.cfg.Now().UnixMilli(), SessionTimeoutMs: c.cfg.SessionTimeout.Milliseconds(), ResetSessions: true}
	r, err := c.ProposeLocal(ctx, tick)
	if err != nil {
		c.log.Debug("tick not applied", "err", err)
		return false
	}
	c.log.Info("leading the metadata quorum; broker sessions restarted", "term", term, "offset", r.Offset)
	if r.Message != "" {
		c.log.Warn("fenced brokers", "reason", r.Message, "offset", r.Offset)
	}
	return true
}

// expireSessions proposes a Tick when some broker's session has expired by
// this node's clock.
func (c *Controller) expireSessions() {
	now := c.cfg.Now().UnixMilli()
	timeoutMs := c.cfg.SessionTimeout.Milliseconds()
	var expired []int32
	c.Read(func(s *State) { expired = s.ExpiredBrokers(now, timeoutMs) })
	if len(expired) == 0 {
		return
	}
	ctx, cancel := c.driverCtx()
	defer cancel()
	r, err := c.ProposeLocal(ctx, Tick{NowMs: now, SessionTimeoutMs: timeoutMs})
	if err != nil {
		c.log.Debug("tick not applied", "err", err)
		return
	}
	if r.Message != "" {
		c.log.Warn("fenced brokers", "reason", r.Message, "offset", r.Offset)
	}
}

// rebalanceLeaders proposes a preferred-leader election for the partitions
// State.ImbalancedPartitions lists (Kafka's auto leader rebalance), at most
// maxElectionsPerRebalance in one command (as KRaft's controller batches
// them); it reports whether more were left for the next tick. A failed
// proposal waits for the next interval, as in Kafka.
func (c *Controller) rebalanceLeaders() (more bool) {
	var parts []TopicPartition
	c.Read(func(s *State) { parts = s.ImbalancedPartitions(c.cfg.LeaderImbalancePerBrokerPercentage) })
	if len(parts) == 0 {
		return false
	}
	if len(parts) > maxElectionsPerRebalance {
		parts, more = parts[:maxElectionsPerRebalance], true
	}
	ctx, cancel := c.driverCtx()
	defer cancel()
	r, err := c.ProposeLocal(ctx, ElectLeaders{Election: ElectPreferred, Partitions: parts})
	if err != nil {
		c.log.Warn("automatic preferred leader election not applied", "partitions", len(parts), "err", err)
		return false
	}
	moved := 0
	for _, p := range r.Partitions {
		if p.Code == 0 {
			moved++
		}
	}
	c.log.Info("automatic preferred leader election", "candidates", len(parts), "moved", moved, "offset", r.Offset)
	return more && moved > 0
}

// maxElectionsPerRebalance bounds one automatic election command.
const maxElectionsPerRebalance = 1000

// tryJoin asks each voter in turn to add this observer; it reports whether
// this node is in the Raft configuration at its current address.
func (c *Controller) tryJoin() bool {
	// In the configuration at this address: joined. At another address (a
	// restart on a new port): join again, which updates the address.
	if f := c.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.ID == raft.ServerID(strconv.Itoa(int(c.cfg.NodeID))) && string(s.Address) == c.selfAddr {
				return true
			}
		}
	}
	payload := appendString(appendInt(nil, int64(c.cfg.NodeID)), c.selfAddr)
	for _, id := range sortedIDs(c.cfg.Voters) {
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		status, body, err := rpcCall(ctx, c.cfg.peerSecurity(), c.cfg.Voters[id], rpcJoin, payload)
		cancel()
		if err == nil && status == statusOK {
			c.log.Info("joined the metadata quorum as an observer", "via", id)
			return true
		}
		if err == nil && status == statusFailed {
			c.log.Error("join refused", "by", id, "reason", string(body))
		}
	}
	return false
}

// NewIncarnationID returns a random broker incarnation id.
func NewIncarnationID() [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return id
}

// NewTopicID returns a random non-zero topic id for CreateTopic.
func NewTopicID() TopicID {
	for {
		var id TopicID
		_, _ = rand.Read(id[:])
		if !id.IsZero() {
			return id
		}
	}
}

// closeOnce closes ch unless it is already closed (single goroutine use).
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}
