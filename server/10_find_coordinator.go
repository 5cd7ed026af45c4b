package server

// FindCoordinator (API key 10), v0..v5.
//
// Key type 0 (group) and 1 (transaction) are served. On a single broker
// every key is coordinated here; in cluster mode a group's coordinator is
// the leader of its __consumer_offsets partition (see groups.go) and a
// transactional id's the leader of its __transaction_state partition (see
// txn_coord.go); either topic is created on the first lookup, answered
// COORDINATOR_NOT_AVAILABLE until it exists (clients retry). On a single
// broker __transaction_state is created locally on the first transaction
// key. v0..v3 carry one key, v4+ a batch
// (KIP-699). Another key type (2, share groups, v6) is INVALID_REQUEST; v6
// is not advertised. An empty group id is INVALID_REQUEST, as in Kafka.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	coordinatorKeyGroup       = 0
	coordinatorKeyTransaction = 1
)

func init() { register(10, 0, 5, handleFindCoordinator) }

func handleFindCoordinator(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	resp.Coordinators = make([]kmsg.FindCoordinatorResponseCoordinator, len(keys))
	for i, k := range keys {
		c := &resp.Coordinators[i]
		c.Default()
		c.Key = k
		c.NodeID, c.Host, c.Port = -1, "", -1
		if code := s.coordinatorDenied(rc, req.CoordinatorType, k); code != 0 { // authz.go
			c.ErrorCode = code
			continue
		}
		code, msg := s.findCoordinator(req.CoordinatorType, k)
		if code != 0 {
			c.ErrorCode, c.ErrorMessage = code, kmsg.StringPtr(msg)
			continue
		}
		c.NodeID = s.cfg.NodeID
		c.Host, c.Port = s.advertisedFor(rc.conn) // the listener the client connected to
		if req.CoordinatorType == coordinatorKeyGroup && s.clustered() {
			b, code := s.groupCoordinatorNode(k) // groups.go
			if code != 0 {
				c.NodeID, c.Host, c.Port = -1, "", -1
				c.ErrorCode, c.ErrorMessage = code, kmsg.StringPtr("the group coordinator is not available yet")
				continue
			}
			c.NodeID, c.Host, c.Port = s.coordinatorEndpoint(rc, b)
		}
		if req.CoordinatorType == coordinatorKeyTransaction && s.clustered() {
			b, code := s.txnCoordinatorNode(k) // txn_coord.go
			if code != 0 {
				c.NodeID, c.Host, c.Port = -1, "", -1
				c.ErrorCode, c.ErrorMessage = code, kmsg.StringPtr("the transaction coordinator is not available yet")
				continue
			}
			c.NodeID, c.Host, c.Port = s.coordinatorEndpoint(rc, b)
		}
		if c.NodeID < 0 && c.ErrorCode == 0 {
			// The coordinator has no endpoint on this client's listener
			// (Kafka answers COORDINATOR_NOT_AVAILABLE then).
			c.Host, c.Port = "", -1
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			c.ErrorMessage = kmsg.StringPtr("the coordinator has no endpoint on listener " + listenerOf(rc.conn))
		}
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.NodeID, c.Host, c.Port
		if c.ErrorCode != 0 {
			resp.ErrorMessage = c.ErrorMessage
		}
		resp.Coordinators = nil
	}
	rc.respond(resp)
}

// findCoordinator checks a key; 0 means this broker coordinates it.
func (s *Server) findCoordinator(keyType int8, key string) (int16, string) {
	switch keyType {
	case coordinatorKeyGroup:
		if key == "" {
			return kerr.InvalidRequest.Code, "empty group id"
		}
		if _, code := s.groupCoordinator(); code != 0 {
			return code, "the group coordinator is not available"
		}
		return 0, ""
	case coordinatorKeyTransaction:
		if key == "" {
			return kerr.InvalidRequest.Code, "empty transactional id"
		}
		if !s.clustered() {
			if code := s.txnEnsureTopic(); code != 0 {
				return code, "the transaction coordinator is not available"
			}
		}
		return 0, ""
	}
	return kerr.InvalidRequest.Code, "unknown coordinator key type"
}

// coordinatorEndpoint returns coordinator b's node id and its address on
// the listener rc arrived on; node -1 when b has none there.
func (s *Server) coordinatorEndpoint(rc *reqCtx, b viewBroker) (int32, string, int32) {
	host, port, ok := b.Endpoint(listenerOf(rc.conn))
	if !ok {
		return -1, "", -1
	}
	return b.ID, host, port
}
