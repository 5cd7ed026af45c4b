package server

import (
	"net"

	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorization (issue 20). When Config.Authorizer is set (the broker's
// authorizer.class.name is Kafka's StandardAuthorizer), every handler that
// Kafka checks asks authorized before it acts, with the connection's
// principal (User:<name> after SASL, the certificate's on mTLS,
// User:ANONYMOUS otherwise) and its client's IP address as the host; the
// rules are package auth's. Without an authorizer everything is allowed,
// as in Kafka without authorizer.class.name.
//
// What is checked, as Kafka's KafkaApis does:
//
//	Produce                 Write topic (TOPIC_AUTHORIZATION_FAILED per partition);
//	                        with a transactional id also Write on it
//	                        (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the request)
//	Fetch                   Read topic; a follower fetch ClusterAction on the cluster
//	ListOffsets             Describe topic
//	OffsetForLeaderEpoch    Describe topic; a follower's ClusterAction
//	Metadata                Describe topic (unauthorized topics are left out of an
//	                        all-topics answer, TOPIC_AUTHORIZATION_FAILED when named);
//	                        auto-creation Create on the cluster or the topic
//	CreateTopics            Create on the cluster or the topic
//	DeleteTopics            Delete topic; DeleteRecords Delete topic
//	CreatePartitions        Alter topic
//	group APIs              Read group (GROUP_AUTHORIZATION_FAILED); OffsetCommit
//	                        also Read topic, OffsetFetch Describe group and topic;
//	                        DescribeGroups, ConsumerGroupDescribe, FindCoordinator
//	                        Describe group; ListGroups lists the groups the principal
//	                        may Describe (all with Describe on the cluster);
//	                        DeleteGroups Delete group; OffsetDelete Delete group and
//	                        Read topic
//	InitProducerId          Write on the transactional id; without one IdempotentWrite
//	                        on the cluster or Write on some topic
//	transactions            AddPartitionsToTxn Write on the id and the topics (v4+, a
//	                        broker's, ClusterAction); AddOffsetsToTxn and
//	                        TxnOffsetCommit Write on the id and Read on the group;
//	                        EndTxn Write on the id; DescribeTransactions and
//	                        FindCoordinator Describe on the id
//	WriteTxnMarkers         ClusterAction on the cluster
//	Describe/AlterConfigs   DescribeConfigs/AlterConfigs on the topic, or for a broker
//	                        the cluster (CLUSTER_AUTHORIZATION_FAILED)
//	DescribeProducers       Read topic
//	cluster admin           ElectLeaders, AlterPartitionReassignments,
//	                        AlterUserScramCredentials, CreateAcls, DeleteAcls Alter on
//	                        the cluster; ListPartitionReassignments,
//	                        DescribeUserScramCredentials, DescribeAcls Describe
//	DescribeLogDirs         Describe on the cluster
//	ListTransactions        lists the transactional ids the principal may Describe
//
// Not checked yet: the share-group APIs; DescribeCluster needs nothing in
// Kafka either. The authorized-operations fields (Metadata, DescribeCluster,
// DescribeGroups, ConsumerGroupDescribe) hold the operations the principal
// is allowed (authorizedOps).

// principaled is what authorization needs of a connection
// (*netpoll.Conn).
type principaled interface {
	Principal() string
}

// principal is the connection's principal (auth.Anonymous when the
// connection has none).
func (rc *reqCtx) principal() string {
	if p, ok := rc.conn.(principaled); ok {
		if s := p.Principal(); s != "" {
			return s
		}
	}
	return auth.Anonymous
}

// host is the client's IP address, as Kafka's ACL hosts name it.
func (rc *reqCtx) host() string {
	if rc.conn == nil {
		return ""
	}
	switch a := rc.conn.RemoteAddr().(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case nil:
		return ""
	default:
		h, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return a.String()
		}
		return h
	}
}

// authorized reports whether rc's principal may perform op on the
// resource: always without an authorizer.
func (s *Server) authorized(rc *reqCtx, op auth.Operation, rt auth.ResourceType, name string) bool {
	a := s.cfg.Authorizer
	if a == nil {
		return true
	}
	ok := a.Authorize(rc.principal(), rc.host(), op, rt, name)
	if !ok {
		s.log.Debug("authorization denied", "principal", rc.principal(), "host", rc.host(),
			"operation", op.String(), "resource_type", rt.String(), "resource", name, "api", rc.key)
	}
	return ok
}

// authorizedCluster is authorized on the cluster resource.
func (s *Server) authorizedCluster(rc *reqCtx, op auth.Operation) bool {
	return s.authorized(rc, op, auth.ResourceCluster, auth.ClusterName)
}

// mayCreateTopic is Kafka's check for creating a topic: Create on the
// cluster or on the topic.
func (s *Server) mayCreateTopic(rc *reqCtx, name string) bool {
	return s.authorizedCluster(rc, auth.OpCreate) || s.authorized(rc, auth.OpCreate, auth.ResourceTopic, name)
}

// authorizedTopic is Fetch's check of one topic: Read on it for a
// consumer, ClusterAction on the cluster for a follower (Kafka answers
// TOPIC_AUTHORIZATION_FAILED for every partition of a follower fetch
// without it).
func (f *fetchState) authorizedTopic(name string) bool {
	if !f.consumer {
		return f.s.authorizedCluster(f.rc, auth.OpClusterAction)
	}
	return f.s.authorized(f.rc, auth.OpRead, auth.ResourceTopic, name)
}

// describable reports whether the Metadata request's principal may
// Describe topic name.
func (md *metadataBuilder) describable(name string) bool {
	return md.rc == nil || md.s.authorized(md.rc, auth.OpDescribe, auth.ResourceTopic, name)
}

// deniedNamed reports whether a topic named in a Metadata request is
// answered TOPIC_AUTHORIZATION_FAILED: the principal may not Describe
// it, or create is true (it would be auto-created) and it may not create
// it (Kafka's unauthorizedForCreateTopics).
func (md *metadataBuilder) deniedNamed(name string, create bool) bool {
	if md.rc == nil {
		return false
	}
	return !md.describable(name) || (create && !md.s.mayCreateTopic(md.rc, name))
}

// topicAuthFailed is the Metadata entry of a topic the principal may not
// see: its name or id as asked, no partitions.
func topicAuthFailed(name *string, id [16]byte) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID = name, id
	mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
	return mt
}

// mayDeleteTopic is DeleteTopics' check: Delete on the topic, named or
// by id (an id no topic has is answered UNKNOWN_TOPIC_ID by the caller).
func (s *Server) mayDeleteTopic(rc *reqCtx, name *string, id [16]byte) bool {
	if s.cfg.Authorizer == nil {
		return true
	}
	n := ""
	switch {
	case name != nil:
		n = *name
	case s.clustered():
		if vt := s.cluster.view.Load().ByID[id]; vt != nil {
			n = vt.Name
		}
	default:
		if t := s.eng.TopicByID(id); t != nil {
			n = t.Name()
		}
	}
	return n == "" || s.authorized(rc, auth.OpDelete, auth.ResourceTopic, n)
}

// groupAuthorized is the check of the group APIs (JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup, ConsumerGroupHeartbeat): code, or
// GROUP_AUTHORIZATION_FAILED when code is 0 and rc's principal may not
// Read the group.
func (s *Server) groupAuthorized(rc *reqCtx, group string, code int16) int16 {
	if code == 0 && !s.authorized(rc, auth.OpRead, auth.ResourceGroup, group) {
		return kerr.GroupAuthorizationFailed.Code
	}
	return code
}

// mayIdempotentWrite is InitProducerId's check without a transactional
// id, Kafka's: IdempotentWrite on the cluster, or Write on some topic.
func (s *Server) mayIdempotentWrite(rc *reqCtx) bool {
	a := s.cfg.Authorizer
	if a == nil || s.authorizedCluster(rc, auth.OpIdempotentWrite) {
		return true
	}
	return a.AuthorizeByResourceType(rc.principal(), rc.host(), auth.OpWrite, auth.ResourceTopic)
}

// configsDenied is the check of DescribeConfigs, AlterConfigs and
// IncrementalAlterConfigs on one resource (op DescribeConfigs or
// AlterConfigs): nil when allowed, else Kafka's error — a topic
// TOPIC_AUTHORIZATION_FAILED, a broker (the cluster resource)
// CLUSTER_AUTHORIZATION_FAILED, a group GROUP_AUTHORIZATION_FAILED.
// Other resource types are left to the handler (INVALID_REQUEST).
func (s *Server) configsDenied(rc *reqCtx, op auth.Operation, rt kmsg.ConfigResourceType, name string) *apiError {
	if s.cfg.Authorizer == nil {
		return nil
	}
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if !s.authorized(rc, op, auth.ResourceTopic, name) {
			return newAPIError(kerr.TopicAuthorizationFailed, "not authorized to %s topic %q", op, name)
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !s.authorizedCluster(rc, op) {
			return newAPIError(kerr.ClusterAuthorizationFailed, "not authorized to %s the cluster", op)
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !s.authorized(rc, op, auth.ResourceGroup, name) {
			return newAPIError(kerr.GroupAuthorizationFailed, "not authorized to %s group %q", op, name)
		}
	}
	return nil
}

// coordinatorDenied is FindCoordinator's check of one key: Describe on
// the group (GROUP_AUTHORIZATION_FAILED) or on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); 0 when allowed.
func (s *Server) coordinatorDenied(rc *reqCtx, keyType int8, key string) int16 {
	switch keyType {
	case coordinatorKeyGroup:
		if !s.authorized(rc, auth.OpDescribe, auth.ResourceGroup, key) {
			return kerr.GroupAuthorizationFailed.Code
		}
	case coordinatorKeyTransaction:
		if !s.authorized(rc, auth.OpDescribe, auth.ResourceTransactionalID, key) {
			return kerr.TransactionalIDAuthorizationFailed.Code
		}
	}
	return 0
}

// deleteGroupsAllowed is DeleteGroups' check: the groups rc's principal
// may Delete, and an answer for the coordinator's codes of those that
// fills in GROUP_AUTHORIZATION_FAILED for the others (in request order).
func (s *Server) deleteGroupsAllowed(rc *reqCtx, groups []string, answer func([]int16)) ([]string, func([]int16)) {
	var ok []string
	var at []int
	for i, g := range groups {
		if s.authorized(rc, auth.OpDelete, auth.ResourceGroup, g) {
			ok, at = append(ok, g), append(at, i)
		}
	}
	if len(ok) == len(groups) {
		return groups, answer
	}
	return ok, func(codes []int16) {
		full := make([]int16, len(groups))
		for i := range full {
			full[i] = kerr.GroupAuthorizationFailed.Code
		}
		for k, i := range at {
			if k < len(codes) {
				full[i] = codes[k]
			}
		}
		answer(full)
	}
}

// scramAlterDenied answers an AlterUserScramCredentials request without
// Alter on the cluster: CLUSTER_AUTHORIZATION_FAILED for each user named.
func scramAlterDenied(req *kmsg.AlterUserSCRAMCredentialsRequest) []kmsg.AlterUserSCRAMCredentialsResponseResult {
	var out []kmsg.AlterUserSCRAMCredentialsResponseResult
	seen := map[string]bool{}
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = user, kerr.ClusterAuthorizationFailed.Code
		out = append(out, r)
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return out
}

// groupAuthorizedOps are the operations a group supports (Kafka's
// AclEntry.supportedOperations(GROUP)), DescribeGroups' bit set.
const groupAuthorizedOps int32 = 1<<aclRead | 1<<aclDescribe | 1<<aclDelete | 1<<aclDescribeConfigs | 1<<aclAlterConfigs

// authorizedOps is an authorized-operations bit set (Metadata,
// DescribeCluster): of the operations in all (those the resource type
// supports), the ones rc's principal is allowed, implied ones included;
// all without an authorizer.
func (s *Server) authorizedOps(rc *reqCtx, rt auth.ResourceType, name string, all int32) int32 {
	a := s.cfg.Authorizer
	if a == nil || rc == nil {
		return all
	}
	p, h := rc.principal(), rc.host()
	var out int32
	for op := auth.OpRead; op <= auth.OpDescribeTokens; op++ {
		if all&(1<<op) != 0 && a.Authorize(p, h, op, rt, name) {
			out |= 1 << op
		}
	}
	return out
}

// opsFor is a topic's AuthorizedOperations in a Metadata answer: unset
// unless the request asked for them.
func (md *metadataBuilder) opsFor(name string) int32 {
	if md.topicOps == authorizedOpsUnset || md.rc == nil {
		return md.topicOps
	}
	return md.s.authorizedOps(md.rc, auth.ResourceTopic, name, md.topicOps)
}
