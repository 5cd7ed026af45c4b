package record

import (
	"encoding/binary"
	"fmt"
)

// Control record types of transaction markers (the key's type field;
// Kafka's ControlRecordType).
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// AppendEndTxnMarker appends an end-transaction marker batch for producer
// pid/epoch to dst: a batch with the transactional and control attributes,
// no compression, base sequence -1 and one control record whose key is
// {version int16 0, type int16 (ControlCommit or ControlAbort)} and whose
// value is {version int16 0, coordinatorEpoch int32} (Kafka's
// EndTransactionMarker). The base offset is 0 and the leader epoch -1: the
// partition leader sets both on append, as for produced batches.
func AppendEndTxnMarker(dst []byte, pid int64, epoch int16, coordinatorEpoch int32, commit bool, timestampMs int64) []byte {
	var kv [2 + 2 + 2 + 4]byte
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	binary.BigEndian.PutUint16(kv[2:], uint16(typ))
	binary.BigEndian.PutUint32(kv[6:], uint32(coordinatorEpoch))
	var b Builder
	b.Reset(CodecNone, timestampMs)
	b.SetProducer(pid, epoch, -1)
	b.SetTransactional()
	b.SetControl()
	b.Add(timestampMs, kv[:4], kv[4:], nil)
	dst, err := b.AppendTo(dst)
	if err != nil { // impossible: one small record, codec none
		panic(fmt.Sprintf("record: building a marker batch: %v", err))
	}
	return dst
}

// ParseEndTxnMarker decodes the key and value of a control record: commit
// is the marker's outcome. Keys of other control types (e.g. KRaft's) and
// malformed records are errors; a value longer than 6 bytes (a newer
// version with more fields) is accepted, as Kafka does.
func ParseEndTxnMarker(key, value []byte) (commit bool, coordinatorEpoch int32, err error) {
	if len(key) < 4 || len(value) < 6 {
		return false, 0, fmt.Errorf("%w: control record too short (key %d, value %d bytes)", ErrInvalid, len(key), len(value))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return false, 0, fmt.Errorf("%w: control key version %d", ErrInvalid, v)
	}
	switch typ := int16(binary.BigEndian.Uint16(key[2:])); typ {
	case ControlCommit:
		commit = true
	case ControlAbort:
	default:
		return false, 0, fmt.Errorf("%w: control record type %d is not a transaction marker", ErrInvalid, typ)
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 {
		return false, 0, fmt.Errorf("%w: marker value version %d", ErrInvalid, v)
	}
	return commit, int32(binary.BigEndian.Uint32(value[2:])), nil
}
