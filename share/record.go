package share

import (
	"encoding/binary"
	"encoding/json"
)

// StateTopic is KIP-932's share-group state topic, where the shells
// (package server's share.go and the engine's embedded share groups)
// persist share-partition snapshots.
const StateTopic = "__share_group_state"

// Key kinds of StateTopic records (the first int16 of a key).
const (
	KeyState  = 0 // group, topic id, partition -> EncodeState's JSON State
	KeyConfig = 1 // group -> JSON map of group configs (package server)
)

// StateKey is the StateTopic key of a share-partition's snapshot: int16
// KeyState, int16 length and the group id, the topic's 16-byte id, int32
// partition (big-endian). Package server writes the same bytes
// (shareStateKey; TestShareStateKeyIsShares there checks it).
func StateKey(group string, topicID [16]byte, partition int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, KeyState)
	b = binary.BigEndian.AppendUint16(b, uint16(len(group)))
	b = append(b, group...)
	b = append(b, topicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

// StatePartition is the StateTopic partition (of n) a key is written to:
// FNV-1a of the key modulo n.
func StatePartition(key []byte, n int32) int32 {
	if n <= 0 {
		return 0
	}
	h := uint32(2166136261)
	for _, c := range key {
		h = (h ^ uint32(c)) * 16777619
	}
	return int32(h % uint32(n))
}

// EncodeState is a snapshot's StateTopic value: State as JSON (Strata's
// encoding, not Kafka's ShareSnapshot schema).
func EncodeState(s State) ([]byte, error) { return json.Marshal(s) }

// DecodeState reads EncodeState's value back (Restore validates it).
func DecodeState(v []byte) (State, error) {
	var s State
	err := json.Unmarshal(v, &s)
	return s, err
}
