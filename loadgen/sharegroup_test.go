package loadgen

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestShareGroupConsumesEveryRecord: two kgo consumers in a share group
// (their own process) consume every record of a bounded run, from the
// start offsets loadgen set before producing; none is redelivered, and the
// table and JSON say a share group ran.
func TestShareGroupConsumesEveryRecord(t *testing.T) {
	cfg := smallRun(EngineNative) // the consumers are kgo's all the same
	cfg.Consumers = 2
	cfg.ShareGroup = "lg-share"
	rep, err := Run(testCtx(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, rep, 4000)
	r := rep.Result
	if r.GroupType != GroupTypeShare || r.Group != "lg-share" || r.RecordsRedelivered == nil || *r.RecordsRedelivered != 0 {
		t.Fatalf("group type %q group %q redelivered %v", r.GroupType, r.Group, r.RecordsRedelivered)
	}
	if rep.Config.ShareGroup != "lg-share" || rep.Config.ConsumerEngine != EngineKgo {
		t.Fatalf("config share_group %q consumer_engine %q", rep.Config.ShareGroup, rep.Config.ConsumerEngine)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"in share group lg-share, 0 redelivered", "2 kgo consumer(s) in share group lg-share"} {
		if !strings.Contains(table.String(), want) {
			t.Fatalf("table without %q:\n%s", want, table.String())
		}
	}
	html := filepath.Join(t.TempDir(), "r.html")
	if err := rep.WriteHTMLFile(html); err != nil {
		t.Fatal(err)
	}
	if page, err := os.ReadFile(html); err != nil || !strings.Contains(string(page), "in share group lg-share, 0 redelivered") {
		t.Fatalf("HTML report without the share group: %v", err)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := rep.WriteJSONFile(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	if j.Result["group_type"] != "share" || j.Result["records_redelivered"] != 0.0 {
		t.Fatalf("JSON result group_type %v records_redelivered %v", j.Result["group_type"], j.Result["records_redelivered"])
	}
}

// TestCompareShareGroup: --compare-share-group with two rounds on one
// spawned broker after a warm-up: both sides consume every record of
// their runs (the consumer group's fresh each round, so it never reads
// the share group's records), rounds alternate, and the report is the
// share group's with the consumer group's as its baseline.
func TestCompareShareGroup(t *testing.T) {
	cfg := smallRun(EngineKgo)
	cfg.Duration = time.Second
	cfg.Warmup = 500 * time.Millisecond
	cfg.ConsumersInProcess = true
	cfg.ShareGroup, cfg.CompareShareGroup, cfg.CompareRounds = "cmp", true, 2
	rep, err := RunRounds(testCtx(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	bl, rs := rep.Baseline, rep.Rounds
	if bl == nil || bl.Mode != BaselineConsumerGroup || rs == nil || len(rs.Rounds) != 2 {
		t.Fatalf("baseline %+v rounds %+v", bl, rs)
	}
	if rs.Rounds[0].First != sideShareGroup || rs.Rounds[1].First != sideConsumerGroup {
		t.Fatalf("rounds first %q, %q", rs.Rounds[0].First, rs.Rounds[1].First)
	}
	for i, r := range rs.Rounds {
		if r.RecordsRedelivered == nil || *r.RecordsRedelivered != 0 || r.RecordsPerSec <= 0 || r.E2EP99Ms <= 0 {
			t.Fatalf("round %d: redelivered %v, share group %v rec/s, e2e p99 %v", i+1, r.RecordsRedelivered, r.RecordsPerSec, r.E2EP99Ms)
		}
	}
	round := rs.Report // 1 or 2
	wantShare, wantGroup := roundGroup("cmp", round-1), roundGroup("cmp-consumers", round-1)
	for _, side := range []struct {
		r          *Result
		typ, group string
	}{{&rep.Result, GroupTypeShare, wantShare}, {&bl.Result, GroupTypeConsumer, wantGroup}} {
		r := side.r
		if r.GroupType != side.typ || r.Group != side.group {
			t.Fatalf("side %s %s, want %s %s", r.GroupType, r.Group, side.typ, side.group)
		}
		if r.RecordsAcked == 0 || r.RecordsConsumed != r.RecordsAcked || r.ConsumeErrors != 0 || r.E2EP50Ms <= 0 {
			t.Fatalf("%s group: acked %d consumed %d, consume errors %d, e2e p50 %v; errors %+v", side.typ, r.RecordsAcked,
				r.RecordsConsumed, r.ConsumeErrors, r.E2EP50Ms, r.Errors)
		}
		if r.ConsumerLagAtEnd == nil || *r.ConsumerLagAtEnd < 0 || *r.ConsumerLagAtEnd > r.RecordsAcked || r.CatchUpS == nil || *r.CatchUpS < 0 {
			t.Fatalf("%s group: lag at end %v, caught up after %v s", side.typ, r.ConsumerLagAtEnd, r.CatchUpS)
		}
		if r.BrokerCPUSeconds == nil || r.BrokerCPUUsPerRecord <= 0 {
			t.Fatalf("%s group: broker cpu %v", side.typ, r.BrokerCPUSeconds)
		}
	}
	if want := rep.Result.ConsumedPerSec / bl.Result.ConsumedPerSec; bl.Ratio != want {
		t.Fatalf("ratio %v, want consumed share/consumer group %v", bl.Ratio, want)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"its consumers in share group " + wantShare + " and in consumer group " + wantGroup,
		"ratio share group / consumer group (consumed records/s)", "rounds: share group and consumer group alternated, on the same brokers and topic"} {
		if !strings.Contains(table.String(), want) {
			t.Fatalf("table without %q:\n%s", want, table.String())
		}
	}
	t.Logf("\n%s", table.String())
}

func TestShareGroupValidation(t *testing.T) {
	good := DefaultConfig()
	good.Spawn, good.Consumers, good.ShareGroup = 1, 2, "q"
	if err := good.Validate(); err != nil {
		t.Fatalf("--share-group q --consumers 2: %v", err)
	}
	cmp := good
	cmp.CompareShareGroup, cmp.CompareRounds, cmp.Group = true, 3, "cg"
	if err := cmp.Validate(); err != nil {
		t.Fatalf("--compare-share-group --compare-rounds 3 --group cg: %v", err)
	}
	native := good
	native.Engine = EngineNative // the producers': the consumers stay kgo
	if err := native.Validate(); err != nil || native.consumerEngine() != EngineKgo {
		t.Fatalf("--engine native --share-group: %v, consumer engine %s", err, native.consumerEngine())
	}
	for name, c := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"no consumers":         {func(c *Config) { c.Consumers = 0 }, "--share-group needs --consumers"},
		"native consumers":     {func(c *Config) { c.ConsumerEngine = EngineNative }, "--share-group needs --consumer-engine kgo"},
		"and a group":          {func(c *Config) { c.Group = "g" }, "--share-group and --group are exclusive"},
		"same name":            {func(c *Config) { c.CompareShareGroup, c.Group = true, "q" }, "name the same group"},
		"compare without":      {func(c *Config) { c.ShareGroup, c.CompareShareGroup = "", true }, "--compare-share-group needs --share-group NAME"},
		"compare and binary":   {func(c *Config) { c.CompareShareGroup, c.CompareBinary = true, "/bin/strata" }, "one comparison per run"},
		"compare external":     {func(c *Config) { c.CompareShareGroup, c.Spawn, c.Brokers = true, 0, []string{"127.0.0.1:9092"} }, "--compare-share-group needs --spawn"},
		"compare find-max":     {func(c *Config) { c.CompareShareGroup, c.FindMax = true, true }, "not with --find-max"},
		"compare verify":       {func(c *Config) { c.CompareShareGroup, c.Verify, c.Rate = true, true, 1000 }, "not with --verify or --faults"},
		"rounds without share": {func(c *Config) { c.CompareRounds = 2 }, "--compare-share-group"},
	} {
		cfg := good
		c.mutate(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}

// TestShareGroupChildSetup: the consumer process's setup carries the share
// group and refuses one it cannot run.
func TestShareGroupChildSetup(t *testing.T) {
	s := childSetup{Topic: "t", Partitions: 1, Consumers: 1, ShareGroup: "q", Engine: EngineKgo, Leaders: []int32{0}}
	env, err := s.env(wallClock)
	if err != nil || env.cfg.ShareGroup != "q" || env.cfg.groupType() != GroupTypeShare {
		t.Fatalf("share setup: %v", err)
	}
	s.Engine = EngineNative
	if _, err := s.env(wallClock); err == nil {
		t.Fatal("a share group with the native engine accepted")
	}
}
