package server

// ListTransactions (API key 66), v0..v2 (KIP-664, KIP-994, KIP-1152).
//
// Lists the transactional ids of every __transaction_state partition
// coordinated here, filtered by state names (unknown names are returned in
// UnknownStateFilters and match nothing), producer ids, v1+ a duration
// (only transactions started more than DurationFilterMillis ago; < 0 for
// all) and v2+ a transactional id pattern (RE2, matched against the whole
// id, as Java's Pattern.matches; an invalid pattern is
// INVALID_REGULAR_EXPRESSION). COORDINATOR_LOAD_IN_PROGRESS while any
// partition loads.

import (
	"regexp"
	"slices"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(66, 0, 2, handleListTransactions) }

// txnStateByName maps Kafka's state names to states.
var txnStateByName = map[string]txn.State{}

func init() {
	for st := txn.Empty; st <= txn.PrepareEpochFence; st++ {
		txnStateByName[st.String()] = st
	}
}

func handleListTransactions(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	states := map[txn.State]bool{}
	for _, name := range req.StateFilters {
		if st, ok := txnStateByName[name]; ok {
			states[st] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	var re *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$"); err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			rc.respond(resp)
			return
		}
	}
	duration := int64(-1)
	if req.Version >= 1 {
		duration = req.DurationFilterMillis
	}
	if len(req.StateFilters) > 0 && len(states) == 0 {
		rc.respond(resp) // only unknown states: nothing matches
		return
	}
	c := s.txn.coord
	if !c.Ready() {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		rc.respond(resp)
		return
	}
	nowMs := s.now().UnixMilli()
	for p := range c.Partitions() {
		code := c.View(p, func(co *txn.Coordinator) {
			for _, id := range co.IDs() {
				md, _, ok := co.Get(id)
				switch {
				case !ok:
				case len(states) > 0 && !states[md.State]:
				case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, md.ProducerID):
				case duration >= 0 && nowMs-md.StartMs <= duration:
				case re != nil && !re.MatchString(id):
				case !s.authorized(rc, auth.OpDescribe, auth.ResourceTransactionalID, id): // authz.go: only ids it may Describe
				default:
					resp.TransactionStates = append(resp.TransactionStates, kmsg.ListTransactionsResponseTransactionState{
						TransactionalID: id, ProducerID: md.ProducerID, TransactionState: md.State.String()})
				}
			}
		})
		if code == kerr.CoordinatorLoadInProgress.Code {
			resp.ErrorCode = code
			resp.TransactionStates = nil
			break
		}
	}
	rc.respond(resp)
}
