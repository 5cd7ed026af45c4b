package group

import (
	"errors"
	"fmt"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetsTopic is the compacted internal topic that stores committed offsets
// and group metadata.
const OffsetsTopic = "__consumer_offsets"

// DefaultOffsetsPartitions is offsets.topic.num.partitions' default.
const DefaultOffsetsPartitions = 50

// Key versions of __consumer_offsets records (Kafka's schemas).
const (
	offsetCommitKeyV0    = 0
	offsetCommitKeyV1    = 1
	groupMetadataKeyV2   = 2
	offsetCommitValueV3  = 3
	groupMetadataValueV3 = 3
)

// ErrBadRecord is returned for a __consumer_offsets record that does not
// decode.
var ErrBadRecord = errors.New("group: bad __consumer_offsets record")

// PartitionFor returns the __consumer_offsets partition that owns group:
// Kafka's Utils.abs(groupId.hashCode()) % partitions, where hashCode is
// Java's String.hashCode over UTF-16 code units, so a group lands on the
// same partition as it would in Kafka.
func PartitionFor(group string, partitions int32) int32 {
	if partitions <= 0 {
		return 0
	}
	var h int32
	ascii := true
	for i := 0; i < len(group); i++ {
		if group[i] >= 0x80 {
			ascii = false
			break
		}
		h = 31*h + int32(group[i])
	}
	if !ascii {
		h = 0
		for _, u := range utf16.Encode([]rune(group)) {
			h = 31*h + int32(u)
		}
	}
	return (h & 0x7fffffff) % partitions
}

// OffsetCommitKey encodes the key of an offset commit record (key v1:
// int16 version | string group | string topic | int32 partition).
func OffsetCommitKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetCommitKeyV1, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(make([]byte, 0, 2+2+len(group)+2+len(topic)+4))
}

// OffsetCommitValue encodes an offset commit value (v3: int16 version |
// int64 offset | int32 leader epoch | string metadata | int64 commit
// timestamp).
func OffsetCommitValue(o Offset) []byte {
	v := kmsg.OffsetCommitValue{Version: offsetCommitValueV3, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch,
		Metadata: o.Metadata, CommitTimestamp: o.CommitTimestampMs}
	return v.AppendTo(make([]byte, 0, 2+8+4+2+len(o.Metadata)+8))
}

// GroupMetadataKey encodes the key of a group metadata record (key v2:
// int16 version | string group).
func GroupMetadataKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupMetadataKeyV2, Group: group}
	return k.AppendTo(make([]byte, 0, 4+len(group)))
}

// MetadataValue encodes the group's metadata record value (v3: protocol
// type, generation, protocol, leader, state timestamp, and per member id,
// instance id, client id and host, timeouts, subscription and assignment).
func (g *Group) MetadataValue() []byte {
	v := kmsg.GroupMetadataValue{
		Version:               groupMetadataValueV3,
		ProtocolType:          g.protocolType,
		Generation:            g.generation,
		CurrentStateTimestamp: g.stateTimestampMs,
	}
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	for _, id := range g.order {
		m := g.members[id]
		mv := kmsg.GroupMetadataValueMember{
			MemberID: m.ID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			RebalanceTimeoutMillis: m.RebalanceTimeoutMs, SessionTimeoutMillis: m.SessionTimeoutMs,
			Subscription: m.metadataFor(g.protocol), Assignment: m.Assignment,
		}
		if mv.Subscription == nil {
			mv.Subscription = []byte{}
		}
		if mv.Assignment == nil {
			mv.Assignment = []byte{}
		}
		if m.InstanceID != "" {
			inst := m.InstanceID
			mv.InstanceID = &inst
		}
		v.Members = append(v.Members, mv)
	}
	return v.AppendTo(nil)
}

// RecordKind says what a __consumer_offsets record is.
type RecordKind int8

const (
	KindUnknown RecordKind = iota // a key version we do not read (KIP-848 records, future ones): skipped
	KindOffset
	KindGroup
)

// Decoded is one decoded __consumer_offsets record. Value-less records are
// tombstones (Tombstone true).
type Decoded struct {
	Kind      RecordKind
	Group     string
	TP        TopicPartition
	Offset    Offset
	Meta      *kmsg.GroupMetadataValue
	Tombstone bool
}

// DecodeRecord decodes a __consumer_offsets record. Keys of versions it does
// not know decode as KindUnknown with no error (Kafka's newer record types
// share the topic); a known key or value that does not decode is
// ErrBadRecord. It never panics and never allocates more than its input
// justifies (kmsg checks every length against the bytes left).
func DecodeRecord(key, value []byte) (Decoded, error) {
	if len(key) < 2 {
		return Decoded{}, fmt.Errorf("%w: key of %d bytes", ErrBadRecord, len(key))
	}
	ver := int16(key[0])<<8 | int16(key[1])
	switch ver {
	case offsetCommitKeyV0, offsetCommitKeyV1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return Decoded{}, fmt.Errorf("%w: offset key: %v", ErrBadRecord, err)
		}
		d := Decoded{Kind: KindOffset, Group: k.Group, TP: TopicPartition{k.Topic, k.Partition}}
		if value == nil {
			d.Tombstone = true
			return d, nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil || v.Version < 0 || v.Version > 4 {
			return Decoded{}, fmt.Errorf("%w: offset value v%d: %v", ErrBadRecord, v.Version, err)
		}
		d.Offset = Offset{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTimestampMs: v.CommitTimestamp}
		if v.Version >= 3 {
			d.Offset.LeaderEpoch = v.LeaderEpoch
		}
		return d, nil
	case groupMetadataKeyV2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return Decoded{}, fmt.Errorf("%w: group key: %v", ErrBadRecord, err)
		}
		d := Decoded{Kind: KindGroup, Group: k.Group}
		if value == nil {
			d.Tombstone = true
			return d, nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(value); err != nil || v.Version < 0 || v.Version > 4 {
			return Decoded{}, fmt.Errorf("%w: group value v%d: %v", ErrBadRecord, v.Version, err)
		}
		d.Meta = &v
		return d, nil
	}
	return Decoded{Kind: KindUnknown}, nil
}

// restoreGroup rebuilds a group from its last metadata record (loading a
// partition). A group with members comes back Stable in its generation
// with every member's session restarted at nowMs, so clients that keep
// heartbeating carry on without a rebalance; one without members is Empty.
func restoreGroup(g *Group, v *kmsg.GroupMetadataValue, nowMs int64) {
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	g.protocol, g.leader = "", ""
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	if v.Leader != nil {
		g.leader = *v.Leader
	}
	g.members = map[string]*Member{}
	g.instances = map[string]string{}
	g.order = nil
	for _, mv := range v.Members {
		if _, dup := g.members[mv.MemberID]; dup || mv.MemberID == "" {
			continue
		}
		m := &Member{
			ID: mv.MemberID, ClientID: mv.ClientID, ClientHost: mv.ClientHost,
			SessionTimeoutMs: mv.SessionTimeoutMillis, RebalanceTimeoutMs: mv.RebalanceTimeoutMillis,
			Protocols:  []Protocol{{Name: g.protocol, Metadata: mv.Subscription}},
			Assignment: mv.Assignment,
		}
		if m.SessionTimeoutMs <= 0 {
			m.SessionTimeoutMs = g.cfg.MinSessionTimeoutMs
		}
		if m.RebalanceTimeoutMs <= 0 {
			m.RebalanceTimeoutMs = m.SessionTimeoutMs
		}
		m.deadlineMs = nowMs + int64(m.SessionTimeoutMs)
		if mv.InstanceID != nil && *mv.InstanceID != "" {
			m.InstanceID = *mv.InstanceID
			g.instances[m.InstanceID] = m.ID
		}
		g.members[m.ID] = m
		g.order = append(g.order, m.ID)
	}
	if len(g.members) == 0 || g.protocol == "" {
		g.members, g.order, g.instances = map[string]*Member{}, nil, map[string]string{}
		g.leader, g.protocol = "", ""
		since := nowMs // offsets retention counts from when the group became Empty
		if v.CurrentStateTimestamp > 0 && v.CurrentStateTimestamp <= nowMs {
			since = v.CurrentStateTimestamp
		}
		g.transition(Empty, since)
		return
	}
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.order[0]
	}
	g.transition(Stable, nowMs)
}

// ConsumerTopics returns the topics of a "consumer" protocol subscription
// (ConsumerMemberMetadata), nil if it does not decode.
func ConsumerTopics(metadata []byte) []string {
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(metadata); err != nil {
		return nil
	}
	return m.Topics
}
