package e2e

// Consumer groups with clients that speak the group protocol themselves, at
// their own (old) versions, against the strata binary: kafka-go's group
// Reader (FindCoordinator v0, JoinGroup v1/v2, SyncGroup v0, Heartbeat v0,
// LeaveGroup v0, OffsetCommit v2, OffsetFetch v1) and kcat's balanced
// consumer (librdkafka, -G). Both commit, stop, and resume at their commits,
// also across a broker restart (commits reload from __consumer_offsets).

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceTo writes n records spread over the partitions and returns the end
// offsets.
func produceTo(t *testing.T, ctx context.Context, b *broker, topic string, partitions int32, n int) map[int32]int64 {
	t.Helper()
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// committedOffsets returns group's commits on topic.
func committedOffsets(t *testing.T, ctx context.Context, b *broker, group string) map[int32]int64 {
	t.Helper()
	o, err := b.admin().FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	o.Each(func(r kadm.OffsetResponse) { out[r.Partition] = r.At })
	return out
}

// kafkaGoReadGroup reads n messages as a member of group, committing each
// synchronously, and returns (partition, offset) of each.
func kafkaGoReadGroup(t *testing.T, ctx context.Context, b *broker, group, topic string, n int) [][2]int64 {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        []string{b.addr},
		GroupID:        group,
		Topic:          topic,
		MinBytes:       1,
		MaxBytes:       1 << 20,
		MaxWait:        200 * time.Millisecond,
		StartOffset:    kafka.FirstOffset,
		CommitInterval: 0, // synchronous commits
	})
	defer r.Close()
	var got [][2]int64
	for len(got) < n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go FetchMessage after %d of %d: %v\nbroker:\n%s", len(got), n, err, b.logs)
		}
		got = append(got, [2]int64{int64(m.Partition), m.Offset})
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("kafka-go CommitMessages: %v\nbroker:\n%s", err, b.logs)
		}
	}
	return got
}

func TestKafkaGoGroupReader(t *testing.T) {
	b := startBroker(t, "")
	ctx := testCtx(t, 3*time.Minute)
	const topic, parts = "kg-group", int32(3)
	createTopic(t, ctx, b, topic, parts)
	ends := produceTo(t, ctx, b, topic, parts, 90)

	got := kafkaGoReadGroup(t, ctx, b, "kg", topic, 90)
	seen := map[[2]int64]bool{}
	for _, g := range got {
		seen[g] = true
	}
	for p := int32(0); p < parts; p++ {
		for o := int64(0); o < ends[p]; o++ {
			if !seen[[2]int64{int64(p), o}] {
				t.Fatalf("kafka-go group reader missed %d/%d", p, o)
			}
		}
	}
	if c := committedOffsets(t, ctx, b, "kg"); fmt.Sprint(c) != fmt.Sprint(ends) {
		t.Fatalf("commits %v, want the ends %v", c, ends)
	}

	// Restart the broker; the group resumes at its commits.
	b.restart()
	old := ends
	ends = produceTo(t, ctx, b, topic, parts, 30)
	got = kafkaGoReadGroup(t, ctx, b, "kg", topic, 30)
	for _, g := range got {
		if g[1] < old[int32(g[0])] {
			t.Fatalf("after restart kafka-go re-read %d/%d, below the commit %d", g[0], g[1], old[int32(g[0])])
		}
	}
	if c := committedOffsets(t, ctx, b, "kg"); fmt.Sprint(c) != fmt.Sprint(ends) {
		t.Fatalf("commits after restart %v, want %v", c, ends)
	}
}

// kcatGroup consumes n messages with kcat's balanced consumer and returns
// (partition, offset) of each.
func kcatGroup(t *testing.T, ctx context.Context, kcat string, b *broker, group, topic string, n int) [][2]int64 {
	t.Helper()
	cmd := exec.CommandContext(ctx, kcat, "-b", b.addr, "-G", group, "-c", strconv.Itoa(n),
		"-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=100",
		"-f", "%p %o\n", topic)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -G: %v\n%s\nbroker:\n%s", err, stderr.String(), b.logs)
	}
	var got [][2]int64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		p, _ := strconv.ParseInt(f[0], 10, 32)
		o, _ := strconv.ParseInt(f[1], 10, 64)
		got = append(got, [2]int64{p, o})
	}
	if len(got) != n {
		t.Fatalf("kcat -G printed %d messages, want %d:\n%s\n%s", len(got), n, out, stderr.String())
	}
	return got
}

func TestKcatBalancedConsumer(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: scripts/test installs it (apt-get install kcat)")
	}
	b := startBroker(t, "")
	ctx := testCtx(t, 3*time.Minute)
	const topic, parts = "kcat-group", int32(3)
	createTopic(t, ctx, b, topic, parts)
	ends := produceTo(t, ctx, b, topic, parts, 60)

	got := kcatGroup(t, ctx, kcat, b, "kc", topic, 60)
	seen := map[[2]int64]bool{}
	for _, g := range got {
		seen[g] = true
	}
	if len(seen) != 60 {
		t.Fatalf("kcat read %d distinct records, want 60", len(seen))
	}
	// kcat commits on close: the group's commits are at the ends.
	waitFor(t, time.Minute, func() string {
		if c := committedOffsets(t, ctx, b, "kc"); fmt.Sprint(c) != fmt.Sprint(ends) {
			return fmt.Sprintf("commits %v, want %v", c, ends)
		}
		return ""
	})
	old := ends
	b.restart()
	produceTo(t, ctx, b, topic, parts, 15)
	for _, g := range kcatGroup(t, ctx, kcat, b, "kc", topic, 15) {
		if g[1] < old[int32(g[0])] {
			t.Fatalf("kcat re-read %d/%d below the commit %d after a restart", g[0], g[1], old[int32(g[0])])
		}
	}
}

// TestClusterGroupCoordinatorFailover: in a 3-broker cluster a group
// commits through the coordinator (the leader of its __consumer_offsets
// partition, replicated to three brokers); the coordinator is killed
// (SIGKILL); the group reforms on the new leader and resumes at its commits.
func TestClusterGroupCoordinatorFailover(t *testing.T) {
	c := startCluster(t, 3)
	ctx := testCtx(t, 4*time.Minute)
	cl := c.client()
	adm := kadm.NewClient(cl)
	for id := int32(0); id < 3; id++ {
		c.waitBrokers(ctx, cl, id, 3)
	}
	const topic, gid, parts = "fo-group", "fo", int32(3)
	if resp, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(n int) {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % parts, Value: []byte(strconv.Itoa(i))}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v\n%s", err, c.warnings())
		}
	}
	// consume reads n records as a group member, commits, leaves, and
	// returns the smallest offset it saw per partition.
	consume := func(n int) map[int32]int64 {
		cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumerGroup(gid), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		minSeen := map[int32]int64{}
		got := 0
		for got < n {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d before the deadline\n%s", got, n, c.warnings())
			}
			fs.EachRecord(func(r *kgo.Record) {
				got++
				if m, ok := minSeen[r.Partition]; !ok || r.Offset < m {
					minSeen[r.Partition] = r.Offset
				}
			})
		}
		if err := cons.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v\n%s", err, c.warnings())
		}
		return minSeen
	}
	produce(60)
	consume(60)
	t.Logf("first generation consumed and committed")
	commits, err := adm.FetchOffsets(ctx, gid)
	if err != nil || commits.Error() != nil {
		t.Fatalf("FetchOffsets: %v %v", err, commits.Error())
	}
	before := map[int32]int64{}
	commits.Each(func(o kadm.OffsetResponse) { before[o.Partition] = o.At })
	if len(before) != int(parts) {
		t.Fatalf("commits before failover: %v", before)
	}
	coord := adm.FindGroupCoordinators(ctx, gid)[gid]
	if coord.Err != nil || coord.NodeID < 0 || coord.NodeID > 2 {
		t.Fatalf("coordinator: %+v", coord)
	}
	c.brokers[coord.NodeID].kill()
	t.Logf("killed the coordinator, broker %d", coord.NodeID)

	// A client seeded with the survivors finds the new coordinator and
	// the commits. (Each attempt uses a new client: kgo keeps a group's
	// coordinator cached and retries a dead one until its request fails.)
	waitFor(t, time.Minute, func() string {
		cl2, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RetryTimeout(3*time.Second), kgo.DialTimeout(time.Second))
		if err != nil {
			return err.Error()
		}
		defer cl2.Close()
		adm2 := kadm.NewClient(cl2)
		co := adm2.FindGroupCoordinators(ctx, gid)[gid]
		if co.Err != nil {
			return fmt.Sprintf("FindCoordinator: %v", co.Err)
		}
		if co.NodeID == coord.NodeID {
			return "coordinator still the killed broker"
		}
		o, err := adm2.FetchOffsets(ctx, gid)
		if err != nil || o.Error() != nil {
			return fmt.Sprintf("FetchOffsets: %v %v", err, o.Error())
		}
		for p, want := range before {
			if r, ok := o.Lookup(topic, p); !ok || r.At != want {
				return fmt.Sprintf("partition %d committed %+v, want %d", p, r, want)
			}
		}
		return ""
	})
	t.Logf("commits found on the new coordinator")
	produce(30)
	for p, m := range consume(30) {
		if m < before[p] {
			t.Fatalf("after failover the group re-read partition %d from %d, below its commit %d", p, m, before[p])
		}
	}
}
