package server

import (
	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster v0..v1.
func init() { register(60, 0, 1, handleDescribeCluster) }

// Endpoint types of DescribeCluster v1 (KIP-919).
const (
	endpointBrokers     = 1
	endpointControllers = 2
)

// handleDescribeCluster answers with this broker, which is also the
// controller (single broker), or with every live broker and the metadata
// quorum's leader (cluster mode). From v1 the request says which endpoints it wants: brokers are
// served; asking a broker listener for controllers is
// MISMATCHED_ENDPOINT_TYPE, an unknown type UNSUPPORTED_ENDPOINT_TYPE (as in
// Kafka). Authorized operations are returned only when asked for.
func handleDescribeCluster(s *Server, rc *reqCtx) {
	if rc.ctl {
		handleDescribeClusterControllers(s, rc) // 55_describe_quorum.go
		return
	}
	req := rc.req.(*kmsg.DescribeClusterRequest)
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.EndpointType = endpointBrokers
	if req.Version >= 1 {
		resp.EndpointType = req.EndpointType
		switch req.EndpointType {
		case endpointBrokers:
		case endpointControllers:
			resp.ErrorCode = kerr.MismatchedEndpointType.Code
			resp.ErrorMessage = kmsg.StringPtr("this is a broker listener; controllers are not served here")
		default:
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			resp.ErrorMessage = kmsg.StringPtr("unknown endpoint type")
		}
		if resp.ErrorCode != 0 {
			rc.respond(resp)
			return
		}
	}
	host, port := s.advertisedFor(rc.conn) // the listener the client connected to
	resp.ClusterID = s.cfg.ClusterID
	resp.ControllerID = s.cfg.NodeID
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: s.cfg.NodeID, Host: host, Port: port}}
	if s.clustered() {
		// Every registered broker (v2's IsFenced is not served; fenced ones
		// are left out, as Metadata does) and the quorum's leader.
		v := s.cluster.view.Load()
		resp.ControllerID = s.metadataControllerID(v)
		resp.Brokers = resp.Brokers[:0]
		listener := listenerOf(rc.conn)
		for i := range v.Brokers {
			b := &v.Brokers[i]
			host, port, ok := b.Endpoint(listener)
			if b.Fenced || !ok {
				continue // fenced, or no endpoint on this client's listener
			}
			db := kmsg.NewDescribeClusterResponseBroker()
			db.NodeID, db.Host, db.Port = b.ID, host, port
			if b.Rack != "" {
				db.Rack = kmsg.StringPtr(b.Rack)
			}
			resp.Brokers = append(resp.Brokers, db)
		}
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = s.authorizedOps(rc, auth.ResourceCluster, auth.ClusterName, clusterAuthorizedOps) // authz.go
	}
	rc.respond(resp)
}
