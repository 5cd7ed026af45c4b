package controller

// Producer id blocks (Kafka's AllocateProducerIds, KIP-730): the quorum
// hands every broker blocks of ProducerIDBlockSize producer ids, so ids are
// unique in the whole cluster and across restarts of any node.
//
// The State keeps nextProducerID, the first id not yet in any block. It is
// part of the snapshot (State version 2) and advanced only by applying
// AllocateProducerIDs, so every node of the quorum agrees on it and a new
// controller leader continues where the old one stopped: a block is handed
// out at most once, whatever fails. An allocation whose answer is lost
// (ErrUnknownOutcome) is simply retried; the lost block is skipped, never
// handed out again.
//
// The controller's ids start at FirstProducerID, above every node's share
// of the id space that package txn's FileBlockSource hands out without a
// controller ([n<<47, (n+1)<<47) for node n <= txn.MaxFileNodeID), so a
// cluster that used file blocks before never sees an id twice. That leaves
// 2^47 ids (1.4e14) for the controller.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

const (
	// ProducerIDBlockSize is the size of a block (Kafka's
	// ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE; txn.BlockSize).
	ProducerIDBlockSize = 1000
	// FirstProducerID is the first id the controller hands out:
	// (txn.MaxFileNodeID+1) << txn.NodeRangeBits = 2^63 - 2^47, the end of
	// the last node's file range.
	FirstProducerID int64 = math.MaxInt64 - 1<<47 + 1
)

// AllocateProducerIDs asks for the next block of producer ids for broker
// BrokerID, whose current registration must have epoch BrokerEpoch
// (Kafka's AllocateProducerIds). An unknown broker gets
// BROKER_ID_NOT_REGISTERED, an epoch other than its registration's
// STALE_BROKER_EPOCH (a replaced incarnation must not take ids), and
// UNKNOWN_SERVER_ERROR once the id space is exhausted, as Kafka's
// ProducerIdControlManager answers. A fenced broker with its current epoch
// is served, as in Kafka: a restarting broker stays fenced until it has
// caught up with the metadata, and uniqueness does not depend on fencing.
// Result: ProducerIDStart, ProducerIDLen (the block), BrokerEpoch.
type AllocateProducerIDs struct {
	BrokerID    int32
	BrokerEpoch int64
}

func (AllocateProducerIDs) Type() CommandType { return TypeAllocateProducerIDs }

func (c AllocateProducerIDs) appendBody(b []byte) []byte {
	b = appendInt(b, int64(c.BrokerID))
	return appendInt(b, c.BrokerEpoch)
}

// NextProducerID is the first producer id not yet handed out in a block.
func (s *State) NextProducerID() int64 { return s.nextProducerID }

func (s *State) allocateProducerIDs(c AllocateProducerIDs) Result {
	b := s.brokers[c.BrokerID]
	if b == nil {
		return failed(kerr.BrokerIDNotRegistered, "broker %d", c.BrokerID)
	}
	if c.BrokerEpoch != b.Epoch {
		return failed(kerr.StaleBrokerEpoch, "broker %d epoch %d, registered with %d", c.BrokerID, c.BrokerEpoch, b.Epoch)
	}
	if s.nextProducerID > math.MaxInt64-ProducerIDBlockSize {
		return failed(kerr.UnknownServerError, "producer ids exhausted: next block would start at %d", s.nextProducerID)
	}
	start := s.nextProducerID
	s.nextProducerID += ProducerIDBlockSize
	return Result{BrokerEpoch: b.Epoch, ProducerIDStart: start, ProducerIDLen: ProducerIDBlockSize}
}
