package server

import (
	"context"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions v0..v3.
func init() { register(37, 0, 3, handleCreatePartitions) }

// handleCreatePartitions grows topics to Count partitions. Count must exceed
// the current count (INVALID_PARTITIONS otherwise: partitions are never
// removed); an explicit Assignment must list exactly the new partitions, each
// with this broker as its only replica (INVALID_REPLICA_ASSIGNMENT). A topic
// named twice is INVALID_REQUEST; an unknown one UNKNOWN_TOPIC_OR_PARTITION.
// ValidateOnly checks without growing. The partitions added are taken from
// the client's controller_mutation_rate quota; from v3 a topic that finds it
// exhausted is THROTTLING_QUOTA_EXCEEDED and does not grow
// (mutation_quota.go).
func handleCreatePartitions(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.CreatePartitionsRequest)
	if s.clustered() {
		s.goAdmin(req.TimeoutMillis, func(ctx context.Context) { rc.respond(s.createPartitionsAll(ctx, rc, req)) })
		return
	}
	rc.respond(s.createPartitionsAll(nil, rc, req))
}

// createPartitionsAll answers a CreatePartitions request: through the
// controller when ctx is not nil (cluster mode: new partitions are placed by
// the controller, or follow the explicit assignment, which must name
// registered brokers with the topic's replication factor), else on the
// engine.
func (s *Server) createPartitionsAll(ctx context.Context, rc *reqCtx, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	resp := kmsg.NewPtrCreatePartitionsResponse()
	mq := s.newMutationQuota(rc, 3) // mutation_quota.go
	var maxOff int64
	counts := make(map[string]int, len(req.Topics))
	for i := range req.Topics {
		counts[req.Topics[i].Topic]++
	}
	answered := make(map[string]struct{}, len(req.Topics))
	resp.Topics = make([]kmsg.CreatePartitionsResponseTopic, 0, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		if _, done := answered[rt.Topic]; done {
			continue
		}
		answered[rt.Topic] = struct{}{}
		out := kmsg.NewCreatePartitionsResponseTopic()
		out.Topic = rt.Topic
		var err error
		if counts[rt.Topic] > 1 {
			err = newAPIError(kerr.InvalidRequest, "topic %q appears %d times in one CreatePartitions request", rt.Topic, counts[rt.Topic])
		} else if !s.authorized(rc, auth.OpAlter, auth.ResourceTopic, rt.Topic) { // authz.go
			err = newAPIError(kerr.TopicAuthorizationFailed, "not authorized to alter topic %q", rt.Topic)
		} else if ctx != nil {
			var off int64
			off, err = s.clusterCreatePartitions(ctx, rt, req.ValidateOnly, mq)
			maxOff = max(maxOff, off)
		} else {
			err = s.createPartitions(rt, req.ValidateOnly, mq)
		}
		if err != nil {
			out.ErrorCode, out.ErrorMessage = apiErrCode(err), errMessage(err)
		}
		resp.Topics = append(resp.Topics, out)
	}
	if ctx != nil {
		if err := s.waitView(ctx, maxOff); err != nil {
			for i := range resp.Topics {
				if resp.Topics[i].ErrorCode == 0 && !req.ValidateOnly {
					resp.Topics[i].ErrorCode = kerr.RequestTimedOut.Code
				}
			}
		}
	}
	rc.throttleMutations(mq, &resp.ThrottleMillis)
	return resp
}

func (s *Server) clusterCreatePartitions(ctx context.Context, rt *kmsg.CreatePartitionsRequestTopic, validateOnly bool, mq *mutationQuota) (int64, error) {
	v := s.cluster.view.Load()
	vt := v.Topics[rt.Topic]
	if vt == nil {
		return 0, newAPIError(kerr.UnknownTopicOrPartition, "topic %q does not exist", rt.Topic)
	}
	have := int32(len(vt.Parts))
	switch {
	case rt.Count == have:
		return 0, newAPIError(kerr.InvalidPartitions, "topic %q already has %d partitions", rt.Topic, have)
	case rt.Count < have:
		return 0, newAPIError(kerr.InvalidPartitions,
			"topic %q has %d partitions, more than the requested %d; partitions cannot be removed", rt.Topic, have, rt.Count)
	case rt.Count > maxPartitionsPerTopic:
		return 0, newAPIError(kerr.InvalidPartitions, "%d partitions is more than the limit of %d per topic", rt.Count, maxPartitionsPerTopic)
	}
	p0 := &vt.Parts[0]
	rf := len(p0.Replicas) - len(p0.Removing)
	var assignment [][]int32
	if rt.Assignment != nil {
		if want := int(rt.Count - have); len(rt.Assignment) != want {
			return 0, newAPIError(kerr.InvalidReplicaAssignment,
				"assignment lists %d partitions, but %d are being added", len(rt.Assignment), want)
		}
		assignment = make([][]int32, len(rt.Assignment))
		for i, a := range rt.Assignment {
			if err := checkReplicaList(v, a.Replicas, rf); err != nil {
				return 0, newAPIError(kerr.InvalidReplicaAssignment, "new partition %d: %v", int(have)+i, err)
			}
			assignment[i] = append([]int32(nil), a.Replicas...)
		}
	} else if live := v.LiveBrokers(); rf > live {
		return 0, newAPIError(kerr.InvalidReplicationFactor,
			"topic %q has replication factor %d, more than the %d available brokers", rt.Topic, rf, live)
	}
	if validateOnly {
		return 0, nil
	}
	if err := mq.record(int(rt.Count - have)); err != nil {
		return 0, err
	}
	r, err := s.cluster.ctl.Propose(ctx, controller.CreatePartitions{Topic: rt.Topic, Count: rt.Count, Assignment: assignment})
	if err != nil {
		return 0, proposeErr(err)
	}
	if r.Code != 0 {
		return 0, resultErr(r.Code, r.Message)
	}
	s.log.Info("added partitions", "topic", rt.Topic, "from", have, "to", rt.Count, "metadata_offset", r.Offset)
	return r.Offset, nil
}

func (s *Server) createPartitions(rt *kmsg.CreatePartitionsRequestTopic, validateOnly bool, mq *mutationQuota) error {
	t := s.eng.Topic(rt.Topic)
	if t == nil {
		return newAPIError(kerr.UnknownTopicOrPartition, "topic %q does not exist", rt.Topic)
	}
	have := t.Partitions()
	switch {
	case rt.Count == have:
		return newAPIError(kerr.InvalidPartitions, "topic %q already has %d partitions", rt.Topic, have)
	case rt.Count < have:
		return newAPIError(kerr.InvalidPartitions,
			"topic %q has %d partitions, more than the requested %d; partitions cannot be removed", rt.Topic, have, rt.Count)
	}
	if rt.Count > maxPartitionsPerTopic {
		return newAPIError(kerr.InvalidPartitions, "%d partitions is more than the limit of %d per topic", rt.Count, maxPartitionsPerTopic)
	}
	if rt.Assignment != nil {
		if want := int(rt.Count - have); len(rt.Assignment) != want {
			return newAPIError(kerr.InvalidReplicaAssignment,
				"assignment lists %d partitions, but %d are being added", len(rt.Assignment), want)
		}
		for i, a := range rt.Assignment {
			if len(a.Replicas) != 1 || a.Replicas[0] != s.cfg.NodeID {
				return newAPIError(kerr.InvalidReplicaAssignment,
					"new partition %d: replicas %v; this cluster has one broker, node %d, so the only assignment is [%d]",
					int(have)+i, a.Replicas, s.cfg.NodeID, s.cfg.NodeID)
			}
		}
	}
	if validateOnly {
		return nil
	}
	if err := mq.record(int(rt.Count - have)); err != nil {
		return err
	}
	if err := s.eng.CreatePartitions(rt.Topic, rt.Count); err != nil {
		return err
	}
	s.log.Info("added partitions", "topic", rt.Topic, "from", have, "to", rt.Count)
	return nil
}
