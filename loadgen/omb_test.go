package loadgen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The fields of OMB's TestResult, as its result JSON names them.
var ombResultFields = strings.Fields(`workload driver messageSize topics partitions producersPerTopic consumersPerTopic
publishRate publishErrorRate consumeRate backlog
publishLatencyAvg publishLatency50pct publishLatency75pct publishLatency95pct publishLatency99pct publishLatency999pct publishLatency9999pct publishLatency99999pct publishLatencyMax
publishDelayLatencyAvg publishDelayLatency50pct publishDelayLatency75pct publishDelayLatency95pct publishDelayLatency99pct publishDelayLatency999pct publishDelayLatency9999pct publishDelayLatency99999pct publishDelayLatencyMax
aggregatedPublishLatencyAvg aggregatedPublishLatency50pct aggregatedPublishLatency75pct aggregatedPublishLatency95pct aggregatedPublishLatency99pct aggregatedPublishLatency999pct aggregatedPublishLatency9999pct aggregatedPublishLatency99999pct aggregatedPublishLatencyMax
aggregatedPublishDelayLatencyAvg aggregatedPublishDelayLatency50pct aggregatedPublishDelayLatency75pct aggregatedPublishDelayLatency95pct aggregatedPublishDelayLatency99pct aggregatedPublishDelayLatency999pct aggregatedPublishDelayLatency9999pct aggregatedPublishDelayLatency99999pct aggregatedPublishDelayLatencyMax
aggregatedPublishLatencyQuantiles aggregatedPublishDelayLatencyQuantiles
endToEndLatencyAvg endToEndLatency50pct endToEndLatency75pct endToEndLatency95pct endToEndLatency99pct endToEndLatency999pct endToEndLatency9999pct endToEndLatency99999pct endToEndLatencyMax
aggregatedEndToEndLatencyQuantiles
aggregatedEndToEndLatencyAvg aggregatedEndToEndLatency50pct aggregatedEndToEndLatency75pct aggregatedEndToEndLatency95pct aggregatedEndToEndLatency99pct aggregatedEndToEndLatency999pct aggregatedEndToEndLatency9999pct aggregatedEndToEndLatency99999pct aggregatedEndToEndLatencyMax`)

// A short run against a spawned broker written as OMB's result JSON: every
// key one of OMB's TestResult fields and every field there, the per-second
// rates and latencies the report's timeline, the aggregated latencies its
// result, the percentile maps its distributions, the backlog what the
// timeline produced but had not consumed.
func TestOMBResultFile(t *testing.T) {
	cfg := smallRun("kgo")
	cfg.Duration = 1500 * time.Millisecond
	rep, err := Run(testCtx(t, time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, rep, 3000)
	path := filepath.Join(t.TempDir(), "omb.json")
	if err := rep.WriteOMBResultFile(path, "w1", "Strata"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		if !slices.Contains(ombResultFields, k) {
			t.Errorf("key %q is not OMB's", k)
		}
	}
	for _, f := range ombResultFields {
		if _, ok := keys[f]; !ok {
			t.Errorf("no %q", f)
		} else if string(keys[f]) == "null" {
			t.Errorf("%q is null (OMB writes [] or {})", f)
		}
	}
	var o OMBResult
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	r := rep.Result
	if o.Workload != "w1" || o.Driver != "Strata" || o.MessageSize != 1024 || o.Topics != 1 || o.Partitions != 8 ||
		o.ProducersPerTopic != 1 || o.ConsumersPerTopic != 1 {
		t.Errorf("header %+v", o)
	}
	n := len(rep.Timeline)
	if n == 0 || len(o.PublishRate) != n || len(o.ConsumeRate) != n || len(o.PublishErrorRate) != n || len(o.Backlog) != n ||
		len(o.PublishLatency50pct) != n || len(o.PublishLatency99pct) != n || len(o.PublishLatencyMax) != n ||
		len(o.EndToEndLatency99pct) != n {
		t.Fatalf("%d timeline samples; lists %d %d %d %d", n, len(o.PublishRate), len(o.ConsumeRate), len(o.Backlog), len(o.EndToEndLatency99pct))
	}
	var produced, consumed, prev float64
	for i, s := range rep.Timeline {
		produced += s.RecordsPerSec * (s.TS - prev)
		consumed += s.ConsumedPerSec * (s.TS - prev)
		prev = s.TS
		if o.PublishRate[i] != s.RecordsPerSec || o.ConsumeRate[i] != s.ConsumedPerSec || o.PublishErrorRate[i] != 0 ||
			o.PublishLatency50pct[i] != s.ProduceP50Ms || o.PublishLatency99pct[i] != s.ProduceP99Ms ||
			o.PublishLatencyMax[i] != s.ProduceMaxMs || o.EndToEndLatency99pct[i] != s.E2EP99Ms {
			t.Errorf("second %d: %+v against %+v", i, s, o)
		}
	}
	if produced < 2900 || produced > 3100 {
		t.Errorf("publishRate over the timeline adds up to %.0f records, acked %d", produced, r.RecordsAcked)
	}
	if got := o.Backlog[n-1]; got < 0 || float64(got) > produced-consumed+1 {
		t.Errorf("final backlog %d, timeline %.0f produced %.0f consumed", got, produced, consumed)
	}
	if o.AggregatedPublishLatencyAvg != r.ProduceMeanMs || o.AggregatedPublishLatency50pct != r.ProduceP50Ms ||
		o.AggregatedPublishLatency99pct != r.ProduceP99Ms || o.AggregatedPublishLatency999pct != r.ProduceP999Ms ||
		o.AggregatedPublishLatencyMax != r.ProduceMaxMs || r.ProduceP50Ms <= 0 {
		t.Errorf("publish latency %+v against %+v", o, r)
	}
	if o.AggregatedEndToEndLatencyAvg != r.E2EMeanMs || o.AggregatedEndToEndLatency50pct != r.E2EP50Ms ||
		o.AggregatedEndToEndLatency99pct != r.E2EP99Ms || o.AggregatedEndToEndLatency999pct != r.E2EP999Ms ||
		o.AggregatedEndToEndLatencyMax != r.E2EMaxMs || r.E2EP50Ms <= 0 {
		t.Errorf("end-to-end latency %+v against %+v", o, r)
	}
	// 75 and 95 (and 99.99, 99.999): between their neighbours.
	for _, c := range []struct{ lo, v, hi float64 }{
		{o.AggregatedPublishLatency50pct, o.AggregatedPublishLatency75pct, o.AggregatedPublishLatency99pct},
		{o.AggregatedPublishLatency75pct, o.AggregatedPublishLatency95pct, o.AggregatedPublishLatency99pct},
		{o.AggregatedPublishLatency999pct, o.AggregatedPublishLatency9999pct, o.AggregatedPublishLatencyMax},
		{o.AggregatedPublishLatency9999pct, o.AggregatedPublishLatency99999pct, o.AggregatedPublishLatencyMax},
		{o.AggregatedEndToEndLatency50pct, o.AggregatedEndToEndLatency75pct, o.AggregatedEndToEndLatency99pct},
		{o.AggregatedEndToEndLatency75pct, o.AggregatedEndToEndLatency95pct, o.AggregatedEndToEndLatency99pct},
	} {
		if c.v < c.lo || c.v > c.hi {
			t.Errorf("%v not within [%v, %v]", c.v, c.lo, c.hi)
		}
	}
	for _, d := range []struct {
		m    map[string]float64
		dist []PercentilePoint
	}{{o.AggregatedPublishLatencyQuantiles, rep.Distribution.Produce}, {o.AggregatedEndToEndLatencyQuantiles, rep.Distribution.E2E}} {
		if len(d.dist) == 0 || len(d.m) != len(d.dist) || d.m["0.0"] != d.dist[0].Ms || d.m["100.0"] != d.dist[len(d.dist)-1].Ms {
			t.Errorf("quantiles %v against %v", d.m, d.dist)
		}
	}
}
