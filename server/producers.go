package server

// Producer ids, idempotence and transactions (issue 8): the Server's part.
//
// Idempotence lives in the engine (engine/producers.go: per-partition
// producer state, duplicate detection, snapshots); this file owns producer
// id allocation for InitProducerId (22_init_producer_id.go): the
// transaction coordinator's host hands out ids (txnhost.Host.NewProducerID)
// from the block source this file picks (producerIDSource):
// TxnConfig.ProducerIDs, by default blocks allocated by the controller
// quorum in cluster mode (txnhost.ControllerBlocks) and a
// txn.FileBlockSource in the engine's data directory on a single broker,
// which hands out ids from this node id's own range. Produce
// (00_produce.go) maps the engine's producer errors to Kafka codes and answers a retried batch with
// its original offsets.
//
// Transactions: the transaction coordinator's host (broker/txnhost, built
// in txn_coord.go) runs a txn.Coordinator for every __transaction_state
// partition this broker leads, and the handlers of InitProducerId (with a
// transactional id), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
// TxnOffsetCommit, DescribeTransactions and ListTransactions call it
// through txnCoordinator; it writes transaction markers to the partition
// leaders over the wire (txnhost.MarkerWriter). Partition
// leaders have the coordinator verify (KIP-890 part 1) or add (part 2, TV2)
// a partition before a transactional batch opens a transaction in it
// (txn_verify.go); TxnConfig.PartitionVerification and
// TxnConfig.TransactionVersion choose, and ApiVersions advertises the
// transaction.version feature (18_api_versions.go).

import (
	"errors"
	"time"

	"github.com/stratalog/strata/broker/txnhost"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnConfig configures producer ids, idempotence and transactions (issue 8).
type TxnConfig struct {
	// ProducerIDs hands out blocks of producer ids unique in the cluster.
	// nil: in cluster mode the controller quorum (AllocateProducerIDs,
	// txnhost.ControllerBlocks); on a single broker a txn.FileBlockSource in the
	// engine's data directory, from this node's own range of ids.
	ProducerIDs txn.BlockSource
	// StatePartitions is transaction.state.log.num.partitions (50); an
	// existing __transaction_state keeps its own count.
	StatePartitions int32
	// StateReplication is transaction.state.log.replication.factor (3,
	// capped by the live brokers) in cluster mode.
	StateReplication int16
	// MaxTimeoutMs is transaction.max.timeout.ms (900000).
	MaxTimeoutMs int32
	// IDExpirationMs is transactional.id.expiration.ms (7 days).
	IDExpirationMs int64
	// AbortInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s):
	// how often timed-out transactions are aborted and idle ids expired.
	AbortInterval time.Duration
	// PartitionVerification is transaction.partition.verification.enable
	// (KIP-890 part 1): a partition leader asks the transaction
	// coordinator before a transactional batch of a Produce v11- request
	// opens a transaction (txn_verify.go). Kafka's default is true; as for
	// Config.AutoCreateTopics the zero value is false and the caller
	// decides (`strata serve` turns it on unless the properties say false).
	PartitionVerification bool
	// TransactionVersion is the finalized level of the transaction.version
	// feature that ApiVersions v3+ advertises (18_api_versions.go), 0..2.
	// 2 (Kafka 4.x's default, and `strata serve`'s) lets clients use
	// KIP-890 part 2 (Produce v12+ adds partitions implicitly, EndTxn v5
	// bumps the epoch, TxnOffsetCommit v5 adds the offsets partition); 1
	// and 0 (not finalized: the zero value, as for PartitionVerification
	// the caller decides) make clients use AddPartitionsToTxn and
	// AddOffsetsToTxn, and Produce v12+ is then verified as v11 is. Values
	// above 2 mean 2.
	TransactionVersion int16
}

// Defaults of TxnConfig (Kafka's).
const (
	DefaultTxnStatePartitions  = 50
	DefaultTxnStateReplication = 3
	DefaultTxnAbortInterval    = 10 * time.Second
	// MaxTransactionVersion is the highest transaction.version this broker
	// supports (Kafka 4.x's default level).
	MaxTransactionVersion = 2
)

// txnState is the Server's part for producer ids, idempotence and transactions (issue 8).
type txnState struct {
	coord txnCoordinator // the transaction coordinator's host (txn_coord.go)
	host  *txnhost.Host  // the same, for tests
	lanes produceLanes   // transactional produce requests in verification (txn_verify.go)

	// finalized is ApiVersions' FinalizedFeatures (18_api_versions.go),
	// built once from TxnConfig.TransactionVersion; read-only.
	finalized []kmsg.ApiVersionsResponseFinalizedFeature
}

// initTxn is called by New after the Server is built. The coordinator's
// host is built in any case: without producer ids or an engine it
// coordinates nothing and answers COORDINATOR_NOT_AVAILABLE.
func (s *Server) initTxn() {
	if v := s.cfg.Txn.TransactionVersion; v < 0 {
		s.cfg.Txn.TransactionVersion = 0
	} else if v > MaxTransactionVersion {
		s.cfg.Txn.TransactionVersion = MaxTransactionVersion
	}
	s.txn.finalized = finalizedFeatures(s.cfg.Txn.TransactionVersion)
	src, err := s.producerIDSource()
	s.initTxnCoordinator(src, err) // txn_coord.go
}

// producerIDSource returns TxnConfig.ProducerIDs, else in cluster mode
// blocks from the controller quorum (closeTxn closes them), else a
// txn.FileBlockSource in the engine's data directory; nil and why when
// there is none.
func (s *Server) producerIDSource() (txn.BlockSource, error) {
	if src := s.cfg.Txn.ProducerIDs; src != nil {
		return src, nil
	}
	if s.clustered() {
		cs := txnhost.NewControllerBlocks(s.cluster.ctx, txnhost.BlocksConfig{
			NodeID: s.cfg.NodeID, Epoch: s.cluster.member.Epoch, Controller: s.cluster.ctl, Clock: hostClock{s}, Log: s.log})
		s.cfg.Txn.ProducerIDs = cs
		return cs, nil
	}
	if s.eng == nil {
		return nil, errors.New("no engine and no producer id source")
	}
	fs, err := txn.NewFileBlockSource(s.eng.Dir(), s.cfg.NodeID)
	if err != nil {
		return nil, err
	}
	return fs, nil
}

// closeTxn is called by Close after connections are closed.
func (s *Server) closeTxn() {
	s.closeTxnCoordinator()
	if cs, ok := s.cfg.Txn.ProducerIDs.(*txnhost.ControllerBlocks); ok {
		cs.Close()
	}
}
