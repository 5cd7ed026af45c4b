package server

// SyncGroup end to end with raw kmsg requests (franz-go's Client.Request,
// which only finds the coordinator): Kafka's pending-sync expiration.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawMember is one classic group member driven by hand.
type rawMember struct {
	t      *testing.T
	cl     *kgo.Client
	group  string
	topic  string
	id     string
	gen    int32
	leader bool
	others []string // the members listed in the leader's JoinGroup answer
}

const (
	rawSessionMs   = 10_000 // far longer than the rebalance timeout: sessions do not expire here
	rawRebalanceMs = 1_000
)

// joinReq returns a JoinGroup request for m (protocol "range", subscribed
// to m.topic).
func (m *rawMember) joinReq() *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.ProtocolType = m.group, m.id, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = rawSessionMs, rawRebalanceMs
	meta := kmsg.ConsumerMemberMetadata{Topics: []string{m.topic}}
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	return req
}

// join runs JoinGroup (the KIP-394 round trip on a first join) and returns
// the error code; it may block until the rebalance completes. It does not
// touch t, so it may run on another goroutine.
func (m *rawMember) join(ctx context.Context) (int16, error) {
	for range 2 {
		resp, err := m.joinReq().RequestWith(ctx, m.cl)
		if err != nil {
			return 0, err
		}
		if resp.ErrorCode == kerr.MemberIDRequired.Code && m.id == "" {
			m.id = resp.MemberID
			continue
		}
		if resp.ErrorCode == 0 {
			m.id, m.gen, m.leader = resp.MemberID, resp.Generation, resp.LeaderID == resp.MemberID
			m.others = m.others[:0]
			for _, o := range resp.Members {
				m.others = append(m.others, o.MemberID)
			}
		}
		return resp.ErrorCode, nil
	}
	return kerr.MemberIDRequired.Code, nil
}

func (m *rawMember) heartbeat() int16 {
	m.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.gen
	resp, err := req.RequestWith(testCtx(m.t), m.cl)
	if err != nil {
		m.t.Fatalf("Heartbeat: %v", err)
	}
	return resp.ErrorCode
}

// sync sends SyncGroup; a leader assigns the partitions in plan (member id
// -> partitions of m.topic). It returns the code and m's partitions.
func (m *rawMember) sync(plan map[string][]int32) (int16, []int32) {
	m.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.gen
	for id, ps := range plan {
		a := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: m.topic, Partitions: ps}}}
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a.AppendTo(nil)})
	}
	resp, err := req.RequestWith(testCtx(m.t), m.cl)
	if err != nil {
		m.t.Fatalf("SyncGroup: %v", err)
	}
	var a kmsg.ConsumerMemberAssignment
	if resp.ErrorCode != 0 || len(resp.MemberAssignment) == 0 {
		return resp.ErrorCode, nil
	}
	if err := a.ReadFrom(resp.MemberAssignment); err != nil {
		m.t.Fatalf("SyncGroup assignment: %v", err)
	}
	var ps []int32
	for _, tp := range a.Topics {
		if tp.Topic == m.topic {
			ps = append(ps, tp.Partitions...)
		}
	}
	slices.Sort(ps)
	return resp.ErrorCode, ps
}

// TestGroupPendingSyncExpires: members A and B join; B heartbeats but never
// sends SyncGroup. As in Kafka (expirePendingSync), the coordinator removes
// B once the rebalance timeout after the join has passed and rebalances:
// A's heartbeat says REBALANCE_IN_PROGRESS, B's late SyncGroup and
// Heartbeat get UNKNOWN_MEMBER_ID, and A rejoins alone and owns every
// partition.
func TestGroupPendingSyncExpires(t *testing.T) {
	addr, _, _ := startBroker(t, groupTestConfig)
	const topic, group = "pending-sync", "pending-sync-g"
	adm := newAdmin(t, addr)
	if _, err := adm.CreateTopic(testCtx(t), 3, 1, nil, topic); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	a := &rawMember{t: t, cl: newClient(t, addr), group: group, topic: topic}
	b := &rawMember{t: t, cl: newClient(t, addr), group: group, topic: topic}

	// A alone: generation 1, all partitions.
	if code, err := a.join(testCtx(t)); err != nil || code != 0 || !a.leader || a.gen != 1 {
		t.Fatalf("A's first join: code %d err %v leader %v gen %d", code, err, a.leader, a.gen)
	}
	if code, ps := a.sync(map[string][]int32{a.id: {0, 1, 2}}); code != 0 || len(ps) != 3 {
		t.Fatalf("A's first sync: code %d partitions %v", code, ps)
	}

	// B joins; its join waits for A's rejoin, which A learns of from its
	// heartbeat.
	bJoined := make(chan error, 1)
	go func() {
		code, err := b.join(testCtx(t))
		if err == nil && code != 0 {
			err = kerr.ErrorForCode(code)
		}
		bJoined <- err
	}()
	waitFor(t, func() string { return "A's heartbeat never said REBALANCE_IN_PROGRESS" }, func() bool {
		return a.heartbeat() == kerr.RebalanceInProgress.Code
	})
	if code, err := a.join(testCtx(t)); err != nil || code != 0 {
		t.Fatalf("A's rejoin: code %d err %v", code, err)
	}
	if err := <-bJoined; err != nil {
		t.Fatalf("B's join: %v", err)
	}
	if a.gen != 2 || b.gen != 2 || !a.leader || b.leader || len(a.others) != 2 {
		t.Fatalf("generation 2: A gen %d leader %v members %v; B gen %d leader %v", a.gen, a.leader, a.others, b.gen, b.leader)
	}
	if code, ps := a.sync(map[string][]int32{a.id: {0, 1}, b.id: {2}}); code != 0 || !slices.Equal(ps, []int32{0, 1}) {
		t.Fatalf("A's generation-2 sync: code %d partitions %v", code, ps)
	}

	// B keeps heartbeating (its session never expires) but never syncs.
	// Both heartbeat until the coordinator gives up on B's sync.
	start := time.Now()
	var aCode, bCode int16
	waitFor(t, func() string {
		return fmt.Sprintf("B was never removed: A heartbeat %v, B heartbeat %v", kerr.ErrorForCode(aCode), kerr.ErrorForCode(bCode))
	}, func() bool {
		if aCode != kerr.RebalanceInProgress.Code {
			aCode = a.heartbeat()
		}
		if bCode != kerr.UnknownMemberID.Code {
			bCode = b.heartbeat()
		}
		return aCode == kerr.RebalanceInProgress.Code && bCode == kerr.UnknownMemberID.Code
	})
	t.Logf("B removed %v after A's sync (rebalance timeout %d ms)", time.Since(start), rawRebalanceMs)
	if code, _ := b.sync(nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("B's late SyncGroup: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}

	// A rejoins alone and takes every partition.
	if code, err := a.join(testCtx(t)); err != nil || code != 0 {
		t.Fatalf("A's rejoin after B's removal: code %d err %v", code, err)
	}
	if a.gen != 3 || !a.leader || !slices.Equal(a.others, []string{a.id}) {
		t.Fatalf("generation 3: gen %d leader %v members %v", a.gen, a.leader, a.others)
	}
	if code, ps := a.sync(map[string][]int32{a.id: {0, 1, 2}}); code != 0 || !slices.Equal(ps, []int32{0, 1, 2}) {
		t.Fatalf("A's generation-3 sync: code %d partitions %v", code, ps)
	}
	if code := a.heartbeat(); code != 0 {
		t.Fatalf("A's heartbeat at generation 3: %v", kerr.ErrorForCode(code))
	}
	state, shape := groupShape(t, adm, group)
	if state != "Stable" || len(shape) != 1 || !slices.Equal(shape[a.id], []int32{0, 1, 2}) {
		t.Fatalf("DescribeGroups: %s %v, want Stable with A owning 0..2", state, shape)
	}
}
