package server

import (
	"context"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionReassignments v0..v0.
func init() { register(45, 0, 0, handleAlterPartitionReassignments) }

// handleAlterPartitionReassignments starts, replaces or (Replicas null)
// cancels replica reassignments through the controller (KIP-455). While a
// reassignment runs, a partition's replicas are the union of the target and
// the original set; the target replicas join as followers, and once they are
// all in the ISR the controller drops the removed ones (moving leadership
// if the leader is among them). Per partition: UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_REPLICA_ASSIGNMENT (empty, duplicate or unregistered replicas),
// NO_REASSIGNMENT_IN_PROGRESS (cancel without one). A single broker has no
// other broker to move replicas to: every assignment but [this broker] is
// INVALID_REPLICA_ASSIGNMENT and a cancel NO_REASSIGNMENT_IN_PROGRESS.
func handleAlterPartitionReassignments(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.AlterPartitionAssignmentsRequest)
	if !s.authorizedCluster(rc, auth.OpAlter) { // authz.go
		rc.respond(reassignResponse(nil, kerr.ClusterAuthorizationFailed.Code, ""))
		return
	}
	var items []controller.Reassignment
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			items = append(items, controller.Reassignment{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas})
		}
	}
	if !s.clustered() {
		results := make([]controller.PartitionResult, len(items))
		for i, it := range items {
			results[i] = controller.PartitionResult{Topic: it.Topic, Partition: it.Partition}
			switch t := s.eng.Topic(it.Topic); {
			case t == nil || t.Partition(it.Partition) == nil:
				results[i].Code = kerr.UnknownTopicOrPartition.Code
			case it.Replicas == nil:
				results[i].Code = kerr.NoReassignmentInProgress.Code
			case len(it.Replicas) != 1 || it.Replicas[0] != s.cfg.NodeID:
				results[i].Code = kerr.InvalidReplicaAssignment.Code
				results[i].Message = "this cluster has one broker"
			}
		}
		rc.respond(reassignResponse(results, 0, ""))
		return
	}
	s.goAdmin(req.TimeoutMillis, func(ctx context.Context) {
		r, err := s.cluster.ctl.Propose(ctx, controller.ReassignPartitions{Items: items})
		if err != nil {
			rc.respond(reassignResponse(nil, proposeErr(err).code.Code, err.Error()))
			return
		}
		if r.Code != 0 {
			rc.respond(reassignResponse(nil, r.Code, r.Message))
			return
		}
		if err := s.waitView(ctx, r.Offset); err != nil {
			s.log.Debug("reassign: view not caught up", "err", err)
		}
		for _, p := range r.Partitions {
			if p.Code == 0 {
				s.log.Info("reassigning partition", "topic", p.Topic, "partition", p.Partition, "replicas", p.Replicas)
			}
		}
		rc.respond(reassignResponse(r.Partitions, 0, ""))
	})
}

func reassignResponse(results []controller.PartitionResult, code int16, msg string) *kmsg.AlterPartitionAssignmentsResponse {
	resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = kmsg.StringPtr(msg)
	}
	idx := map[string]int{}
	for _, p := range results {
		i, ok := idx[p.Topic]
		if !ok {
			i = len(resp.Topics)
			idx[p.Topic] = i
			t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			t.Topic = p.Topic
			resp.Topics = append(resp.Topics, t)
		}
		rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, p.Code
		if p.Code != 0 && p.Message != "" {
			rp.ErrorMessage = kmsg.StringPtr(p.Message)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}
