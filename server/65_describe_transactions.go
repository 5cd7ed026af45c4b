package server

// DescribeTransactions (API key 65), v0 (KIP-664).
//
// Each transactional id is described by its coordinator: NOT_COORDINATOR
// if its __transaction_state partition is not led here,
// COORDINATOR_LOAD_IN_PROGRESS while it loads, TRANSACTIONAL_ID_NOT_FOUND
// for an id the coordinator does not know; otherwise the state (Kafka's
// names: Empty, Ongoing, PrepareCommit, ...), timeout, start time (-1 with
// no transaction), producer id and epoch and the transaction's partitions.

import (
	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	resp.TransactionStates = make([]kmsg.DescribeTransactionsResponseTransactionState, len(req.TransactionalIDs))
	for i, id := range req.TransactionalIDs {
		st := &resp.TransactionStates[i]
		st.Default()
		st.TransactionalID = id
		st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
		if id == "" {
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			continue
		}
		if !s.authorized(rc, auth.OpDescribe, auth.ResourceTransactionalID, id) { // authz.go
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			continue
		}
		var md txn.Metadata
		var found bool
		code := s.txn.coord.View(s.txn.coord.PartitionFor(id), func(c *txn.Coordinator) {
			md, _, found = c.Get(id)
		})
		switch {
		case code != 0:
			st.ErrorCode = code
			continue
		case !found:
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			continue
		}
		st.State = md.State.String()
		st.TimeoutMillis = md.TimeoutMs
		st.StartTimestamp = md.StartMs
		st.ProducerID, st.ProducerEpoch = md.ProducerID, md.ProducerEpoch
		for _, tp := range md.Partitions {
			if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic = tp.Topic
				st.Topics = append(st.Topics, t)
			}
			t := &st.Topics[len(st.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
	}
	rc.respond(resp)
}
