package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Rounds is --compare-rounds: the --compare-blackhole (or --compare-binary,
// or --compare-plaintext) comparison repeated, each round with freshly spawned brokers, the side
// that runs first alternating (strata first in odd rounds, the baseline
// first in even ones). On a shared virtual machine one workload's rate moves by 10-20 %
// between minutes with nothing else running (docs/performance.md, session
// 17), more than the changes a ratio is meant to judge; the median of
// several interleaved pairs, with its spread, is the figure to compare.
type Rounds struct {
	// Mode is the baseline's: BaselineBlackhole, BaselineBinary or
	// BaselinePlaintext.
	Mode        string  `json:"mode"`
	Rounds      []Round `json:"rounds"`
	MedianRatio float64 `json:"median_ratio"`
	MinRatio    float64 `json:"min_ratio"`
	MaxRatio    float64 `json:"max_ratio"`
	// Report is the round the report's own figures come from: the one
	// whose ratio is the median (the lower middle one for an even count).
	Report int `json:"report_round"`
}

// MaxCompareRounds bounds --compare-rounds.
const MaxCompareRounds = 20

// Round is one strata/blackhole pair of --compare-rounds.
type Round struct {
	First                 string  `json:"first"` // "strata" ("secured" against plaintext), or "blackhole" / "baseline" (another build) / "plaintext"
	RecordsPerSec         float64 `json:"records_per_sec"`
	BaselineRecordsPerSec float64 `json:"baseline_records_per_sec"`
	Ratio                 float64 `json:"ratio"`
	ProduceP99Ms          float64 `json:"produce_p99_ms"`
	BaselineProduceP99Ms  float64 `json:"baseline_produce_p99_ms"`
	BrokerCPUUsPerRecord  float64 `json:"broker_cpu_us_per_record"`
	BaselineBrokerCPUUs   float64 `json:"baseline_broker_cpu_us_per_record"`
	ClientCPUUsPerRecord  float64 `json:"client_cpu_us_per_record"`
	// BaselineClientCPUUs is the client's CPU per record against the
	// blackhole: the same requests cost the client more next to a broker
	// that stores (docs/performance.md, session 17).
	BaselineClientCPUUs float64 `json:"baseline_client_cpu_us_per_record"`
	// E2EP99Ms and BaselineE2EP99Ms are the end-to-end p99s of the sides
	// that consumed (0: none); with --compare-share-group the rec/s are
	// consumed records/s too.
	E2EP99Ms         float64 `json:"e2e_p99_ms,omitempty"`
	BaselineE2EP99Ms float64 `json:"baseline_e2e_p99_ms,omitempty"`
	// RecordsRedelivered is the share group's (--compare-share-group).
	RecordsRedelivered *int64 `json:"records_redelivered,omitempty"`
	// DeviceBytesPerRecordByte is the strata run's (0 without a device).
	DeviceBytesPerRecordByte float64 `json:"device_bytes_per_record_byte,omitempty"`
}

// RunRounds is Run with cfg.CompareRounds > 1: that many rounds of the run
// and its blackhole baseline, alternating which goes first. The returned
// report is the median round's (with its Baseline and, if asked, the
// device ceiling measured after the last round) plus Rounds.
func RunRounds(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.CompareRounds <= 1 || cfg.CompareShareGroup {
		return Run(ctx, cfg) // --compare-share-group's rounds run on one set of brokers (sharegroup.go)
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	one := cfg
	one.CompareRounds, one.CompareDevice = 0, false
	bcfg, mode, _ := baselineConfig(one)
	one.CompareBlackhole, one.CompareBinary, one.ComparePlaintext = false, "", false
	var reps []*Report
	var rounds []Round
	for i := range cfg.CompareRounds {
		first := mainSide(mode)
		if i%2 == 1 {
			first = baselineSide(mode)
		}
		fmt.Fprintf(logw, "round %d of %d (%s first)\n", i+1, cfg.CompareRounds, first)
		var rep, brep *Report
		var err error
		if first == mainSide(mode) {
			if rep, err = runTarget(ctx, one); err == nil && ctx.Err() == nil {
				brep, err = runTarget(ctx, bcfg)
			}
		} else {
			if brep, err = runTarget(ctx, bcfg); err == nil && ctx.Err() == nil {
				rep, err = runTarget(ctx, one)
			}
		}
		if err != nil || ctx.Err() != nil || rep == nil || brep == nil {
			return roundsSoFar(mode, rep, reps, rounds), errors.Join(err, ctx.Err(), fmt.Errorf("--compare-rounds: round %d of %d did not finish", i+1, cfg.CompareRounds))
		}
		rep.Baseline = newBaseline(rep, brep, mode, cfg.CompareBinary)
		reps = append(reps, rep)
		rounds = append(rounds, newRound(first, rep))
	}
	rep := roundsSoFar(mode, nil, reps, rounds)
	var err error
	if cfg.CompareDevice && ctx.Err() == nil {
		rep.DeviceBaseline, err = compareDevice(ctx, cfg, rep, logw)
	}
	return rep, err
}

// baselineConfig is the run cfg's baseline side, if it has one: its
// blackhole baseline (mode BaselineBlackhole) or the same workload against
// brokers spawned from CompareBinary (BaselineBinary: consumers,
// verification and faults kept, no profile and no device probe).
func baselineConfig(cfg Config) (b Config, mode string, ok bool) {
	switch {
	case cfg.CompareBinary != "":
		b = cfg
		b.brokerBin, b.CompareBinary = cfg.CompareBinary, ""
		b.CompareBlackhole, b.CompareDevice, b.Profile, b.CompareRounds = false, false, "", 0
		b.quietDevice = true
		return b, BaselineBinary, true
	case cfg.CompareBlackhole:
		return blackholeConfig(cfg), BaselineBlackhole, true
	case cfg.ComparePlaintext:
		return plaintextConfig(cfg), BaselinePlaintext, true
	}
	return cfg, "", false
}

// plaintextConfig is cfg's --compare-plaintext baseline: the same
// workload (consumers, verification included) against brokers spawned
// from the same properties, the clients on their PLAINTEXT listener
// without TLS or SASL; no profile and no device probe.
func plaintextConfig(cfg Config) Config {
	b := cfg
	b.Security, b.SpawnListener, b.ComparePlaintext = Security{}, "", false
	b.CompareDevice, b.Profile, b.CompareRounds = false, "", 0
	b.quietDevice = true
	return b
}

// blackholeConfig is cfg turned into its blackhole baseline: a spawned
// broker that acks without storing, no consumers (they would never see a
// record), no verification, faults or profile.
func blackholeConfig(cfg Config) Config {
	b := cfg
	b.SpawnBlackhole, b.CompareBlackhole, b.CompareDevice, b.Profile = true, false, false, ""
	b.CompareRounds = 0
	b.Consumers, b.Group, b.ConsumerDelay = 0, "", 0
	b.Verify, b.Faults = false, nil
	b.quietDevice = true
	return b
}

func newRound(first string, rep *Report) Round {
	bl := rep.Baseline
	r := Round{First: first, RecordsPerSec: rep.Result.RecordsPerSec, BaselineRecordsPerSec: bl.Result.RecordsPerSec,
		Ratio: bl.Ratio, ProduceP99Ms: rep.Result.ProduceP99Ms, BaselineProduceP99Ms: bl.Result.ProduceP99Ms,
		BrokerCPUUsPerRecord: rep.Result.BrokerCPUUsPerRecord, BaselineBrokerCPUUs: bl.Result.BrokerCPUUsPerRecord,
		ClientCPUUsPerRecord: rep.Result.ClientCPUUsPerRecord, BaselineClientCPUUs: bl.Result.ClientCPUUsPerRecord}
	// End-to-end p99s where a side consumed (the blackhole side never
	// does: baselineConfig drops the consumers).
	if rep.Result.RecordsConsumed > 0 {
		r.E2EP99Ms = rep.Result.E2EP99Ms
	}
	if bl.Result.RecordsConsumed > 0 {
		r.BaselineE2EP99Ms = bl.Result.E2EP99Ms
	}
	if bl.Mode == BaselineConsumerGroup {
		r.RecordsPerSec, r.BaselineRecordsPerSec = rep.Result.ConsumedPerSec, bl.Result.ConsumedPerSec
		r.E2EP99Ms, r.BaselineE2EP99Ms = rep.Result.E2EP99Ms, bl.Result.E2EP99Ms
		r.RecordsRedelivered = rep.Result.RecordsRedelivered
	}
	if d := rep.Result.Device; d != nil {
		r.DeviceBytesPerRecordByte = d.BytesPerRecordByte
	}
	return r
}

// roundsSoFar is the report of the finished rounds (the median one's, or
// partial when none finished) with Rounds filled in.
func roundsSoFar(mode string, partial *Report, reps []*Report, rounds []Round) *Report {
	if len(reps) == 0 {
		return partial
	}
	order := make([]int, len(rounds))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch ra, rb := rounds[a].Ratio, rounds[b].Ratio; {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
		return 0
	})
	mid := order[(len(order)-1)/2]
	rs := &Rounds{Mode: mode, Rounds: rounds, MinRatio: rounds[order[0]].Ratio, MaxRatio: rounds[order[len(order)-1]].Ratio, Report: mid + 1}
	if n := len(order); n%2 == 1 {
		rs.MedianRatio = rounds[order[n/2]].Ratio
	} else {
		rs.MedianRatio = (rounds[order[n/2-1]].Ratio + rounds[order[n/2]].Ratio) / 2
	}
	rep := reps[mid]
	rep.Rounds = rs
	return rep
}

// writeRounds prints the --compare-rounds table.
func writeRounds(b *strings.Builder, rs *Rounds) {
	side, main := baselineSide(rs.Mode), mainSide(rs.Mode)
	share := rs.Mode == BaselineConsumerGroup
	how, p99 := "fresh brokers each", "p99 ms"
	if share {
		how, p99 = "on the same brokers and topic, rec/s consumed", "e2e p99 ms"
	}
	fmt.Fprintf(b, "\nrounds: %s and %s alternated, %s (the figures above are round %d's)\n", main, side, how, rs.Report)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	// Beside the produce p99s, the end-to-end p99s of runs with consumers.
	e2e := false
	for _, r := range rs.Rounds {
		e2e = e2e || !share && (r.E2EP99Ms > 0 || r.BaselineE2EP99Ms > 0)
	}
	e2eHead := ""
	if e2e {
		e2eHead = fmt.Sprintf("e2e p99 ms\t%s e2e p99 ms\t", side)
	}
	fmt.Fprintf(tw, "round\tfirst\t%[2]s rec/s\t%[1]s rec/s\tratio\t%[3]s\t%[1]s %[3]s\t%[4]sbroker µs/rec\t%[1]s µs/rec\tclient µs/rec\t%[1]s client µs/rec\tdevice B/B\t\n", side, main, p99, e2eHead)
	ms := func(v float64) string {
		if v <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", v)
	}
	for i, r := range rs.Rounds {
		if share {
			r.ProduceP99Ms, r.BaselineProduceP99Ms = r.E2EP99Ms, r.BaselineE2EP99Ms
		}
		dev := "-"
		if r.DeviceBytesPerRecordByte > 0 {
			dev = fmt.Sprintf("%.2f", r.DeviceBytesPerRecordByte)
		}
		e2eCols := ""
		if e2e {
			e2eCols = ms(r.E2EP99Ms) + "\t" + ms(r.BaselineE2EP99Ms) + "\t"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.1f%%\t%.2f\t%.2f\t%s%.2f\t%.2f\t%.2f\t%.2f\t%s\t\n", i+1, r.First,
			commas(r.RecordsPerSec, 0), commas(r.BaselineRecordsPerSec, 0), 100*r.Ratio,
			r.ProduceP99Ms, r.BaselineProduceP99Ms, e2eCols, r.BrokerCPUUsPerRecord, r.BaselineBrokerCPUUs,
			r.ClientCPUUsPerRecord, r.BaselineClientCPUUs, dev)
	}
	tw.Flush()
	fmt.Fprintf(b, "ratio %s / %s over %d rounds: median %.1f%% (min %.1f%%, max %.1f%%)\n",
		main, side, len(rs.Rounds), 100*rs.MedianRatio, 100*rs.MinRatio, 100*rs.MaxRatio)
}
