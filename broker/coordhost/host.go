package coordhost

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultRetry is how often the leader loop looks again without a view
// change, to retry a failed load.
const DefaultRetry = 250 * time.Millisecond

// Config configures a Host. Load, Unload and Clock are required for
// Follow; Partition and Creator for Coordinator.
type Config struct {
	Topic Topic
	// Name prefixes the host's log messages ("groups", "txn").
	Name string
	// Load replays partition p and coordinates it at leader epoch epoch
	// (again if it is loaded at another epoch); an error is retried at
	// the next wakeup while the partition is still led. Unload stops
	// coordinating p. Both run on the leader loop, one at a time.
	Load   func(p, epoch int32) error
	Unload func(p int32)
	// Partition maps a key (group id, transactional id) to its partition
	// of the topic, given the partition count of the view's topic.
	Partition func(key string, partitions int32) int32
	// Creator proposes the topic when Coordinator or Ensure finds it
	// missing; nil: never proposed.
	Creator Creator
	Clock   Clock
	Log     *slog.Logger // nil: slog.Default()
	Retry   time.Duration
}

// Host hosts one coordinator on the partitions of its internal topic that
// this node leads. Its goroutines (the leader loop started by Follow, the
// periodic callbacks started by Every) belong to it and end in Close.
type Host struct {
	cfg      Config
	log      *slog.Logger
	creating atomic.Bool // a proposal of the topic is in flight

	mu     sync.Mutex
	closed bool          // under mu
	stop   chan struct{} // closed by Close
	wg     sync.WaitGroup
}

// New returns a host that runs nothing until Follow or Every.
func New(cfg Config) *Host {
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	return &Host{cfg: cfg, log: log, stop: make(chan struct{})}
}

// Topic returns the internal topic's description.
func (h *Host) Topic() Topic { return h.cfg.Topic }

// goOwned runs fn on a goroutine of the host; false once it is closed.
func (h *Host) goOwned(fn func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		fn()
	}()
	return true
}

// Follow starts the leader loop over src: at every view change, and
// every Retry in between, it loads the partitions this node has come to
// lead (or leads at a new epoch) and unloads those it no longer leads
// (Plan). It returns false, starting nothing, once the host is closed.
func (h *Host) Follow(src Source) bool {
	return h.goOwned(func() { h.follow(src) })
}

func (h *Host) follow(src Source) {
	tick, stopTick := h.cfg.Clock.Tick(h.cfg.Retry)
	defer stopTick()
	loaded := Leadership{}
	for {
		var changed <-chan struct{}
		if v := src.View(); v != nil {
			changed = v.Changed()
			h.apply(loaded, v.Led(h.cfg.Topic.Name))
		}
		select {
		case <-h.stop:
			return
		case <-changed:
		case <-tick:
		}
	}
}

// apply carries out Plan(loaded, led) and records the outcomes in loaded.
func (h *Host) apply(loaded, led Leadership) {
	for _, a := range Plan(loaded, led, h.cfg.Topic.Partitions) {
		var err error
		switch a.Op {
		case Load:
			if err = h.cfg.Load(a.Partition, a.Epoch); err != nil {
				h.log.Warn(h.cfg.Name+": loading a coordinator partition failed; retrying", "partition", a.Partition, "err", err)
			} else {
				h.log.Info(h.cfg.Name+": coordinating partition", "partition", a.Partition, "leader_epoch", a.Epoch)
			}
		case Unload:
			h.cfg.Unload(a.Partition)
			h.log.Info(h.cfg.Name+": no longer coordinating partition", "partition", a.Partition)
		}
		loaded.Done(a, err)
	}
}

// Every calls fn with the clock's time every d until Close (the
// coordinator's timeouts and expiries). It returns false, starting
// nothing, once the host is closed.
func (h *Host) Every(d time.Duration, fn func(now time.Time)) bool {
	return h.goOwned(func() {
		tick, stopTick := h.cfg.Clock.Tick(d)
		defer stopTick()
		for {
			select {
			case <-h.stop:
				return
			case <-tick:
			}
			fn(h.cfg.Clock.Now())
		}
	})
}

// Close stops the host's goroutines and waits for them; a load or
// callback in progress finishes first. Partitions stay as they are:
// the owner closes its coordinator afterwards. Close may be called more
// than once.
func (h *Host) Close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.stop)
	}
	h.mu.Unlock()
	h.wg.Wait()
}
