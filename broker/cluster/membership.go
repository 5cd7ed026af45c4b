package cluster

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/twmb/franz-go/pkg/kerr"
)

// DefaultHeartbeatInterval is Kafka's broker.heartbeat.interval.ms.
const DefaultHeartbeatInterval = 2 * time.Second

// controlledShutdownNoQuorum is how long ControlledShutdown waits for a
// metadata quorum leader to appear before giving up.
const controlledShutdownNoQuorum = 3 * time.Second

// MembershipConfig configures a broker's membership of the cluster.
type MembershipConfig struct {
	NodeID     int32
	Controller *controller.Controller
	Rack       string // broker.rack
	// HeartbeatInterval is broker.heartbeat.interval.ms (default 2s).
	HeartbeatInterval time.Duration
	// Advertised is the endpoint to register; a port of 0 means not known
	// yet (the listener is not bound), and registration waits for it.
	Advertised func() (host string, port int32)
	Log        *slog.Logger
	// OfflineDir, when set, reports whether this broker's data directory
	// is offline (an I/O error on data). Heartbeats carry it (Kafka's
	// OfflineLogDirs, KIP-112) and the controller moves the broker's
	// leaderships away and takes it out of the ISRs. It is polled every
	// offlinePoll so a failure is reported before the next heartbeat is due.
	OfflineDir func() bool
	// Listeners are every listener's advertised endpoint, registered with
	// the controller so that each client is answered with the brokers'
	// addresses on the listener it connected to (nil: Advertised's one
	// endpoint serves every client).
	Listeners []controller.Endpoint
}

// offlinePoll is how often the heartbeat loop looks at
// MembershipConfig.OfflineDir between heartbeats.
const offlinePoll = 50 * time.Millisecond

// Membership is a broker's registration with the controller and its
// heartbeats: RegisterBroker with a fresh incarnation id once the
// advertised port is known, then a BrokerHeartbeat every
// HeartbeatInterval carrying the metadata offset this node has applied
// (the controller unfences the broker once it has caught up, and fences it
// when heartbeats stop for broker.session.timeout.ms). A registration the
// controller no longer knows (another process took the node id) is made
// again with a new incarnation. ControlledShutdown sets WantShutdown and
// waits until the controller has moved every leadership away.
//
// It owns one goroutine (the heartbeat loop), which Close stops.
type Membership struct {
	cfg   MembershipConfig
	ctl   *controller.Controller
	epoch atomic.Int64 // broker epoch of the current registration (0: not registered)

	incarnation  [16]byte      // heartbeat goroutine only after Join
	caughtUp     chan struct{} // closed once this node applied the metadata up to its registration
	wantShutdown atomic.Bool
	kick         chan struct{} // wakes the heartbeat loop (controlled shutdown)
	shutdownOK   chan struct{} // closed when the controller allowed the shutdown
	shutdownOnce sync.Once

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Join starts registering this broker and heartbeating.
func Join(cfg MembershipConfig) *Membership {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	m := &Membership{
		cfg: cfg, ctl: cfg.Controller,
		incarnation: controller.NewIncarnationID(),
		caughtUp:    make(chan struct{}),
		kick:        make(chan struct{}, 1),
		shutdownOK:  make(chan struct{}),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.heartbeatLoop()
	}()
	return m
}

// Close stops the heartbeats (the controller fences the broker once its
// session times out).
func (m *Membership) Close() {
	m.cancel()
	m.wg.Wait()
}

// Epoch is the broker epoch of the current registration (0 before it
// registered).
func (m *Membership) Epoch() int64 { return m.epoch.Load() }

// CaughtUp is closed once this node's controller has applied the metadata
// up to the broker's registration: a restarting node replays its Raft log
// from an old or empty state, and acting on that would delete topics that
// still exist.
func (m *Membership) CaughtUp() <-chan struct{} { return m.caughtUp }

// ControlledShutdown asks the controller to move this broker's leaderships
// away (Kafka's controlled shutdown) and waits until it has, or ctx ends.
func (m *Membership) ControlledShutdown(ctx context.Context) error {
	m.wantShutdown.Store(true)
	select {
	case m.kick <- struct{}{}:
	default:
	}
	// Without a quorum leader nobody can move the leaderships: give up
	// after a few election timeouts instead of waiting for ctx.
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var leaderless time.Duration
	for {
		select {
		case <-m.shutdownOK:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if _, ok := m.ctl.Leader(); ok {
			leaderless = 0
		} else if leaderless += 100 * time.Millisecond; leaderless >= controlledShutdownNoQuorum {
			return errors.New("controlled shutdown: the metadata quorum has no leader")
		}
	}
}

func (m *Membership) heartbeatLoop() {
	// The advertised port is known once the broker has its listener.
	for {
		if _, port := m.cfg.Advertised(); port != 0 {
			break
		}
		if !sleepCtx(m.ctx, 10*time.Millisecond) {
			return
		}
	}
	off, ok := m.register()
	if !ok {
		return
	}
	// Act on the metadata only once it is current (CaughtUp).
	if err := m.ctl.WaitApplied(m.ctx, off); err != nil {
		return
	}
	close(m.caughtUp)
	interval := m.cfg.HeartbeatInterval
	t := time.NewTicker(interval)
	defer t.Stop()
	var poll <-chan time.Time
	if m.cfg.OfflineDir != nil {
		pt := time.NewTicker(min(offlinePoll, interval))
		defer pt.Stop()
		poll = pt.C
	}
	reported := false // the current registration was told the directory is offline
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		case <-m.kick:
		case <-poll:
			if reported || !m.cfg.OfflineDir() {
				continue
			}
		}
		want := m.wantShutdown.Load()
		offline := m.cfg.OfflineDir != nil && m.cfg.OfflineDir()
		ctx, cancel := context.WithTimeout(m.ctx, 2*interval)
		r, err := m.ctl.Propose(ctx, controller.BrokerHeartbeat{
			ID: m.cfg.NodeID, Epoch: m.epoch.Load(), MetadataOffset: m.ctl.Offset(), WantShutdown: want,
			OfflineDir: offline,
		})
		cancel()
		if err == nil && r.Code == 0 && offline && !reported {
			reported = true
			m.cfg.Log.Error("reported the data directory offline to the controller: this broker's leaderships move away and it leaves the ISRs until it restarts with a healthy directory",
				"node", m.cfg.NodeID, "broker_epoch", r.BrokerEpoch)
		}
		switch {
		case err != nil:
			m.cfg.Log.Debug("heartbeat not delivered", "err", err)
			continue
		case r.Code == kerr.StaleBrokerEpoch.Code || r.Code == kerr.BrokerIDNotRegistered.Code:
			m.cfg.Log.Error("broker registration replaced (another process with this node id?); registering again", "err", r.Err())
			m.incarnation = controller.NewIncarnationID()
			if _, ok := m.register(); !ok {
				return
			}
			reported = false // a new registration starts with the directory online
			continue
		case r.Code != 0:
			m.cfg.Log.Warn("heartbeat refused", "err", r.Err())
			continue
		}
		if want && r.ShouldShutdown {
			m.shutdownOnce.Do(func() { close(m.shutdownOK) })
		}
		if want {
			// Poll quickly while leaderships move away.
			select {
			case m.kick <- struct{}{}:
			default:
			}
			if !sleepCtx(m.ctx, 50*time.Millisecond) {
				return
			}
		}
	}
}

// register registers this broker until it succeeds or the membership
// closes; it returns the metadata offset of the registration.
func (m *Membership) register() (int64, bool) {
	host, port := m.cfg.Advertised()
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
		r, err := m.ctl.Propose(ctx, controller.RegisterBroker{
			ID: m.cfg.NodeID, IncarnationID: m.incarnation, Host: host, Port: port, Rack: m.cfg.Rack,
			Listeners: m.cfg.Listeners,
		})
		cancel()
		if err == nil && r.Code == 0 {
			m.epoch.Store(r.BrokerEpoch)
			m.cfg.Log.Info("registered with the controller", "node", m.cfg.NodeID, "broker_epoch", r.BrokerEpoch,
				"endpoint", host+":"+strconv.Itoa(int(port)))
			return r.Offset, true
		}
		if err == nil {
			err = r.Err()
		}
		m.cfg.Log.Warn("broker registration failed; retrying", "err", err)
		if !sleepCtx(m.ctx, backoff) {
			return 0, false
		}
		backoff = min(2*backoff, time.Second)
	}
}

// sleepCtx sleeps d unless ctx ends first (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
