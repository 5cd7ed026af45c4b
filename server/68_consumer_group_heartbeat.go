package server

// ConsumerGroupHeartbeat (API key 68), v0..v1: KIP-848 consumer groups,
// with the assignment computed here (see group/consumer.go for the
// reconciliation rules). v0 joins with an empty member id and gets one;
// v1 clients bring their own (required). Owned and assigned partitions
// travel by topic id; owned partitions of topics this broker does not know
// are ignored. Subscriptions by name and by regular expression (RE2, the
// syntax Kafka's RE2/J accepts) are served; a regex matches whole topic
// names, internal topics included, as in Kafka. Server assignors: "uniform" (default) and "range".

import (
	"slices"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(68, 0, 1, handleConsumerGroupHeartbeat) }

// engineCatalog is group.Catalog over the engine's topics.
type engineCatalog struct{ eng *engine.Engine }

func (c engineCatalog) Partitions(topic string) int32 {
	if t := c.eng.Topic(topic); t != nil && !t.Deleted() {
		return t.Partitions()
	}
	return 0
}

func (c engineCatalog) Names() []string {
	ts := c.eng.Topics()
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		if !t.Deleted() {
			out = append(out, t.Name())
		}
	}
	return out
}

func handleConsumerGroupHeartbeat(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, msg string) {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		rc.respond(resp)
	}
	c, code := s.groupCoordinator()
	code = s.groupAuthorized(rc, req.Group, code) // authz.go: Read on the group
	switch {
	case code != 0:
		fail(code, "")
		return
	case req.Group == "":
		fail(kerr.InvalidGroupID.Code, "empty group id")
		return
	case req.Version >= 1 && req.MemberID == "":
		fail(kerr.InvalidRequest.Code, "member id is required from v1")
		return
	}
	hr := group.HeartbeatRequest{
		Group: req.Group, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		ClientID: rc.client, ClientHost: clientHost(rc),
		RebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		Topics:             req.SubscribedTopicNames, Regex: req.SubscribedTopicRegex, Assignor: req.ServerAssignor,
	}
	if req.InstanceID != nil {
		hr.InstanceID = *req.InstanceID
	}
	if req.RackID != nil {
		hr.RackID = *req.RackID
	}
	if req.Topics != nil {
		hr.OwnedSet = true
		hr.Owned = make(map[string][]int32, len(req.Topics))
		for _, t := range req.Topics {
			if topic := s.eng.TopicByID(t.TopicID); topic != nil {
				hr.Owned[topic.Name()] = append(hr.Owned[topic.Name()], t.Partitions...)
			}
		}
	}
	r := c.ConsumerHeartbeat(hr, engineCatalog{s.eng})
	if r.Err != 0 {
		fail(r.Err, r.Msg)
		return
	}
	resp.MemberID = kmsg.StringPtr(r.MemberID)
	resp.MemberEpoch = r.MemberEpoch
	resp.HeartbeatIntervalMillis = r.HeartbeatIntervalMs
	if r.HasAssignment {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		names := make([]string, 0, len(r.Assignment))
		for t := range r.Assignment {
			names = append(names, t)
		}
		slices.Sort(names)
		for _, name := range names {
			topic := s.eng.Topic(name)
			if topic == nil {
				continue
			}
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = topic.ID(), r.Assignment[name]
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	rc.respond(resp)
}
