package server

import (
	"encoding/binary"
	"log/slog"
	"slices"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzGroupAPIs runs arbitrary group API frames (seeded with every group
// request at old and new versions) through dispatch on one Server whose
// coordinator keeps state across inputs. Invariants: no handler panic,
// every request completes (joins too: no initial delay, and a lone member
// completes its own rebalance), and every response decodes at the
// request's version.
func FuzzGroupAPIs(f *testing.F) {
	var logs logBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lc := engine.DefaultLogConfig()
	lc.SegmentBytes = 1 << 20
	lc.SegmentIndexBytes = 1 << 12
	lc.Preallocate = false
	eng, err := engine.Open(engine.Options{Dir: f.TempDir(), Log: lc, Logger: logger})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { eng.Close() })
	if _, err := eng.CreateTopic("fz", 2, nil); err != nil {
		f.Fatal(err)
	}
	s := New(Config{NodeID: 1, AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092, LogDefaults: lc, Logger: logger,
		Groups: GroupsConfig{Coordinator: group.Config{MinSessionTimeoutMs: 1, MaxSessionTimeoutMs: 2000, InitialRebalanceDelayMs: -1, TickMs: 10, OffsetsPartitions: 3}}}, eng)
	f.Cleanup(func() { s.Close() })

	inst := kmsg.StringPtr("i1")
	protos := []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 1, 0, 2, 'f', 'z', 0, 0, 0, 0}}}
	seeds := []kmsg.Request{
		&kmsg.FindCoordinatorRequest{Version: 0, CoordinatorKey: "g"},
		&kmsg.FindCoordinatorRequest{Version: 4, CoordinatorKeys: []string{"g", ""}, CoordinatorType: 1},
		&kmsg.JoinGroupRequest{Version: 0, Group: "g", SessionTimeoutMillis: 1000, ProtocolType: "consumer", Protocols: protos},
		&kmsg.JoinGroupRequest{Version: 4, Group: "g", SessionTimeoutMillis: 1000, RebalanceTimeoutMillis: 1000, ProtocolType: "consumer", Protocols: protos},
		&kmsg.JoinGroupRequest{Version: 9, Group: "s", SessionTimeoutMillis: 1000, RebalanceTimeoutMillis: 1000, InstanceID: inst, ProtocolType: "consumer", Protocols: protos},
		&kmsg.SyncGroupRequest{Version: 0, Group: "g", MemberID: "m", Generation: 1},
		&kmsg.SyncGroupRequest{Version: 5, Group: "s", MemberID: "m", InstanceID: inst, Generation: 1, ProtocolType: kmsg.StringPtr("consumer"), Protocol: kmsg.StringPtr("range"),
			GroupAssignment: []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "m", MemberAssignment: []byte{1}}}},
		&kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: "m", Generation: 1, InstanceID: inst},
		&kmsg.LeaveGroupRequest{Version: 0, Group: "g", MemberID: "m"},
		&kmsg.LeaveGroupRequest{Version: 5, Group: "s", Members: []kmsg.LeaveGroupRequestMember{{InstanceID: inst}, {MemberID: "x"}}},
		&kmsg.OffsetCommitRequest{Version: 2, Group: "c", Generation: -1, RetentionTimeMillis: -1, Topics: []kmsg.OffsetCommitRequestTopic{{Topic: "fz",
			Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3}, {Partition: 9, Offset: 1}}}}},
		&kmsg.OffsetCommitRequest{Version: 9, Group: "c", Generation: -1, Topics: []kmsg.OffsetCommitRequestTopic{{Topic: "fz",
			Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 3, LeaderEpoch: 2, Metadata: kmsg.StringPtr("m")}}}}},
		&kmsg.OffsetFetchRequest{Version: 1, Group: "c", Topics: []kmsg.OffsetFetchRequestTopic{{Topic: "fz", Partitions: []int32{0, 1}}}},
		&kmsg.OffsetFetchRequest{Version: 8, Groups: []kmsg.OffsetFetchRequestGroup{{Group: "c"}, {Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "fz", Partitions: []int32{0}}}}}},
		&kmsg.OffsetDeleteRequest{Group: "c", Topics: []kmsg.OffsetDeleteRequestTopic{{Topic: "fz", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}},
		&kmsg.DescribeGroupsRequest{Version: 0, Groups: []string{"g", "s", "c", "none"}},
		&kmsg.DescribeGroupsRequest{Version: 6, Groups: []string{"none"}},
		&kmsg.ListGroupsRequest{Version: 5, StatesFilter: []string{"Empty"}, TypesFilter: []string{"classic"}},
		&kmsg.DeleteGroupsRequest{Version: 3, Groups: []string{"c", "none", "c"}},
		&kmsg.ConsumerGroupHeartbeatRequest{Version: 0, Group: "k", MemberEpoch: 0, RebalanceTimeoutMillis: 1000, SubscribedTopicNames: []string{"fz"}, Topics: []kmsg.ConsumerGroupHeartbeatRequestTopic{}},
		&kmsg.ConsumerGroupHeartbeatRequest{Version: 1, Group: "k", MemberID: "m1", MemberEpoch: 0, RebalanceTimeoutMillis: 1000, SubscribedTopicRegex: kmsg.StringPtr("f.*"), ServerAssignor: kmsg.StringPtr("range")},
		&kmsg.ConsumerGroupHeartbeatRequest{Version: 1, Group: "k", MemberID: "m1", MemberEpoch: 1, RebalanceTimeoutMillis: -1, Topics: []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: []int32{0}}}},
		&kmsg.ConsumerGroupHeartbeatRequest{Version: 1, Group: "k", MemberID: "m1", MemberEpoch: -1, RebalanceTimeoutMillis: -1},
		&kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: []string{"k", "g", "none"}},
	}
	for i, req := range seeds {
		f.Add(encodeRequest(req, int32(i), "fuzz"))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, decErr := decodeRequest(frame, nil)
		if decErr == nil && req != nil && tooCostly(eng, req) {
			return
		}
		p, r := newFakePeer(), newFakeReply()
		s.dispatch(p, frame, r)
		c := r.wait(t)
		p.Close()
		if s.panics.Load() != 0 {
			t.Fatalf("handler panicked:\n%s", logs.String())
		}
		if decErr != nil || c.kind != "send" {
			return
		}
		if len(c.resp) < 4 || int32(binary.BigEndian.Uint32(c.resp)) != h.corrID {
			t.Fatalf("response does not start with correlation id %d", h.corrID)
		}
		resp := kmsg.ResponseForKey(h.key)
		if req == nil {
			return
		}
		resp.SetVersion(h.version)
		body := c.resp[4:]
		if resp.IsFlexible() && h.key != apiVersionsKey {
			if len(body) == 0 || body[0] != 0 {
				t.Fatalf("flexible response without an empty header tag section")
			}
			body = body[1:]
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("%s v%d response does not decode: %v", kmsg.NameForKey(h.key), resp.GetVersion(), err)
		}
	})
}

// TestDescribeGroupsConsumerGroup848: a KIP-848 member (raw
// ConsumerGroupHeartbeat, server assignor range) appears in DescribeGroups
// in the classic shape, as Kafka answers it: protocol type "consumer", the
// assignor as protocol, the member's client id, a ConsumerProtocolSubscription
// of its subscribed topics and a ConsumerProtocolAssignment of what it owns.
func TestDescribeGroupsConsumerGroup848(t *testing.T) {
	addr, _, _ := startBroker(t, groupTestConfig)
	const topic, gid, mid = "t848", "g848", "m848"
	if _, err := newAdmin(t, addr).CreateTopic(testCtx(t), 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.ClientID("c848"))
	var (
		epoch int32
		owned []kmsg.ConsumerGroupHeartbeatRequestTopic
		g     kmsg.DescribeGroupsResponseGroup
	)
	for i := 0; i < 20; i++ { // join, then acknowledge the assignment until Stable
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = gid, mid, epoch, 5000
		hb.SubscribedTopicNames, hb.ServerAssignor = []string{topic}, kmsg.StringPtr("range")
		hb.Topics = owned
		if owned == nil {
			hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		hr := issue[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, hb)
		if hr.ErrorCode != 0 {
			t.Fatalf("heartbeat %d: error %d", i, hr.ErrorCode)
		}
		epoch = hr.MemberEpoch
		if hr.Assignment != nil {
			owned = owned[:0]
			for _, at := range hr.Assignment.Topics {
				owned = append(owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: at.TopicID, Partitions: at.Partitions})
			}
		}
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{gid}
		g = issue[*kmsg.DescribeGroupsResponse](t, cl, dg).Groups[0]
		if g.State == "Stable" {
			break
		}
	}
	if g.ErrorCode != 0 || g.State != "Stable" || g.ProtocolType != "consumer" || g.Protocol != "range" {
		t.Fatalf("group: error %d state %q protocol type %q protocol %q, want 0 Stable consumer range", g.ErrorCode, g.State, g.ProtocolType, g.Protocol)
	}
	if len(g.Members) != 1 {
		t.Fatalf("members: %d, want 1", len(g.Members))
	}
	m := g.Members[0]
	if m.MemberID != mid || m.ClientID != "c848" || m.ClientHost == "" || m.InstanceID != nil {
		t.Errorf("member: id %q client id %q host %q instance %v, want %s c848 a host and none", m.MemberID, m.ClientID, m.ClientHost, m.InstanceID, mid)
	}
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(m.ProtocolMetadata); err != nil || !slices.Equal(sub.Topics, []string{topic}) {
		t.Errorf("metadata: %v, topics %v, want [%s]", err, sub.Topics, topic)
	}
	var asg kmsg.ConsumerMemberAssignment
	if err := asg.ReadFrom(m.MemberAssignment); err != nil || len(asg.Topics) != 1 || asg.Topics[0].Topic != topic ||
		!slices.Equal(asg.Topics[0].Partitions, []int32{0, 1, 2}) {
		t.Errorf("assignment: %v, %+v, want %s [0 1 2]", err, asg.Topics, topic)
	}
}
