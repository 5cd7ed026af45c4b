package loadgen

// OpenMessaging Benchmark (OMB) interop (docs/omb.md): an OMB workload file
// as a Config (--workload) and a run's Report as OMB's result JSON
// (--omb-result).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// OMBWorkload is the YAML of an OMB workload file: the fields of OMB's
// Workload class, every one (a key not in it fails the strict decode;
// OMB itself would ignore it silently).
type OMBWorkload struct {
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
	WarmupDurationMinutes     *int    `yaml:"warmupDurationMinutes"` // nil: OMB's default, 1

	// Dir is the directory of the file it was read from (a relative
	// payloadFile is looked up in the working directory, as OMB does, and
	// then there).
	Dir string `yaml:"-"`
}

// OMB's key distributors, and the key space its keyed ones cycle through
// or draw from (fixed in OMB).
const (
	OMBNoKey         = "NO_KEY"
	OMBKeyRoundRobin = "KEY_ROUND_ROBIN"
	OMBRandomNano    = "RANDOM_NANO"
	OMBKeys          = 10000
)

// OMBGroup is the consumer group --workload consumes through when the
// workload has a subscription (OMB's subscriptions are consumer groups).
const OMBGroup = "omb"

// DecodeOMBWorkload decodes one OMB workload document strictly.
func DecodeOMBWorkload(r io.Reader) (OMBWorkload, error) {
	var w OMBWorkload
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		return w, fmt.Errorf("not an OMB workload (fields of OMB's Workload only): %w", err)
	}
	var more any
	if err := dec.Decode(&more); err != io.EOF {
		return w, fmt.Errorf("a second YAML document (%v)", err)
	}
	return w, nil
}

// ReadOMBWorkload reads an OMB workload file.
func ReadOMBWorkload(path string) (OMBWorkload, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return OMBWorkload{}, err
	}
	w, err := DecodeOMBWorkload(bytes.NewReader(b))
	if err != nil {
		return w, fmt.Errorf("%s: %w", path, err)
	}
	w.Dir = filepath.Dir(path)
	return w, nil
}

// Apply maps the workload onto c, leaving alone what set names (the
// command-line flags given explicitly, which override the file: "rate",
// "keys", ...). Fields loadgen cannot honour are errors.
func (w OMBWorkload) Apply(c *Config, set map[string]bool) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("workload %q: "+format, append([]any{w.Name}, a...)...)
	}
	if w.Topics != 1 {
		return fail("topics %d: loadgen produces to one topic", w.Topics)
	}
	if !set["partitions"] {
		if w.PartitionsPerTopic < 1 {
			return fail("partitionsPerTopic %d", w.PartitionsPerTopic)
		}
		c.Partitions = int32(w.PartitionsPerTopic)
	}
	if !set["record-bytes"] {
		switch {
		case w.UseRandomizedPayloads:
			c.RecordBytes = w.MessageSize
		case w.PayloadFile != "":
			n, err := w.payloadFileSize()
			if err != nil {
				return fail("payloadFile: %v", err)
			}
			c.RecordBytes = int(n)
		default:
			return fail("neither useRandomizedPayloads nor a payloadFile")
		}
	}
	if !set["compressible"] {
		if w.UseRandomizedPayloads && w.RandomBytesRatio != 1 {
			return fail("randomBytesRatio %v: loadgen's values are all random bytes (1.0) or text-like (give --compressible or --compressible=false)", w.RandomBytesRatio)
		}
		c.Compressible = false
	}
	if !set["keys"] {
		switch w.KeyDistributor {
		case "", OMBNoKey:
			c.Keys = 0
		case OMBKeyRoundRobin, OMBRandomNano:
			c.Keys = OMBKeys
			if !set["key-dist"] {
				c.KeyDist = KeyDistUniform
			}
		default:
			return fail("keyDistributor %q: want %s, %s or %s", w.KeyDistributor, OMBNoKey, OMBKeyRoundRobin, OMBRandomNano)
		}
	}
	if !set["producers"] {
		if w.ProducersPerTopic < 1 {
			return fail("producersPerTopic %d", w.ProducersPerTopic)
		}
		c.Producers = w.ProducersPerTopic
	}
	if !set["consumers"] {
		switch w.SubscriptionsPerTopic {
		case 0:
			c.Consumers = 0
		case 1:
			c.Consumers = w.ConsumerPerSubscription
		default:
			return fail("subscriptionsPerTopic %d: loadgen consumes once (one group)", w.SubscriptionsPerTopic)
		}
	}
	if c.Consumers > 0 && !set["group"] && !set["share-group"] {
		c.Group = OMBGroup
	}
	if !set["rate"] && !set["find-max"] {
		if w.ProducerRate <= 0 {
			return fail("producerRate %d: OMB's 0 is a rate search of its own; give --rate or --find-max", w.ProducerRate)
		}
		c.Rate = float64(w.ProducerRate)
	}
	if w.ConsumerBacklogSizeGB != 0 {
		return fail("consumerBacklogSizeGB %d: loadgen does not build a backlog (--consumer-delay is the nearest)", w.ConsumerBacklogSizeGB)
	}
	if !set["duration"] {
		if w.TestDurationMinutes < 1 {
			return fail("testDurationMinutes %d", w.TestDurationMinutes)
		}
		c.Duration = time.Duration(w.TestDurationMinutes) * time.Minute
	}
	if !set["warmup"] {
		c.Warmup = time.Minute
		if w.WarmupDurationMinutes != nil {
			c.Warmup = time.Duration(*w.WarmupDurationMinutes) * time.Minute
		}
	}
	return nil
}

func (w OMBWorkload) payloadFileSize() (int64, error) {
	st, err := os.Stat(w.PayloadFile)
	if err != nil && !filepath.IsAbs(w.PayloadFile) && w.Dir != "" {
		st, err = os.Stat(filepath.Join(w.Dir, w.PayloadFile))
	}
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// OMBResult is OMB's result JSON (its TestResult class): per-window lists
// (one entry per second of loadgen's timeline) and aggregated figures.
// Latencies are milliseconds, publish delays microseconds, as OMB's.
// Lists loadgen does not measure per second are empty, the publish delay
// (loadgen counts from the scheduled send time, so a delay is inside its
// latencies) zero; backlog is produced minus consumed at each second.
type OMBResult struct {
	Workload          string `json:"workload"`
	Driver            string `json:"driver"`
	MessageSize       int64  `json:"messageSize"`
	Topics            int    `json:"topics"`
	Partitions        int    `json:"partitions"`
	ProducersPerTopic int    `json:"producersPerTopic"`
	ConsumersPerTopic int    `json:"consumersPerTopic"`

	PublishRate      []float64 `json:"publishRate"`
	PublishErrorRate []float64 `json:"publishErrorRate"`
	ConsumeRate      []float64 `json:"consumeRate"`
	Backlog          []int64   `json:"backlog"`

	PublishLatencyAvg      []float64 `json:"publishLatencyAvg"`
	PublishLatency50pct    []float64 `json:"publishLatency50pct"`
	PublishLatency75pct    []float64 `json:"publishLatency75pct"`
	PublishLatency95pct    []float64 `json:"publishLatency95pct"`
	PublishLatency99pct    []float64 `json:"publishLatency99pct"`
	PublishLatency999pct   []float64 `json:"publishLatency999pct"`
	PublishLatency9999pct  []float64 `json:"publishLatency9999pct"`
	PublishLatency99999pct []float64 `json:"publishLatency99999pct"`
	PublishLatencyMax      []float64 `json:"publishLatencyMax"`

	PublishDelayLatencyAvg      []float64 `json:"publishDelayLatencyAvg"`
	PublishDelayLatency50pct    []int64   `json:"publishDelayLatency50pct"`
	PublishDelayLatency75pct    []int64   `json:"publishDelayLatency75pct"`
	PublishDelayLatency95pct    []int64   `json:"publishDelayLatency95pct"`
	PublishDelayLatency99pct    []int64   `json:"publishDelayLatency99pct"`
	PublishDelayLatency999pct   []int64   `json:"publishDelayLatency999pct"`
	PublishDelayLatency9999pct  []int64   `json:"publishDelayLatency9999pct"`
	PublishDelayLatency99999pct []int64   `json:"publishDelayLatency99999pct"`
	PublishDelayLatencyMax      []int64   `json:"publishDelayLatencyMax"`

	AggregatedPublishLatencyAvg      float64 `json:"aggregatedPublishLatencyAvg"`
	AggregatedPublishLatency50pct    float64 `json:"aggregatedPublishLatency50pct"`
	AggregatedPublishLatency75pct    float64 `json:"aggregatedPublishLatency75pct"`
	AggregatedPublishLatency95pct    float64 `json:"aggregatedPublishLatency95pct"`
	AggregatedPublishLatency99pct    float64 `json:"aggregatedPublishLatency99pct"`
	AggregatedPublishLatency999pct   float64 `json:"aggregatedPublishLatency999pct"`
	AggregatedPublishLatency9999pct  float64 `json:"aggregatedPublishLatency9999pct"`
	AggregatedPublishLatency99999pct float64 `json:"aggregatedPublishLatency99999pct"`
	AggregatedPublishLatencyMax      float64 `json:"aggregatedPublishLatencyMax"`

	AggregatedPublishDelayLatencyAvg      float64 `json:"aggregatedPublishDelayLatencyAvg"`
	AggregatedPublishDelayLatency50pct    int64   `json:"aggregatedPublishDelayLatency50pct"`
	AggregatedPublishDelayLatency75pct    int64   `json:"aggregatedPublishDelayLatency75pct"`
	AggregatedPublishDelayLatency95pct    int64   `json:"aggregatedPublishDelayLatency95pct"`
	AggregatedPublishDelayLatency99pct    int64   `json:"aggregatedPublishDelayLatency99pct"`
	AggregatedPublishDelayLatency999pct   int64   `json:"aggregatedPublishDelayLatency999pct"`
	AggregatedPublishDelayLatency9999pct  int64   `json:"aggregatedPublishDelayLatency9999pct"`
	AggregatedPublishDelayLatency99999pct int64   `json:"aggregatedPublishDelayLatency99999pct"`
	AggregatedPublishDelayLatencyMax      int64   `json:"aggregatedPublishDelayLatencyMax"`

	// Keys are percentiles (0-100) as Java writes a Double ("50.0").
	AggregatedPublishLatencyQuantiles      map[string]float64 `json:"aggregatedPublishLatencyQuantiles"`
	AggregatedPublishDelayLatencyQuantiles map[string]int64   `json:"aggregatedPublishDelayLatencyQuantiles"`

	EndToEndLatencyAvg      []float64 `json:"endToEndLatencyAvg"`
	EndToEndLatency50pct    []float64 `json:"endToEndLatency50pct"`
	EndToEndLatency75pct    []float64 `json:"endToEndLatency75pct"`
	EndToEndLatency95pct    []float64 `json:"endToEndLatency95pct"`
	EndToEndLatency99pct    []float64 `json:"endToEndLatency99pct"`
	EndToEndLatency999pct   []float64 `json:"endToEndLatency999pct"`
	EndToEndLatency9999pct  []float64 `json:"endToEndLatency9999pct"`
	EndToEndLatency99999pct []float64 `json:"endToEndLatency99999pct"`
	EndToEndLatencyMax      []float64 `json:"endToEndLatencyMax"`

	AggregatedEndToEndLatencyQuantiles map[string]float64 `json:"aggregatedEndToEndLatencyQuantiles"`

	AggregatedEndToEndLatencyAvg      float64 `json:"aggregatedEndToEndLatencyAvg"`
	AggregatedEndToEndLatency50pct    float64 `json:"aggregatedEndToEndLatency50pct"`
	AggregatedEndToEndLatency75pct    float64 `json:"aggregatedEndToEndLatency75pct"`
	AggregatedEndToEndLatency95pct    float64 `json:"aggregatedEndToEndLatency95pct"`
	AggregatedEndToEndLatency99pct    float64 `json:"aggregatedEndToEndLatency99pct"`
	AggregatedEndToEndLatency999pct   float64 `json:"aggregatedEndToEndLatency999pct"`
	AggregatedEndToEndLatency9999pct  float64 `json:"aggregatedEndToEndLatency9999pct"`
	AggregatedEndToEndLatency99999pct float64 `json:"aggregatedEndToEndLatency99999pct"`
	AggregatedEndToEndLatencyMax      float64 `json:"aggregatedEndToEndLatencyMax"`
}

// javaDouble formats a percentile as Java's Double.toString does for
// 0..100 ("50.0", "99.9").
func javaDouble(p float64) string {
	s := strconv.FormatFloat(p, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// atOrAbove is the distribution's latency at the first point at or above
// percentile p (the distribution's points are not at 75, 95, 99.99 and
// 99.999 exactly: the next one up, an upper bound).
func atOrAbove(d []PercentilePoint, p float64) float64 {
	for _, pt := range d {
		if pt.Percentile >= p-1e-9 {
			return pt.Ms
		}
	}
	if len(d) > 0 {
		return d[len(d)-1].Ms
	}
	return 0
}

func quantiles(d []PercentilePoint) map[string]float64 {
	m := make(map[string]float64, len(d))
	for _, pt := range d {
		m[javaDouble(pt.Percentile)] = pt.Ms
	}
	return m
}

// OMBResult is the report as OMB's result JSON; workload and driver are
// its first two fields (the workload's name and the driver's).
func (r *Report) OMBResult(workload, driver string) OMBResult {
	res := &r.Result
	o := OMBResult{
		Workload: workload, Driver: driver,
		MessageSize: int64(r.Config.RecordBytes), Topics: 1, Partitions: int(r.Config.Partitions),
		ProducersPerTopic: r.Config.Producers, ConsumersPerTopic: r.Config.Consumers,

		AggregatedPublishLatencyAvg:      res.ProduceMeanMs,
		AggregatedPublishLatency50pct:    res.ProduceP50Ms,
		AggregatedPublishLatency75pct:    atOrAbove(r.Distribution.Produce, 75),
		AggregatedPublishLatency95pct:    atOrAbove(r.Distribution.Produce, 95),
		AggregatedPublishLatency99pct:    res.ProduceP99Ms,
		AggregatedPublishLatency999pct:   res.ProduceP999Ms,
		AggregatedPublishLatency9999pct:  atOrAbove(r.Distribution.Produce, 99.99),
		AggregatedPublishLatency99999pct: atOrAbove(r.Distribution.Produce, 99.999),
		AggregatedPublishLatencyMax:      res.ProduceMaxMs,

		AggregatedPublishLatencyQuantiles:      quantiles(r.Distribution.Produce),
		AggregatedPublishDelayLatencyQuantiles: map[string]int64{},
		AggregatedEndToEndLatencyQuantiles:     quantiles(r.Distribution.E2E),
	}
	if len(r.Distribution.E2E) > 0 {
		o.AggregatedEndToEndLatencyAvg = res.E2EMeanMs
		o.AggregatedEndToEndLatency50pct = res.E2EP50Ms
		o.AggregatedEndToEndLatency75pct = atOrAbove(r.Distribution.E2E, 75)
		o.AggregatedEndToEndLatency95pct = atOrAbove(r.Distribution.E2E, 95)
		o.AggregatedEndToEndLatency99pct = res.E2EP99Ms
		o.AggregatedEndToEndLatency999pct = res.E2EP999Ms
		o.AggregatedEndToEndLatency9999pct = atOrAbove(r.Distribution.E2E, 99.99)
		o.AggregatedEndToEndLatency99999pct = atOrAbove(r.Distribution.E2E, 99.999)
		o.AggregatedEndToEndLatencyMax = res.E2EMaxMs
	}
	var produced, consumed, prevTS float64
	for _, s := range r.Timeline {
		dt := s.TS - prevTS
		prevTS = s.TS
		produced += s.RecordsPerSec * dt
		consumed += s.ConsumedPerSec * dt
		o.PublishRate = append(o.PublishRate, s.RecordsPerSec)
		errRate := 0.0
		if dt > 0 {
			errRate = float64(s.Errors) / dt
		}
		o.PublishErrorRate = append(o.PublishErrorRate, errRate)
		o.ConsumeRate = append(o.ConsumeRate, s.ConsumedPerSec)
		o.Backlog = append(o.Backlog, int64(math.Max(0, math.Round(produced-consumed))))
		o.PublishLatency50pct = append(o.PublishLatency50pct, s.ProduceP50Ms)
		o.PublishLatency99pct = append(o.PublishLatency99pct, s.ProduceP99Ms)
		o.PublishLatencyMax = append(o.PublishLatencyMax, s.ProduceMaxMs)
		if r.Config.Consumers > 0 {
			o.EndToEndLatency99pct = append(o.EndToEndLatency99pct, s.E2EP99Ms)
		}
	}
	// Lists as OMB writes them: [] rather than null.
	for _, l := range []*[]float64{&o.PublishRate, &o.PublishErrorRate, &o.ConsumeRate,
		&o.PublishLatencyAvg, &o.PublishLatency50pct, &o.PublishLatency75pct, &o.PublishLatency95pct,
		&o.PublishLatency99pct, &o.PublishLatency999pct, &o.PublishLatency9999pct, &o.PublishLatency99999pct,
		&o.PublishLatencyMax, &o.PublishDelayLatencyAvg,
		&o.EndToEndLatencyAvg, &o.EndToEndLatency50pct, &o.EndToEndLatency75pct, &o.EndToEndLatency95pct,
		&o.EndToEndLatency99pct, &o.EndToEndLatency999pct, &o.EndToEndLatency9999pct,
		&o.EndToEndLatency99999pct, &o.EndToEndLatencyMax} {
		if *l == nil {
			*l = []float64{}
		}
	}
	for _, l := range []*[]int64{&o.Backlog, &o.PublishDelayLatency50pct, &o.PublishDelayLatency75pct,
		&o.PublishDelayLatency95pct, &o.PublishDelayLatency99pct, &o.PublishDelayLatency999pct,
		&o.PublishDelayLatency9999pct, &o.PublishDelayLatency99999pct, &o.PublishDelayLatencyMax} {
		if *l == nil {
			*l = []int64{}
		}
	}
	return o
}

// WriteOMBResultFile writes the report as OMB's result JSON.
func (r *Report) WriteOMBResultFile(path, workload, driver string) error {
	b, err := json.MarshalIndent(r.OMBResult(workload, driver), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
