package main

// Tests of the OpenMessaging Benchmark files in packaging/omb (docs/omb.md):
// they parse as OMB reads them and carry the figures of the `strata
// loadgen` run each workload file names.

import (
	"fmt"
	"io"
	"path/filepath"
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
// class, every field (a key not in it fails the strict decode; OMB itself
// would ignore it silently).
type ombWorkload struct {
	Name                      string  `yaml:"name"`
	Topics                    int     `yaml:"topics"`
	PartitionsPerTopic        int     `yaml:"partitionsPerTopic"`
	KeyDistributor            string  `yaml:"keyDistributor"`
	MessageSize               int     `yaml:"messageSize"`
	UseRandomizedPayloads     bool    `yaml:"useRandomizedPayloads"`
	RandomBytesRatio          float64 `yaml:"randomBytesRatio"`
	RandomizedPayloadPoolSize int     `yaml:"randomizedPayloadPoolSize"`
	PayloadFile               string  `yaml:"payloadFile"`
	SubscriptionsPerTopic     int     `yaml:"subscriptionsPerTopic"`
	ProducersPerTopic         int     `yaml:"producersPerTopic"`
	ConsumerPerSubscription   int     `yaml:"consumerPerSubscription"`
	ProducerRate              int     `yaml:"producerRate"`
	ConsumerBacklogSizeGB     int64   `yaml:"consumerBacklogSizeGB"`
	BacklogDrainRatio         float64 `yaml:"backlogDrainRatio"`
	TestDurationMinutes       int     `yaml:"testDurationMinutes"`
	WarmupDurationMinutes     *int    `yaml:"warmupDurationMinutes"` // OMB's default is 1: required here
}

// The Kafka driver's class and the key distributors OMB knows.
const ombKafkaDriverClass = "io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver"

var ombKeyDistributors = []string{"NO_KEY", "KEY_ROUND_ROBIN", "RANDOM_NANO"}

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
