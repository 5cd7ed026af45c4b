package replica

import (
	"errors"
	"fmt"
	"slices"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// core is the pure state machine of one replicated partition on this
// broker: its role and epochs as the controller gave them, and on the
// leader every follower's position, the ISR changes to propose and the HW
// the ISR allows. It does no I/O, starts no goroutine and reads no clock:
// time (Unix ms) and the log's positions (logPos) are arguments, and a call
// returns the actions the shell (partition.go, manager.go) carries out. It
// is not safe for concurrent use: the shell holds partition.mu around
// every call.
type core struct {
	cfg   coreConfig
	topic string
	part  int32

	stopped        bool  // inert: Manager closed, or the partition removed
	removed        bool  // removed (Stop, log recreated): not leading
	gen            int64 // bumped on every change of leadership or epoch
	role           engine.Role
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32 // committed ISR
	minISR         int32   // min.insync.replicas, >= 1

	// Leader side.
	followers   map[int32]*follower
	pendingISR  []int32 // AlterPartition in flight
	refused     bool    // the controller refused the last proposal: none before the next tick or state
	nextAlterMs int64   // no proposal before this (after an unknown outcome)
}

// coreConfig is what a core needs of the Manager's Config.
type coreConfig struct {
	self      int32 // this broker's id
	lagMs     int64 // replica.lag.time.max.ms
	backoffMs int64 // replica.fetch.backoff.ms: retry after an unknown AlterPartition outcome
	canAlter  bool  // an ISRUpdater exists: ISR changes may be proposed
	// registration is the leader's metadata view of a broker's
	// registration (Config.Registration); nil: no view, broker epochs are
	// neither checked nor required (every follower counts, as before
	// KIP-903).
	registration func(id int32) Registration
}

// follower is the leader's view of one follower replica.
type follower struct {
	id             int32
	fetchOffset    int64 // the offset of its last fetch = what it holds durably; -1 unknown
	lastFetchMs    int64
	lastFetchLEO   int64 // the leader's log end at that fetch; -1 before the first
	lastCaughtUpMs int64
	// brokerEpoch is the broker epoch its last counted fetch carried
	// (Fetch v15+ ReplicaState.ReplicaEpoch, KIP-903); -1 when it carried
	// none (an older fetch version) or before its first fetch.
	brokerEpoch int64
}

// logPos is what the core needs to know of the partition's log, read by the
// shell (under partition.mu) and passed in: the core never touches the log.
type logPos struct {
	end        int64 // log end offset
	durable    int64 // durable end: what this broker holds on disk
	hw         int64 // the log's high watermark
	epochStart int64 // start offset of the newest leader epoch in the log's cache; -1 none
}

// actions is what the shell does after a core call, in this order:
// propose (when non-nil): send the AlterPartition to the controller, one
// call on its own goroutine, and hand the answer to core.alterDone;
// advanceHW (when >= 0): Log.AdvanceHighWatermark, outside partition.mu
// (it runs produce callbacks inline).
type actions struct {
	propose   *proposal
	advanceHW int64
}

func noActions() actions { return actions{advanceHW: -1} }

// proposal is one ISR change the leader sends to the controller.
type proposal struct {
	req  AlterPartition
	from []int32 // the committed ISR it changes
	gen  int64   // the leadership generation it was made in
}

// alterOutcome classifies the controller's answer to a proposal.
type alterOutcome int8

const (
	alterIgnored alterOutcome = iota // leadership or the proposal changed meanwhile
	alterApplied                     // committed; the ISR is the controller's (when not older than ours)
	alterRefused                     // refused: proposed again at the next tick or state
	alterRetry                       // unknown outcome: proposed again after the backoff
)

func newCore(cfg coreConfig, topic string, part int32) *core {
	return &core{cfg: cfg, topic: topic, part: part, leader: -1, leaderEpoch: -1, partitionEpoch: -1, minISR: 1}
}

// leading reports whether produce requests may be taken (isLeader).
func (c *core) leading() bool { return c.role == engine.RoleLeader && !c.removed }

// activeLeader reports whether leader-side decisions apply.
func (c *core) activeLeader() bool { return c.role == engine.RoleLeader && !c.stopped }

// stale reports whether st is older than the applied state (lower leader
// epoch, or same leader epoch and lower partition epoch).
func (c *core) stale(st *Partition) bool {
	return st.LeaderEpoch < c.leaderEpoch ||
		(st.LeaderEpoch == c.leaderEpoch && st.PartitionEpoch < c.partitionEpoch)
}

// prepareLeader decides whether the leader state st can be applied and
// whether it starts a new leader epoch here (then the shell stops
// following, records the epoch in the log, and calls becomeLeader). A
// damaged log may not start leading.
func (c *core) prepareLeader(st *Partition, damaged bool) (newEpoch bool, err error) {
	if c.stale(st) {
		return false, ErrStaleState
	}
	newEpoch = c.role != engine.RoleLeader || st.LeaderEpoch != c.leaderEpoch
	if newEpoch && damaged {
		return false, fmt.Errorf("%w: %s-%d lost data below its recovery point and has not re-fetched it", kerr.KafkaStorageError, st.Topic, st.Partition)
	}
	return newEpoch, nil
}

// becomeLeader applies st (after prepareLeader): on a new epoch every
// follower's position starts unknown and an in-flight proposal is dropped;
// a refused change may be proposed again at once. Followers start caught
// up at now (Kafka's lastCaughtUpTimeMs on becoming leader).
func (c *core) becomeLeader(st *Partition, newEpoch bool, now int64, pos logPos) actions {
	if newEpoch {
		c.gen++
		c.followers = map[int32]*follower{}
		c.pendingISR = nil
	}
	c.refused = false
	c.role = engine.RoleLeader
	c.stopped, c.removed = false, false
	c.leader = st.Leader
	c.leaderEpoch, c.partitionEpoch = st.LeaderEpoch, st.PartitionEpoch
	c.replicas = slices.Clone(st.Replicas)
	c.isr = slices.Clone(st.ISR)
	if c.pendingISR != nil && slices.Equal(sortedCopy(c.pendingISR), sortedCopy(st.ISR)) {
		c.pendingISR = nil // the controller's push overtook our own answer
	}
	c.minISR = int32(max(st.MinISR, 1))
	if c.followers == nil {
		c.followers = map[int32]*follower{}
	}
	for _, id := range c.replicas {
		if id != c.cfg.self && c.followers[id] == nil {
			c.followers[id] = &follower{id: id, fetchOffset: -1, lastFetchLEO: -1, lastCaughtUpMs: now, brokerEpoch: -1}
		}
	}
	for id := range c.followers {
		if !slices.Contains(c.replicas, id) {
			delete(c.followers, id)
		}
	}
	return c.hwActions(pos)
}

// becomeFollower applies the follower state st. changed reports a new
// leader, leader epoch or role (or a restart after removal): the shell
// then moves the partition to the new leader's fetcher, which truncates
// before it fetches.
func (c *core) becomeFollower(st *Partition) (changed bool, err error) {
	if c.stale(st) {
		return false, ErrStaleState
	}
	changed = c.role != engine.RoleFollower || st.LeaderEpoch != c.leaderEpoch || st.Leader != c.leader || c.stopped
	if changed {
		c.gen++
		c.followers = nil
		c.pendingISR = nil
	}
	c.role = engine.RoleFollower
	c.stopped, c.removed = false, false
	c.leader = st.Leader
	c.leaderEpoch, c.partitionEpoch = st.LeaderEpoch, st.PartitionEpoch
	c.replicas = slices.Clone(st.Replicas)
	c.isr = slices.Clone(st.ISR)
	c.minISR = int32(max(st.MinISR, 1))
	return changed, nil
}

// halt makes the partition inert (the Manager closes): no more decisions;
// the role stays.
func (c *core) halt() { c.stopped = true }

// remove ends replication here (Stop, or the log was recreated): inert and
// no longer leading, and pending acks=-1 waits answer NOT_LEADER.
func (c *core) remove() {
	c.stopped, c.removed = true, true
	c.gen++
}

// hw is the HW the ISR allows: min of the leader's durable end and every
// other member of the maximal ISR's fetch offset (= durable offset); -1
// while not leading or while a member's position is unknown.
func (c *core) hw(pos logPos) int64 {
	if !c.activeLeader() {
		return -1
	}
	hw := pos.durable
	for _, id := range c.maximalISR() {
		if id == c.cfg.self {
			continue
		}
		f := c.followers[id]
		if f == nil || f.fetchOffset < 0 {
			return -1
		}
		hw = min(hw, f.fetchOffset)
	}
	return hw
}

// hwActions asks the shell to advance the log's HW when the ISR allows
// more than it has: the HW never moves backwards.
func (c *core) hwActions(pos logPos) actions {
	a := noActions()
	if hw := c.hw(pos); hw > pos.hw {
		a.advanceHW = hw
	}
	return a
}

// maximalISR is the committed ISR plus the members of an in-flight
// proposal (Kafka's maximal ISR): the HW waits for both.
func (c *core) maximalISR() []int32 {
	if c.pendingISR == nil {
		return c.isr
	}
	out := slices.Clone(c.isr)
	for _, id := range c.pendingISR {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// durable: the leader's own durable end moved; it reads only pos.durable
// and pos.hw.
func (c *core) durable(pos logPos) actions { return c.hwActions(pos) }

// followerFetch records follower id's fetch at fetchOffset at now (Kafka's
// Partition.updateFollowerFetchState): it is caught up when it fetched at
// or past the log end, or past the log end the leader had at its previous
// fetch (then it was caught up at that fetch). A follower out of the ISR
// that caught up is proposed for it, and the HW moves.
// kerr.NotLeaderForPartition when not leading or id is no replica.
//
// brokerEpoch is the broker epoch the fetch carried (KIP-903; -1: none).
// A fetch from an older incarnation of the broker than the one the
// metadata view has registered (a broker restarted, its old process still
// fetching) is refused with kerr.NotLeaderForPartition and changes
// nothing: not the follower's position, its caught-up time, the ISR nor
// the HW (Kafka's Replica.updateFetchStateOrThrow; Kafka compares with
// the alive registration only, Strata with any newer registration, fenced
// or not).
func (c *core) followerFetch(id int32, brokerEpoch, fetchOffset, now int64, pos logPos) (actions, error) {
	if !c.activeLeader() {
		return noActions(), kerr.NotLeaderForPartition
	}
	f := c.followers[id]
	if f == nil {
		return noActions(), kerr.NotLeaderForPartition // not a replica of this partition
	}
	if brokerEpoch != -1 && c.cfg.registration != nil {
		if r := c.cfg.registration(id); r.Registered && r.Epoch > brokerEpoch {
			return noActions(), fmt.Errorf("%w: stale fetch of broker %d: broker epoch %d, registered with %d",
				kerr.NotLeaderForPartition, id, brokerEpoch, r.Epoch)
		}
	}
	f.brokerEpoch = brokerEpoch
	switch {
	case fetchOffset >= pos.end:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, now)
	case f.lastFetchLEO >= 0 && fetchOffset >= f.lastFetchLEO:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, f.lastFetchMs)
	}
	f.fetchOffset = fetchOffset
	f.lastFetchMs = now
	f.lastFetchLEO = pos.end
	prop := c.maybeExpand(f, now, pos)
	a := c.hwActions(pos)
	a.propose = prop
	return a, nil
}

// tick is the periodic ISR check (every replica.lag.time.max.ms/2): a
// refused change may be proposed again; ISR members not caught up within
// replica.lag.time.max.ms are dropped; otherwise a caught-up follower out
// of the ISR is added (one proposal at a time).
func (c *core) tick(now int64, pos logPos) actions {
	a := noActions()
	if !c.activeLeader() {
		return a
	}
	c.refused = false
	if a.propose = c.maybeShrink(now); a.propose != nil {
		return a
	}
	for _, id := range c.replicas {
		if f := c.followers[id]; f != nil && f.fetchOffset >= 0 {
			if a.propose = c.maybeExpand(f, now, pos); a.propose != nil {
				return a
			}
		}
	}
	return a
}

// canPropose reports whether an ISR change may be sent at now.
func (c *core) canPropose(now int64) bool {
	return c.cfg.canAlter && c.pendingISR == nil && c.activeLeader() && !c.refused && now >= c.nextAlterMs
}

// maybeExpand proposes adding f to the ISR when it is out of it and caught
// up: its fetch offset reached the HW and the start of the current leader
// epoch (Kafka's isFollowerInSync).
func (c *core) maybeExpand(f *follower, now int64, pos logPos) *proposal {
	if slices.Contains(c.isr, f.id) || !c.canPropose(now) {
		return nil
	}
	if f.fetchOffset < pos.hw || f.fetchOffset < pos.epochStart || !c.isrEligible(f) {
		return nil
	}
	return c.propose(append(slices.Clone(c.isr), f.id))
}

// isrEligible is Kafka's Partition.isReplicaIsrEligible (KIP-903): with a
// metadata view, the follower's broker is registered, not fenced nor
// shutting down, and its last fetch carried no broker epoch (-1) or the
// registered one.
func (c *core) isrEligible(f *follower) bool {
	if c.cfg.registration == nil {
		return true
	}
	r := c.cfg.registration(f.id)
	return r.Registered && r.Alive && (f.brokerEpoch == -1 || f.brokerEpoch == r.Epoch)
}

// isrEpochs is the broker epoch of each member of isr as its fetches
// carried it (Kafka's addBrokerEpochToIsr): the controller refuses the
// change with INELIGIBLE_REPLICA when one is not the member's current
// registration. -1 (not checked) for this broker (the AlterPartition's own
// broker epoch covers it) and for a follower whose fetches carry none.
func (c *core) isrEpochs(isr []int32) []int64 {
	out := make([]int64, len(isr))
	for i, id := range isr {
		out[i] = -1
		if f := c.followers[id]; f != nil && id != c.cfg.self {
			out[i] = f.brokerEpoch
		}
	}
	return out
}

// maybeShrink proposes dropping ISR members not caught up within
// replica.lag.time.max.ms.
func (c *core) maybeShrink(now int64) *proposal {
	if !c.canPropose(now) {
		return nil
	}
	var next []int32
	dropped := false
	for _, id := range c.isr {
		if id != c.cfg.self {
			if f := c.followers[id]; f == nil || now-f.lastCaughtUpMs > c.cfg.lagMs {
				dropped = true
				continue
			}
		}
		next = append(next, id)
	}
	if !dropped {
		return nil
	}
	return c.propose(next)
}

// propose records isr as in flight and returns the request to send.
func (c *core) propose(isr []int32) *proposal {
	c.pendingISR = isr
	return &proposal{
		req: AlterPartition{Topic: c.topic, Partition: c.part, LeaderEpoch: c.leaderEpoch,
			PartitionEpoch: c.partitionEpoch, ISR: slices.Clone(isr), ISREpochs: c.isrEpochs(isr)},
		from: slices.Clone(c.isr),
		gen:  c.gen,
	}
}

// alterDone applies the controller's answer to p at now. A committed
// change becomes the ISR unless the state already applied is newer; a
// refusal (a *kerr.Error: stale epochs, an ineligible member, ...) falls
// back to the committed ISR and, as Kafka's leader, proposes again,
// recomputed, at the next tick or state, whichever comes first; any other
// error is an unknown outcome, proposed again after the backoff.
func (c *core) alterDone(p *proposal, res AlterPartitionResult, err error, now int64, pos logPos) (alterOutcome, actions) {
	if c.gen != p.gen || c.role != engine.RoleLeader || c.leaderEpoch != p.req.LeaderEpoch {
		return alterIgnored, noActions() // leadership changed meanwhile; the controller's state rules
	}
	if c.pendingISR != nil && !slices.Equal(c.pendingISR, p.req.ISR) {
		return alterIgnored, noActions()
	}
	c.pendingISR = nil
	var out alterOutcome
	var ke *kerr.Error
	switch {
	case err == nil:
		if res.LeaderEpoch == c.leaderEpoch && res.PartitionEpoch >= c.partitionEpoch {
			c.partitionEpoch = res.PartitionEpoch
			c.isr = slices.Clone(res.ISR)
		}
		out = alterApplied
	case errors.As(err, &ke):
		c.refused = true
		out = alterRefused
	default:
		c.nextAlterMs = now + c.cfg.backoffMs
		out = alterRetry
	}
	return out, c.hwActions(pos)
}

// checkProduce is CheckProduce's decision: only the leader takes
// produces, and acks=-1 needs at least min.insync.replicas in the
// committed ISR. name names the log in the error.
func checkProduce(leading bool, isrLen, minISR int32, acks int16, name fmt.Stringer) error {
	if !leading {
		return kerr.NotLeaderForPartition
	}
	if acks == -1 && isrLen < minISR {
		return fmt.Errorf("%w: ISR of %s has %d members, min.insync.replicas is %d", kerr.NotEnoughReplicas, name, isrLen, minISR)
	}
	return nil
}

// ackResult is WaitReplicated's answer once the HW passed the batch (or
// the log failed with err): the leadership it was appended under must
// still hold (same generation), and the ISR must not have shrunk below
// min.insync.replicas meanwhile.
func ackResult(err error, sameGen, leading bool, isrLen, minISR int32) error {
	switch {
	case err != nil:
		return err
	case !sameGen || !leading:
		return kerr.NotLeaderForPartition
	case isrLen < minISR:
		return kerr.NotEnoughReplicasAfterAppend
	default:
		return nil
	}
}

// status fills the core's part of a Status.
func (c *core) status(st *Status) {
	st.Role = c.role
	st.Leader = c.leader
	st.LeaderEpoch = c.leaderEpoch
	st.PartitionEpoch = c.partitionEpoch
	st.Replicas = slices.Clone(c.replicas)
	st.ISR = slices.Clone(c.isr)
	st.PendingISR = slices.Clone(c.pendingISR)
	if c.role == engine.RoleLeader {
		for _, id := range c.replicas {
			if f := c.followers[id]; f != nil {
				st.Followers = append(st.Followers, FollowerStatus{ID: id, FetchOffset: f.fetchOffset, LastCaughtUpMs: f.lastCaughtUpMs,
					LastFetchMs: f.lastFetchMs, BrokerEpoch: f.brokerEpoch})
			}
		}
	}
}

func sortedCopy(s []int32) []int32 {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
