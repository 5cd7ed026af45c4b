package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type shareTP struct {
	p   int32
	off int64
}

// TestClusterShareGroupLeaderSIGKILL: share groups on three `strata
// serve` processes (issue 24). 150 records on a 3-partition topic; a
// member acquires records of every partition and goes silent (its
// connection open, nothing acknowledged); four franz-go share consumers
// accept what they get; mid-run the leader of partition 0 is SIGKILLed
// (or, when the group's coordinator leads a partition, the coordinator).
// The kill happens once every record delivered so far has its
// acceptance answered. Every record is delivered, the silent member's
// records included (after their lock expires, or the failover), none
// accepted before the kill is delivered again (the new leader restores
// the share-partition from __share_group_state), and a record is delivered
// twice only on a partition the killed broker led (records a consumer
// had fetched ahead, whose acceptance reached the dead leader too late).
func TestClusterShareGroupLeaderSIGKILL(t *testing.T) {
	c := startCluster(t, 3)
	ctx := testCtx(t, 4*time.Minute)
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	adm := kadm.NewClient(cl)
	for id := int32(0); id < 3; id++ {
		c.waitBrokers(ctx, cl, id, 3)
	}
	const topic, group, partitions, records = "queue", "workers", 3, 150
	ct, err := adm.CreateTopic(ctx, partitions, 3, nil, topic)
	if err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}
	leaders := waitTopicLeaders(ctx, t, cl, topic, partitions)
	setGroupConfigs(ctx, t, cl, group, [2]string{"share.auto.offset.reset", "earliest"}, [2]string{"share.record.lock.duration.ms", "5000"})
	for i := range records {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	// The silent member: records of every partition, never acknowledged.
	silent := c.client()
	held := map[shareTP]bool{}
	for p := int32(0); p < partitions; p++ {
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID = kmsg.StringPtr(group), kmsg.StringPtr(fmt.Sprintf("silent-%d", p))
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = 1000, 1, 1<<20, 5
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = ct.ID
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, silent.Broker(int(leaders[p])))
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("silent ShareFetch on partition %d: %v %v", p, err, kerr.ErrorForCode(resp.ErrorCode))
		}
		for _, tt := range resp.Topics {
			for _, rp := range tt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("silent ShareFetch on partition %d: %v", p, kerr.ErrorForCode(rp.ErrorCode))
				}
				for _, a := range rp.AcquiredRecords {
					for o := a.FirstOffset; o <= a.LastOffset; o++ {
						held[shareTP{rp.Partition, o}] = true
					}
				}
			}
		}
	}
	if len(held) == 0 {
		t.Fatal("the silent member acquired nothing")
	}

	var (
		mu        sync.Mutex
		delivered = map[shareTP]int{}
		wg        sync.WaitGroup
		// gate: a consumer polls, acknowledges and flushes under a read
		// lock, so the test's write lock waits for every delivered
		// record's acceptance to be answered (durable).
		gate sync.RWMutex
	)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range 4 {
		cons := c.client(kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(5), kgo.ShareMaxRecordsStrict(),
			kgo.FetchMaxWait(250*time.Millisecond), kgo.ClientID(fmt.Sprintf("share-e2e-%d", i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				gate.RLock()
				pctx, pcancel := context.WithTimeout(cctx, 500*time.Millisecond)
				cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
					r.Ack(kgo.AckAccept)
					mu.Lock()
					delivered[shareTP{r.Partition, r.Offset}]++
					mu.Unlock()
				})
				pcancel()
				fctx, fcancel := context.WithTimeout(cctx, 10*time.Second)
				_ = cons.FlushAcks(fctx)
				fcancel()
				gate.RUnlock()
			}
		}()
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered)
	}
	waitFor(t, 60*time.Second, func() string {
		if n := count(); n < 20 {
			return fmt.Sprintf("%d of %d records delivered before the kill", n, records)
		}
		return ""
	})
	// The victim leads partition 0, or another partition when the group's
	// coordinator leads one: then the coordinator moves with the leader,
	// and the members' heartbeats reach a coordinator that never saw them
	// (share.Groups adopts them; answering UNKNOWN_MEMBER_ID would make
	// franz-go reset its share sessions and drop the acknowledgements of
	// records it holds on every partition).
	victim := leaders[0]
	coord := groupCoordinator(ctx, t, cl, group)
	for _, l := range leaders {
		if l == coord {
			victim = coord
		}
	}
	// A probe member (subscribed to another topic, so the queue's
	// assignment is the consumers' alone) joins at the coordinator; after
	// the kill its heartbeat at the epoch it has must be taken by the new
	// coordinator.
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "probe"); err != nil {
		t.Fatalf("create probe topic: %v", err)
	}
	probeEpoch := shareHeartbeat(ctx, t, cl.Broker(int(coord)), group, "probe-member", 0)
	killed := map[int32]bool{}
	for p, l := range leaders {
		killed[p] = l == victim
	}
	// Every record delivered so far is accepted and that answered:
	// none of them may come back after the kill.
	gate.Lock()
	mu.Lock()
	before := map[shareTP]bool{}
	for tp := range delivered {
		before[tp] = true
	}
	mu.Unlock()
	c.brokers[victim].kill()
	gate.Unlock()
	t.Logf("SIGKILLed broker %d (leader of partitions %v, group coordinator %v) after %d deliveries", victim, killed, victim == coord, count())
	if victim == coord {
		var next int32
		waitFor(t, 60*time.Second, func() string {
			if next = groupCoordinator(ctx, t, cl, group); next == victim {
				return "the group's coordinator is still the killed broker"
			}
			return ""
		})
		if e := shareHeartbeat(ctx, t, cl.Broker(int(next)), group, "probe-member", probeEpoch); e <= probeEpoch {
			t.Errorf("the new coordinator %d gave the probe member epoch %d after %d", next, e, probeEpoch)
		}
	}
	waitFor(t, 150*time.Second, func() string {
		if n := count(); n < records {
			return fmt.Sprintf("%d of %d records delivered after the kill\n%s", n, records, c.warnings())
		}
		return ""
	})
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for tp, n := range delivered {
		if n > 1 && before[tp] {
			t.Errorf("partition %d offset %d, accepted before the kill, delivered %d times", tp.p, tp.off, n)
		}
		if n > 1 {
			dups++
			if !killed[tp.p] {
				t.Errorf("partition %d offset %d delivered %d times; its leader was not killed", tp.p, tp.off, n)
			}
		}
	}
	after := 0 // records of the killed leader's partitions first delivered by the new leader
	for tp := range delivered {
		if killed[tp.p] && !before[tp] {
			after++
		}
	}
	if after == 0 {
		t.Errorf("no record of partitions %v was delivered after the kill: the failover was not exercised", killed)
	}
	for tp := range held {
		if delivered[tp] == 0 {
			t.Errorf("the silent member's record %+v was never delivered again", tp)
		}
	}
	t.Logf("%d records delivered, %d held by the silent member and redelivered, %d of the killed leader's partitions delivered after the kill, %d delivered twice (partitions of the killed leader)", len(delivered), len(held), after, dups)
}

// shareHeartbeat sends member's ShareGroupHeartbeat at epoch, subscribed
// to topic "probe", to broker b (retried while the coordinator is loading
// or moving) and returns the epoch it is given.
func shareHeartbeat(ctx context.Context, t *testing.T, b *kgo.Broker, group, member string, epoch int32) int32 {
	t.Helper()
	var got int32
	waitFor(t, 30*time.Second, func() string {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
		req.SubscribedTopicNames = []string{"probe"}
		resp, err := req.RequestWith(ctx, b)
		switch {
		case err != nil:
			return err.Error()
		case resp.ErrorCode == kerr.CoordinatorLoadInProgress.Code || resp.ErrorCode == kerr.CoordinatorNotAvailable.Code || resp.ErrorCode == kerr.NotCoordinator.Code:
			return kerr.ErrorForCode(resp.ErrorCode).Error()
		case resp.ErrorCode != 0:
			t.Fatalf("ShareGroupHeartbeat of %s at epoch %d: %v", member, epoch, kerr.ErrorForCode(resp.ErrorCode))
		}
		got = resp.MemberEpoch
		return ""
	})
	return got
}

// groupCoordinator asks for group's coordinator (FindCoordinator, retried
// while the coordinator is not available yet).
func groupCoordinator(ctx context.Context, t *testing.T, cl *kgo.Client, group string) int32 {
	t.Helper()
	var id int32
	waitFor(t, 30*time.Second, func() string {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err.Error()
		}
		if len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0 {
			return fmt.Sprintf("FindCoordinator: %+v", resp.Coordinators)
		}
		id = resp.Coordinators[0].NodeID
		return ""
	})
	return id
}

// waitTopicLeaders waits (bounded) until every broker's Metadata lists
// topic with its partitions each led and fully in sync, and returns the
// partitions' leaders.
func waitTopicLeaders(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partitions int) map[int32]int32 {
	t.Helper()
	leaders := map[int32]int32{}
	for id := int32(0); id < 3; id++ {
		waitFor(t, 30*time.Second, func() string {
			md, err := metadataFrom(ctx, cl, id)
			if err != nil {
				return err.Error()
			}
			mt := topicOf(md, topic)
			if mt == nil || len(mt.Partitions) != partitions {
				return "topic missing"
			}
			for _, p := range mt.Partitions {
				if p.Leader < 0 || len(p.ISR) != 3 {
					return fmt.Sprintf("partition %d: leader %d isr %v", p.Partition, p.Leader, p.ISR)
				}
				leaders[p.Partition] = p.Leader
			}
			return ""
		})
	}
	return leaders
}

// setGroupConfigs sets group configs (name, value) of group through cl
// (IncrementalAlterConfigs; the broker tells the others).
func setGroupConfigs(ctx context.Context, t *testing.T, cl *kgo.Client, group string, kvs ...[2]string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for _, kv := range kvs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = kv[0], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[1])
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group configs: %v %+v", err, resp)
	}
}
