package controller

import (
	"fmt"
)

// CommandVersion is the first byte of every encoded command. A decoder
// refuses other versions; a new layout gets a new version and the old one
// stays decodable for as long as logs written with it may exist.
const CommandVersion byte = 1

// CommandType is the second byte of an encoded command. The values are
// persisted in the Raft log: never renumber them.
type CommandType uint8

const (
	TypeRegisterBroker     CommandType = 1
	TypeBrokerHeartbeat    CommandType = 2
	TypeFenceBroker        CommandType = 3
	TypeUnfenceBroker      CommandType = 4
	TypeCreateTopic        CommandType = 5
	TypeDeleteTopic        CommandType = 6
	TypeCreatePartitions   CommandType = 7
	TypeAlterConfigs       CommandType = 8
	TypeAlterPartition     CommandType = 9
	TypeElectLeaders       CommandType = 10
	TypeReassignPartitions CommandType = 11
	TypeTick               CommandType = 12
	// TypeAllocateProducerIDs: producerids.go.
	TypeAllocateProducerIDs CommandType = 13
	// TypeRegisterBrokerListeners is a RegisterBroker that names its
	// listeners (RegisterBroker.Listeners); one without any keeps type 1,
	// so logs written before listeners were registered decode as before.
	TypeRegisterBrokerListeners CommandType = 32
)

func (t CommandType) String() string {
	switch t {
	case TypeRegisterBroker:
		return "RegisterBroker"
	case TypeBrokerHeartbeat:
		return "BrokerHeartbeat"
	case TypeFenceBroker:
		return "FenceBroker"
	case TypeUnfenceBroker:
		return "UnfenceBroker"
	case TypeCreateTopic:
		return "CreateTopic"
	case TypeDeleteTopic:
		return "DeleteTopic"
	case TypeCreatePartitions:
		return "CreatePartitions"
	case TypeAlterConfigs:
		return "AlterConfigs"
	case TypeAlterPartition:
		return "AlterPartition"
	case TypeElectLeaders:
		return "ElectLeaders"
	case TypeReassignPartitions:
		return "ReassignPartitions"
	case TypeTick:
		return "Tick"
	case TypeAllocateProducerIDs:
		return "AllocateProducerIDs"
	case TypeRegisterBrokerListeners:
		return "RegisterBrokerListeners"
	case TypeCreateACLs:
		return "CreateACLs"
	case TypeDeleteACLs:
		return "DeleteACLs"
	case TypeAlterScram:
		return "AlterScram"
	case TypeAlterClientQuotas:
		return "AlterClientQuotas"
	case TypeSeedSecurity:
		return "SeedSecurity"
	case TypeAlterBrokerConfigs:
		return "AlterBrokerConfigs"
	}
	return fmt.Sprintf("CommandType(%d)", uint8(t))
}

// Command is one change to the State, as written to the Raft log. The
// implementations are the exported structs of this file (used as values,
// not pointers).
type Command interface {
	Type() CommandType
	appendBody(b []byte) []byte
}

// AppendCommand appends c's encoding to dst: version, type, body.
func AppendCommand(dst []byte, c Command) []byte {
	dst = append(dst, CommandVersion, byte(c.Type()))
	return c.appendBody(dst)
}

// EncodeCommand returns c's encoding.
func EncodeCommand(c Command) []byte { return AppendCommand(nil, c) }

// DecodeCommand parses an encoded command. It never panics and allocates
// no more than the input's length justifies; any malformed input, including
// trailing bytes, yields an error wrapping ErrCorrupt.
func DecodeCommand(b []byte) (Command, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: command of %d bytes", ErrCorrupt, len(b))
	}
	if b[0] != CommandVersion {
		return nil, fmt.Errorf("%w: command version %d", ErrCorrupt, b[0])
	}
	r := &reader{b: b[2:]}
	var c Command
	switch CommandType(b[1]) {
	case TypeRegisterBroker, TypeRegisterBrokerListeners:
		rb := RegisterBroker{ID: r.int32(), IncarnationID: r.uuid(), Host: r.string(), Port: r.int32(), Rack: r.string(), NowMs: r.int64()}
		if CommandType(b[1]) == TypeRegisterBrokerListeners {
			rb.Listeners = readEndpoints(r)
			if r.err == nil && len(rb.Listeners) == 0 {
				r.fail("listeners command without listeners")
			}
		}
		c = rb
	case TypeBrokerHeartbeat:
		c = readBrokerHeartbeat(r)
	case TypeFenceBroker:
		c = FenceBroker{ID: r.int32()}
	case TypeUnfenceBroker:
		c = UnfenceBroker{ID: r.int32()}
	case TypeCreateTopic:
		c = CreateTopic{Name: r.string(), ID: r.uuid(), Partitions: r.int32(), ReplicationFactor: r.int16(), Assignment: readAssignment(r), Configs: r.stringMap()}
	case TypeDeleteTopic:
		c = DeleteTopic{Name: r.string(), ID: r.uuid()}
	case TypeCreatePartitions:
		c = CreatePartitions{Topic: r.string(), Count: r.int32(), Assignment: readAssignment(r)}
	case TypeAlterConfigs:
		c = readAlterConfigs(r)
	case TypeAlterPartition:
		c = readAlterPartition(r)
	case TypeElectLeaders:
		c = readElectLeaders(r)
	case TypeReassignPartitions:
		c = readReassign(r)
	case TypeTick:
		c = Tick{NowMs: r.int64(), SessionTimeoutMs: r.int64(), ResetSessions: r.bool()}
	case TypeAllocateProducerIDs:
		c = AllocateProducerIDs{BrokerID: r.int32(), BrokerEpoch: r.int64()}
	default:
		var ok bool
		if c, ok = decodeSecurityCommand(CommandType(b[1]), r); !ok {
			c, ok = decodeBrokerConfigsCommand(CommandType(b[1]), r) // brokerconfigs.go
		}
		if !ok {
			return nil, fmt.Errorf("%w: command type %d", ErrCorrupt, b[1])
		}
	}
	if err := r.done(); err != nil {
		return nil, fmt.Errorf("%v: %w", CommandType(b[1]), err)
	}
	return c, nil
}

// RegisterBroker registers broker ID, or registers it again after a restart.
// A registration with the IncarnationID of the current one is a retry and
// changes nothing. A new incarnation replaces the old registration: the
// broker is fenced (moving its leaderships away and leaving ISRs as fencing
// does) and gets a new Epoch. A new registration starts fenced; the broker
// is unfenced by a heartbeat once it has caught up with the metadata (see
// BrokerHeartbeat). Result: BrokerEpoch.
type RegisterBroker struct {
	ID            int32
	IncarnationID [16]byte
	Host          string // the inter-broker listener's advertised endpoint
	Port          int32
	Rack          string
	NowMs         int64 // stamped by the proposing controller when zero
	// Listeners are every listener's advertised endpoint, the inter-broker
	// one included (Kafka's BrokerRegistrationRequest.Listeners); nil for a
	// broker that registers one endpoint (Host, Port) for every client.
	Listeners []Endpoint
}

// Endpoint is one listener's advertised address.
type Endpoint struct {
	Name string // the listener's name: PLAINTEXT, INTERNAL, ...
	Host string
	Port int32
}

// maxEndpoints bounds a registration's listeners.
const maxEndpoints = 16

// BrokerHeartbeat renews broker ID's session. Epoch must be the broker's
// current registration epoch (else STALE_BROKER_EPOCH). A fenced broker is
// unfenced when WantFence is false and MetadataOffset (the offset its
// metadata has reached) is at least its registration epoch. WantFence fences
// an unfenced broker. WantShutdown starts a controlled shutdown: the broker
// leaves every ISR it is not the last member of and loses its leaderships;
// Result.ShouldShutdown tells it when it leads nothing any more.
// OfflineDir reports that the broker's data directory is offline (an I/O
// error on data: Kafka's BrokerHeartbeat OfflineLogDirs, KIP-112; a Strata
// broker has one directory). It is sticky for the registration: the
// broker's replicas are offline from then on, so it loses its leaderships
// and leaves every ISR it is not the last member of, and it is not elected
// or let back into an ISR until it registers again (a restart with a
// healthy directory). The broker stays registered and unfenced.
// Result: BrokerEpoch, Fenced, ShouldShutdown.
type BrokerHeartbeat struct {
	ID             int32
	Epoch          int64
	NowMs          int64 // stamped by the proposing controller when zero
	MetadataOffset int64
	WantFence      bool
	WantShutdown   bool
	OfflineDir     bool // encoded only when true (a trailing byte 1), so older heartbeats decode unchanged
}

// FenceBroker fences broker ID (an operator action; session expiry fences
// through Tick).
type FenceBroker struct{ ID int32 }

// UnfenceBroker unfences broker ID without the catch-up check of a heartbeat.
type UnfenceBroker struct{ ID int32 }

// CreateTopic creates a topic. Assignment, when not nil, gives each
// partition's replicas (preference order) and then Partitions and
// ReplicationFactor must be 0 or agree with it; otherwise the replicas are
// placed (see Place) over the live brokers. ID must be a fresh non-zero id
// chosen by the proposer (the FSM cannot draw random numbers).
// Result: TopicID, Partitions (one per partition).
type CreateTopic struct {
	Name              string
	ID                TopicID
	Partitions        int32
	ReplicationFactor int16
	Assignment        [][]int32
	Configs           map[string]string
}

// DeleteTopic deletes the topic named Name, or with id ID when Name is "".
type DeleteTopic struct {
	Name string
	ID   TopicID
}

// CreatePartitions grows Topic to Count partitions. Assignment, when not
// nil, gives the replicas of each new partition; otherwise they are placed
// with the replication factor of partition 0.
type CreatePartitions struct {
	Topic      string
	Count      int32
	Assignment [][]int32
}

// AlterConfigs changes a topic's configuration: with Replace the topic's
// configs become Set (Kafka's AlterConfigs); otherwise the keys of Set are
// set and those of Delete removed (IncrementalAlterConfigs). Key names and
// values are validated by the caller, which knows the config schema.
type AlterConfigs struct {
	Topic   string
	Replace bool
	Set     map[string]string
	Delete  []string
}

// AlterPartition is an ISR change proposed by the partitions' leader
// (Kafka's AlterPartition): each item carries the leader and partition
// epochs the leader knows and the ISR it wants.
// Result: Partitions (code and new state per item).
type AlterPartition struct {
	BrokerID    int32
	BrokerEpoch int64
	Partitions  []AlterPartitionItem
}

// AlterPartitionItem is one partition of an AlterPartition.
type AlterPartitionItem struct {
	Topic          string
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []ISRMember
}

// ISRMember names a replica in a proposed ISR with the broker epoch the
// leader saw it with; Epoch -1 skips the epoch check.
type ISRMember struct {
	ID    int32
	Epoch int64
}

// ElectionType is Kafka's ElectLeaders election type.
type ElectionType int8

const (
	// ElectPreferred makes the first replica the leader if it is live and
	// in the ISR.
	ElectPreferred ElectionType = 0
	// ElectUnclean elects a leader for leaderless partitions, from the ISR
	// if possible and otherwise from any live replica (possible data loss).
	ElectUnclean ElectionType = 1
)

// ElectLeaders runs elections for Partitions (nil: every partition).
// Result: Partitions (code per partition; for nil, only those that changed).
type ElectLeaders struct {
	Election   ElectionType
	Partitions []TopicPartition
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ReassignPartitions starts (or replaces, or with Replicas nil cancels)
// replica reassignments. Result: Partitions (code per item).
type ReassignPartitions struct {
	Items []Reassignment
}

// Reassignment is one partition's target replica list; nil cancels.
type Reassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// Tick carries the controller leader's clock into the FSM: brokers whose
// last heartbeat is more than SessionTimeoutMs (0: DefaultSessionTimeoutMs)
// before NowMs are fenced. ResetSessions first restarts every session at
// NowMs; a newly elected controller leader proposes it so that brokers are
// not fenced for heartbeats they could not deliver during the election.
type Tick struct {
	NowMs            int64
	SessionTimeoutMs int64
	ResetSessions    bool
}

// DefaultSessionTimeoutMs is Kafka's broker.session.timeout.ms default.
const DefaultSessionTimeoutMs = 9000

func (c RegisterBroker) Type() CommandType {
	if len(c.Listeners) > 0 {
		return TypeRegisterBrokerListeners
	}
	return TypeRegisterBroker
}
func (BrokerHeartbeat) Type() CommandType    { return TypeBrokerHeartbeat }
func (FenceBroker) Type() CommandType        { return TypeFenceBroker }
func (UnfenceBroker) Type() CommandType      { return TypeUnfenceBroker }
func (CreateTopic) Type() CommandType        { return TypeCreateTopic }
func (DeleteTopic) Type() CommandType        { return TypeDeleteTopic }
func (CreatePartitions) Type() CommandType   { return TypeCreatePartitions }
func (AlterConfigs) Type() CommandType       { return TypeAlterConfigs }
func (AlterPartition) Type() CommandType     { return TypeAlterPartition }
func (ElectLeaders) Type() CommandType       { return TypeElectLeaders }
func (ReassignPartitions) Type() CommandType { return TypeReassignPartitions }
func (Tick) Type() CommandType               { return TypeTick }

func (c RegisterBroker) appendBody(b []byte) []byte {
	b = appendInt(b, int64(c.ID))
	b = append(b, c.IncarnationID[:]...)
	b = appendString(b, c.Host)
	b = appendInt(b, int64(c.Port))
	b = appendString(b, c.Rack)
	b = appendInt(b, c.NowMs)
	if len(c.Listeners) > 0 {
		b = appendEndpoints(b, c.Listeners)
	}
	return b
}

func appendEndpoints(b []byte, eps []Endpoint) []byte {
	b = appendCount(b, len(eps))
	for _, e := range eps {
		b = appendString(b, e.Name)
		b = appendString(b, e.Host)
		b = appendInt(b, int64(e.Port))
	}
	return b
}

// readEndpoints reads what appendEndpoints wrote (nil for none).
func readEndpoints(r *reader) []Endpoint {
	n := r.count(3)
	if n == 0 || r.err != nil {
		return nil
	}
	eps := make([]Endpoint, n)
	for i := range eps {
		eps[i] = Endpoint{Name: r.string(), Host: r.string(), Port: r.int32()}
	}
	return eps
}

func (c BrokerHeartbeat) appendBody(b []byte) []byte {
	b = appendInt(b, int64(c.ID))
	b = appendInt(b, c.Epoch)
	b = appendInt(b, c.NowMs)
	b = appendInt(b, c.MetadataOffset)
	b = appendBool(b, c.WantFence)
	b = appendBool(b, c.WantShutdown)
	if c.OfflineDir {
		b = appendBool(b, true)
	}
	return b
}

// readBrokerHeartbeat decodes a heartbeat: the original six fields, then
// an optional byte 1 for OfflineDir (absent = false; a written false is not
// canonical and refused).
func readBrokerHeartbeat(r *reader) BrokerHeartbeat {
	c := BrokerHeartbeat{ID: r.int32(), Epoch: r.int64(), NowMs: r.int64(), MetadataOffset: r.int64(), WantFence: r.bool(), WantShutdown: r.bool()}
	if r.err == nil && len(r.b) > 0 {
		if c.OfflineDir = r.bool(); r.err == nil && !c.OfflineDir {
			r.fail("heartbeat offline-dir flag written as false")
		}
	}
	return c
}

func (c FenceBroker) appendBody(b []byte) []byte   { return appendInt(b, int64(c.ID)) }
func (c UnfenceBroker) appendBody(b []byte) []byte { return appendInt(b, int64(c.ID)) }

func appendAssignment(b []byte, a [][]int32) []byte {
	if a == nil {
		return appendInt(b, -1)
	}
	b = appendInt(b, int64(len(a)))
	for _, rs := range a {
		b = appendInt32s(b, rs)
	}
	return b
}

func readAssignment(r *reader) [][]int32 {
	n, isNil := r.nullableCount(1)
	if r.err != nil || isNil {
		return nil
	}
	a := make([][]int32, n)
	for i := range a {
		a[i] = r.int32s()
	}
	return a
}

func (c CreateTopic) appendBody(b []byte) []byte {
	b = appendString(b, c.Name)
	b = append(b, c.ID[:]...)
	b = appendInt(b, int64(c.Partitions))
	b = appendInt(b, int64(c.ReplicationFactor))
	b = appendAssignment(b, c.Assignment)
	return appendStringMap(b, c.Configs)
}

func (c DeleteTopic) appendBody(b []byte) []byte {
	b = appendString(b, c.Name)
	return append(b, c.ID[:]...)
}

func (c CreatePartitions) appendBody(b []byte) []byte {
	b = appendString(b, c.Topic)
	b = appendInt(b, int64(c.Count))
	return appendAssignment(b, c.Assignment)
}

func (c AlterConfigs) appendBody(b []byte) []byte {
	b = appendString(b, c.Topic)
	b = appendBool(b, c.Replace)
	b = appendStringMap(b, c.Set)
	return appendStrings(b, c.Delete)
}

func readAlterConfigs(r *reader) AlterConfigs {
	return AlterConfigs{Topic: r.string(), Replace: r.bool(), Set: r.stringMap(), Delete: r.strings()}
}

func (c AlterPartition) appendBody(b []byte) []byte {
	b = appendInt(b, int64(c.BrokerID))
	b = appendInt(b, c.BrokerEpoch)
	b = appendCount(b, len(c.Partitions))
	for _, it := range c.Partitions {
		b = appendString(b, it.Topic)
		b = appendInt(b, int64(it.Partition))
		b = appendInt(b, int64(it.LeaderEpoch))
		b = appendInt(b, int64(it.PartitionEpoch))
		b = appendCount(b, len(it.ISR))
		for _, m := range it.ISR {
			b = appendInt(b, int64(m.ID))
			b = appendInt(b, m.Epoch)
		}
	}
	return b
}

func readAlterPartition(r *reader) AlterPartition {
	c := AlterPartition{BrokerID: r.int32(), BrokerEpoch: r.int64()}
	n := r.count(5)
	if r.err != nil {
		return c
	}
	c.Partitions = make([]AlterPartitionItem, n)
	for i := range c.Partitions {
		it := AlterPartitionItem{Topic: r.string(), Partition: r.int32(), LeaderEpoch: r.int32(), PartitionEpoch: r.int32()}
		m := r.count(2)
		if r.err != nil {
			return c
		}
		it.ISR = make([]ISRMember, m)
		for j := range it.ISR {
			it.ISR[j] = ISRMember{ID: r.int32(), Epoch: r.int64()}
		}
		c.Partitions[i] = it
	}
	return c
}

func (c ElectLeaders) appendBody(b []byte) []byte {
	b = append(b, byte(c.Election))
	if c.Partitions == nil {
		return appendInt(b, -1)
	}
	b = appendInt(b, int64(len(c.Partitions)))
	for _, tp := range c.Partitions {
		b = appendString(b, tp.Topic)
		b = appendInt(b, int64(tp.Partition))
	}
	return b
}

func readElectLeaders(r *reader) ElectLeaders {
	c := ElectLeaders{Election: ElectionType(r.u8())}
	n, isNil := r.nullableCount(2)
	if r.err != nil || isNil {
		return c
	}
	c.Partitions = make([]TopicPartition, n)
	for i := range c.Partitions {
		c.Partitions[i] = TopicPartition{Topic: r.string(), Partition: r.int32()}
	}
	return c
}

func (c ReassignPartitions) appendBody(b []byte) []byte {
	b = appendCount(b, len(c.Items))
	for _, it := range c.Items {
		b = appendString(b, it.Topic)
		b = appendInt(b, int64(it.Partition))
		b = appendNullableInt32s(b, it.Replicas)
	}
	return b
}

func readReassign(r *reader) ReassignPartitions {
	var c ReassignPartitions
	n := r.count(3)
	if r.err != nil {
		return c
	}
	c.Items = make([]Reassignment, n)
	for i := range c.Items {
		c.Items[i] = Reassignment{Topic: r.string(), Partition: r.int32(), Replicas: r.nullableInt32s()}
	}
	return c
}

func (c Tick) appendBody(b []byte) []byte {
	b = appendInt(b, c.NowMs)
	b = appendInt(b, c.SessionTimeoutMs)
	return appendBool(b, c.ResetSessions)
}
