package sharehost

// Share groups in a cluster (issue 24). The choice, as docs/share-groups.md
// says: membership is the group coordinator's (the broker that leads the
// group's __consumer_offsets partition answers ShareGroupHeartbeat, found
// with FindCoordinator key type GROUP as Kafka's clients do), and a
// share-partition's state is owned by the leader of its topic-partition
// (where clients send ShareFetch and ShareAcknowledge), persisted in
// __share_group_state, a replicated compacted topic like any other: every
// snapshot is produced with acks=all to the leader of the state
// partition of its key (share.StatePartition), so it survives the loss of
// the broker that wrote it. A broker that becomes a partition's leader
// (a new leader epoch) loads the share-partition from its own replica of
// that state partition, read to its log end as the coordinators load
// theirs, when the share-partition is first used there; a share-partition
// whose leadership moved away is dropped from memory without a write.
//
// The writer: snapshots are queued in the order of the transitions (under
// the host's lock) and one goroutine sends them, each drain's records of
// one state partition as one batch, waiting for each answer before the
// next, so a key's records land in order. A request is answered once its
// snapshots are acknowledged (WaitDurable). A failed produce is retried
// (the state partition's leader moves, the topic is being created) for up
// to writeTimeout, then the waiting requests fail with its error.

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"time"

	"github.com/stratalog/strata/broker/txnhost"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/share"
)

// Cluster is what a host in cluster mode needs of the broker.
type Cluster interface {
	// Leads reports whether this broker leads partition p of t, with
	// its leader epoch.
	Leads(t *engine.Topic, p int32) (epoch int32, ok bool)
	// StateTopic returns the partition count of __share_group_state in
	// the cluster's view; ok false while it does not exist (its
	// creation is then proposed).
	StateTopic() (partitions int32, ok bool)
	// Produce appends batch to partition p of topic at its leader with
	// acks=all.
	Produce(ctx context.Context, topic string, p int32, batch []byte) error
	// ReadPartition reads partition p of topic at its leader, from its
	// log start to its high watermark, passing the record batches to fn
	// (a broker with no replica of a state partition).
	ReadPartition(ctx context.Context, topic string, p int32, fn func(batches []byte) error) error
	// ReadPartitionSince reads partition p of topic at its leader, from
	// the first offset whose timestamp is at or after ts (ListOffsets;
	// -2: the log start) to its high watermark, passing the record
	// batches to fn a Fetch answer at a time (the dead-letter writer's
	// search for dead letters already written: dlq.go).
	ReadPartitionSince(ctx context.Context, topic string, p int32, ts int64, fn func(batches []byte) error) error
	// InSync reports whether this broker is in the ISR of partition p of
	// topic: its replica holds every acknowledged write.
	InSync(topic string, p int32) bool
	// MemberGone tells the other brokers, without waiting, that member
	// left group or was fenced by this broker, its coordinator: each
	// releases the records the member holds in the share-partitions it
	// leads. A notice that fails is retried, for at least within (the
	// group's record lock duration, after which the records' locks
	// have expired anyway), until the broker acknowledges it or is no
	// longer a live broker of the cluster.
	MemberGone(group, member string, within time.Duration)
	// CreateTopic proposes topic to the controller with the broker's
	// default partitions and replication and configs, calling done once
	// this broker's view has it (or with the error).
	CreateTopic(name string, configs map[string]string, done func(error))
}

const (
	// readTimeout bounds a read of a state partition at its leader
	// (without the host's lock: load.go).
	readTimeout     = 5 * time.Second
	writeTimeout    = 30 * time.Second
	writeBackoffMin = 50 * time.Millisecond
	writeBackoffMax = time.Second
)

// pending is one snapshot (or tombstone) queued for the writer.
type pending struct {
	key, value []byte

	mu   sync.Mutex
	done bool
	err  error
	fns  []func(error)
}

// then calls fn once the write is acknowledged or failed.
func (p *pending) then(fn func(error)) {
	p.mu.Lock()
	if !p.done {
		p.fns = append(p.fns, fn)
		p.mu.Unlock()
		return
	}
	err := p.err
	p.mu.Unlock()
	fn(err)
}

func (p *pending) finish(err error) {
	p.mu.Lock()
	p.done, p.err = true, err
	fns := p.fns
	p.fns = nil
	p.mu.Unlock()
	for _, fn := range fns {
		fn(err)
	}
}

// writer is the cluster-mode state writer.
type writer struct {
	mu     sync.Mutex
	queue  []*pending
	closed bool // the loop has returned: a record queued now fails at once
	kick   chan struct{}
	done   chan struct{}
}

// enqueue queues a record for the writer (lock held, so in transition
// order).
func (h *Host) enqueue(key, value []byte) DurableAt {
	p := &pending{key: key, value: value}
	h.w.mu.Lock()
	if h.w.closed {
		h.w.mu.Unlock()
		p.finish(errClosed)
		return DurableAt{p: p}
	}
	h.w.queue = append(h.w.queue, p)
	h.w.mu.Unlock()
	select {
	case h.w.kick <- struct{}{}:
	default:
	}
	return DurableAt{p: p}
}

// writeLoop sends the queued records until stop closes; what is queued
// then fails.
func (h *Host) writeLoop(stop <-chan struct{}) {
	defer close(h.w.done)
	for {
		select {
		case <-stop:
			h.w.mu.Lock()
			q := h.w.queue
			h.w.queue, h.w.closed = nil, true
			h.w.mu.Unlock()
			for _, p := range q {
				p.finish(errClosed)
			}
			return
		case <-h.w.kick:
		}
		h.w.mu.Lock()
		q := h.w.queue
		h.w.queue = nil
		h.w.mu.Unlock()
		if len(q) > 0 {
			h.write(stop, q)
		}
	}
}

// write sends one drain: each state partition's records as one batch, in
// queue order within a partition.
func (h *Host) write(stop <-chan struct{}, q []*pending) {
	start := h.now()
	backoff := writeBackoffMin
	var n int32
	for {
		var ok bool
		if n, ok = h.cluster.StateTopic(); ok && n > 0 {
			break
		}
		if !h.pause(stop, start, &backoff) {
			for _, p := range q {
				p.finish(errStateTopic)
			}
			return
		}
	}
	byPart := map[int32][]*pending{}
	var order []int32
	for _, p := range q {
		sp := share.StatePartition(p.key, n)
		if byPart[sp] == nil {
			order = append(order, sp)
		}
		byPart[sp] = append(byPart[sp], p)
	}
	for _, sp := range order {
		ps := byPart[sp]
		err := h.produce(stop, start, sp, ps)
		for _, p := range ps {
			p.finish(err)
		}
	}
}

// produce sends ps to state partition sp, retrying until writeTimeout.
func (h *Host) produce(stop <-chan struct{}, start time.Time, sp int32, ps []*pending) error {
	var b record.Builder
	now := h.now().UnixMilli()
	b.Reset(record.CodecNone, now)
	for _, p := range ps {
		b.Add(now, p.key, p.value, nil)
	}
	batch, err := b.AppendTo(nil)
	if err != nil {
		return err
	}
	backoff := writeBackoffMin
	for {
		ctx, cancel := context.WithTimeout(h.ctx, writeTimeout)
		err = h.cluster.Produce(ctx, StateTopic, sp, batch)
		cancel()
		if err == nil {
			return nil
		}
		h.log.Debug("share: writing "+StateTopic+" failed; retrying", "partition", sp, "err", err)
		if !h.pause(stop, start, &backoff) {
			return err
		}
	}
}

// pause waits backoff (doubled for next time) unless stop closes or the
// write has taken writeTimeout: false then.
func (h *Host) pause(stop <-chan struct{}, start time.Time, backoff *time.Duration) bool {
	if h.now().Sub(start) >= writeTimeout {
		return false
	}
	c, cancel := h.clock.After(*backoff)
	defer cancel()
	*backoff = min(2**backoff, writeBackoffMax)
	select {
	case <-stop:
		return false
	case <-c:
		return true
	}
}

type hostError string

func (e hostError) Error() string { return string(e) }

const (
	errClosed     = hostError("share: the broker is closing")
	errStateTopic = hostError("share: " + StateTopic + " does not exist yet")
)

// snapshot is a share-partition's state record in a cluster: share.State
// (its fields at the top level, so a reader of share.State reads it) and
// the leader epoch of the partition's leader that wrote it. A record of an
// older epoch than one before it is a deposed leader's late write and is
// not loaded (loadState).
type snapshot struct {
	share.State
	LeaderEpoch int32 `json:",omitempty"`
}

// loadState reads share-partition key's state in its state partition
// (scanState): the last record of the highest leader epoch written; found
// false when there is none, or a tombstone came last; err when the
// partition could not be read (then nothing is known).
func (h *Host) loadState(key []byte) (state share.State, found bool, err error) {
	n, ok := h.statePartitions()
	if !ok {
		return state, false, nil
	}
	p := share.StatePartition(key, n)
	epoch := int32(-1)
	err = h.scanState(p, func(hdr *record.Header, r *record.Record) error {
		if hdr.Control() || string(r.Key) != string(key) {
			return nil
		}
		if r.Value == nil {
			state, found = share.State{}, false // a tombstone: deleted by any epoch
			return nil
		}
		var s snapshot
		if err := json.Unmarshal(r.Value, &s); err != nil {
			h.log.Error("share: unreadable share-partition state skipped", "err", err)
			return nil
		}
		if s.LeaderEpoch < epoch {
			return nil // a deposed leader's late write
		}
		epoch, state, found = s.LeaderEpoch, s.State, true
		return nil
	})
	if err != nil {
		h.log.Error("share: reading "+StateTopic+" failed", "partition", p, "err", err)
		return share.State{}, false, err
	}
	return state, found, nil
}

// statePartitions is __share_group_state's partition count as the local
// topic has it (in a cluster every broker has every topic, with logs only
// for the partitions it hosts); false while it does not exist.
func (h *Host) statePartitions() (int32, bool) {
	if t := h.eng.Topic(StateTopic); t != nil && !t.Deleted() && t.Partitions() > 0 {
		return t.Partitions(), true
	}
	return 0, false
}

// scanState calls fn for every record of state partition p: this
// broker's replica read to its log end, or, without one in the
// partition's ISR (none here, or one that fell behind and may miss
// acknowledged snapshots), the partition's leader read to its high
// watermark (ReadPartition).
func (h *Host) scanState(p int32, fn func(hdr *record.Header, r *record.Record) error) error {
	if t := h.eng.Topic(StateTopic); t != nil && !t.Deleted() {
		if l := t.Partition(p); l != nil && (h.cluster == nil || h.cluster.InSync(StateTopic, p)) {
			return txnhost.ScanLog(l, fn)
		}
	}
	if h.cluster == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(h.ctx, readTimeout)
	defer cancel()
	return h.cluster.ReadPartition(ctx, StateTopic, p, func(batches []byte) error {
		for rest := batches; len(rest) > 0; {
			batch, r, _, err := record.Next(rest)
			if err != nil {
				return err
			}
			rest = r
			if err := record.Iterate(batch, fn); err != nil {
				return err
			}
		}
		return nil
	})
}

// loadLocal reads the last record of key in its state partition
// (scanState): found false when there is none, value nil for a tombstone,
// err when the partition could not be read.
func (h *Host) loadLocal(key []byte) (value []byte, found bool, err error) {
	n, ok := h.statePartitions()
	if !ok {
		return nil, false, nil
	}
	p := share.StatePartition(key, n)
	err = h.scanState(p, func(hdr *record.Header, r *record.Record) error {
		if !hdr.Control() && string(r.Key) == string(key) {
			value, found = r.Value, true
		}
		return nil
	})
	if err != nil {
		h.log.Error("share: reading "+StateTopic+" failed", "partition", p, "err", err)
		return nil, false, err
	}
	return value, found, nil
}

// dropUnled forgets, without writing, the share-partitions this broker no
// longer leads at the epoch it loaded them (lock held): their state is
// the new leader's.
func (h *Host) dropUnled() {
	for k, sp := range h.parts {
		t := h.eng.TopicByID(k.TopicID)
		if t != nil && !t.Deleted() {
			if epoch, ok := h.cluster.Leads(t, k.Part); ok && epoch == sp.epoch {
				continue
			}
		}
		delete(h.parts, k)
	}
}

// Replicas holds, per group, the share-partitions with state in this
// broker's replicas of __share_group_state (ReplicaKeys), read without
// the host's lock for the calls that take it (Known, GroupKeys,
// deleteKeys).
type Replicas map[string]map[Key]bool

// ReplicaKeys reads this broker's replicas of __share_group_state once,
// without the host's lock, for the share-partitions of groups with state
// there (a tombstone last: none). With unknownOnly, the groups known here
// (members, or share-partitions loaded or stored) are left out: Known
// answers for them without the read. Nil on a single broker.
func (h *Host) ReplicaKeys(groups []string, unknownOnly bool) Replicas {
	if h.cluster == nil || h.err != nil || len(groups) == 0 {
		return nil
	}
	want := map[string]bool{}
	h.mu.Lock()
	for _, g := range groups {
		if !unknownOnly || !h.knownHere(g) {
			want[g] = true
		}
	}
	h.mu.Unlock()
	out := Replicas{}
	if len(want) == 0 {
		return out
	}
	for g := range want {
		out[g] = map[Key]bool{}
	}
	n, ok := h.statePartitions()
	if !ok {
		return out
	}
	for p := range n {
		err := h.scanState(p, func(hdr *record.Header, r *record.Record) error {
			if hdr.Control() {
				return nil
			}
			if kind, k, ok := decodeShareKey(r.Key); ok && kind == shareKeyState && want[k.Group] {
				out[k.Group][k] = r.Value != nil
			}
			return nil
		})
		if err != nil {
			h.log.Error("share: reading "+StateTopic+" failed", "partition", p, "err", err)
		}
	}
	for _, keys := range out {
		for k, live := range keys {
			if !live {
				delete(keys, k)
			}
		}
	}
	return out
}

// RefreshGroupConfigs, in a cluster, reads group's configs from this
// broker's replica of __share_group_state without the host's lock, then
// applies a change to the group's share-partitions here under it; on a
// single broker it does nothing. A new share session calls it (before
// taking the lock), and the broker that set them tells the others at
// once, so configs set through another broker reach the partition
// leaders. A change of the group's configs here while it reads (a load
// installing them, SetGroupConfigs) wins over what it read.
func (h *Host) RefreshGroupConfigs(group string) {
	if h.cluster == nil || h.err != nil {
		return
	}
	h.mu.Lock()
	gen := h.cfgGen[group]
	h.mu.Unlock()
	v, found, err := h.loadLocal(shareConfigKey(group))
	if err != nil || !found {
		return
	}
	cfgs := map[string]string{}
	if v != nil {
		if err := json.Unmarshal(v, &cfgs); err != nil {
			return
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cfgGen[group] != gen || maps.Equal(cfgs, h.configs[group]) {
		return
	}
	h.bumpConfigs(group)
	if v == nil {
		delete(h.configs, group)
	} else {
		h.configs[group] = cfgs
	}
	for k, sp := range h.parts {
		if k.Group != group {
			continue
		}
		if err := h.Apply(k, sp, sp.P.SetConfig(h.PartConfig(group)), nil); err != nil {
			h.log.Error("share: persisting a config change", "group", group, "err", err)
		}
		sp.dlqWant, sp.dlqRetryAt, sp.dlqBackoff = true, 0, 0
	}
	h.dlqKick()
}
