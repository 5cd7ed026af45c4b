package server

// Share groups in cluster mode (issue 24): the Server's side of
// sharehost.Cluster. The choice is written in docs/share-groups.md and
// broker/sharehost/cluster.go: membership is the group coordinator's
// (ShareGroupHeartbeat is answered by the leader of the group's
// __consumer_offsets partition, NOT_COORDINATOR elsewhere), a
// share-partition's state is its topic-partition leader's (ShareFetch and
// ShareAcknowledge elsewhere are NOT_LEADER_OR_FOLLOWER with the leader
// in CurrentLeader), persisted in the replicated __share_group_state by
// a Produce with acks=all to the state partition's leader over the
// inter-broker listener (this broker's own included), with the client id
// that may write internal topics.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/broker/coordhost"
	"github.com/stratalog/strata/broker/sharehost"
	"github.com/stratalog/strata/broker/txnhost"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareStateReplication is the replication factor asked for
// __share_group_state (Kafka's share.coordinator.state.topic.replication.factor,
// default 3), capped at the live brokers.
const shareStateReplication = 3

// shareForwardTimeout bounds a request one broker sends another for a
// share group (a fenced member's release, a config refresh, an offsets
// admin request forwarded by the group's coordinator).
const shareForwardTimeout = 10 * time.Second

// shareCluster is sharehost.Cluster over the Server.
type shareCluster struct {
	s      *Server
	route  *coordhost.Host // proposes __share_group_state
	client *txnhost.Client

	ctx    context.Context // cancelled by close: the notices under way end
	cancel context.CancelFunc
	bg     sync.WaitGroup // notices sent without waiting (MemberGone)

	// noticeSend, when set (tests), sends MemberGone's notices instead
	// of forward.
	noticeSend atomic.Pointer[func(ctx context.Context, addr string, req kmsg.Request, resp kmsg.Response) error]
}

func newShareCluster(s *Server) *shareCluster {
	n := s.cfg.Groups.Share.StatePartitions
	if n <= 0 {
		n = DefaultShareStatePartitions
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &shareCluster{
		s: s, ctx: ctx, cancel: cancel,
		route: coordhost.New(coordhost.Config{
			Topic: coordhost.Topic{
				Name: ShareStateTopic, Partitions: n, Replication: shareStateReplication,
				Configs: map[string]string{"cleanup.policy": "compact"},
			},
			Name:    "share-state",
			Creator: hostCreator{s},
			Clock:   hostClock{s},
			Log:     s.log,
		}),
		client: txnhost.NewClient(adminClientID, s.cfg.Cluster.Dial, hostClock{s}),
	}
}

func (c *shareCluster) close() {
	c.route.Close()
	c.cancel()
	c.bg.Wait()
	c.client.Close()
}

// peers returns the registered, unfenced brokers of the view other than
// this one, with their inter-broker addresses.
func (c *shareCluster) peers() map[int32]string {
	out := map[int32]string{}
	v := c.s.cluster.view.Load()
	if v == nil {
		return out
	}
	for _, b := range v.Brokers {
		if b.ID == c.s.cfg.NodeID || b.Fenced {
			continue
		}
		if addr, ok := c.s.brokerAddr(b.ID); ok {
			out[b.ID] = addr
		}
	}
	return out
}

// forward sends req to the broker at addr as this broker (the client id
// the brokers' own clients use) and decodes its answer into resp.
func (c *shareCluster) forward(ctx context.Context, addr string, req kmsg.Request, resp kmsg.Response) error {
	ctx, cancel := context.WithTimeout(ctx, shareForwardTimeout)
	defer cancel()
	return c.client.RoundTrip(ctx, addr, req, resp)
}

// Bounds of a member-gone notice's retries (MemberGone).
const (
	noticeBackoffMin = 100 * time.Millisecond
	noticeBackoffMax = 2 * time.Second
	// noticeMinWithin is the least time a notice is retried, however
	// short the group's record lock duration.
	noticeMinWithin = shareForwardTimeout
)

// MemberGone tells every other broker that member left group or was
// fenced, without the caller waiting: a ShareAcknowledge with the final
// session epoch and nothing to acknowledge, on which a partition leader
// closes the member's share session and releases the records it holds
// (79_share_acknowledge.go), as it does when the member itself closes
// its session. Each broker's notice is retried, with a backoff doubling
// from noticeBackoffMin to noticeBackoffMax, until that broker answers
// it without error, is no longer a live broker of the cluster (fenced or
// gone: the new leaders of its partitions load their share-partitions
// from __share_group_state, where the member's acquired records are
// AVAILABLE), this broker closes, or within has passed (the group's
// record lock duration, at least noticeMinWithin: by then the records'
// locks have expired at the leader anyway).
func (c *shareCluster) MemberGone(group, member string, within time.Duration) {
	until := c.s.now().Add(max(within, noticeMinWithin))
	for id := range c.peers() {
		c.bg.Go(func() { c.tellMemberGone(id, group, member, until) })
	}
}

// tellMemberGone sends broker id MemberGone's notice until it is
// acknowledged or not worth retrying (retryNotice); it reports whether
// it was acknowledged.
func (c *shareCluster) tellMemberGone(id int32, group, member string, until time.Time) bool {
	live := func() (string, bool) {
		addr, ok := c.peers()[id]
		return addr, ok
	}
	send := func(addr string) error {
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.SetVersion(1)
		req.GroupID, req.MemberID = kmsg.StringPtr(group), kmsg.StringPtr(member)
		req.ShareSessionEpoch = share.SessionFinalEpoch
		resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		send := c.forward
		if f := c.noticeSend.Load(); f != nil {
			send = *f
		}
		err := send(c.ctx, addr, req, resp)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil && c.ctx.Err() == nil {
			c.s.log.Debug("share: telling a broker a member left failed; retrying", "broker", id, "group", group, "member", member, "err", err)
		}
		return err
	}
	acked, attempts, err := retryNotice(c.ctx, hostClock{c.s}, until, live, send)
	switch {
	case acked && attempts > 1:
		c.s.log.Info("share: a broker was told a member left after retries", "broker", id, "group", group, "member", member, "attempts", attempts)
	case !acked && err != nil && c.ctx.Err() == nil:
		c.s.log.Warn("share: telling a broker a member left failed; its records there are released when their locks expire",
			"broker", id, "group", group, "member", member, "attempts", attempts, "err", err)
	}
	return acked
}

// noticeClock is the time retryNotice waits by.
type noticeClock interface {
	Now() time.Time
	After(d time.Duration) (<-chan time.Time, func() bool)
}

// retryNotice calls send with the address live gives until it returns
// nil (acked), live reports the broker gone, ctx ends, or the next wait
// (a backoff doubling from noticeBackoffMin to noticeBackoffMax) would
// end at or after until; it returns whether the notice was acknowledged,
// the attempts made and the last error.
func retryNotice(ctx context.Context, clock noticeClock, until time.Time, live func() (string, bool), send func(addr string) error) (acked bool, attempts int, err error) {
	backoff := noticeBackoffMin
	for {
		addr, ok := live()
		if !ok {
			return false, attempts, nil // fenced or gone: its partitions' new leaders load the released state
		}
		attempts++
		if err = send(addr); err == nil {
			return true, attempts, nil
		}
		if ctx.Err() != nil || !clock.Now().Add(backoff).Before(until) {
			return false, attempts, err
		}
		wait, stop := clock.After(backoff)
		select {
		case <-ctx.Done():
			stop()
			return false, attempts, err
		case <-wait:
		}
		backoff = min(2*backoff, noticeBackoffMax)
	}
}

// RefreshConfigs tells every other broker that group's configs changed
// (an IncrementalAlterConfigs of the same ops from this broker, on which
// a broker reads them again from __share_group_state and applies them to
// the group's share-partitions it leads: alterGroupConfigs), waiting for
// their answers; a broker that does not answer is logged and reads them
// when a share session opens there.
func (c *shareCluster) RefreshConfigs(ctx context.Context, group string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) {
	var wg sync.WaitGroup
	for id, addr := range c.peers() {
		wg.Go(func() {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			req.SetVersion(1)
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeGroupConfig, group, ops
			req.Resources = append(req.Resources, rr)
			resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
			err := c.forward(ctx, addr, req, resp)
			if err == nil && len(resp.Resources) == 1 {
				err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
			}
			if err != nil {
				c.s.log.Warn("share: telling a broker a group's configs changed failed; it reads them when a share session opens there",
					"broker", id, "group", group, "err", err)
			}
		})
	}
	wg.Wait()
}

// leaderOf is the view's leader of topic's partition p, -1 when none.
func (c *shareCluster) leaderOf(topic string, p int32) int32 {
	v := c.s.cluster.view.Load()
	if v == nil {
		return -1
	}
	return hostView{s: c.s, v: v}.Leader(topic, p)
}

// elsewhere is the leader of topic's partition p when it is another
// broker, for a request the group's coordinator forwards there; -1 when
// this broker leads it, none does, or there is no cluster.
func (s *Server) shareElsewhere(topic string, p int32) int32 {
	c := s.groups.share.cluster
	if c == nil {
		return -1
	}
	if l := c.leaderOf(topic, p); l != s.cfg.NodeID {
		return l
	}
	return -1
}

// fanOut calls each for every broker of ids in parallel (addr "" for a
// broker without an address), off the caller's goroutine, then done.
func (c *shareCluster) fanOut(ids []int32, each func(ctx context.Context, id int32, addr string), done func()) {
	c.bg.Go(func() {
		var wg sync.WaitGroup
		for _, id := range ids {
			addr, _ := c.s.brokerAddr(id)
			wg.Go(func() { each(c.ctx, id, addr) })
		}
		wg.Wait()
		done()
	})
}

// forwardTo is forward to broker id's address (addr "": unreachable).
func (c *shareCluster) forwardTo(ctx context.Context, id int32, addr string, req kmsg.Request, resp kmsg.Response) error {
	if addr == "" {
		return fmt.Errorf("broker %d has no address", id)
	}
	return c.forward(ctx, addr, req, resp)
}

// forwardCode is the error code of a forward that failed.
func forwardCode(err error) (int16, *string) {
	if ke, ok := err.(*kerr.Error); ok {
		return ke.Code, nil
	}
	return kerr.CoordinatorNotAvailable.Code, kmsg.StringPtr(err.Error())
}

// deleteLedElsewhere has the leaders of remote (share-partitions of group
// led by other brokers) delete their state (a DeleteGroups from this
// broker, the group's coordinator: DeleteLed there), then calls done with
// the group's code: 0, or the first error (COORDINATOR_NOT_AVAILABLE for
// a share-partition without a leader or a broker that did not answer, so
// the client retries).
func (c *shareCluster) deleteLedElsewhere(group string, remote []sharehost.Key, done func(int16)) {
	v := c.s.cluster.view.Load()
	var mu sync.Mutex
	code := int16(0)
	fail := func(c int16) {
		mu.Lock()
		if code == 0 {
			code = c
		}
		mu.Unlock()
	}
	leaders := map[int32]bool{}
	for _, k := range remote {
		l := int32(-1)
		if vt := v.ByID[k.TopicID]; vt != nil && k.Part >= 0 && int(k.Part) < len(vt.Parts) {
			l = vt.Parts[k.Part].Leader
		}
		if l < 0 {
			fail(kerr.CoordinatorNotAvailable.Code)
			continue
		}
		leaders[l] = true
	}
	c.fanOut(slices.Sorted(maps.Keys(leaders)), func(ctx context.Context, id int32, addr string) {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.SetVersion(2)
		req.Groups = []string{group}
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		err := c.forwardTo(ctx, id, addr, req, resp)
		switch {
		case err != nil:
			c.s.log.Warn("share: deleting a share group's state at a partition leader failed", "broker", id, "group", group, "err", err)
			fail(kerr.CoordinatorNotAvailable.Code)
		case len(resp.Groups) != 1:
			fail(kerr.UnknownServerError.Code)
		case resp.Groups[0].ErrorCode != 0 && resp.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code:
			fail(resp.Groups[0].ErrorCode)
		}
	}, func() { done(code) })
}

// CreateTopic proposes a topic through the controller (hostCreator) with
// the broker's default partitions and replication factor.
func (c *shareCluster) CreateTopic(name string, configs map[string]string, done func(error)) {
	hostCreator{c.s}.CreateTopic(coordhost.Spec{Name: name, Partitions: -1, Replication: -1, Configs: maps.Clone(configs)}, done)
}

// fromBroker reports whether rc is a request another broker of the
// cluster sent for a share group (shareCluster.forward): the client id
// the brokers' own clients use and, with an authorizer, ClusterAction on
// the cluster (the brokers' principals).
func (s *Server) fromBroker(rc *reqCtx) bool {
	if !s.clustered() || rc.client != adminClientID {
		return false
	}
	return s.cfg.Authorizer == nil || s.authorizedCluster(rc, auth.OpClusterAction)
}

// Leads reports whether this broker leads t's partition p in the view.
func (c *shareCluster) Leads(t *engine.Topic, p int32) (int32, bool) {
	if c.s.clusterPartitionCheck(t, p) != 0 {
		return 0, false
	}
	vt := c.s.cluster.view.Load().Topics[t.Name()]
	if vt == nil || p < 0 || int(p) >= len(vt.Parts) {
		return 0, false
	}
	return vt.Parts[p].LeaderEpoch, true
}

// StateTopic is __share_group_state's partition count in the view,
// proposing the topic when it is missing.
func (c *shareCluster) StateTopic() (int32, bool) {
	v := c.s.cluster.view.Load()
	if v == nil {
		return 0, false
	}
	hv := hostView{s: c.s, v: v}
	if !c.route.Ensure(hv) {
		return 0, false
	}
	return hv.Partitions(ShareStateTopic)
}

// leaderAddr returns the leader of topic's partition p in the current view
// and its inter-broker address.
func (c *shareCluster) leaderAddr(topic string, p int32) (int32, string, error) {
	v := c.s.cluster.view.Load()
	if v == nil {
		return -1, "", kerr.LeaderNotAvailable
	}
	leader := hostView{s: c.s, v: v}.Leader(topic, p)
	if leader < 0 {
		return -1, "", kerr.LeaderNotAvailable
	}
	addr, ok := c.s.brokerAddr(leader)
	if !ok {
		return -1, "", fmt.Errorf("broker %d has no address", leader)
	}
	return leader, addr, nil
}

// Produce appends batch to topic's partition p at its leader, acks=all.
func (c *shareCluster) Produce(ctx context.Context, topic string, p int32, batch []byte) error {
	leader, addr, err := c.leaderAddr(topic, p)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if err := c.client.RoundTrip(ctx, addr, req, resp); err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("produce to %s-%d: malformed answer", topic, p)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		return fmt.Errorf("produce to %s-%d at broker %d: %w", topic, p, leader, err)
	}
	return nil
}

// shareReadBytes is how much one Fetch of a state partition asks for
// (under the inter-broker client's response bound).
const shareReadBytes = 8 << 20

// ReadPartition reads partition p of topic from its leader, from its log
// start to its high watermark, passing each Fetch answer's record batches
// to fn: a broker with no replica of a __share_group_state partition
// loads a share-partition this way.
func (c *shareCluster) ReadPartition(ctx context.Context, topic string, p int32, fn func(batches []byte) error) error {
	return c.readFrom(ctx, topic, p, 0, fn)
}

// ReadPartitionSince reads partition p of topic from its leader, from the
// first offset whose timestamp is at or after ts (a ListOffsets there; -2:
// the log start) to its high watermark, passing each Fetch answer's
// record batches to fn: the dead-letter writer's search for the dead
// letters a share-partition's previous leader wrote.
func (c *shareCluster) ReadPartitionSince(ctx context.Context, topic string, p int32, ts int64, fn func(batches []byte) error) error {
	leader, addr, err := c.leaderAddr(topic, p)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(4)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	if err := c.client.RoundTrip(ctx, addr, req, resp); err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("list offsets of %s-%d: malformed answer", topic, p)
	}
	lp := &resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(lp.ErrorCode); err != nil {
		return fmt.Errorf("list offsets of %s-%d at broker %d: %w", topic, p, leader, err)
	}
	if lp.Offset < 0 {
		return nil // no record that recent
	}
	return c.readFrom(ctx, topic, p, lp.Offset, fn)
}

// readFrom is ReadPartition from offset from (below the log start: from
// there).
func (c *shareCluster) readFrom(ctx context.Context, topic string, p int32, from int64, fn func(batches []byte) error) error {
	for round := 0; ; round++ {
		if round > 100000 {
			return fmt.Errorf("reading %s-%d: no end after %d fetches", topic, p, round)
		}
		leader, addr, err := c.leaderAddr(topic, p)
		if err != nil {
			return err
		}
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, shareReadBytes
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset = p, from, shareReadBytes, -1
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		if err := c.client.RoundTrip(ctx, addr, req, resp); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("fetch of %s-%d: malformed answer", topic, p)
		}
		rp2 := &resp.Topics[0].Partitions[0]
		if rp2.ErrorCode == kerr.OffsetOutOfRange.Code && rp2.LogStartOffset > from {
			from = rp2.LogStartOffset
			continue
		}
		if err := kerr.ErrorForCode(rp2.ErrorCode); err != nil {
			return fmt.Errorf("fetch of %s-%d at broker %d: %w", topic, p, leader, err)
		}
		if from >= rp2.HighWatermark {
			return nil
		}
		next := from
		for rest := rp2.RecordBatches; len(rest) > 0; {
			batch, r, h, err := record.Next(rest)
			if err != nil {
				break // a partial batch at the end of the answer
			}
			rest = r
			next = max(next, h.BaseOffset+int64(h.LastOffsetDelta)+1)
			if err := fn(batch); err != nil {
				return err
			}
		}
		if next == from {
			return fmt.Errorf("fetch of %s-%d at %d: no progress below the high watermark %d", topic, p, from, rp2.HighWatermark)
		}
		from = next
	}
}

// InSync reports whether this broker is in the ISR of topic's partition
// p in the view.
func (c *shareCluster) InSync(topic string, p int32) bool {
	vt := c.s.cluster.view.Load().Topics[topic]
	return vt != nil && p >= 0 && int(p) < len(vt.Parts) && slices.Contains(vt.Parts[p].ISR, c.s.cfg.NodeID)
}

// viewCatalog is share.Catalog over the cluster's view: a share group's
// coordinator assigns the partitions of topics it may not host.
type viewCatalog struct{ s *Server }

func (c viewCatalog) Partitions(topic string) int32 {
	if vt := c.s.cluster.view.Load().Topics[topic]; vt != nil {
		return int32(len(vt.Parts))
	}
	return 0
}

// shareTopicID is the id of topic name (the view's in a cluster).
func (s *Server) shareTopicID(name string) ([16]byte, bool) {
	if s.clustered() {
		if vt := s.cluster.view.Load().Topics[name]; vt != nil {
			return vt.ID, true
		}
		return [16]byte{}, false
	}
	t := s.eng.Topic(name)
	if t == nil || t.Deleted() {
		return [16]byte{}, false
	}
	return t.ID(), true
}

// shareLeader is the leader of a partition and its epoch, for a share
// response's CurrentLeader: this broker on a single broker, the view's
// leader in a cluster (-1, -1 when unknown).
func (s *Server) shareLeader(topicID [16]byte, p int32) (int32, int32) {
	if !s.clustered() {
		return s.cfg.NodeID, 0
	}
	vt := s.cluster.view.Load().ByID[topicID]
	if vt == nil || p < 0 || int(p) >= len(vt.Parts) {
		return -1, -1
	}
	return vt.Parts[p].Leader, vt.Parts[p].LeaderEpoch
}

// shareCoordinatorErr is ShareGroupHeartbeat's check in a cluster: 0 when
// this broker coordinates group (leads its __consumer_offsets partition).
func (s *Server) shareCoordinatorErr(group string) (int16, string) {
	if !s.clustered() {
		return 0, ""
	}
	b, code := s.groupCoordinatorNode(group)
	if code != 0 {
		return code, ""
	}
	if b.ID != s.cfg.NodeID {
		return kerr.NotCoordinator.Code, "the coordinator of group " + group + " is broker " + strconv.Itoa(int(b.ID))
	}
	return 0, ""
}

var _ sharehost.Cluster = (*shareCluster)(nil)

// shareNoTopicCode is the error for a share request's topic id that has
// no local topic: NOT_LEADER_OR_FOLLOWER in a cluster whose view knows it
// (this broker is not a replica; the leader is in CurrentLeader), else
// UNKNOWN_TOPIC_ID.
func (s *Server) shareNoTopicCode(topicID [16]byte) int16 {
	if s.clustered() && s.cluster.view.Load().ByID[topicID] != nil {
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownTopicID.Code
}

// shareMember reports whether member may fetch for group (lock held): a
// member of the group here, or any member id in a cluster, where the
// group's coordinator (another broker, maybe) holds the membership and a
// partition's leader takes the client's member id as the owner of the
// records it acquires, as Kafka's share-partition leaders do.
func (s *Server) shareMember(group, member string) bool {
	return s.clustered() || s.groups.share.Groups().IsMember(group, member)
}
