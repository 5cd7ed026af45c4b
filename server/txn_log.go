package server

// Reading and writing __consumer_offsets with transaction attributes
// (issue 8): offsetsLog's AppendTxn/LoadTxn (over txnhost.ScanLog, which
// replays a partition batch by batch with each batch's producer id and
// control markers) make it a group.TxnLog, so TxnOffsetCommit records go to __consumer_offsets as
// a transactional batch of the committing producer and stay staged on load
// until that producer's marker.

import (
	"errors"
	"fmt"
	"math"

	"github.com/stratalog/strata/broker/txnhost"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

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
	return txnhost.ScanLog(l, func(h *record.Header, r *record.Record) error {
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
