package server

import (
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
func handleDeleteTopics(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.DeleteTopicsRequest)
	resp := kmsg.NewPtrDeleteTopicsResponse()

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
		case t.name != nil:
			if topic := s.eng.Topic(*t.name); topic != nil {
				out.TopicID = topic.ID()
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
	rc.respond(resp)
}
