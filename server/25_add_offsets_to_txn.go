package server

// AddOffsetsToTxn (API key 25), v0..v3.
//
// Adds the group's __consumer_offsets partition (the partition of
// group.PartitionFor(group)) to the producer's transaction, so the
// transaction's marker reaches the group coordinator, which then applies
// or drops the offsets the producer commits with TxnOffsetCommit. The
// answer is the coordinator's, after waiting out a previous transaction's
// markers (txnhost.Host.ClientAdd); PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
// below v2; an empty group id is INVALID_GROUP_ID. v4 is v3 for clients
// that know TRANSACTION_ABORTABLE (KIP-890).

import (
	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/group"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	gc, code := s.groupCoordinator()
	switch { // authz.go: Write on the transactional id, Read on the group
	case code != 0:
	case !s.authorized(rc, auth.OpWrite, auth.ResourceTransactionalID, req.TransactionalID):
		code = kerr.TransactionalIDAuthorizationFailed.Code
	case !s.authorized(rc, auth.OpRead, auth.ResourceGroup, req.Group):
		code = kerr.GroupAuthorizationFailed.Code
	}
	if code == 0 && req.Group == "" {
		code = kerr.InvalidGroupID.Code
	}
	if code != 0 {
		resp.ErrorCode = code
		rc.respond(resp)
		return
	}
	tp := txn.TopicPartition{Topic: group.OffsetsTopic, Partition: gc.PartitionFor(req.Group)}
	s.txn.coord.ClientAdd(req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txn.TopicPartition{tp}, func(r txn.Reply) {
		resp.ErrorCode = txnErrCode(r.Err, req.Version < 2)
		rc.respond(resp)
	})
}
