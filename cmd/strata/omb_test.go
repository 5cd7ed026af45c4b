package main

// Tests of the OpenMessaging Benchmark files in packaging/omb (docs/omb.md):
// they parse as OMB reads them and carry the figures of the `strata
// loadgen` run each workload file names.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/loadgen"
	"go.yaml.in/yaml/v3"
)

// ombDriver is the YAML of an OMB driver file: the framework's
// DriverConfiguration (name, driverClass) and the Kafka driver's Config.
type ombDriver struct {
	Name              string `yaml:"name"`
	DriverClass       string `yaml:"driverClass"`
	ReplicationFactor int16  `yaml:"replicationFactor"`
	TopicConfig       string `yaml:"topicConfig"`
	CommonConfig      string `yaml:"commonConfig"`
	ProducerConfig    string `yaml:"producerConfig"`
	ConsumerConfig    string `yaml:"consumerConfig"`
}

// ombWorkload is the YAML of an OMB workload file: the framework's Workload
// class, every field (loadgen/omb.go; --workload reads it).
type ombWorkload = loadgen.OMBWorkload

// The Kafka driver's class and the key distributors OMB knows.
const ombKafkaDriverClass = "io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver"

var ombKeyDistributors = []string{loadgen.OMBNoKey, loadgen.OMBKeyRoundRobin, loadgen.OMBRandomNano}

// The keyed targets' flags (docs/performance.md: keyed = `--engine kgo
// --idempotent --keys 100000`, 96 partitions, 1 KiB records, acks=all).
const keyedTargetFlags = "--engine kgo --idempotent --keys 100000"

func decodeStrictYAML(t *testing.T, name string, v any) {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(readRepoFile(t, name)))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var more any
	if err := dec.Decode(&more); err != io.EOF {
		t.Fatalf("%s: a second YAML document (%v)", name, err)
	}
}

// javaProperties reads the key=value lines of a driver's config block as
// java.util.Properties.load does for these files (comments, blank lines,
// '=' or ':' separators; no line continuations here). A key given twice
// fails: the second would silently win.
func javaProperties(t *testing.T, what, text string) map[string]string {
	t.Helper()
	props := map[string]string{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			t.Fatalf("%s: line continuation in %q", what, line)
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			t.Fatalf("%s: %q is not key=value", what, line)
		}
		k, v := strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])
		if _, dup := props[k]; dup {
			t.Fatalf("%s: %s set twice", what, k)
		}
		props[k] = v
	}
	return props
}

// ombHeader is a workload file's `# strata loadgen:` and `# omb driver:`
// comment lines.
func ombHeader(t *testing.T, name string) (loadgenArgs []string, driver string) {
	t.Helper()
	for line := range strings.Lines(readRepoFile(t, name)) {
		if rest, ok := strings.CutPrefix(line, "# strata loadgen:"); ok {
			loadgenArgs = strings.Fields(rest)
		}
		if rest, ok := strings.CutPrefix(line, "# omb driver:"); ok {
			driver = strings.TrimSpace(rest)
		}
	}
	if loadgenArgs == nil || driver == "" {
		t.Fatalf("%s: no `# strata loadgen:` or `# omb driver:` line", name)
	}
	return loadgenArgs, driver
}

// The OMB driver and workload files in packaging/omb parse as OMB reads
// them (every key one of its classes' fields, values of their types, the
// Kafka driver's class and properties blocks), and each workload is the
// `strata loadgen` run its header names, parsed with loadgen's own flags:
// the same topic count, partitions, record size, keyed or not,
// incompressible values, producers, consumers (in a group, as OMB's
// subscriptions are), rate, warm-up and duration, and its driver the same
// replication factor, brokers, acks, idempotence, linger, batch size and
// compression. Every workload keeps the targets' figures: loadgen's default
// 1 KiB records to 96 partitions with acks=all, and the keyed ones the
// keyed targets' flags. docs/omb.md names every file.
func TestOMBFiles(t *testing.T) {
	workloads, err := filepath.Glob(filepath.Join(repoRoot, "packaging/omb/workloads/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(workloads) < 3 {
		t.Fatalf("%d workload files in packaging/omb/workloads, want the keyless and keyed ones", len(workloads))
	}
	doc := readRepoFile(t, "docs/omb.md")
	defaults := loadgen.DefaultConfig()
	drivers := map[string]bool{}
	var keyed int
	for _, path := range workloads {
		name, err := filepath.Rel(repoRoot, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(name), func(t *testing.T) {
			var w ombWorkload
			decodeStrictYAML(t, name, &w)
			args, driverFile := ombHeader(t, name)
			cfg, _, err := parseLoadgenFlags(args, io.Discard)
			if err != nil {
				t.Fatalf("%s: the loadgen line does not parse: %v", name, err)
			}
			driverName := filepath.Join("packaging/omb", driverFile)
			drivers[driverName] = true
			var d ombDriver
			decodeStrictYAML(t, driverName, &d)

			check := func(what string, got, want any) {
				t.Helper()
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: %s %v, loadgen's %v", name, what, got, want)
				}
			}
			// The targets' fixed figures.
			if cfg.Partitions != defaults.Partitions || cfg.RecordBytes != defaults.RecordBytes || cfg.Acks != -1 ||
				cfg.Linger != defaults.Linger || cfg.BatchBytes != defaults.BatchBytes || cfg.Compressible {
				t.Errorf("%s: the loadgen line leaves the targets' 96 partitions, 1 KiB incompressible records, acks=all, linger and batch size: %v", name, args)
			}
			isKeyed := w.KeyDistributor != "NO_KEY"
			if isKeyed {
				keyed++
				if !strings.Contains(strings.Join(args, " "), keyedTargetFlags) {
					t.Errorf("%s: a keyed workload whose loadgen line lacks the keyed targets' %q", name, keyedTargetFlags)
				}
			}

			// The workload against the loadgen run.
			if w.Name == "" {
				t.Errorf("%s: no name", name)
			}
			if !slices.Contains(ombKeyDistributors, w.KeyDistributor) {
				t.Errorf("%s: keyDistributor %q is none of OMB's %v", name, w.KeyDistributor, ombKeyDistributors)
			}
			check("topics", w.Topics, 1)
			check("partitionsPerTopic", w.PartitionsPerTopic, cfg.Partitions)
			check("messageSize", w.MessageSize, cfg.RecordBytes)
			check("keyed", isKeyed, cfg.Keys > 0)
			check("incompressible (useRandomizedPayloads, randomBytesRatio 1)", w.UseRandomizedPayloads && w.RandomBytesRatio == 1, !cfg.Compressible)
			if w.UseRandomizedPayloads && w.RandomizedPayloadPoolSize < 1 {
				t.Errorf("%s: randomized payloads from a pool of %d", name, w.RandomizedPayloadPoolSize)
			}
			if !w.UseRandomizedPayloads && w.PayloadFile == "" {
				t.Errorf("%s: neither randomized payloads nor a payloadFile", name)
			}
			check("producersPerTopic", w.ProducersPerTopic, cfg.Producers)
			check("subscriptionsPerTopic", w.SubscriptionsPerTopic, 1)
			check("consumers (consumerPerSubscription)", w.ConsumerPerSubscription, cfg.Consumers)
			if cfg.Consumers > 0 && cfg.Group == "" {
				t.Errorf("%s: loadgen consumes by direct assignment; OMB's subscriptions are consumer groups (--group)", name)
			}
			if w.ProducerRate <= 0 {
				t.Errorf("%s: producerRate %d: OMB's 0 is a search of its own, not loadgen's closed loop", name, w.ProducerRate)
			}
			check("producerRate", float64(w.ProducerRate), cfg.Rate)
			check("consumerBacklogSizeGB", w.ConsumerBacklogSizeGB, 0)
			check("testDurationMinutes", time.Duration(w.TestDurationMinutes)*time.Minute, cfg.Duration)
			if w.WarmupDurationMinutes == nil {
				t.Errorf("%s: no warmupDurationMinutes (OMB's default is 1 minute: say it)", name)
			} else {
				check("warmupDurationMinutes", time.Duration(*w.WarmupDurationMinutes)*time.Minute, cfg.Warmup)
			}

			// The driver against the loadgen run.
			check("driverClass", d.DriverClass, ombKafkaDriverClass)
			if d.Name == "" {
				t.Errorf("%s: no name", driverName)
			}
			check("replicationFactor", d.ReplicationFactor, cfg.ReplicationFactor)
			if topic := javaProperties(t, driverName+" topicConfig", d.TopicConfig); len(topic) > 0 {
				t.Errorf("%s: topicConfig %v; loadgen creates its topic with the broker's defaults", driverName, topic)
			}
			common := javaProperties(t, driverName+" commonConfig", d.CommonConfig)
			check("bootstrap.servers", common["bootstrap.servers"], strings.Join(cfg.Brokers, ","))
			prod := javaProperties(t, driverName+" producerConfig", d.ProducerConfig)
			acks := map[int16]string{-1: "all", 0: "0", 1: "1"}[cfg.Acks]
			check("acks", prod["acks"], acks)
			check("enable.idempotence", prod["enable.idempotence"], strconv.FormatBool(cfg.Idempotent))
			check("linger.ms", prod["linger.ms"], cfg.Linger.Milliseconds())
			check("batch.size", prod["batch.size"], cfg.BatchBytes)
			check("compression.type", prod["compression.type"], cfg.Compression.String())
			cons := javaProperties(t, driverName+" consumerConfig", d.ConsumerConfig)
			check("auto.offset.reset", cons["auto.offset.reset"], "earliest")

			if !strings.Contains(doc, name) {
				t.Errorf("docs/omb.md does not name %s", name)
			}
		})
	}
	if keyed == 0 {
		t.Error("no keyed workload")
	}
	for d := range drivers {
		if !strings.Contains(doc, d) {
			t.Errorf("docs/omb.md does not name %s", d)
		}
	}
	if len(drivers) < 2 {
		t.Errorf("%d drivers used; want the one-broker and the three-broker one", len(drivers))
	}
}

// ombWorkloadFlags are the loadgen flags a workload file stands for
// (--workload sets them; --group omb too, as OMB's subscription).
var ombWorkloadFlags = map[string]bool{"--partitions": true, "--record-bytes": true, "--producers": true,
	"--consumers": true, "--group": true, "--rate": true, "--warmup": true, "--duration": true}

// Each workload in packaging/omb read through --workload, with its header's
// other flags (brokers, engine, idempotence, the keyed targets' --keys
// 100000), is the same Config as the header's whole command line; without
// --keys a keyed workload has OMB's 10,000 keys and a keyless one none.
func TestLoadgenWorkloadFlag(t *testing.T) {
	workloads, err := filepath.Glob(filepath.Join(repoRoot, "packaging/omb/workloads/*.yaml"))
	if err != nil || len(workloads) == 0 {
		t.Fatalf("%v %v", workloads, err)
	}
	for _, path := range workloads {
		name, _ := filepath.Rel(repoRoot, path)
		t.Run(filepath.Base(name), func(t *testing.T) {
			args, _ := ombHeader(t, name)
			want, _, err := parseLoadgenFlags(args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			rest := []string{"--workload", path}
			var noKeys []string
			for i := 0; i < len(args); i += 2 {
				if args[i] == "--idempotent" {
					rest = append(rest, args[i])
					noKeys = append(noKeys, args[i])
					i--
					continue
				}
				if ombWorkloadFlags[args[i]] {
					continue
				}
				rest = append(rest, args[i], args[i+1])
				if args[i] != "--keys" {
					noKeys = append(noKeys, args[i], args[i+1])
				}
			}
			got, out, err := parseLoadgenFlags(rest, io.Discard)
			if err != nil {
				t.Fatalf("%v: %v", rest, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%v\n gives %+v\n%v\n gives %+v", rest, got, args, want)
			}
			var w ombWorkload
			decodeStrictYAML(t, name, &w)
			if out.ombWorkload != w.Name {
				t.Errorf("workload name %q, want %q", out.ombWorkload, w.Name)
			}
			cfg, _, err := parseLoadgenFlags(append([]string{"--workload", path}, noKeys...), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			wantKeys := int64(0)
			if w.KeyDistributor != loadgen.OMBNoKey {
				wantKeys = loadgen.OMBKeys
			}
			if cfg.Keys != wantKeys || cfg.KeyDist != loadgen.KeyDistUniform {
				t.Errorf("without --keys: %d keys %s, want %d uniform", cfg.Keys, cfg.KeyDist, wantKeys)
			}
			// Explicit flags override the file, wherever they stand.
			cfg, _, err = parseLoadgenFlags([]string{"--rate", "777", "--workload", path, "--partitions", "3", "--duration", "2s",
				"--warmup", "0s", "--keys", "0", "--consumers", "0", "--brokers", "127.0.0.1:1"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Rate != 777 || cfg.Partitions != 3 || cfg.Duration != 2*time.Second || cfg.Warmup != 0 || cfg.Keys != 0 ||
				cfg.Consumers != 0 || cfg.Group != "" || cfg.RecordBytes != w.MessageSize {
				t.Errorf("overrides: %+v", cfg)
			}
		})
	}
}

// What --workload cannot honour is refused, naming the field; a
// payloadFile gives the record size of the file's size.
func TestLoadgenWorkloadRefused(t *testing.T) {
	dir := t.TempDir()
	base := `name: w
topics: 1
partitionsPerTopic: 4
keyDistributor: "NO_KEY"
messageSize: 100
useRandomizedPayloads: true
randomBytesRatio: 1.0
randomizedPayloadPoolSize: 10
subscriptionsPerTopic: 1
consumerPerSubscription: 2
producersPerTopic: 1
producerRate: 1000
consumerBacklogSizeGB: 0
testDurationMinutes: 1
`
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	parse := func(p string, extra ...string) (loadgen.Config, error) {
		cfg, _, err := parseLoadgenFlags(append([]string{"--workload", p, "--brokers", "127.0.0.1:1"}, extra...), io.Discard)
		return cfg, err
	}
	cfg, err := parse(write("ok.yaml", base))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Partitions != 4 || cfg.RecordBytes != 100 || cfg.Consumers != 2 || cfg.Group != loadgen.OMBGroup || cfg.Rate != 1000 ||
		cfg.Duration != time.Minute || cfg.Warmup != time.Minute || cfg.Keys != 0 || cfg.Compressible {
		t.Fatalf("%+v", cfg)
	}
	for _, c := range []struct{ from, to, want string }{
		{"topics: 1", "topics: 2", "topics 2"},
		{"subscriptionsPerTopic: 1", "subscriptionsPerTopic: 2", "subscriptionsPerTopic 2"},
		{"producerRate: 1000", "producerRate: 0", "producerRate 0"},
		{"consumerBacklogSizeGB: 0", "consumerBacklogSizeGB: 5", "consumerBacklogSizeGB 5"},
		{`"NO_KEY"`, `"ZIPF"`, `keyDistributor "ZIPF"`},
		{"randomBytesRatio: 1.0", "randomBytesRatio: 0.5", "randomBytesRatio 0.5"},
		{"topics: 1", "topic: 1", "topic"},
		{"useRandomizedPayloads: true", "useRandomizedPayloads: false\npayloadFile: missing.data", "payloadFile"},
	} {
		_, err := parse(write("bad.yaml", strings.Replace(base, c.from, c.to, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.to, err, c.want)
		}
	}
	// producerRate 0 with an explicit --rate; a payloadFile next to the
	// workload file.
	if cfg, err := parse(write("r0.yaml", strings.Replace(base, "producerRate: 1000", "producerRate: 0", 1)), "--rate", "5"); err != nil || cfg.Rate != 5 {
		t.Errorf("--rate over producerRate 0: %v %v", cfg.Rate, err)
	}
	write("p.data", strings.Repeat("x", 333))
	cfg, err = parse(write("pf.yaml", strings.Replace(base, "useRandomizedPayloads: true", "useRandomizedPayloads: false\npayloadFile: p.data", 1)))
	if err != nil || cfg.RecordBytes != 333 {
		t.Errorf("payloadFile: %d bytes, %v", cfg.RecordBytes, err)
	}
}

// The built binary runs an OMB workload file (keyed, one consumer) for 1.5
// s against a spawned broker with --omb-result: the OMB JSON carries the
// workload's name and shape and the --json report's figures under OMB's
// names, and the run had OMB's 10,000 keys and consumed through a group.
func TestLoadgenOMBResultCommand(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "strata")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	wl := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(wl, []byte(`name: small keyed
topics: 1
partitionsPerTopic: 4
keyDistributor: "KEY_ROUND_ROBIN"
messageSize: 512
useRandomizedPayloads: true
randomBytesRatio: 1.0
randomizedPayloadPoolSize: 100
subscriptionsPerTopic: 1
consumerPerSubscription: 1
producersPerTopic: 1
producerRate: 1000
consumerBacklogSizeGB: 0
warmupDurationMinutes: 0
testDurationMinutes: 5
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ombPath, jsonPath := filepath.Join(dir, "omb.json"), filepath.Join(dir, "lg.json")
	cmd := exec.Command(bin, "loadgen", "--spawn", "1", "--spawn-segment-bytes", "4194304", "--workload", wl,
		"--duration", "1500ms", "--omb-result", ombPath, "--json", jsonPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("loadgen: %v\n%s", err, out)
	}
	var lg struct {
		Config map[string]any   `json:"config"`
		Result loadgen.Result   `json:"result"`
		Time   []loadgen.Sample `json:"timeline"`
	}
	raw, err := os.ReadFile(jsonPath)
	if err == nil {
		err = json.Unmarshal(raw, &lg)
	}
	if err != nil {
		t.Fatal(err)
	}
	if lg.Config["keys"] != 10000.0 || lg.Config["group"] != "omb" || lg.Config["partitions"] != 4.0 ||
		lg.Config["record_bytes"] != 512.0 || lg.Config["rate"] != 1000.0 || lg.Result.RecordsAcked != 1500 ||
		lg.Result.RecordsConsumed != 1500 {
		t.Fatalf("config %v, result %+v", lg.Config, lg.Result)
	}
	var o loadgen.OMBResult
	raw, err = os.ReadFile(ombPath)
	if err == nil {
		err = json.Unmarshal(raw, &o)
	}
	if err != nil {
		t.Fatal(err)
	}
	if o.Workload != "small keyed" || o.Driver == "" || o.MessageSize != 512 || o.Topics != 1 || o.Partitions != 4 ||
		o.ProducersPerTopic != 1 || o.ConsumersPerTopic != 1 {
		t.Errorf("header %+v", o)
	}
	r := lg.Result
	if o.AggregatedPublishLatency50pct != r.ProduceP50Ms || o.AggregatedPublishLatency99pct != r.ProduceP99Ms ||
		o.AggregatedPublishLatencyMax != r.ProduceMaxMs || o.AggregatedEndToEndLatency99pct != r.E2EP99Ms ||
		len(o.PublishRate) != len(lg.Time) || len(lg.Time) == 0 || o.PublishRate[0] != lg.Time[0].RecordsPerSec {
		t.Errorf("omb %+v against report %+v", o, r)
	}
}
