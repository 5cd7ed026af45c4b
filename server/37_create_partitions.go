package server

import (
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
// ValidateOnly checks without growing.
func handleCreatePartitions(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.CreatePartitionsRequest)
	resp := kmsg.NewPtrCreatePartitionsResponse()
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
		} else {
			err = s.createPartitions(rt, req.ValidateOnly)
		}
		if err != nil {
			out.ErrorCode, out.ErrorMessage = apiErrCode(err), errMessage(err)
		}
		resp.Topics = append(resp.Topics, out)
	}
	rc.respond(resp)
}

func (s *Server) createPartitions(rt *kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
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
	if err := s.eng.CreatePartitions(rt.Topic, rt.Count); err != nil {
		return err
	}
	s.log.Info("added partitions", "topic", rt.Topic, "from", have, "to", rt.Count)
	return nil
}
