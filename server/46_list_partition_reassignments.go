package server

import (
	"sort"

	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListPartitionReassignments v0..v0.
func init() { register(46, 0, 0, handleListPartitionReassignments) }

// handleListPartitionReassignments lists the reassignments in progress
// (KIP-455) from this broker's metadata view: every one when Topics is null,
// else those of the named partitions (partitions that do not exist or are
// not being reassigned are left out, as in Kafka). Replicas is the current
// (union) replica set; AddingReplicas and RemovingReplicas the difference to
// the target. A single broker never reassigns: the list is empty.
func handleListPartitionReassignments(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.ListPartitionReassignmentsRequest)
	resp := kmsg.NewPtrListPartitionReassignmentsResponse()
	if !s.authorizedCluster(rc, auth.OpDescribe) { // authz.go
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		rc.respond(resp)
		return
	}
	if !s.clustered() {
		rc.respond(resp)
		return
	}
	v := s.cluster.view.Load()
	add := func(vt *viewTopic, parts []int32) {
		var out []kmsg.ListPartitionReassignmentsResponseTopicPartition
		for _, p := range parts {
			if p < 0 || int(p) >= len(vt.Parts) {
				continue
			}
			vp := &vt.Parts[p]
			if len(vp.Adding) == 0 && len(vp.Removing) == 0 {
				continue
			}
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition, rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = p, vp.Replicas, vp.Adding, vp.Removing
			out = append(out, rp)
		}
		if len(out) > 0 {
			t := kmsg.NewListPartitionReassignmentsResponseTopic()
			t.Topic, t.Partitions = vt.Name, out
			resp.Topics = append(resp.Topics, t)
		}
	}
	if req.Topics == nil {
		names := make([]string, 0, len(v.Topics))
		for n := range v.Topics {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			vt := v.Topics[n]
			parts := make([]int32, len(vt.Parts))
			for i := range parts {
				parts[i] = int32(i)
			}
			add(vt, parts)
		}
	} else {
		for _, t := range req.Topics {
			if vt := v.Topics[t.Topic]; vt != nil {
				add(vt, t.Partitions)
			}
		}
	}
	rc.respond(resp)
}
