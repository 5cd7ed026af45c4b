package server

// Share groups (KIP-932, issue 24): the Server's shell around package
// share's pure cores. One shareState holds, under one mutex, the share-group
// coordinator (share.Groups: membership, epochs, assignment), the
// share-session cache (share.Sessions) and the share-partitions
// (share.Partition, one per group and topic-partition, created on the first
// ShareFetch or acknowledgement that names it), plus the group configs set
// with IncrementalAlterConfigs on GROUP resources (alterGroupConfigs) and
// described by DescribeConfigs (describeGroupConfigs). ListGroups lists
// share groups (shareGroupListings). With an authorizer every share API
// checks Kafka's ACLs (authz.go's helpers). Handlers: 76 (heartbeat),
// 77 (describe), 78 (ShareFetch), 79 (ShareAcknowledge), 90-92 (describe,
// alter and delete share-group offsets); DeleteGroups (42) deletes an empty
// share group with its state (deleteShareGroup).
//
// Durability: every change of a share-partition's persistent state (SPSO,
// delivery states and counts; ACQUIRED is written as AVAILABLE with one
// delivery less, as KIP-932 specifies) is appended as the partition's whole
// snapshot to the compacted internal topic __share_group_state (created on
// first use; share.coordinator.state.topic.num.partitions partitions, key =
// group, topic id and partition), and the request that caused it is
// answered only once the record is durable. A group's configs are records
// of the same topic. On start the topic is read back and share-partitions
// are restored from their last snapshot when first used, so a restart does
// not redeliver accepted records. The records are Strata's encoding (a
// versioned key and a JSON snapshot), not Kafka's ShareSnapshot schema.
//
// Time: a periodic callback of a coordhost.Host (the share host: no
// leader loop, only Every) expires acquisition locks (Partition.Tick),
// member sessions (Groups.Expire: their records are released), share
// sessions whose connection closed (released as well), and retries the
// ShareFetches waiting for records (long polls: no goroutine each). A
// waiting fetch is also retried at once, by the share state's retry loop,
// when the high watermark of one of its partitions moves (an
// engine.HWWaiter), records become available again, or its MaxWaitMillis
// timer fires.
//
// Limits: a single broker only. In cluster mode the share APIs answer
// UNSUPPORTED_VERSION: the state is not owned by partition leaders nor
// replicated with a share coordinator yet. Dead-letter topics (KIP-1191)
// are written by share_dlq.go. The broker keys
// (group.share.*) reach Config.Groups.Share through strata serve
// (cmd/strata/serve_share.go).

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareStateTopic is KIP-932's share-group state topic.
const ShareStateTopic = "__share_group_state"

// DefaultShareStatePartitions is share.coordinator.state.topic.num.partitions.
const DefaultShareStatePartitions = 50

// DefaultShareTick is how often locks, sessions and waiting fetches are
// looked at.
const DefaultShareTick = 100 * time.Millisecond

// Share-group configs (GROUP resources of IncrementalAlterConfigs).
const (
	cfgShareAutoOffsetReset = "share.auto.offset.reset"
	cfgShareLockDuration    = "share.record.lock.duration.ms"
	cfgShareIsolation       = "share.isolation.level"
	cfgDLQTopicName         = "errors.deadletterqueue.topic.name"         // KIP-1191
	cfgDLQCopyRecord        = "errors.deadletterqueue.copy.record.enable" // KIP-1191
)

// ShareConfig configures share groups (issue 24).
type ShareConfig struct {
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
	// fetches are handled (0: DefaultShareTick).
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

type sharePartKey struct {
	group   string
	topicID [16]byte
	part    int32
}

type sharePart struct {
	p    *share.Partition
	log  *engine.Log
	name string // topic name

	// Dead letters (share_dlq.go): dlqWant says records may be ARCHIVING,
	// dlqBusy that a write of some of them is under way, dlqRetryAt when
	// a failed write may be tried again (ms) and dlqBackoff how long the
	// next failure waits; dlqErr is the last failure, logged once.
	dlqWant    bool
	dlqBusy    bool
	dlqRetryAt int64
	dlqBackoff time.Duration
	dlqErr     string
}

// shareState is the Server's part for share groups.
type shareState struct {
	err  error // why share groups are not served
	host *coordhost.Host

	mu       sync.Mutex
	groups   *share.Groups
	sessions share.Sessions
	conns    map[share.SessionKey]peer // the connection of each session
	parts    map[sharePartKey]*sharePart
	stored   map[sharePartKey]share.State // read back, not restored yet
	configs  map[string]map[string]string // group -> config overrides
	waiting  map[*shareFetch]struct{}
	topic    *engine.Topic // __share_group_state, nil until first written
	nparts   int32
	dlq      dlqState // the dead-letter writer (share_dlq.go)

	// kick wakes the retry loop (a waiting fetch's partition got new
	// records, or records became available again); stop and done end it.
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// initShare is called by New after the Server is built.
func (s *Server) initShare() {
	st := &s.groups.share
	cfg := s.cfg.Groups.Share
	st.groups = share.NewGroups(cfg.Groups)
	st.conns = map[share.SessionKey]peer{}
	st.parts = map[sharePartKey]*sharePart{}
	st.stored = map[sharePartKey]share.State{}
	st.configs = map[string]map[string]string{}
	st.waiting = map[*shareFetch]struct{}{}
	st.nparts = cfg.StatePartitions
	if st.nparts <= 0 {
		st.nparts = DefaultShareStatePartitions
	}
	switch {
	case s.eng == nil:
		st.err = errors.New("no engine")
		return
	case s.clustered():
		st.err = errors.New("share groups are served by a single broker only")
		return
	}
	if err := s.loadShareState(); err != nil {
		st.err = err
		s.log.Error("share: cannot read "+ShareStateTopic+"; share-group APIs are refused", "err", err)
		return
	}
	tick := cfg.Tick
	if tick <= 0 {
		tick = DefaultShareTick
	}
	st.host = coordhost.New(coordhost.Config{Name: "share", Clock: hostClock{s}, Log: s.log})
	st.host.Every(tick, s.shareTick)
	st.kick, st.stop, st.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go s.shareRetryLoop(st.stop)
	st.dlq.kick, st.dlq.done = make(chan struct{}, 1), make(chan struct{})
	go s.shareDLQLoop(st.stop)
	s.dlqKick() // stored share-partitions with ARCHIVING records: written at once
}

// shareRetryLoop retries the waiting fetches when kicked, until
// closeShare. It is the share state's one goroutine besides the host's
// tick.
func (s *Server) shareRetryLoop(stop <-chan struct{}) {
	st := &s.groups.share
	defer close(st.done)
	for {
		select {
		case <-stop:
			return
		case <-st.kick:
		}
		nowMs := s.now().UnixMilli()
		st.mu.Lock()
		ready := s.retryWaiting(nowMs)
		st.mu.Unlock()
		for _, f := range ready {
			f.send()
		}
	}
}

// shareKick wakes the retry loop; it never blocks (an HWWaiter's wake).
func (s *Server) shareKick() {
	select {
	case s.groups.share.kick <- struct{}{}:
	default:
	}
}

// closeShare is called by Close after connections are closed.
func (s *Server) closeShare() {
	st := &s.groups.share
	if st.host != nil {
		st.host.Close()
	}
	st.mu.Lock()
	stop := st.stop // Close may be called more than once
	st.stop = nil
	st.mu.Unlock()
	if stop != nil {
		close(stop)
		<-st.done
		<-st.dlq.done
	}
	// Waiting fetches are dropped: their connections are closed.
	st.mu.Lock()
	for f := range st.waiting {
		f.stopWaiting()
		delete(st.waiting, f)
	}
	st.mu.Unlock()
}

// shareErr is the error code of a share API when share groups are not
// served here.
// shareMemberErr is the check ShareFetch and ShareAcknowledge start
// with: share groups served, a group and member id given, Read on the
// group (authz.go); 0 when it passes.
func (s *Server) shareMemberErr(rc *reqCtx, group, member *string) (int16, string) {
	if code, msg := s.shareErr(); code != 0 {
		return code, msg
	}
	if group == nil || *group == "" || member == nil || *member == "" {
		return kerr.InvalidRequest.Code, "the group id and member id are required"
	}
	return s.groupAuthorized(rc, *group, 0), ""
}

// shareGroupErr is the check the share-group offset APIs start with:
// share groups served and a group id given; 0 when it passes.
func (s *Server) shareGroupErr(group string) (int16, string) {
	if code, msg := s.shareErr(); code != 0 {
		return code, msg
	}
	if group == "" {
		return kerr.InvalidGroupID.Code, ""
	}
	return 0, ""
}

func (s *Server) shareErr() (int16, string) {
	if s.groups.share.err == nil {
		return 0, ""
	}
	if s.clustered() {
		return kerr.UnsupportedVersion.Code, s.groups.share.err.Error()
	}
	return kerr.CoordinatorNotAvailable.Code, s.groups.share.err.Error()
}

// Key and value encoding of __share_group_state records.
const (
	shareKeyState  = 0 // group, topic id, partition -> JSON share.State
	shareKeyConfig = 1 // group -> JSON map of configs
)

func shareStateKey(k sharePartKey) []byte {
	b := binary.BigEndian.AppendUint16(nil, shareKeyState)
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.group)))
	b = append(b, k.group...)
	b = append(b, k.topicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.part))
}

func shareConfigKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, shareKeyConfig)
	b = binary.BigEndian.AppendUint16(b, uint16(len(group)))
	return append(b, group...)
}

// decodeShareKey reads a key; ok false for a malformed or unknown one.
func decodeShareKey(b []byte) (kind uint16, k sharePartKey, ok bool) {
	if len(b) < 4 {
		return 0, k, false
	}
	kind = binary.BigEndian.Uint16(b)
	n := int(binary.BigEndian.Uint16(b[2:]))
	b = b[4:]
	if len(b) < n {
		return 0, k, false
	}
	k.group, b = string(b[:n]), b[n:]
	switch kind {
	case shareKeyConfig:
		return kind, k, len(b) == 0
	case shareKeyState:
		if len(b) != 20 {
			return 0, k, false
		}
		copy(k.topicID[:], b)
		k.part = int32(binary.BigEndian.Uint32(b[16:]))
		return kind, k, true
	}
	return 0, k, false
}

// loadShareState reads __share_group_state back: the last snapshot of
// every share-partition and every group's configs.
func (s *Server) loadShareState() error {
	st := &s.groups.share
	t := s.eng.Topic(ShareStateTopic)
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
		err := txnhost.ScanLog(l, func(h *record.Header, r *record.Record) error {
			if h.Control() {
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
					s.log.Error("share: unreadable share-partition state skipped", "group", k.group, "partition", k.part, "err", err)
					delete(st.stored, k)
					return nil
				}
				st.stored[k] = state
			case shareKeyConfig:
				cfgs := map[string]string{}
				if r.Value == nil {
					delete(st.configs, k.group)
					return nil
				}
				if err := json.Unmarshal(r.Value, &cfgs); err != nil {
					s.log.Error("share: unreadable group configs skipped", "group", k.group, "err", err)
					return nil
				}
				st.configs[k.group] = cfgs
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
type durable []durableAt

type durableAt struct {
	l   *engine.Log
	off int64
}

// wait calls fn once every append is durable (with the first error).
func (s *Server) waitDurable(d durable, fn func(error)) {
	if len(d) == 0 {
		fn(nil)
		return
	}
	var mu sync.Mutex
	left, first := len(d), error(nil)
	for _, w := range d {
		s.whenAcked(w.l, w.off, func(err error) {
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
func (s *Server) appendShareRecord(key, value []byte) (durableAt, error) {
	st := &s.groups.share
	if st.topic == nil || st.topic.Deleted() {
		t, err := s.eng.CreateTopic(ShareStateTopic, st.nparts, map[string]string{"cleanup.policy": "compact"})
		if errors.Is(err, engine.ErrTopicExists) {
			t, err = s.eng.Topic(ShareStateTopic), nil
		}
		if err != nil || t == nil {
			return durableAt{}, fmt.Errorf("share: creating %s: %w", ShareStateTopic, err)
		}
		st.topic = t
	}
	p := int32(hashKey(key) % uint32(st.topic.Partitions()))
	l := st.topic.Partition(p)
	if l == nil {
		return durableAt{}, fmt.Errorf("share: %s-%d missing", ShareStateTopic, p)
	}
	var b record.Builder
	now := s.now().UnixMilli()
	b.Reset(record.CodecNone, now)
	b.Add(now, key, value, nil)
	batch, err := b.AppendTo(nil)
	if err != nil {
		return durableAt{}, err
	}
	info, err := l.Append(batch, l.LeaderEpoch())
	if err != nil {
		return durableAt{}, err
	}
	return durableAt{l: l, off: info.LastOffset}, nil
}

func hashKey(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// persistPart writes a share-partition's snapshot (st.mu held).
func (s *Server) persistPart(k sharePartKey, sp *sharePart) (durableAt, error) {
	v, err := json.Marshal(sp.p.Snapshot())
	if err != nil {
		return durableAt{}, err
	}
	return s.appendShareRecord(shareStateKey(k), v)
}

// groupReset is the group's share.auto.offset.reset (st.mu held).
func (s *Server) groupReset(group string) share.Reset {
	if v, ok := s.groups.share.configs[group][cfgShareAutoOffsetReset]; ok {
		if r, err := share.ParseReset(v); err == nil {
			return r
		}
	}
	return share.Reset{Kind: share.ResetLatest}
}

// partConfig is the share-partition config for group (st.mu held).
func (s *Server) partConfig(group string) share.Config {
	c := s.cfg.Groups.Share.Partition
	if v, ok := s.groups.share.configs[group][cfgShareLockDuration]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			c.LockDurationMs = n
		}
	}
	c.DeadLetter = s.groups.share.configs[group][cfgDLQTopicName] != ""
	return c
}

// readCommitted reports whether group reads with read_committed (st.mu
// held): records up to the last stable offset, aborted ones archived.
func (s *Server) readCommitted(group string) bool {
	return s.groups.share.configs[group][cfgShareIsolation] == "read_committed"
}

// lockDurationMs is the effective lock duration of group (st.mu held).
func (s *Server) lockDurationMs(group string) int32 {
	ms := s.partConfig(group).LockDurationMs
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
func (s *Server) sharePartition(group string, t *engine.Topic, p int32, d *durable) (*sharePart, int16) {
	l := t.Partition(p)
	if l == nil {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	k := sharePartKey{group: group, topicID: t.ID(), part: p}
	st := &s.groups.share
	if sp := st.parts[k]; sp != nil {
		sp.log = l // the same topic id: keep the state even if the log object changed
		return sp, 0
	}
	sp := &sharePart{log: l, name: t.Name()}
	if state, ok := st.stored[k]; ok {
		pp, err := share.Restore(s.partConfig(group), state)
		if err != nil {
			s.log.Error("share: persisted state refused; starting over", "group", group, "topic", t.Name(), "partition", p, "err", err)
		} else {
			sp.p = pp
		}
		delete(st.stored, k)
		if sp.p != nil {
			// ARCHIVING records: written to the dead-letter topic
			// again, or archived if the group has none any more.
			sp.dlqWant = len(sp.p.DeadLetters()) > 0
			if e := sp.p.SetConfig(s.partConfig(group)); e.Write != nil {
				st.parts[k] = sp
				if err := s.applyEffects(k, sp, e, d); err != nil {
					s.log.Error("share: persisting archived dead letters", "group", group, "err", err)
				}
			}
			if sp.dlqWant {
				s.dlqKick()
			}
		}
	}
	if sp.p == nil {
		var start int64
		switch r := s.groupReset(group); r.Kind {
		case share.ResetEarliest:
			start = l.LogStartOffset()
		case share.ResetByDuration:
			off, _, found := l.OffsetForTimestamp(r.Timestamp(s.now().UnixMilli()))
			if !found {
				off = l.HighWatermark()
			}
			start = off
		default:
			start = l.HighWatermark()
		}
		sp.p = share.New(s.partConfig(group), start)
		w, err := s.persistPart(k, sp)
		if err != nil {
			s.log.Error("share: persisting a new share-partition", "group", group, "err", err)
			return nil, kerr.KafkaStorageError.Code
		}
		*d = append(*d, w)
	}
	st.parts[k] = sp
	return sp, 0
}

// applyEffects persists a transition's write (st.mu held).
func (s *Server) applyEffects(k sharePartKey, sp *sharePart, e share.Effects, d *durable) error {
	if e.Available && len(s.groups.share.waiting) > 0 {
		s.shareKick()
	}
	if len(e.DeadLetters) > 0 {
		sp.dlqWant = true
		s.dlqKick()
	}
	if e.Write == nil {
		return nil
	}
	w, err := s.persistPart(k, sp)
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
func (s *Server) releaseMember(nowMs int64, group, member string) {
	for k, sp := range s.groups.share.parts {
		if k.group != group {
			continue
		}
		if err := s.applyEffects(k, sp, sp.p.ReleaseMember(nowMs, member), nil); err != nil {
			s.log.Error("share: persisting a release", "group", group, "err", err)
		}
	}
}

// closeSession removes a share session and releases its member's records
// (st.mu held).
func (s *Server) closeSession(nowMs int64, key share.SessionKey) {
	if s.groups.share.sessions.Remove(key) == nil {
		return
	}
	delete(s.groups.share.conns, key)
	s.releaseMember(nowMs, key.Group, key.Member)
}

// shareTick runs on the share host's periodic callback.
func (s *Server) shareTick(now time.Time) {
	nowMs := now.UnixMilli()
	st := &s.groups.share
	st.mu.Lock()
	for _, d := range st.groups.Expire(nowMs) {
		s.log.Info("share: member session expired", "group", d.Group, "member", d.Member)
		s.closeSession(nowMs, share.SessionKey{Group: d.Group, Member: d.Member})
		s.releaseMember(nowMs, d.Group, d.Member)
	}
	for key, c := range st.conns {
		select {
		case <-c.Done():
			s.closeSession(nowMs, key)
		default:
		}
	}
	for k, sp := range st.parts {
		if sp.dlqWant && !sp.dlqBusy && sp.dlqRetryAt <= nowMs {
			s.dlqKick() // a dead-letter write to retry
		}
		if dl := sp.p.NextDeadline(); dl >= 0 && dl <= nowMs {
			if err := s.applyEffects(k, sp, sp.p.Tick(nowMs), nil); err != nil {
				s.log.Error("share: persisting a lock expiry", "group", k.group, "err", err)
			}
		}
	}
	ready := s.retryWaiting(nowMs)
	st.mu.Unlock()
	for _, f := range ready {
		f.send()
	}
}

// retryWaiting retries the waiting fetches and returns those to answer
// now (st.mu held).
func (s *Server) retryWaiting(nowMs int64) []*shareFetch {
	var ready []*shareFetch
	for f := range s.groups.share.waiting {
		if f.retry(nowMs) {
			f.stopWaiting()
			delete(s.groups.share.waiting, f)
			ready = append(ready, f)
			continue
		}
		f.arm() // again: a wake fires once per Arm
	}
	return ready
}

// shareGroupConfigKeys are the GROUP configs this broker keeps (Kafka
// 4.2's share.* group configs it implements).
var shareGroupConfigKeys = map[string]func(string) error{
	cfgShareAutoOffsetReset: func(v string) error { _, err := share.ParseReset(v); return err },
	cfgShareLockDuration: func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1000 || n > 3_600_000 {
			return fmt.Errorf("%s must be an integer in [1000, 3600000]", cfgShareLockDuration)
		}
		return nil
	},
	cfgShareIsolation: func(v string) error {
		if v != "read_uncommitted" && v != "read_committed" {
			return fmt.Errorf("%s must be read_uncommitted or read_committed", cfgShareIsolation)
		}
		return nil
	},
	cfgDLQTopicName: func(v string) error {
		if strings.HasPrefix(v, "__") {
			return fmt.Errorf("%s: DLQ topic name must not start with '__'", cfgDLQTopicName)
		}
		return nil
	},
	cfgDLQCopyRecord: func(v string) error {
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return fmt.Errorf("%s must be true or false", cfgDLQCopyRecord)
		}
		return nil
	},
}

// alterGroupConfigs applies IncrementalAlterConfigs operations (SET and
// DELETE) to a GROUP resource and persists the group's configs in the
// share state topic. A share-partition that exists keeps its start offset:
// share.auto.offset.reset applies to share-partitions created afterwards,
// as in Kafka; a lock duration applies to the group's acquisitions from
// now on (Partition.SetConfig).
func (s *Server) alterGroupConfigs(group string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) error {
	if code, msg := s.shareErr(); code != 0 {
		return newAPIError(kerr.ErrorForCode(code).(*kerr.Error), "%s", msg)
	}
	if group == "" {
		return newAPIError(kerr.InvalidRequest, "empty group id")
	}
	if err := checkIncrementalOps(ops); err != nil {
		return err
	}
	for _, op := range ops {
		check, ok := shareGroupConfigKeys[op.Name]
		switch {
		case !ok:
			return newAPIError(kerr.InvalidConfig, "unknown or unsupported group config %q", op.Name)
		case op.Op == kmsg.IncrementalAlterConfigOpSet:
			if err := check(*op.Value); err != nil {
				return newAPIError(kerr.InvalidConfig, "%v", err)
			}
		case op.Op != kmsg.IncrementalAlterConfigOpDelete:
			return newAPIError(kerr.InvalidConfig, "group config %q is not a list: %v is not allowed", op.Name, op.Op)
		}
	}
	if validateOnly {
		return nil
	}
	st := &s.groups.share
	st.mu.Lock()
	cfgs := maps.Clone(st.configs[group])
	if cfgs == nil {
		cfgs = map[string]string{}
	}
	for _, op := range ops {
		if op.Op == kmsg.IncrementalAlterConfigOpSet {
			cfgs[op.Name] = *op.Value
		} else {
			delete(cfgs, op.Name)
		}
	}
	v, err := json.Marshal(cfgs)
	var w durableAt
	if err == nil {
		w, err = s.appendShareRecord(shareConfigKey(group), v)
	}
	d := durable{}
	if err == nil {
		d = append(d, w)
		st.configs[group] = cfgs
		for k, sp := range st.parts {
			if k.group != group {
				continue
			}
			if err = s.applyEffects(k, sp, sp.p.SetConfig(s.partConfig(group)), &d); err != nil {
				break
			}
			// A changed dead-letter topic: the ARCHIVING records are
			// tried again at once.
			sp.dlqWant, sp.dlqRetryAt, sp.dlqBackoff = true, 0, 0
		}
		s.dlqKick()
	}
	st.mu.Unlock()
	if err != nil {
		return newAPIError(kerr.KafkaStorageError, "%v", err)
	}
	done := make(chan error, 1)
	s.waitDurable(d, func(err error) { done <- err })
	if err := <-done; err != nil {
		return newAPIError(kerr.KafkaStorageError, "%v", err)
	}
	return nil
}

// shareGroupConfigDocs are the group configs DescribeConfigs reports, in
// order, with their types and documentation.
var shareGroupConfigDocs = []struct {
	name string
	typ  kmsg.ConfigType
	doc  string
}{
	{cfgShareAutoOffsetReset, kmsg.ConfigTypeString, "Where a share-partition without state starts: latest, earliest or by_duration:<ISO-8601 duration>."},
	{cfgShareIsolation, kmsg.ConfigTypeString, "The isolation level of share fetches: read_uncommitted, or read_committed (records up to the last stable offset, aborted ones archived)."},
	{cfgShareLockDuration, kmsg.ConfigTypeInt, "How long an acquired record stays locked to its member (ms)."},
	{cfgDLQTopicName, kmsg.ConfigTypeString, "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank (the default), the group does not have a DLQ topic."},
	{cfgDLQCopyRecord, kmsg.ConfigTypeBoolean, "When writing onto the dead-letter queue topic, whether to copy the original record's key and value, or write a record holding only the context headers."},
}

// describeGroupConfigs answers DescribeConfigs for a GROUP resource: the
// share-group configs, GROUP_CONFIG when set for the group, else the
// default (the broker's, for the lock duration).
func (s *Server) describeGroupConfigs(rr *kmsg.DescribeConfigsRequestResource, synonyms, docs bool) ([]kmsg.DescribeConfigsResponseResourceConfig, *apiError) {
	if code, msg := s.shareErr(); code != 0 {
		return nil, newAPIError(kerr.ErrorForCode(code).(*kerr.Error), "%s", msg)
	}
	if rr.ResourceName == "" {
		return nil, newAPIError(kerr.InvalidRequest, "empty group id")
	}
	st := &s.groups.share
	st.mu.Lock()
	set := maps.Clone(st.configs[rr.ResourceName])
	lockMs := s.cfg.Groups.Share.Partition.LockDurationMs
	st.mu.Unlock()
	if lockMs <= 0 {
		lockMs = share.DefaultLockDurationMs
	}
	defaults := map[string]string{
		cfgShareAutoOffsetReset: "latest",
		cfgShareIsolation:       "read_uncommitted",
		cfgShareLockDuration:    strconv.FormatInt(lockMs, 10),
		cfgDLQTopicName:         "",
		cfgDLQCopyRecord:        "false",
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range shareGroupConfigDocs {
		if !wanted(rr.ConfigNames, k.name) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.ConfigType = k.name, k.typ
		def := kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: k.name, Value: kmsg.StringPtr(defaults[k.name]), Source: kmsg.ConfigSourceDefaultConfig}
		chain := []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{def}
		if v, ok := set[k.name]; ok {
			chain = append([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{{Name: k.name, Value: kmsg.StringPtr(v), Source: kmsg.ConfigSourceGroupConfig}}, chain...)
		}
		c.Value, c.Source = chain[0].Value, chain[0].Source
		c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
		if synonyms {
			c.ConfigSynonyms = chain
		}
		if docs {
			c.Documentation = kmsg.StringPtr(k.doc)
		}
		out = append(out, c)
	}
	return out, nil
}

// shareGroupListing is a share group as ListGroups reports it.
type shareGroupListing struct{ id, state string }

// shareGroupListings lists the share groups with members or state.
func (s *Server) shareGroupListings() []shareGroupListing {
	st := &s.groups.share
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
		ids[k.group] = true
	}
	for k := range st.stored {
		ids[k.group] = true
	}
	var out []shareGroupListing
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		state := "Empty"
		if g := st.groups.Group(id); g != nil {
			state = g.State()
		}
		out = append(out, shareGroupListing{id: id, state: state})
	}
	return out
}

// deleteShareGroup deletes share group id for DeleteGroups (KIP-932):
// ok false when the share coordinator does not know id (then it is the
// group coordinator's to answer). A group with members is NON_EMPTY_GROUP
// and nothing changes. Otherwise a tombstone of each of its
// share-partitions' state is appended to __share_group_state (so a
// restart does not bring it back), the share-partitions (ARCHIVING
// records included: their dead letters are not written) and the group
// are forgotten, and stale share sessions of the group are closed; d holds
// the appends to wait for before answering. The group's configs
// (IncrementalAlterConfigs on the GROUP resource) are kept, as Kafka
// keeps dynamic group configs: a new consumer of the id starts where its
// share.auto.offset.reset says. A failed append is KAFKA_STORAGE_ERROR,
// with the share-partitions tombstoned so far forgotten and the rest kept.
func (s *Server) deleteShareGroup(id string) (code int16, d durable, ok bool) {
	if c, _ := s.shareErr(); c != 0 || id == "" {
		return 0, nil, false
	}
	st := &s.groups.share
	st.mu.Lock()
	defer st.mu.Unlock()
	if !s.shareGroupKnown(id) {
		return 0, nil, false
	}
	if g := st.groups.Group(id); g != nil && len(g.Members) > 0 {
		return kerr.NonEmptyGroup.Code, nil, true
	}
	var keys []sharePartKey
	for k := range st.parts {
		if k.group == id {
			keys = append(keys, k)
		}
	}
	for k := range st.stored {
		if k.group == id {
			if _, live := st.parts[k]; !live {
				keys = append(keys, k)
			}
		}
	}
	for _, k := range keys {
		w, err := s.appendShareRecord(shareStateKey(k), nil)
		if err != nil {
			s.log.Error("share: deleting a share group's state", "group", id, "err", err)
			return kerr.KafkaStorageError.Code, d, true
		}
		d = append(d, w)
		delete(st.parts, k) // a dead-letter write under way is dropped by dlqFinish
		delete(st.stored, k)
	}
	for _, sess := range st.sessions.All() {
		if sess.Key.Group == id {
			st.sessions.Remove(sess.Key)
			delete(st.conns, sess.Key)
		}
	}
	st.groups.Delete(id) // no members: removed if it was known
	return 0, d, true
}
