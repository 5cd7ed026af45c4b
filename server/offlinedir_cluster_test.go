package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// syncFaults maps a test broker's data directory to a switch that, when
// on, fails every fsync of its engine with EIO (engine.Options.SyncFault).
var syncFaults sync.Map // string → *atomic.Bool

// syncFaultOf is the SyncFault for an engine on dir: nil unless a test
// registered a switch for dir.
func syncFaultOf(dir string) func(string) error {
	v, ok := syncFaults.Load(dir)
	if !ok {
		return nil
	}
	on := v.(*atomic.Bool)
	return func(string) error {
		if on.Load() {
			return syscall.EIO
		}
		return nil
	}
}

// stopOffline stops broker b whose directory is offline: as stop, except
// that the engine's Close reports the offline directory, which is expected.
func (b *inCluster) stopOffline(t *testing.T) {
	t.Helper()
	if !b.running {
		return
	}
	b.running = false
	if err := b.s.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Errorf("broker %d: Server.Close: %v", b.id, err)
	}
	select {
	case <-b.served:
	case <-time.After(testTimeout):
		t.Errorf("broker %d: Serve did not return after Close", b.id)
	}
	if err := b.ctl.Close(); err != nil {
		t.Logf("broker %d: controller close: %v", b.id, err)
	}
	if err := b.eng.Close(); err != nil && !errors.Is(err, engine.ErrOffline) {
		t.Errorf("broker %d: engine.Close: %v", b.id, err)
	}
}

// TestClusterOfflineDirMovesLeadership is Kafka's log-directory failure
// handling in a cluster (KIP-112): three brokers, a topic of three
// partitions with replication factor 3 and min.insync.replicas 2, an
// idempotent acks=all franz-go producer. The fsyncs of partition 0's
// leader then fail with EIO: its directory goes offline, its heartbeat
// reports it, and the controller moves every leadership it had and takes
// it out of every ISR, while it stays registered and listed. The producer
// carries on with the new leaders; every acknowledged record is read back,
// once. Restarted on a healthy directory, the broker registers again and
// its replicas catch up and rejoin the ISRs. Without the report, the
// partitions it led stay on it, answering KAFKA_STORAGE_ERROR, and the
// test times out waiting for the leadership to move.
func TestClusterOfflineDirMovesLeadership(t *testing.T) {
	voters, lns := quorumListeners(t, 3)
	var brokers []*inCluster
	faults := map[int32]*atomic.Bool{}
	for i := int32(0); i < 3; i++ {
		b := &inCluster{id: i, dataDir: t.TempDir(), ctlDir: t.TempDir()}
		faults[i] = &atomic.Bool{}
		syncFaults.Store(b.dataDir, faults[i])
		t.Cleanup(func() { syncFaults.Delete(b.dataDir) })
		b.start(t, voters, lns[i])
		brokers = append(brokers, b)
	}
	seeds := []string{brokers[0].addr, brokers[1].addr, brokers[2].addr}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	waitRegistered(t, brokers)
	const topic = "kip112"
	ct, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, topic)
	if err != nil || ct.Err != nil {
		t.Fatalf("create: %v %v", err, ct.Err)
	}
	var victim int32
	waitMetadata(t, cl, brokers[0], func(r *kmsg.MetadataResponse) string {
		mt := clusterTopic(r, topic)
		if mt == nil || len(mt.Partitions) != 3 {
			return "topic not ready"
		}
		for _, p := range mt.Partitions {
			if len(p.ISR) != 3 || p.Leader < 0 {
				return "partitions not ready"
			}
		}
		victim = mt.Partitions[0].Leader
		return ""
	})

	// The producer: idempotent (franz-go's default) acks=all, one record at
	// a time round robin over the partitions, bounded in count and time.
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
	)
	pctx, stopProducing := context.WithCancel(ctx)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; i < 100_000 && pctx.Err() == nil; i++ {
			v := fmt.Sprintf("v-%06d", i)
			r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: []byte(v)}
			if err := cl.ProduceSync(pctx, r).FirstErr(); err == nil {
				mu.Lock()
				acked[v] = true
				mu.Unlock()
			}
		}
	}()
	defer func() { stopProducing(); <-produced }()
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitAcked := func(n int) {
		deadline := time.Now().Add(testTimeout)
		for ackedCount() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d records acknowledged, waiting for %d", ackedCount(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitAcked(60)

	vb := brokers[victim]
	survivor := brokers[(victim+1)%3]
	faults[victim].Store(true) // every fsync of the leader of partition 0 fails with EIO
	deadline := time.Now().Add(testTimeout)
	for vb.eng.Offline() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("broker %d: directory still online with every fsync failing", victim)
		}
		time.Sleep(10 * time.Millisecond)
	}
	atFault := ackedCount()
	checkMoved := func(r *kmsg.MetadataResponse) string {
		if !slices.ContainsFunc(r.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == victim }) {
			return fmt.Sprintf("broker %d not listed", victim)
		}
		mt := clusterTopic(r, topic)
		if mt == nil {
			return "no topic"
		}
		for _, p := range mt.Partitions {
			switch {
			case p.Leader < 0 || p.Leader == victim:
				return fmt.Sprintf("partition %d led by %d", p.Partition, p.Leader)
			case slices.Contains(p.ISR, victim) || len(p.ISR) != 2:
				return fmt.Sprintf("partition %d isr %v", p.Partition, p.ISR)
			case !slices.Contains(p.OfflineReplicas, victim):
				return fmt.Sprintf("partition %d offline replicas %v", p.Partition, p.OfflineReplicas)
			}
		}
		return ""
	}
	waitMetadata(t, cl, survivor, checkMoved)
	waitMetadata(t, cl, vb, checkMoved) // the failed broker answers Metadata with the new leaders too
	if vb.logs.Count("reported the data directory offline to the controller") == 0 {
		t.Fatal("the failed broker did not log its report")
	}
	waitAcked(atFault + 150) // writes continue on the new leaders

	// A restart on a healthy directory: a new registration, the replicas
	// catch up from the leaders and rejoin every ISR.
	faults[victim].Store(false)
	vb.stopOffline(t)
	vb.restart(t, voters)
	waitMetadata(t, cl, survivor, func(r *kmsg.MetadataResponse) string {
		mt := clusterTopic(r, topic)
		if mt == nil {
			return "no topic"
		}
		for _, p := range mt.Partitions {
			if len(p.ISR) != 3 || p.Leader < 0 {
				return fmt.Sprintf("partition %d leader %d isr %v", p.Partition, p.Leader, p.ISR)
			}
		}
		return ""
	})
	waitAcked(ackedCount() + 60)
	stopProducing()
	<-produced

	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]int{}
	missing := func() int {
		n := 0
		for v := range acked {
			if seen[v] == 0 {
				n++
			}
		}
		return n
	}
	for ctx.Err() == nil && missing() > 0 {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	if n := missing(); n != 0 {
		t.Fatalf("%d of %d acknowledged records lost", n, len(acked))
	}
	dups := 0
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	if dups != 0 {
		t.Fatalf("%d records read more than once (idempotent producer)", dups)
	}
	t.Logf("broker %d's directory failed after %d acknowledged records; %d acknowledged in all, every one read back once",
		victim, atFault, len(acked))
}
