package server

// Producer ids, idempotence and transactions (issue 8): the Server's part.
//
// Idempotence lives in the engine (engine/producers.go: per-partition
// producer state, duplicate detection, snapshots); this file owns producer
// id allocation for InitProducerId (22_init_producer_id.go): a txn.IDManager
// over TxnConfig.ProducerIDs, by default a txn.FileBlockSource in the
// engine's data directory (a single broker; a cluster passes a source that
// allocates blocks through the controller). Produce (00_produce.go) maps the
// engine's producer errors to Kafka codes and answers a retried batch with
// its original offsets.
//
// Transactions are not served yet: InitProducerId with a transactional id
// and Produce with a transactional id or batch are answered
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients treat as fatal rather
// than retrying forever.

import (
	"errors"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TxnConfig configures producer ids, idempotence and transactions (issue 8).
type TxnConfig struct {
	// ProducerIDs hands out blocks of producer ids unique in the cluster.
	// nil: a txn.FileBlockSource in the engine's data directory, from this
	// node's own range of ids (unique per node id without the controller).
	ProducerIDs txn.BlockSource
}

// txnState is the Server's part for producer ids, idempotence and transactions (issue 8).
type txnState struct {
	ids *txn.IDManager // nil without an engine or a block source
	err error          // why ids is nil
}

// initTxn is called by New after the Server is built.
func (s *Server) initTxn() {
	src := s.cfg.Txn.ProducerIDs
	if src == nil {
		if s.eng == nil {
			s.txn.err = errors.New("no engine and no producer id source")
			return
		}
		fs, err := txn.NewFileBlockSource(s.eng.Dir(), s.cfg.NodeID)
		if err != nil {
			s.txn.err = err
			return
		}
		src = fs
	}
	s.txn.ids = txn.NewIDManager(src)
}

// closeTxn is called by Close after connections are closed.
func (s *Server) closeTxn() {}

// produceErrCode is errCode plus the engine's idempotence errors.
func produceErrCode(err error) int16 {
	switch {
	case errors.Is(err, engine.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, engine.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	}
	return errCode(err)
}
