package server

// Group APIs at the old versions kafka-go and librdkafka send, and Kafka's
// error codes, with hand-made frames on a raw socket (versions pinned).

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupRaw struct {
	t    *testing.T
	c    *rawConn
	corr int32
}

func (g *groupRaw) do(req kmsg.Request, version int16, resp kmsg.Response) {
	g.t.Helper()
	req.SetVersion(version)
	g.corr++
	g.c.roundTrip(req, g.corr, resp)
}

// joinV0 joins group as a single member with JoinGroup v0 (no KIP-394 round
// trip) and syncs with SyncGroup v0; it returns the member id and generation.
func (g *groupRaw) joinV0(groupID string, assignment []byte) (string, int32) {
	g.t.Helper()
	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Group, jreq.SessionTimeoutMillis, jreq.ProtocolType = groupID, 30000, "consumer"
	jreq.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
	jresp := kmsg.NewPtrJoinGroupResponse()
	g.do(jreq, 0, jresp)
	if jresp.ErrorCode != 0 || jresp.MemberID == "" || jresp.LeaderID != jresp.MemberID || *jresp.Protocol != "range" {
		g.t.Fatalf("JoinGroup v0: %+v", jresp)
	}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Group, sreq.Generation, sreq.MemberID = groupID, jresp.Generation, jresp.MemberID
	sreq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jresp.MemberID, MemberAssignment: assignment}}
	sresp := kmsg.NewPtrSyncGroupResponse()
	g.do(sreq, 0, sresp)
	if sresp.ErrorCode != 0 || string(sresp.MemberAssignment) != string(assignment) {
		g.t.Fatalf("SyncGroup v0: %+v", sresp)
	}
	return jresp.MemberID, jresp.Generation
}

func (g *groupRaw) commit(version int16, groupID, member string, gen int32, topic string, partition int32, offset int64) int16 {
	g.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = groupID, member, gen
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: partition, Offset: offset, LeaderEpoch: -1, Metadata: kmsg.StringPtr("md")}}}}
	resp := kmsg.NewPtrOffsetCommitResponse()
	g.do(req, version, resp)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		g.t.Fatalf("OffsetCommit v%d: %+v", version, resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func TestGroupOldVersionsAndErrors(t *testing.T) {
	addr, _, eng := startBroker(t, groupTestConfig)
	if _, err := eng.CreateTopic("t", 2, nil); err != nil {
		t.Fatal(err)
	}
	g := &groupRaw{t: t, c: dialRaw(t, addr)}

	// FindCoordinator v0 (kafka-go) and v4 batches with a transaction key.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "kg"
	fr := kmsg.NewPtrFindCoordinatorResponse()
	g.do(fc, 0, fr)
	if fr.ErrorCode != 0 || fr.NodeID != 0 || fr.Port == 0 {
		t.Fatalf("FindCoordinator v0: %+v", fr)
	}
	fc = kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{"tx1", ""}
	fr = kmsg.NewPtrFindCoordinatorResponse()
	g.do(fc, 4, fr)
	if len(fr.Coordinators) != 2 || fr.Coordinators[0].ErrorCode != 0 || fr.Coordinators[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("FindCoordinator v4: %+v", fr)
	}

	// Simple commits (generation -1) with OffsetCommit v2, read with OffsetFetch v1.
	if code := g.commit(2, "kg", "", -1, "t", 1, 17); code != 0 {
		t.Fatalf("simple commit v2: %d", code)
	}
	if code := g.commit(2, "kg", "", -1, "nope", 0, 1); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit to an unknown topic: %d", code)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = "kg"
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	ofr := kmsg.NewPtrOffsetFetchResponse()
	g.do(of, 1, ofr)
	if len(ofr.Topics) != 1 || len(ofr.Topics[0].Partitions) != 2 {
		t.Fatalf("OffsetFetch v1: %+v", ofr)
	}
	for _, p := range ofr.Topics[0].Partitions {
		want := map[int32]int64{0: -1, 1: 17}[p.Partition]
		if p.Offset != want || p.ErrorCode != 0 {
			t.Errorf("OffsetFetch v1 partition %d: offset %d code %d, want %d", p.Partition, p.Offset, p.ErrorCode, want)
		}
	}

	// A managed group with the v0 protocol.
	member, gen := g.joinV0("managed", []byte("plan"))
	if code := g.commit(2, "managed", member, gen, "t", 0, 5); code != 0 {
		t.Fatalf("member commit: %d", code)
	}
	if code := g.commit(2, "managed", member, gen+1, "t", 0, 5); code != kerr.IllegalGeneration.Code {
		t.Fatalf("commit with a future generation: %d", code)
	}
	if code := g.commit(2, "managed", "ghost", gen, "t", 0, 5); code != kerr.UnknownMemberID.Code {
		t.Fatalf("commit by an unknown member: %d", code)
	}
	if code := g.commit(2, "managed", "", -1, "t", 0, 5); code != kerr.UnknownMemberID.Code {
		t.Fatalf("simple commit to a group with members: %d", code)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "managed", member, gen
	hbr := kmsg.NewPtrHeartbeatResponse()
	g.do(hb, 0, hbr)
	if hbr.ErrorCode != 0 {
		t.Fatalf("Heartbeat v0: %d", hbr.ErrorCode)
	}

	// OffsetFetch v8: two groups in one request, one of them asking for all.
	of = kmsg.NewPtrOffsetFetchRequest()
	of.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "kg", Topics: nil},
		{Group: "managed", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}},
	}
	ofr = kmsg.NewPtrOffsetFetchResponse()
	g.do(of, 8, ofr)
	if len(ofr.Groups) != 2 || len(ofr.Groups[0].Topics) != 1 || ofr.Groups[0].Topics[0].Partitions[0].Offset != 17 ||
		ofr.Groups[1].Topics[0].Partitions[0].Offset != 5 {
		t.Fatalf("OffsetFetch v8: %+v", ofr)
	}

	// DescribeGroups: v0 shows the member; a missing group is Dead (v0)
	// or GROUP_ID_NOT_FOUND (v6).
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"managed", "missing"}
	dgr := kmsg.NewPtrDescribeGroupsResponse()
	g.do(dg, 0, dgr)
	if dgr.Groups[0].State != "Stable" || len(dgr.Groups[0].Members) != 1 || string(dgr.Groups[0].Members[0].MemberAssignment) != "plan" ||
		dgr.Groups[1].State != "Dead" || dgr.Groups[1].ErrorCode != 0 {
		t.Fatalf("DescribeGroups v0: %+v", dgr)
	}
	dgr = kmsg.NewPtrDescribeGroupsResponse()
	g.do(dg, 6, dgr)
	if dgr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DescribeGroups v6 of a missing group: %+v", dgr.Groups[1])
	}

	// ListGroups v4 with a state filter.
	lg := kmsg.NewPtrListGroupsRequest()
	lg.StatesFilter = []string{"stable"}
	lgr := kmsg.NewPtrListGroupsResponse()
	g.do(lg, 4, lgr)
	if len(lgr.Groups) != 1 || lgr.Groups[0].Group != "managed" || lgr.Groups[0].GroupState != "Stable" {
		t.Fatalf("ListGroups v4 [stable]: %+v", lgr.Groups)
	}
	lgr = kmsg.NewPtrListGroupsResponse()
	g.do(kmsg.NewPtrListGroupsRequest(), 0, lgr)
	if len(lgr.Groups) != 2 {
		t.Fatalf("ListGroups v0: %+v", lgr.Groups)
	}

	// OffsetDelete on a group with members subscribed to nothing decodable
	// is allowed; DeleteGroups of a non-empty group is refused.
	dl := kmsg.NewPtrDeleteGroupsRequest()
	dl.Groups = []string{"managed", "missing"}
	dlr := kmsg.NewPtrDeleteGroupsResponse()
	g.do(dl, 0, dlr)
	if dlr.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code || dlr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DeleteGroups v0: %+v", dlr.Groups)
	}

	// LeaveGroup v0; then the group is Empty and can be deleted.
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group, lv.MemberID = "managed", member
	lvr := kmsg.NewPtrLeaveGroupResponse()
	g.do(lv, 0, lvr)
	if lvr.ErrorCode != 0 {
		t.Fatalf("LeaveGroup v0: %d", lvr.ErrorCode)
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "kg"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 1}}}}
	odr := kmsg.NewPtrOffsetDeleteResponse()
	g.do(od, 0, odr)
	if odr.ErrorCode != 0 || odr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetDelete: %+v", odr)
	}
	dlr = kmsg.NewPtrDeleteGroupsResponse()
	dl.Groups = []string{"managed"}
	g.do(dl, 3, dlr)
	if dlr.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups v3 of an empty group: %+v", dlr.Groups)
	}
	of = kmsg.NewPtrOffsetFetchRequest()
	of.Group = "kg"
	ofr = kmsg.NewPtrOffsetFetchResponse()
	g.do(of, 7, ofr) // null topics: everything committed
	if ofr.ErrorCode != 0 || len(ofr.Topics) != 0 {
		t.Fatalf("OffsetFetch v7 after OffsetDelete: %+v", ofr)
	}
}

func TestGroupJoinV4RequiresMemberID(t *testing.T) {
	addr, _, _ := startBroker(t, groupTestConfig)
	g := &groupRaw{t: t, c: dialRaw(t, addr)}
	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Group, jreq.SessionTimeoutMillis, jreq.RebalanceTimeoutMillis, jreq.ProtocolType = "g4", 30000, 30000, "consumer"
	jreq.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	jresp := kmsg.NewPtrJoinGroupResponse()
	g.do(jreq, 4, jresp)
	if jresp.ErrorCode != kerr.MemberIDRequired.Code || jresp.MemberID == "" {
		t.Fatalf("first JoinGroup v4: %+v", jresp)
	}
	jreq.MemberID = jresp.MemberID
	jresp = kmsg.NewPtrJoinGroupResponse()
	g.do(jreq, 9, jresp)
	if jresp.ErrorCode != 0 || jresp.Generation != 1 || *jresp.ProtocolType != "consumer" {
		t.Fatalf("second JoinGroup v9: %+v", jresp)
	}
	// Session timeout outside the broker's bounds.
	jreq.MemberID, jreq.SessionTimeoutMillis = "", 1
	jresp = kmsg.NewPtrJoinGroupResponse()
	g.do(jreq, 5, jresp)
	if jresp.ErrorCode != kerr.InvalidSessionTimeout.Code {
		t.Fatalf("JoinGroup with a 1 ms session: %+v", jresp)
	}
}
