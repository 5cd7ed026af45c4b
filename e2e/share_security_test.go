package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestClusterShareSecuredForwarding: share groups on three `strata serve`
// brokers with SASL (SCRAM between the brokers, as the super user admin)
// and the StandardAuthorizer (issue 24). The group's coordinator and the
// leader of the partition consumed are different brokers, so every step
// makes one broker send another a request of its own: the group configs
// set at one broker reach the others, a ShareFetch and a
// ShareAcknowledge at the leader write __share_group_state at the state
// partitions' leaders, a member's leave at the coordinator has the leader
// release its records, and DescribeShareGroupOffsets at the coordinator
// asks the leader. Carol, with READ on the group and the topic, gets
// records, accepts them, and sees the records a member left with again;
// alice, with READ on the topic only, is GROUP_AUTHORIZATION_FAILED at
// both brokers.
func TestClusterShareSecuredForwarding(t *testing.T) {
	voters := []string{"0@" + freeAddr(t), "1@" + freeAddr(t), "2@" + freeAddr(t)}
	c := &testCluster{t: t}
	for i := range voters {
		addr := freeAddr(t)
		props := saslProps("SASL_PLAINTEXT", addr) + clusterProps +
			"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:admin\n"
		c.brokers = append(c.brokers, startBrokerProps(t, addr, props,
			"--node-id", strconv.Itoa(i), "--controller-quorum", strings.Join(voters, ",")))
	}
	ctx := testCtx(t, 4*time.Minute)
	admin := c.client(kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for id := int32(0); id < 3; id++ {
		c.waitBrokers(ctx, admin, id, 3)
	}
	adm := kadm.NewClient(admin)
	const topic, group, partitions = "queue", "workers", 3

	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-secret"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	acls := []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:carol").AllowHosts("*").Groups(group).Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:carol", "User:alice").AllowHosts("*").Topics(topic).Operations(kadm.OpRead, kadm.OpDescribe),
	}
	for _, b := range acls {
		cres, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range cres {
			if r.Err != nil {
				t.Fatalf("CreateACLs: %v", r.Err)
			}
		}
	}
	ct, err := adm.CreateTopic(ctx, partitions, 3, nil, topic)
	if err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}
	leaders := waitTopicLeaders(ctx, t, admin, topic, partitions)
	// The group configs, set at one broker, which tells the others.
	setGroupConfigs(ctx, t, admin, group, [2]string{"share.auto.offset.reset", "earliest"}, [2]string{"share.record.lock.duration.ms", "3600000"})

	carol := c.client(kgo.SASL(scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism()))
	// carol's login may reach a broker before the SCRAM user does.
	var coord int32
	waitFor(t, 30*time.Second, func() string {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{group}
		resp, err := req.RequestWith(ctx, carol)
		if err != nil {
			return "FindCoordinator: " + err.Error()
		}
		if len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0 {
			return fmt.Sprintf("FindCoordinator: %+v", resp.Coordinators)
		}
		coord = resp.Coordinators[0].NodeID
		return ""
	})
	p := int32(-1)
	for q := int32(0); q < partitions; q++ {
		if leaders[q] != coord {
			p = q
			break
		}
	}
	if p < 0 {
		t.Fatalf("broker %d, the group's coordinator, leads every partition: %v", coord, leaders)
	}
	leader := leaders[p]
	t.Logf("group %s: coordinator broker %d; %s-%d led by broker %d", group, coord, topic, p, leader)
	for i := range 6 {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprint(i))}
		if err := admin.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	heartbeat := func(cl *kgo.Client, member string, epoch int32) *kmsg.ShareGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
		if epoch == 0 {
			req.SubscribedTopicNames = []string{topic}
		}
		var resp *kmsg.ShareGroupHeartbeatResponse
		waitFor(t, 30*time.Second, func() string {
			var err error
			resp, err = req.RequestWith(ctx, cl.Broker(int(coord)))
			if err != nil {
				return "ShareGroupHeartbeat: " + err.Error()
			}
			if ke, ok := kerr.ErrorForCode(resp.ErrorCode).(*kerr.Error); ok && ke.Retriable {
				return "ShareGroupHeartbeat: " + ke.Error()
			}
			return ""
		})
		return resp
	}
	// fetch sends one ShareFetch of partition p to its leader in member's
	// session at epoch, acknowledging acks (offsets, ACCEPT) with it.
	fetch := func(cl *kgo.Client, member string, epoch int32, acks []int64) (*kmsg.ShareFetchResponse, map[int64]int16) {
		t.Helper()
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID = kmsg.StringPtr(group), kmsg.StringPtr(member)
		req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = epoch, 500, 1, 1<<20, 100
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = ct.ID
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = p
		for _, o := range acks {
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{
				FirstOffset: o, LastOffset: o, AcknowledgeTypes: []int8{1}, // ACCEPT
			})
		}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			t.Fatalf("ShareFetch of %s at broker %d: %v", member, leader, err)
		}
		got := map[int64]int16{}
		for _, tt := range resp.Topics {
			for _, rp := range tt.Partitions {
				if rp.ErrorCode != 0 || rp.AcknowledgeErrorCode != 0 {
					t.Fatalf("ShareFetch of %s-%d at broker %d: %v, acknowledgements %v\n%s", topic, p, leader,
						kerr.ErrorForCode(rp.ErrorCode), kerr.ErrorForCode(rp.AcknowledgeErrorCode), c.warnings())
				}
				for _, a := range rp.AcquiredRecords {
					for o := a.FirstOffset; o <= a.LastOffset; o++ {
						got[o] = a.DeliveryCount
					}
				}
			}
		}
		return resp, got
	}
	// acquire fetches as member until it holds want records (at most 40
	// fetches of up to 500 ms) and returns them with the session's next
	// epoch.
	acquire := func(cl *kgo.Client, member string, want int) (map[int64]int16, int32) {
		t.Helper()
		got := map[int64]int16{}
		epoch := int32(0)
		for ; len(got) < want && epoch < 40; epoch++ {
			resp, recs := fetch(cl, member, epoch, nil)
			if resp.ErrorCode != 0 {
				t.Fatalf("ShareFetch of %s at broker %d: %v", member, leader, kerr.ErrorForCode(resp.ErrorCode))
			}
			for o, n := range recs {
				got[o] = n
			}
		}
		return got, epoch
	}

	// A member that leaves holding records: the coordinator tells the
	// leader, which releases them.
	if r := heartbeat(carol, "leaver", 0); r.ErrorCode != 0 {
		t.Fatalf("carol's heartbeat: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	held, _ := acquire(carol, "leaver", 6)
	if len(held) != 6 {
		t.Fatalf("the leaver acquired %v, want 6 records", held)
	}
	if r := heartbeat(carol, "leaver", -1); r.ErrorCode != 0 {
		t.Fatalf("carol's leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Another member gets them again under their one-hour lock, and
	// accepts them (a ShareAcknowledge, then the state written).
	if r := heartbeat(carol, "worker", 0); r.ErrorCode != 0 {
		t.Fatalf("carol's heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	again, epoch := acquire(carol, "worker", 6)
	for o := range held {
		if again[o] != 2 {
			t.Fatalf("after the leaver left (coordinator %d, leader %d), the worker acquired %v, want %v with delivery count 2\n%s",
				coord, leader, again, held, c.warnings())
		}
	}
	{
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr("worker"), epoch
		rt := kmsg.NewShareAcknowledgeRequestTopic()
		rt.TopicID = ct.ID
		rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
		rp.Partition = p
		rp.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 5, AcknowledgeTypes: []int8{1}}}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, carol.Broker(int(leader)))
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("ShareAcknowledge: %v %v", err, resp)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("ShareAcknowledge of %s-%d: %v\n%s", topic, p, kerr.ErrorForCode(code), c.warnings())
		}
	}
	// The coordinator asks the leader for the start offset: past the six.
	waitFor(t, 30*time.Second, func() string {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = group
		rg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: topic, Partitions: []int32{p}}}
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, admin.Broker(int(coord)))
		if err != nil {
			return "DescribeShareGroupOffsets: " + err.Error()
		}
		if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 1 {
			return fmt.Sprintf("DescribeShareGroupOffsets: %+v", resp.Groups)
		}
		dp := resp.Groups[0].Topics[0].Partitions[0]
		if dp.ErrorCode != 0 || dp.StartOffset != 6 {
			return fmt.Sprintf("DescribeShareGroupOffsets of %s-%d at the coordinator %d: start %d, %v, want 6", topic, p, coord, dp.StartOffset, kerr.ErrorForCode(dp.ErrorCode))
		}
		return ""
	})

	// alice may read the topic, not the group.
	alice := c.client(kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	if r := heartbeat(alice, "alice-1", 0); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("alice's ShareGroupHeartbeat at the coordinator %d: %v, want GROUP_AUTHORIZATION_FAILED", coord, kerr.ErrorForCode(r.ErrorCode))
	}
	resp, got := fetch(alice, "alice-1", 0, nil)
	if resp.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(got) != 0 {
		t.Fatalf("alice's ShareFetch at the leader %d: %v, %d records, want GROUP_AUTHORIZATION_FAILED and none", leader, kerr.ErrorForCode(resp.ErrorCode), len(got))
	}
	for _, b := range c.brokers {
		if logs := b.logs.String(); strings.Contains(logs, "released when their locks expire") {
			t.Fatalf("broker %s: a member-gone notice failed:\n%s", b.addr, c.warnings())
		}
	}
}
