package server

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/controller"

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
// is a bit set indexed by them. Without an authorizer every operation a
// resource supports is allowed, which is what Kafka answers without one;
// with one, the operations the principal is allowed (authz.go).
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
// auto.create.topics.enable is set and, from v4, the request allows it. As
// in Kafka, the answer that creates a topic says LEADER_NOT_AVAILABLE with
// no partitions (clients retry, and the next request describes the topic):
// a client that just deleted the topic (kafka-go's Conn.ReadPartitions after
// DeleteTopics) must not take the new topic's partitions for the old one's.
// Invalid names get INVALID_TOPIC_EXCEPTION, names that stay unknown
// UNKNOWN_TOPIC_OR_PARTITION, ids UNKNOWN_TOPIC_ID.
func handleMetadata(s *Server, rc *reqCtx) {
	if s.clustered() {
		s.clusterMetadata(rc)
		return
	}
	req := rc.req.(*kmsg.MetadataRequest)
	resp := kmsg.NewPtrMetadataResponse()
	host, port := s.advertisedFor(rc.conn) // the listener the client connected to
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: s.cfg.NodeID, Host: host, Port: port}}
	resp.ClusterID = &s.cfg.ClusterID
	resp.ControllerID = s.cfg.NodeID
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = s.authorizedOps(rc, auth.ResourceCluster, auth.ClusterName, clusterAuthorizedOps) // authz.go
	}
	topicOps := int32(authorizedOpsUnset)
	if req.IncludeTopicAuthorizedOperations {
		topicOps = topicAuthorizedOps
	}
	md := metadataBuilder{s: s, rc: rc, topicOps: topicOps, offline: s.eng.Offline() != nil}

	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		topics := s.eng.Topics()
		resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(topics))
		for _, t := range topics {
			if md.describable(t.Name()) { // authz.go: unauthorized topics are left out
				resp.Topics = append(resp.Topics, md.topic(t))
			}
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
				if !md.describable(t.Name()) {
					resp.Topics = append(resp.Topics, topicAuthFailed(nil, rt.TopicID))
					continue
				}
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
		if md.deniedNamed(name, autoCreate && s.eng.Topic(name) == nil) { // authz.go
			resp.Topics = append(resp.Topics, topicAuthFailed(&name, [16]byte{}))
			continue
		}
		resp.Topics = append(resp.Topics, md.named(name, autoCreate))
	}
	rc.respond(resp)
}

// metadataBuilder builds topic entries for one Metadata response.
type metadataBuilder struct {
	s        *Server
	rc       *reqCtx // whose principal must be allowed to Describe a topic (authz.go)
	topicOps int32
	offline  bool    // the log directory is offline: no partition has a leader
	nodes    []int32 // [NodeID], shared read-only by every partition's replicas and ISR
	// unreachable holds the registered brokers without an endpoint on the
	// request's listener (cluster mode): partitions they lead answer
	// LISTENER_NOT_FOUND.
	unreachable map[int32]bool
	version     int16
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
		if t := s.eng.Topic(name); t != nil {
			return md.topic(t)
		}
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code // created and deleted again in between
		return mt
	}
	if err != nil {
		s.log.Warn("metadata: auto-creating topic failed", "topic", name, "err", err)
		mt.ErrorCode = errCode(err)
		return mt
	}
	s.log.Info("auto-created topic", "topic", name, "partitions", t.Partitions())
	// Kafka's answer while it creates the topic (AutoTopicCreationManager):
	// no partitions yet, LEADER_NOT_AVAILABLE.
	mt.ErrorCode = kerr.LeaderNotAvailable.Code
	mt.IsInternal = internalTopics[name]
	return mt
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
	mt.IsInternal = internalTopics[t.Name()]
	mt.AuthorizedOperations = md.opsFor(t.Name()) // authz.go
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

// clusterMetadata answers Metadata from the controller's view (cluster
// mode): every unfenced broker, each partition's leader, leader epoch,
// replicas, ISR and offline replicas. A partition without a leader is
// LEADER_NOT_AVAILABLE. Unknown topics are auto-created through the
// controller (num.partitions, default.replication.factor); as in Kafka, the
// answer that creates a topic says LEADER_NOT_AVAILABLE with no partitions,
// and it waits until this broker's view has the new topic, so the client's
// next request sees its leaders. Internal topics that only exist locally (a coordinator's)
// are described as in single-broker mode.
func (s *Server) clusterMetadata(rc *reqCtx) {
	req := rc.req.(*kmsg.MetadataRequest)
	topicOps := int32(authorizedOpsUnset)
	if req.IncludeTopicAuthorizedOperations {
		topicOps = topicAuthorizedOps
	}
	md := &metadataBuilder{s: s, rc: rc, topicOps: topicOps, offline: s.eng.Offline() != nil}
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)

	var create []string
	if !all && autoCreate {
		v := s.cluster.view.Load()
		seen := map[string]bool{}
		for _, rt := range req.Topics {
			if rt.Topic == nil || seen[*rt.Topic] {
				continue
			}
			name := *rt.Topic
			seen[name] = true
			if v.Topics[name] == nil && validTopicName(name) == nil && !(internalTopics[name] && s.eng.Topic(name) != nil) &&
				!md.deniedNamed(name, true) { // authz.go: Describe and Create
				create = append(create, name)
			}
		}
	}
	if len(create) == 0 {
		rc.respond(s.clusterMetadataResponse(req, md, all, nil))
		return
	}
	s.goAdmin(10000, func(ctx context.Context) {
		failed := map[string]int16{}
		var maxOff int64
		for _, name := range create {
			r, err := s.cluster.ctl.Propose(ctx, controller.CreateTopic{
				Name: name, ID: controller.NewTopicID(), Partitions: s.cfg.NumPartitions,
				ReplicationFactor: s.cfg.DefaultReplication,
			})
			switch {
			case err != nil:
				failed[name] = proposeErr(err).code.Code
			case r.Code == kerr.TopicAlreadyExists.Code: // lost a race with another creator
				maxOff = max(maxOff, r.Offset)
			case r.Code != 0:
				s.log.Warn("metadata: auto-creating topic failed", "topic", name, "err", r.Err())
				failed[name] = r.Code
			default:
				s.log.Info("auto-created topic", "topic", name, "partitions", s.cfg.NumPartitions,
					"replication_factor", s.cfg.DefaultReplication)
				maxOff = max(maxOff, r.Offset)
				failed[name] = kerr.LeaderNotAvailable.Code // Kafka's first answer: being created
			}
		}
		if err := s.waitView(ctx, maxOff); err != nil {
			for _, name := range create {
				if _, ok := failed[name]; !ok {
					failed[name] = kerr.LeaderNotAvailable.Code
				}
			}
		}
		rc.respond(s.clusterMetadataResponse(req, md, all, failed))
	})
}

// clusterMetadataResponse builds the answer from the current view; failed
// holds the error codes of topics whose auto-creation failed, and
// LEADER_NOT_AVAILABLE for those this request created.
func (s *Server) clusterMetadataResponse(req *kmsg.MetadataRequest, md *metadataBuilder, all bool, failed map[string]int16) *kmsg.MetadataResponse {
	v := s.cluster.view.Load()
	resp := kmsg.NewPtrMetadataResponse()
	listener := ""
	if md.rc != nil {
		listener = listenerOf(md.rc.conn)
	}
	md.version = req.Version
	for i := range v.Brokers {
		b := &v.Brokers[i]
		host, port, ok := b.Endpoint(listener)
		if !ok {
			if md.unreachable == nil {
				md.unreachable = map[int32]bool{}
			}
			md.unreachable[b.ID] = true
		}
		if b.Fenced || !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = b.ID, host, port
		if b.Rack != "" {
			mb.Rack = kmsg.StringPtr(b.Rack)
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	resp.ClusterID = &s.cfg.ClusterID
	resp.ControllerID = s.metadataControllerID(v)
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterAuthorizedOps
		if md.rc != nil {
			resp.AuthorizedOperations = s.authorizedOps(md.rc, auth.ResourceCluster, auth.ClusterName, clusterAuthorizedOps) // authz.go
		}
	}
	if all {
		names := make([]string, 0, len(v.Topics))
		for n := range v.Topics {
			names = append(names, n)
		}
		sort.Strings(names)
		resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(names))
		for _, n := range names {
			if md.describable(n) { // authz.go: unauthorized topics are left out
				resp.Topics = append(resp.Topics, md.clusterTopic(v.Topics[n]))
			}
		}
		for _, t := range s.eng.Topics() {
			if v.Topics[t.Name()] == nil && strings.HasPrefix(t.Name(), "__") && md.describable(t.Name()) {
				resp.Topics = append(resp.Topics, md.topic(t))
			}
		}
		return resp
	}
	resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(req.Topics))
	seenNames := make(map[string]struct{}, len(req.Topics))
	seenIDs := make(map[[16]byte]struct{})
	for i := range req.Topics {
		rt := &req.Topics[i]
		if rt.Topic == nil {
			if _, dup := seenIDs[rt.TopicID]; dup {
				continue
			}
			seenIDs[rt.TopicID] = struct{}{}
			if vt := v.ByID[rt.TopicID]; vt != nil {
				if !md.describable(vt.Name) {
					resp.Topics = append(resp.Topics, topicAuthFailed(nil, rt.TopicID))
					continue
				}
				resp.Topics = append(resp.Topics, md.clusterTopic(vt))
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
		autoCreate := md.s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
		if md.deniedNamed(name, autoCreate && v.Topics[name] == nil && s.eng.Topic(name) == nil) { // authz.go
			resp.Topics = append(resp.Topics, topicAuthFailed(&name, [16]byte{}))
			continue
		}
		if vt := v.Topics[name]; vt != nil && failed[name] != kerr.LeaderNotAvailable.Code {
			resp.Topics = append(resp.Topics, md.clusterTopic(vt))
			continue
		}
		if t := s.eng.Topic(name); t != nil && strings.HasPrefix(name, "__") {
			resp.Topics = append(resp.Topics, md.topic(t))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr(name)
		switch code, ok := failed[name]; {
		case validTopicName(name) != nil:
			mt.ErrorCode = kerr.InvalidTopicException.Code
		case ok:
			mt.ErrorCode = code
		default:
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

// metadataControllerID is the controller id Metadata and DescribeCluster
// report: the Raft leader when it is a live broker, else this broker (any
// broker forwards controller requests to the quorum leader).
func (s *Server) metadataControllerID(v *clusterView) int32 {
	if id := s.controllerID(); id >= 0 {
		if b, ok := v.Broker(id); ok && !b.Fenced {
			return id
		}
	}
	return s.cfg.NodeID
}

// clusterTopic describes a topic of the controller's view.
func (md *metadataBuilder) clusterTopic(vt *viewTopic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(vt.Name)
	mt.TopicID = vt.ID
	mt.IsInternal = internalTopics[vt.Name]
	mt.AuthorizedOperations = md.opsFor(vt.Name) // authz.go
	withEpochs := md.s.cluster.repl != nil
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, len(vt.Parts))
	for i := range vt.Parts {
		vp := &vt.Parts[i]
		mp := &mt.Partitions[i]
		mp.Default()
		mp.Partition = int32(i)
		mp.Replicas, mp.ISR, mp.OfflineReplicas = vp.Replicas, vp.ISR, vp.Offline
		mp.Leader = vp.Leader
		// Without a replica manager the logs do not carry the controller's
		// leader epochs, so none is advertised (clients then skip the
		// epoch checks rather than fail them).
		mp.LeaderEpoch = -1
		if withEpochs {
			mp.LeaderEpoch = vp.LeaderEpoch
		}
		// With its directory offline this broker leads nothing it can
		// serve; the partitions other brokers lead are described as the
		// controller has them (it moves leaderships off this broker once
		// its heartbeat reports the directory, KIP-112).
		switch {
		case vp.Leader < 0 || (md.offline && vp.Leader == md.s.cfg.NodeID):
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			mp.Leader = -1
		case md.unreachable[vp.Leader]:
			// The leader has no endpoint on this client's listener (Kafka:
			// LISTENER_NOT_FOUND from v6, LEADER_NOT_AVAILABLE before).
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			if md.version >= 6 {
				mp.ErrorCode = kerr.ListenerNotFound.Code
			}
			mp.Leader = -1
		}
	}
	return mt
}
