package server

// Share groups (KIP-932, issue 24): the protocol side. The runtime — the
// share-group coordinator (membership, epochs, assignment), the
// share-session cache, the share-partitions and their persistence in
// __share_group_state, the tick that expires locks and sessions, the
// retry loop of waiting ShareFetches and the dead-letter writer — is
// broker/sharehost's Host, built here from the Server's parts. The
// handlers decode, authorize (authz.go's helpers), call the host between
// its Lock and Unlock, and encode: 76 (heartbeat), 77 (describe), 78
// (ShareFetch), 79 (ShareAcknowledge), 90-92 (describe, alter and delete
// share-group offsets); DeleteGroups (42) deletes an empty share group
// with its state (deleteShareGroup), ListGroups lists share groups
// (shareGroupListings), IncrementalAlterConfigs and DescribeConfigs on
// GROUP resources set and read the group configs (alterGroupConfigs,
// describeGroupConfigs). The broker keys (group.share.*) reach
// Config.Groups.Share through strata serve (cmd/strata/serve_share.go).
//
// In a cluster (share_cluster.go) ShareGroupHeartbeat is answered by the
// group's coordinator and ShareFetch and ShareAcknowledge by the
// partitions' leaders, which own the share-partitions' state.

import (
	"context"
	"strconv"

	"github.com/stratalog/strata/broker/sharehost"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareConfig configures share groups (issue 24): sharehost.Config.
type ShareConfig = sharehost.Config

// ShareStateTopic is KIP-932's share-group state topic.
const ShareStateTopic = sharehost.StateTopic

// DefaultShareStatePartitions is share.coordinator.state.topic.num.partitions.
const DefaultShareStatePartitions = sharehost.DefaultStatePartitions

// DefaultShareTick is how often locks, sessions and waiting fetches are
// looked at.
const DefaultShareTick = sharehost.DefaultTick

// DefaultDeadLetterTopicPrefix is errors.deadletterqueue.topic.name.prefix.
const DefaultDeadLetterTopicPrefix = sharehost.DefaultDeadLetterTopicPrefix

// shareState is the Server's share-group host, and in a cluster its
// sharehost.Cluster (share_cluster.go).
type shareState struct {
	*sharehost.Host
	cluster *shareCluster
}

// durable is a set of appends to wait for before answering.
type durable = sharehost.Durable

// initShare is called by New after the Server is built.
func (s *Server) initShare() {
	b := sharehost.Broker{
		Engine:        s.eng,
		WhenAcked:     s.whenAcked,
		NumPartitions: s.cfg.NumPartitions,
		Clock:         hostClock{s},
		Log:           s.log,
	}
	if s.clustered() && s.eng != nil {
		s.groups.share.cluster = newShareCluster(s)
		b.Cluster = s.groups.share.cluster
	}
	s.groups.share.Host = sharehost.New(s.cfg.Groups.Share, b)
}

// closeShare is called by Close after connections are closed.
func (s *Server) closeShare() {
	if s.groups.share.Host != nil {
		s.groups.share.Close()
	}
	if s.groups.share.cluster != nil {
		s.groups.share.cluster.close()
	}
}

// waitDurable calls fn once every append of d is durable (with the first
// error).
func (s *Server) waitDurable(d durable, fn func(error)) { s.groups.share.WaitDurable(d, fn) }

// shareMemberErr is the check ShareFetch and ShareAcknowledge start
// with: share groups served, a group and member id given, Read on the
// group (authz.go); 0 when it passes.
func (s *Server) shareMemberErr(rc *reqCtx, group, member *string) (int16, string) {
	if code, msg := s.shareErr(); code != 0 {
		return code, msg
	}
	if group == nil || *group == "" || member == nil || *member == "" {
		return kerr.InvalidRequest.Code, "the group id and member id are required"
	}
	if s.fromBroker(rc) {
		return 0, "" // the group's coordinator (share_cluster.go)
	}
	return s.groupAuthorized(rc, *group, 0), ""
}

// shareGroupErr is the check the share-group offset APIs start with:
// share groups served and a group id given; 0 when it passes.
func (s *Server) shareGroupErr(group string) (int16, string) {
	if code, msg := s.shareErr(); code != 0 {
		return code, msg
	}
	if group == "" {
		return kerr.InvalidGroupID.Code, ""
	}
	return 0, ""
}

// shareErr is the error code of a share API when share groups are not
// served here.
func (s *Server) shareErr() (int16, string) {
	err := s.groups.share.Err()
	if err == nil {
		return 0, ""
	}
	return kerr.CoordinatorNotAvailable.Code, err.Error()
}

// alterGroupConfigs applies IncrementalAlterConfigs operations (SET and
// DELETE) to a GROUP resource; the host persists them in the share state
// topic (sharehost.Host.SetGroupConfigs). In a cluster every other broker
// is then told to read the group's configs again, and the answer waits
// for them (shareCluster.RefreshConfigs), so the share-partitions they
// lead follow the change at once; the same request coming from another
// broker (fromBroker) is that notice.
func (s *Server) alterGroupConfigs(ctx context.Context, rc *reqCtx, group string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) error {
	if code, msg := s.shareErr(); code != 0 {
		return newAPIError(kerr.ErrorForCode(code).(*kerr.Error), "%s", msg)
	}
	if group == "" {
		return newAPIError(kerr.InvalidRequest, "empty group id")
	}
	if err := checkIncrementalOps(ops); err != nil {
		return err
	}
	for _, op := range ops {
		switch {
		case !sharehost.IsGroupConfig(op.Name):
			return newAPIError(kerr.InvalidConfig, "unknown or unsupported group config %q", op.Name)
		case op.Op == kmsg.IncrementalAlterConfigOpSet:
			if _, err := sharehost.CheckGroupConfig(op.Name, *op.Value); err != nil {
				return newAPIError(kerr.InvalidConfig, "%v", err)
			}
		case op.Op != kmsg.IncrementalAlterConfigOpDelete:
			return newAPIError(kerr.InvalidConfig, "group config %q is not a list: %v is not allowed", op.Name, op.Op)
		}
	}
	if validateOnly {
		return nil
	}
	if s.fromBroker(rc) {
		s.groups.share.RefreshGroupConfigs(group)
		return nil
	}
	hops := make([]sharehost.ConfigOp, len(ops))
	for i, op := range ops {
		hops[i].Name = op.Name
		if op.Op == kmsg.IncrementalAlterConfigOpSet {
			hops[i].Value = op.Value
		}
	}
	if err := s.groups.share.SetGroupConfigs(group, hops); err != nil {
		return newAPIError(kerr.KafkaStorageError, "%v", err)
	}
	if c := s.groups.share.cluster; c != nil {
		c.RefreshConfigs(ctx, group, ops)
	}
	return nil
}

// shareGroupConfigDocs are the group configs DescribeConfigs reports, in
// order, with their types and documentation.
var shareGroupConfigDocs = []struct {
	name string
	typ  kmsg.ConfigType
	doc  string
}{
	{sharehost.CfgAutoOffsetReset, kmsg.ConfigTypeString, "Where a share-partition without state starts: latest, earliest or by_duration:<ISO-8601 duration>."},
	{sharehost.CfgIsolation, kmsg.ConfigTypeString, "The isolation level of share fetches: read_uncommitted, or read_committed (records up to the last stable offset, aborted ones archived)."},
	{sharehost.CfgLockDuration, kmsg.ConfigTypeInt, "How long an acquired record stays locked to its member (ms)."},
	{sharehost.CfgDeliveryLimit, kmsg.ConfigTypeInt, "How many times a record is delivered before it is archived (or dead-lettered): 2 to 10."},
	{sharehost.CfgDLQTopicName, kmsg.ConfigTypeString, "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank (the default), the group does not have a DLQ topic."},
	{sharehost.CfgDLQCopyRecord, kmsg.ConfigTypeBoolean, "When writing onto the dead-letter queue topic, whether to copy the original record's key and value, or write a record holding only the context headers."},
}

// describeGroupConfigs answers DescribeConfigs for a GROUP resource: the
// share-group configs, GROUP_CONFIG when set for the group, else the
// default (the broker's, for the lock duration).
func (s *Server) describeGroupConfigs(rr *kmsg.DescribeConfigsRequestResource, synonyms, docs bool) ([]kmsg.DescribeConfigsResponseResourceConfig, *apiError) {
	if code, msg := s.shareErr(); code != 0 {
		return nil, newAPIError(kerr.ErrorForCode(code).(*kerr.Error), "%s", msg)
	}
	if rr.ResourceName == "" {
		return nil, newAPIError(kerr.InvalidRequest, "empty group id")
	}
	set := s.groups.share.GroupConfigs(rr.ResourceName)
	defaults := map[string]string{
		sharehost.CfgAutoOffsetReset: "latest",
		sharehost.CfgIsolation:       "read_uncommitted",
		sharehost.CfgLockDuration:    strconv.FormatInt(s.groups.share.DefaultLockDurationMs(), 10),
		sharehost.CfgDeliveryLimit:   strconv.Itoa(int(s.groups.share.DefaultDeliveryCountLimit())),
		sharehost.CfgDLQTopicName:    "",
		sharehost.CfgDLQCopyRecord:   "false",
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range shareGroupConfigDocs {
		if !wanted(rr.ConfigNames, k.name) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.ConfigType = k.name, k.typ
		def := kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: k.name, Value: kmsg.StringPtr(defaults[k.name]), Source: kmsg.ConfigSourceDefaultConfig}
		chain := []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{def}
		if v, ok := set[k.name]; ok {
			chain = append([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{{Name: k.name, Value: kmsg.StringPtr(v), Source: kmsg.ConfigSourceGroupConfig}}, chain...)
		}
		c.Value, c.Source = chain[0].Value, chain[0].Source
		c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
		if synonyms {
			c.ConfigSynonyms = chain
		}
		if docs {
			c.Documentation = kmsg.StringPtr(k.doc)
		}
		out = append(out, c)
	}
	return out, nil
}

// shareGroupListing is a share group as ListGroups reports it.
type shareGroupListing struct{ id, state string }

// shareGroupListings lists the share groups with members or state.
func (s *Server) shareGroupListings() []shareGroupListing {
	if s.groups.share.Host == nil || s.groups.share.Err() != nil {
		return nil
	}
	var out []shareGroupListing
	for _, l := range s.groups.share.Listings() {
		out = append(out, shareGroupListing{id: l.ID, state: l.State})
	}
	return out
}

// deleteShareGroup deletes share group id for DeleteGroups (KIP-932;
// sharehost.Host.DeleteGroup): false when the share coordinator does not
// know id (then it is the group coordinator's to answer); otherwise done
// is called with the group's code once its tombstones are durable. In a
// cluster the group's coordinator checks the group has no members
// (NON_EMPTY_GROUP), deletes the share-partitions it leads and has their
// leaders delete the others (shareCluster.deleteLedElsewhere), answering
// once they have; another broker answers NOT_COORDINATOR, and a
// DeleteGroups from the coordinator (fromBroker) deletes the
// share-partitions this broker leads.
func (s *Server) deleteShareGroup(rc *reqCtx, id string, done func(code int16)) bool {
	st := s.groups.share
	finish := func(code int16, d durable, then func(code int16)) {
		s.waitDurable(d, func(err error) {
			if err != nil && code == 0 {
				code = kerr.KafkaStorageError.Code
			}
			then(code)
		})
	}
	if st.cluster != nil && st.Err() == nil && id != "" {
		if s.fromBroker(rc) {
			code, d := st.DeleteLed(id)
			finish(code, d, done)
			return true
		}
		if code, _ := s.shareCoordinatorErr(id); code != 0 {
			done(code)
			return true
		}
	}
	code, d, remote, ok := st.DeleteGroup(id)
	if !ok {
		return false
	}
	finish(code, d, func(code int16) {
		if code != 0 || len(remote) == 0 {
			done(code)
			return
		}
		st.cluster.deleteLedElsewhere(id, remote, done)
	})
	return true
}
