package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runTopics runs `strata topics args... --brokers addr` and returns its
// output and whether it exited 0.
func runTopics(t *testing.T, addr string, args ...string) (stdout, stderr string, ok bool) {
	t.Helper()
	cmd := exec.Command(strataBin, append(append([]string{"topics"}, args...), "--brokers", addr, "--timeout", "20s")...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		if _, exit := err.(*exec.ExitError); !exit {
			t.Fatalf("running strata topics %v: %v", args, err)
		}
	}
	return out.String(), errb.String(), err == nil
}

func mustTopics(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, errOut, ok := runTopics(t, addr, args...)
	if !ok {
		t.Fatalf("strata topics %v failed:\n%s%s", args, out, errOut)
	}
	return out
}

func TestTopicsCommand(t *testing.T) {
	b := startBroker(t, "")
	ctx := testCtx(t, 60*time.Second)

	out := mustTopics(t, b.addr, "create", "orders", "--partitions", "3", "--replication-factor", "1",
		"--config", "retention.ms=3600000", "--config", "cleanup.policy=compact")
	if !strings.Contains(out, "Created topic orders") || !strings.Contains(out, "3 partitions") {
		t.Fatalf("create: %q", out)
	}
	if _, errOut, ok := runTopics(t, b.addr, "create", "orders", "--partitions", "3"); ok || !strings.Contains(errOut, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("second create: ok=%v %q", ok, errOut)
	}
	mustTopics(t, b.addr, "create", "orders", "--if-not-exists")
	if _, errOut, ok := runTopics(t, b.addr, "create", "bad", "--config", "retention.ms=soon"); ok || !strings.Contains(errOut, "INVALID_CONFIG") {
		t.Fatalf("create with a bad config: ok=%v %q", ok, errOut)
	}
	mustTopics(t, b.addr, "create", "events")
	if out := mustTopics(t, b.addr, "list"); out != "events\norders\n" {
		t.Fatalf("list: %q", out)
	}

	cl := b.client()
	for i := 0; i < 30; i++ {
		r := &kgo.Record{Topic: "orders", Key: []byte{byte('a' + i%3)}, Value: []byte("v")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	out = mustTopics(t, b.addr, "describe", "orders")
	for _, want := range []string{"PartitionCount: 3", "ReplicationFactor: 1", "cleanup.policy=compact", "retention.ms=3600000", "Partition: 2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "HighWatermark: 0") == 3 {
		t.Fatalf("describe shows no records:\n%s", out)
	}

	mustTopics(t, b.addr, "alter-config", "orders", "--set", "retention.ms=1000", "--delete", "cleanup.policy")
	checkConfig := func(key, value string, source kmsg.ConfigSource) {
		t.Helper()
		rcs, err := b.admin().DescribeTopicConfigs(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("orders", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.Configs {
			if c.Key == key {
				if c.MaybeValue() != value || c.Source != source {
					t.Fatalf("%s = %q (source %v), want %q (%v)", key, c.MaybeValue(), c.Source, value, source)
				}
				return
			}
		}
		t.Fatalf("%s not described", key)
	}
	checkConfig("retention.ms", "1000", kmsg.ConfigSourceDynamicTopicConfig)
	checkConfig("cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)
	if _, errOut, ok := runTopics(t, b.addr, "alter-config", "orders", "--set", "segment.bytes=1"); ok || !strings.Contains(errOut, "INVALID_CONFIG") {
		t.Fatalf("alter with a bad value: ok=%v %q", ok, errOut)
	}
	if _, errOut, ok := runTopics(t, b.addr, "alter-config", "nope", "--set", "retention.ms=1"); ok || !strings.Contains(errOut, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("alter of a missing topic: ok=%v %q", ok, errOut)
	}
	mustTopics(t, b.addr, "alter-config", "orders", "--set", "retention.ms=5", "--validate-only")
	checkConfig("retention.ms", "1000", kmsg.ConfigSourceDynamicTopicConfig)

	// Configs are persisted: a restart keeps them.
	b.restart()
	checkConfig("retention.ms", "1000", kmsg.ConfigSourceDynamicTopicConfig)
	if out := mustTopics(t, b.addr, "describe"); !strings.Contains(out, "Topic: events") || !strings.Contains(out, "retention.ms=1000") {
		t.Fatalf("describe all after restart:\n%s", out)
	}

	out = mustTopics(t, b.addr, "delete", "orders", "events")
	if !strings.Contains(out, "Deleted topic orders") {
		t.Fatalf("delete: %q", out)
	}
	if out := mustTopics(t, b.addr, "list"); out != "" {
		t.Fatalf("list after delete: %q", out)
	}
	if _, errOut, ok := runTopics(t, b.addr, "delete", "orders"); ok || !strings.Contains(errOut, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("delete of a missing topic: ok=%v %q", ok, errOut)
	}
}

// A consumer rewinds by timestamp (ListOffsets by time through kadm) and
// gets the first record at or after it.
func TestRewindByTimestamp(t *testing.T) {
	b := startBroker(t, "")
	ctx := testCtx(t, 60*time.Second)
	mustTopics(t, b.addr, "create", "times", "--partitions", "1", "--config", "segment.bytes=2048")
	cl := b.client(kgo.DefaultProduceTopic("times"))
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := 0; i < 40; i++ {
		r := &kgo.Record{Value: bytes.Repeat([]byte{byte(i)}, 200), Timestamp: t0.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offs, err := b.admin().ListOffsetsAfterMilli(ctx, t0.Add(25500*time.Millisecond).UnixMilli(), "times")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup("times", 0)
	if !ok || o.Err != nil || o.Offset != 26 {
		t.Fatalf("ListOffsetsAfterMilli = %+v, want offset 26", o)
	}
	cons := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"times": {0: kgo.NewOffset().At(o.Offset)}}))
	fs := cons.PollRecords(ctx, 1)
	if err := fs.Err(); err != nil || fs.NumRecords() == 0 {
		t.Fatalf("poll: %v", err)
	}
	r := fs.Records()[0]
	if r.Offset != 26 || !r.Timestamp.Equal(t0.Add(26*time.Second)) {
		t.Fatalf("first record after the rewind: offset %d at %v", r.Offset, r.Timestamp)
	}
}

// A broker SIGKILLed while its cleaner is swapping segments loses nothing:
// after the restart every key's last record is its latest write.
func TestCompactionSurvivesSIGKILL(t *testing.T) {
	b := startBroker(t, "")
	ctx := testCtx(t, 120*time.Second)
	mustTopics(t, b.addr, "create", "cmp", "--partitions", "1", "--config", "segment.bytes=1048576",
		"--config", "min.cleanable.dirty.ratio=0.01")
	cl := b.client(kgo.DefaultProduceTopic("cmp"), kgo.ProducerBatchMaxBytes(256<<10))
	const n, keys = 300_000, 5000
	latest := make(map[string]string, keys)
	value := bytes.Repeat([]byte("x"), 100)
	var firstErr error
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		k := "key-" + strconv.Itoa(i%keys)
		v := strconv.Itoa(i) + string(value)
		latest[k] = v
		cl.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	// Switching to compact wakes the cleaner; kill the broker as soon as a
	// cleaned or swap file shows up.
	mustTopics(t, b.addr, "alter-config", "cmp", "--set", "cleanup.policy=compact")
	pdir := filepath.Join(b.dataDir, "cmp-0")
	deadline := time.Now().Add(60 * time.Second) // hang guard
	for {
		c, _ := filepath.Glob(filepath.Join(pdir, "*.cleaned"))
		s, _ := filepath.Glob(filepath.Join(pdir, "*.swap"))
		if len(c)+len(s) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cleaner never started:\n%s", b.logs)
		}
		time.Sleep(time.Millisecond)
	}
	b.kill()
	b.start()

	cons := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"cmp": {0: kgo.NewOffset().AtStart()}}))
	end, err := b.admin().ListEndOffsets(ctx, "cmp")
	if err != nil {
		t.Fatal(err)
	}
	eo, _ := end.Lookup("cmp", 0)
	if eo.Offset != n {
		t.Fatalf("end offset after the restart %d, want %d", eo.Offset, n)
	}
	got := make(map[string]string, keys)
	prev := int64(-1)
	for prev < eo.Offset-1 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed up to %d of %d: %v", prev, eo.Offset, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= prev {
				t.Fatalf("offset %d after %d", r.Offset, prev)
			}
			prev = r.Offset
			got[string(r.Key)] = string(r.Value)
		})
	}
	for k, v := range latest {
		if got[k] != v {
			t.Fatalf("key %s: last value %.20q, want %.20q", k, got[k], v)
		}
	}
}

// In a cluster, `strata topics` works: the topic is created through the
// controller and an altered config (persisted by the controller) is what
// DescribeConfigs returns, through clients seeded with each broker.
func TestTopicsCommandCluster(t *testing.T) {
	c := startCluster(t, 3)
	seeds := strings.Join(c.seeds(), ",")
	ctx := testCtx(t, 90*time.Second)
	var out string
	waitFor(t, 30*time.Second, func() string {
		o, errOut, ok := runTopics(t, seeds, "create", "replicated", "--partitions", "2", "--replication-factor", "3",
			"--config", "retention.ms=3600000", "--if-not-exists")
		if !ok {
			return "create: " + errOut
		}
		out = o
		return ""
	})
	if !strings.Contains(out, "replicated") {
		t.Fatalf("create: %q", out)
	}
	mustTopics(t, seeds, "alter-config", "replicated", "--set", "retention.ms=1000", "--set", "cleanup.policy=compact,delete")
	for i, b := range c.brokers {
		waitFor(t, 30*time.Second, func() string {
			rcs, err := kadmFor(t, b).DescribeTopicConfigs(ctx, "replicated")
			if err != nil {
				return err.Error()
			}
			rc, err := rcs.On("replicated", nil)
			if err != nil {
				return err.Error()
			}
			got := map[string]string{}
			for _, cf := range rc.Configs {
				got[cf.Key] = cf.MaybeValue()
			}
			if got["retention.ms"] != "1000" || got["cleanup.policy"] != "compact,delete" {
				return fmt.Sprintf("broker %d describes retention.ms=%s cleanup.policy=%s", i, got["retention.ms"], got["cleanup.policy"])
			}
			return ""
		})
	}
	if out := mustTopics(t, seeds, "describe", "replicated"); !strings.Contains(out, "ReplicationFactor: 3") {
		t.Fatalf("describe:\n%s", out)
	}
}

func kadmFor(t *testing.T, b *broker) *kadm.Client {
	t.Helper()
	return kadm.NewClient(b.client())
}
