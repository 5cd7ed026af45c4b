package server

import (
	"path/filepath"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The share-group APIs check Kafka's ACLs: Read on the group, Describe on
// subscribed topics (heartbeat), Read on fetched topics, Delete on the
// group to delete its offsets.
func TestShareGroupACLs(t *testing.T) {
	addr, _ := startACLBroker(t, filepath.Join(t.TempDir(), engine.AclsFile))
	ctx := testCtx(t)
	admin := newAdmin(t, addr, asPlain("admin"))
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	md, err := admin.Metadata(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	topicID := md.Topics["q"].ID
	alice := newClient(t, addr, asPlain("alice"))
	// Straight to the broker: kgo's FindCoordinator would stop at the
	// group's missing Describe before the request is sent.
	send := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := alice.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}
	heartbeat := func() int16 {
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "alice-1", []string{"q"}
		return send(hb).(*kmsg.ShareGroupHeartbeatResponse).ErrorCode
	}
	if code := heartbeat(); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("heartbeat without ACLs: %v", kerr.ErrorForCode(code))
	}
	createACLs(t, admin, kadm.NewACLs().Allow("User:alice").Groups("sg").Operations(kadm.OpRead))
	if code := heartbeat(); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("heartbeat without Describe on the topic: %v", kerr.ErrorForCode(code))
	}
	createACLs(t, admin, kadm.NewACLs().Allow("User:alice").Topics("q").Operations(kadm.OpDescribe))
	if code := heartbeat(); code != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(code))
	}
	fetch := func(epoch int32) *kmsg.ShareFetchResponse {
		req := kmsg.NewPtrShareFetchRequest()
		g, m := "sg", "alice-1"
		req.GroupID, req.MemberID, req.ShareSessionEpoch, req.MaxRecords = &g, &m, epoch, 10
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = topicID
		rt.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}
		req.Topics = append(req.Topics, rt)
		return send(req).(*kmsg.ShareFetchResponse)
	}
	if r := fetch(0); r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("fetch without Read on the topic: %+v", r)
	}
	createACLs(t, admin, kadm.NewACLs().Allow("User:alice").Topics("q").Operations(kadm.OpRead))
	if r := fetch(1); r.ErrorCode != 0 || len(r.Topics) != 0 {
		t.Fatalf("fetch: %+v", r)
	}
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "sg"
	del.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "q"}}
	if r := send(del).(*kmsg.DeleteShareGroupOffsetsResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("delete offsets without Delete on the group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
