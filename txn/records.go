package txn

import (
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrBadRecord means a __transaction_state key or value does not decode.
var ErrBadRecord = errors.New("txn: malformed __transaction_state record")

// maxTopicPartitions bounds the partitions of one decoded value (Kafka has
// no limit; this keeps a corrupt value from costing more than its bytes).
const maxTopicPartitions = 1 << 20

// Key and value versions of __transaction_state records (Kafka's
// TransactionLogKey and TransactionLogValue).
const (
	keyVersion    = 0
	valueVersion0 = 0 // fixed fields only
	valueVersion1 = 1 // flexible: + tagged PreviousProducerId, NextProducerId, ClientTransactionVersion
)

// clientTV2 is the ClientTransactionVersion value written for KIP-890
// clients (transaction.version 2).
const clientTV2 = 2

// EncodeKey appends the record key of transactional id to dst.
func EncodeKey(dst []byte, id string) []byte {
	k := kmsg.TxnMetadataKey{Version: keyVersion, TransactionalID: id}
	return k.AppendTo(dst)
}

// DecodeKey returns the transactional id of a record key.
func DecodeKey(key []byte) (string, error) {
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", fmt.Errorf("%w: key: %v", ErrBadRecord, err)
	}
	if k.Version != keyVersion {
		return "", fmt.Errorf("%w: key version %d", ErrBadRecord, k.Version)
	}
	if k.TransactionalID == "" {
		return "", fmt.Errorf("%w: empty transactional id", ErrBadRecord)
	}
	return k.TransactionalID, nil
}

// EncodeValue appends md's record value to dst; a Dead md has no value
// (the record is a tombstone) and dst is returned as is. Version 1 is
// written only when a KIP-890 field differs from its default, so older
// readers (Kafka tools, kmsg) decode everything else as version 0.
func EncodeValue(dst []byte, md *Metadata) []byte {
	if md.State == Dead {
		return dst
	}
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion0
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = md.ProducerID, md.ProducerEpoch, md.TimeoutMs
	v.State = kmsg.TransactionState(md.State)
	v.LastUpdateTimestamp, v.StartTimestamp = md.LastUpdateMs, md.StartMs
	v.PreviousProducerID, v.NextProducerID = md.PrevProducerID, md.NextProducerID
	if md.TV2 {
		v.ClientTransactionVersion = clientTV2
	}
	if md.TV2 || md.PrevProducerID != NoProducerID || md.NextProducerID != NoProducerID {
		v.Version = valueVersion1
	}
	for i := 0; i < len(md.Partitions); {
		j := i
		for j < len(md.Partitions) && md.Partitions[j].Topic == md.Partitions[i].Topic {
			j++
		}
		t := kmsg.TxnMetadataValueTopic{Topic: md.Partitions[i].Topic, Partitions: make([]int32, 0, j-i)}
		for _, tp := range md.Partitions[i:j] {
			t.Partitions = append(t.Partitions, tp.Partition)
		}
		v.Topics = append(v.Topics, t)
		i = j
	}
	return v.AppendTo(dst)
}

// DecodeValue decodes the value of id's record. A nil or empty value is a
// tombstone: State Dead.
func DecodeValue(id string, value []byte) (*Metadata, error) {
	if len(value) == 0 {
		return &Metadata{TransactionalID: id, State: Dead, ProducerID: NoProducerID, PrevProducerID: NoProducerID,
			NextProducerID: NoProducerID, ProducerEpoch: NoProducerEpoch, LastProducerEpoch: NoProducerEpoch, StartMs: -1}, nil
	}
	if len(value) < 2 {
		return nil, fmt.Errorf("%w: value of %d bytes", ErrBadRecord, len(value))
	}
	if ver := int16(value[0])<<8 | int16(value[1]); ver != valueVersion0 && ver != valueVersion1 {
		return nil, fmt.Errorf("%w: value version %d", ErrBadRecord, ver)
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return nil, fmt.Errorf("%w: value: %v", ErrBadRecord, err)
	}
	switch {
	case v.State < kmsg.TransactionState(Empty) || v.State > kmsg.TransactionState(PrepareEpochFence):
		return nil, fmt.Errorf("%w: state %d", ErrBadRecord, v.State)
	case v.ProducerID < 0 || v.ProducerEpoch < NoProducerEpoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d", ErrBadRecord, v.ProducerID, v.ProducerEpoch)
	case v.TimeoutMillis <= 0:
		return nil, fmt.Errorf("%w: timeout %d", ErrBadRecord, v.TimeoutMillis)
	case v.PreviousProducerID < NoProducerID || v.NextProducerID < NoProducerID:
		return nil, fmt.Errorf("%w: previous/next producer id", ErrBadRecord)
	}
	md := &Metadata{
		TransactionalID: id, ProducerID: v.ProducerID, PrevProducerID: v.PreviousProducerID,
		NextProducerID: v.NextProducerID, ProducerEpoch: v.ProducerEpoch, LastProducerEpoch: NoProducerEpoch,
		TimeoutMs: v.TimeoutMillis, State: State(v.State), StartMs: v.StartTimestamp,
		LastUpdateMs: v.LastUpdateTimestamp, TV2: v.ClientTransactionVersion >= clientTV2,
	}
	n := 0
	for _, t := range v.Topics {
		if t.Topic == "" {
			return nil, fmt.Errorf("%w: empty topic name", ErrBadRecord)
		}
		if n += len(t.Partitions); n > maxTopicPartitions {
			return nil, fmt.Errorf("%w: too many partitions", ErrBadRecord)
		}
	}
	if n > 0 {
		md.Partitions = make([]TopicPartition, 0, n)
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			if p < 0 || p == math.MaxInt32 {
				return nil, fmt.Errorf("%w: partition %d", ErrBadRecord, p)
			}
			md.Partitions = append(md.Partitions, TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	md.Partitions = normalizeTPs(md.Partitions)
	if len(md.Partitions) == 0 {
		md.Partitions = nil
	}
	return md, nil
}

// Load applies one record of the coordinator's __transaction_state
// partition, read in offset order while the partition is loaded (before
// Recover): the last record of an id wins, a tombstone forgets it. A
// record that does not decode is an error; the caller decides whether to
// stop loading (Kafka fails the load).
func (c *Coordinator) Load(key, value []byte) error {
	id, err := DecodeKey(key)
	if err != nil {
		return err
	}
	md, err := DecodeValue(id, value)
	if err != nil {
		return err
	}
	if md.State == Dead {
		delete(c.txns, id)
		return nil
	}
	if md.State == PrepareEpochFence {
		md.State = Ongoing // Kafka never logs it; the fence's abort is redone by timeout
	}
	c.txns[id] = &entry{md: md}
	return nil
}

// Recover is called once after the last Load: it returns the steps that
// finish transactions the previous coordinator left in Prepare* (resend
// the markers, then write Complete*). Ongoing ones are aborted by Tick
// when they time out.
func (c *Coordinator) Recover(nowMs int64) []Step {
	var steps []Step
	for _, id := range c.IDs() {
		e := c.txns[id]
		if e.pending == nil && (e.md.State == PrepareCommit || e.md.State == PrepareAbort) {
			steps = append(steps, c.markersStep(e, nowMs))
		}
	}
	return steps
}
