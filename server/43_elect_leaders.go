package server

import (
	"context"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders v0..v2.
func init() { register(43, 0, 2, handleElectLeaders) }

// handleElectLeaders runs preferred (type 0; v0 is always preferred) or
// unclean (type 1) leader elections through the controller, as Kafka's
// ElectLeaders does. Topics null means every partition, and then only the
// partitions whose leader changed are listed; otherwise every requested
// partition is answered: ELECTION_NOT_NEEDED when the preferred replica
// already leads (or, for unclean, a leader exists),
// PREFERRED_LEADER_NOT_AVAILABLE when it is not live and in sync,
// UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist. An unknown
// election type is INVALID_REQUEST for the whole request.
//
// A single broker leads every partition already: every existing partition
// is ELECTION_NOT_NEEDED.
func handleElectLeaders(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.ElectLeadersRequest)
	if !s.authorizedCluster(rc, auth.OpAlter) { // authz.go
		rc.respond(electLeadersResponse(nil, kerr.ClusterAuthorizationFailed.Code))
		return
	}
	typ := controller.ElectPreferred
	if req.Version >= 1 {
		typ = controller.ElectionType(req.ElectionType)
	}
	if typ != controller.ElectPreferred && typ != controller.ElectUnclean {
		resp := kmsg.NewPtrElectLeadersResponse()
		resp.ErrorCode = kerr.InvalidRequest.Code
		rc.respond(resp)
		return
	}
	var targets []controller.TopicPartition // nil: all
	if req.Topics != nil {
		targets = make([]controller.TopicPartition, 0, len(req.Topics))
		seen := make(map[controller.TopicPartition]bool)
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				tp := controller.TopicPartition{Topic: t.Topic, Partition: p}
				if !seen[tp] {
					seen[tp] = true
					targets = append(targets, tp)
				}
			}
		}
	}
	if !s.clustered() {
		var results []controller.PartitionResult
		for _, tp := range targets {
			code := kerr.ElectionNotNeeded.Code
			if t := s.eng.Topic(tp.Topic); t == nil || t.Partition(tp.Partition) == nil {
				code = kerr.UnknownTopicOrPartition.Code
			}
			results = append(results, controller.PartitionResult{Topic: tp.Topic, Partition: tp.Partition, Code: code})
		}
		rc.respond(electLeadersResponse(results, 0))
		return
	}
	s.goAdmin(req.TimeoutMillis, func(ctx context.Context) {
		r, err := s.cluster.ctl.Propose(ctx, controller.ElectLeaders{Election: typ, Partitions: targets})
		if err != nil {
			s.log.Warn("elect leaders: proposal failed", "err", err)
			rc.respond(electLeadersResponse(nil, proposeErr(err).code.Code))
			return
		}
		if r.Code != 0 {
			s.log.Info("elect leaders refused", "err", r.Err())
			rc.respond(electLeadersResponse(nil, r.Code))
			return
		}
		if err := s.waitView(ctx, r.Offset); err != nil {
			s.log.Debug("elect leaders: view not caught up", "err", err)
		}
		for _, p := range r.Partitions {
			if p.Code == 0 {
				s.log.Info("elected leader", "topic", p.Topic, "partition", p.Partition, "leader", p.Leader,
					"leader_epoch", p.LeaderEpoch, "election", typ)
			}
		}
		rc.respond(electLeadersResponse(r.Partitions, 0))
	})
}

// electLeadersResponse groups per-partition results by topic, in order.
// (The response has no top-level error message: a whole-request failure is
// logged.)
func electLeadersResponse(results []controller.PartitionResult, code int16) *kmsg.ElectLeadersResponse {
	resp := kmsg.NewPtrElectLeadersResponse()
	resp.ErrorCode = code
	idx := map[string]int{}
	for _, p := range results {
		i, ok := idx[p.Topic]
		if !ok {
			i = len(resp.Topics)
			idx[p.Topic] = i
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = p.Topic
			resp.Topics = append(resp.Topics, t)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, p.Code
		if p.Code != 0 && p.Message != "" {
			rp.ErrorMessage = kmsg.StringPtr(p.Message)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}
