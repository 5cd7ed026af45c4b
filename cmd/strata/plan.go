package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stratalog/strata/perf"
)

// planDoc is `strata plan --help`'s text.
var planDoc = cmdDoc{name: "plan",
	usage: "strata plan (--preset reference | --rate N) [--peak-rate N] [--record-bytes B] [--rf R] ... [--calibrate result.json] [--calibrate metrics.txt] [--json FILE]",
	about: "Sizes a Kafka-compatible cluster for a workload and prints every formula with its arithmetic.\n" +
		"Units: " + perf.UnitsNote + ".\n\n" +
		"Exit status: 0 when the plan adds up (WARN and NOTE lines do not change it), 1 when it\n" +
		"prints an ERROR line (the plan does not add up; the text and --json are still written),\n" +
		"and 1 for a mistake on the command line (one line and the usage line on stderr). --strict\n" +
		"is accepted for old scripts and changes nothing: an ERROR always exits 1 now."}

// errPlanDoesNotAddUp is returned when the plan has an ERROR line.
var errPlanDoesNotAddUp = errors.New("the plan does not add up (see the ERROR lines above)")

func planMain(args []string, stdout, stderr io.Writer) error {
	pf := newPlanFlags(stderr)
	pos, err := parseFlags(pf.fs, args, planDoc, false, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(planDoc, "unexpected arguments %q", pos)
	}
	w, info, err := pf.workload()
	if err != nil {
		return asUsage(planDoc, err)
	}
	rep, err := perf.Plan(w)
	if err != nil {
		return err
	}
	if info.Name != "" {
		fmt.Fprintf(stdout, "Preset %s: %s.\n", info.Name, info.Description)
		for _, a := range info.Assumptions {
			fmt.Fprintf(stdout, "Preset assumption: %s.\n", a)
		}
	}
	if _, err := io.WriteString(stdout, rep.Text()); err != nil {
		return err
	}
	if pf.jsonPath != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(pf.jsonPath, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	for _, wn := range rep.Warnings {
		if wn.Severity == perf.SeverityError {
			return errPlanDoesNotAddUp
		}
	}
	return nil
}

// planFlags binds each flag to a Workload field. Flag values land in w;
// only flags given on the command line are copied over the preset (or the
// defaults), so a preset's figure survives unless the user overrides it.
type planFlags struct {
	fs       *flag.FlagSet
	w        perf.Workload
	copyers  map[string]func(dst, src *perf.Workload)
	preset   string
	calFiles calibrateFiles
	jsonPath string
	strict   bool
}

func newPlanFlags(stderr io.Writer) *planFlags {
	pf := &planFlags{
		fs:      flag.NewFlagSet("plan", flag.ContinueOnError),
		w:       perf.Defaults(),
		copyers: map[string]func(dst, src *perf.Workload){},
	}
	fs := pf.fs
	fs.SetOutput(stderr)
	fs.StringVar(&pf.preset, "preset", "", "start from a named workload: "+strings.Join(perf.PresetNames(), ", ")+"; other flags override it")
	fs.Var(&pf.calFiles, "calibrate", "take per-broker limits from a loadgen --json result `file`, and tiered storage's upload and remote read rates from a /metrics scrape of brokers; give it once for each")
	fs.StringVar(&pf.jsonPath, "json", "", "also write the whole plan as JSON to `file`")
	fs.BoolVar(&pf.strict, "strict", false, "kept for old scripts; no effect: a plan with an ERROR line always exits 1")

	type W = perf.Workload
	bind(pf, "rate", "sustained record rate, records/s (required unless --preset)", func(w *W) *float64 { return &w.SustainedRecordsPerSec }, newFloat)
	bind(pf, "peak-rate", "peak record rate, records/s (default: the sustained rate)", func(w *W) *float64 { return &w.PeakRecordsPerSec }, newFloat)
	bind(pf, "record-bytes", "record size: key + value + headers (accepts KiB/MiB)", func(w *W) *int { return &w.RecordBytes }, newSize)
	bind(pf, "compression-ratio", "record bytes : stored bytes, 1 = none", func(w *W) *float64 { return &w.CompressionRatio }, newFloat)
	bind(pf, "rf", "replication factor", func(w *W) *int { return &w.ReplicationFactor }, newInt)
	bind(pf, "min-isr", "min.insync.replicas", func(w *W) *int { return &w.MinISR }, newInt)
	bind(pf, "tolerate-failures", "brokers that may be down while the plan holds its targets (N+k)", func(w *W) *int { return &w.BrokersThatMayFail }, newInt)
	bind(pf, "groups", "consumer groups that each read the whole stream", func(w *W) *int { return &w.ConsumerGroups }, newInt)
	bind(pf, "consumers-per-group", "consumers wanted in a group (partitions must be at least this)", func(w *W) *int { return &w.ConsumersPerGroup }, newInt)
	bind(pf, "consumer-mbps", fmt.Sprintf("MB/s one consumer instance processes (default %d, assumed)", perf.DefaultConsumerMBps), func(w *W) *float64 { return &w.ConsumerMBps }, newFloat)
	bind(pf, "partition-mbps", fmt.Sprintf("write MB/s one partition is planned for (default %d, assumed)", perf.DefaultPartitionMBps), func(w *W) *float64 { return &w.PartitionMBps }, newFloat)
	bind(pf, "retention", "retention (168h, 7d)", func(w *W) *float64 { return &w.RetentionHours }, newHours)
	bind(pf, "hot-window", "tiered storage: time kept on broker disks (0 = no tiering)", func(w *W) *float64 { return &w.LocalHotHours }, newHours)
	bind(pf, "producers", "producer instances, each writing to every partition", func(w *W) *int { return &w.Producers }, newInt)
	bind(pf, "linger", "producer linger.ms", func(w *W) *float64 { return &w.LingerMs }, newMillis)
	bind(pf, "batch-bytes", "producer batch.size (accepts KiB/MiB)", func(w *W) *int { return &w.BatchBytes }, newSize)
	bind(pf, "keyless", "records have no key: the sticky partitioner fills one partition's batch at a time", func(w *W) *bool { return &w.Keyless }, newBool)
	bind(pf, "partitions", "partitions (0 = derive)", func(w *W) *int { return &w.Partitions }, newInt)
	bind(pf, "brokers", "brokers (0 = derive); a given count is checked against every limit", func(w *W) *int { return &w.FixedBrokers }, newInt)
	bind(pf, "disk-mbps", fmt.Sprintf("per-broker disk write MB/s (default %d, assumed)", perf.DefaultDiskWriteMBps), func(w *W) *float64 { return &w.Limits.DiskWriteMBps }, newFloat)
	bind(pf, "disk-amp", fmt.Sprintf("bytes the log disks write per log byte (default %d: the journal and the segment each write every byte; with log.io.journal.ends=true fresh segment files are zero-filled instead, about 1.2 once retention recycles them; 1 with log.io.flush.shared=false and log.io.journal.bytes=0)", perf.DefaultDiskWriteAmplification), func(w *W) *float64 { return &w.Limits.DiskWriteAmplification }, newFloat)
	bind(pf, "net-mbps", fmt.Sprintf("per-broker network MB/s, each direction (default %d = 10 GbE, assumed)", perf.DefaultNetworkMBps), func(w *W) *float64 { return &w.Limits.NetworkMBps }, newFloat)
	bind(pf, "cores", fmt.Sprintf("per-broker cores (default %d, assumed)", perf.DefaultCores), func(w *W) *float64 { return &w.Limits.Cores }, newFloat)
	bind(pf, "core-mbps", fmt.Sprintf("produce MB/s one core handles (default %d, assumed; --calibrate measures it)", perf.DefaultPerCoreMBps), func(w *W) *float64 { return &w.Limits.PerCoreMBps }, newFloat)
	bind(pf, "upload-mbps", "tiered storage: MB/s one broker copies to the object store (--calibrate measures it from /metrics)", func(w *W) *float64 { return &w.Limits.UploadMBps }, newFloat)
	bind(pf, "remote-read-mbps", "tiered storage: MB/s one remote reader reads from the object store (--calibrate measures it from /metrics)", func(w *W) *float64 { return &w.Limits.RemoteReadMBps }, newFloat)
	bind(pf, "memory-gib", fmt.Sprintf("per-broker memory GiB (default %d, assumed)", perf.DefaultMemoryGiB), func(w *W) *float64 { return &w.Limits.MemoryGiB }, newFloat)
	bind(pf, "reserved-gib", fmt.Sprintf("memory GiB that is not page cache (default %d, assumed)", perf.DefaultReservedMemoryGiB), func(w *W) *float64 { return &w.Limits.ReservedMemoryGiB }, newFloat)
	bind(pf, "disk-gib", fmt.Sprintf("per-broker log disk GiB (default %d = 4 TiB, assumed)", perf.DefaultDiskGiB), func(w *W) *float64 { return &w.Limits.DiskGiB }, newFloat)
	bind(pf, "target-util", fmt.Sprintf("target utilisation of every limit, 0.6 or 60%% (default %v)", perf.DefaultTargetUtilization), func(w *W) *float64 { return &w.TargetUtilization }, newFraction)
	bind(pf, "read-window", fmt.Sprintf("how far behind the log end consumers read; page cache should hold it (default %ds)", perf.DefaultReadWindowSec), func(w *W) *float64 { return &w.ReadWindowSec }, newSeconds)
	bind(pf, "claim-peak-mbps", "a peak ingest MB/s quoted by the plan under review, to check", func(w *W) *float64 { return &w.ClaimedPeakMBps }, newFloat)
	return pf
}

// bind registers one flag whose value lives in a Workload field.
func bind[T any](pf *planFlags, name, usage string, field func(*perf.Workload) *T, value func(*T) flag.Value) {
	pf.fs.Var(value(field(&pf.w)), name, usage)
	pf.copyers[name] = func(dst, src *perf.Workload) { *field(dst) = *field(src) }
}

// workload assembles the Workload: preset or defaults, then the flags given,
// then the calibration file.
func (pf *planFlags) workload() (perf.Workload, perf.PresetInfo, error) {
	w, info := perf.Defaults(), perf.PresetInfo{}
	if pf.preset != "" {
		var err error
		if w, info, err = perf.Preset(pf.preset); err != nil {
			return w, info, err
		}
	}
	given := map[string]bool{}
	pf.fs.Visit(func(f *flag.Flag) {
		given[f.Name] = true
		if cp, ok := pf.copyers[f.Name]; ok {
			cp(&w, &pf.w)
		}
	})
	if pf.preset == "" && !given["rate"] {
		return w, info, errors.New("--rate is required (or start from --preset " + strings.Join(perf.PresetNames(), "|") + ")")
	}
	if len(pf.calFiles) > 0 {
		var c perf.Calibration
		for i, path := range pf.calFiles {
			f, err := perf.ReadCalibrationFile(path)
			if err != nil {
				return w, info, err
			}
			if i == 0 {
				c = f
			} else if c, err = c.Merge(f); err != nil {
				return w, info, err
			}
		}
		for _, x := range []struct {
			flag     string
			measured bool
		}{{"core-mbps", c.BrokerCPUSeconds > 0}, {"upload-mbps", c.RemoteCopySeconds > 0}, {"remote-read-mbps", c.RemoteReadSeconds > 0}} {
			if given[x.flag] && x.measured {
				return w, info, fmt.Errorf("--%s and --calibrate both set that rate; give one", x.flag)
			}
		}
		w.Calibration = &c
	}
	return w, info, nil
}

// calibrateFiles is --calibrate, given once per file.
type calibrateFiles []string

func (c *calibrateFiles) String() string { return strings.Join(*c, ",") }
func (c *calibrateFiles) Set(s string) error {
	*c = append(*c, s)
	return nil
}

// Flag values. Numbers accept "," and "_" as digit separators (200,000).

type floatValue struct{ p *float64 }

func newFloat(p *float64) flag.Value { return floatValue{p} }
func (v floatValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}
func (v floatValue) Set(s string) error {
	f, err := parseFloat(s)
	if err != nil {
		return err
	}
	*v.p = f
	return nil
}

func parseFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.NewReplacer(",", "", "_", "").Replace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a finite number", s)
	}
	return f, nil
}

type intValue struct {
	p     *int
	sizes bool // accept KiB/MiB/GiB suffixes
}

func newInt(p *int) flag.Value  { return intValue{p: p} }
func newSize(p *int) flag.Value { return intValue{p: p, sizes: true} }
func (v intValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}
func (v intValue) Set(s string) error {
	mult, num := int64(1), s
	if v.sizes {
		for _, u := range []struct {
			suffix string
			mult   int64
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
			if n, ok := strings.CutSuffix(s, u.suffix); ok {
				mult, num = u.mult, n
				break
			}
		}
	}
	n, err := strconv.ParseInt(strings.NewReplacer(",", "", "_", "").Replace(strings.TrimSpace(num)), 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	if n < 0 || n > math.MaxInt32 || n*mult > math.MaxInt32 {
		return fmt.Errorf("%q is out of range", s)
	}
	*v.p = int(n * mult)
	return nil
}

type boolValue struct{ p *bool }

func newBool(p *bool) flag.Value     { return boolValue{p} }
func (v boolValue) IsBoolFlag() bool { return true }
func (v boolValue) String() string {
	if v.p == nil {
		return "false"
	}
	return strconv.FormatBool(*v.p)
}
func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v.p = b
	return nil
}

// durationValue stores a duration as a float in unit (hours, ms, s). It
// accepts Go durations plus a "d" (day) suffix; a bare number is in unit.
type durationValue struct {
	p    *float64
	unit time.Duration
}

func newHours(p *float64) flag.Value   { return durationValue{p, time.Hour} }
func newMillis(p *float64) flag.Value  { return durationValue{p, time.Millisecond} }
func newSeconds(p *float64) flag.Value { return durationValue{p, time.Second} }
func (v durationValue) String() string {
	if v.p == nil || *v.p == 0 {
		return "0"
	}
	suffix := map[time.Duration]string{time.Hour: "h", time.Millisecond: "ms", time.Second: "s"}[v.unit]
	return strconv.FormatFloat(*v.p, 'g', -1, 64) + suffix
}
func (v durationValue) Set(s string) error {
	var d float64 // in nanoseconds
	switch days, isDays := strings.CutSuffix(s, "d"); {
	case isDays:
		f, err := parseFloat(days)
		if err != nil {
			return err
		}
		d = f * float64(24*time.Hour)
	default:
		if f, err := parseFloat(s); err == nil {
			d = f * float64(v.unit)
			break
		}
		td, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (5ms, 12h, 7d)", s)
		}
		d = float64(td)
	}
	if d < 0 {
		return fmt.Errorf("%q is negative", s)
	}
	*v.p = d / float64(v.unit)
	return nil
}

// fractionValue accepts 0.6 or 60%.
type fractionValue struct{ p *float64 }

func newFraction(p *float64) flag.Value { return fractionValue{p} }
func (v fractionValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}
func (v fractionValue) Set(s string) error {
	pct, isPct := strings.CutSuffix(strings.TrimSpace(s), "%")
	f, err := parseFloat(strings.TrimSpace(pct))
	if err != nil {
		return err
	}
	if isPct {
		f /= 100
	}
	if f <= 0 || f > 1 {
		return fmt.Errorf("%q is not a utilisation in (0, 1] or (0%%, 100%%]", s)
	}
	*v.p = f
	return nil
}
