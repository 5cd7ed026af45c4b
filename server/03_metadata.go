package server

import (
	"errors"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata v0..v12.
func init() { register(3, 0, 12, handleMetadata) }

// authorizedOpsUnset is the AuthorizedOperations value of a response to a
// request that did not ask for them (Kafka's Integer.MIN_VALUE).
const authorizedOpsUnset = -2147483648

// ACL operation codes (Kafka's AclOperation); an authorized-operations field
// is a bit set indexed by them. Strata has no authorizer, so every operation a
// resource supports is allowed, which is what Kafka answers without one.
const (
	aclRead            = 3
	aclWrite           = 4
	aclCreate          = 5
	aclDelete          = 6
	aclAlter           = 7
	aclDescribe        = 8
	aclClusterAction   = 9
	aclDescribeConfigs = 10
	aclAlterConfigs    = 11
	aclIdempotentWrite = 12
	aclCreateTokens    = 13
	aclDescribeTokens  = 14
)

const (
	topicAuthorizedOps int32 = 1<<aclRead | 1<<aclWrite | 1<<aclCreate | 1<<aclDelete |
		1<<aclAlter | 1<<aclDescribe | 1<<aclDescribeConfigs | 1<<aclAlterConfigs
	clusterAuthorizedOps int32 = 1<<aclCreate | 1<<aclAlter | 1<<aclDescribe | 1<<aclClusterAction |
		1<<aclDescribeConfigs | 1<<aclAlterConfigs | 1<<aclIdempotentWrite |
		1<<aclCreateTokens | 1<<aclDescribeTokens
)

// handleMetadata describes this one-broker cluster and the requested topics.
//
// Which topics: a null list (v1+) means all topics; an empty list means all
// in v0 and none from v1 on. From v10 a topic may be named by id only (name
// null), resolved with engine.TopicByID. Duplicates are answered once.
//
// Unknown topics are created (num.partitions, broker defaults) when
// auto.create.topics.enable is set and, from v4, the request allows it; the
// new topic is returned at once with no error, as it is immediately
// servable on a single broker (clients would otherwise retry on
// LEADER_NOT_AVAILABLE). Invalid names get INVALID_TOPIC_EXCEPTION, names
// that stay unknown UNKNOWN_TOPIC_OR_PARTITION, ids UNKNOWN_TOPIC_ID.
func handleMetadata(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.MetadataRequest)
	resp := kmsg.NewPtrMetadataResponse()
	host, port := s.Advertised()
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: s.cfg.NodeID, Host: host, Port: port}}
	resp.ClusterID = &s.cfg.ClusterID
	resp.ControllerID = s.cfg.NodeID
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterAuthorizedOps
	}
	topicOps := int32(authorizedOpsUnset)
	if req.IncludeTopicAuthorizedOperations {
		topicOps = topicAuthorizedOps
	}
	md := metadataBuilder{s: s, topicOps: topicOps, offline: s.eng.Offline() != nil}

	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		topics := s.eng.Topics()
		resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(topics))
		for _, t := range topics {
			resp.Topics = append(resp.Topics, md.topic(t))
		}
		rc.respond(resp)
		return
	}

	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(req.Topics))
	seenNames := make(map[string]struct{}, len(req.Topics))
	var seenIDs map[[16]byte]struct{}
	for i := range req.Topics {
		rt := &req.Topics[i]
		if rt.Topic == nil {
			if seenIDs == nil {
				seenIDs = make(map[[16]byte]struct{})
			}
			if _, dup := seenIDs[rt.TopicID]; dup {
				continue
			}
			seenIDs[rt.TopicID] = struct{}{}
			if t := s.eng.TopicByID(rt.TopicID); t != nil && rt.TopicID != ([16]byte{}) {
				resp.Topics = append(resp.Topics, md.topic(t))
				continue
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID = rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		name := *rt.Topic
		if _, dup := seenNames[name]; dup {
			continue
		}
		seenNames[name] = struct{}{}
		resp.Topics = append(resp.Topics, md.named(name, autoCreate))
	}
	rc.respond(resp)
}

// metadataBuilder builds topic entries for one Metadata response.
type metadataBuilder struct {
	s        *Server
	topicOps int32
	offline  bool    // the log directory is offline: no partition has a leader
	nodes    []int32 // [NodeID], shared read-only by every partition's replicas and ISR
}

// named answers for a topic requested by name, creating it if allowed.
func (md *metadataBuilder) named(name string, autoCreate bool) kmsg.MetadataResponseTopic {
	s := md.s
	if t := s.eng.Topic(name); t != nil {
		return md.topic(t)
	}
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(name)
	if err := validTopicName(name); err != nil {
		mt.ErrorCode = kerr.InvalidTopicException.Code
		return mt
	}
	if !autoCreate {
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return mt
	}
	t, err := s.eng.CreateTopic(name, s.cfg.NumPartitions, nil)
	if errors.Is(err, engine.ErrTopicExists) { // lost a race with another creator
		t, err = s.eng.Topic(name), nil
	}
	if err != nil || t == nil {
		code := errCode(err)
		if t == nil && err == nil { // created and deleted again in between
			code = kerr.UnknownTopicOrPartition.Code
		}
		s.log.Warn("metadata: auto-creating topic failed", "topic", name, "err", err)
		mt.ErrorCode = code
		return mt
	}
	s.log.Info("auto-created topic", "topic", name, "partitions", t.Partitions())
	return md.topic(t)
}

// topic describes an existing topic and its partitions: this broker leads
// every partition and is its only replica.
func (md *metadataBuilder) topic(t *engine.Topic) kmsg.MetadataResponseTopic {
	if md.nodes == nil {
		md.nodes = []int32{md.s.cfg.NodeID}
	}
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name())
	mt.TopicID = t.ID()
	mt.AuthorizedOperations = md.topicOps
	n := t.Partitions()
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, n)
	for p := int32(0); p < n; p++ {
		mp := &mt.Partitions[p]
		mp.Default()
		mp.Partition = p
		mp.Replicas = md.nodes
		l := t.Partition(p)
		if l == nil || md.offline {
			// Kafka's answer for a partition with no live leader; clients
			// back off and refresh.
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			mp.Leader = -1
			mp.OfflineReplicas = md.nodes
			continue
		}
		mp.Leader = md.s.cfg.NodeID
		mp.LeaderEpoch = l.LeaderEpoch()
		mp.ISR = md.nodes
	}
	return mt
}
