package replica_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFollowersCatchUpDurably: acks=all produces to the leader complete,
// every follower ends byte-identical, and while records flow the leader's
// HW never passes what an ISR follower holds durably.
func TestFollowersCatchUpDurably(t *testing.T) {
	c := newCluster(t, 3, 30000, 2)
	leader := c.nodes[1]
	ll := leader.log()

	// Invariant sampler: HW read first, then each follower's durable end
	// (monotonic here: nothing truncates), so a correct broker never fails it.
	var stop atomic.Bool
	var violations atomic.Int64
	var samples atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			hw := ll.HighWatermark()
			for _, id := range []int32{2, 3} {
				if d := c.nodes[id].log().DurableEnd(); hw > d {
					violations.Add(1)
				}
			}
			samples.Add(1)
		}
	}()
	failed := produce(t, leader, 3000, "a")
	stop.Store(true)
	wg.Wait()
	if failed != 0 {
		t.Fatalf("%d acks=all produces failed", failed)
	}
	if v := violations.Load(); v != 0 {
		t.Fatalf("leader HW passed a follower's durable end in %d of %d samples", v, samples.Load())
	}
	end := ll.LogEndOffset()
	if end < 3000 || ll.HighWatermark() != end {
		t.Fatalf("leader end %d HW %d", end, ll.HighWatermark())
	}
	want := logBytes(t, ll)
	for _, id := range []int32{2, 3} {
		fl := c.nodes[id].log()
		eventually(t, "follower HW to reach the end", func() bool { return fl.HighWatermark() == end })
		if got := logBytes(t, fl); !bytes.Equal(got, want) {
			t.Fatalf("follower %d holds %d bytes differing from the leader's %d", id, len(got), len(want))
		}
	}
	st := leader.status()
	if st.Role != engine.RoleLeader || len(st.ISR) != 3 {
		t.Fatalf("leader status %+v", st)
	}
	for _, f := range st.Followers {
		if f.FetchOffset != end {
			t.Fatalf("follower %d at %d, leader end %d", f.ID, f.FetchOffset, end)
		}
	}
	if fs := c.nodes[2].status(); fs.Role != engine.RoleFollower || fs.FetchState != "fetching" {
		t.Fatalf("follower status %+v", fs)
	}
}

// TestFollowerRetriesLeaderBehindSoon: a follower whose leader has not
// applied the topic's creation yet (its fetch answered UNKNOWN_TOPIC_ID, as
// in a fresh cluster where brokers apply the controller's records tens of
// milliseconds apart) retries within milliseconds, not after
// replica.fetch.backoff.ms: with the backoff at ten minutes, an acks=all
// append to the leader is still replicated once the leader has the topic.
func TestFollowerRetriesLeaderBehindSoon(t *testing.T) {
	c := newClusterWith(t, 2, 30000, 2, func(c *testCluster) {
		c.fetchBackoffMs = (10 * time.Minute).Milliseconds()
		c.logLevel = slog.LevelDebug
		c.unborn = map[int32]bool{1: true}
	})
	refused := "UNKNOWN_TOPIC_ID"
	eventually(t, "the follower's fetch refused by a leader without the topic", func() bool {
		return strings.Contains(c.logs.String(), refused)
	})
	c.applyCreation(1)
	leader := c.nodes[1]
	ll := leader.log()
	info := appendOne(t, ll, "first")
	if err := waitReplicated(t, leader.mgr, ll, info.LastOffset); err != nil {
		t.Fatalf("acks=all append after the leader applied the creation: %v", err)
	}
	if got := c.nodes[2].log().DurableEnd(); got != info.LastOffset+1 {
		t.Fatalf("follower durable end %d, want %d", got, info.LastOffset+1)
	}
}

// TestParkedPartitionBoundsLongPoll: while one partition waits to retry
// (its leader had not taken the lead yet: NOT_LEADER_OR_FOLLOWER), the
// fetcher's long poll for the others lasts no longer than that wait: with
// replica.fetch.wait.max.ms at ten minutes and nothing to fetch elsewhere,
// an acks=all append to the parked partition is still replicated once its
// leader leads.
func TestParkedPartitionBoundsLongPoll(t *testing.T) {
	c := newClusterWith(t, 2, 30000, 2, func(c *testCluster) {
		c.parts = 2
		c.fetchWaitMaxMs = int32((10 * time.Minute).Milliseconds())
		c.logLevel = slog.LevelDebug
		c.untold = map[[2]int32]bool{{1, 1}: true}
	})
	leader := c.nodes[1]
	calls := 0
	eventually(t, "the follower's fetch of partition 1 refused", func() bool {
		if strings.Contains(c.logs.String(), kerr.NotLeaderForPartition.Message) {
			return true
		}
		// A fetch sent before the follower took partition 1 long-polls
		// partition 0 alone (ten minutes here): an append to partition 0
		// answers it, and the next fetch carries both. Every 50 ms.
		if calls++; calls%10 == 1 {
			appendOne(t, leader.logAt(0), "poke")
		}
		return false
	})
	eventually(t, "the follower long-polling partition 0", func() bool {
		return strings.Contains(c.logs.String(), "fetch: long poll waiting")
	})
	c.mu.Lock()
	delete(c.untold, [2]int32{1, 1})
	c.mu.Unlock()
	c.push()
	ll := leader.logAt(1)
	info := appendOne(t, ll, "first")
	if err := waitReplicated(t, leader.mgr, ll, info.LastOffset); err != nil {
		t.Fatalf("acks=all append once the leader leads: %v", err)
	}
}

// TestISRShrinkAndExpand: stopped followers leave the ISR after
// replica.lag.time.max.ms; a waiting acks=all answer gets
// NOT_ENOUGH_REPLICAS_AFTER_APPEND and new ones NOT_ENOUGH_REPLICAS;
// restarted followers catch up and rejoin, and writes resume.
func TestISRShrinkAndExpand(t *testing.T) {
	c := newCluster(t, 3, 500, 2)
	leader := c.nodes[1]
	ll := leader.log()
	if failed := produce(t, leader, 200, "before"); failed != 0 {
		t.Fatalf("%d produces failed", failed)
	}
	if err := leader.mgr.CheckProduce(ll, -1); err != nil {
		t.Fatalf("CheckProduce with a full ISR: %v", err)
	}

	c.nodes[2].stop()
	c.nodes[3].stop()
	// Appended while the ISR still lists the stopped followers: it waits,
	// then the ISR shrinks below min.insync.replicas.
	info := appendOne(t, ll, "orphan")
	err := waitReplicated(t, leader.mgr, ll, info.LastOffset)
	if !errors.Is(err, kerr.NotEnoughReplicasAfterAppend) {
		t.Fatalf("WaitReplicated after the ISR shrank: %v", err)
	}
	if isr := c.partition().ISR; !slices.Equal(isr, []int32{1}) {
		t.Fatalf("controller ISR %v, want [1]", isr)
	}
	eventually(t, "the leader to apply the shrunk ISR", func() bool { return slices.Equal(leader.status().ISR, []int32{1}) })
	if err := leader.mgr.CheckProduce(ll, -1); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("CheckProduce acks=-1 with ISR [1]: %v", err)
	}
	if err := leader.mgr.CheckProduce(ll, 1); err != nil {
		t.Fatalf("CheckProduce acks=1 with ISR [1]: %v", err)
	}

	c.nodes[2].start()
	c.nodes[3].start()
	c.push()
	eventually(t, "the ISR to expand to all three", func() bool {
		return len(c.partition().ISR) == 3 && len(leader.status().ISR) == 3
	})
	if err := leader.mgr.CheckProduce(ll, -1); err != nil {
		t.Fatalf("CheckProduce after the ISR expanded: %v", err)
	}
	info = appendOne(t, ll, "after")
	if err := waitReplicated(t, leader.mgr, ll, info.LastOffset); err != nil {
		t.Fatalf("WaitReplicated after the ISR expanded: %v", err)
	}
	if failed := produce(t, leader, 200, "after"); failed != 0 {
		t.Fatalf("%d produces failed after the followers returned", failed)
	}
	want := logBytes(t, ll)
	for _, id := range []int32{2, 3} {
		fl := c.nodes[id].log()
		eventually(t, "follower to reach the leader's end", func() bool { return fl.LogEndOffset() == ll.LogEndOffset() })
		if !bytes.Equal(logBytes(t, fl), want) {
			t.Fatalf("follower %d differs from the leader after rejoining", id)
		}
	}
}

// TestDivergentTailTruncated: the old leader appends a tail nobody fetched,
// is fenced, a new leader takes writes in a new epoch; the old leader
// restarts, follows, truncates exactly its divergent tail and ends
// byte-identical to the new leader, back in the ISR.
func TestDivergentTailTruncated(t *testing.T) {
	t.Run("restarted", func(t *testing.T) { testDivergentTail(t, true) })
	t.Run("demoted", func(t *testing.T) { testDivergentTail(t, false) })
}

func testDivergentTail(t *testing.T, restart bool) {
	c := newCluster(t, 3, 30000, 2)
	old := c.nodes[1]
	ol := old.log()
	if failed := produce(t, old, 300, "one"); failed != 0 {
		t.Fatalf("%d produces failed", failed)
	}
	common := ol.LogEndOffset()
	for _, id := range []int32{2, 3} {
		fl := c.nodes[id].log()
		eventually(t, "followers to catch up", func() bool { return fl.LogEndOffset() == common })
	}
	// Isolate the old leader: its followers stop fetching from it.
	c.mu.Lock()
	c.isolated[1] = true
	c.mu.Unlock()
	c.nodes[2].mgr.Stop(testTopic, 0)
	c.nodes[3].mgr.Stop(testTopic, 0)
	var last int64
	for i := 0; i < 5; i++ {
		last = appendOne(t, ol, "divergent").LastOffset
	}
	divergentEnd := ol.LogEndOffset()
	// An acks=-1 wait on the tail: it must never succeed.
	waitErr := make(chan error, 1)
	old.mgr.WaitReplicated(ol, last, func(err error) { waitErr <- err })
	if ol.HighWatermark() != common {
		t.Fatalf("old leader HW %d moved past the common prefix %d with no follower", ol.HighWatermark(), common)
	}
	oldEpoch := ol.LeaderEpoch()

	// The controller fences it: broker 2 leads in a new epoch.
	c.apply(controllerFence(1))
	p := c.partition()
	if p.Leader != 2 || p.LeaderEpoch <= oldEpoch {
		t.Fatalf("after fencing broker 1: leader %d epoch %d", p.Leader, p.LeaderEpoch)
	}
	c.push()
	newLeader := c.nodes[2]
	eventually(t, "broker 2 to lead", func() bool { return newLeader.status().Role == engine.RoleLeader })
	if failed := produce(t, newLeader, 300, "two"); failed != 0 {
		t.Fatalf("%d produces to the new leader failed", failed)
	}
	if nl := newLeader.log(); nl.LogEndOffset() != common+300 {
		t.Fatalf("new leader end %d after 300 more records on %d", nl.LogEndOffset(), common)
	}

	// The old leader returns as a follower, restarted or as it is.
	if restart {
		old.stop()
		old.start()
	}
	if got := old.log().LogEndOffset(); got != divergentEnd {
		t.Fatalf("old leader end %d, want %d", got, divergentEnd)
	}
	c.apply(controllerUnfence(1))
	c.mu.Lock()
	c.isolated[1] = false
	c.mu.Unlock()
	c.push()
	nl := newLeader.log()
	eventually(t, "the old leader to rejoin the ISR", func() bool {
		return len(c.partition().ISR) == 3 && old.log().LogEndOffset() == nl.LogEndOffset()
	})
	want := logBytes(t, nl)
	got := logBytes(t, old.log())
	if !bytes.Equal(got, want) {
		t.Fatalf("old leader holds %d bytes, new leader %d: not identical", len(got), len(want))
	}
	if bytes.Contains(got, []byte("divergent")) {
		t.Fatal("the divergent tail survived")
	}
	select {
	case err := <-waitErr:
		if restart && err == nil || !restart && !errors.Is(err, kerr.NotLeaderForPartition) {
			t.Fatalf("acks=-1 wait on the divergent tail answered %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("acks=-1 wait on the divergent tail never answered")
	}
	if err := old.mgr.CheckProduce(old.log(), 1); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("CheckProduce on a follower: %v", err)
	}
	if e, end := old.log().EndOffsetForEpoch(oldEpoch); e != oldEpoch || end != common {
		t.Fatalf("old epoch %d ends at %d (epoch %d) on the old leader, want %d", oldEpoch, end, e, common)
	}
}

// TestDamagedReplicaCannotLead: a log marked damaged is refused leadership
// until it has re-fetched from a leader as a follower.
func TestDamagedReplicaCannotLead(t *testing.T) {
	c := newCluster(t, 2, 30000, 1)
	if failed := produce(t, c.nodes[1], 100, "d"); failed != 0 {
		t.Fatalf("%d produces failed", failed)
	}
	f := c.nodes[2]
	fl := f.log()
	eventually(t, "follower to catch up", func() bool { return fl.LogEndOffset() == c.nodes[1].log().LogEndOffset() })
	// Damage, then restart (the mark is durable) and truncate as recovery
	// would have.
	if err := fl.MarkDamaged(); err != nil {
		t.Fatal(err)
	}
	f.stop()
	f.start()
	fl = f.log()
	if !fl.Damaged() {
		t.Fatal("damaged mark lost on restart")
	}
	p := c.partition()
	err := f.mgr.BecomeLeader(partitionFor(fl, p, 2, p.LeaderEpoch+1))
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("BecomeLeader of a damaged log: %v", err)
	}
	if _, err := fl.TruncateTo(fl.LogEndOffset() / 2); err != nil {
		t.Fatal(err)
	}
	c.push()
	if failed := produce(t, c.nodes[1], 10, "more"); failed != 0 {
		t.Fatalf("%d produces failed", failed)
	}
	eventually(t, "the damaged follower to re-fetch and be cleared", func() bool {
		return !fl.Damaged() && fl.LogEndOffset() == c.nodes[1].log().LogEndOffset()
	})
	if f.status().Damaged {
		t.Fatal("Status still reports the re-fetched log as damaged")
	}
}

// TestFollowerBelowLeaderLogStart: a follower that was down while the
// leader deleted records past its log end gets OFFSET_OUT_OF_RANGE,
// restarts its log at the leader's log start, catches up and rejoins.
func TestFollowerBelowLeaderLogStart(t *testing.T) {
	c := newCluster(t, 2, 300, 1)
	leader := c.nodes[1]
	ll := leader.log()
	if failed := produce(t, leader, 50, "early"); failed != 0 {
		t.Fatalf("%d produces failed", failed)
	}
	f := c.nodes[2]
	eventually(t, "follower to catch up", func() bool { return f.log().LogEndOffset() == ll.LogEndOffset() })
	f.stop()
	eventually(t, "the ISR to shrink to the leader", func() bool { return slices.Equal(leader.status().ISR, []int32{1}) })
	if failed := produce(t, leader, 200, "later"); failed != 0 {
		t.Fatalf("%d produces failed", failed)
	}
	start, err := ll.DeleteRecords(ll.HighWatermark() - 10)
	if err != nil {
		t.Fatal(err)
	}
	f.start()
	if f.log().LogEndOffset() >= start {
		t.Fatalf("test needs the follower's end %d below the leader's new start %d", f.log().LogEndOffset(), start)
	}
	c.push()
	eventually(t, "the follower to restart at the leader's log start and rejoin", func() bool {
		return f.log().LogStartOffset() == start && f.log().LogEndOffset() == ll.LogEndOffset() && len(leader.status().ISR) == 2
	})
	if !bytes.Equal(logBytes(t, f.log()), logBytes(t, ll)) {
		t.Fatal("follower differs from the leader after restarting at its log start")
	}
}

// TestAckedRecordsSurviveLeaderLoss: records are produced with acks=all
// while the leader is stopped mid-stream; the controller elects another
// ISR member, and every record that was acknowledged is in the new
// leader's log (and in the other follower's, byte for byte).
func TestAckedRecordsSurviveLeaderLoss(t *testing.T) {
	c := newCluster(t, 3, 30000, 2)
	leader := c.nodes[1]
	cl, err := kgo.NewClient(kgo.SeedBrokers(leader.addr), kgo.DefaultProduceTopic(testTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordRetries(2), kgo.RetryTimeout(3*time.Second), kgo.ProduceRequestTimeout(5*time.Second),
		kgo.RecordDeliveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	var ackCount atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for i := 0; i < 3000; i++ {
		v := fmt.Sprintf("rec-%06d", i)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err == nil {
				mu.Lock()
				acked[v] = true
				mu.Unlock()
				ackCount.Add(1)
			}
			wg.Done()
		})
		if i == 1500 {
			eventually(t, "some acknowledgements", func() bool { return ackCount.Load() > 200 })
			leader.stop() // records still queued or in flight fail, or were acked before
		}
	}
	cl.Close() // fails whatever is still buffered or unanswered
	wg.Wait()
	if ackCount.Load() == 0 {
		t.Fatal("nothing was acknowledged")
	}
	c.apply(controllerFence(1))
	p := c.partition()
	if p.Leader != 2 && p.Leader != 3 {
		t.Fatalf("new leader %d", p.Leader)
	}
	c.push()
	nl := c.nodes[p.Leader]
	eventually(t, "the new leader to lead", func() bool { return nl.status().Role == engine.RoleLeader })
	data := logBytes(t, nl.log())
	found := map[string]bool{}
	for rest := data; len(rest) > 0; {
		b, r, _, err := record.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		if err := record.Iterate(b, func(_ *record.Header, rec *record.Record) error {
			found[string(rec.Value)] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		rest = r
	}
	lost := 0
	for v := range acked {
		if !found[v] {
			lost++
		}
	}
	if lost != 0 {
		t.Fatalf("%d of %d acknowledged records are missing on the new leader", lost, len(acked))
	}
	other := c.nodes[5-p.Leader]
	eventually(t, "the other follower to match the new leader", func() bool {
		return other.log().LogEndOffset() == nl.log().LogEndOffset()
	})
	if !bytes.Equal(logBytes(t, other.log()), logBytes(t, nl.log())) {
		t.Fatal("the surviving replicas differ")
	}
	if len(acked) == 3000 {
		t.Fatal("every record was acknowledged although the leader stopped halfway")
	}
	t.Logf("%d of 3000 acknowledged before the leader's loss, all present on broker %d", len(acked), p.Leader)
}

// TestFreshFollowerReplicatesCompactedLeader: the leader of a compacted
// topic cleans its log (offset gaps where whole batches were superseded);
// a follower that starts from nothing fetches from offset 0 through those
// gaps, rejoins the ISR and ends byte-identical to the leader.
func TestFreshFollowerReplicatesCompactedLeader(t *testing.T) {
	c := newCluster(t, 2, 300, 1)
	leader := c.nodes[1]
	ll := leader.log()
	if err := leader.eng.SetTopicConfig(testTopic, map[string]string{"cleanup.policy": "compact", "segment.bytes": "2048"}); err != nil {
		t.Fatal(err)
	}
	f := c.nodes[2]
	f.stop()
	eventually(t, "the ISR to shrink to the leader", func() bool { return slices.Equal(leader.status().ISR, []int32{1}) })
	// Rounds of keys of their own (they survive) between rounds rewriting
	// one hot key set (superseded by the next hot round): gaps between.
	for round := 0; round < 4; round++ {
		if failed := produce(t, leader, 300, fmt.Sprintf("cold%d", round)); failed != 0 {
			t.Fatalf("%d produces failed", failed)
		}
		if failed := produce(t, leader, 300, "hot"); failed != 0 {
			t.Fatalf("%d produces failed", failed)
		}
	}
	if ll.SegmentCount() < 3 {
		t.Fatalf("test needs sealed segments: %d", ll.SegmentCount())
	}
	st, err := leader.eng.Topic(testTopic).Compact(0)
	if err != nil || st.RecordsRemoved == 0 {
		t.Fatalf("Compact: %+v, %v", st, err)
	}
	// The cleaned log has gaps: a follower append must accept them.
	gaps, next := 0, int64(0)
	data := logBytes(t, ll)
	for rest := data; len(rest) > 0; {
		_, r, h, err := record.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset != next {
			gaps++
		}
		next = h.LastOffset() + 1
		rest = r
	}
	if gaps < 2 || ll.LogStartOffset() != 0 {
		t.Fatalf("cleaned leader log: %d gaps, log start %d", gaps, ll.LogStartOffset())
	}

	t.Logf("leader: %d segments, %d bytes, %d gaps after removing %d records", ll.SegmentCount(), len(data), gaps, st.RecordsRemoved)
	f.dir = t.TempDir() // a fresh replica: nothing on disk
	f.start()
	c.push()
	eventually(t, "the fresh follower to catch up and rejoin", func() bool {
		return f.log().LogEndOffset() == ll.LogEndOffset() && len(leader.status().ISR) == 2
	})
	if got := logBytes(t, f.log()); !bytes.Equal(got, data) {
		t.Fatalf("follower holds %d bytes differing from the leader's %d (%d gaps)", len(got), len(data), gaps)
	}
	if fe, le := f.log().LeaderEpoch(), ll.LeaderEpoch(); fe != le {
		t.Fatalf("follower leader epoch %d, leader %d", fe, le)
	}
	// Replication goes on past the gaps.
	if failed := produce(t, leader, 50, "after"); failed != 0 {
		t.Fatalf("%d produces after the catch-up failed", failed)
	}
	eventually(t, "the follower to follow new records", func() bool { return f.log().LogEndOffset() == ll.LogEndOffset() })
	if !bytes.Equal(logBytes(t, f.log()), logBytes(t, ll)) {
		t.Fatal("follower differs from the leader after further produces")
	}
}

// TestRefusedISRChangeProposedAgain: the controller refuses a leader's ISR
// shrink (INVALID_UPDATE_VERSION) twice without any change of the
// partition; the leader proposes it again at its next ISR checks, not only
// when the controller sends a new state, and the shrink lands.
func TestRefusedISRChangeProposedAgain(t *testing.T) {
	c := newCluster(t, 3, 300, 1)
	leader := c.nodes[1]
	if failed := produce(t, leader, 50, "before"); failed != 0 {
		t.Fatalf("%d produces failed", failed)
	}
	before := c.partition()
	c.mu.Lock()
	c.refuseISR = 2
	c.mu.Unlock()
	c.nodes[3].stop()
	eventually(t, "the controller to commit the shrunk ISR", func() bool {
		return slices.Equal(c.partition().ISR, []int32{1, 2})
	})
	c.mu.Lock()
	refused := c.refused
	c.mu.Unlock()
	if refused != 2 {
		t.Fatalf("%d proposals refused, want 2 (the shrink was proposed again after each)", refused)
	}
	after := c.partition()
	if after.LeaderEpoch != before.LeaderEpoch || after.PartitionEpoch != before.PartitionEpoch+1 {
		t.Fatalf("epochs %d/%d -> %d/%d: want only the shrink to change the partition", before.LeaderEpoch,
			before.PartitionEpoch, after.LeaderEpoch, after.PartitionEpoch)
	}
	eventually(t, "the leader to apply the shrunk ISR", func() bool { return slices.Equal(leader.status().ISR, []int32{1, 2}) })
	if failed := produce(t, leader, 50, "after"); failed != 0 {
		t.Fatalf("%d produces failed after the shrink", failed)
	}
}
