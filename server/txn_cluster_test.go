package server

import (
	"fmt"
	"github.com/stratalog/strata/broker/txnhost"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnClusterCoordinatorFailover runs transactions on a 3-broker
// cluster: __transaction_state is created through the controller with 3
// replicas, FindCoordinator answers its partition's leader, markers go to
// partition leaders on other brokers, and when the coordinator's broker
// stops, the new leader of the partition loads the transaction state and
// the producer carries on.
func TestTxnClusterCoordinatorFailover(t *testing.T) {
	brokers, _ := startInCluster(t, 3)
	seeds := []string{brokers[0].addr, brokers[1].addr, brokers[2].addr}
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...))
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	waitRegistered(t, brokers)
	ct, err := adm.CreateTopic(ctx, 3, 3, nil, "out")
	if err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}

	const id = "cluster-txn"
	p := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.TransactionalID(id), kgo.DefaultProduceTopic("out"),
		kgo.TransactionTimeout(20*time.Second), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	txnRound := func(prefix string, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 30; i++ {
			p.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("EndTransaction: %v", err)
		}
	}
	txnRound("one", kgo.TryCommit)
	txnRound("aborted", kgo.TryAbort)

	// KIP-890 verification from every broker (remote and local
	// coordinator): the partitions of the ongoing transaction are in it.
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("mid-%d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	d, err := kadm.NewClient(p).DescribeTransactions(ctx, id)
	if err != nil || d[id].Err != nil || d[id].State != "Ongoing" {
		t.Fatalf("DescribeTransactions: %+v %v", d, err)
	}
	for _, b := range brokers {
		for _, tc := range []struct {
			part  int32
			epoch int16
			want  int16
		}{
			{0, d[id].ProducerEpoch, 0},
			{7, d[id].ProducerEpoch, kerr.InvalidTxnState.Code},
			{0, d[id].ProducerEpoch + 1, kerr.InvalidProducerEpoch.Code},
		} {
			got := make(chan int16, 1)
			b.s.txnVerify(id, d[id].ProducerID, tc.epoch, "out", tc.part, false, func(code int16) { got <- code })
			if code := <-got; code != tc.want {
				t.Fatalf("broker %d verifying out-%d epoch %d: %v, want %v", b.id, tc.part, tc.epoch, kerr.ErrorForCode(code), kerr.ErrorForCode(tc.want))
			}
		}
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	// The coordinator is the leader of the id's __transaction_state
	// partition, replicated on every broker.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKey = 1, id
	fresp := issue[*kmsg.FindCoordinatorResponse](t, cl, fc)
	coord := fresp.NodeID
	if fresp.ErrorCode != 0 || coord < 0 || coord > 2 {
		t.Fatalf("FindCoordinator: %+v", fresp)
	}
	mresp := issue[*kmsg.MetadataResponse](t, cl, kmsg.NewPtrMetadataRequest())
	st := clusterTopic(mresp, txnStateTopic)
	if st == nil || !st.IsInternal || len(st.Partitions) != DefaultTxnStatePartitions {
		t.Fatalf("%s in metadata: %+v", txnStateTopic, st)
	}
	if vt := brokers[0].s.cluster.view.Load().Topics[txnStateTopic]; vt == nil || vt.Configs["min.insync.replicas"] != "2" ||
		vt.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("%s configs: %+v", txnStateTopic, vt)
	}
	part := st.Partitions[brokers[0].s.txn.coord.PartitionFor(id)]
	if part.Leader != coord || len(part.Replicas) != 3 {
		t.Fatalf("coordinator %d, partition %+v", coord, part)
	}

	// Stop the coordinator (a controlled shutdown: its leaderships move
	// first); the transaction state moves with leadership.
	if err := brokers[coord].s.ControlledShutdown(ctx); err != nil {
		t.Fatalf("controlled shutdown: %v", err)
	}
	brokers[coord].stop(t)
	var live []*inCluster
	for _, b := range brokers {
		if b.id != coord {
			live = append(live, b)
		}
	}
	// Let the producer's client see the new leaders before it goes on.
	for _, b := range live {
		waitMetadata(t, cl, b, func(r *kmsg.MetadataResponse) string {
			for _, name := range []string{"out", txnStateTopic} {
				mt := clusterTopic(r, name)
				if mt == nil {
					return name + " missing"
				}
				for _, p := range mt.Partitions {
					if p.Leader == coord || p.Leader < 0 {
						return fmt.Sprintf("%s-%d led by %d", name, p.Partition, p.Leader)
					}
				}
			}
			return ""
		})
	}
	p.ForceMetadataRefresh()
	// And the coordinator it caches: a client that still points at the
	// stopped broker fails its next AddPartitionsToTxn ("unknown broker",
	// a franz-go client-side error) instead of looking the coordinator up
	// again; describing the transaction through the client makes it look
	// it up (this also shows the new coordinator has loaded the state).
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(20 * time.Millisecond) {
		d, err := kadm.NewClient(p).DescribeTransactions(ctx, id)
		if err == nil && d[id].Err == nil && d[id].Coordinator != coord && d[id].State == "CompleteCommit" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the transaction never showed up on a new coordinator: %+v %v", d, err)
		}
	}
	txnRound("two", kgo.TryCommit)
	// EndTxn is answered once PrepareCommit is durable; the markers follow.
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(10 * time.Millisecond) {
		d, err := kadm.NewClient(p).DescribeTransactions(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		desc, ok := d[id]
		if ok && desc.Err == nil && desc.State == "CompleteCommit" && desc.Coordinator != coord {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after failover: %+v (old coordinator %d)", desc, coord)
		}
	}

	consumer := newClient(t, live[0].addr, kgo.SeedBrokers(live[0].addr, live[1].addr), kgo.ConsumeTopics("out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]bool{}
	for len(got) < 63 && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Value), "aborted") {
				for _, b := range live {
					l := b.eng.Topic("out").Partition(r.Partition)
					var desc []string
					txnhost.ScanLog(l, func(h *record.Header, rr *record.Record) error {
						desc = append(desc, fmt.Sprintf("%d:pid=%d,txn=%v,ctl=%v,%q", h.BaseOffset+int64(rr.OffsetDelta), h.ProducerID, h.Transactional(), h.Control(), rr.Value))
						return nil
					})
					t.Logf("broker %d partition %d: LSO %d HW %d: %v", b.id, r.Partition, l.LastStableOffset(), l.HighWatermark(), desc)
				}
				t.Fatalf("read_committed returned %q (partition %d offset %d)", r.Value, r.Partition, r.Offset)
			}
			got[string(r.Value)] = true
		})
	}
	if len(got) != 63 {
		t.Fatalf("read %d of 63 committed records", len(got))
	}
}
