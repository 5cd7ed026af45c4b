package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterErr is the error of a one-resource alteration (the request's own
// error if it failed as a whole).
func alterErr(rs kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return fmt.Errorf("request failed: %w", err)
	}
	if len(rs) != 1 {
		return fmt.Errorf("%d responses, want 1", len(rs))
	}
	return rs[0].Err
}

func TestAlterConfigsReplacesTopicOverrides(t *testing.T) {
	addr, _, eng := startBroker(t, noAutoCreate)
	adm := newAdmin(t, addr)
	ctx := testCtx(t)
	if _, err := eng.CreateTopic("ac", 1, map[string]string{"retention.ms": "60000"}); err != nil {
		t.Fatal(err)
	}
	set := []kadm.AlterConfig{
		{Name: "segment.ms", Value: kadm.StringPtr("1000")},
		{Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
	}
	// validate_only changes nothing.
	if err := alterErr(adm.ValidateAlterTopicConfigsState(ctx, set, "ac")); err != nil {
		t.Fatal(err)
	}
	if got := eng.Topic("ac").Overrides(); !maps.Equal(got, map[string]string{"retention.ms": "60000"}) {
		t.Fatalf("validate_only changed overrides: %v", got)
	}
	if err := alterErr(adm.AlterTopicConfigsState(ctx, set, "ac")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"segment.ms": "1000", "cleanup.policy": "compact"}
	if got := eng.Topic("ac").Overrides(); !maps.Equal(got, want) {
		t.Fatalf("overrides %v, want %v (AlterConfigs replaces the whole set)", got, want)
	}
	if c := eng.Topic("ac").Config(); c.SegmentMs != 1000 || c.CleanupPolicy != "compact" || c.RetentionMs != engine.DefaultLogConfig().RetentionMs {
		t.Fatalf("effective config %+v", c)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "ac")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("ac", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		switch c.Key {
		case "segment.ms":
			if c.MaybeValue() != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				t.Fatalf("described %+v", c)
			}
		case "retention.ms":
			if c.Source != kmsg.ConfigSourceDefaultConfig {
				t.Fatalf("retention.ms after AlterConfigs dropped it: %+v", c)
			}
		}
	}

	for _, tc := range []struct {
		topic string
		cfg   []kadm.AlterConfig
		want  *kerr.Error
	}{
		{"ac", []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("soon")}}, kerr.InvalidConfig},
		{"ac", []kadm.AlterConfig{{Name: "no.such.key", Value: kadm.StringPtr("1")}}, kerr.InvalidConfig},
		{"ac", []kadm.AlterConfig{{Name: "cleanup.policy", Value: kadm.StringPtr("shred")}}, kerr.InvalidConfig},
		{"ac", []kadm.AlterConfig{{Name: "retention.ms", Value: nil}}, kerr.InvalidRequest},
		{"missing", []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("1")}}, kerr.UnknownTopicOrPartition},
	} {
		if err := alterErr(adm.AlterTopicConfigsState(ctx, tc.cfg, tc.topic)); !errors.Is(err, tc.want) {
			t.Errorf("%s %+v: %v, want %v", tc.topic, tc.cfg, err, tc.want)
		}
	}
	if got := eng.Topic("ac").Overrides(); !maps.Equal(got, want) {
		t.Fatalf("a refused request changed overrides: %v", got)
	}
	// A broker key that is not dynamic is refused.
	if err := alterErr(adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "num.partitions", Value: kadm.StringPtr("1")}}, 0)); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("broker alter: %v", err)
	}
}

func TestIncrementalAlterConfigs(t *testing.T) {
	addr, _, eng := startBroker(t, noAutoCreate)
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	if _, err := eng.CreateTopic("inc", 2, map[string]string{"segment.ms": "5000", "cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	ops := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("1000")},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("delete")},
		{Op: kadm.DeleteConfig, Name: "segment.ms"},
		{Op: kadm.DeleteConfig, Name: "flush.ms"}, // not set: a no-op
	}
	if err := alterErr(adm.AlterTopicConfigs(ctx, ops, "inc")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete"}
	if got := eng.Topic("inc").Overrides(); !maps.Equal(got, want) {
		t.Fatalf("overrides %v, want %v", got, want)
	}
	// Every partition's log runs with the new config.
	for p := int32(0); p < 2; p++ {
		if c := eng.Topic("inc").Config(); c.CleanupPolicy != "compact,delete" || c.SegmentMs != engine.DefaultLogConfig().SegmentMs {
			t.Fatalf("partition %d config %+v", p, c)
		}
	}
	if err := alterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")}}, "inc")); err != nil {
		t.Fatal(err)
	}
	if got := eng.Topic("inc").Config().CleanupPolicy; got != "delete" {
		t.Fatalf("after SUBTRACT compact: %q", got)
	}
	// APPEND to a key that is not a list; a key twice; a bad value.
	if err := alterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}}, "inc")); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("APPEND to a long: %v", err)
	}
	if err := alterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("1")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, "inc")); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("key twice: %v", err)
	}
	if err := alterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.cleanable.dirty.ratio", Value: kadm.StringPtr("1.5")}}, "inc")); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("ratio 1.5: %v", err)
	}
	// An unknown operation and a duplicated resource, sent raw.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "inc"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = "retention.ms", 9, kmsg.StringPtr("1")
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	resp := issue[*kmsg.IncrementalAlterConfigsResponse](t, cl, req)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("unknown op: %+v", resp.Resources)
	}
	req.Resources[0].Configs[0].Op = kmsg.IncrementalAlterConfigOpSet
	req.Resources = append(req.Resources, req.Resources[0])
	resp = issue[*kmsg.IncrementalAlterConfigsResponse](t, cl, req)
	if len(resp.Resources) != 2 || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code || resp.Resources[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("duplicate resource: %+v", resp.Resources)
	}
	if got := eng.Topic("inc").Config().RetentionMs; got != 1000 {
		t.Fatalf("refused requests changed retention.ms to %d", got)
	}
}

// A topic switched to compact refuses keyless records with INVALID_RECORD.
func TestAlterToCompactRefusesKeylessProduce(t *testing.T) {
	addr, _, eng := startBroker(t, noAutoCreate)
	if _, err := eng.CreateTopic("kl", 1, nil); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	ctx := testCtx(t)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kl", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	if err := alterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")}}, "kl")); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kl", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless produce to a compacted topic: %v, want INVALID_RECORD", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kl", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

type testClock struct{ ms atomic.Int64 }

func (c *testClock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// Retention deletes segments past retention.ms on its own (injected clock);
// a consumer behind the new start offset gets OFFSET_OUT_OF_RANGE and its
// reset policy resumes it at the earliest retained offset.
func TestRetentionConsumerBehindTheCliff(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := &testClock{}
	clk.ms.Store(t0)
	addr, _, eng := startBroker(t, noAutoCreate, func(_ *Config, o *engine.Options) {
		o.Now = clk.Now
		o.RetentionCheckInterval = 10 * time.Millisecond
	})
	if _, err := eng.CreateTopic("cliff", 1, map[string]string{
		"segment.bytes": "4096", "preallocate": "false", "retention.ms": "60000", "file.delete.delay.ms": "0",
	}); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	prod := newClient(t, addr, kgo.DefaultProduceTopic("cliff"), kgo.ProducerLinger(0))
	value := make([]byte, 1000)
	rand.Read(value) // incompressible: one or two records per 4 KiB segment
	for i := 0; i < 40; i++ {
		r := &kgo.Record{Value: value, Timestamp: time.UnixMilli(t0)}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	l := eng.Topic("cliff").Partition(0)
	if l.SegmentCount() < 5 {
		t.Fatalf("%d segments; the test needs several", l.SegmentCount())
	}
	// A consumer reads the first records, then falls behind.
	cons := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"cliff": {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxBytes(2000), kgo.FetchMaxPartitionBytes(2000))
	fs := cons.PollRecords(ctx, 1)
	if err := fs.Err(); err != nil || fs.NumRecords() == 0 || fs.Records()[0].Offset != 0 {
		t.Fatalf("first poll: %d records, %v", fs.NumRecords(), fs.Err())
	}
	clk.ms.Add(61_000)
	deadline := time.Now().Add(testTimeout)
	for l.LogStartOffset() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("retention never ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := l.LogStartOffset()
	if l.SegmentCount() != 1 || start <= 0 || start >= l.LogEndOffset() {
		t.Fatalf("after retention: %d segments, start %d, end %d; want only the active segment left", l.SegmentCount(), start, l.LogEndOffset())
	}
	adm := kadm.NewClient(prod)
	so, err := adm.ListStartOffsets(ctx, "cliff")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := so.Lookup("cliff", 0); !ok || o.Offset != start {
		t.Fatalf("ListStartOffsets = %+v, want %d", o, start)
	}
	// The consumer's next position is below the start: it resumes at it.
	for {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("never resumed at %d: %v", start, err)
		}
		var got []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
		if len(got) == 0 {
			continue
		}
		if got[0].Offset < start {
			continue // records fetched before the cliff
		}
		if got[0].Offset != start {
			t.Fatalf("resumed at %d, want the new start offset %d", got[0].Offset, start)
		}
		break
	}
}

// Broker keys that are not dynamic (internal/configkeys) are read-only:
// AlterConfigs and IncrementalAlterConfigs on a BROKER resource answer
// INVALID_REQUEST, as Kafka answers a non-dynamic key, and say why; so do
// unknown keys and a per-broker key (the SSL stores) set as the
// cluster-wide default; an empty set succeeds.
func TestAlterBrokerConfigsAreReadOnly(t *testing.T) {
	addr, _, _ := startBroker(t, noAutoCreate)
	cl := newClient(t, addr)
	for _, tc := range []struct {
		resource, key, msg string
		code               int16
	}{
		{"0", "num.partitions", "cannot be updated dynamically", kerr.InvalidRequest.Code},
		{"", "log.dirs", "cannot be updated dynamically", kerr.InvalidRequest.Code},
		{"", "ssl.keystore.location", "not as the cluster-wide default", kerr.InvalidRequest.Code},
		{"0", "no.such.key", "unknown config", kerr.InvalidRequest.Code},
		{"0", "", "", 0}, // no configs
	} {
		req := kmsg.NewPtrAlterConfigsRequest()
		r := kmsg.NewAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, tc.resource
		ireq := kmsg.NewPtrIncrementalAlterConfigsRequest()
		ir := kmsg.NewIncrementalAlterConfigsRequestResource()
		ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeBroker, tc.resource
		if tc.key != "" {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = tc.key, kmsg.StringPtr("3")
			r.Configs = append(r.Configs, c)
			ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			ic.Name, ic.Op, ic.Value = tc.key, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("3")
			ir.Configs = append(ir.Configs, ic)
		}
		req.Resources = append(req.Resources, r)
		ireq.Resources = append(ireq.Resources, ir)
		resp := issue[*kmsg.AlterConfigsResponse](t, cl, req)
		iresp := issue[*kmsg.IncrementalAlterConfigsResponse](t, cl, ireq)
		for _, got := range []struct {
			code int16
			msg  *string
		}{{resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage}, {iresp.Resources[0].ErrorCode, iresp.Resources[0].ErrorMessage}} {
			if got.code != tc.code || tc.msg != "" && (got.msg == nil || !strings.Contains(*got.msg, tc.msg)) {
				t.Errorf("broker %q %s: code %d message %v, want %d %q", tc.resource, tc.key, got.code, strOr(got.msg, "<null>"), tc.code, tc.msg)
			}
		}
	}
}
