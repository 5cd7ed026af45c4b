package server

import "github.com/stratalog/strata/group"

// txnMarkerWritten is called by the WriteTxnMarkers handler (API 27) once a
// COMMIT or ABORT marker of producer pid has been appended to partition
// partition of topic and is as durable as an acks=all produce. For
// __consumer_offsets partitions it makes the group coordinator apply
// (commit) or drop (abort) the offsets the producer staged with
// TxnOffsetCommit. It must not block: it takes one group shard's mutex.
func (s *Server) txnMarkerWritten(topic string, partition int32, pid int64, commit bool) {
	if topic != group.OffsetsTopic || s.groups.coord == nil {
		return
	}
	s.groups.coord.CompleteTxn(partition, pid, commit)
}
