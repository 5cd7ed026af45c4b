package server

// Tiered storage (KIP-405) as Fetch and ListOffsets see it. The remote
// log manager (remote/rlm) is installed with SetRemoteLog; then, for a
// partition with remote.storage.enable:
//
//   - Fetch of an offset below the local log start reads the remote
//     segment holding it (RemoteLog.Read: whole batches, at least one, up
//     to the partition's budget) and answers it as a memory chunk. The
//     read holds no engine lock; it runs on the request's goroutine,
//     bounded by remoteReadTimeout, and a store error answers
//     KAFKA_STORAGE_ERROR (retriable) for that partition. An offset below
//     the remote log start too is OFFSET_OUT_OF_RANGE, as before.
//     A read_committed fetch gets the aborted transactions of the remote
//     segments' copied .txnindex and of the local log's, overlapping what
//     it read.
//   - ListOffsets earliest (-2) answers the remote log start when it is
//     lower than the local one; latest tiered (-5) the last offset copied
//     (KIP-1005); earliest local (-4) stays the local log start; a
//     timestamp is searched in remote segments first. A leader not caught
//     up with the remote-log metadata (cluster mode) answers those three
//     OFFSET_NOT_AVAILABLE (retriable).
//
//   - DeleteRecords moves the remote log start too (remote segments wholly
//     below it are deleted by the manager's next pass) and answers the
//     partition's log start, remote or local.
//
// Fetch answers of a tiered partition carry its log start offset, remote
// or local (Kafka's log start, not the local one).
//
// In a cluster the manager's metadata is replicated through
// __remote_log_metadata (remote_meta.go, Server.RemoteMetadata): a leader
// that has not caught up with it yet answers a remote read
// KAFKA_STORAGE_ERROR (retriable; rlm.ErrNotReady).
//
// Not yet: max timestamp (-3) looks at local segments only.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/remote/rlm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RemoteLog is the remote log manager as the server uses it
// (*rlm.Manager implements it).
type RemoteLog interface {
	// Read returns whole batches from the offset's remote segment, or an
	// error wrapping rlm.ErrNotRemote when no remote segment holds it.
	Read(ctx context.Context, topicID [16]byte, partition int32, offset int64, maxBytes int) ([]byte, error)
	LogStart(topicID [16]byte, partition int32) (int64, bool)
	HighestTieredOffset(topicID [16]byte, partition int32) (int64, bool)
	// OffsetForTimestamp is the first remote offset stamped at or after
	// ts; found false when no remote segment holds one.
	OffsetForTimestamp(ctx context.Context, topicID [16]byte, partition int32, ts int64) (offset, timestamp int64, found bool, err error)
	// AbortedTransactions appends the aborted transactions of remote
	// segments overlapping [from, to).
	AbortedTransactions(ctx context.Context, topicID [16]byte, partition int32, dst []engine.AbortedTxn, from, to int64) ([]engine.AbortedTxn, error)
	// DeleteRecords moves the remote log start to before.
	DeleteRecords(topicID [16]byte, topic string, partition int32, before int64) error
	// Ready reports whether the answers above are current for a
	// partition this broker leads (in a cluster: its remote-log metadata
	// caught up at the current leader epoch).
	Ready(topicID [16]byte, partition int32) bool
}

// remoteReadTimeout bounds one remote read of a fetch.
const remoteReadTimeout = 30 * time.Second

// remoteLogs holds each Server's RemoteLog (a side table: the Server has
// no field for it).
var remoteLogs sync.Map // *Server -> RemoteLog

// SetRemoteLog installs tiered storage's reader (nil removes it). Call it
// before the Server serves, and with nil before the RemoteLog closes.
func (s *Server) SetRemoteLog(r RemoteLog) {
	if r == nil {
		remoteLogs.Delete(s)
		return
	}
	remoteLogs.Store(s, r)
}

// RemoteSizeTag is the tagged field (flexible versions, v2+) of a
// DescribeLogDirs partition in which Strata reports the bytes of the
// partition's remote segments, as an int64 big-endian, for partitions
// with remote.storage.enable: Kafka has no field for it (its
// RemoteLogSizeBytes is a metric), and clients skip tags they do not
// know. `strata topics describe` reads it.
const RemoteSizeTag = 0x5354

// remoteSizer is the optional part of a RemoteLog that reports remote
// sizes (*rlm.Manager implements it).
type remoteSizer interface {
	RemoteSize(topicID [16]byte, partition int32) (int64, bool)
}

func (s *Server) remoteLog() RemoteLog {
	if v, ok := remoteLogs.Load(s); ok {
		return v.(RemoteLog)
	}
	return nil
}

// readRemote serves a consumer's fetch of l at an offset the engine
// answered out of range from remote storage. ok is false when remote
// storage does not hold the offset either (the caller answers
// OFFSET_OUT_OF_RANGE).
func (f *fetchState) readRemote(l *engine.Log, rp *kmsg.FetchRequestTopicPartition, fp *fetchPartition, limit int64, first bool) (code int16, ok bool) {
	r := f.s.remoteLog()
	if r == nil || rp.FetchOffset >= l.LogStartOffset() || !l.Config().RemoteStorageEnable {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
	defer cancel()
	data, err := r.Read(ctx, l.TopicID(), l.Partition(), rp.FetchOffset, int(min(limit, 1<<30)))
	if errors.Is(err, rlm.ErrNotRemote) {
		return 0, false
	}
	if errors.Is(err, rlm.ErrNotReady) {
		// A new leader catching up with the remote-log metadata
		// (cluster mode): retriable.
		return kerr.KafkaStorageError.Code, true
	}
	if err != nil {
		f.s.log.Warn("fetch: remote read failed", "topic", l.Topic(), "partition", l.Partition(), "offset", rp.FetchOffset, "err", err)
		return kerr.KafkaStorageError.Code, true
	}
	if !first && int64(len(data)) > limit {
		data = nil // only the response's first partition may exceed the budget
	}
	fp.highWatermark, fp.lastStableOffset = l.HighWatermark(), l.LastStableOffset()
	fp.logStartOffset = l.LogStartOffset()
	if start, ok := r.LogStart(l.TopicID(), l.Partition()); ok {
		fp.logStartOffset = min(start, fp.logStartOffset)
	}
	fp.abortedEmpty = f.req.IsolationLevel == 1
	if len(data) > 0 {
		if fp.abortedEmpty {
			// The transactions aborted over what was read: their markers
			// may be in remote segments or in the local log.
			to := lastOffsetOf(data) + 1
			aborted, err := r.AbortedTransactions(ctx, l.TopicID(), l.Partition(), fp.aborted[:0], rp.FetchOffset, to)
			if err != nil {
				f.s.log.Warn("fetch: remote aborted transactions", "topic", l.Topic(), "partition", l.Partition(), "err", err)
				return kerr.KafkaStorageError.Code, true
			}
			fp.aborted = dedupAborted(l.AbortedTransactions(aborted, rp.FetchOffset, to))
		}
		fp.chunks = []engine.Chunk{{Buf: data, Len: int64(len(data))}}
	}
	return 0, true
}

// lastOffsetOf is the last offset of whole batches.
func lastOffsetOf(data []byte) int64 {
	last := int64(-1)
	for len(data) > 0 {
		_, rest, h, err := record.Next(data)
		if err != nil {
			break
		}
		last, data = h.LastOffset(), rest
	}
	return last
}

// dedupAborted drops repeated entries (a transaction found both in a
// remote segment and in the local log), keeping the order.
func dedupAborted(a []engine.AbortedTxn) []engine.AbortedTxn {
	out := a[:0]
	for i, x := range a {
		if !slices.Contains(a[:i], x) {
			out = append(out, x)
		}
	}
	return out
}

// remoteListOffsets corrects a ListOffsets answer for tiered storage: the
// earliest offset may be remote, and latest tiered is the last offset
// copied. A leader whose remote-log metadata has not caught up yet (a
// new leader, a restarted broker) answers the offsets that depend on it
// OFFSET_NOT_AVAILABLE, retriable, as Kafka's new leader does before its
// high watermark is known: its partial view could name a local start
// above remote data (a consumer from the earliest offset would skip it).
// consumer is false for ListOffsets of replica id -2 or a follower,
// which may read any replica's view.
func (s *Server) remoteListOffsets(l *engine.Log, rp *kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition, consumer bool) {
	r := s.remoteLog()
	if r == nil || sp.ErrorCode != 0 || !l.Config().RemoteStorageEnable {
		return
	}
	if consumer && (rp.Timestamp == listOffsetsEarliest || rp.Timestamp == listOffsetsLatestTiered || rp.Timestamp >= 0) &&
		!r.Ready(l.TopicID(), l.Partition()) {
		sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, -1
		sp.ErrorCode = kerr.OffsetNotAvailable.Code
		return
	}
	switch rp.Timestamp {
	case listOffsetsEarliest:
		if start, ok := r.LogStart(l.TopicID(), l.Partition()); ok && start < sp.Offset {
			sp.Offset = start
		}
	case listOffsetsLatestTiered:
		if hi, ok := r.HighestTieredOffset(l.TopicID(), l.Partition()); ok {
			sp.Offset, sp.LeaderEpoch = hi, l.LeaderEpoch()
		}
	case listOffsetsLatest, listOffsetsMaxTimestamp, listOffsetsEarliestLocal, listOffsetsEarliestPending:
	default:
		if rp.Timestamp < 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
		defer cancel()
		off, ts, found, err := r.OffsetForTimestamp(ctx, l.TopicID(), l.Partition(), rp.Timestamp)
		if err != nil {
			s.log.Warn("list offsets: remote timestamp search", "topic", l.Topic(), "partition", l.Partition(), "err", err)
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, -1
			sp.ErrorCode = kerr.KafkaStorageError.Code
			return
		}
		if found && (sp.Offset < 0 || off < sp.Offset) {
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, ts, l.LeaderEpoch()
		}
	}
}

// remoteDeleteRecords applies a DeleteRecords of l (before: its offset,
// -1 for the high watermark; low: the local log start the engine
// answered) to remote storage and returns the partition's log start.
func (s *Server) remoteDeleteRecords(l *engine.Log, before, low int64) (int64, error) {
	r := s.remoteLog()
	if r == nil || !l.Config().RemoteStorageEnable {
		return low, nil
	}
	if before == -1 {
		before = l.HighWatermark()
	}
	if err := r.DeleteRecords(l.TopicID(), l.Topic(), l.Partition(), before); err != nil {
		return 0, err
	}
	if start, ok := r.LogStart(l.TopicID(), l.Partition()); ok && start < low {
		return start, nil
	}
	return low, nil
}

// remoteLogStart is the log start offset a fetch of l answers: the remote
// log start when the partition has remote data below local, else local.
func (s *Server) remoteLogStart(l *engine.Log, local int64) int64 {
	r := s.remoteLog()
	if r == nil || !l.Config().RemoteStorageEnable {
		return local
	}
	if start, ok := r.LogStart(l.TopicID(), l.Partition()); ok && start < local {
		return start
	}
	return local
}
