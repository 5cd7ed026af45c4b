package server

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups in a cluster, where a group's coordinator and the leaders
// of its share-partitions are different brokers (issue 24).

// startShareCluster is startInCluster with cfg applied to every broker's
// server Config.
func startShareCluster(t *testing.T, n int, cfg func(*Config)) []*inCluster {
	t.Helper()
	voters := map[int32]string{}
	lns := map[int32]net.Listener{}
	for i := int32(0); i < int32(n); i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], voters[i] = ln, ln.Addr().String()
	}
	var brokers []*inCluster
	for i := int32(0); i < int32(n); i++ {
		b := &inCluster{id: i, dataDir: t.TempDir(), ctlDir: t.TempDir(), cfg: cfg}
		b.start(t, voters, lns[i])
		brokers = append(brokers, b)
	}
	return brokers
}

// shareTopology is a share-group test's cluster: a client for every
// broker, a topic and each partition's leader.
type shareTopology struct {
	brokers []*inCluster
	cl      *kgo.Client // produces with a manual partitioner
	adm     *kadm.Client
	topic   string
	id      [16]byte
	leaders []int32
}

func newShareTopology(t *testing.T, brokers []*inCluster, topic string, partitions int32, configs map[string]*string) *shareTopology {
	t.Helper()
	var seeds []string
	for _, b := range brokers {
		seeds = append(seeds, b.addr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	waitRegistered(t, brokers)
	adm := kadm.NewClient(cl)
	ct, err := adm.CreateTopic(testCtx(t), partitions, 2, configs, topic)
	if err != nil || ct.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, ct.Err)
	}
	st := &shareTopology{brokers: brokers, cl: cl, adm: adm, topic: topic, id: ct.ID, leaders: make([]int32, partitions)}
	for _, b := range brokers {
		waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
			mt := clusterTopic(r, topic)
			if mt == nil || len(mt.Partitions) != int(partitions) {
				return "topic not ready"
			}
			for _, p := range mt.Partitions {
				if p.Leader < 0 || len(p.ISR) != 2 {
					return "partition not ready"
				}
				st.leaders[p.Partition] = p.Leader
			}
			return ""
		})
	}
	return st
}

// coordinator is the broker FindCoordinator names for group.
func (st *shareTopology) coordinator(t *testing.T, group string) int32 {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{group}
		resp := issue[*kmsg.FindCoordinatorResponse](t, st.cl, req)
		if len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0 {
			return resp.Coordinators[0].NodeID
		}
		if time.Now().After(deadline) {
			t.Fatalf("no coordinator for %s: %+v", group, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// notLedBy is a partition of the topic whose leader is not broker id.
func (st *shareTopology) notLedBy(t *testing.T, id int32) int32 {
	t.Helper()
	for p, l := range st.leaders {
		if l != id {
			return int32(p)
		}
	}
	t.Fatalf("broker %d leads every partition (%v)", id, st.leaders)
	return -1
}

func (st *shareTopology) produce(t *testing.T, p int32, n int) {
	t.Helper()
	for i := range n {
		r := &kgo.Record{Topic: st.topic, Partition: p, Value: []byte(fmt.Sprint(i))}
		if err := st.cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatalf("produce to %s-%d: %v", st.topic, p, err)
		}
	}
}

// heartbeat sends a ShareGroupHeartbeat to broker id.
func (st *shareTopology) heartbeat(t *testing.T, id int32, group, member string, epoch int32) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
	if epoch == 0 {
		req.SubscribedTopicNames = []string{st.topic}
	}
	resp, err := req.RequestWith(testCtx(t), st.cl.Broker(int(id)))
	if err != nil {
		t.Fatalf("ShareGroupHeartbeat to broker %d: %v", id, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ShareGroupHeartbeat of %s (epoch %d) to broker %d: %v", member, epoch, id, err)
	}
	return resp
}

// fetch sends one ShareFetch of partition p to its leader and returns the
// offsets acquired with their delivery counts.
func (st *shareTopology) fetch(t *testing.T, group, member string, p, epoch int32) map[int64]int16 {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(group), kmsg.StringPtr(member)
	req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = epoch, 200, 1, 1<<20, 100
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = st.id
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.Partition = p
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), st.cl.Broker(int(st.leaders[p])))
	if err != nil {
		t.Fatalf("ShareFetch: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ShareFetch of %s at broker %d: %v", member, st.leaders[p], err)
	}
	got := map[int64]int16{}
	for _, tt := range resp.Topics {
		for _, rp := range tt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("ShareFetch of %s-%d at broker %d: %v", st.topic, p, st.leaders[p], err)
			}
			for _, a := range rp.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					got[o] = a.DeliveryCount
				}
			}
		}
	}
	return got
}

// acquire fetches partition p as member until it holds want records (at
// most rounds fetches of up to 200 ms each) and returns them.
func (st *shareTopology) acquire(t *testing.T, group, member string, p int32, want, rounds int) map[int64]int16 {
	t.Helper()
	got := map[int64]int16{}
	for epoch := int32(0); len(got) < want && int(epoch) < rounds; epoch++ {
		for o, n := range st.fetch(t, group, member, p, epoch) {
			got[o] = n
		}
	}
	return got
}

// TestClusterShareMemberGoneReleases: in a 3-broker cluster a share
// member acquires records on a partition led by a broker that is not the
// group's coordinator; when it leaves (heartbeat epoch -1) or its session
// times out at the coordinator, those records are available again at the
// leader at once (delivery count kept: another member gets them with
// delivery count 2), not when their 60 s acquisition lock expires.
func TestClusterShareMemberGoneReleases(t *testing.T) {
	brokers := startShareCluster(t, 3, func(c *Config) {
		c.Groups.Share.Groups.SessionTimeoutMs = 1500
		c.Groups.Share.Groups.HeartbeatIntervalMs = 500
	})
	st := newShareTopology(t, brokers, "tasks", 3, nil)
	for _, tc := range []struct {
		group string
		leave bool
	}{{"leavers", true}, {"sleepers", false}} {
		setGroupConfig(t, st.cl, tc.group, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "60000")
		coord := st.coordinator(t, tc.group)
		p := st.notLedBy(t, coord)
		st.produce(t, p, 4)
		holder, other := tc.group+"-holder", tc.group+"-other"
		st.heartbeat(t, coord, tc.group, holder, 0)
		held := st.acquire(t, tc.group, holder, p, 4, 20)
		if len(held) < 4 {
			t.Fatalf("%s: the holder acquired %v on %s-%d", tc.group, held, st.topic, p)
		}
		if tc.leave {
			st.heartbeat(t, coord, tc.group, holder, -1)
		} // else: it goes silent and times out at the coordinator
		// At most 40 fetches of up to 200 ms (the lock lasts 60 s).
		again := st.acquire(t, tc.group, other, p, len(held), 40)
		for o := range held {
			if again[o] != 2 {
				t.Fatalf("%s (leave %v, coordinator %d, leader %d): after the holder went, another member acquired %v, want %v again with delivery count 2",
					tc.group, tc.leave, coord, st.leaders[p], again, held)
			}
		}
	}
}
