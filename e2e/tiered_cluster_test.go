package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// rlmSnapshot is what the test reads of a broker's remote-log metadata
// snapshot (remote/rlm's cluster.snapshot).
type rlmSnapshot struct {
	Partitions []struct {
		Topic string `json:"topic"`
	} `json:"partitions"`
	Skipped []json.RawMessage `json:"skipped"`
}

func (s rlmSnapshot) materialized(topic string) bool {
	for _, p := range s.Partitions {
		if p.Topic == topic {
			return true
		}
	}
	return false
}

func readRLMSnapshot(t *testing.T, dataDir string) rlmSnapshot {
	t.Helper()
	var s rlmSnapshot
	b, err := os.ReadFile(filepath.Join(dataDir, "__strata_remote_log_metadata", "cluster.snapshot"))
	if errors.Is(err, fs.ErrNotExist) {
		return s
	}
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// initProducerID gets an idempotent producer id and epoch.
func initProducerID(ctx context.Context, t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = -1
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("init producer id: %v", err)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// produceIdempotent sends partition 0 of "tiered"'s leader one batch of
// four records (values v<seq>- to v<seq+3>-) of producer pid at sequence
// seq, acks=all, and returns the partition's answer. cl must be
// configured with all-ISR acks and Produce v12 at most (topics by name).
func produceIdempotent(ctx context.Context, t *testing.T, adm *kadm.Client, cl *kgo.Client, pid int64, epoch int16, seq int32) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	var b record.Builder
	now := time.Now().UnixMilli()
	b.Reset(record.CodecNone, now)
	b.SetProducer(pid, epoch, seq)
	for j := seq; j < seq+4; j++ {
		b.Add(now, nil, []byte(fmt.Sprintf("v%d-%s", j, strings.Repeat("x", 100))), nil)
	}
	batch, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	// As a Kafka client does, the batch is sent again (the same sequence:
	// a duplicate is answered with its first offset) while the leader
	// answers UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER: the
	// broker that answered the metadata may know the partition's leader
	// before that leader has opened it.
	var out kmsg.ProduceResponseTopicPartition
	waitFor(t, 30*time.Second, func() string {
		md, err := adm.Metadata(ctx, "tiered")
		if err != nil {
			return err.Error()
		}
		p, ok := md.Topics["tiered"].Partitions[0]
		if !ok || p.Err != nil || p.Leader < 0 {
			return fmt.Sprintf("no leader of tiered-0 in %+v", md.Topics["tiered"])
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "tiered"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		// Produce is not routed by the client: to the leader.
		kr, err := cl.Broker(int(p.Leader)).Request(ctx, req)
		resp, _ := kr.(*kmsg.ProduceResponse)
		if err != nil || resp == nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("idempotent produce of sequence %d: %v %+v", seq, err, resp)
		}
		out = resp.Topics[0].Partitions[0]
		if c := out.ErrorCode; c == kerr.UnknownTopicOrPartition.Code || c == kerr.NotLeaderForPartition.Code {
			return fmt.Sprintf("broker %d answered error %d", p.Leader, c)
		}
		return ""
	})
	return out
}

// storeLogObjects lists the .log objects of a local-directory object
// store, by key.
func storeLogObjects(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a temporary file renamed or an object deleted meanwhile
		}
		if err == nil && !info.IsDir() && strings.HasSuffix(path, ".log") {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// localLogFiles counts the segment files of a partition in a broker's
// data directory.
func localLogFiles(dataDir, partition string) int {
	ents, _ := os.ReadDir(filepath.Join(dataDir, partition))
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			n++
		}
	}
	return n
}

// TestClusterTieredLeaderMove: three brokers sharing one local-directory
// object store (standing in for S3). The leader of a remote.storage.enable
// topic (replication factor 3) copies its rolled segments, once each (no
// copy per replica), publishing the metadata to __remote_log_metadata;
// every replica deletes its local copies of them (the followers by the
// copied end they read from the metadata). The leader is killed: the new
// leader serves every record to a franz-go consumer from offset 0 (the
// old leader's remote segments), and deletes by retention the segments
// the old leader copied.
func TestClusterTieredLeaderMove(t *testing.T) {
	storeDir := t.TempDir()
	props := clusterProps + "strata.remote.storage.type=local\nstrata.remote.storage.local.dir=" + storeDir + "\n" +
		"remote.log.manager.task.interval.ms=100\nlog.retention.check.interval.ms=100\n"
	c := startClusterProps(t, 3, 3, props)
	ctx := testCtx(t, 4*time.Minute)
	cl := c.client()
	c.waitBrokers(ctx, cl, 0, 3)
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"),
		"segment.bytes":         kadm.StringPtr("4096"),
		"local.retention.bytes": kadm.StringPtr("0"),
		"file.delete.delay.ms":  kadm.StringPtr("0"),
	}, "tiered")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}

	const n = 400
	pcl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("tiered"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < n; i += 20 {
		var recs []*kgo.Record
		for j := i; j < i+20; j++ {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v%d-%s", j, strings.Repeat("x", 100)))})
		}
		if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v\n%s", err, c.warnings())
		}
	}

	leaderOf := func() int32 {
		md, err := adm.Metadata(ctx, "tiered")
		if err != nil {
			return -1
		}
		p, ok := md.Topics["tiered"].Partitions[0]
		if !ok || p.Err != nil {
			return -1
		}
		return p.Leader
	}
	leader := leaderOf()
	if leader < 0 {
		t.Fatal("no leader")
	}

	// The leader copies and every replica deletes its local copies down
	// to the active segment and at most one not copied yet.
	var copied []string
	waitFor(t, 90*time.Second, func() string {
		copied = storeLogObjects(t, storeDir)
		if len(copied) < 8 {
			return fmt.Sprintf("%d segments copied\n%s", len(copied), c.warnings())
		}
		for i, b := range c.brokers {
			if k := localLogFiles(b.dataDir, "tiered-0"); k > 2 {
				return fmt.Sprintf("broker %d (leader %d) keeps %d local segments; %d copied", i, leader, k, len(copied))
			}
		}
		return ""
	})
	// One copy per partition: no two remote segments start at one offset.
	bases := map[string]bool{}
	for _, k := range copied {
		base := strings.SplitN(filepath.Base(k), "-", 2)[0]
		if bases[base] {
			t.Fatalf("segment %s copied twice: %v", base, copied)
		}
		bases[base] = true
	}
	t.Logf("leader %d copied %d segments", leader, len(copied))

	// The leader is killed (SIGKILL, perhaps mid-copy); a survivor takes over.
	c.brokers[leader].kill()
	var newLeader int32
	waitFor(t, 60*time.Second, func() string {
		newLeader = leaderOf()
		if newLeader < 0 || newLeader == leader {
			return fmt.Sprintf("leader %d", newLeader)
		}
		return ""
	})

	// Every record from offset 0, tiered ones from the old leader's copies.
	ccl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tiered": {0: kgo.NewOffset().AtStart()}}))
	next := int64(0)
	deadline := time.Now().Add(90 * time.Second)
	for next < n {
		if time.Now().After(deadline) {
			t.Fatalf("consumed up to %d of %d from new leader %d\n%s", next, n, newLeader, c.warnings())
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := ccl.PollFetches(pctx)
		cancel()
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			if bad == nil && (r.Offset != next || !strings.HasPrefix(string(r.Value), fmt.Sprintf("v%d-", next))) {
				bad = fmt.Errorf("offset %d: got offset %d %q", next, r.Offset, r.Value[:8])
			}
			next++
		})
		if bad != nil {
			t.Fatal(bad)
		}
	}

	// Retention on the whole log: the new leader deletes what the old
	// leader copied.
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("1")}}, "tiered"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, func() string {
		left := map[string]bool{}
		for _, k := range storeLogObjects(t, storeDir) {
			left[k] = true
		}
		var kept []string
		for _, k := range copied {
			if left[k] {
				kept = append(kept, k)
			}
		}
		if len(kept) > 0 {
			return fmt.Sprintf("%d of the old leader's %d segments still in the store: %v\n%s", len(kept), len(copied), kept, c.warnings())
		}
		return ""
	})

	// The old leader's broker restarts (its remote-log metadata replayed
	// from __remote_log_metadata) and leads again: it serves the segments
	// the second leader copied meanwhile.
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("-1")}}, "tiered"); err != nil {
		t.Fatal(err)
	}
	// The leader applies the change when its metadata view reaches it
	// (only the broker that took the AlterConfigs applies it at once);
	// until then retention.ms=1 still deletes every segment it copies and
	// moves the log start past them. Its DescribeConfigs answers from that
	// view, published after the engine applied it.
	waitFor(t, 30*time.Second, func() string {
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, "tiered", []string{"retention.ms"}
		req.Resources = append(req.Resources, res)
		kr, err := cl.Broker(int(newLeader)).Request(ctx, req)
		if err != nil {
			return err.Error()
		}
		resp := kr.(*kmsg.DescribeConfigsResponse)
		if len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 {
			return fmt.Sprintf("describe configs on broker %d: %+v", newLeader, resp)
		}
		if v := resp.Resources[0].Configs[0].Value; v == nil || *v != "-1" {
			return fmt.Sprintf("broker %d: retention.ms %v", newLeader, v)
		}
		return ""
	})
	for i := n; i < n+200; i += 20 {
		var recs []*kgo.Record
		for j := i; j < i+20; j++ {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v%d-%s", j, strings.Repeat("x", 100)))})
		}
		if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v\n%s", err, c.warnings())
		}
	}
	var second []string
	waitFor(t, 90*time.Second, func() string {
		second = storeLogObjects(t, storeDir)
		if len(second) < 6 {
			return fmt.Sprintf("new leader %d copied %d segments of the last 200 records", newLeader, len(second))
		}
		return ""
	})
	firstBase := strings.SplitN(filepath.Base(second[0]), "-", 2)[0]
	c.brokers[leader].start()
	md, err := adm.Metadata(ctx, "tiered")
	if err != nil {
		t.Fatal(err)
	}
	order := []int32{leader}
	for _, r := range md.Topics["tiered"].Partitions[0].Replicas {
		if r != leader {
			order = append(order, r)
		}
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("tiered", 0, order)
	if rs, err := adm.AlterPartitionAssignments(ctx, req); err != nil || rs.Error() != nil {
		t.Fatalf("reorder replicas to %v: %v %v", order, err, rs.Error())
	}
	waitFor(t, 90*time.Second, func() string {
		md, err := adm.Metadata(ctx, "tiered")
		if err != nil {
			return err.Error()
		}
		p := md.Topics["tiered"].Partitions[0]
		if fmt.Sprint(p.Replicas) != fmt.Sprint(order) || len(p.ISR) != 3 {
			return fmt.Sprintf("replicas %v isr %v, want %v all in sync", p.Replicas, p.ISR, order)
		}
		if p.Leader == leader {
			return ""
		}
		ts := make(kadm.TopicsSet)
		ts.Add("tiered", 0)
		adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, ts)
		return fmt.Sprintf("leader %d, want %d back", p.Leader, leader)
	})
	ccl2 := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tiered": {0: kgo.NewOffset().AtStart()}}))
	first, next2 := int64(-1), int64(-1)
	deadline = time.Now().Add(90 * time.Second)
	for next2 < n+200 {
		if time.Now().After(deadline) {
			t.Fatalf("consumed from %d up to %d of %d through restarted leader %d\n%s", first, next2, n+200, leader, c.warnings())
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := ccl2.PollFetches(pctx)
		cancel()
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			if first < 0 {
				first, next2 = r.Offset, r.Offset
			}
			if bad == nil && (r.Offset != next2 || !strings.HasPrefix(string(r.Value), fmt.Sprintf("v%d-", next2))) {
				bad = fmt.Errorf("offset %d: got offset %d %q", next2, r.Offset, r.Value[:8])
			}
			next2++
		})
		if bad != nil {
			t.Fatal(bad)
		}
	}
	if fmt.Sprintf("%020d", first) > firstBase {
		t.Fatalf("the restarted leader's log starts at %d, above the remote segment at %s: nothing read from remote (store: %v)\n%s",
			first, firstBase, storeLogObjects(t, storeDir), c.warnings())
	}
}

// TestClusterTieredNewReplica: a replica added (partition reassignment)
// after the leader and its follower deleted their local copies of tiered
// segments does not fetch the tiered data: the leader answers its fetch
// from offset 0 out of range with its local log start (Kafka answers
// OFFSET_MOVED_TO_TIERED_STORAGE, which the follower handles the same
// way), where the new replica restarts its log; it then catches up and
// joins the ISR, and consumers still read every record from offset 0.
func TestClusterTieredNewReplica(t *testing.T) {
	r := startTieredReplicaRun(t, "", "0", true)
	c, ctx, storeDir, replicas, added := r.c, r.ctx, r.storeDir, r.replicas, r.added
	waitFor(t, 90*time.Second, func() string {
		copied := storeLogObjects(t, storeDir)
		if len(copied) < 8 {
			return fmt.Sprintf("%d segments copied\n%s", len(copied), c.warnings())
		}
		for _, id := range replicas {
			if k := localLogFiles(c.brokers[id].dataDir, "tiered-0"); k > 2 {
				return fmt.Sprintf("replica %d keeps %d local segments", id, k)
			}
		}
		return ""
	})

	// The broker that does not replicate the partition skipped its
	// remote-log metadata (its snapshot names it skipped, never
	// materialized); the replicas materialized it.
	waitFor(t, 30*time.Second, func() string {
		for id := int32(0); id < 3; id++ {
			snap := readRLMSnapshot(t, c.brokers[id].dataDir)
			if got, want := snap.materialized("tiered"), id != added; got != want {
				return fmt.Sprintf("broker %d materialized tiered-0: %v, want %v (replicas %v)", id, got, want, replicas)
			}
			if id == added && len(snap.Skipped) == 0 {
				return fmt.Sprintf("broker %d skipped nothing", id)
			}
		}
		return ""
	})
	r.addReplica(t)
	// The added replica restarted at the leader's local log start: it
	// never held the first segment, and says where it started.
	nb := c.brokers[added]
	if _, err := os.Stat(filepath.Join(nb.dataDir, "tiered-0", "00000000000000000000.log")); err == nil {
		t.Fatal("the added replica holds the log's first segment: it fetched the tiered data")
	}
	// The leader answered OFFSET_MOVED_TO_TIERED_STORAGE (error 109) and
	// the replica built its state from the remote segment below the
	// leader's local start: its producer snapshot and epochs.
	logs := nb.logs.String()
	if !strings.Contains(logs, "follower log below the leader's local log start; restarting it from remote storage") ||
		!strings.Contains(logs, "producerSnapshot=true") || strings.Contains(logs, "leaderLocalLogStart=0 ") {
		t.Fatalf("the added replica did not restart from remote storage at the leader's local log start:\n%s", logs)
	}
	if k := localLogFiles(nb.dataDir, "tiered-0"); k > 3 {
		t.Fatalf("the added replica holds %d local segments", k)
	}
	if !strings.Contains(logs, "replicated partitions changed") || !strings.Contains(logs, "replay=true") {
		t.Fatalf("the added replica did not replay the partition's remote-log metadata:\n%s", logs)
	}
	// The added replica leads: the idempotent producer's retry of its
	// last batch, written long before the new leader's log start, is a
	// duplicate answered with its original offset (its producer state came
	// from the remote snapshot), and the next sequence is appended.
	r.leadFromAdded(t)
	// Consumers still read everything from offset 0.
	ccl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tiered": {0: kgo.NewOffset().AtStart()}}))
	next := int64(0)
	deadline := time.Now().Add(60 * time.Second)
	for next < tieredRecords {
		if time.Now().After(deadline) {
			t.Fatalf("consumed up to %d of %d\n%s", next, tieredRecords, c.warnings())
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := ccl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset == next && strings.HasPrefix(string(r.Value), fmt.Sprintf("v%d-", next)) {
				next++
			}
		})
	}
}

// TestClusterTieredNewReplicaAfterBacklog: uploads lag far behind the
// rolls (the leader's copies throttled to 4 KiB/s while 400 records roll
// 19 segments, about one per 20-record batch, in a second or two), and
// local retention keeps
// about five segments, so the leader's local log starts at the end of a
// segment that was copied long after the engine's newest three producer
// snapshots had moved past it. Every copied segment still has its
// .snapshot object in the store, and a replica added then restarts from
// remote storage at that local start with the producer state: made
// leader, it answers the idempotent producer's retry of a batch written
// before its log start as the duplicate at its original offset, and takes
// the next sequence.
func TestClusterTieredNewReplicaAfterBacklog(t *testing.T) {
	r := startTieredReplicaRun(t, "remote.log.manager.copy.max.bytes.per.second=4096\n", "20480", true)
	c, storeDir, leader, added := r.c, r.storeDir, r.leader, r.added
	// Wait (bounded) until the leader copied its newest sealed segment and
	// local retention moved its log start past the producer's batches.
	leaderDir := filepath.Join(c.brokers[leader].dataDir, "tiered-0")
	localBases := func() []string {
		ents, _ := os.ReadDir(leaderDir)
		var out []string
		for _, e := range ents {
			if b, ok := strings.CutSuffix(e.Name(), ".log"); ok {
				out = append(out, b)
			}
		}
		sort.Strings(out)
		return out
	}
	var copied []string
	waitFor(t, 120*time.Second, func() string {
		local := localBases()
		if len(local) < 2 || local[0] == fmt.Sprintf("%020d", 0) {
			return fmt.Sprintf("the leader's local segments %v\n%s", local, c.warnings())
		}
		copied = storeLogObjects(t, storeDir)
		newest := local[len(local)-2] // the newest sealed segment
		for _, k := range copied {
			// Its last object (copies run oldest first, objects in order).
			ckpt := filepath.Join(storeDir, filepath.FromSlash(strings.TrimSuffix(k, ".log")+".leader-epoch-checkpoint"))
			if _, err := os.Stat(ckpt); err == nil && strings.HasPrefix(k, "tiered-0/"+newest+"-") {
				return ""
			}
		}
		return fmt.Sprintf("%d segments copied, the newest sealed %s not yet", len(copied), newest)
	})
	if len(copied) < 10 || len(localBases()) < 5 {
		t.Fatalf("%d segments copied, %d local: want a backlog of at least 10 and five kept locally", len(copied), len(localBases()))
	}
	// Every copied segment has its producer snapshot in the store.
	for _, k := range copied {
		snap := filepath.Join(storeDir, filepath.FromSlash(strings.TrimSuffix(k, ".log")+".snapshot"))
		if _, err := os.Stat(snap); err != nil {
			t.Fatalf("segment %s copied without its producer snapshot: %v", k, err)
		}
	}

	r.addReplica(t)
	nb := c.brokers[added]
	logs := nb.logs.String()
	if !strings.Contains(logs, "follower log below the leader's local log start; restarting it from remote storage") ||
		!strings.Contains(logs, "producerSnapshot=true") || strings.Contains(logs, "leaderLocalLogStart=0 ") {
		t.Fatalf("the added replica did not restart from remote storage with a producer snapshot:\n%s", logs)
	}
	r.leadFromAdded(t)
}

// TestClusterTieredEnabledOnExistingTopic: the topic is written with
// remote storage off (400 records roll 19 segments, the leader's producer
// snapshots trimmed to its newest three meanwhile), then
// remote.storage.enable is turned on with local.retention.bytes keeping
// about five segments: the leader copies every segment, each with its
// .snapshot object (the engine rebuilds the producer state at the ends of
// those whose snapshot is gone, as Kafka, which keeps each segment's,
// copies one with every segment), and local retention moves its log start
// to the end of such a segment. A replica added then restarts from remote
// storage there with the producer state and, made leader, answers the
// idempotent producer's retry of offset 16 as the duplicate and takes its
// next sequence at 400.
func TestClusterTieredEnabledOnExistingTopic(t *testing.T) {
	r := startTieredReplicaRun(t, "", "20480", false)
	c, storeDir, leader, added := r.c, r.storeDir, r.leader, r.added
	leaderDir := filepath.Join(c.brokers[leader].dataDir, "tiered-0")
	files := func(suffix string) []string {
		ents, _ := os.ReadDir(leaderDir)
		var out []string
		for _, e := range ents {
			if b, ok := strings.CutSuffix(e.Name(), suffix); ok {
				out = append(out, b)
			}
		}
		sort.Strings(out)
		return out
	}
	sealed := files(".log")
	sealed = sealed[:len(sealed)-1]
	if snaps := files(".snapshot"); len(sealed) < 15 || len(snaps) > 3 || len(storeLogObjects(t, storeDir)) != 0 {
		t.Fatalf("before remote storage: %d sealed segments, snapshots %v, %d copied; want at least 15, at most three, none",
			len(sealed), snaps, len(storeLogObjects(t, storeDir)))
	}
	rs, err := r.adm.AlterTopicConfigs(r.ctx, []kadm.AlterConfig{{Name: "remote.storage.enable", Value: kadm.StringPtr("true")}}, "tiered")
	if err == nil {
		_, err = rs.On("tiered", nil)
	}
	if err != nil {
		t.Fatalf("turning remote storage on: %v", err)
	}
	// Every segment sealed before is copied (oldest first: the newest
	// one's epoch checkpoint, its last object, ends it), each with its
	// producer snapshot, and local retention moves the log start.
	var copied []string
	waitFor(t, 60*time.Second, func() string {
		copied = storeLogObjects(t, storeDir)
		if local := files(".log"); len(local) == 0 || local[0] == fmt.Sprintf("%020d", 0) {
			return fmt.Sprintf("the leader's local segments %v, %d copied\n%s", local, len(copied), c.warnings())
		}
		for _, k := range copied {
			ckpt := filepath.Join(storeDir, filepath.FromSlash(strings.TrimSuffix(k, ".log")+".leader-epoch-checkpoint"))
			if _, err := os.Stat(ckpt); err == nil && strings.HasPrefix(k, "tiered-0/"+sealed[len(sealed)-1]+"-") {
				return ""
			}
		}
		return fmt.Sprintf("%d segments copied, the last sealed before %s not yet", len(copied), sealed[len(sealed)-1])
	})
	bases := map[string]bool{}
	for _, k := range copied {
		name := strings.TrimPrefix(k, "tiered-0/")
		bases[name[:20]] = true
		snap := filepath.Join(storeDir, filepath.FromSlash(strings.TrimSuffix(k, ".log")+".snapshot"))
		if _, err := os.Stat(snap); err != nil {
			t.Fatalf("segment %s copied without its producer snapshot: %v", k, err)
		}
	}
	for _, b := range sealed {
		if !bases[b] {
			t.Fatalf("segment %s, sealed before remote storage was on, not copied (copied: %v)", b, copied)
		}
	}
	local := files(".log")
	if k := sort.SearchStrings(sealed, local[0]); k >= len(sealed)-3 {
		t.Fatalf("the leader's local log starts at %s, one of the last three segments sealed before (%v): its snapshot was never trimmed, the test shows nothing", local[0], sealed)
	}

	r.addReplica(t)
	logs := c.brokers[added].logs.String()
	if !strings.Contains(logs, "follower log below the leader's local log start; restarting it from remote storage") ||
		!strings.Contains(logs, "producerSnapshot=true") || strings.Contains(logs, "leaderLocalLogStart=0 ") {
		t.Fatalf("the added replica did not restart from remote storage with a producer snapshot:\n%s", logs)
	}
	r.leadFromAdded(t)
}

// tieredReplicaRun is the setup TestClusterTieredNewReplica and
// TestClusterTieredNewReplicaAfterBacklog share: three brokers with the
// local-directory store, a tiered topic "tiered" of one partition on two
// replicas (4 KiB segments, local.retention.bytes as given), an idempotent
// producer's first 20 records (five batches of four, sequences 0-19) and
// 380 more from a plain producer, and the broker that does not replicate
// the partition (added). With remote false the topic is created with
// remote.storage.enable=false (the caller turns it on).
type tieredReplicaRun struct {
	c        *testCluster
	ctx      context.Context
	adm      *kadm.Client
	icl      *kgo.Client // Produce v12 (by topic name), acks=all
	pid      int64
	pepoch   int16
	storeDir string
	replicas []int32
	leader   int32
	added    int32
}

// tieredRecords is how many records startTieredReplicaRun writes.
const tieredRecords = 400

func startTieredReplicaRun(t *testing.T, extraProps, localRetentionBytes string, remote bool) *tieredReplicaRun {
	t.Helper()
	r := &tieredReplicaRun{storeDir: t.TempDir()}
	props := clusterProps + "strata.remote.storage.type=local\nstrata.remote.storage.local.dir=" + r.storeDir + "\n" +
		"remote.log.manager.task.interval.ms=100\nlog.retention.check.interval.ms=100\n" + extraProps
	r.c = startClusterProps(t, 3, 3, props)
	r.ctx = testCtx(t, 4*time.Minute)
	cl := r.c.client()
	r.c.waitBrokers(r.ctx, cl, 0, 3)
	r.adm = kadm.NewClient(cl)
	resp, err := r.adm.CreateTopic(r.ctx, 1, 2, map[string]*string{
		"remote.storage.enable": kadm.StringPtr(fmt.Sprint(remote)),
		"segment.bytes":         kadm.StringPtr("4096"),
		"local.retention.bytes": kadm.StringPtr(localRetentionBytes),
		"file.delete.delay.ms":  kadm.StringPtr("0"),
	}, "tiered")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	pcl := r.c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("tiered"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	v12 := kversion.Stable()
	v12.SetMaxKeyVersion(0, 12) // Produce by topic name
	r.icl = r.c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxVersions(v12))
	// The idempotent producer's last batch, offsets 16-19, is retried
	// later at a leader whose log starts past it (leadFromAdded).
	r.pid, r.pepoch = initProducerID(r.ctx, t, pcl)
	for seq := int32(0); seq < 20; seq += 4 {
		if p := produceIdempotent(r.ctx, t, r.adm, r.icl, r.pid, r.pepoch, seq); p.ErrorCode != 0 || p.BaseOffset != int64(seq) {
			t.Fatalf("idempotent produce of sequence %d: error %d at offset %d", seq, p.ErrorCode, p.BaseOffset)
		}
	}
	for i := 20; i < tieredRecords; i += 20 {
		var recs []*kgo.Record
		for j := i; j < i+20; j++ {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v%d-%s", j, strings.Repeat("x", 100)))})
		}
		if err := pcl.ProduceSync(r.ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v\n%s", err, r.c.warnings())
		}
	}
	md, err := r.adm.Metadata(r.ctx, "tiered")
	if err != nil {
		t.Fatal(err)
	}
	p0 := md.Topics["tiered"].Partitions[0]
	r.replicas, r.leader, r.added = p0.Replicas, p0.Leader, -1
	for id := int32(0); id < 3; id++ {
		if id != r.replicas[0] && id != r.replicas[1] {
			r.added = id
		}
	}
	return r
}

// addReplica reassigns the partition to its replicas plus added and waits
// (bounded) until all three are in sync.
func (r *tieredReplicaRun) addReplica(t *testing.T) {
	t.Helper()
	want := append(append([]int32(nil), r.replicas...), r.added)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("tiered", 0, want)
	if rs, err := r.adm.AlterPartitionAssignments(r.ctx, req); err != nil || rs.Error() != nil {
		t.Fatalf("reassign to %v: %v %v", want, err, rs.Error())
	}
	waitFor(t, 90*time.Second, func() string {
		md, err := r.adm.Metadata(r.ctx, "tiered")
		if err != nil {
			return err.Error()
		}
		p := md.Topics["tiered"].Partitions[0]
		if len(p.Replicas) != 3 || len(p.ISR) != 3 {
			return fmt.Sprintf("replicas %v isr %v, want %v in sync\n%s", p.Replicas, p.ISR, want, r.c.warnings())
		}
		return ""
	})
}

// leadFromAdded makes the added replica the leader: the idempotent
// producer's retry of its last batch, written long before the new leader's
// log start, is a duplicate answered with its original offset (its
// producer state came from the remote snapshot), and the next sequence is
// appended at the log end.
func (r *tieredReplicaRun) leadFromAdded(t *testing.T) {
	t.Helper()
	order := append([]int32{r.added}, r.replicas...)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("tiered", 0, order)
	if rs, err := r.adm.AlterPartitionAssignments(r.ctx, req); err != nil || rs.Error() != nil {
		t.Fatalf("reorder replicas to %v: %v %v", order, err, rs.Error())
	}
	waitFor(t, 90*time.Second, func() string {
		md, err := r.adm.Metadata(r.ctx, "tiered")
		if err != nil {
			return err.Error()
		}
		p := md.Topics["tiered"].Partitions[0]
		if fmt.Sprint(p.Replicas) != fmt.Sprint(order) || len(p.ISR) != 3 {
			return fmt.Sprintf("replicas %v isr %v, want %v all in sync", p.Replicas, p.ISR, order)
		}
		if p.Leader == r.added {
			return ""
		}
		ts := make(kadm.TopicsSet)
		ts.Add("tiered", 0)
		r.adm.ElectLeaders(r.ctx, kadm.ElectPreferredReplica, ts)
		return fmt.Sprintf("leader %d, want %d", p.Leader, r.added)
	})
	if p := produceIdempotent(r.ctx, t, r.adm, r.icl, r.pid, r.pepoch, 16); p.ErrorCode != 0 || p.BaseOffset != 16 {
		t.Fatalf("retry of sequence 16 at the new leader: error %d at offset %d, want the duplicate at 16\n%s", p.ErrorCode, p.BaseOffset, r.c.warnings())
	}
	if p := produceIdempotent(r.ctx, t, r.adm, r.icl, r.pid, r.pepoch, 20); p.ErrorCode != 0 || p.BaseOffset != tieredRecords {
		t.Fatalf("sequence 20 at the new leader: error %d at offset %d, want %d", p.ErrorCode, p.BaseOffset, tieredRecords)
	}
}
