package grouphost

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/stratalog/strata/broker/coordhost"
	"github.com/stratalog/strata/broker/txnhost"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// offsetsLog is group.Log (and group.TxnLog) over the engine's
// __consumer_offsets topic. On a single broker the topic is created on the
// first write, as Kafka creates it on first use, so a broker that never
// sees a group has no internal topic; in a cluster the controller creates
// it (coordhost's proposal) and writes go only to partitions this broker
// leads.
type offsetsLog struct {
	eng        *engine.Engine
	clustered  bool                                 // the topic is created through the controller
	check      func(t *engine.Topic, p int32) int16 // leadership before an append (cluster mode)
	whenAcked  func(l *engine.Log, last int64, fn func(error))
	clock      coordhost.Clock
	partitions int32 // offsets.topic.num.partitions, or the existing topic's count

	mu    sync.Mutex
	topic *engine.Topic // nil until created or found

	txnMu sync.Mutex // serialises AppendTxn's sequence choice and append
}

// open finds the offsets topic if it exists and returns the partition count
// the coordinator shards by.
func (o *offsetsLog) open(partitions int32) int32 {
	if partitions <= 0 {
		partitions = group.DefaultOffsetsPartitions
	}
	o.partitions = partitions
	if t := o.eng.Topic(group.OffsetsTopic); t != nil {
		o.topic = t
		o.partitions = t.Partitions()
	}
	return o.partitions
}

// get returns the topic, creating it if create and absent.
func (o *offsetsLog) get(create bool) (*engine.Topic, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.topic != nil && !o.topic.Deleted() {
		return o.topic, nil
	}
	if t := o.eng.Topic(group.OffsetsTopic); t != nil {
		o.topic = t
		return t, nil
	}
	if !create || o.clustered {
		return nil, nil
	}
	t, err := o.eng.CreateTopic(group.OffsetsTopic, o.partitions, TopicConfigs())
	if errors.Is(err, engine.ErrTopicExists) {
		t, err = o.eng.Topic(group.OffsetsTopic), nil
	}
	if err != nil || t == nil {
		return nil, fmt.Errorf("groups: creating %s: %w", group.OffsetsTopic, err)
	}
	o.topic = t
	return t, nil
}

var offsetsBuilders = sync.Pool{New: func() any { return new(record.Builder) }}

// appendLog returns the log of partition p to append to (creating the
// topic on a single broker): an error if the topic or partition is missing
// or, in a cluster, this broker does not lead it.
func (o *offsetsLog) appendLog(p int32) (*engine.Log, error) {
	t, err := o.get(true)
	if err == nil && t == nil {
		err = fmt.Errorf("%w: %s", engine.ErrUnknownTopic, group.OffsetsTopic)
	}
	if err != nil {
		return nil, err
	}
	if o.clustered && o.check != nil {
		if code := o.check(t, p); code != 0 {
			return nil, kerr.ErrorForCode(code)
		}
	}
	l := t.Partition(p)
	if l == nil {
		return nil, fmt.Errorf("%w: %s-%d", engine.ErrUnknownTopic, group.OffsetsTopic, p)
	}
	return l, nil
}

// Append implements group.Log: recs as one batch, acknowledged as an
// acks=all produce.
func (o *offsetsLog) Append(p int32, recs []group.Record, done func(error)) {
	l, err := o.appendLog(p)
	if err != nil {
		done(err)
		return
	}
	b := offsetsBuilders.Get().(*record.Builder)
	now := o.clock.Now().UnixMilli()
	b.Reset(record.CodecNone, now)
	for _, r := range recs {
		b.Add(now, r.Key, r.Value, nil)
	}
	batch, err := b.AppendTo(nil)
	offsetsBuilders.Put(b)
	if err != nil {
		done(err)
		return
	}
	info, err := l.Append(batch, l.LeaderEpoch())
	if err != nil {
		done(err)
		return
	}
	o.whenAcked(l, info.LastOffset, done)
}

// Load implements group.Log. The coordinator loads through LoadTxn (to the
// log end, with batch attributes and markers), since offsetsLog is a
// group.TxnLog; this is the plain view of the same scan.
func (o *offsetsLog) Load(p int32, fn func(key, value []byte) error) error {
	return o.LoadTxn(p, func(r group.LoadedRecord) error {
		if r.Marker != group.NoMarker {
			return nil
		}
		return fn(r.Key, r.Value)
	})
}

// LoadTxn implements group.TxnLog (issue 8): the partition replayed batch
// by batch (txnhost.ScanLog) with each batch's producer id and control
// markers, so TxnOffsetCommit records stay staged on load until their
// producer's marker.
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
	now := o.clock.Now().UnixMilli()
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
	o.whenAcked(l, info.LastOffset, done)
}
