package sharehost

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stratalog/strata/broker/coordhost"
	"github.com/stratalog/strata/broker/txnhost"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kerr"
)

// StateTopic is KIP-932's share-group state topic.
const StateTopic = share.StateTopic

// DefaultStatePartitions is share.coordinator.state.topic.num.partitions.
const DefaultStatePartitions = 50

// DefaultTick is how often locks, sessions and waiting fetches are
// looked at.
const DefaultTick = 100 * time.Millisecond

// Share-group configs (GROUP resources of IncrementalAlterConfigs).
const (
	CfgAutoOffsetReset = "share.auto.offset.reset"
	CfgLockDuration    = "share.record.lock.duration.ms"
	CfgIsolation       = "share.isolation.level"
	CfgDeliveryLimit   = "share.delivery.count.limit"                // KIP-1240
	CfgDLQTopicName    = "errors.deadletterqueue.topic.name"         // KIP-1191
	CfgDLQCopyRecord   = "errors.deadletterqueue.copy.record.enable" // KIP-1191
)

// Config configures share groups (issue 24).
type Config struct {
	// Groups holds group.share.session.timeout.ms,
	// group.share.heartbeat.interval.ms and group.share.max.size.
	Groups share.GroupConfig
	// Partition holds group.share.record.lock.duration.ms,
	// group.share.delivery.count.limit and
	// group.share.partition.max.record.locks (a group's
	// share.record.lock.duration.ms overrides the first).
	Partition share.Config
	// StatePartitions is share.coordinator.state.topic.num.partitions.
	StatePartitions int32
	// Tick is how often lock expiries, session timeouts and waiting
	// fetches are handled (0: DefaultTick).
	Tick time.Duration
	// DeadLetterTopicPrefix is errors.deadletterqueue.topic.name.prefix
	// (KIP-1191): a group's dead-letter topic must start with it. Nil:
	// DefaultDeadLetterTopicPrefix; empty: any name.
	DeadLetterTopicPrefix *string
	// DeadLetterAutoCreate is
	// errors.deadletterqueue.auto.create.topics.enable: a group's
	// dead-letter topic that does not exist is created (num.partitions
	// partitions) instead of refused.
	DeadLetterAutoCreate bool
}

// Broker is what the host needs of the broker it runs in.
type Broker struct {
	// Engine holds the share-partitions' logs and __share_group_state;
	// nil: share groups are not served (Err says so).
	Engine *engine.Engine
	// Cluster is the broker's cluster (cluster.go); nil on a single
	// broker.
	Cluster Cluster
	// WhenAcked calls fn once an append up to last may be acknowledged
	// as an acks=all produce.
	WhenAcked func(l *engine.Log, last int64, fn func(error))
	// NumPartitions is num.partitions, for an auto-created dead-letter
	// topic.
	NumPartitions int32
	// Clock is the host's only source of time.
	Clock txnhost.Clock
	Log   *slog.Logger
}

// Conn is a share session's connection: its session is closed (and its
// records released) when Done closes.
type Conn interface {
	Done() <-chan struct{}
}

// Waiter is a ShareFetch waiting for records (a long poll), retried by
// the host (under its lock) when records may have arrived.
type Waiter interface {
	// Retry acquires again; true when the fetch is to be answered now.
	Retry(nowMs int64) bool
	// Arm registers the waiter again on its partitions' high watermarks.
	Arm()
	// Stop ends its registrations (it will not be retried again).
	Stop()
	// Send answers it (called without the host's lock).
	Send()
}

// Key names a share-partition: a group's state on one topic-partition.
type Key struct {
	Group   string
	TopicID [16]byte
	Part    int32
}

// Part is one share-partition: the pure state machine, the log it
// shares out and the topic's name.
type Part struct {
	P    *share.Partition
	Log  *engine.Log
	Name string // topic name

	// Dead letters (dlq.go): dlqWant says records may be ARCHIVING,
	// dlqBusy that a write of some of them is under way, dlqFind that
	// some of them may have dead letters already (restored, or after a
	// failed write), so the dead-letter partition is searched before
	// the next write, dlqRetryAt when a failed write may be tried again
	// (ms) and dlqBackoff how long the next failure waits; dlqErr is the
	// last failure, logged once.
	dlqWant    bool
	dlqBusy    bool
	dlqFind    bool
	dlqRetryAt int64
	dlqBackoff time.Duration
	dlqErr     string

	epoch int32 // cluster mode: the partition's leader epoch when loaded
}

// Host holds the broker's share groups. Its exported methods that say
// "lock held" are called between Lock and Unlock, so a handler's
// transitions are atomic; the others take the lock themselves.
type Host struct {
	err           error   // why share groups are not served
	cluster       Cluster // nil on a single broker
	w             writer  // cluster mode: the state writer (cluster.go)
	eng           *engine.Engine
	cfg           Config
	clock         txnhost.Clock
	log           *slog.Logger
	whenAckedFn   func(l *engine.Log, last int64, fn func(error))
	numPartitions int32
	host          *coordhost.Host
	ctx           context.Context // cancelled by Close: the background writes' context
	cancel        context.CancelFunc
	bg            sync.WaitGroup // cluster mode: dead-letter produces under way

	mu       sync.Mutex
	groups   *share.Groups
	sessions share.Sessions
	conns    map[share.SessionKey]Conn // the connection of each session
	parts    map[Key]*Part
	stored   map[Key]share.State          // read back, not restored yet
	configs  map[string]map[string]string // group -> config overrides
	waiting  map[Waiter]struct{}
	topic    *engine.Topic // __share_group_state, nil until first written
	nparts   int32
	dlq      dlqState // the dead-letter writer (dlq.go)

	// Cluster mode (load.go): share-partition states read without the
	// lock and not installed yet, the reads under way, each group's
	// config generation, and closing once Close began (no read starts).
	loaded  map[Key]loaded
	loading map[Key]*loading
	cfgGen  map[string]uint64
	closing bool

	// kick wakes the retry loop (a waiting fetch's partition got new
	// records, or records became available again); stop and done end it.
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// New builds the host: it reads __share_group_state back and starts the
// tick, the retry loop and the dead-letter writer.
func New(cfg Config, b Broker) *Host {
	h := &Host{
		cluster: b.Cluster, eng: b.Engine, cfg: cfg, clock: b.Clock, log: b.Log,
		whenAckedFn: b.WhenAcked, numPartitions: b.NumPartitions,
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	st := h
	st.groups = share.NewGroups(cfg.Groups)
	st.conns = map[share.SessionKey]Conn{}
	st.parts = map[Key]*Part{}
	st.stored = map[Key]share.State{}
	st.configs = map[string]map[string]string{}
	st.waiting = map[Waiter]struct{}{}
	st.nparts = cfg.StatePartitions
	if st.nparts <= 0 {
		st.nparts = DefaultStatePartitions
	}
	switch {
	case h.eng == nil:
		st.err = errors.New("no engine")
		return h
	}
	// In a cluster a share-partition is loaded by its leader when first
	// used there (cluster.go), not at start.
	if err := h.loadShareState(); h.cluster == nil && err != nil {
		st.err = err
		h.log.Error("share: cannot read "+StateTopic+"; share-group APIs are refused", "err", err)
		return h
	}
	tick := cfg.Tick
	if tick <= 0 {
		tick = DefaultTick
	}
	st.host = coordhost.New(coordhost.Config{Name: "share", Clock: h.clock, Log: h.log})
	st.host.Every(tick, h.shareTick)
	st.kick, st.stop, st.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go h.shareRetryLoop(st.stop)
	st.dlq.kick, st.dlq.done = make(chan struct{}, 1), make(chan struct{})
	go h.shareDLQLoop(st.stop)
	if h.cluster != nil {
		h.w.kick, h.w.done = make(chan struct{}, 1), make(chan struct{})
		go h.writeLoop(st.stop)
	}
	h.dlqKick() // stored share-partitions with ARCHIVING records: written at once
	return h
}

func (h *Host) now() time.Time { return h.clock.Now() }

func (h *Host) whenAcked(l *engine.Log, last int64, fn func(error)) { h.whenAckedFn(l, last, fn) }

// Err is why share groups are not served (nil when they are).
func (h *Host) Err() error { return h.err }

// Clustered reports whether the broker is one of a cluster.
func (h *Host) Clustered() bool { return h.cluster != nil }

// Lock takes the host's lock; Unlock releases it.
func (h *Host) Lock()   { h.mu.Lock() }
func (h *Host) Unlock() { h.mu.Unlock() }

// Groups is the share-group coordinator (lock held).
func (h *Host) Groups() *share.Groups { return h.groups }

// Sessions is the share-session cache (lock held).
func (h *Host) Sessions() *share.Sessions { return &h.sessions }

// SetConn records the connection of a share session (lock held).
func (h *Host) SetConn(key share.SessionKey, c Conn) { h.conns[key] = c }

// PartOf returns the share-partition k when it is loaded (lock held).
func (h *Host) PartOf(k Key) *Part { return h.parts[k] }

// Wait adds a fetch to retry until it is answered (lock held).
func (h *Host) Wait(w Waiter) { h.waiting[w] = struct{}{} }

// Waiting is how many fetches wait (lock held).
func (h *Host) Waiting() int { return len(h.waiting) }

// Kick wakes the retry loop; it never blocks (an HWWaiter's wake).
func (h *Host) Kick() { h.shareKick() }

// shareRetryLoop retries the waiting fetches when kicked, until
// Close. It is the share state's one goroutine besides the host's
// tick.
func (h *Host) shareRetryLoop(stop <-chan struct{}) {
	st := h
	defer close(st.done)
	for {
		select {
		case <-stop:
			return
		case <-st.kick:
		}
		nowMs := h.now().UnixMilli()
		st.mu.Lock()
		ready := h.retryWaiting(nowMs)
		st.mu.Unlock()
		for _, f := range ready {
			f.Send()
		}
	}
}

// shareKick wakes the retry loop; it never blocks (an HWWaiter's wake).
func (h *Host) shareKick() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Close stops the tick and the loops; waiting fetches are dropped (called
// after the connections are closed).
func (h *Host) Close() {
	st := h
	if st.host != nil {
		st.host.Close()
	}
	st.mu.Lock()
	stop := st.stop // Close may be called more than once
	st.stop = nil
	st.closing = true // no load starts (load.go)
	st.mu.Unlock()
	h.cancel() // produces under way end
	if stop != nil {
		close(stop)
		<-st.done
		<-st.dlq.done
		if h.w.done != nil {
			<-h.w.done
		}
	}
	h.bg.Wait()
	// Waiting fetches are dropped: their connections are closed.
	st.mu.Lock()
	for f := range st.waiting {
		f.Stop()
		delete(st.waiting, f)
	}
	st.mu.Unlock()
}

// Key and value encoding of __share_group_state records.
const (
	shareKeyState  = 0 // group, topic id, partition -> JSON share.State
	shareKeyConfig = 1 // group -> JSON map of configs
)

func shareStateKey(k Key) []byte {
	b := binary.BigEndian.AppendUint16(nil, shareKeyState)
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.Group)))
	b = append(b, k.Group...)
	b = append(b, k.TopicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.Part))
}

func shareConfigKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, shareKeyConfig)
	b = binary.BigEndian.AppendUint16(b, uint16(len(group)))
	return append(b, group...)
}

// decodeShareKey reads a key; ok false for a malformed or unknown one.
func decodeShareKey(b []byte) (kind uint16, k Key, ok bool) {
	if len(b) < 4 {
		return 0, k, false
	}
	kind = binary.BigEndian.Uint16(b)
	n := int(binary.BigEndian.Uint16(b[2:]))
	b = b[4:]
	if len(b) < n {
		return 0, k, false
	}
	k.Group, b = string(b[:n]), b[n:]
	switch kind {
	case shareKeyConfig:
		return kind, k, len(b) == 0
	case shareKeyState:
		if len(b) != 20 {
			return 0, k, false
		}
		copy(k.TopicID[:], b)
		k.Part = int32(binary.BigEndian.Uint32(b[16:]))
		return kind, k, true
	}
	return 0, k, false
}

// loadShareState reads __share_group_state back: the last snapshot of
// every share-partition and every group's configs.
func (h *Host) loadShareState() error {
	st := h
	t := h.eng.Topic(StateTopic)
	if t == nil {
		return nil
	}
	st.topic = t
	st.nparts = t.Partitions()
	for p := range t.Partitions() {
		l := t.Partition(p)
		if l == nil {
			continue
		}
		err := txnhost.ScanLog(l, func(hdr *record.Header, r *record.Record) error {
			if hdr.Control() {
				return nil
			}
			kind, k, ok := decodeShareKey(r.Key)
			if !ok {
				return nil
			}
			switch kind {
			case shareKeyState:
				var state share.State
				if r.Value == nil {
					delete(st.stored, k)
					return nil
				}
				if err := json.Unmarshal(r.Value, &state); err != nil {
					// Not ours to refuse everything for: that
					// share-partition starts over.
					h.log.Error("share: unreadable share-partition state skipped", "group", k.Group, "partition", k.Part, "err", err)
					delete(st.stored, k)
					return nil
				}
				st.stored[k] = state
			case shareKeyConfig:
				cfgs := map[string]string{}
				if r.Value == nil {
					delete(st.configs, k.Group)
					return nil
				}
				if err := json.Unmarshal(r.Value, &cfgs); err != nil {
					h.log.Error("share: unreadable group configs skipped", "group", k.Group, "err", err)
					return nil
				}
				st.configs[k.Group] = cfgs
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// durable is a set of appends to wait for before answering.
type Durable []DurableAt

type DurableAt struct {
	l   *engine.Log
	off int64
	p   *pending // cluster mode: a record the writer sends (cluster.go)
}

// wait calls fn once every append is durable (with the first error).
func (h *Host) WaitDurable(d Durable, fn func(error)) {
	if len(d) == 0 {
		fn(nil)
		return
	}
	var mu sync.Mutex
	left, first := len(d), error(nil)
	for _, w := range d {
		wait := func(fn func(error)) { h.whenAcked(w.l, w.off, fn) }
		if w.p != nil {
			wait = w.p.then
		}
		wait(func(err error) {
			mu.Lock()
			if err != nil && first == nil {
				first = err
			}
			left--
			done := left == 0
			e := first
			mu.Unlock()
			if done {
				fn(e)
			}
		})
	}
}

// appendShareRecord appends one record to the state topic (creating it),
// under st.mu so records go in the order of the transitions.
func (h *Host) appendShareRecord(key, value []byte) (DurableAt, error) {
	st := h
	if h.cluster != nil {
		return h.enqueue(key, value), nil
	}
	if st.topic == nil || st.topic.Deleted() {
		t, err := h.eng.CreateTopic(StateTopic, st.nparts, map[string]string{"cleanup.policy": "compact"})
		if errors.Is(err, engine.ErrTopicExists) {
			t, err = h.eng.Topic(StateTopic), nil
		}
		if err != nil || t == nil {
			return DurableAt{}, fmt.Errorf("share: creating %s: %w", StateTopic, err)
		}
		st.topic = t
	}
	p := int32(hashKey(key) % uint32(st.topic.Partitions()))
	l := st.topic.Partition(p)
	if l == nil {
		return DurableAt{}, fmt.Errorf("share: %s-%d missing", StateTopic, p)
	}
	var b record.Builder
	now := h.now().UnixMilli()
	b.Reset(record.CodecNone, now)
	b.Add(now, key, value, nil)
	batch, err := b.AppendTo(nil)
	if err != nil {
		return DurableAt{}, err
	}
	info, err := l.Append(batch, l.LeaderEpoch())
	if err != nil {
		return DurableAt{}, err
	}
	return DurableAt{l: l, off: info.LastOffset}, nil
}

func hashKey(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// persistPart writes a share-partition's snapshot (st.mu held).
func (h *Host) persistPart(k Key, sp *Part) (DurableAt, error) {
	var v []byte
	var err error
	if h.cluster != nil {
		v, err = json.Marshal(snapshot{State: sp.P.Snapshot(), LeaderEpoch: sp.epoch})
	} else {
		v, err = json.Marshal(sp.P.Snapshot())
	}
	if err != nil {
		return DurableAt{}, err
	}
	return h.appendShareRecord(shareStateKey(k), v)
}

// groupReset is the group's share.auto.offset.reset (st.mu held).
func (h *Host) groupReset(group string) share.Reset {
	if v, ok := h.configs[group][CfgAutoOffsetReset]; ok {
		if r, err := share.ParseReset(v); err == nil {
			return r
		}
	}
	return share.Reset{Kind: share.ResetLatest}
}

// partConfig is the share-partition config for group (st.mu held).
func (h *Host) PartConfig(group string) share.Config {
	c := h.cfg.Partition
	if v, ok := h.configs[group][CfgLockDuration]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			c.LockDurationMs = n
		}
	}
	if v, ok := h.configs[group][CfgDeliveryLimit]; ok {
		if n, err := strconv.ParseInt(v, 10, 16); err == nil && n > 0 {
			c.DeliveryCountLimit = int16(n)
		}
	}
	c.DeadLetter = h.configs[group][CfgDLQTopicName] != ""
	return c
}

// readCommitted reports whether group reads with read_committed (st.mu
// held): records up to the last stable offset, aborted ones archived.
func (h *Host) ReadCommitted(group string) bool {
	return h.configs[group][CfgIsolation] == "read_committed"
}

// lockDurationMs is the effective lock duration of group (st.mu held).
func (h *Host) LockDurationMs(group string) int32 {
	ms := h.PartConfig(group).LockDurationMs
	if ms <= 0 {
		ms = share.DefaultLockDurationMs
	}
	return int32(min(ms, 1<<31-1))
}

// sharePartition returns the share-partition of group on topic t's
// partition p, restoring or creating it (st.mu held). A new one starts
// where the group's share.auto.offset.reset says and is persisted at once,
// so a restart keeps its start offset. The durable append, if any, is
// added to d.
//
// In a cluster a share-partition not loaded here at the partition's
// leader epoch is installed from what Load read without the lock
// (load.go); without such a read it is LEADER_NOT_AVAILABLE and the read
// starts, unless sync (the offset admin APIs): then it is read here.
func (h *Host) Partition(group string, t *engine.Topic, p int32, d *Durable) (*Part, int16) {
	return h.partition(group, t, p, d, false)
}

func (h *Host) partition(group string, t *engine.Topic, p int32, d *Durable, sync bool) (*Part, int16) {
	l := t.Partition(p)
	if l == nil {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	k := Key{Group: group, TopicID: t.ID(), Part: p}
	st := h
	var epoch int32
	if h.cluster != nil {
		var ok bool
		if epoch, ok = h.cluster.Leads(t, p); !ok {
			return nil, kerr.NotLeaderForPartition.Code
		}
		if sp := st.parts[k]; sp != nil && sp.epoch != epoch {
			delete(st.parts, k) // led again at a new epoch: another leader may have changed it
		}
		if st.parts[k] == nil {
			// Its state is unknown until the state partition has
			// been read: clients retry.
			if code := h.install(k, epoch, sync); code != 0 {
				return nil, code
			}
		}
	}
	if sp := st.parts[k]; sp != nil {
		sp.Log = l // the same topic id: keep the state even if the log object changed
		return sp, 0
	}
	sp := &Part{Log: l, Name: t.Name(), epoch: epoch}
	if state, ok := st.stored[k]; ok {
		pp, err := share.Restore(h.PartConfig(group), state)
		if err != nil {
			h.log.Error("share: persisted state refused; starting over", "group", group, "topic", t.Name(), "partition", p, "err", err)
		} else {
			sp.P = pp
		}
		delete(st.stored, k)
		if sp.P != nil {
			// ARCHIVING records: written to the dead-letter topic
			// again, or archived if the group has none any more.
			sp.dlqWant = len(sp.P.DeadLetters()) > 0
			sp.dlqFind = sp.dlqWant // written before a crash or a failover, maybe
			if e := sp.P.SetConfig(h.PartConfig(group)); e.Write != nil {
				st.parts[k] = sp
				if err := h.Apply(k, sp, e, d); err != nil {
					h.log.Error("share: persisting archived dead letters", "group", group, "err", err)
				}
			}
			if sp.dlqWant {
				h.dlqKick()
			}
		}
	}
	if sp.P == nil {
		var start int64
		switch r := h.groupReset(group); r.Kind {
		case share.ResetEarliest:
			start = l.LogStartOffset()
		case share.ResetByDuration:
			off, _, found := l.OffsetForTimestamp(r.Timestamp(h.now().UnixMilli()))
			if !found {
				off = l.HighWatermark()
			}
			start = off
		default:
			start = l.HighWatermark()
		}
		sp.P = share.New(h.PartConfig(group), start)
		w, err := h.persistPart(k, sp)
		if err != nil {
			h.log.Error("share: persisting a new share-partition", "group", group, "err", err)
			return nil, kerr.KafkaStorageError.Code
		}
		*d = append(*d, w)
	}
	st.parts[k] = sp
	return sp, 0
}

// applyEffects persists a transition's write (st.mu held).
func (h *Host) Apply(k Key, sp *Part, e share.Effects, d *Durable) error {
	if e.Available && len(h.waiting) > 0 {
		h.shareKick()
	}
	if len(e.DeadLetters) > 0 {
		sp.dlqWant = true
		h.dlqKick()
	}
	if e.Write == nil {
		return nil
	}
	w, err := h.persistPart(k, sp)
	if err != nil {
		return err
	}
	if d != nil {
		*d = append(*d, w)
	}
	return nil
}

// releaseMember releases what member holds in every share-partition of
// group (st.mu held): it left, timed out, or closed its session.
func (h *Host) ReleaseMember(nowMs int64, group, member string) {
	for k, sp := range h.parts {
		if k.Group != group {
			continue
		}
		if err := h.Apply(k, sp, sp.P.ReleaseMember(nowMs, member), nil); err != nil {
			h.log.Error("share: persisting a release", "group", group, "err", err)
		}
	}
}

// MemberGone releases what member holds and closes its share session
// (lock held): it left group, or its session timed out at this broker, the
// group's coordinator. In a cluster the other brokers are told too
// (Cluster.MemberGone), so the records it acquired on share-partitions
// led elsewhere are released at once, not when their locks expire.
func (h *Host) MemberGone(nowMs int64, group, member string) {
	h.CloseSession(nowMs, share.SessionKey{Group: group, Member: member})
	h.ReleaseMember(nowMs, group, member)
	if h.cluster != nil {
		h.cluster.MemberGone(group, member, time.Duration(h.LockDurationMs(group))*time.Millisecond)
	}
}

// closeSession removes a share session and releases its member's records
// (st.mu held).
func (h *Host) CloseSession(nowMs int64, key share.SessionKey) {
	if h.sessions.Remove(key) == nil {
		return
	}
	delete(h.conns, key)
	h.ReleaseMember(nowMs, key.Group, key.Member)
}

// shareTick runs on the share host's periodic callback.
func (h *Host) shareTick(now time.Time) {
	nowMs := now.UnixMilli()
	st := h
	st.mu.Lock()
	if h.cluster != nil {
		h.dropUnled()
		h.pruneLoaded()
	}
	for _, d := range st.groups.Expire(nowMs) {
		h.log.Info("share: member session expired", "group", d.Group, "member", d.Member)
		h.MemberGone(nowMs, d.Group, d.Member)
	}
	for key, c := range st.conns {
		select {
		case <-c.Done():
			h.CloseSession(nowMs, key)
		default:
		}
	}
	for k, sp := range st.parts {
		if sp.dlqWant && !sp.dlqBusy && sp.dlqRetryAt <= nowMs {
			h.dlqKick() // a dead-letter write to retry
		}
		if dl := sp.P.NextDeadline(); dl >= 0 && dl <= nowMs {
			if err := h.Apply(k, sp, sp.P.Tick(nowMs), nil); err != nil {
				h.log.Error("share: persisting a lock expiry", "group", k.Group, "err", err)
			}
		}
	}
	ready := h.retryWaiting(nowMs)
	st.mu.Unlock()
	for _, f := range ready {
		f.Send()
	}
}

// retryWaiting retries the waiting fetches and returns those to answer
// now (st.mu held).
func (h *Host) retryWaiting(nowMs int64) []Waiter {
	var ready []Waiter
	for f := range h.waiting {
		if f.Retry(nowMs) {
			f.Stop()
			delete(h.waiting, f)
			ready = append(ready, f)
			continue
		}
		f.Arm() // again: a wake fires once per Arm
	}
	return ready
}

// shareGroupConfigKeys are the GROUP configs this broker keeps (Kafka
// 4.2's share.* group configs it implements).
var shareGroupConfigKeys = map[string]func(string) error{
	CfgAutoOffsetReset: func(v string) error { _, err := share.ParseReset(v); return err },
	CfgLockDuration: func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1000 || n > 3_600_000 {
			return fmt.Errorf("%s must be an integer in [1000, 3600000]", CfgLockDuration)
		}
		return nil
	},
	CfgDeliveryLimit: func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 2 || n > 10 {
			return fmt.Errorf("%s must be an integer in [2, 10]", CfgDeliveryLimit)
		}
		return nil
	},
	CfgIsolation: func(v string) error {
		if v != "read_uncommitted" && v != "read_committed" {
			return fmt.Errorf("%s must be read_uncommitted or read_committed", CfgIsolation)
		}
		return nil
	},
	CfgDLQTopicName: func(v string) error {
		if strings.HasPrefix(v, "__") {
			return fmt.Errorf("%s: DLQ topic name must not start with '__'", CfgDLQTopicName)
		}
		return nil
	},
	CfgDLQCopyRecord: func(v string) error {
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return fmt.Errorf("%s must be true or false", CfgDLQCopyRecord)
		}
		return nil
	},
}

// Listing is a share group as ListGroups reports it.
type Listing struct{ ID, State string }

// Listings lists the share groups with members or state.
func (h *Host) Listings() []Listing {
	st := h
	if st.groups == nil || st.err != nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	ids := map[string]bool{}
	for _, id := range st.groups.Names() {
		ids[id] = true
	}
	for k := range st.parts {
		ids[k.Group] = true
	}
	for k := range st.stored {
		ids[k.Group] = true
	}
	var out []Listing
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		state := "Empty"
		if g := st.groups.Group(id); g != nil {
			state = g.State()
		}
		out = append(out, Listing{ID: id, State: state})
	}
	return out
}

// DeleteGroup deletes share group id for DeleteGroups (KIP-932): ok
// false when the share coordinator does not know id (then it is the group
// coordinator's to answer). A group with members is NON_EMPTY_GROUP and
// nothing changes. Otherwise a tombstone of each of its share-partitions'
// state is appended to __share_group_state (so a restart does not bring
// it back), the share-partitions (ARCHIVING records included: their dead
// letters are not written) and the group are forgotten, and stale share
// sessions of the group are closed; d holds the appends to wait for
// before answering. The group's configs (IncrementalAlterConfigs on the
// GROUP resource) are kept, as Kafka keeps dynamic group configs: a new
// consumer of the id starts where its share.auto.offset.reset says. A
// failed append is KAFKA_STORAGE_ERROR, with the share-partitions
// tombstoned so far forgotten and the rest kept.
//
// In a cluster only the share-partitions this broker leads are deleted
// here (and those of deleted topics); remote lists the others, which the
// caller has their leaders delete (DeleteLed).
func (h *Host) DeleteGroup(id string) (code int16, d Durable, remote []Key, ok bool) {
	if h.err != nil || id == "" {
		return 0, nil, nil, false
	}
	rk := h.ReplicaKeys([]string{id}, false) // read without the lock
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.Known(id, rk) {
		return 0, nil, nil, false
	}
	if g := h.groups.Group(id); g != nil && len(g.Members) > 0 {
		return kerr.NonEmptyGroup.Code, nil, nil, true
	}
	code, d, remote = h.deleteKeys(id, false, rk)
	if code == 0 {
		h.groups.Delete(id) // no members: removed if it was known
	}
	return code, d, remote, true
}

// DeleteLed deletes the state of group id's share-partitions this broker
// leads, for its coordinator's DeleteGroups (which checked the group has
// no members).
func (h *Host) DeleteLed(id string) (code int16, d Durable) {
	if h.err != nil || id == "" {
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	rk := h.ReplicaKeys([]string{id}, false) // read without the lock
	h.mu.Lock()
	defer h.mu.Unlock()
	code, d, _ = h.deleteKeys(id, true, rk)
	return code, d
}

// deleteKeys tombstones group id's share-partitions (lock held): in a
// cluster those this broker leads, or whose topic is gone unless ledOnly,
// the others returned in remote; rk is what this broker's replicas of the
// state topic have (ReplicaKeys).
func (h *Host) deleteKeys(id string, ledOnly bool, rk Replicas) (code int16, d Durable, remote []Key) {
	keys := map[Key]bool{}
	for k := range h.parts {
		if k.Group == id {
			keys[k] = true
		}
	}
	for k := range h.stored {
		if k.Group == id {
			keys[k] = true
		}
	}
	if h.cluster != nil {
		for k := range rk[id] {
			keys[k] = true
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(keys), func(a, b Key) int {
		return cmpKey(a, b)
	}) {
		if h.cluster != nil {
			t := h.eng.TopicByID(k.TopicID)
			switch {
			case t == nil || t.Deleted():
				if ledOnly {
					continue
				}
			default:
				if _, ok := h.cluster.Leads(t, k.Part); !ok {
					if !ledOnly {
						remote = append(remote, k)
					}
					continue
				}
			}
		}
		w, err := h.appendShareRecord(shareStateKey(k), nil)
		if err != nil {
			h.log.Error("share: deleting a share group's state", "group", id, "err", err)
			return kerr.KafkaStorageError.Code, d, remote
		}
		d = append(d, w)
		delete(h.parts, k) // a dead-letter write under way is dropped by dlqFinish
		delete(h.stored, k)
		h.forgetLoad(k)
	}
	for _, sess := range h.sessions.All() {
		if sess.Key.Group == id {
			h.sessions.Remove(sess.Key)
			delete(h.conns, sess.Key)
		}
	}
	return 0, d, remote
}

func cmpKey(a, b Key) int {
	if c := strings.Compare(a.Group, b.Group); c != 0 {
		return c
	}
	if c := slices.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c
	}
	return int(a.Part) - int(b.Part)
}

// Known reports whether the host knows group: members, or state of a
// share-partition (lock held); in a cluster, state in this broker's
// replicas of the state topic counts, as rk has it (ReplicaKeys, read
// before the lock was taken).
func (h *Host) Known(group string, rk Replicas) bool {
	return h.knownHere(group) || (h.cluster != nil && len(rk[group]) > 0)
}

// knownHere is Known without the replicas (lock held).
func (h *Host) knownHere(group string) bool {
	if h.groups.Group(group) != nil {
		return true
	}
	for k := range h.parts {
		if k.Group == group {
			return true
		}
	}
	for k := range h.stored {
		if k.Group == group {
			return true
		}
	}
	return false
}
