package server

// InitProducerId (API key 22), v0..v5, for idempotent producers.
//
// Without a transactional id Kafka "blindly accepts" the request and hands
// out a fresh producer id with epoch 0, whatever producer id and epoch a
// v3+ request carries (KIP-360 recovery of an idempotent producer is a new
// id); so does Strata. The id comes from the server's txn.IDManager (unique
// across restarts and, with a controller-backed block source, across the
// cluster). A block source that fails answers COORDINATOR_LOAD_IN_PROGRESS,
// which clients retry, as Kafka does while its next block is not there yet.
//
// With a transactional id the request goes to the transaction coordinator
// (txn_coord.go) of the id's __transaction_state partition: a new id and
// epoch 0, or the same id with the epoch bumped (fencing older producers;
// an open transaction is aborted first and the client retries on
// CONCURRENT_TRANSACTIONS), or a new id once the epoch is exhausted.
// v3+ carries the producer's current id and epoch (KIP-360): the
// coordinator bumps that epoch, and answers PRODUCER_FENCED to a producer
// that is not the current one; a request with only one of the two set is
// INVALID_REQUEST, as in Kafka. PRODUCER_FENCED is answered as
// INVALID_PRODUCER_EPOCH below v4, which does not know it. An empty
// transactional id is INVALID_REQUEST.

import (
	"errors"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/broker/txnhost"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// initProducerIDMaxVersion is the highest version served. A request
// waits for a new block of ids (a file fsync, or a controller round trip)
// at most txnhost.IDTimeout, on the connection's goroutine.
const initProducerIDMaxVersion = 5

func init() { register(22, 0, initProducerIDMaxVersion, handleInitProducerID) }

func handleInitProducerID(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.TransactionalID != nil && *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionalID != nil && !s.authorized(rc, auth.OpWrite, auth.ResourceTransactionalID, *req.TransactionalID): // authz.go
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case req.TransactionalID == nil && !s.mayIdempotentWrite(rc): // authz.go
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case req.TransactionalID != nil:
		initTxnProducerID(s, rc, req, resp)
		return
	default:
		id, err := s.txn.coord.NewProducerID()
		if errors.Is(err, txnhost.ErrNoProducerIDs) {
			s.log.Warn("InitProducerId: no producer id source", "err", err)
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			break
		}
		if err != nil {
			s.log.Warn("InitProducerId: allocating a producer id", "err", err)
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			break
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
	}
	rc.respond(resp)
}

// initTxnProducerID is InitProducerId with a transactional id.
func initTxnProducerID(s *Server, rc *reqCtx, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) {
	var expected *txn.ProducerIDAndEpoch
	if req.Version >= 3 {
		if (req.ProducerID == -1) != (req.ProducerEpoch == -1) {
			resp.ErrorCode = kerr.InvalidRequest.Code
			rc.respond(resp)
			return
		}
		if req.ProducerID != -1 {
			expected = &txn.ProducerIDAndEpoch{ProducerID: req.ProducerID, Epoch: req.ProducerEpoch}
		}
	}
	id := *req.TransactionalID
	s.txn.coord.Do(id, func(c *txn.Coordinator, nowMs int64) (txn.Step, error) {
		return c.InitProducerID(id, req.TransactionTimeoutMillis, expected, nowMs, s.txn.coord.NewProducerID)
	}, func(r txn.Reply) {
		resp.ErrorCode = txnErrCode(r.Err, req.Version < 4)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		if r.Err == txn.None {
			resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.ProducerEpoch
		}
		rc.respond(resp)
	})
}
