package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stratalog/strata/perf"
)

// parsePlanFlags runs the flag layer alone and returns the workload.
func parsePlanFlags(t *testing.T, args ...string) (perf.Workload, error) {
	t.Helper()
	pf := newPlanFlags(&bytes.Buffer{})
	if err := pf.fs.Parse(args); err != nil {
		return perf.Workload{}, err
	}
	w, _, err := pf.workload()
	return w, err
}

func TestPlanFlags(t *testing.T) {
	w, err := parsePlanFlags(t, "--rate", "200,000", "--peak-rate", "600_000", "--record-bytes", "1KiB",
		"--compression-ratio", "2.5", "--rf", "3", "--min-isr", "2", "--groups", "2", "--consumers-per-group", "48",
		"--retention", "7d", "--hot-window", "12h", "--producers", "20", "--linger", "5ms", "--batch-bytes", "64KiB",
		"--keyless", "--partitions", "96", "--brokers", "12", "--disk-mbps", "800", "--disk-amp", "1.5", "--net-mbps", "3125",
		"--cores", "16", "--core-mbps", "120", "--memory-gib", "128", "--reserved-gib", "8", "--disk-gib", "7450",
		"--target-util", "70%", "--tolerate-failures", "2", "--read-window", "1m", "--claim-peak-mbps", "240",
		"--consumer-mbps", "25", "--partition-mbps", "12")
	if err != nil {
		t.Fatal(err)
	}
	want := perf.Workload{
		RecordBytes: 1024, SustainedRecordsPerSec: 200000, PeakRecordsPerSec: 600000, CompressionRatio: 2.5,
		ReplicationFactor: 3, MinISR: 2, BrokersThatMayFail: 2, ConsumerGroups: 2, ConsumersPerGroup: 48,
		ConsumerMBps: 25, PartitionMBps: 12, RetentionHours: 168, LocalHotHours: 12, Producers: 20, LingerMs: 5,
		BatchBytes: 65536, Keyless: true, Partitions: 96, FixedBrokers: 12,
		Limits: perf.BrokerLimits{DiskWriteMBps: 800, DiskWriteAmplification: 1.5, NetworkMBps: 3125, Cores: 16, PerCoreMBps: 120,
			MemoryGiB: 128, ReservedMemoryGiB: 8, DiskGiB: 7450},
		TargetUtilization: 0.7, ReadWindowSec: 60, ClaimedPeakMBps: 240,
	}
	if got, _ := json.Marshal(w); string(got) != string(planMust(json.Marshal(want))) {
		t.Fatalf("workload\n got %s\nwant %s", got, planMust(json.Marshal(want)))
	}
}

func planMust[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A preset's figures survive unless a flag overrides them; defaults fill
// the rest.
func TestPlanFlagsPresetOverride(t *testing.T) {
	w, err := parsePlanFlags(t, "--preset", "reference", "--brokers", "20", "--linger", "20")
	if err != nil {
		t.Fatal(err)
	}
	ref, _, _ := perf.Preset("reference")
	if w.FixedBrokers != 20 || w.LingerMs != 20 || w.SustainedRecordsPerSec != 200000 || w.Partitions != 96 ||
		w.ClaimedPeakMBps != 240 || w.ReplicationFactor != ref.ReplicationFactor || w.Name != "reference" {
		t.Fatalf("got %+v", w)
	}
	// Durations: bare numbers are in the flag's unit.
	w, err = parsePlanFlags(t, "--rate", "1000", "--retention", "36", "--hot-window", "90m", "--read-window", "45", "--target-util", "0.5")
	if err != nil {
		t.Fatal(err)
	}
	if w.RetentionHours != 36 || w.LocalHotHours != 1.5 || w.ReadWindowSec != 45 || w.TargetUtilization != 0.5 {
		t.Fatalf("got %+v", w)
	}
}

func TestPlanFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{},                                   // no rate, no preset
		{"--preset", "nope"},                 // unknown preset
		{"--rate", "abc"},                    // not a number
		{"--rate", "NaN"},                    // not finite
		{"--rate", "1", "--linger", "-5ms"},  // negative duration
		{"--rate", "1", "--retention", "xd"}, // bad days
		{"--rate", "1", "--target-util", "150%"},
		{"--rate", "1", "--target-util", "0"},
		{"--rate", "1", "--partitions", "-1"},
		{"--rate", "1", "--batch-bytes", "3000000MiB"},
		{"--rate", "1", "--rf", "2.5"},
		{"--rate", "1", "--keyless=maybe"},
		{"--rate", "1", "--no-such-flag"},
		{"--rate", "1", "--calibrate", filepath.Join(t.TempDir(), "missing.json")},
	} {
		if _, err := parsePlanFlags(t, args...); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	var out, errOut bytes.Buffer
	if err := planMain([]string{"--rate", "1", "extra"}, &out, &errOut); err == nil {
		t.Error("positional argument accepted")
	}
	out.Reset()
	if err := planMain([]string{"--help"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "-calibrate") {
		t.Errorf("--help: %v, %q", err, out.String())
	}
}

// The reference preset end to end: text with every step re-computable,
// the figures in it, JSON beside it, and the command failing
// because the plan has ERROR lines (with or without --strict).
func TestPlanReferenceOutput(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "plan.json")
	var out, errOut bytes.Buffer
	err := planMain([]string{"--preset", "reference", "--json", jsonPath}, &out, &errOut)
	if !errors.Is(err, errPlanDoesNotAddUp) {
		t.Fatalf("the reference plan has ERROR lines: got %v\n%s", err, errOut.String())
	}
	text := out.String()
	for _, want := range []string{
		"Preset reference:",
		"ingest_peak = peak_rate × record_bytes / 10^6 = 600,000 × 1,024 / 10^6 = 614.4 MB/s",
		"retained_tb = write_sust × retention_h × 3600 / 10^6 = 204.8 × 168 × 3600 / 10^6 = 123.86 TB",
		"local_disk_tb = retained_tb × rf = 123.86 × 3 = 371.59 TB",
		"local_disk_broker_tb = local_disk_tb / brokers = 371.59 / 12 = 30.966 TB",
		"MB = 10^6 bytes",
		"ERROR claimed-ingest: peak ingest is 614.4 MB/s",
		"ERROR brokers-insufficient",
		"NOTE  rf-local-copies",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	steps := recomputeSteps(t, text)
	if steps < 40 {
		t.Errorf("only %d step lines", steps)
	}

	var rep perf.Report
	if err := json.Unmarshal(planMust(os.ReadFile(jsonPath)), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.BrokersNeeded != 142 || rep.Brokers != 12 || rep.Binding != "disk capacity" || len(rep.Steps) != steps {
		t.Errorf("JSON: needed %d, brokers %d, binding %q, %d steps (text %d)", rep.BrokersNeeded, rep.Brokers, rep.Binding, len(rep.Steps), steps)
	}
	if err := rep.Verify(); err != nil {
		t.Errorf("JSON steps: %v", err)
	}

	out.Reset()
	if err := planMain([]string{"--preset", "reference", "--strict"}, &out, &errOut); !errors.Is(err, errPlanDoesNotAddUp) {
		t.Errorf("--strict on the reference plan: %v", err)
	}
	if code, _, errText := runCLI("plan", "--preset", "reference"); code != 1 || !strings.Contains(errText, "does not add up") {
		t.Errorf("strata plan --preset reference: exit %d, %q", code, errText)
	}
	// Enough brokers, disks and tiering, compression that makes the
	// quoted 240 MB/s true: the plan adds up.
	out.Reset()
	args := []string{"--preset", "reference", "--strict", "--hot-window", "12h", "--compression-ratio", "2.56"}
	if err := planMain(args, &out, &errOut); err != nil {
		t.Errorf("%q: %v\n%s", args, err, out.String())
	}
	if code, text, _ := runCLI(append([]string{"plan"}, args[0], args[1], args[3], args[4], args[5], args[6])...); code != 0 || strings.Contains(text, "ERROR") {
		t.Errorf("a plan that adds up, without --strict: exit %d\n%s", code, text)
	}
}

// recomputeSteps evaluates the arithmetic of every step line in the Steps
// section and checks it against the printed value; it returns the count.
func recomputeSteps(t *testing.T, text string) int {
	t.Helper()
	_, section, _ := strings.Cut(text, "\nSteps")
	section, _, _ = strings.Cut(section, "\nResult\n")
	n := 0
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "      ") {
			continue
		}
		parts := strings.Split(strings.TrimSpace(line), " = ")
		if len(parts) != 4 {
			t.Fatalf("step line %q", line)
		}
		got, err := perf.Eval(parts[2])
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		num, _, _ := strings.Cut(parts[3], " ")
		printed, err := strconv.ParseFloat(strings.ReplaceAll(num, ",", ""), 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if math.Abs(got-printed) > 2e-3*math.Abs(printed)+1e-9 {
			t.Errorf("%q: arithmetic gives %v", line, got)
		}
		n++
	}
	return n
}

func TestPlanCalibrate(t *testing.T) {
	dir := t.TempDir()
	result := filepath.Join(dir, "result.json")
	sample := `{"result": {"records_per_sec": 244140.625, "mb_per_sec": 250, "produce_p99_ms": 4.2,
		"broker_cpu_seconds": 45, "duration_s": 30, "record_bytes": 1024},
		"config": {"find_max": true, "spawn": 1, "replication_factor": 1}}`
	if err := os.WriteFile(result, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := planMain([]string{"--preset", "reference", "--calibrate", result}, &out, &errOut); !errors.Is(err, errPlanDoesNotAddUp) {
		t.Fatal(err) // the reference preset's claimed figure stays wrong
	}
	text := out.String()
	for _, want := range []string{
		"cal_cores_busy = cal_cpu_s / cal_duration_s = 45 / 30 = 1.5 cores",
		"core_mbps = cal_mbps / cal_cores_busy = 250 / 1.5 = 166.67 MB/s",
		"brokers_measured = ceil(disk_write_total / (broker_ceiling_mbps × util)) = ceil(1,843.2 / (250 × 0.6)) = 13 brokers",
		"(calibrated)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	recomputeSteps(t, text)
	if strings.Contains(text, "core_mbps 100 MB/s") {
		t.Error("per-core rate still listed as assumed")
	}
	if _, err := parsePlanFlags(t, "--preset", "reference", "--calibrate", result, "--core-mbps", "50"); err == nil {
		t.Error("--core-mbps with --calibrate accepted")
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"result": {"mb_per_sec": "lots"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := planMain([]string{"--preset", "reference", "--calibrate", bad}, &out, &errOut); !errors.Is(err, perf.ErrBadCalibration) {
		t.Errorf("bad calibration: %v", err)
	}
}
