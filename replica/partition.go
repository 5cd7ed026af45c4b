package replica

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/engine"
)

// partition is the shell of one replicated partition on this broker: its
// core (the pure state machine, core.go) under mu, the log it executes the
// core's actions on, and atomics republished from the core after every
// call, read without mu on the produce path and in engine callbacks.
type partition struct {
	m   *Manager
	key tp
	log *engine.Log
	h   *handler

	isLeader  atomic.Bool
	leaderGen atomic.Int64 // the core's generation: bumped on every change of leadership or epoch
	isrLen    atomic.Int32 // committed ISR size
	minISR    atomic.Int32
	leaderHW  atomic.Int64 // follower: the leader's HW from the last fetch response
	fstate    atomic.Int32 // follower: fetchTruncating / fetchFetching; set by the fetcher
	fetcherP  atomic.Pointer[fetcher]

	mu        sync.Mutex
	c         *core
	fetchFrom int32 // follower: the broker whose fetcher holds p, -1 none
}

const (
	fetchIdle int32 = iota
	fetchTruncating
	fetchFetching
)

func newPartition(m *Manager, k tp, l *engine.Log) *partition {
	p := &partition{m: m, key: k, log: l, fetchFrom: -1, c: newCore(m.coreCfg, k.topic, k.part)}
	p.h = &handler{p: p}
	p.publishLocked()
	return p
}

// publishLocked republishes the core's state the produce path reads
// lock-free: the generation before the role, so a WaitReplicated that saw
// the role saw its generation. Only changed values are stored: it runs on
// every follower fetch, and a store would take the cache line from the
// producers reading it. Caller holds mu.
func (p *partition) publishLocked() {
	if g := p.c.gen; p.leaderGen.Load() != g {
		p.leaderGen.Store(g)
	}
	if n := int32(len(p.c.isr)); p.isrLen.Load() != n {
		p.isrLen.Store(n)
	}
	if n := p.c.minISR; p.minISR.Load() != n {
		p.minISR.Store(n)
	}
	if l := p.c.leading(); p.isLeader.Load() != l {
		p.isLeader.Store(l)
	}
}

// posLocked reads what the core needs of the log. Caller holds mu.
func (p *partition) posLocked() logPos {
	return logPos{
		end:        p.log.LogEndOffset(),
		durable:    p.log.DurableEnd(),
		hw:         p.log.HighWatermark(),
		epochStart: p.log.EpochStartOffset(),
	}
}

// hwPosLocked is posLocked for core.durable, which reads only the
// durable end and the HW: the flush pipeline calls Durable on every flush
// (every append under write.caching), so it skips the epoch cache's lock.
// Caller holds mu.
func (p *partition) hwPosLocked() logPos {
	return logPos{end: -1, durable: p.log.DurableEnd(), hw: p.log.HighWatermark(), epochStart: -1}
}

// execLocked carries out the core's actions that may run under mu (an
// ISR proposal goes out on its own goroutine) and returns the HW to
// advance once mu is released (-1 none). Caller holds mu.
func (p *partition) execLocked(a actions) int64 {
	p.publishLocked()
	if a.propose != nil {
		p.send(a.propose)
	}
	return a.advanceHW
}

// advanceHW applies an HW action; never with mu held (advancing runs the
// produce callbacks inline).
func (p *partition) advanceHW(hw int64) {
	if hw >= 0 {
		p.log.AdvanceHighWatermark(hw)
	}
}

func (p *partition) fetchState() string {
	if p.fetchFrom < 0 {
		return "idle"
	}
	if p.fstate.Load() == fetchTruncating {
		return "truncating"
	}
	return "fetching"
}

// handler is the engine.ReplicationHandler of a partition's log.
type handler struct{ p *partition }

// Durable: the leader's own durable end moved (recompute the HW); a
// follower's moved (its HW may follow the leader's further, and its fetcher
// may issue the next fetch).
func (h *handler) Durable(end int64) {
	p := h.p
	if p.isLeader.Load() {
		p.mu.Lock()
		hw := p.execLocked(p.c.durable(p.hwPosLocked()))
		p.mu.Unlock()
		p.advanceHW(hw)
		return
	}
	if hw := p.leaderHW.Load(); hw > 0 {
		p.log.AdvanceHighWatermark(hw)
	}
	if f := p.fetcherP.Load(); f != nil {
		f.poke()
	}
}

// FollowerFetch records follower replicaID's fetch at fetchOffset, at the
// Manager's clock: the core may propose adding it to the ISR and move the
// HW.
// The engine's hook carries no broker epoch (-1: not checked); the server
// passes the epoch of a Fetch v15+ through Manager.FollowerFetchEpoch.
func (h *handler) FollowerFetch(replicaID int32, fetchOffset int64) error {
	return h.p.followerFetch(replicaID, -1, fetchOffset)
}

// followerFetch hands a follower's fetch, with the broker epoch it carried
// (-1 none), to the core.
func (p *partition) followerFetch(replicaID int32, brokerEpoch, fetchOffset int64) error {
	p.mu.Lock()
	a, err := p.c.followerFetch(replicaID, brokerEpoch, fetchOffset, p.m.nowMs(), p.posLocked())
	hw := p.execLocked(a)
	p.mu.Unlock()
	p.advanceHW(hw)
	return err
}

// send carries an ISR proposal to the controller on its own goroutine
// (bounded by the Manager's context and wait group) and hands the answer
// back to the core. Caller holds mu.
func (p *partition) send(prop *proposal) {
	m := p.m
	req := prop.req
	m.log.Info("proposing ISR change", "topic", req.Topic, "partition", req.Partition, "from", prop.from, "to", req.ISR, "brokerEpochs", req.ISREpochs,
		"leaderEpoch", req.LeaderEpoch, "partitionEpoch", req.PartitionEpoch)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		res, err := m.cfg.ISR.AlterPartition(m.ctx, req)
		p.alterDone(prop, res, err)
	}()
}

// alterDone applies the controller's answer to a proposal.
func (p *partition) alterDone(prop *proposal, res AlterPartitionResult, err error) {
	m := p.m
	req := prop.req
	p.mu.Lock()
	out, a := p.c.alterDone(prop, res, err, m.nowMs(), p.posLocked())
	hw := p.execLocked(a)
	p.mu.Unlock()
	switch out {
	case alterApplied:
		m.log.Info("ISR changed", "topic", req.Topic, "partition", req.Partition, "isr", res.ISR, "partitionEpoch", res.PartitionEpoch)
	case alterRefused:
		m.log.Warn("ISR change refused", "topic", req.Topic, "partition", req.Partition, "isr", req.ISR, "err", err)
	case alterRetry:
		if m.ctx.Err() == nil {
			m.log.Warn("ISR change failed; will retry", "topic", req.Topic, "partition", req.Partition, "isr", req.ISR, "err", err)
		}
	}
	p.advanceHW(hw)
}

// runISRChecker is the Manager's ticker: every lag.time.max.ms/2 it ticks
// every partition's core at the Manager's clock (shrinking the ISR of led
// partitions whose followers fell behind, proposing again changes that
// were refused or failed).
func (m *Manager) runISRChecker() {
	defer m.wg.Done()
	period := time.Duration(max(m.cfg.LagTimeMaxMs/2, 10)) * time.Millisecond
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		parts := make([]*partition, 0, len(m.parts))
		for _, p := range m.parts {
			parts = append(parts, p)
		}
		m.mu.Unlock()
		now := m.nowMs()
		for _, p := range parts {
			p.mu.Lock()
			p.execLocked(p.c.tick(now, p.posLocked()))
			p.mu.Unlock()
		}
	}
}
