package server

// Reading and writing the coordinators' internal topics with transaction
// attributes (issue 8): scanLog replays a partition batch by batch (the
// transaction coordinator's __transaction_state load, and the group
// coordinator's __consumer_offsets load, which must see each batch's
// producer id and control markers), and offsetsLog's AppendTxn/LoadTxn make
// it a group.TxnLog, so TxnOffsetCommit records go to __consumer_offsets as
// a transactional batch of the committing producer and stay staged on load
// until that producer's marker.

import (
	"errors"
	"fmt"
	"math"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// scanReadBytes is how much scanLog reads per round.
const scanReadBytes = 1 << 20

// scanLog calls fn for every record of l from its log start offset to its
// log end, in offset order, with its batch's header. It reads to the log
// end, not the high watermark, as Kafka's coordinators load their
// partitions: a broker that just became leader has every committed record
// but may not know the high watermark that covers them yet, and the
// records past it are the new leader's to commit. A log truncated at the start under the scan restarts from
// the new start. The record and header passed to fn are reused (copy
// what is kept of them), but keys and values stay valid: every round reads
// into a new buffer.
func scanLog(l *engine.Log, fn func(h *record.Header, r *record.Record) error) error {
	from := l.LogStartOffset()
	for {
		if from >= l.LogEndOffset() {
			return nil
		}
		res, err := l.ReadReplica(from, scanReadBytes, true)
		if errors.Is(err, engine.ErrOffsetOutOfRange) {
			if s := l.LogStartOffset(); s > from {
				from = s
				continue
			}
			return nil
		}
		if err != nil {
			return err
		}
		if len(res.Chunks) == 0 {
			res.Release()
			return nil
		}
		buf := make([]byte, 0, res.Bytes)
		for _, c := range res.Chunks {
			if c.Buf != nil {
				buf = append(buf, c.Buf...)
				continue
			}
			if c.Len < 0 || c.Len > 1<<30 {
				res.Release()
				return fmt.Errorf("server: reading %s: chunk of %d bytes", l, c.Len)
			}
			n := len(buf)
			buf = append(buf, make([]byte, c.Len)...)
			if _, err := c.File.ReadAt(buf[n:], c.Pos); err != nil {
				res.Release()
				return fmt.Errorf("server: reading %s: %w", l, err)
			}
		}
		res.Release()
		next := from
		for rest := buf; len(rest) > 0; {
			batch, r, h, err := record.Next(rest)
			if err != nil {
				return fmt.Errorf("server: %s at %d: %w", l, next, err)
			}
			rest = r
			err = record.Iterate(batch, func(h *record.Header, r *record.Record) error {
				if h.BaseOffset+int64(r.OffsetDelta) < from {
					return nil
				}
				return fn(h, r)
			})
			if err != nil {
				return err
			}
			next = max(next, h.LastOffset()+1)
		}
		if next <= from {
			return nil
		}
		from = next
	}
}

// LoadTxn implements group.TxnLog.
func (o *offsetsLog) LoadTxn(p int32, fn func(group.LoadedRecord) error) error {
	t, err := o.get(false)
	if err != nil || t == nil {
		return err // no topic yet: nothing to load
	}
	l := t.Partition(p)
	if l == nil {
		return fmt.Errorf("%w: %s-%d", engine.ErrUnknownTopic, group.OffsetsTopic, p)
	}
	return scanLog(l, func(h *record.Header, r *record.Record) error {
		lr := group.LoadedRecord{ProducerID: h.ProducerID, Transactional: h.Transactional()}
		if h.Control() {
			commit, _, err := txn.ParseMarker(r.Key, r.Value)
			if err != nil || !h.Transactional() {
				return nil // another control record type: nothing for the groups
			}
			lr.Marker = group.AbortMarker
			if commit {
				lr.Marker = group.CommitMarker
			}
			return fn(lr)
		}
		lr.Key, lr.Value = r.Key, r.Value
		return fn(lr)
	})
}

// AppendTxn implements group.TxnLog: recs as one transactional batch of
// producer pid/epoch, acknowledged like Append.
func (o *offsetsLog) AppendTxn(p int32, pid int64, epoch int16, recs []group.Record, done func(error)) {
	l, err := o.appendLog(p)
	if err != nil {
		done(err)
		return
	}
	// The coordinator is the only writer of pid's batches in this
	// partition: it continues the producer's sequence here (0 in a new
	// epoch), so the batch passes the log's idempotence checks while the
	// epoch check still fences a zombie (Kafka writes no sequence and
	// skips the check for coordinator appends; the engine has no such
	// origin).
	o.txnMu.Lock()
	seq := int32(0)
	if ps, ok := l.Producer(pid); ok && ps.ProducerEpoch == epoch && ps.LastSequence >= 0 && ps.LastSequence < math.MaxInt32 {
		seq = ps.LastSequence + 1
	}
	var b record.Builder
	now := o.s.now().UnixMilli()
	b.Reset(record.CodecNone, now)
	b.SetProducer(pid, epoch, seq)
	b.SetTransactional()
	for _, r := range recs {
		b.Add(now, r.Key, r.Value, nil)
	}
	batch, err := b.AppendTo(nil)
	if err != nil {
		o.txnMu.Unlock()
		done(err)
		return
	}
	info, err := l.Append(batch, l.LeaderEpoch())
	o.txnMu.Unlock()
	if err != nil {
		if errors.Is(err, engine.ErrInvalidProducerEpoch) {
			err = fmt.Errorf("%w: %v", kerr.InvalidProducerEpoch, err)
		}
		done(err)
		return
	}
	o.s.whenAcked(l, info.LastOffset, done)
}
