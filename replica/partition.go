package replica

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// partition is one replicated partition on this broker. mu guards the
// fields below it; the atomics are read without it on the produce path and
// in engine callbacks.
type partition struct {
	m   *Manager
	key tp
	log *engine.Log
	h   *handler

	isLeader  atomic.Bool
	leaderGen atomic.Int64 // bumped on every change of leadership or epoch
	isrLen    atomic.Int32 // committed ISR size
	minISR    atomic.Int32
	leaderHW  atomic.Int64 // follower: the leader's HW from the last fetch response
	fstate    atomic.Int32 // follower: fetchTruncating / fetchFetching; set by the fetcher
	fetcherP  atomic.Pointer[fetcher]

	mu             sync.Mutex
	stopped        bool
	role           engine.Role
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32
	fetchFrom      int32 // follower: the broker whose fetcher holds p, -1 none

	// Leader side.
	followers    map[int32]*follower
	pendingISR   []int32 // AlterPartition in flight
	alterRefused bool    // the controller refused the last proposal: none before the next ISR check or state
	nextAlterMs  int64   // no proposal before this (after an unknown outcome)
}

// follower is the leader's view of one follower replica.
type follower struct {
	id             int32
	fetchOffset    int64 // the offset of its last fetch = what it holds durably; -1 unknown
	lastFetchMs    int64
	lastFetchLEO   int64 // the leader's log end at that fetch
	lastCaughtUpMs int64
}

const (
	fetchIdle int32 = iota
	fetchTruncating
	fetchFetching
)

func (p *partition) fetchState() string {
	if p.fetchFrom < 0 {
		return "idle"
	}
	if p.fstate.Load() == fetchTruncating {
		return "truncating"
	}
	return "fetching"
}

// setISR stores the committed ISR. Caller holds mu.
func (p *partition) setISR(isr []int32) {
	p.isr = slices.Clone(isr)
	p.isrLen.Store(int32(len(p.isr)))
}

// maximalISR is the committed ISR plus the members of an in-flight
// proposal. Caller holds mu.
func (p *partition) maximalISR() []int32 {
	if p.pendingISR == nil {
		return p.isr
	}
	out := slices.Clone(p.isr)
	for _, id := range p.pendingISR {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// hwLocked computes the HW the ISR allows: min of the leader's durable end
// and every other (maximal) ISR member's fetch offset; -1 if a member's
// position is still unknown. Caller holds mu.
func (p *partition) hwLocked() int64 {
	if p.role != engine.RoleLeader || p.stopped {
		return -1
	}
	hw := p.log.DurableEnd()
	self := p.m.cfg.BrokerID
	for _, id := range p.maximalISR() {
		if id == self {
			continue
		}
		f := p.followers[id]
		if f == nil || f.fetchOffset < 0 {
			return -1
		}
		hw = min(hw, f.fetchOffset)
	}
	return hw
}

// advance recomputes and applies the HW (outside mu: advancing runs the
// produce callbacks inline).
func (p *partition) advance() {
	p.mu.Lock()
	hw := p.hwLocked()
	p.mu.Unlock()
	if hw >= 0 {
		p.log.AdvanceHighWatermark(hw)
	}
}

// handler is the engine.ReplicationHandler of a partition's log.
type handler struct{ p *partition }

// Durable: the leader's own durable end moved (recompute the HW); a
// follower's moved (its HW may follow the leader's further, and its fetcher
// may issue the next fetch).
func (h *handler) Durable(end int64) {
	p := h.p
	if p.isLeader.Load() {
		p.advance()
		return
	}
	if hw := p.leaderHW.Load(); hw > 0 {
		p.log.AdvanceHighWatermark(hw)
	}
	if f := p.fetcherP.Load(); f != nil {
		f.poke()
	}
}

// FollowerFetch records follower replicaID's fetch at fetchOffset (Kafka's
// Partition.updateFollowerFetchState), then expands the ISR if the follower
// caught up, and moves the HW.
func (h *handler) FollowerFetch(replicaID int32, fetchOffset int64) error {
	p := h.p
	p.mu.Lock()
	if p.role != engine.RoleLeader || p.stopped {
		p.mu.Unlock()
		return kerr.NotLeaderForPartition
	}
	f := p.followers[replicaID]
	if f == nil {
		p.mu.Unlock()
		return kerr.NotLeaderForPartition // not a replica of this partition
	}
	now := p.m.nowMs()
	leo := p.log.LogEndOffset()
	switch {
	case fetchOffset >= leo:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, now)
	case f.lastFetchLEO >= 0 && fetchOffset >= f.lastFetchLEO:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, f.lastFetchMs)
	}
	f.fetchOffset = fetchOffset
	f.lastFetchMs = now
	f.lastFetchLEO = leo
	p.maybeExpandLocked(f, now)
	hw := p.hwLocked()
	p.mu.Unlock()
	if hw >= 0 {
		p.log.AdvanceHighWatermark(hw)
	}
	return nil
}

// maybeExpandLocked proposes adding f to the ISR when it is out of it and
// caught up: its fetch offset reached the HW and the start of the current
// leader epoch (Kafka's isFollowerInSync). Caller holds mu.
func (p *partition) maybeExpandLocked(f *follower, now int64) {
	if slices.Contains(p.isr, f.id) || !p.canProposeLocked(now) {
		return
	}
	if f.fetchOffset < p.log.HighWatermark() || f.fetchOffset < p.log.EpochStartOffset() {
		return
	}
	next := append(slices.Clone(p.isr), f.id)
	p.proposeLocked(next)
}

// canProposeLocked reports whether an ISR change may be sent now.
func (p *partition) canProposeLocked(now int64) bool {
	return p.m.cfg.ISR != nil && p.pendingISR == nil && !p.stopped && p.role == engine.RoleLeader &&
		!p.alterRefused && now >= p.nextAlterMs
}

// maybeShrinkLocked proposes dropping ISR members that have not caught up
// within replica.lag.time.max.ms. Caller holds mu.
func (p *partition) maybeShrinkLocked(now int64) {
	if !p.canProposeLocked(now) {
		return
	}
	lag := p.m.cfg.LagTimeMaxMs
	self := p.m.cfg.BrokerID
	var next []int32
	dropped := false
	for _, id := range p.isr {
		if id != self {
			if f := p.followers[id]; f == nil || now-f.lastCaughtUpMs > lag {
				dropped = true
				continue
			}
		}
		next = append(next, id)
	}
	if dropped {
		p.proposeLocked(next)
	}
}

// proposeLocked sends an AlterPartition for isr on its own goroutine.
// Caller holds mu.
func (p *partition) proposeLocked(isr []int32) {
	m := p.m
	p.pendingISR = isr
	req := AlterPartition{
		Topic:          p.key.topic,
		Partition:      p.key.part,
		LeaderEpoch:    p.leaderEpoch,
		PartitionEpoch: p.partitionEpoch,
		ISR:            slices.Clone(isr),
	}
	gen := p.leaderGen.Load()
	m.log.Info("proposing ISR change", "topic", req.Topic, "partition", req.Partition, "from", p.isr, "to", isr,
		"leaderEpoch", req.LeaderEpoch, "partitionEpoch", req.PartitionEpoch)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		res, err := m.cfg.ISR.AlterPartition(m.ctx, req)
		p.alterDone(gen, req, res, err)
	}()
}

// alterDone applies the controller's answer to a proposal.
func (p *partition) alterDone(gen int64, req AlterPartition, res AlterPartitionResult, err error) {
	m := p.m
	p.mu.Lock()
	if p.leaderGen.Load() != gen || p.role != engine.RoleLeader || p.leaderEpoch != req.LeaderEpoch {
		p.mu.Unlock()
		return // leadership changed meanwhile; the controller's state rules
	}
	if p.pendingISR != nil && !slices.Equal(p.pendingISR, req.ISR) {
		p.mu.Unlock()
		return
	}
	p.pendingISR = nil
	var ke *kerr.Error
	switch {
	case err == nil:
		if res.LeaderEpoch == p.leaderEpoch && res.PartitionEpoch >= p.partitionEpoch {
			p.partitionEpoch = res.PartitionEpoch
			p.setISR(res.ISR)
		}
		m.log.Info("ISR changed", "topic", req.Topic, "partition", req.Partition, "isr", res.ISR, "partitionEpoch", res.PartitionEpoch)
	case errors.As(err, &ke):
		// Refused (stale epochs, an ineligible member, ...): as Kafka's
		// leader, fall back to the committed state and propose again,
		// recomputed from it, at the next ISR check or on the controller's
		// next state, whichever comes first; not on every follower fetch
		// until then.
		p.alterRefused = true
		m.log.Warn("ISR change refused", "topic", req.Topic, "partition", req.Partition, "isr", req.ISR, "err", err)
	default:
		p.nextAlterMs = m.nowMs() + m.cfg.FetchBackoffMs
		if m.ctx.Err() == nil {
			m.log.Warn("ISR change failed; will retry", "topic", req.Topic, "partition", req.Partition, "isr", req.ISR, "err", err)
		}
	}
	hw := p.hwLocked()
	p.mu.Unlock()
	if hw >= 0 {
		p.log.AdvanceHighWatermark(hw)
	}
}

// runISRChecker is the Manager's ticker: every lag.time.max.ms/2 it shrinks
// the ISR of led partitions whose followers fell behind, and retries
// expansions of caught-up followers whose proposal failed.
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
			if p.role == engine.RoleLeader && !p.stopped {
				p.alterRefused = false // a refused change is proposed again, once per check
				p.maybeShrinkLocked(now)
				for _, id := range p.replicas {
					if f := p.followers[id]; f != nil && f.fetchOffset >= 0 {
						p.maybeExpandLocked(f, now)
					}
				}
			}
			p.mu.Unlock()
		}
	}
}
