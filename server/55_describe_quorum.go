package server

import (
	"context"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeQuorum v0..v2 (KIP-595, KIP-836, KIP-853's Nodes), on broker
// and controller listeners, as kafka-metadata-quorum asks it with
// --bootstrap-server or --bootstrap-controller.
func init() { register(55, 0, 2, handleDescribeQuorum) }

// metadataTopic is the metadata log's name in DescribeQuorum.
const metadataTopic = "__cluster_metadata"

// quorumAnswerTimeout bounds the answer: every member of the quorum is
// asked for its figures (controller.DescribeQuorum, a few seconds at most).
const quorumAnswerTimeout = 5 * time.Second

// handleDescribeQuorum describes the metadata quorum: its leader and term
// (LeaderEpoch), the high watermark, and each voter and observer with its
// log end offset and the times this node last heard from it and last saw
// it caught up (controller.DescribeQuorum: the node answering asks every
// member over the controller RPC, since hashicorp/raft does not expose
// its followers' progress; a member that does not answer keeps its last
// answer's figures, -1 if none); v2 adds each voter's controller
// listeners (Nodes). It needs DESCRIBE on the cluster
// (CLUSTER_AUTHORIZATION_FAILED), and the request must name
// __cluster_metadata partition 0 (else UNKNOWN_TOPIC_OR_PARTITION), as in
// Kafka. A single broker, its own controller without a Raft log, answers
// with itself as the only voter, leader at epoch 0, offsets 0.
func handleDescribeQuorum(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeQuorumRequest)
	resp := kmsg.NewPtrDescribeQuorumResponse()
	if !s.authorizedCluster(rc, auth.OpDescribe) { // authz.go
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		rc.respond(resp)
		return
	}
	if len(req.Topics) != 1 || req.Topics[0].Topic != metadataTopic ||
		len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 0 {
		resp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		rc.respond(resp)
		return
	}
	ctl := s.quorumController()
	if ctl == nil {
		now := s.now().UnixMilli()
		self := controller.QuorumMember{ID: s.cfg.NodeID, Voter: true, LastFetchMs: now, LastCaughtUpMs: now}
		rc.respond(quorumResponse(controller.QuorumInfo{LeaderID: s.cfg.NodeID, Voters: []controller.QuorumMember{self}}))
		return
	}
	go func() { // ends within quorumAnswerTimeout
		ctx, cancel := context.WithTimeout(context.Background(), quorumAnswerTimeout)
		defer cancel()
		q, err := ctl.DescribeQuorum(ctx)
		if err != nil {
			resp.ErrorCode = kerr.NotLeaderForPartition.Code // Kafka's NOT_LEADER_OR_FOLLOWER: try another node
			msg := err.Error()
			resp.ErrorMessage = &msg
			rc.respond(resp)
			return
		}
		rc.respond(quorumResponse(q))
	}()
}

// quorumResponse is q as DescribeQuorum's answer (any version: the
// fields a version lacks are not encoded).
func quorumResponse(q controller.QuorumInfo) *kmsg.DescribeQuorumResponse {
	resp := kmsg.NewPtrDescribeQuorumResponse()
	p := kmsg.NewDescribeQuorumResponseTopicPartition()
	p.LeaderID, p.LeaderEpoch, p.HighWatermark = q.LeaderID, int32(q.Term), q.HighWatermark
	state := func(m controller.QuorumMember) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
		r := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		r.ReplicaID, r.LogEndOffset, r.LastFetchTimestamp, r.LastCaughtUpTimestamp = m.ID, m.LogEndOffset, m.LastFetchMs, m.LastCaughtUpMs
		return r
	}
	for _, m := range q.Voters {
		p.CurrentVoters = append(p.CurrentVoters, state(m))
		if len(m.Endpoints) == 0 {
			continue
		}
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = m.ID
		for _, ep := range m.Endpoints {
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			l.Name, l.Host, l.Port = ep.Name, ep.Host, uint16(ep.Port)
			n.Listeners = append(n.Listeners, l)
		}
		resp.Nodes = append(resp.Nodes, n)
	}
	for _, m := range q.Observers {
		p.Observers = append(p.Observers, state(m))
	}
	t := kmsg.NewDescribeQuorumResponseTopic()
	t.Topic = metadataTopic
	t.Partitions = []kmsg.DescribeQuorumResponseTopicPartition{p}
	resp.Topics = []kmsg.DescribeQuorumResponseTopic{t}
	return resp
}

// handleDescribeClusterControllers is DescribeCluster on a controller
// listener (KIP-919): the controllers with an endpoint on the listener
// the client connected to, the cluster id and the active controller
// (-1 when no leader is known). EndpointType must be 2 (v0 asks for
// brokers): else MISMATCHED_ENDPOINT_TYPE, or UNSUPPORTED_ENDPOINT_TYPE
// for an unknown type. As in Kafka's ControllerApis it needs ALTER on the
// cluster (CLUSTER_AUTHORIZATION_FAILED). A voter that does not answer
// is listed with the endpoints it last told this node, or left out.
func handleDescribeClusterControllers(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DescribeClusterRequest)
	resp := kmsg.NewPtrDescribeClusterResponse()
	typ := int8(endpointBrokers)
	if req.Version >= 1 {
		typ = req.EndpointType
	}
	resp.EndpointType = typ
	switch {
	case typ != endpointBrokers && typ != endpointControllers:
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr("unknown endpoint type")
	case typ != endpointControllers:
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr("this is a controller listener; brokers are not served here")
	case !s.authorizedCluster(rc, auth.OpAlter):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	}
	ctl := s.quorumController()
	if resp.ErrorCode == 0 && ctl == nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		resp.ErrorMessage = kmsg.StringPtr("no controller on this node")
	}
	if resp.ErrorCode != 0 {
		rc.respond(resp)
		return
	}
	listener := listenerOf(rc.conn)
	go func() { // ends within quorumAnswerTimeout
		ctx, cancel := context.WithTimeout(context.Background(), quorumAnswerTimeout)
		defer cancel()
		q, err := ctl.DescribeQuorum(ctx)
		if err != nil {
			resp.ErrorCode = kerr.UnknownServerError.Code
			resp.ErrorMessage = kmsg.StringPtr(err.Error())
			rc.respond(resp)
			return
		}
		resp.ClusterID = s.cfg.ClusterID
		resp.ControllerID = q.LeaderID
		for _, m := range q.Voters {
			for _, ep := range m.Endpoints {
				if listener != "" && ep.Name != listener {
					continue
				}
				b := kmsg.NewDescribeClusterResponseBroker()
				b.NodeID, b.Host, b.Port = m.ID, ep.Host, ep.Port
				resp.Brokers = append(resp.Brokers, b)
				break
			}
		}
		if req.IncludeClusterAuthorizedOperations {
			resp.ClusterAuthorizedOperations = s.authorizedOps(rc, auth.ResourceCluster, auth.ClusterName, clusterAuthorizedOps)
		}
		rc.respond(resp)
	}()
}
