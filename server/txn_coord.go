package server

// The transaction coordinator (issue 8) as the protocol layer sees it: its
// host is broker/txnhost (txnhost.Host: a txn.Coordinator per
// __transaction_state partition this broker leads, loading and unloading
// through coordhost, the tick, the marker writer and its Kafka client), and
// the handlers of InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
// EndTxn, TxnOffsetCommit, DescribeTransactions and ListTransactions, and
// Produce's verification (txn_verify.go), call it through txnCoordinator:
// decode, call, encode. This file builds the host from the Server's parts
// (the adapters are in coordhost.go) and keeps the two entry points
// FindCoordinator uses.

import (
	"net"
	"time"

	"github.com/stratalog/strata/broker/coordhost"
	"github.com/stratalog/strata/broker/txnhost"
	"github.com/stratalog/strata/txn"
)

// txnStateTopic is the transaction coordinator's internal topic.
const txnStateTopic = txnhost.StateTopic

// txnCoordinator is what the protocol layer calls of the transaction
// coordinator's host (*txnhost.Host; its doc says what each does).
type txnCoordinator interface {
	// Do runs fn on id's coordinator and answers reply once with the
	// outcome of the step it returns; View reads the coordinator of
	// partition p (0, or why not).
	Do(id string, fn func(c *txn.Coordinator, nowMs int64) (txn.Step, error), reply func(txn.Reply))
	View(p int32, fn func(c *txn.Coordinator)) int16
	Ready() bool
	Partitions() int32
	PartitionFor(id string) int32
	// ClientAdd is a client's add (AddPartitionsToTxn v0..v3,
	// AddOffsetsToTxn); PartitionsOp a partition leader's verification
	// or implicit add (KIP-890).
	ClientAdd(id string, pid int64, epoch int16, tps []txn.TopicPartition, reply func(txn.Reply))
	PartitionsOp(id string, pid int64, epoch int16, tps []txn.TopicPartition, add, abortableOK, concurrentOK bool, done func(codes []int16))
	// After runs retry after d on a goroutine of the host (giveUp if it
	// closes first); false: neither runs.
	After(d time.Duration, retry, giveUp func()) bool
	// NewProducerID is the next producer id (txnhost.ErrNoProducerIDs
	// without a source).
	NewProducerID() (int64, error)
	EnsureTopic() int16
	Route() *coordhost.Host
	NoteListener(a net.Addr)
	Close()
}

// initTxnCoordinator is called by initTxn with the producer id source
// (nil: none, for the reason noIDs).
func (s *Server) initTxnCoordinator(ids txn.BlockSource, noIDs error) {
	tc := s.cfg.Txn
	if tc.StatePartitions <= 0 {
		tc.StatePartitions = DefaultTxnStatePartitions
	}
	if tc.StateReplication <= 0 {
		tc.StateReplication = DefaultTxnStateReplication
	}
	if tc.AbortInterval <= 0 {
		tc.AbortInterval = DefaultTxnAbortInterval
	}
	if s.eng != nil && ids != nil {
		s.cfg.Txn = tc
	}
	cfg := txnhost.Config{
		NodeID:           s.cfg.NodeID,
		Coordinator:      txn.Config{MaxTimeoutMs: tc.MaxTimeoutMs, IDExpirationMs: tc.IDExpirationMs},
		StatePartitions:  tc.StatePartitions,
		StateReplication: tc.StateReplication,
		AbortInterval:    tc.AbortInterval,
		Engine:           s.eng,
		ProducerIDs:      ids,
		NoProducerIDs:    noIDs,
		Creator:          hostCreator{s},
		WhenAcked:        s.whenAcked,
		Dial:             s.cfg.Cluster.Dial,
		Clock:            hostClock{s},
		Log:              s.log,
	}
	if s.clustered() {
		cfg.Cluster = hostCluster{hostSource{s}}
	}
	s.txn.host = txnhost.New(cfg)
	s.txn.coord = s.txn.host
}

// closeTxnCoordinator stops every goroutine of the coordinator.
func (s *Server) closeTxnCoordinator() {
	if s.txn.coord != nil {
		s.txn.coord.Close()
	}
}

// noteListener tells the coordinator a local listener's address: markers
// to this broker's partitions go there.
func (s *Server) noteListener(ln net.Listener) { s.txn.coord.NoteListener(ln.Addr()) }

// txnEnsureTopic makes sure __transaction_state exists (FindCoordinator);
// 0 when it does.
func (s *Server) txnEnsureTopic() int16 { return s.txn.coord.EnsureTopic() }

// txnCoordinatorNode returns the broker coordinating transactional id
// (cluster mode): the leader of its __transaction_state partition. Before
// the topic exists it starts its proposal and answers
// COORDINATOR_NOT_AVAILABLE (clients retry).
func (s *Server) txnCoordinatorNode(id string) (viewBroker, int16) {
	return s.coordinatorBroker(s.txn.coord.Route(), id) // coordhost.go
}
