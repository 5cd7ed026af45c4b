package controller

import (
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
)

// NoLeader is the Leader of a partition none of whose eligible replicas is
// live (Kafka's -1: the partition is offline).
const NoLeader int32 = -1

// TopicID is a topic's 16-byte id (Kafka's Uuid).
type TopicID [16]byte

// IsZero reports whether id is the all-zero id, which no topic has.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// String is Kafka's rendering: base64url without padding.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// Broker is one broker's registration.
type Broker struct {
	ID              int32
	IncarnationID   [16]byte // a fresh random id per broker process start
	Host            string
	Port            int32
	Rack            string // "" when the broker has no rack
	Epoch           int64  // metadata offset of the RegisterBroker command that created this registration
	Fenced          bool   // fenced brokers lead nothing and are in no ISR (except as the last member)
	ShuttingDown    bool   // in controlled shutdown: like fenced for leadership and ISR, still registered
	LastHeartbeatMs int64  // time (controller leader's clock) of the last heartbeat or registration
	// OfflineDir: a heartbeat of this registration reported the broker's
	// data directory offline (KIP-112). Like fenced for leadership, ISRs
	// and placement; the broker stays registered and unfenced. A new
	// registration (a restart) starts without it.
	OfflineDir bool
	// Listeners are the registration's listeners (RegisterBroker.Listeners;
	// nil: Host and Port serve every client). Never modified in place: a
	// new registration replaces the slice.
	Listeners []Endpoint
}

// Endpoint returns the broker's advertised address on the listener named
// name: Host and Port when name is "" or the broker registered no
// listeners; ok is false when it registered listeners but not that one.
func (b *Broker) Endpoint(name string) (host string, port int32, ok bool) {
	if name == "" || len(b.Listeners) == 0 {
		return b.Host, b.Port, true
	}
	for _, e := range b.Listeners {
		if e.Name == name {
			return e.Host, e.Port, true
		}
	}
	return "", 0, false
}

// Live reports whether the broker may lead partitions and join ISRs.
func (b *Broker) Live() bool { return !b.Fenced && !b.ShuttingDown && !b.OfflineDir }

// Topic is a topic's metadata. The partition index is the partition number.
type Topic struct {
	Name       string
	ID         TopicID
	Configs    map[string]string // topic-level overrides, validated by the caller
	Partitions []Partition
}

// Partition is the replication state of one partition.
//
// Replicas is the assignment in preference order (Replicas[0] is the
// preferred leader). ISR is a subset of Replicas and never empty. Leader is a
// member of ISR or NoLeader. LeaderEpoch increases on every leader change
// (including to and from NoLeader); PartitionEpoch increases on every change
// of the partition (leader, ISR, replicas). During a reassignment Replicas is
// the union of the target (first, in target order) and the original replicas;
// Adding are the target replicas not in the original set, Removing the
// original replicas not in the target.
type Partition struct {
	Replicas       []int32
	ISR            []int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Adding         []int32
	Removing       []int32
}

// Reassigning reports whether a reassignment is in progress.
func (p *Partition) Reassigning() bool { return len(p.Adding) > 0 || len(p.Removing) > 0 }

// State is the cluster metadata: a pure, deterministic state machine. It
// never reads a clock, the disk or the network; Apply is its only mutator.
// A State is not safe for concurrent use; the Controller guards its State
// with a RWMutex.
type State struct {
	offset  int64
	brokers map[int32]*Broker
	topics  map[string]*Topic
	byID    map[TopicID]*Topic
	// nextProducerID is the first producer id not yet in a block
	// (producerids.go); FirstProducerID in a new State.
	nextProducerID int64
	// sec: ACLs, SCRAM credentials, client quotas (security.go).
	sec securityState
	// brokerCfg: the dynamic broker configs by broker id, the cluster-wide
	// default under DefaultBrokerConfigs (brokerconfigs.go); nil or no
	// entry: none.
	brokerCfg map[int32]map[string]string
}

// NewState returns the empty state at metadata offset 0.
func NewState() *State {
	return &State{
		brokers: make(map[int32]*Broker),
		topics:  make(map[string]*Topic),
		byID:    make(map[TopicID]*Topic),

		nextProducerID: FirstProducerID,
		sec:            newSecurityState(),
	}
}

// Offset is the metadata offset: the number of commands applied so far. It
// increases by one on every Apply, whatever the result, so the command that
// made a change is at the Offset the State has right after applying it.
func (s *State) Offset() int64 { return s.offset }

// Broker returns a copy of broker id's registration.
func (s *State) Broker(id int32) (Broker, bool) {
	b, ok := s.brokers[id]
	if !ok {
		return Broker{}, false
	}
	return *b, true
}

// Brokers returns copies of every registration, sorted by id.
func (s *State) Brokers() []Broker {
	out := make([]Broker, 0, len(s.brokers))
	for _, id := range s.brokerIDs() {
		out = append(out, *s.brokers[id])
	}
	return out
}

// Topic returns the named topic or nil. The result is owned by the State:
// read it only while holding the State (inside Controller.Read) and never
// modify it; use Clone to keep a copy.
func (s *State) Topic(name string) *Topic { return s.topics[name] }

// TopicByID returns the topic with that id or nil; see Topic for ownership.
func (s *State) TopicByID(id TopicID) *Topic { return s.byID[id] }

// Topics returns every topic sorted by name; see Topic for ownership.
func (s *State) Topics() []*Topic {
	out := make([]*Topic, 0, len(s.topics))
	for _, name := range s.topicNames() {
		out = append(out, s.topics[name])
	}
	return out
}

// Partition returns topic's partition p; see Topic for ownership.
func (s *State) Partition(topic string, p int32) (*Partition, bool) {
	t := s.topics[topic]
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return nil, false
	}
	return &t.Partitions[p], true
}

// ExpiredBrokers lists, ascending, the unfenced brokers whose last heartbeat
// is more than sessionTimeoutMs before nowMs: the brokers a Tick with these
// arguments would fence. The Controller uses it to decide whether a Tick is
// worth proposing; the decision itself is made again by Apply.
func (s *State) ExpiredBrokers(nowMs, sessionTimeoutMs int64) []int32 {
	var out []int32
	for _, id := range s.brokerIDs() {
		b := s.brokers[id]
		if !b.Fenced && nowMs-b.LastHeartbeatMs > sessionTimeoutMs {
			out = append(out, id)
		}
	}
	return out
}

// brokerIDs returns the registered broker ids ascending. Every iteration
// that can influence the state goes through a sorted list: map order is
// random, Apply must not be.
func (s *State) brokerIDs() []int32 {
	ids := make([]int32, 0, len(s.brokers))
	for id := range s.brokers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func (s *State) topicNames() []string {
	names := make([]string, 0, len(s.topics))
	for n := range s.topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// live reports whether broker id is registered and live.
func (s *State) live(id int32) bool {
	b := s.brokers[id]
	return b != nil && b.Live()
}

// Clone returns a deep copy.
func (s *State) Clone() *State {
	c := NewState()
	c.offset = s.offset
	c.nextProducerID = s.nextProducerID
	c.sec = s.sec.clone()
	c.brokerCfg = cloneBrokerConfigs(s.brokerCfg)
	for id, b := range s.brokers {
		cb := *b
		c.brokers[id] = &cb
	}
	for name, t := range s.topics {
		ct := t.clone()
		c.topics[name] = ct
		c.byID[ct.ID] = ct
	}
	return c
}

func (t *Topic) clone() *Topic {
	c := &Topic{Name: t.Name, ID: t.ID, Configs: make(map[string]string, len(t.Configs))}
	for k, v := range t.Configs {
		c.Configs[k] = v
	}
	c.Partitions = make([]Partition, len(t.Partitions))
	for i := range t.Partitions {
		c.Partitions[i] = t.Partitions[i].clone()
	}
	return c
}

func (p Partition) clone() Partition {
	p.Replicas = cloneInt32s(p.Replicas)
	p.ISR = cloneInt32s(p.ISR)
	p.Adding = cloneInt32s(p.Adding)
	p.Removing = cloneInt32s(p.Removing)
	return p
}

func cloneInt32s(v []int32) []int32 {
	if v == nil {
		return nil
	}
	return append(make([]int32, 0, len(v)), v...)
}

// ErrInvariant is wrapped by Check's errors.
var ErrInvariant = errors.New("controller: state invariant violated")

// Check verifies the invariants every State keeps: topic ids unique and
// non-zero, every partition's replicas distinct and non-empty, ISR a
// non-empty duplicate-free subset of the replicas, the leader in the ISR or
// NoLeader, a fenced or shutting-down broker leading nothing, epochs not
// negative, reassignment sets consistent. Restore runs it on every snapshot;
// tests run it after every command.
func (s *State) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvariant, fmt.Sprintf(format, args...))
	}
	if s.offset < 0 {
		return bad("negative offset %d", s.offset)
	}
	if s.nextProducerID < FirstProducerID {
		return bad("next producer id %d below %d", s.nextProducerID, FirstProducerID)
	}
	for id, b := range s.brokers {
		if b.ID != id || id < 0 {
			return bad("broker key %d holds id %d", id, b.ID)
		}
		if b.Epoch < 1 || b.Epoch > s.offset {
			return bad("broker %d epoch %d outside [1,%d]", id, b.Epoch, s.offset)
		}
	}
	if msg := s.checkSecurity(); msg != "" {
		return bad("%s", msg)
	}
	if len(s.byID) != len(s.topics) {
		return bad("%d topic ids for %d topics", len(s.byID), len(s.topics))
	}
	for name, t := range s.topics {
		if t.Name != name || t.ID.IsZero() || s.byID[t.ID] != t {
			return bad("topic %q: name/id index inconsistent", name)
		}
		if len(t.Partitions) == 0 {
			return bad("topic %q has no partitions", name)
		}
		for i := range t.Partitions {
			if err := s.checkPartition(&t.Partitions[i]); err != nil {
				return bad("%s-%d: %v", name, i, err)
			}
		}
	}
	return nil
}

func (s *State) checkPartition(p *Partition) error {
	if len(p.Replicas) == 0 || hasDup(p.Replicas) {
		return fmt.Errorf("replicas %v", p.Replicas)
	}
	if len(p.ISR) == 0 || hasDup(p.ISR) || !subset(p.ISR, p.Replicas) {
		return fmt.Errorf("isr %v of replicas %v", p.ISR, p.Replicas)
	}
	if p.Leader != NoLeader {
		if !contains(p.ISR, p.Leader) {
			return fmt.Errorf("leader %d not in isr %v", p.Leader, p.ISR)
		}
		if !s.live(p.Leader) {
			return fmt.Errorf("leader %d is not live", p.Leader)
		}
	}
	if p.LeaderEpoch < 0 || p.PartitionEpoch < p.LeaderEpoch {
		return fmt.Errorf("epochs leader %d partition %d", p.LeaderEpoch, p.PartitionEpoch)
	}
	if hasDup(p.Adding) || hasDup(p.Removing) || !subset(p.Adding, p.Replicas) || !subset(p.Removing, p.Replicas) {
		return fmt.Errorf("reassignment adding %v removing %v of %v", p.Adding, p.Removing, p.Replicas)
	}
	for _, a := range p.Adding {
		if contains(p.Removing, a) {
			return fmt.Errorf("replica %d both adding and removing", a)
		}
	}
	if p.Reassigning() && len(p.Removing) == len(p.Replicas) {
		return fmt.Errorf("reassignment removes every replica")
	}
	return nil
}

func contains(vs []int32, v int32) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

func hasDup(vs []int32) bool {
	for i := range vs {
		for j := i + 1; j < len(vs); j++ {
			if vs[i] == vs[j] {
				return true
			}
		}
	}
	return false
}

func subset(a, b []int32) bool {
	for _, v := range a {
		if !contains(b, v) {
			return false
		}
	}
	return true
}

// without returns vs minus the members of drop, order kept, in a new slice.
func without(vs []int32, drop ...int32) []int32 {
	out := make([]int32, 0, len(vs))
	for _, v := range vs {
		if !contains(drop, v) {
			out = append(out, v)
		}
	}
	return out
}

func equalInt32s(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
