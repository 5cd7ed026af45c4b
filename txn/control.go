package txn

import "github.com/stratalog/strata/record"

// Control record types (the key's type field; Kafka's ControlRecordType).
const (
	ControlAbort  = record.ControlAbort
	ControlCommit = record.ControlCommit
)

// AppendMarkerBatch appends an end-transaction marker batch for producer
// pid/epoch to dst (record.AppendEndTxnMarker: base offset 0 and leader
// epoch -1, which the partition leader sets on append).
func AppendMarkerBatch(dst []byte, pid int64, epoch int16, coordinatorEpoch int32, commit bool, timestampMs int64) []byte {
	return record.AppendEndTxnMarker(dst, pid, epoch, coordinatorEpoch, commit, timestampMs)
}

// ParseMarker decodes the key and value of a control record
// (record.ParseEndTxnMarker): commit is the marker's outcome.
func ParseMarker(key, value []byte) (commit bool, coordinatorEpoch int32, err error) {
	return record.ParseEndTxnMarker(key, value)
}
