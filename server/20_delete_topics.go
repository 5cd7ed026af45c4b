package server

import (
	"context"

	"github.com/stratalog/strata/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics v0..v6.
func init() { register(20, 0, 6, handleDeleteTopics) }

// handleDeleteTopics deletes topics by name (v0..v5: TopicNames; v6: Topics
// with a name) or by id (v6, name null). Unknown names get
// UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID; an entry with both
// a name and a non-zero id, or neither, is INVALID_REQUEST; a topic named
// twice in one request is INVALID_REQUEST for that topic and is not deleted.
// Each topic's partitions are taken from the client's
// controller_mutation_rate quota as it is deleted; from v5 a topic that
// finds it exhausted is THROTTLING_QUOTA_EXCEEDED and stays
// (mutation_quota.go).
func handleDeleteTopics(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DeleteTopicsRequest)
	if s.clustered() {
		s.goAdmin(req.TimeoutMillis, func(ctx context.Context) { rc.respond(s.deleteTopics(ctx, rc, req)) })
		return
	}
	rc.respond(s.deleteTopics(nil, rc, req))
}

// deleteTopics answers a DeleteTopics request: through the controller when
// ctx is not nil (cluster mode; the answer waits until this broker's view
// has the deletions), else on the engine. rc's principal needs Delete on
// each topic (authz.go).
func (s *Server) deleteTopics(ctx context.Context, rc *reqCtx, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	resp := kmsg.NewPtrDeleteTopicsResponse()
	mq := s.newMutationQuota(rc, 5) // mutation_quota.go

	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version < 6 {
		targets = make([]target, len(req.TopicNames))
		for i := range req.TopicNames {
			targets[i].name = &req.TopicNames[i]
		}
	} else {
		targets = make([]target, len(req.Topics))
		for i, t := range req.Topics {
			targets[i] = target{name: t.Topic, id: t.TopicID}
		}
	}

	names := make(map[string]int, len(targets))
	ids := make(map[[16]byte]int, len(targets))
	for _, t := range targets {
		if t.name != nil {
			names[*t.name]++
		} else {
			ids[t.id]++
		}
	}

	resp.Topics = make([]kmsg.DeleteTopicsResponseTopic, 0, len(targets))
	var maxOff int64
	for _, t := range targets {
		out := kmsg.NewDeleteTopicsResponseTopic()
		out.Topic, out.TopicID = t.name, t.id
		var code *kerr.Error
		var msg string
		switch {
		case t.name != nil && t.id != [16]byte{}:
			code, msg = kerr.InvalidRequest, "a topic must be named by name or by id, not both"
		case t.name == nil && t.id == [16]byte{}:
			code, msg = kerr.InvalidRequest, "a topic must be named by name or by id"
		case t.name != nil && names[*t.name] > 1, t.name == nil && ids[t.id] > 1:
			code, msg = kerr.InvalidRequest, "topic named more than once in one DeleteTopics request"
		case !s.mayDeleteTopic(rc, t.name, t.id): // authz.go
			code, msg = kerr.TopicAuthorizationFailed, "not authorized to delete the topic"
		case ctx != nil:
			off, err := s.clusterDeleteTopic(ctx, t.name, t.id, mq, &out)
			maxOff = max(maxOff, off)
			if err != nil {
				out.ErrorCode, out.ErrorMessage = apiErrCode(err), errMessage(err)
			}
		case t.name != nil:
			if topic := s.eng.Topic(*t.name); topic != nil {
				out.TopicID = topic.ID()
				if err := mq.record(int(topic.Partitions())); err != nil {
					out.ErrorCode, out.ErrorMessage = apiErrCode(err), errMessage(err)
					break
				}
			}
			if err := s.eng.DeleteTopic(*t.name); err != nil {
				out.ErrorCode, out.ErrorMessage = errCode(err), errMessage(err)
			} else {
				s.log.Info("deleted topic", "topic", *t.name)
			}
		default:
			topic := s.eng.TopicByID(t.id)
			if topic == nil {
				code, msg = kerr.UnknownTopicID, "no topic has this id"
				break
			}
			name := topic.Name()
			out.Topic = &name
			if err := mq.record(int(topic.Partitions())); err != nil {
				out.ErrorCode, out.ErrorMessage = apiErrCode(err), errMessage(err)
				break
			}
			if err := s.eng.DeleteTopic(name); err != nil {
				out.ErrorCode, out.ErrorMessage = errCode(err), errMessage(err)
			} else {
				s.log.Info("deleted topic", "topic", name)
			}
		}
		if code != nil {
			out.ErrorCode, out.ErrorMessage = code.Code, &msg
		}
		resp.Topics = append(resp.Topics, out)
	}
	if ctx != nil {
		if err := s.waitView(ctx, maxOff); err != nil {
			for i := range resp.Topics {
				if resp.Topics[i].ErrorCode == 0 {
					resp.Topics[i].ErrorCode = kerr.RequestTimedOut.Code
				}
			}
		}
	}
	rc.throttleMutations(mq, &resp.ThrottleMillis)
	return resp
}

// clusterDeleteTopic proposes one deletion by name or id, once the topic's
// partitions are taken from mq; it returns the metadata offset of the
// deletion.
func (s *Server) clusterDeleteTopic(ctx context.Context, name *string, id [16]byte, mq *mutationQuota, out *kmsg.DeleteTopicsResponseTopic) (int64, error) {
	cmd := controller.DeleteTopic{ID: id}
	partitions := 0
	if name != nil {
		cmd.Name = *name
		if vt := s.cluster.view.Load().Topics[*name]; vt != nil {
			out.TopicID = vt.ID
			partitions = len(vt.Parts)
		}
	} else if vt := s.cluster.view.Load().ByID[id]; vt != nil {
		n := vt.Name
		out.Topic = &n
		partitions = len(vt.Parts)
	}
	if partitions > 0 {
		if err := mq.record(partitions); err != nil {
			return 0, err
		}
	}
	r, err := s.cluster.ctl.Propose(ctx, cmd)
	if err != nil {
		return 0, proposeErr(err)
	}
	if r.Code != 0 {
		return 0, resultErr(r.Code, r.Message)
	}
	out.TopicID = r.TopicID
	s.log.Info("deleted topic", "topic", cmd.Name, "id", controller.TopicID(r.TopicID).String(), "metadata_offset", r.Offset)
	return r.Offset, nil
}
