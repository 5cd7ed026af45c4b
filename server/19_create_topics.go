package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics v0..v7.
func init() { register(19, 0, 7, handleCreateTopics) }

// maxTopicNameLen is Kafka's limit on topic names.
const maxTopicNameLen = 249

// maxPartitionsPerTopic bounds a topic's partition count (each partition is
// a directory with open files and mapped indexes); the engine enforces the
// same limit, this answers ValidateOnly requests consistently.
const maxPartitionsPerTopic = 1 << 16

// validTopicName applies Kafka's topic name rules: 1..249 characters from
// [a-zA-Z0-9._-], and not "." or "..". (The engine enforces the same rules,
// plus collisions between names that differ only in '.' vs '_'.)
func validTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	case len(name) > maxTopicNameLen:
		return fmt.Errorf("topic name is longer than %d characters", maxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q contains %q; legal characters are ASCII letters, digits, '.', '_' and '-'", name, c)
		}
	}
	return nil
}

// handleCreateTopics creates topics on this single broker.
//
// Per topic: NumPartitions -1 means num.partitions; ReplicationFactor -1
// means default.replication.factor and anything above 1 is
// INVALID_REPLICATION_FACTOR (there is one broker); a manual
// ReplicaAssignment (with both counts -1) must number partitions 0..n-1 and
// name only this broker, once per partition. Configs are topic-level keys
// checked by the engine (INVALID_CONFIG). A name given twice in one request
// is INVALID_REQUEST for that name. With ValidateOnly everything is checked
// and answered as if created, but nothing is. From v5 the answer carries the
// partition count, replication factor and every topic config with its
// source; from v7 the topic id. Each topic's partitions are taken from the
// client's controller_mutation_rate quota as it is created; from v6 a topic
// that finds it exhausted is THROTTLING_QUOTA_EXCEEDED and is not created
// (mutation_quota.go).
func handleCreateTopics(s *Server, rc *reqCtx) {
	if s.clustered() {
		s.clusterCreateTopics(rc)
		return
	}
	req := rc.req.(*kmsg.CreateTopicsRequest)
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Topics = make([]kmsg.CreateTopicsResponseTopic, 0, len(req.Topics))
	mq := s.newMutationQuota(rc, 6) // mutation_quota.go

	counts := make(map[string]int, len(req.Topics))
	for i := range req.Topics {
		counts[req.Topics[i].Topic]++
	}
	answered := make(map[string]struct{}, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		if _, done := answered[rt.Topic]; done {
			continue
		}
		answered[rt.Topic] = struct{}{}
		out := kmsg.NewCreateTopicsResponseTopic()
		out.Topic = rt.Topic
		var err error
		if counts[rt.Topic] > 1 {
			err = newAPIError(kerr.InvalidRequest, "topic %q appears %d times in one CreateTopics request", rt.Topic, counts[rt.Topic])
		} else if !s.mayCreateTopic(rc, rt.Topic) { // authz.go: Create on the cluster or the topic
			err = newAPIError(kerr.TopicAuthorizationFailed, "not authorized to create topic %q", rt.Topic)
		} else {
			err = s.createTopic(rt, req.ValidateOnly, mq, &out)
		}
		if err != nil {
			out.ErrorCode, out.ErrorMessage = apiErrCode(err), errMessage(err)
			out.NumPartitions, out.ReplicationFactor, out.Configs = -1, -1, nil
			out.TopicID = [16]byte{}
			s.log.Info("create topic refused", "topic", rt.Topic, "err", err)
		}
		resp.Topics = append(resp.Topics, out)
	}
	rc.throttleMutations(mq, &resp.ThrottleMillis)
	rc.respond(resp)
}

// createTopic validates (and unless validateOnly creates) one topic, filling
// out's success fields; its partitions are taken from mq before it is
// created (THROTTLING_QUOTA_EXCEEDED when mq refuses).
func (s *Server) createTopic(rt *kmsg.CreateTopicsRequestTopic, validateOnly bool, mq *mutationQuota, out *kmsg.CreateTopicsResponseTopic) error {
	if err := validTopicName(rt.Topic); err != nil {
		return newAPIError(kerr.InvalidTopicException, "%v", err)
	}
	if s.eng.Topic(rt.Topic) != nil {
		return newAPIError(kerr.TopicAlreadyExists, "topic %q already exists", rt.Topic)
	}
	partitions, replication, err := s.createLayout(rt)
	if err != nil {
		return err
	}
	overrides := make(map[string]string, len(rt.Configs))
	for _, c := range rt.Configs {
		if c.Value == nil {
			return newAPIError(kerr.InvalidConfig, "config %q has a null value", c.Name)
		}
		if _, dup := overrides[c.Name]; dup {
			return newAPIError(kerr.InvalidRequest, "config %q is given twice", c.Name)
		}
		overrides[c.Name] = *c.Value
	}
	logCfg, err := s.logDefaults().Apply(overrides)
	if err != nil {
		return err
	}
	if !validateOnly {
		if err := mq.record(int(partitions)); err != nil {
			return err
		}
		t, err := s.eng.CreateTopic(rt.Topic, partitions, overrides)
		if err != nil {
			return err
		}
		out.TopicID = t.ID()
		logCfg = t.Config()
		overrides = t.Overrides()
		s.log.Info("created topic", "topic", rt.Topic, "partitions", partitions, "configs", overrides)
	}
	out.NumPartitions = partitions
	out.ReplicationFactor = replication
	for _, e := range s.topicConfigEntries(logCfg, overrides) {
		out.Configs = append(out.Configs, kmsg.CreateTopicsResponseTopicConfig{
			Name:   e.name,
			Value:  kmsg.StringPtr(e.value),
			Source: int8(e.source),
		})
	}
	return nil
}

// createLayout resolves the partition count and replication factor of a
// CreateTopics entry, from the counts or from a manual assignment.
func (s *Server) createLayout(rt *kmsg.CreateTopicsRequestTopic) (partitions int32, replication int16, err error) {
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return 0, 0, newAPIError(kerr.InvalidRequest,
				"both a replica assignment and NumPartitions/ReplicationFactor (%d/%d) were given; set the counts to -1",
				rt.NumPartitions, rt.ReplicationFactor)
		}
		seen := make([]bool, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(seen) || seen[a.Partition] {
				return 0, 0, newAPIError(kerr.InvalidReplicaAssignment,
					"partitions in a replica assignment must be numbered 0..%d, each once (got %d)", len(seen)-1, a.Partition)
			}
			seen[a.Partition] = true
			if len(a.Replicas) != 1 || a.Replicas[0] != s.cfg.NodeID {
				return 0, 0, newAPIError(kerr.InvalidReplicaAssignment,
					"partition %d: replicas %v; this cluster has one broker, node %d, so the only assignment is [%d]",
					a.Partition, a.Replicas, s.cfg.NodeID, s.cfg.NodeID)
			}
		}
		if len(rt.ReplicaAssignment) > maxPartitionsPerTopic {
			return 0, 0, newAPIError(kerr.InvalidPartitions, "%d partitions is more than the limit of %d per topic", len(rt.ReplicaAssignment), maxPartitionsPerTopic)
		}
		return int32(len(rt.ReplicaAssignment)), 1, nil
	}
	partitions = rt.NumPartitions
	if partitions == -1 {
		partitions = s.cfg.NumPartitions
	}
	if partitions <= 0 {
		return 0, 0, newAPIError(kerr.InvalidPartitions, "number of partitions must be positive or -1 (broker default), got %d", rt.NumPartitions)
	}
	if partitions > maxPartitionsPerTopic {
		return 0, 0, newAPIError(kerr.InvalidPartitions, "%d partitions is more than the limit of %d per topic", partitions, maxPartitionsPerTopic)
	}
	replication = rt.ReplicationFactor
	if replication == -1 {
		replication = s.cfg.DefaultReplication
	}
	if replication <= 0 {
		return 0, 0, newAPIError(kerr.InvalidReplicationFactor, "replication factor must be positive or -1 (broker default), got %d", rt.ReplicationFactor)
	}
	if replication > 1 {
		return 0, 0, newAPIError(kerr.InvalidReplicationFactor,
			"replication factor %d is larger than the number of available brokers (1): this is a single-broker cluster", replication)
	}
	return partitions, replication, nil
}

// configEntry is one topic config as DescribeConfigs and CreateTopics report it.
type configEntry struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// topicConfigEntries lists every topic-level key (engine.TopicKeys order)
// with its value in cfg and where that value comes from: the topic's
// override (DYNAMIC_TOPIC_CONFIG), the broker's configuration when it
// differs from Kafka's default (STATIC_BROKER_CONFIG), or the default
// (DEFAULT_CONFIG).
func (s *Server) topicConfigEntries(cfg engine.LogConfig, overrides map[string]string) []configEntry {
	keys := engine.TopicKeys()
	out := make([]configEntry, 0, len(keys))
	for _, k := range keys {
		v, ok := cfg.Value(k)
		if !ok {
			continue
		}
		out = append(out, configEntry{name: k, value: v, source: s.topicConfigSource(k, overrides)})
	}
	return out
}

func (s *Server) topicConfigSource(key string, overrides map[string]string) kmsg.ConfigSource {
	if _, ok := overrides[key]; ok {
		return kmsg.ConfigSourceDynamicTopicConfig
	}
	return s.brokerLogSource(key)
}

// brokerLogSource says whether the broker-wide default of a topic key was
// configured (differs from Kafka's default) or is the default.
func (s *Server) brokerLogSource(topicKey string) kmsg.ConfigSource {
	return s.topicDefaultSource(topicKey) // 32_describe_configs.go
}

// clusterCreateTopics creates topics through the controller (cluster mode).
//
// The checks of single-broker mode apply, with the cluster's rules for the
// layout: a replication factor (or -1: default.replication.factor) of at
// most the number of live brokers (INVALID_REPLICATION_FACTOR), or a manual
// assignment naming registered brokers, the same number of replicas for
// every partition, none twice (INVALID_REPLICA_ASSIGNMENT). Configs may
// include min.insync.replicas and unclean.leader.election.enable besides the
// log keys. The controller places replicas (spreading leaders and replicas
// over brokers and racks) and assigns the topic id. The answer is sent once
// this broker's metadata has the new topics, so a Metadata request on the
// same connection sees them; if TimeoutMillis passes first the topics still
// pending answer REQUEST_TIMED_OUT (their creation may still complete).
func (s *Server) clusterCreateTopics(rc *reqCtx) {
	req := rc.req.(*kmsg.CreateTopicsRequest)
	mq := s.newMutationQuota(rc, 6)
	s.goAdmin(req.TimeoutMillis, func(ctx context.Context) {
		resp := kmsg.NewPtrCreateTopicsResponse()
		resp.Topics = make([]kmsg.CreateTopicsResponseTopic, 0, len(req.Topics))
		counts := make(map[string]int, len(req.Topics))
		for i := range req.Topics {
			counts[req.Topics[i].Topic]++
		}
		answered := make(map[string]struct{}, len(req.Topics))
		var maxOff int64
		for i := range req.Topics {
			rt := &req.Topics[i]
			if _, done := answered[rt.Topic]; done {
				continue
			}
			answered[rt.Topic] = struct{}{}
			out := kmsg.NewCreateTopicsResponseTopic()
			out.Topic = rt.Topic
			var err error
			if counts[rt.Topic] > 1 {
				err = newAPIError(kerr.InvalidRequest, "topic %q appears %d times in one CreateTopics request", rt.Topic, counts[rt.Topic])
			} else if !s.mayCreateTopic(rc, rt.Topic) { // authz.go: Create on the cluster or the topic
				err = newAPIError(kerr.TopicAuthorizationFailed, "not authorized to create topic %q", rt.Topic)
			} else {
				var off int64
				off, err = s.clusterCreateTopicQuota(ctx, rt, req.ValidateOnly, mq, &out)
				maxOff = max(maxOff, off)
			}
			if err != nil {
				out.ErrorCode, out.ErrorMessage = apiErrCode(err), errMessage(err)
				out.NumPartitions, out.ReplicationFactor, out.Configs = -1, -1, nil
				out.TopicID = [16]byte{}
				s.log.Info("create topic refused", "topic", rt.Topic, "err", err)
			}
			resp.Topics = append(resp.Topics, out)
		}
		if err := s.waitView(ctx, maxOff); err != nil {
			for i := range resp.Topics {
				if resp.Topics[i].ErrorCode == 0 && !req.ValidateOnly {
					resp.Topics[i].ErrorCode = kerr.RequestTimedOut.Code
					resp.Topics[i].ErrorMessage = kmsg.StringPtr("created, but this broker has not seen the topic yet")
				}
			}
		}
		rc.throttleMutations(mq, &resp.ThrottleMillis)
		rc.respond(resp)
	})
}

// clusterCreateTopic validates one topic and, unless validateOnly, proposes
// it; it returns the metadata offset of the creation.
func (s *Server) clusterCreateTopic(ctx context.Context, rt *kmsg.CreateTopicsRequestTopic, validateOnly bool, out *kmsg.CreateTopicsResponseTopic) (int64, error) {
	return s.clusterCreateTopicQuota(ctx, rt, validateOnly, nil, out)
}

// clusterCreateTopicQuota is clusterCreateTopic taking the topic's
// partitions from mq before proposing it.
func (s *Server) clusterCreateTopicQuota(ctx context.Context, rt *kmsg.CreateTopicsRequestTopic, validateOnly bool, mq *mutationQuota, out *kmsg.CreateTopicsResponseTopic) (int64, error) {
	if err := validTopicName(rt.Topic); err != nil {
		return 0, newAPIError(kerr.InvalidTopicException, "%v", err)
	}
	v := s.cluster.view.Load()
	if v.Topics[rt.Topic] != nil {
		return 0, newAPIError(kerr.TopicAlreadyExists, "topic %q already exists", rt.Topic)
	}
	partitions, replication, assignment, err := s.clusterLayout(v, rt)
	if err != nil {
		return 0, err
	}
	configs := make(map[string]string, len(rt.Configs))
	for _, c := range rt.Configs {
		if c.Value == nil {
			return 0, newAPIError(kerr.InvalidConfig, "config %q has a null value", c.Name)
		}
		if _, dup := configs[c.Name]; dup {
			return 0, newAPIError(kerr.InvalidRequest, "config %q is given twice", c.Name)
		}
		configs[c.Name] = *c.Value
	}
	overrides, err := splitClusterConfigs(configs)
	if err != nil {
		return 0, err
	}
	logCfg, err := s.logDefaults().Apply(overrides)
	if err != nil {
		return 0, err
	}
	var off int64
	if !validateOnly {
		if err := mq.record(int(partitions)); err != nil {
			return 0, err
		}
		r, err := s.cluster.ctl.Propose(ctx, controller.CreateTopic{
			Name: rt.Topic, ID: controller.NewTopicID(), Partitions: partitions,
			ReplicationFactor: replication, Assignment: assignment, Configs: configs,
		})
		if err != nil {
			return 0, proposeErr(err)
		}
		if r.Code != 0 {
			return 0, resultErr(r.Code, r.Message)
		}
		out.TopicID = r.TopicID
		off = r.Offset
		s.log.Info("created topic", "topic", rt.Topic, "partitions", partitions, "replication_factor", replication,
			"configs", configs, "metadata_offset", r.Offset)
	}
	out.NumPartitions = partitions
	out.ReplicationFactor = replication
	for _, e := range s.topicConfigEntries(logCfg, overrides) {
		out.Configs = append(out.Configs, kmsg.CreateTopicsResponseTopicConfig{
			Name: e.name, Value: kmsg.StringPtr(e.value), Source: int8(e.source),
		})
	}
	for _, k := range []string{cfgMinInsync, cfgUnclean} {
		if val, ok := configs[k]; ok {
			out.Configs = append(out.Configs, kmsg.CreateTopicsResponseTopicConfig{
				Name: k, Value: kmsg.StringPtr(val), Source: int8(kmsg.ConfigSourceDynamicTopicConfig),
			})
		}
	}
	return off, nil
}

// clusterLayout resolves partitions, replication factor and a manual
// assignment (nil: the controller places replicas) in cluster mode.
func (s *Server) clusterLayout(v *clusterView, rt *kmsg.CreateTopicsRequestTopic) (int32, int16, [][]int32, error) {
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return 0, 0, nil, newAPIError(kerr.InvalidRequest,
				"both a replica assignment and NumPartitions/ReplicationFactor (%d/%d) were given; set the counts to -1",
				rt.NumPartitions, rt.ReplicationFactor)
		}
		if len(rt.ReplicaAssignment) > maxPartitionsPerTopic {
			return 0, 0, nil, newAPIError(kerr.InvalidPartitions, "%d partitions is more than the limit of %d per topic", len(rt.ReplicaAssignment), maxPartitionsPerTopic)
		}
		assignment := make([][]int32, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(assignment) || assignment[a.Partition] != nil {
				return 0, 0, nil, newAPIError(kerr.InvalidReplicaAssignment,
					"partitions in a replica assignment must be numbered 0..%d, each once (got %d)", len(assignment)-1, a.Partition)
			}
			if err := checkReplicaList(v, a.Replicas, len(rt.ReplicaAssignment[0].Replicas)); err != nil {
				return 0, 0, nil, newAPIError(kerr.InvalidReplicaAssignment, "partition %d: %v", a.Partition, err)
			}
			assignment[a.Partition] = append([]int32(nil), a.Replicas...)
		}
		return int32(len(assignment)), int16(len(assignment[0])), assignment, nil
	}
	partitions := rt.NumPartitions
	if partitions == -1 {
		partitions = s.cfg.NumPartitions
	}
	if partitions <= 0 {
		return 0, 0, nil, newAPIError(kerr.InvalidPartitions, "number of partitions must be positive or -1 (broker default), got %d", rt.NumPartitions)
	}
	if partitions > maxPartitionsPerTopic {
		return 0, 0, nil, newAPIError(kerr.InvalidPartitions, "%d partitions is more than the limit of %d per topic", partitions, maxPartitionsPerTopic)
	}
	replication := rt.ReplicationFactor
	if replication == -1 {
		replication = s.cfg.DefaultReplication
	}
	if replication <= 0 {
		return 0, 0, nil, newAPIError(kerr.InvalidReplicationFactor, "replication factor must be positive or -1 (broker default), got %d", rt.ReplicationFactor)
	}
	if live := v.LiveBrokers(); int(replication) > live {
		return 0, 0, nil, newAPIError(kerr.InvalidReplicationFactor,
			"replication factor %d is larger than the number of available brokers (%d)", replication, live)
	}
	return partitions, replication, nil, nil
}

// checkReplicaList checks one partition's replicas of a manual assignment:
// want of them (want > 0), registered brokers, none twice.
func checkReplicaList(v *clusterView, replicas []int32, want int) error {
	if len(replicas) == 0 || (want > 0 && len(replicas) != want) {
		return fmt.Errorf("%d replicas, but every partition must have %d", len(replicas), want)
	}
	for i, r := range replicas {
		if _, ok := v.Broker(r); !ok {
			return fmt.Errorf("broker %d is not registered", r)
		}
		for _, o := range replicas[:i] {
			if o == r {
				return fmt.Errorf("broker %d is listed twice", r)
			}
		}
	}
	return nil
}
