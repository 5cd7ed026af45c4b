package txn

import (
	"cmp"
	"math"
	"slices"
)

// State is a transaction's state, with Kafka's on-disk numbering (the
// TransactionStatus byte of a __transaction_state value).
type State int8

// Transaction states (Kafka's TransactionState).
const (
	Empty             State = 0 // producer id assigned, no transaction open
	Ongoing           State = 1 // partitions added, not ended
	PrepareCommit     State = 2 // EndTxn(commit) logged; markers being written
	PrepareAbort      State = 3 // EndTxn(abort) or fence/timeout logged; markers being written
	CompleteCommit    State = 4 // every marker written
	CompleteAbort     State = 5
	Dead              State = 6 // transactional id expired (tombstone)
	PrepareEpochFence State = 7 // in-memory only in Kafka; accepted on load as Ongoing
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// ErrorCode is a Kafka protocol error code as the coordinator answers it.
type ErrorCode int16

// The error codes the coordinator returns (Kafka's Errors).
const (
	None                      ErrorCode = 0
	NotCoordinator            ErrorCode = 16
	InvalidRequest            ErrorCode = 42
	InvalidProducerEpoch      ErrorCode = 47
	InvalidTxnState           ErrorCode = 48
	InvalidProducerIDMapping  ErrorCode = 49
	InvalidTransactionTimeout ErrorCode = 50
	ConcurrentTransactions    ErrorCode = 51
	ProducerFenced            ErrorCode = 90
	TransactionAbortable      ErrorCode = 120
)

// NoProducerID and NoProducerEpoch are Kafka's "none" values (-1).
const (
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
)

// epochExhausted reports whether an epoch can no longer be bumped by an
// InitProducerId: Kafka rotates to a new producer id at MaxInt16-1 so that
// one more bump (a fence or a KIP-890 end) stays representable.
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func compareTP(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// normalizeTPs sorts and deduplicates tps in place.
func normalizeTPs(tps []TopicPartition) []TopicPartition {
	slices.SortFunc(tps, compareTP)
	return slices.Compact(tps)
}

// containsTP reports whether sorted set holds tp.
func containsTP(set []TopicPartition, tp TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(set, tp, compareTP)
	return ok
}

// unionTPs returns the sorted union of sorted a and (any order) b, as a new slice.
func unionTPs(a, b []TopicPartition) []TopicPartition {
	out := make([]TopicPartition, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	return normalizeTPs(out)
}

// Metadata is the durable state of one transactional id: exactly what one
// __transaction_state value holds (Kafka's TransactionMetadata without the
// in-memory pending fields). Partitions is sorted and unique; it is empty
// in Empty and Complete* states.
type Metadata struct {
	TransactionalID   string
	ProducerID        int64
	PrevProducerID    int64 // the id before the last rotation, or -1 (KIP-890 retries)
	NextProducerID    int64 // in Prepare*: the id the Complete* record rotates to, or -1
	ProducerEpoch     int16
	LastProducerEpoch int16 // the epoch before the last InitProducerId bump, -1 after a new producer (KIP-360 retries)
	TimeoutMs         int32
	State             State
	Partitions        []TopicPartition
	StartMs           int64 // when the current transaction began (first partition added), -1 if none
	LastUpdateMs      int64
	TV2               bool // the client uses transaction version 2 (KIP-890: EndTxn v5+)
}

// clone returns a deep copy.
func (m *Metadata) clone() *Metadata {
	c := *m
	c.Partitions = slices.Clone(m.Partitions)
	return &c
}

// Equal reports whether two metadata values are the same.
func (m *Metadata) Equal(o *Metadata) bool {
	return m.TransactionalID == o.TransactionalID && m.ProducerID == o.ProducerID &&
		m.PrevProducerID == o.PrevProducerID && m.NextProducerID == o.NextProducerID &&
		m.ProducerEpoch == o.ProducerEpoch && m.LastProducerEpoch == o.LastProducerEpoch &&
		m.TimeoutMs == o.TimeoutMs && m.State == o.State && m.StartMs == o.StartMs &&
		m.LastUpdateMs == o.LastUpdateMs && m.TV2 == o.TV2 && slices.Equal(m.Partitions, o.Partitions)
}
