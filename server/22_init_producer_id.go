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
// v5 (KIP-890) changes nothing for idempotent producers. With a
// transactional id the answer is TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// until transactions are implemented (see producers.go); an empty
// transactional id is INVALID_REQUEST, as in Kafka.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	initProducerIDMaxVersion = 5
	// producerIDBlockTimeout bounds a block fetch (a file fsync, or later a
	// controller round trip) on the connection's goroutine.
	producerIDBlockTimeout = 10 * time.Second
)

func init() { register(22, 0, initProducerIDMaxVersion, handleInitProducerID) }

func handleInitProducerID(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.TransactionalID != nil && *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionalID != nil:
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case s.txn.ids == nil:
		s.log.Warn("InitProducerId: no producer id source", "err", s.txn.err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		ctx, cancel := context.WithTimeout(context.Background(), producerIDBlockTimeout)
		id, err := s.txn.ids.Next(ctx)
		cancel()
		if err != nil {
			s.log.Warn("InitProducerId: allocating a producer id", "err", err)
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			break
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
	}
	rc.respond(resp)
}
