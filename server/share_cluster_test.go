package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareConsume runs franz-go share consumers of group on topic until
// stop returns true or ctx ends, accepting every record; it returns the
// offsets each consumer received (with their delivery counts), after
// flushing the acknowledgements and closing the clients.
func shareConsume(t *testing.T, ctx context.Context, seeds []string, group, topic string, consumers int, stop func(got map[int64]int) bool) []map[int64]int32 {
	t.Helper()
	var (
		mu   sync.Mutex
		all  = map[int64]int{}
		per  = make([]map[int64]int32, consumers)
		wg   sync.WaitGroup
		done = make(chan struct{})
		once sync.Once
	)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range consumers {
		per[i] = map[int64]int32{}
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
			kgo.ShareMaxRecords(3), kgo.ShareMaxRecordsStrict(), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.ClientID(fmt.Sprintf("share-consumer-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				fs.EachRecord(func(r *kgo.Record) {
					r.Ack(kgo.AckAccept)
					mu.Lock()
					all[r.Offset]++
					per[i][r.Offset] = r.DeliveryCount()
					finished := stop(all)
					mu.Unlock()
					if finished {
						once.Do(func() { close(done) })
					}
				})
				if err := cl.FlushAcks(cctx); err != nil && cctx.Err() == nil {
					t.Errorf("consumer %d: flushing acks: %v", i, err)
				}
			}
			fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer fcancel()
			_ = cl.FlushAcks(fctx)
		}()
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	return per
}

// TestClusterShareGroupLeaderFailover: share groups in a 3-broker
// cluster (issue 24). Two franz-go share consumers share one partition's
// 20 records, each accepted once; a raw member then acquires the next 10
// and holds them; the partition's leader is stopped; on the new leader
// (which loads the share-partition from its replica of
// __share_group_state) a new consumer gets exactly the 10 in-flight
// records again and none of the 20 accepted ones.
func TestClusterShareGroupLeaderFailover(t *testing.T) {
	brokers, _ := startInCluster(t, 3)
	seeds := []string{brokers[0].addr, brokers[1].addr, brokers[2].addr}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	waitRegistered(t, brokers)

	const topic, group = "jobs", "workers"
	ct, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
	if err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}
	var leader int32
	for _, b := range brokers {
		waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
			mt := clusterTopic(r, topic)
			if mt == nil || len(mt.Partitions) != 1 || len(mt.Partitions[0].ISR) != 3 || mt.Partitions[0].Leader < 0 {
				return "topic not ready"
			}
			leader = mt.Partitions[0].Leader
			return ""
		})
	}
	// The group's configs are records of __share_group_state too: the
	// partition's leader reads them when it loads the share-partition.
	setGroupConfig(t, cl, group, "share.auto.offset.reset", "earliest")

	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, 20)
	per := shareConsume(t, ctx, seeds, group, topic, 2, func(got map[int64]int) bool { return len(got) >= 20 })
	seen := map[int64]int{}
	for i, m := range per {
		t.Logf("consumer %d received %d records", i, len(m))
		for o := range m {
			seen[o]++
		}
	}
	for o := int64(0); o < 20; o++ {
		if seen[o] != 1 {
			t.Fatalf("offset %d received by %d consumers, want 1 (%v)", o, seen[o], per)
		}
	}

	// Every broker (the group's coordinator among them) describes the
	// share-partition as its leader has it: a broker that does not lead
	// it reads its replica of __share_group_state.
	for _, b := range brokers {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = group // no topics: every share-partition with state
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, cl.Broker(int(b.id)))
		if err != nil {
			t.Fatalf("broker %d: DescribeShareGroupOffsets: %v", b.id, err)
		}
		g := resp.Groups[0]
		if g.ErrorCode != 0 || len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 {
			t.Fatalf("broker %d (leader %d) describes %+v", b.id, leader, g)
		}
		if p := g.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.StartOffset != 20 || p.Lag != 0 {
			t.Fatalf("broker %d (leader %d) describes the share-partition as %+v, want start offset 20, lag 0", b.id, leader, p)
		}
	}

	// Each broker reads the share-partition's state partition at its
	// leader (how a broker without a replica of it loads it): the last
	// snapshot says start offset 20.
	stateKey := share.StateKey(group, ct.ID, 0)
	stateTopic := brokers[0].eng.Topic(ShareStateTopic)
	if stateTopic == nil {
		t.Fatal("no local " + ShareStateTopic)
	}
	for _, b := range brokers {
		var last []byte
		err := b.s.groups.share.cluster.ReadPartition(ctx, ShareStateTopic, share.StatePartition(stateKey, stateTopic.Partitions()), func(batches []byte) error {
			for rest := batches; len(rest) > 0; {
				batch, r, _, err := record.Next(rest)
				if err != nil {
					return err
				}
				rest = r
				if err := record.Iterate(batch, func(_ *record.Header, rec *record.Record) error {
					if bytes.Equal(rec.Key, stateKey) {
						last = rec.Value
					}
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		})
		var st share.State
		if err != nil || last == nil || json.Unmarshal(last, &st) != nil || st.StartOffset != 20 {
			t.Fatalf("broker %d read the state partition at its leader: %v, last snapshot %s", b.id, err, last)
		}
	}

	// A raw member acquires the next ten records from the leader and
	// never acknowledges them.
	produce(20, 30)
	holder, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	held := map[int64]bool{}
	for epoch := int32(0); len(held) < 10 && ctx.Err() == nil; epoch++ {
		if epoch > 50 {
			t.Fatalf("holder acquired %d of 10 records", len(held))
		}
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID = kmsg.StringPtr(group), kmsg.StringPtr("holder-member")
		req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = epoch, 200, 1, 1<<20, 10
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = ct.ID
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, holder.Broker(int(leader)))
		if err != nil {
			t.Fatalf("holder ShareFetch: %v", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			t.Fatalf("holder ShareFetch: %v", err)
		}
		for _, tt := range resp.Topics {
			for _, p := range tt.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					t.Fatalf("holder ShareFetch partition: %v", err)
				}
				for _, a := range p.AcquiredRecords {
					for o := a.FirstOffset; o <= a.LastOffset; o++ {
						held[o] = true
					}
				}
			}
		}
	}
	for o := int64(20); o < 30; o++ {
		if !held[o] {
			t.Fatalf("holder acquired %v, want offsets 20-29", held)
		}
	}

	// The leader goes; another replica leads the partition.
	old := brokers[leader]
	old.stop(t)
	var rest []*inCluster
	var restSeeds []string
	for _, b := range brokers {
		if b != old {
			rest, restSeeds = append(rest, b), append(restSeeds, b.addr)
		}
	}
	for _, b := range rest {
		waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
			mt := clusterTopic(r, topic)
			if mt == nil || len(mt.Partitions) != 1 || mt.Partitions[0].Leader < 0 || mt.Partitions[0].Leader == old.id {
				return "no new leader yet"
			}
			return ""
		})
	}

	// The new leader redelivers the in-flight records, and only them.
	per = shareConsume(t, ctx, restSeeds, group, topic, 1, func(got map[int64]int) bool { return len(got) >= 10 })
	for o, n := range per[0] {
		if o < 20 || o >= 30 {
			t.Fatalf("offset %d (delivery %d) delivered again after the failover; accepted records must not be", o, n)
		}
	}
	if len(per[0]) != 10 {
		t.Fatalf("the new leader delivered %v, want offsets 20-29", per[0])
	}

	// And they are accepted for good: a last consumer gets nothing more
	// (produce one record as a marker: it alone comes back).
	produce(30, 31)
	per = shareConsume(t, ctx, restSeeds, group, topic, 1, func(got map[int64]int) bool { return len(got) >= 1 })
	if len(per[0]) != 1 || per[0][30] == 0 {
		t.Fatalf("after the accepts, a consumer received %v, want only offset 30", per[0])
	}

	// A group config set through a broker that does not lead the
	// partition reaches its leader when a new share session opens there.
	var newLeader, other *inCluster
	for _, b := range rest {
		waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
			if mt := clusterTopic(r, topic); mt != nil && len(mt.Partitions) == 1 && mt.Partitions[0].Leader == b.id {
				newLeader = b
			}
			return ""
		})
	}
	if newLeader == nil {
		t.Fatal("no broker says it leads the partition")
	}
	for _, b := range rest {
		if b != newLeader {
			other = b
		}
	}
	areq := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	ac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ac.Name, ac.Op, ac.Value = "share.record.lock.duration.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("15000")
	ar.Configs = append(ar.Configs, ac)
	areq.Resources = append(areq.Resources, ar)
	aresp, err := areq.RequestWith(ctx, cl.Broker(int(other.id)))
	if err != nil || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter group config through broker %d: %v %+v", other.id, err, aresp)
	}
	probe := kmsg.NewPtrShareFetchRequest()
	probe.GroupID, probe.MemberID = kmsg.StringPtr(group), kmsg.StringPtr("probe-member")
	probe.MaxBytes, probe.MaxRecords = 1<<20, 1
	presp, err := probe.RequestWith(ctx, cl.Broker(int(newLeader.id)))
	if err != nil || presp.ErrorCode != 0 {
		t.Fatalf("probe ShareFetch: %v %+v", err, presp)
	}
	if presp.AcquisitionLockTimeoutMillis != 15000 {
		t.Fatalf("the leader (broker %d) answers a lock of %d ms after the group config was set to 15000 through broker %d", newLeader.id, presp.AcquisitionLockTimeoutMillis, other.id)
	}
}
