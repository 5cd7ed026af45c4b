package group

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/stratalog/strata/internal/clocks"
	"github.com/stratalog/strata/internal/kcode"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Record is one __consumer_offsets record to write. A nil Value is a
// tombstone.
type Record struct {
	Key, Value []byte
}

// Log is the coordinator's storage: partitions of the __consumer_offsets
// topic. The server implements it over the engine; group does not import
// the engine.
type Log interface {
	// Append writes recs, in order, to partition p of __consumer_offsets and
	// calls done exactly once when they are durable (nil) or failed. done
	// may run on any goroutine, inline in Append too, and must not block.
	Append(p int32, recs []Record, done func(error))
	// Load calls fn for every record of partition p from its log start to
	// its high watermark, in offset order.
	Load(p int32, fn func(key, value []byte) error) error
}

// ErrClosed is returned by LoadPartition after Close.
var ErrClosed = errors.New("group: coordinator closed")

type shardState int8

const (
	shardUnloaded shardState = iota
	shardLoading
	shardLoaded
)

// shard is the coordinator for one __consumer_offsets partition: the groups
// whose id hashes to it.
type shard struct {
	p      int32
	mu     sync.Mutex
	state  shardState
	epoch  uint64 // bumped by every load and unload: write callbacks of an older epoch are dropped
	groups map[string]*Group
	// txnDone are transaction markers reported (CompleteTxn) while the
	// shard loads; applied when the load finishes (txnoffsets.go).
	txnDone []txnCompletion
}

// Coordinator owns every group of the __consumer_offsets partitions loaded
// on this broker.
//
// Concurrency: each partition (shard) has a mutex that guards its groups;
// a request locks exactly one shard, runs the pure Group transition, and
// calls the log only after unlocking (a Log's done callback takes the shard
// lock, so appending under it could deadlock when done runs inline). Member
// callbacks (JoinGroup/SyncGroup answers) run under the shard lock and must
// not block. Writes of one partition are applied to memory in the order the
// log makes them durable. One goroutine, owned by the Coordinator (started
// by New, stopped by Close), ticks every Config.TickMs and runs the
// session and rebalance deadlines of every group.
type Coordinator struct {
	cfg    Config
	log    Log
	now    func() time.Time
	logger *slog.Logger
	shards []*shard

	stop      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once

	lastExpiryMs int64 // run goroutine only
}

// New returns a coordinator over log with no partition loaded (call
// LoadPartition for the partitions this broker leads). now is the clock
// (clocks.Wall if nil).
func New(cfg Config, log Log, now clocks.Clock, logger *slog.Logger) *Coordinator {
	cfg = cfg.withDefaults()
	now = clocks.Or(now)
	if logger == nil {
		logger = slog.Default()
	}
	c := &Coordinator{cfg: cfg, log: log, now: now, logger: logger,
		stop: make(chan struct{}), stopped: make(chan struct{})}
	c.shards = make([]*shard, cfg.OffsetsPartitions)
	for i := range c.shards {
		c.shards[i] = &shard{p: int32(i), groups: map[string]*Group{}}
	}
	go c.run()
	return c
}

// Config returns the effective configuration.
func (c *Coordinator) Config() Config { return c.cfg }

// Close stops the timer goroutine; groups stay in memory but nothing expires.
func (c *Coordinator) Close() {
	c.closeOnce.Do(func() { close(c.stop) })
	<-c.stopped
}

func (c *Coordinator) nowMs() int64 { return c.now().UnixMilli() }

// PartitionFor returns the __consumer_offsets partition of group.
func (c *Coordinator) PartitionFor(group string) int32 {
	return PartitionFor(group, c.cfg.OffsetsPartitions)
}

// LoadPartition reads partition p of __consumer_offsets and becomes the
// coordinator of its groups. While it loads, requests for those groups get
// COORDINATOR_LOAD_IN_PROGRESS. Loading a loaded partition reloads it.
func (c *Coordinator) LoadPartition(p int32) error {
	if p < 0 || int(p) >= len(c.shards) {
		return fmt.Errorf("group: partition %d out of range", p)
	}
	select {
	case <-c.stop:
		return ErrClosed
	default:
	}
	sh := c.shards[p]
	sh.mu.Lock()
	sh.state = shardLoading
	sh.epoch++
	sh.txnDone = nil
	epoch := sh.epoch
	c.failAll(sh, kerr.NotCoordinator.Code)
	sh.mu.Unlock()

	groups := map[string]*Group{}
	metas := map[string]*Decoded{}
	bad := 0
	loadOne := func(key, value []byte) error {
		d, err := DecodeRecord(key, value)
		if err != nil {
			bad++
			return nil
		}
		switch d.Kind {
		case KindOffset:
			g := groups[d.Group]
			if g == nil {
				if d.Tombstone {
					return nil
				}
				g = NewGroup(d.Group, &c.cfg, 0)
				groups[d.Group] = g
			}
			if d.Tombstone {
				g.DeleteOffset(d.TP)
			} else {
				g.SetOffset(d.TP, d.Offset)
			}
		case KindGroup:
			if d.Tombstone {
				delete(groups, d.Group)
				delete(metas, d.Group)
				return nil
			}
			if groups[d.Group] == nil {
				groups[d.Group] = NewGroup(d.Group, &c.cfg, 0)
			}
			metas[d.Group] = &d
		}
		return nil
	}
	var txl txnLoader
	applyTxn := func(group string, tp TopicPartition, o Offset) {
		g := groups[group]
		if g == nil {
			g = NewGroup(group, &c.cfg, 0)
			groups[group] = g
		}
		g.SetOffset(tp, o)
	}
	var err error
	if tlog, ok := c.log.(TxnLog); ok {
		err = tlog.LoadTxn(p, func(r LoadedRecord) error {
			switch {
			case r.Marker != NoMarker:
				txl.complete(r.ProducerID, r.Marker == CommitMarker, applyTxn)
				return nil
			case r.Transactional:
				d, err := DecodeRecord(r.Key, r.Value)
				if err != nil {
					bad++
				} else if d.Kind == KindOffset && !d.Tombstone {
					txl.stage(r.ProducerID, d.Group, d.TP, d.Offset)
				}
				return nil
			}
			return loadOne(r.Key, r.Value)
		})
	} else {
		err = c.log.Load(p, loadOne)
	}
	for pid, byGroup := range txl.staged { // transactions with no marker yet
		for id, m := range byGroup {
			g := groups[id]
			if g == nil {
				g = NewGroup(id, &c.cfg, 0)
				groups[id] = g
			}
			staged := g.txnStage(pid)
			for tp, o := range m {
				staged[tp] = txnOffset{Offset: o, appended: true}
			}
		}
	}
	if bad > 0 {
		c.logger.Warn("group: skipped undecodable __consumer_offsets records", "partition", p, "records", bad)
	}
	nowMs := c.nowMs()
	for id, g := range groups {
		if d := metas[id]; d != nil {
			restoreGroup(g, d.Meta, nowMs)
		} else {
			g.stateTimestampMs = nowMs
		}
		if g.NumMembers() == 0 && len(g.offsets) == 0 && len(g.txnOffsets) == 0 && metas[id] == nil {
			delete(groups, id)
		}
	}

	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.epoch != epoch { // unloaded or reloaded meanwhile
		return nil
	}
	if err != nil {
		sh.state = shardUnloaded
		return fmt.Errorf("group: loading %s-%d: %w", OffsetsTopic, p, err)
	}
	sh.groups = groups
	sh.state = shardLoaded
	for _, d := range sh.txnDone {
		for _, g := range groups {
			g.completeTxn(d.pid, d.commit)
		}
	}
	sh.txnDone = nil
	return nil
}

// UnloadPartition stops coordinating the groups of partition p (leadership
// moved away): waiting members are answered NOT_COORDINATOR and the groups
// are dropped from memory.
func (c *Coordinator) UnloadPartition(p int32) {
	if p < 0 || int(p) >= len(c.shards) {
		return
	}
	sh := c.shards[p]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.epoch++
	c.failAll(sh, kerr.NotCoordinator.Code)
	sh.groups = map[string]*Group{}
	sh.state = shardUnloaded
}

func (c *Coordinator) failAll(sh *shard, code int16) {
	nowMs := c.nowMs()
	for _, g := range sh.groups {
		g.MarkDead(nowMs, code)
	}
}

// Loaded reports whether partition p is loaded here.
func (c *Coordinator) Loaded(p int32) bool {
	if p < 0 || int(p) >= len(c.shards) {
		return false
	}
	sh := c.shards[p]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.state == shardLoaded
}

// lock locks the shard of group and returns it with the group (nil if
// absent and !create). code is non-zero (and the shard unlocked) when this
// broker does not coordinate the group now.
func (c *Coordinator) lock(group string, create bool) (*shard, *Group, int16) {
	if group == "" {
		return nil, nil, kerr.InvalidGroupID.Code
	}
	sh := c.shards[c.PartitionFor(group)]
	sh.mu.Lock()
	switch sh.state {
	case shardLoading:
		sh.mu.Unlock()
		return nil, nil, kerr.CoordinatorLoadInProgress.Code
	case shardUnloaded:
		sh.mu.Unlock()
		return nil, nil, kerr.NotCoordinator.Code
	}
	g := sh.groups[group]
	if g == nil && create {
		g = NewGroup(group, &c.cfg, c.nowMs())
		sh.groups[group] = g
	}
	return sh, g, 0
}

// write is a pending group metadata write, captured under the shard lock.
type write struct {
	sh    *shard
	epoch uint64
	g     *Group
	seq   uint64
	rec   Record
}

func (c *Coordinator) metadataWrite(sh *shard, g *Group, eff Effects) *write {
	if !eff.Persist {
		return nil
	}
	w := &write{sh: sh, epoch: sh.epoch, g: g, seq: eff.PersistSeq, rec: Record{Key: GroupMetadataKey(g.ID)}}
	if g.state != Dead {
		w.rec.Value = g.MetadataValue()
	}
	g.inflight++
	return w
}

// do carries out a metadata write (after the shard lock is released).
func (c *Coordinator) do(w *write) {
	if w == nil {
		return
	}
	c.log.Append(w.sh.p, []Record{w.rec}, func(err error) {
		code := storeErrCode(err)
		if err != nil {
			c.logger.Warn("group: writing group metadata failed", "group", w.g.ID, "err", err)
		}
		w.sh.mu.Lock()
		defer w.sh.mu.Unlock()
		w.g.inflight--
		if w.sh.epoch != w.epoch || w.sh.groups[w.g.ID] != w.g {
			return
		}
		next := w.g.Persisted(c.nowMs(), w.seq, code)
		if nw := c.metadataWrite(w.sh, w.g, next); nw != nil {
			go c.do(nw) // a failed sync write rebalanced an Empty group: rare
		}
	})
}

// storeErrCode maps a log write error to the code Kafka's coordinator sends
// (kcode.Store: it maps storage failures to COORDINATOR_NOT_AVAILABLE so
// clients retry after rediscovering the coordinator).
func storeErrCode(err error) int16 { return kcode.Store.Code(err) }

// Join handles JoinGroup; done is called exactly once, possibly later from
// another goroutine, and must not block.
func (c *Coordinator) Join(req JoinRequest, done func(JoinResult)) {
	sh, g, code := c.lock(req.Group, req.MemberID == "")
	if code != 0 {
		done(JoinResult{Err: code, MemberID: req.MemberID, Generation: -1})
		return
	}
	if g == nil {
		sh.mu.Unlock()
		done(JoinResult{Err: kerr.UnknownMemberID.Code, MemberID: req.MemberID, Generation: -1})
		return
	}
	eff := g.Join(c.nowMs(), req, done)
	w := c.metadataWrite(sh, g, eff)
	sh.mu.Unlock()
	c.do(w)
}

// Sync handles SyncGroup; done as for Join.
func (c *Coordinator) Sync(req SyncRequest, done func(SyncResult)) {
	sh, g, code := c.lock(req.Group, false)
	if code != 0 {
		done(SyncResult{Err: code})
		return
	}
	if g == nil {
		sh.mu.Unlock()
		done(SyncResult{Err: kerr.UnknownMemberID.Code})
		return
	}
	eff := g.Sync(c.nowMs(), req, done)
	w := c.metadataWrite(sh, g, eff)
	sh.mu.Unlock()
	c.do(w)
}

// Heartbeat handles Heartbeat and returns its error code.
func (c *Coordinator) Heartbeat(group, memberID, instanceID string, generation int32) int16 {
	sh, g, code := c.lock(group, false)
	if code != 0 {
		return code
	}
	defer sh.mu.Unlock()
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	return g.Heartbeat(c.nowMs(), memberID, instanceID, generation)
}

// LeaveMember is one member of a LeaveGroup request.
type LeaveMember struct {
	MemberID   string
	InstanceID string
}

// Leave handles LeaveGroup: a group-level code (coordinator errors) and one
// code per member.
func (c *Coordinator) Leave(group string, members []LeaveMember) (int16, []int16) {
	sh, g, code := c.lock(group, false)
	if code != 0 {
		return code, nil
	}
	codes := make([]int16, len(members))
	if g == nil {
		sh.mu.Unlock()
		for i := range codes {
			codes[i] = kerr.UnknownMemberID.Code
		}
		return 0, codes
	}
	var eff Effects
	nowMs := c.nowMs()
	for i, m := range members {
		var e Effects
		codes[i], e = g.Leave(nowMs, m.MemberID, m.InstanceID)
		eff.merge(e)
	}
	w := c.metadataWrite(sh, g, eff)
	sh.mu.Unlock()
	c.do(w)
	return 0, codes
}

// CommitOffset is one partition of an OffsetCommit.
type CommitOffset struct {
	TP          TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// CommitRequest is an OffsetCommit for one group. Generation < 0 with no
// member id is a simple (manual) commit.
type CommitRequest struct {
	Group      string
	Generation int32
	MemberID   string
	InstanceID string
	Offsets    []CommitOffset
}

// Commit handles OffsetCommit; done gets one code per offset, exactly once.
func (c *Coordinator) Commit(req CommitRequest, done func([]int16)) {
	codes := make([]int16, len(req.Offsets))
	all := func(code int16) {
		for i := range codes {
			codes[i] = code
		}
		done(codes)
	}
	simple := req.Generation < 0 && req.MemberID == ""
	sh, g, code := c.lock(req.Group, simple)
	if code != 0 {
		all(code)
		return
	}
	if g == nil {
		sh.mu.Unlock()
		all(kerr.IllegalGeneration.Code)
		return
	}
	nowMs := c.nowMs()
	if code := g.CheckCommit(nowMs, req.Generation, req.MemberID, req.InstanceID); code != 0 {
		sh.mu.Unlock()
		all(code)
		return
	}
	recs := make([]Record, 0, len(req.Offsets))
	idx := make([]int, 0, len(req.Offsets))
	vals := make([]Offset, 0, len(req.Offsets))
	for i, o := range req.Offsets {
		if int32(len(o.Metadata)) > c.cfg.OffsetMetadataMaxBytes {
			codes[i] = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		v := Offset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimestampMs: nowMs}
		recs = append(recs, Record{Key: OffsetCommitKey(req.Group, o.TP.Topic, o.TP.Partition), Value: OffsetCommitValue(v)})
		idx = append(idx, i)
		vals = append(vals, v)
	}
	if len(recs) == 0 {
		sh.mu.Unlock()
		done(codes)
		return
	}
	epoch := sh.epoch
	g.inflight++
	sh.mu.Unlock()
	c.log.Append(sh.p, recs, func(err error) {
		code := storeErrCode(err)
		sh.mu.Lock()
		g.inflight--
		if code == 0 && sh.epoch == epoch {
			if cur := sh.groups[req.Group]; cur == g {
				for k, i := range idx {
					g.SetOffset(req.Offsets[i].TP, vals[k])
				}
			}
		}
		sh.mu.Unlock()
		for _, i := range idx {
			codes[i] = code
		}
		done(codes)
	})
}

// FetchedOffset is one answer of OffsetFetch: Offset.Offset is -1 (and
// LeaderEpoch -1) when nothing is committed.
type FetchedOffset struct {
	TP TopicPartition
	Offset
}

// Fetch handles OffsetFetch for one group: the offsets of tps, or every
// committed offset (sorted by topic, partition) if tps is nil.
func (c *Coordinator) Fetch(group string, tps []TopicPartition) ([]FetchedOffset, int16) {
	sh, g, code := c.lock(group, false)
	if code != 0 {
		return nil, code
	}
	defer sh.mu.Unlock()
	if tps == nil {
		if g == nil {
			return nil, 0
		}
		out := make([]FetchedOffset, 0, len(g.offsets))
		for tp, o := range g.offsets {
			out = append(out, FetchedOffset{TP: tp, Offset: o})
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].TP.Topic != out[j].TP.Topic {
				return out[i].TP.Topic < out[j].TP.Topic
			}
			return out[i].TP.Partition < out[j].TP.Partition
		})
		return out, 0
	}
	out := make([]FetchedOffset, len(tps))
	for i, tp := range tps {
		out[i] = FetchedOffset{TP: tp, Offset: Offset{Offset: -1, LeaderEpoch: -1}}
		if g != nil {
			if o, ok := g.offsets[tp]; ok {
				out[i].Offset = o
			}
		}
	}
	return out, 0
}

// DeleteOffsets handles OffsetDelete: a group code and one code per
// partition, given to done exactly once. Offsets of topics the group's
// members subscribe to are refused (GROUP_SUBSCRIBED_TO_TOPIC) unless the
// group is Empty.
func (c *Coordinator) DeleteOffsets(group string, tps []TopicPartition, done func(int16, []int16)) {
	sh, g, code := c.lock(group, false)
	if code != 0 {
		done(code, nil)
		return
	}
	if g == nil {
		sh.mu.Unlock()
		done(kerr.GroupIDNotFound.Code, nil)
		return
	}
	if !g.IsEmpty() && g.protocolType != "consumer" {
		sh.mu.Unlock()
		done(kerr.NonEmptyGroup.Code, nil)
		return
	}
	codes := make([]int16, len(tps))
	var recs []Record
	var idx []int
	for i, tp := range tps {
		if !g.IsEmpty() && g.Subscribed(tp.Topic) {
			codes[i] = kerr.GroupSubscribedToTopic.Code
			continue
		}
		if _, ok := g.offsets[tp]; !ok {
			continue // nothing to delete: success, as Kafka
		}
		recs = append(recs, Record{Key: OffsetCommitKey(group, tp.Topic, tp.Partition)})
		idx = append(idx, i)
	}
	if len(recs) == 0 {
		sh.mu.Unlock()
		done(0, codes)
		return
	}
	epoch := sh.epoch
	g.inflight++
	sh.mu.Unlock()
	c.log.Append(sh.p, recs, func(err error) {
		code := storeErrCode(err)
		sh.mu.Lock()
		g.inflight--
		if code == 0 && sh.epoch == epoch && sh.groups[group] == g {
			for _, i := range idx {
				g.DeleteOffset(tps[i])
			}
		}
		sh.mu.Unlock()
		for _, i := range idx {
			codes[i] = code
		}
		done(0, codes)
	})
}

// MemberDescription is one member in DescribeGroups.
type MemberDescription struct {
	MemberID, InstanceID, ClientID, ClientHost string
	Metadata, Assignment                       []byte
}

// Description is a group as DescribeGroups reports it.
type Description struct {
	Group, ProtocolType, Protocol string
	State                         State
	StateName                     string // State's name; a consumer group's own states (StateName)
	Generation                    int32
	Members                       []MemberDescription
}

// Describe returns the description of group; a group that does not exist
// is Dead with found false. A KIP-848 consumer group is described in the
// classic shape (classicDescription).
func (c *Coordinator) Describe(group string) (d Description, found bool, code int16) {
	sh, g, code := c.lock(group, false)
	if code != 0 {
		return Description{Group: group, State: Dead}, false, code
	}
	defer sh.mu.Unlock()
	if g == nil {
		return Description{Group: group, State: Dead}, false, 0
	}
	if g.kind == kindConsumer {
		return g.classicDescription(), true, 0
	}
	d = Description{Group: group, ProtocolType: g.protocolType, Protocol: g.protocol, State: g.state, StateName: g.StateName(), Generation: g.generation}
	for _, id := range g.order {
		m := g.members[id]
		md := MemberDescription{MemberID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost}
		if g.state == Stable || g.state == CompletingRebalance {
			md.Metadata = slices.Clone(m.metadataFor(g.protocol))
		}
		if g.state == Stable {
			md.Assignment = slices.Clone(m.Assignment)
		}
		d.Members = append(d.Members, md)
	}
	return d, true, 0
}

// Listing is one group in ListGroups.
type Listing struct {
	Group, ProtocolType string
	State               State
	StateName           string // as Group.StateName
	Consumer            bool   // a KIP-848 consumer group
}

// List returns every group of the loaded partitions, sorted by id, and
// whether any partition is still loading (Kafka answers
// COORDINATOR_LOAD_IN_PROGRESS then).
func (c *Coordinator) List() (out []Listing, loading bool) {
	for _, sh := range c.shards {
		sh.mu.Lock()
		if sh.state == shardLoading {
			loading = true
		}
		if sh.state == shardLoaded {
			for id, g := range sh.groups {
				out = append(out, Listing{Group: id, ProtocolType: g.protocolType, State: g.state, StateName: g.StateName(), Consumer: g.IsConsumer()})
			}
		}
		sh.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, loading
}

// DeleteGroups deletes each group (Kafka's rules: it must exist and be
// Empty) with its offsets: tombstones for every offset and the group
// metadata. done gets one code per group, exactly once.
func (c *Coordinator) DeleteGroups(groups []string, done func([]int16)) {
	codes := make([]int16, len(groups))
	var mu sync.Mutex
	left := len(groups) + 1
	finish := func() {
		mu.Lock()
		left--
		last := left == 0
		mu.Unlock()
		if last {
			done(codes)
		}
	}
	for i, id := range groups {
		sh, g, code := c.lock(id, false)
		if code != 0 {
			codes[i] = code
			finish()
			continue
		}
		switch {
		case g == nil || g.state == Dead:
			codes[i] = kerr.GroupIDNotFound.Code
		case !g.IsEmpty():
			codes[i] = kerr.NonEmptyGroup.Code
		}
		if codes[i] != 0 {
			sh.mu.Unlock()
			finish()
			continue
		}
		recs := make([]Record, 0, len(g.offsets)+1)
		for tp := range g.offsets {
			recs = append(recs, Record{Key: OffsetCommitKey(id, tp.Topic, tp.Partition)})
		}
		recs = append(recs, Record{Key: GroupMetadataKey(id)})
		g.MarkDead(c.nowMs(), kerr.CoordinatorNotAvailable.Code)
		delete(sh.groups, id)
		sh.mu.Unlock()
		c.log.Append(sh.p, recs, func(err error) {
			codes[i] = storeErrCode(err)
			finish()
		})
	}
	finish()
}

// run is the timer goroutine: every TickMs it runs due group deadlines and
// drops Empty groups that have nothing left (no offsets, no writes in
// flight), writing their metadata tombstone.
func (c *Coordinator) run() {
	defer close(c.stopped)
	t := time.NewTicker(time.Duration(c.cfg.TickMs) * time.Millisecond)
	defer t.Stop()
	var writes []*write
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		nowMs := c.nowMs()
		writes = writes[:0]
		for _, sh := range c.shards {
			sh.mu.Lock()
			if sh.state != shardLoaded {
				sh.mu.Unlock()
				continue
			}
			for id, g := range sh.groups {
				if g.NextDeadline() <= nowMs {
					if w := c.metadataWrite(sh, g, g.Tick(nowMs)); w != nil {
						writes = append(writes, w)
					}
				}
				if g.IsEmpty() && len(g.offsets) == 0 && len(g.pending) == 0 && len(g.txnOffsets) == 0 && g.inflight == 0 {
					g.MarkDead(nowMs, kerr.CoordinatorNotAvailable.Code)
					delete(sh.groups, id)
					g.inflight++
					writes = append(writes, &write{sh: sh, epoch: sh.epoch, g: g, rec: Record{Key: GroupMetadataKey(id)}})
				}
			}
			sh.mu.Unlock()
		}
		for _, w := range writes {
			c.do(w)
		}
		c.expireOffsets(nowMs)
	}
}

// expireOffsets deletes (tombstones, then forgets) the committed offsets
// that offsets.retention.minutes expired. It is checked once a minute.
func (c *Coordinator) expireOffsets(nowMs int64) {
	if nowMs-c.lastExpiryMs < 60_000 {
		return
	}
	c.lastExpiryMs = nowMs
	type expiry struct {
		sh    *shard
		epoch uint64
		g     *Group
		tps   []TopicPartition
	}
	var due []expiry
	for _, sh := range c.shards {
		sh.mu.Lock()
		if sh.state == shardLoaded {
			for _, g := range sh.groups {
				if g.inflight > 0 {
					continue
				}
				if tps := g.ExpiredOffsets(nowMs, c.cfg.OffsetsRetentionMs); len(tps) > 0 {
					g.inflight++
					due = append(due, expiry{sh, sh.epoch, g, tps})
				}
			}
		}
		sh.mu.Unlock()
	}
	for _, e := range due {
		recs := make([]Record, len(e.tps))
		for i, tp := range e.tps {
			recs[i] = Record{Key: OffsetCommitKey(e.g.ID, tp.Topic, tp.Partition)}
		}
		c.log.Append(e.sh.p, recs, func(err error) {
			e.sh.mu.Lock()
			defer e.sh.mu.Unlock()
			e.g.inflight--
			if err != nil || e.sh.epoch != e.epoch || e.sh.groups[e.g.ID] != e.g {
				return
			}
			for _, tp := range e.tps {
				e.g.DeleteOffset(tp)
			}
		})
		c.logger.Info("group: expired committed offsets", "group", e.g.ID, "partitions", len(e.tps))
	}
}

// ConsumerHeartbeat handles ConsumerGroupHeartbeat (KIP-848).
func (c *Coordinator) ConsumerHeartbeat(req HeartbeatRequest, cat Catalog) HeartbeatResult {
	sh, g, code := c.lock(req.Group, req.MemberEpoch == 0)
	if code != 0 {
		return HeartbeatResult{Err: code, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	}
	defer sh.mu.Unlock()
	if g == nil {
		return HeartbeatResult{Err: kerr.UnknownMemberID.Code, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	}
	return g.ConsumerHeartbeat(c.nowMs(), req, cat)
}

// ConsumerDescribe returns a consumer group's description; found is false
// for a missing group, isConsumer false for a classic one.
func (c *Coordinator) ConsumerDescribe(group string) (d ConsumerDescription, found, isConsumer bool, code int16) {
	sh, g, code := c.lock(group, false)
	if code != 0 {
		return d, false, false, code
	}
	defer sh.mu.Unlock()
	if g == nil || g.state == Dead {
		return d, false, false, 0
	}
	if g.kind != kindConsumer {
		return d, true, false, 0
	}
	return g.consumerDescription(), true, true, 0
}
