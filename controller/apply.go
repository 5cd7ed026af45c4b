package controller

import (
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Limits on what a command may create. The decoder bounds allocations by
// the input's length; these bound what a small command could make the FSM
// allocate (a placement of a billion partitions is a few bytes of command).
const (
	MaxTopicNameLen       = 249
	MaxPartitionsPerTopic = 1 << 16 // as engine's
	MaxConfigsPerTopic    = 1024
	MaxConfigValueLen     = 1 << 16
)

// UncleanLeaderElectionConfig is the topic config that, when "true", lets
// automatic elections pick a live replica outside the ISR.
const UncleanLeaderElectionConfig = "unclean.leader.election.enable"

// Apply applies one command and returns its result. It is deterministic:
// the same commands applied to equal States give equal States and Results.
// The metadata offset increases by one whatever the outcome. Commands may be
// given as values or pointers.
func (s *State) Apply(c Command) Result {
	s.offset++
	var r Result
	switch c := deref(c).(type) {
	case RegisterBroker:
		r = s.registerBroker(c)
	case BrokerHeartbeat:
		r = s.heartbeat(c)
	case FenceBroker:
		r = s.fenceCmd(c.ID)
	case UnfenceBroker:
		r = s.unfenceCmd(c.ID)
	case CreateTopic:
		r = s.createTopic(c)
	case DeleteTopic:
		r = s.deleteTopic(c)
	case CreatePartitions:
		r = s.createPartitions(c)
	case AlterConfigs:
		r = s.alterConfigs(c)
	case AlterPartition:
		r = s.alterPartition(c)
	case ElectLeaders:
		r = s.electLeaders(c)
	case ReassignPartitions:
		r = s.reassign(c)
	case Tick:
		r = s.tick(c)
	case AllocateProducerIDs:
		r = s.allocateProducerIDs(c)
	case CreateACLs:
		r = s.createACLs(c)
	case DeleteACLs:
		r = s.deleteACLs(c)
	case AlterScram:
		r = s.alterScram(c)
	case AlterClientQuotas:
		r = s.alterClientQuotas(c)
	case SeedSecurity:
		r = s.seedSecurity(c)
	case AlterBrokerConfigs:
		r = s.alterBrokerConfigs(c) // brokerconfigs.go
	default:
		r = failed(kerr.InvalidRequest, "unknown command %T", c)
	}
	r.Offset = s.offset
	return r
}

func deref(c Command) Command {
	switch p := c.(type) {
	case *RegisterBroker:
		return *p
	case *BrokerHeartbeat:
		return *p
	case *FenceBroker:
		return *p
	case *UnfenceBroker:
		return *p
	case *CreateTopic:
		return *p
	case *DeleteTopic:
		return *p
	case *CreatePartitions:
		return *p
	case *AlterConfigs:
		return *p
	case *AlterPartition:
		return *p
	case *ElectLeaders:
		return *p
	case *ReassignPartitions:
		return *p
	case *Tick:
		return *p
	case *AllocateProducerIDs:
		return *p
	case *CreateACLs:
		return *p
	case *DeleteACLs:
		return *p
	case *AlterScram:
		return *p
	case *AlterClientQuotas:
		return *p
	case *SeedSecurity:
		return *p
	case *AlterBrokerConfigs:
		return *p
	}
	return c
}

// ---- brokers ----

func (s *State) registerBroker(c RegisterBroker) Result {
	if c.ID < 0 {
		return failed(kerr.InvalidRequest, "broker id %d", c.ID)
	}
	if c.Port < 0 || c.Port > 65535 || len(c.Host) > 1024 || len(c.Rack) > 1024 {
		return failed(kerr.InvalidRequest, "broker %d endpoint %q:%d rack %q", c.ID, c.Host, c.Port, c.Rack)
	}
	if len(c.Listeners) > maxEndpoints {
		return failed(kerr.InvalidRequest, "broker %d registers %d listeners (at most %d)", c.ID, len(c.Listeners), maxEndpoints)
	}
	for i, e := range c.Listeners {
		if e.Name == "" || len(e.Name) > 255 || e.Port < 0 || e.Port > 65535 || len(e.Host) > 1024 {
			return failed(kerr.InvalidRequest, "broker %d listener %q endpoint %q:%d", c.ID, e.Name, e.Host, e.Port)
		}
		for _, f := range c.Listeners[:i] {
			if f.Name == e.Name {
				return failed(kerr.InvalidRequest, "broker %d registers listener %q twice", c.ID, e.Name)
			}
		}
	}
	if old := s.brokers[c.ID]; old != nil {
		if old.IncarnationID == c.IncarnationID {
			old.LastHeartbeatMs = c.NowMs // a retried registration
			return Result{BrokerEpoch: old.Epoch, Fenced: old.Fenced}
		}
		if !old.Fenced {
			s.fence(old) // a new process: its predecessor's roles end now
		}
	}
	s.brokers[c.ID] = &Broker{
		ID: c.ID, IncarnationID: c.IncarnationID, Host: c.Host, Port: c.Port, Rack: c.Rack,
		Epoch: s.offset, Fenced: true, LastHeartbeatMs: c.NowMs, Listeners: slices.Clone(c.Listeners),
	}
	return Result{BrokerEpoch: s.offset, Fenced: true}
}

func (s *State) heartbeat(c BrokerHeartbeat) Result {
	b := s.brokers[c.ID]
	if b == nil {
		return failed(kerr.BrokerIDNotRegistered, "broker %d", c.ID)
	}
	if c.Epoch != b.Epoch {
		return failed(kerr.StaleBrokerEpoch, "broker %d epoch %d, registered with %d", c.ID, c.Epoch, b.Epoch)
	}
	b.LastHeartbeatMs = c.NowMs
	if c.OfflineDir && !b.OfflineDir {
		wasLive := b.Live()
		b.OfflineDir = true
		if wasLive {
			s.leaveRoles(b.ID) // its replicas are offline (KIP-112)
		}
	}
	r := Result{BrokerEpoch: b.Epoch}
	switch {
	case c.WantShutdown:
		if !b.Fenced && !b.ShuttingDown {
			b.ShuttingDown = true
			s.leaveRoles(b.ID)
		}
		r.ShouldShutdown = b.Fenced || !s.leadsAny(b.ID)
	case c.WantFence:
		if !b.Fenced {
			s.fence(b)
		}
	case b.Fenced && c.MetadataOffset >= b.Epoch:
		s.unfence(b)
	}
	r.Fenced = b.Fenced
	return r
}

func (s *State) fenceCmd(id int32) Result {
	b := s.brokers[id]
	if b == nil {
		return failed(kerr.BrokerIDNotRegistered, "broker %d", id)
	}
	if !b.Fenced {
		s.fence(b)
	}
	return Result{BrokerEpoch: b.Epoch, Fenced: true}
}

func (s *State) unfenceCmd(id int32) Result {
	b := s.brokers[id]
	if b == nil {
		return failed(kerr.BrokerIDNotRegistered, "broker %d", id)
	}
	if b.Fenced {
		s.unfence(b)
	}
	return Result{BrokerEpoch: b.Epoch}
}

func (s *State) tick(c Tick) Result {
	timeout := c.SessionTimeoutMs
	if timeout <= 0 {
		timeout = DefaultSessionTimeoutMs
	}
	var fenced []int32
	for _, id := range s.brokerIDs() {
		b := s.brokers[id]
		if c.ResetSessions {
			b.LastHeartbeatMs = c.NowMs
		}
		if !b.Fenced && c.NowMs-b.LastHeartbeatMs > timeout {
			s.fence(b)
			fenced = append(fenced, id)
		}
	}
	r := Result{}
	if len(fenced) > 0 {
		r.Message = "session expired: " + formatIDs(fenced)
	}
	return r
}

// fence marks b fenced, moves its leaderships and removes it from every ISR
// it is not the last member of (Kafka's handleBrokerFenced).
func (s *State) fence(b *Broker) {
	b.Fenced = true
	b.ShuttingDown = false
	s.leaveRoles(b.ID)
}

// unfence marks b unfenced and elects it where a partition is leaderless and
// it is an eligible replica (Kafka's handleBrokerUnfenced).
func (s *State) unfence(b *Broker) {
	b.Fenced = false
	b.ShuttingDown = false
	for _, name := range s.topicNames() {
		t := s.topics[name]
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader != NoLeader || !contains(p.Replicas, b.ID) {
				continue
			}
			leader, isr := s.electFor(t, p, p.ISR)
			s.update(p, leader, isr, p.Replicas, p.Adding, p.Removing)
		}
	}
}

// leaveRoles removes broker id (already not live) from the ISRs it is not
// the last member of and re-elects the partitions it led.
func (s *State) leaveRoles(id int32) {
	for _, name := range s.topicNames() {
		t := s.topics[name]
		for i := range t.Partitions {
			p := &t.Partitions[i]
			inISR := contains(p.ISR, id)
			if !inISR && p.Leader != id {
				continue
			}
			isr := p.ISR
			if inISR && len(isr) > 1 {
				isr = without(isr, id)
			}
			leader := p.Leader
			if leader == id || leader == NoLeader {
				leader, isr = s.electFor(t, p, isr)
			}
			s.update(p, leader, isr, p.Replicas, p.Adding, p.Removing)
		}
	}
}

func (s *State) leadsAny(id int32) bool {
	for _, t := range s.topics {
		for i := range t.Partitions {
			if t.Partitions[i].Leader == id {
				return true
			}
		}
	}
	return false
}

// electFor picks p's leader from isr: the first live replica in replica
// order that is in isr. With none and unclean election enabled for the
// topic, the first live replica becomes leader and sole ISR member.
func (s *State) electFor(t *Topic, p *Partition, isr []int32) (int32, []int32) {
	if l := s.firstLive(p.Replicas, isr); l != NoLeader {
		return l, isr
	}
	if t.Configs[UncleanLeaderElectionConfig] == "true" {
		if l := s.firstLive(p.Replicas, nil); l != NoLeader {
			return l, []int32{l}
		}
	}
	return NoLeader, isr
}

// firstLive returns the first live replica (in isr, when isr is not nil).
func (s *State) firstLive(replicas, isr []int32) int32 {
	for _, r := range replicas {
		if (isr == nil || contains(isr, r)) && s.live(r) {
			return r
		}
	}
	return NoLeader
}

// update sets p's fields, bumping LeaderEpoch on a leader change and
// PartitionEpoch on any change. It reports whether anything changed.
func (s *State) update(p *Partition, leader int32, isr, replicas, adding, removing []int32) bool {
	changed := false
	if leader != p.Leader {
		p.Leader = leader
		p.LeaderEpoch++
		changed = true
	}
	if !equalInt32s(isr, p.ISR) {
		p.ISR = cloneInt32s(isr)
		changed = true
	}
	if !equalInt32s(replicas, p.Replicas) || !equalInt32s(adding, p.Adding) || !equalInt32s(removing, p.Removing) {
		p.Replicas = cloneInt32s(replicas)
		p.Adding = nilIfEmpty(adding)
		p.Removing = nilIfEmpty(removing)
		changed = true
	}
	if changed {
		p.PartitionEpoch++
	}
	return changed
}

func nilIfEmpty(v []int32) []int32 {
	if len(v) == 0 {
		return nil
	}
	return cloneInt32s(v)
}

// ---- topics ----

func validTopicName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > MaxTopicNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validConfigs(m map[string]string) bool {
	if len(m) > MaxConfigsPerTopic {
		return false
	}
	for k, v := range m {
		if k == "" || len(k) > 255 || len(v) > MaxConfigValueLen {
			return false
		}
	}
	return true
}

// placementBrokers lists the live brokers, and the cluster load of each
// from every topic but skip.
func (s *State) placementBrokers(skip string) ([]PlacementBroker, map[int32]Load) {
	var bs []PlacementBroker
	for _, id := range s.brokerIDs() {
		if b := s.brokers[id]; b.Live() {
			bs = append(bs, PlacementBroker{ID: id, Rack: b.Rack})
		}
	}
	load := make(map[int32]Load, len(bs))
	for name, t := range s.topics {
		if name == skip {
			continue
		}
		for i := range t.Partitions {
			for j, r := range t.Partitions[i].Replicas {
				l := load[r]
				l.Replicas++
				if j == 0 {
					l.Leaders++
				}
				load[r] = l
			}
		}
	}
	return bs, load
}

// checkAssignment validates explicit replica lists: each non-empty, of
// size rf (when rf > 0), duplicate-free, of registered brokers, with at
// least one live broker.
func (s *State) checkAssignment(a [][]int32, rf int) (Result, bool) {
	for i, rs := range a {
		if len(rs) == 0 || (rf > 0 && len(rs) != rf) {
			return failed(kerr.InvalidReplicaAssignment, "partition %d: %d replicas, want %d", i, len(rs), rf), false
		}
		if hasDup(rs) {
			return failed(kerr.InvalidReplicaAssignment, "partition %d: duplicate replica in %v", i, rs), false
		}
		anyLive := false
		for _, r := range rs {
			if s.brokers[r] == nil {
				return failed(kerr.InvalidReplicaAssignment, "partition %d: broker %d is not registered", i, r), false
			}
			anyLive = anyLive || s.live(r)
		}
		if !anyLive {
			return failed(kerr.InvalidReplicaAssignment, "partition %d: every replica in %v is fenced or shutting down", i, rs), false
		}
	}
	return Result{}, true
}

// newPartition is a partition's first state: the live replicas form the
// ISR and the first of them leads.
func (s *State) newPartition(replicas []int32) Partition {
	var isr []int32
	for _, r := range replicas {
		if s.live(r) {
			isr = append(isr, r)
		}
	}
	return Partition{Replicas: cloneInt32s(replicas), ISR: isr, Leader: isr[0]}
}

func (s *State) createTopic(c CreateTopic) Result {
	if !validTopicName(c.Name) {
		return failed(kerr.InvalidTopicException, "topic name %q", c.Name)
	}
	if s.topics[c.Name] != nil {
		return failed(kerr.TopicAlreadyExists, "topic %q", c.Name)
	}
	collide := strings.ReplaceAll(c.Name, ".", "_")
	for name := range s.topics {
		if strings.ReplaceAll(name, ".", "_") == collide {
			return failed(kerr.InvalidTopicException, "topic %q collides with existing %q", c.Name, name)
		}
	}
	if c.ID.IsZero() || s.byID[c.ID] != nil {
		return failed(kerr.InvalidRequest, "topic id %s is zero or in use", c.ID)
	}
	if !validConfigs(c.Configs) {
		return failed(kerr.InvalidConfig, "topic configs")
	}
	var assignment [][]int32
	if c.Assignment != nil {
		n := len(c.Assignment)
		if n == 0 || n > MaxPartitionsPerTopic {
			return failed(kerr.InvalidPartitions, "%d partitions", n)
		}
		if c.Partitions > 0 && int(c.Partitions) != n {
			return failed(kerr.InvalidRequest, "%d partitions with an assignment of %d", c.Partitions, n)
		}
		rf := len(c.Assignment[0])
		if c.ReplicationFactor > 0 && int(c.ReplicationFactor) != rf {
			return failed(kerr.InvalidRequest, "replication factor %d with an assignment of %d", c.ReplicationFactor, rf)
		}
		if r, ok := s.checkAssignment(c.Assignment, rf); !ok {
			return r
		}
		assignment = c.Assignment
	} else {
		if c.Partitions < 1 || c.Partitions > MaxPartitionsPerTopic {
			return failed(kerr.InvalidPartitions, "%d partitions", c.Partitions)
		}
		bs, load := s.placementBrokers("")
		if c.ReplicationFactor < 1 || int(c.ReplicationFactor) > len(bs) {
			return failed(kerr.InvalidReplicationFactor, "replication factor %d with %d live brokers", c.ReplicationFactor, len(bs))
		}
		var err error
		assignment, err = Place(bs, int(c.Partitions), int(c.ReplicationFactor), nil, load)
		if err != nil {
			return failed(kerr.InvalidReplicationFactor, "%v", err)
		}
	}
	t := &Topic{Name: c.Name, ID: c.ID, Configs: make(map[string]string, len(c.Configs))}
	for k, v := range c.Configs {
		t.Configs[k] = v
	}
	t.Partitions = make([]Partition, len(assignment))
	r := Result{TopicID: c.ID, Partitions: make([]PartitionResult, len(assignment))}
	for i, rs := range assignment {
		t.Partitions[i] = s.newPartition(rs)
		r.Partitions[i] = partResult(c.Name, int32(i), &t.Partitions[i])
	}
	s.topics[c.Name] = t
	s.byID[c.ID] = t
	return r
}

func (s *State) deleteTopic(c DeleteTopic) Result {
	t := s.topics[c.Name]
	if c.Name == "" {
		t = s.byID[c.ID]
		if t == nil {
			return failed(kerr.UnknownTopicID, "topic id %s", c.ID)
		}
	} else if t == nil || (!c.ID.IsZero() && c.ID != t.ID) {
		return failed(kerr.UnknownTopicOrPartition, "topic %q", c.Name)
	}
	delete(s.topics, t.Name)
	delete(s.byID, t.ID)
	return Result{TopicID: t.ID}
}

func (s *State) createPartitions(c CreatePartitions) Result {
	t := s.topics[c.Topic]
	if t == nil {
		return failed(kerr.UnknownTopicOrPartition, "topic %q", c.Topic)
	}
	cur := len(t.Partitions)
	if int(c.Count) <= cur || c.Count > MaxPartitionsPerTopic {
		return failed(kerr.InvalidPartitions, "topic %q has %d partitions, asked for %d", c.Topic, cur, c.Count)
	}
	add := int(c.Count) - cur
	p0 := &t.Partitions[0]
	rf := len(p0.Replicas) - len(p0.Removing)
	var assignment [][]int32
	if c.Assignment != nil {
		if len(c.Assignment) != add {
			return failed(kerr.InvalidReplicaAssignment, "%d replica lists for %d new partitions", len(c.Assignment), add)
		}
		if r, ok := s.checkAssignment(c.Assignment, rf); !ok {
			return r
		}
		assignment = c.Assignment
	} else {
		bs, load := s.placementBrokers(c.Topic)
		if rf > len(bs) {
			return failed(kerr.InvalidReplicationFactor, "replication factor %d with %d live brokers", rf, len(bs))
		}
		existing := make([][]int32, cur)
		for i := range t.Partitions {
			existing[i] = t.Partitions[i].Replicas
		}
		var err error
		assignment, err = Place(bs, add, rf, existing, load)
		if err != nil {
			return failed(kerr.InvalidReplicationFactor, "%v", err)
		}
	}
	r := Result{TopicID: t.ID}
	for i, rs := range assignment {
		t.Partitions = append(t.Partitions, s.newPartition(rs))
		idx := cur + i
		r.Partitions = append(r.Partitions, partResult(t.Name, int32(idx), &t.Partitions[idx]))
	}
	return r
}

func (s *State) alterConfigs(c AlterConfigs) Result {
	t := s.topics[c.Topic]
	if t == nil {
		return failed(kerr.UnknownTopicOrPartition, "topic %q", c.Topic)
	}
	if !validConfigs(c.Set) {
		return failed(kerr.InvalidConfig, "configs")
	}
	for _, k := range c.Delete {
		if _, both := c.Set[k]; both || k == "" {
			return failed(kerr.InvalidRequest, "config %q both set and deleted, or empty", k)
		}
	}
	next := make(map[string]string, len(t.Configs)+len(c.Set))
	if !c.Replace {
		for k, v := range t.Configs {
			next[k] = v
		}
	}
	for k, v := range c.Set {
		next[k] = v
	}
	for _, k := range c.Delete {
		delete(next, k)
	}
	if len(next) > MaxConfigsPerTopic {
		return failed(kerr.InvalidConfig, "%d configs", len(next))
	}
	t.Configs = next
	return Result{TopicID: t.ID}
}

// ---- partitions ----

func (s *State) alterPartition(c AlterPartition) Result {
	b := s.brokers[c.BrokerID]
	if b == nil || b.Epoch != c.BrokerEpoch {
		return failed(kerr.StaleBrokerEpoch, "broker %d epoch %d", c.BrokerID, c.BrokerEpoch)
	}
	r := Result{Partitions: make([]PartitionResult, 0, len(c.Partitions))}
	for _, it := range c.Partitions {
		r.Partitions = append(r.Partitions, s.alterOne(c.BrokerID, it))
	}
	return r
}

// alterOne validates in the order of Kafka's
// ReplicationControlManager.validateAlterPartitionData.
func (s *State) alterOne(broker int32, it AlterPartitionItem) PartitionResult {
	t := s.topics[it.Topic]
	if t == nil || it.Partition < 0 || int(it.Partition) >= len(t.Partitions) {
		return partFailed(it.Topic, it.Partition, kerr.UnknownTopicOrPartition, "unknown partition")
	}
	p := &t.Partitions[it.Partition]
	switch {
	case it.LeaderEpoch > p.LeaderEpoch || it.PartitionEpoch > p.PartitionEpoch:
		return partFailed(it.Topic, it.Partition, kerr.NotController, "epochs %d/%d ahead of the controller's %d/%d",
			it.LeaderEpoch, it.PartitionEpoch, p.LeaderEpoch, p.PartitionEpoch)
	case it.LeaderEpoch < p.LeaderEpoch:
		return partFailed(it.Topic, it.Partition, kerr.FencedLeaderEpoch, "leader epoch %d, current %d", it.LeaderEpoch, p.LeaderEpoch)
	case broker != p.Leader:
		return partFailed(it.Topic, it.Partition, kerr.InvalidRequest, "broker %d is not the leader (%d)", broker, p.Leader)
	case it.PartitionEpoch < p.PartitionEpoch:
		return partFailed(it.Topic, it.Partition, kerr.InvalidUpdateVersion, "partition epoch %d, current %d", it.PartitionEpoch, p.PartitionEpoch)
	}
	ids := make([]int32, len(it.ISR))
	for i, m := range it.ISR {
		ids[i] = m.ID
	}
	if len(ids) == 0 || hasDup(ids) || !subset(ids, p.Replicas) || !contains(ids, p.Leader) {
		return partFailed(it.Topic, it.Partition, kerr.InvalidRequest, "isr %v (replicas %v, leader %d)", ids, p.Replicas, p.Leader)
	}
	for _, m := range it.ISR {
		b := s.brokers[m.ID]
		if b == nil || !b.Live() || (m.Epoch != -1 && m.Epoch != b.Epoch) {
			return partFailed(it.Topic, it.Partition, kerr.IneligibleReplica, "replica %d is not registered, fenced, shutting down or of another epoch", m.ID)
		}
	}
	isr := make([]int32, 0, len(ids)) // canonical: replica order
	for _, r := range p.Replicas {
		if contains(ids, r) {
			isr = append(isr, r)
		}
	}
	s.update(p, p.Leader, isr, p.Replicas, p.Adding, p.Removing)
	res := partResult(it.Topic, it.Partition, p)
	if s.completeReassignment(t, p) {
		res = partResult(it.Topic, it.Partition, p)
		if p.Leader != broker {
			res.Code = kerr.NewLeaderElected.Code
			res.Message = "the ISR change completed a reassignment that moved the leader"
		}
	}
	return res
}

// completeReassignment finishes p's reassignment once every target replica
// is in the ISR: the removed replicas leave, and a leader that is no longer
// a replica hands over. It reports whether it did.
func (s *State) completeReassignment(t *Topic, p *Partition) bool {
	if !p.Reassigning() {
		return false
	}
	target := without(p.Replicas, p.Removing...)
	if !subset(target, p.ISR) {
		return false
	}
	isr := make([]int32, 0, len(target))
	for _, r := range target {
		if contains(p.ISR, r) {
			isr = append(isr, r)
		}
	}
	leader := p.Leader
	if !contains(target, leader) || !s.live(leader) {
		next := *p
		next.Replicas = target
		leader, isr = s.electFor(t, &next, isr)
	}
	s.update(p, leader, isr, target, nil, nil)
	return true
}

func (s *State) lookup(topic string, idx int32) (*Topic, *Partition) {
	t := s.topics[topic]
	if t == nil || idx < 0 || int(idx) >= len(t.Partitions) {
		return nil, nil
	}
	return t, &t.Partitions[idx]
}

func (s *State) electLeaders(c ElectLeaders) Result {
	if c.Election != ElectPreferred && c.Election != ElectUnclean {
		return failed(kerr.InvalidRequest, "election type %d", c.Election)
	}
	all := c.Partitions == nil
	targets := c.Partitions
	if all {
		for _, name := range s.topicNames() {
			for i := range s.topics[name].Partitions {
				targets = append(targets, TopicPartition{Topic: name, Partition: int32(i)})
			}
		}
	}
	r := Result{}
	for _, tp := range targets {
		pr := s.electOne(c.Election, tp)
		if all && pr.Code != 0 {
			continue
		}
		r.Partitions = append(r.Partitions, pr)
	}
	return r
}

func (s *State) electOne(typ ElectionType, tp TopicPartition) PartitionResult {
	t, p := s.lookup(tp.Topic, tp.Partition)
	if p == nil {
		return partFailed(tp.Topic, tp.Partition, kerr.UnknownTopicOrPartition, "unknown partition")
	}
	switch typ {
	case ElectPreferred:
		pref := p.Replicas[0]
		if p.Leader == pref {
			return partFailed(tp.Topic, tp.Partition, kerr.ElectionNotNeeded, "preferred replica %d leads", pref)
		}
		if !contains(p.ISR, pref) || !s.live(pref) {
			return partFailed(tp.Topic, tp.Partition, kerr.PreferredLeaderNotAvailable, "preferred replica %d is not live and in sync", pref)
		}
		s.update(p, pref, p.ISR, p.Replicas, p.Adding, p.Removing)
	default:
		if p.Leader != NoLeader {
			return partFailed(tp.Topic, tp.Partition, kerr.ElectionNotNeeded, "replica %d leads", p.Leader)
		}
		leader, isr := s.electFor(t, p, p.ISR)
		if leader == NoLeader {
			if leader = s.firstLive(p.Replicas, nil); leader == NoLeader {
				return partFailed(tp.Topic, tp.Partition, kerr.EligibleLeadersNotAvailable, "no live replica in %v", p.Replicas)
			}
			isr = []int32{leader}
		}
		s.update(p, leader, isr, p.Replicas, p.Adding, p.Removing)
	}
	return partResult(tp.Topic, tp.Partition, p)
}

func (s *State) reassign(c ReassignPartitions) Result {
	r := Result{Partitions: make([]PartitionResult, 0, len(c.Items))}
	for _, it := range c.Items {
		r.Partitions = append(r.Partitions, s.reassignOne(it))
	}
	return r
}

func (s *State) reassignOne(it Reassignment) PartitionResult {
	t, p := s.lookup(it.Topic, it.Partition)
	if p == nil {
		return partFailed(it.Topic, it.Partition, kerr.UnknownTopicOrPartition, "unknown partition")
	}
	orig := without(p.Replicas, p.Adding...)
	target := it.Replicas
	if target == nil {
		if !p.Reassigning() {
			return partFailed(it.Topic, it.Partition, kerr.NoReassignmentInProgress, "no reassignment in progress")
		}
		target = orig
	} else {
		if len(target) == 0 || hasDup(target) {
			return partFailed(it.Topic, it.Partition, kerr.InvalidReplicaAssignment, "replicas %v", target)
		}
		for _, b := range target {
			if s.brokers[b] == nil {
				return partFailed(it.Topic, it.Partition, kerr.InvalidReplicaAssignment, "broker %d is not registered", b)
			}
		}
	}
	merged := append(cloneInt32s(target), without(orig, target...)...)
	adding := without(target, orig...)
	removing := without(orig, target...)
	isr := make([]int32, 0, len(p.ISR))
	for _, r := range merged {
		if contains(p.ISR, r) {
			isr = append(isr, r)
		}
	}
	if len(isr) == 0 {
		return partFailed(it.Topic, it.Partition, kerr.InvalidReplicaAssignment, "no in-sync replica would remain")
	}
	leader := p.Leader
	if leader != NoLeader && !contains(isr, leader) {
		next := *p
		next.Replicas = merged
		leader, isr = s.electFor(t, &next, isr)
	}
	s.update(p, leader, isr, merged, adding, removing)
	s.completeReassignment(t, p)
	return partResult(it.Topic, it.Partition, p)
}

func formatIDs(ids []int32) string {
	var sb strings.Builder
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatInt(int64(id), 10))
	}
	return sb.String()
}
