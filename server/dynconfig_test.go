package server

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/controller"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/netpoll"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerConfigsOf describes BROKER resource name with synonyms over a raw
// request and returns its configs by name.
func brokerConfigsOf(t *testing.T, cl *kgo.Client, name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, name
	req.Resources = append(req.Resources, rr)
	resp := issue[*kmsg.DescribeConfigsResponse](t, cl, req)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe broker %q: %+v", name, resp.Resources)
	}
	return byName(resp.Resources[0].Configs)
}

func sources(syn []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) string {
	var out []string
	for _, s := range syn {
		out = append(out, s.Source.String()+":"+s.Name+"="+strOr(s.Value, "<null>"))
	}
	return strings.Join(out, " ")
}

// A cluster-wide default retention changed at runtime with kadm
// (IncrementalAlterConfigs on the BROKER resource "") deletes the old
// segments of a topic without a retention override and spares the topic
// with one; DescribeConfigs reports DYNAMIC_DEFAULT_BROKER_CONFIG, then
// DYNAMIC_BROKER_CONFIG once broker 0 sets its own; both survive a
// restart (the data directory's file).
func TestDynamicDefaultRetentionDeletesOldSegments(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := &testClock{}
	clk.ms.Store(t0)
	dir := t.TempDir()
	addr, s, eng := startBroker(t, noAutoCreate, func(_ *Config, o *engine.Options) {
		o.Dir = dir
		o.Now = clk.Now
		o.RetentionCheckInterval = 10 * time.Millisecond
	})
	small := map[string]string{"segment.bytes": "4096", "preallocate": "false", "file.delete.delay.ms": "0"}
	pinnedCfg := map[string]string{"retention.ms": "-1"}
	for k, v := range small {
		pinnedCfg[k] = v
	}
	if _, err := eng.CreateTopic("plain", 1, small); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateTopic("pinned", 1, pinnedCfg); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	prod := newClient(t, addr, kgo.ProducerLinger(0))
	value := make([]byte, 1000)
	rand.Read(value)
	for i := 0; i < 20; i++ {
		for _, topic := range []string{"pinned", "plain"} {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value, Timestamp: time.UnixMilli(t0)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	plain, pinned := eng.Topic("plain").Partition(0), eng.Topic("pinned").Partition(0)
	if plain.SegmentCount() < 4 || pinned.SegmentCount() < 4 {
		t.Fatalf("%d and %d segments; the test needs several", plain.SegmentCount(), pinned.SegmentCount())
	}
	clk.ms.Add(61_000) // past the new default, far below the 7 days in force
	time.Sleep(50 * time.Millisecond)
	if plain.LogStartOffset() != 0 {
		t.Fatal("retention ran before the default changed")
	}
	adm := kadm.NewClient(prod)
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("60000")}})
	if err := alterErr(rs, err); err != nil {
		t.Fatalf("AlterBrokerConfigs: %v", err)
	}
	deadline := time.Now().Add(testTimeout)
	for plain.LogStartOffset() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the new default retention never deleted plain's old segments")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if plain.SegmentCount() != 1 {
		t.Fatalf("plain: %d segments left, want the active one", plain.SegmentCount())
	}
	if pinned.LogStartOffset() != 0 || eng.Topic("pinned").Config().RetentionMs != -1 {
		t.Fatalf("pinned (retention.ms=-1) lost records: start %d", pinned.LogStartOffset())
	}

	// Describe: the default resource lists what is set there; broker 0
	// and the topic report its source.
	if c := brokerConfigsOf(t, prod, "")["log.retention.ms"]; strOr(c.Value, "") != "60000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || c.ReadOnly {
		t.Fatalf("describe \"\": log.retention.ms %+v", c)
	}
	c := brokerConfigsOf(t, prod, "0")["log.retention.ms"]
	if strOr(c.Value, "") != "60000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || c.ReadOnly {
		t.Fatalf("describe 0: log.retention.ms = %s %v read-only %v", strOr(c.Value, "<null>"), c.Source, c.ReadOnly)
	}
	tc, err := adm.DescribeTopicConfigs(ctx, "plain", "pinned")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range tc {
		for _, cfg := range rc.Configs {
			if cfg.Key != "retention.ms" {
				continue
			}
			want, src := "60000", kmsg.ConfigSourceDynamicDefaultBrokerConfig
			if rc.Name == "pinned" {
				want, src = "-1", kmsg.ConfigSourceDynamicTopicConfig
			}
			if strOr(cfg.Value, "") != want || cfg.Source != src {
				t.Fatalf("topic %s retention.ms = %s from %v, want %s from %v", rc.Name, strOr(cfg.Value, ""), cfg.Source, want, src)
			}
		}
	}

	// Broker 0's own value wins over the default (AlterConfigs, the
	// non-incremental request, replaces broker 0's set).
	rs, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "log.retention.hours", Value: kadm.StringPtr("2")}}, 0)
	if err := alterErr(rs, err); err != nil {
		t.Fatalf("AlterBrokerConfigsState: %v", err)
	}
	c = brokerConfigsOf(t, prod, "0")["log.retention.ms"]
	if strOr(c.Value, "") != "7200000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("describe 0 after the broker's own: log.retention.ms = %s from %v (%s)", strOr(c.Value, ""), c.Source, sources(c.ConfigSynonyms))
	}
	if got := sources(c.ConfigSynonyms); got != "DYNAMIC_BROKER_CONFIG:log.retention.hours=2 DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=60000 DEFAULT_CONFIG:log.retention.ms=604800000" {
		t.Fatalf("synonyms: %s", got)
	}
	if got := eng.Topic("plain").Config().RetentionMs; got != 7_200_000 {
		t.Fatalf("plain's retention.ms %d, want 7200000", got)
	}

	// A restart keeps both layers: the engine reopened with the static
	// defaults follows them as soon as the Server is built.
	s.Close()
	eng.Close()
	eng2, err := engine.Open(engine.Options{Dir: dir, Log: engine.DefaultLogConfig(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer eng2.Close()
	s2 := New(Config{NodeID: 0, ClusterID: "strata-test-cluster", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, eng2)
	defer s2.Close()
	d := s2.dynamicConfigs()
	if d.Default["log.retention.ms"] != "60000" || d.Broker["log.retention.hours"] != "2" {
		t.Fatalf("after a restart: %+v", d)
	}
	if got := eng2.Topic("plain").Config().RetentionMs; got != 7_200_000 {
		t.Fatalf("after a restart plain's retention.ms is %d, want 7200000", got)
	}
	if got := eng2.Topic("pinned").Config().RetentionMs; got != -1 {
		t.Fatalf("after a restart pinned's retention.ms is %d, want -1", got)
	}
}

// Refusals: keys that are not dynamic, per-broker keys at the default,
// bad values (each INVALID_REQUEST naming the key, as Kafka), keys this
// Server cannot apply without Config.Reconfigure; validate_only changes
// nothing; APPEND and SUBTRACT edit a list from its value in force.
func TestDynamicBrokerConfigsRefusedAndIncremental(t *testing.T) {
	addr, s, eng := startBroker(t, noAutoCreate)
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	for _, tc := range []struct {
		broker []int32
		name   string
		value  string
	}{
		{nil, "num.partitions", "3"},
		{[]int32{0}, "log.dirs", "/tmp/x"},
		{nil, "ssl.keystore.location", "/k.pem"},
		{[]int32{0}, "log.segment.bytes", "1"},
		{nil, "log.cleanup.policy", "shred"},
		{nil, "max.connections", "5"}, // no Reconfigure in this Server
		{nil, "no.such.config", "1"},
	} {
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: tc.name, Value: kadm.StringPtr(tc.value)}}, tc.broker...)
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s: %+v %v", tc.name, rs, err)
		}
		if !errors.Is(rs[0].Err, kerr.InvalidRequest) || !strings.Contains(rs[0].ErrMessage, tc.name) {
			t.Errorf("%s=%s: %v %q, want INVALID_REQUEST naming the key", tc.name, tc.value, rs[0].Err, rs[0].ErrMessage)
		}
	}
	rs, err := adm.ValidateAlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("1000")}})
	if err := alterErr(rs, err); err != nil {
		t.Fatal(err)
	}
	if d := s.dynamicConfigs(); len(d.Default)+len(d.Broker) != 0 || eng.LogDefaults().RetentionMs != 604_800_000 {
		t.Fatalf("validate_only changed the configs: %+v", d)
	}
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "log.cleanup.policy", Value: kadm.StringPtr("compact")}})
	if err := alterErr(rs, err); err != nil {
		t.Fatal(err)
	}
	if got := eng.LogDefaults().CleanupPolicy; !strings.Contains(got, "delete") || !strings.Contains(got, "compact") {
		t.Fatalf("after APPEND compact: cleanup.policy default %q", got)
	}
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "log.cleanup.policy", Value: kadm.StringPtr("delete")}})
	if err := alterErr(rs, err); err != nil {
		t.Fatal(err)
	}
	if got := eng.LogDefaults().CleanupPolicy; got != "compact" {
		t.Fatalf("after SUBTRACT delete: cleanup.policy default %q", got)
	}
	// A topic created now takes the new default; DELETE restores the old.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "later"); err != nil {
		t.Fatal(err)
	}
	if got := eng.Topic("later").Config().CleanupPolicy; got != "compact" {
		t.Fatalf("new topic: cleanup.policy %q", got)
	}
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.cleanup.policy"}})
	if err := alterErr(rs, err); err != nil {
		t.Fatal(err)
	}
	if got := eng.Topic("later").Config().CleanupPolicy; got != "delete" {
		t.Fatalf("after DELETE: cleanup.policy %q", got)
	}
	if c := brokerConfigsOf(t, cl, "0")["log.cleanup.policy"]; c.Source != kmsg.ConfigSourceDefaultConfig || c.ReadOnly {
		t.Fatalf("after DELETE: %+v", c)
	}
	if c := brokerConfigsOf(t, cl, "0")["num.partitions"]; !c.ReadOnly {
		t.Fatal("num.partitions described as dynamic")
	}
}

// Config.Reconfigure checks and applies the keys the Server does not
// apply itself: its refusal is INVALID_REQUEST with its message; the
// connection limits it returns are put in force at once.
func TestDynamicBrokerConfigsReconfigure(t *testing.T) {
	var applied []map[string]string
	addr, s, _ := startBroker(t, noAutoCreate, func(c *Config, _ *engine.Options) {
		c.Reconfigure = func(dyn map[string]string, apply bool) (*netpoll.ConnLimits, error) {
			if dyn["max.connections"] == "13" {
				return nil, errors.New("max.connections: thirteen is unlucky")
			}
			if !apply {
				return nil, nil
			}
			applied = append(applied, dyn)
			l := netpoll.DefaultConnLimits()
			if dyn["max.connections"] == "50" {
				l.MaxConnections = 50
			}
			return &l, nil
		}
	})
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "max.connections", Value: kadm.StringPtr("13")}})
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidRequest) || !strings.Contains(rs[0].ErrMessage, "unlucky") {
		t.Fatalf("refused by Reconfigure: %+v %v", rs, err)
	}
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Name: "max.connections", Value: kadm.StringPtr("50")},
		{Name: "listener.name.plaintext.max.connections", Value: kadm.StringPtr("40")},
	})
	if err := alterErr(rs, err); err != nil {
		t.Fatal(err)
	}
	if got := s.np.ConnLimits().MaxConnections; got != 50 {
		t.Fatalf("max.connections in force: %d", got)
	}
	if len(applied) != 1 || applied[0]["listener.name.plaintext.max.connections"] != "40" {
		t.Fatalf("Reconfigure applied %v", applied)
	}
	c := brokerConfigsOf(t, cl, "0")
	if v := c["max.connections"]; strOr(v.Value, "") != "50" || v.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("max.connections described %+v", v)
	}
	if v := c["listener.name.plaintext.max.connections"]; strOr(v.Value, "") != "40" || v.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("listener.name.plaintext.max.connections described %+v", v)
	}
}

// In a 3-broker cluster a default changed through broker 0 is applied by
// broker 2 (its topic defaults, its describe), and a per-broker config of
// broker 2 set through broker 1 concerns broker 2 only; a restarted
// broker applies them again.
func TestClusterDynamicBrokerConfigs(t *testing.T) {
	brokers, voters := startInCluster(t, 3)
	waitRegistered(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	cl := newClient(t, brokers[0].addr)
	send := func(b *inCluster, req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(int(b.id)).Request(ctx, req)
		if err != nil {
			t.Fatalf("broker %d: %v", b.id, err)
		}
		return resp
	}
	alter := func(b *inCluster, resource, name, value string) {
		t.Helper()
		alterBrokerConfig(ctx, t, cl, b, resource, name, &value)
	}
	describe := func(b *inCluster, name string) kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeBroker, itoa32(b.id), []string{name}
		req.Resources = append(req.Resources, rr)
		resp := send(b, req).(*kmsg.DescribeConfigsResponse)
		if len(resp.Resources[0].Configs) != 1 {
			t.Fatalf("describe %s on broker %d: %+v", name, b.id, resp.Resources[0])
		}
		return resp.Resources[0].Configs[0]
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(testTimeout); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never happened", what)
			}
		}
	}
	alter(brokers[0], "", "log.retention.ms", "3600000")
	if got := brokers[0].s.logDefaults().RetentionMs; got != 3_600_000 {
		t.Fatalf("broker 0 answered before applying: %d", got)
	}
	waitFor("broker 2 applying the default", func() bool { return brokers[2].eng.LogDefaults().RetentionMs == 3_600_000 })
	if c := describe(brokers[2], "log.retention.ms"); strOr(c.Value, "") != "3600000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("broker 2 describes log.retention.ms = %s from %v", strOr(c.Value, ""), c.Source)
	}
	alter(brokers[1], "2", "log.segment.bytes", "2097152")
	waitFor("broker 2 applying its own", func() bool { return brokers[2].eng.LogDefaults().SegmentBytes == 2097152 })
	if c := describe(brokers[2], "log.segment.bytes"); c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("broker 2 describes log.segment.bytes from %v", c.Source)
	}
	if got := brokers[1].eng.LogDefaults().SegmentBytes; got == 2097152 {
		t.Fatal("broker 1 applied broker 2's own config")
	}
	if c := describe(brokers[1], "log.segment.bytes"); c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("broker 1 describes log.segment.bytes from %v", c.Source)
	}
	// min.insync.replicas as the cluster-wide default: a topic of two
	// replicas without its own refuses acks=all (NOT_ENOUGH_REPLICAS) once
	// the default is 3, and takes it again once the default is gone.
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 2, nil, "isr"); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, brokers[0].addr, kgo.DefaultProduceTopic("isr"), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	produce := func() error {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return prod.ProduceSync(pctx, &kgo.Record{Value: []byte("v")}).FirstErr()
	}
	waitFor("acks=all to isr", func() bool { return produce() == nil })
	alter(brokers[1], "", "min.insync.replicas", "3")
	waitFor("NOT_ENOUGH_REPLICAS with min.insync.replicas=3 by default", func() bool { return errors.Is(produce(), kerr.NotEnoughReplicas) })
	if c := describe(brokers[0], "min.insync.replicas"); strOr(c.Value, "") != "3" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("broker 0 describes min.insync.replicas = %s from %v", strOr(c.Value, ""), c.Source)
	}
	dreq := kmsg.NewPtrIncrementalAlterConfigsRequest()
	drr := kmsg.NewIncrementalAlterConfigsRequestResource()
	drr.ResourceType = kmsg.ConfigResourceTypeBroker
	dop := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	dop.Name, dop.Op = "min.insync.replicas", kmsg.IncrementalAlterConfigOpDelete
	drr.Configs = append(drr.Configs, dop)
	dreq.Resources = append(dreq.Resources, drr)
	if r := send(brokers[2], dreq).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("delete min.insync.replicas: %d", r.ErrorCode)
	}
	waitFor("acks=all to isr again", func() bool { return produce() == nil })

	// Broker 2 restarted keeps and re-applies both.
	brokers[2].stop(t)
	brokers[2].restart(t, voters)
	waitFor("restarted broker 2 applying them", func() bool {
		d := brokers[2].eng.LogDefaults()
		return d.RetentionMs == 3_600_000 && d.SegmentBytes == 2097152
	})
}

// An alter through one broker right after another through a second edits
// what the first left, not the second broker's copy of the metadata if it
// lags (catchUp): a DELETE of a default just SET elsewhere removes it.
func TestClusterAlterAfterAlterElsewhere(t *testing.T) {
	brokers, _ := startInCluster(t, 3)
	waitRegistered(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	cl := newClient(t, brokers[0].addr)
	for i := range 12 {
		set, del := brokers[i%3], brokers[(i+1)%3]
		v := strconv.Itoa(3_600_000 + i)
		alterBrokerConfig(ctx, t, cl, set, "", "log.retention.ms", &v)
		alterBrokerConfig(ctx, t, cl, del, "", "log.retention.ms", nil)
		// Every broker at the same metadata offset: what they hold is final.
		for deadline := time.Now().Add(testTimeout); ; time.Sleep(5 * time.Millisecond) {
			off := brokers[0].ctl.Offset()
			if brokers[1].ctl.Offset() == off && brokers[2].ctl.Offset() == off {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the brokers' metadata never converged")
			}
		}
		var left map[string]string
		brokers[0].ctl.Read(func(st *controller.State) { left = st.BrokerConfigs(controller.DefaultBrokerConfigs) })
		if v, ok := left["log.retention.ms"]; ok {
			t.Fatalf("round %d: set through broker %d, deleted through broker %d, still %s", i, set.id, del.id, v)
		}
	}
}

// alterBrokerConfig sets (value nil: deletes) config name of BROKER
// resource through broker b with IncrementalAlterConfigs.
func alterBrokerConfig(ctx context.Context, t *testing.T, cl *kgo.Client, b *inCluster, resource, name string, value *string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, resource
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = name, value
	if value == nil {
		c.Op = kmsg.IncrementalAlterConfigOpDelete
	}
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := cl.Broker(int(b.id)).Request(ctx, req)
	if err != nil {
		t.Fatalf("broker %d: %v", b.id, err)
	}
	if r := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("alter %q %s=%v through broker %d: %d %s", resource, name, strOr(value, "(delete)"), b.id, r.ErrorCode, strOr(r.ErrorMessage, ""))
	}
}
