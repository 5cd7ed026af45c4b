package server

// EndTxn (API key 26), v0..v4.
//
// Commits or aborts the producer's transaction on its coordinator: once
// the PrepareCommit/PrepareAbort record is durable the client is answered,
// and the coordinator then writes the markers into every partition of the
// transaction and logs CompleteCommit/CompleteAbort (broker/txnhost); until
// then the next AddPartitionsToTxn of the producer is answered
// CONCURRENT_TRANSACTIONS (clients retry). A retried EndTxn of a completed
// transaction is answered NONE. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
// below v2. v5 (KIP-890 part 2, transaction version 2) bumps the
// producer's epoch with every end: the markers carry the bumped epoch
// (fencing a zombie of the same producer), the answer carries the id and
// epoch for the next transaction (a new id once the epoch is exhausted),
// a retry with the pre-bump epoch is answered as the original, and an
// abort with nothing added is allowed.

import (
	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const endTxnMaxVersion = 5

func init() { register(26, 0, endTxnMaxVersion, handleEndTxn) }

func handleEndTxn(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	id, pid, epoch, commit, tv2 := req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, req.Version >= 5
	if !s.authorized(rc, auth.OpWrite, auth.ResourceTransactionalID, id) { // authz.go
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		rc.respond(resp)
		return
	}
	s.txn.coord.Do(id, func(c *txn.Coordinator, nowMs int64) (txn.Step, error) {
		return c.EndTxn(id, pid, epoch, commit, tv2, nowMs, s.txn.coord.NewProducerID)
	}, func(r txn.Reply) {
		resp.ErrorCode = txnErrCode(r.Err, req.Version < 2)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		if tv2 && r.Err == txn.None {
			resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.ProducerEpoch
		}
		rc.respond(resp)
	})
}
