package perf

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sampleResult is a loadgen --find-max result in the agreed schema, with
// extra fields a loadgen may add.
const sampleResult = `{
  "result": {
    "records_per_sec": 244140.625,
    "mb_per_sec": 250,
    "produce_p99_ms": 4.2,
    "broker_cpu_seconds": 45,
    "duration_s": 30,
    "record_bytes": 1024,
    "records_per_batch": 3.0,
    "e2e_p99_ms": 9.1,
    "histogram": {"p50": 1.1}
  },
  "config": {"find_max": true, "partitions": 96, "acks": "all", "spawn": 1, "replication_factor": 1},
  "target": {"brokers": ["127.0.0.1:40001"], "spawned": 1}
}`

func TestParseCalibration(t *testing.T) {
	c, err := ParseCalibration([]byte(sampleResult))
	if err != nil {
		t.Fatal(err)
	}
	want := Calibration{RecordsPerSec: 244140.625, MBPerSec: 250, ProduceP99Ms: 4.2, BrokerCPUSeconds: 45,
		DurationSec: 30, RecordBytes: 1024, RecordsPerBatch: 3, CapacitySearch: true, ReplicationFactor: 1, Brokers: 1}
	if c != want {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
	// 45 CPU seconds over 30 s = 1.5 busy cores; 250 / 1.5 = 166.67 MB/s per core.
	near(t, "per core", c.perCoreMBps(), 250/1.5, 1e-9)
}

func TestParseCalibrationTolerant(t *testing.T) {
	cases := map[string]Calibration{
		// No config, no latency, no record size.
		`{"result": {"mb_per_sec": 100, "broker_cpu_seconds": 10, "duration_s": 20}}`: {MBPerSec: 100, BrokerCPUSeconds: 10, DurationSec: 20},
		// MB/s from records and a record size in config; nulls are missing.
		`{"result": {"records_per_sec": 1000000, "broker_cpu_seconds": 60, "duration_s": 60, "mb_per_sec": null},
		  "config": {"record_bytes": 512}}`: {RecordsPerSec: 1e6, BrokerCPUSeconds: 60, DurationSec: 60, RecordBytes: 512},
		// A capacity search recorded as an object of its settings; no CPU figures.
		`{"result": {"mb_per_sec": 300}, "config": {"find_max": {"p99_bound_ms": 50}, "spawn": 3, "replication_factor": 3}}`: {
			MBPerSec: 300, CapacitySearch: true, Brokers: 3, ReplicationFactor: 3},
		// Spawned count from the target section.
		`{"result": {"mb_per_sec": 300}, "config": {"find_max": true}, "target": {"spawned": 2}}`: {
			MBPerSec: 300, CapacitySearch: true, Brokers: 2},
	}
	for in, want := range cases {
		c, err := ParseCalibration([]byte(in))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if c != want {
			t.Errorf("%s:\n got %+v\nwant %+v", in, c, want)
		}
	}
}

func TestParseCalibrationRejects(t *testing.T) {
	for _, in := range []string{
		``, `null`, `[]`, `{"config": {}}`, `not json`,
		`{"result": {"mb_per_sec": "fast"}}`,
		`{"result": {"mb_per_sec": -5, "broker_cpu_seconds": 1, "duration_s": 1}}`,
		`{"result": {"mb_per_sec": 100}}`,                           // no CPU and not a capacity search
		`{"result": {"mb_per_sec": 100, "broker_cpu_seconds": 10}}`, // no duration
		`{"result": {"mb_per_sec": 100, "broker_cpu_seconds": 1, "duration_s": 1, "record_bytes": 1.5}}`,
		`{"result": {"mb_per_sec": 1e300, "broker_cpu_seconds": 1, "duration_s": 1}}`,
		`{"result": {"mb_per_sec": 1e-12, "broker_cpu_seconds": 100, "duration_s": 1}}`,
		`{"result": {"mb_per_sec": 1e999}}`,
		`{"result": {"mb_per_sec": 300}, "config": {"find_max": true}}`,              // ceiling, but on how many brokers?
		`{"result": {"mb_per_sec": 300}, "config": {"find_max": true, "spawn": -1}}`, // not a count
		`{"result": {"mb_per_sec": 300}, "config": {"find_max": true, "spawn": 1.5}}`,
		`{"result": {"mb_per_sec": 300}, "config": {"find_max": true, "spawn": 1, "replication_factor": "3"}}`,
		`{"result": {"mb_per_sec": 100, "broker_cpu_seconds": 1, "duration_s": 1, "device": 2}}`,
		`{"result": {"mb_per_sec": 100, "broker_cpu_seconds": 1, "duration_s": 1, "device": {"bytes_per_record_byte": -1}}}`,
		`{"result": {"mb_per_sec": 100, "broker_cpu_seconds": 1, "duration_s": 1, "device": {"bytes_per_record_byte": 31}}, "config": {"replication_factor": 3}}`,
	} {
		if c, err := ParseCalibration([]byte(in)); !errors.Is(err, ErrBadCalibration) {
			t.Errorf("%q: got %+v, %v; want ErrBadCalibration", in, c, err)
		}
	}
}

func TestReadCalibrationFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "result.json")
	if err := os.WriteFile(path, []byte(sampleResult), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ReadCalibrationFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Source != path || c.MBPerSec != 250 {
		t.Fatalf("got %+v", c)
	}
	if _, err := ReadCalibrationFile(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"result": {"pad": "`+strings.Repeat("x", maxCalibrationBytes)+`"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCalibrationFile(big); !errors.Is(err, ErrBadCalibration) {
		t.Errorf("oversized file: %v", err)
	}
}

// The reference workload with limits from the sample run: 166.67 MB/s per
// core and a measured ceiling of 250 MB/s appended per broker.
func TestPlanWithCalibration(t *testing.T) {
	c, err := ParseCalibration([]byte(sampleResult))
	if err != nil {
		t.Fatal(err)
	}
	c.Source = "result.json"
	w := reference(t)
	w.Calibration = &c
	rep := mustPlan(t, w)
	checkReport(t, rep)

	near(t, "cal_cores_busy", stepValue(t, rep, "cal_cores_busy"), 1.5, 1e-12)
	near(t, "core_mbps", stepValue(t, rep, "core_mbps"), 250/1.5, 1e-9)
	near(t, "broker_ceiling_mbps", stepValue(t, rep, "broker_ceiling_mbps"), 250, 0)
	// cpu: ceil(1843.2 / (8 × 166.67 × 0.6)) = ceil(2.304) = 3;
	// measured: ceil(1843.2 / (250 × 0.6)) = ceil(12.288) = 13.
	byName := map[string]LimitUse{}
	for _, l := range rep.Limits {
		byName[l.Name] = l
	}
	if byName["cpu"].BrokersNeeded != 3 || byName["measured ceiling"].BrokersNeeded != 13 {
		t.Errorf("cpu %d, measured %d; want 3, 13", byName["cpu"].BrokersNeeded, byName["measured ceiling"].BrokersNeeded)
	}
	if rep.Workload.Limits.PerCoreMBps != 250/1.5 {
		t.Errorf("resolved per-core %v", rep.Workload.Limits.PerCoreMBps)
	}
	for _, a := range rep.Assumed {
		if a == "core_mbps" {
			t.Error("calibrated per-core rate listed as assumed")
		}
	}
	if msg := warningText(t, rep, "calibration-latency"); !strings.Contains(msg, "result.json measured produce p99 4.2 ms at 250 MB/s") {
		t.Errorf("calibration-latency: %q", msg)
	}
	if rep.HasWarning("calibration-not-ceiling") || rep.HasWarning("calibration-record-size") || rep.HasWarning("calibration-batching") {
		t.Errorf("unexpected calibration notes: %v", codes(rep))
	}

	// A run that batched 63 records per batch calibrates a plan whose
	// producers send 1.69: the per-core figure flatters it.
	c.RecordsPerBatch = 63
	if msg := warningText(t, mustPlan(t, w), "calibration-batching"); !strings.Contains(msg, "batched 63 records per batch, this plan's producers 1.688") {
		t.Errorf("calibration-batching: %q", msg)
	}

	// Not a capacity search: no ceiling, a note says why.
	c.CapacitySearch = false
	c.RecordBytes = 512
	rep = mustPlan(t, w)
	if _, ok := rep.Step("broker_ceiling_mbps"); ok {
		t.Error("ceiling taken from a run that was not a capacity search")
	}
	warningText(t, rep, "calibration-not-ceiling")
	warningText(t, rep, "calibration-record-size")

	// A capacity search over brokers it did not spawn gives no ceiling.
	c.CapacitySearch, c.Brokers = true, 0
	rep = mustPlan(t, w)
	if _, ok := rep.Step("broker_ceiling_mbps"); ok {
		t.Error("ceiling taken from a run on an unknown number of brokers")
	}
	if msg := warningText(t, rep, "calibration-not-ceiling"); !strings.Contains(msg, "did not spawn") {
		t.Errorf("calibration-not-ceiling: %q", msg)
	}
	c.CapacitySearch = false

	// MB/s derived from records/s × record size when mb_per_sec is missing:
	// 244,140.625 × 512 / 10^6 = 125 MB/s, over 1.5 cores = 83.33 per core.
	c.MBPerSec = 0
	rep = mustPlan(t, w)
	near(t, "cal_mbps", stepValue(t, rep, "cal_mbps"), 125, 1e-9)
	near(t, "core_mbps", stepValue(t, rep, "core_mbps"), 125/1.5, 1e-9)
}

// A run on 3 spawned brokers at RF 3 appended 3 × 300 = 900 MB/s: 300 MB/s
// per broker, and 900 / (90 s / 30 s) = 300 MB/s per busy core.
func TestCalibrationReplicatedRun(t *testing.T) {
	c, err := ParseCalibration([]byte(`{"result": {"mb_per_sec": 300, "broker_cpu_seconds": 90, "duration_s": 30},
		"config": {"find_max": true, "spawn": 3, "replication_factor": 3}}`))
	if err != nil {
		t.Fatal(err)
	}
	w := reference(t)
	w.Calibration = &c
	rep := mustPlan(t, w)
	checkReport(t, rep)
	near(t, "cal_appended_mbps", stepValue(t, rep, "cal_appended_mbps"), 900, 0)
	near(t, "core_mbps", stepValue(t, rep, "core_mbps"), 300, 1e-12)
	near(t, "broker_ceiling_mbps", stepValue(t, rep, "broker_ceiling_mbps"), 300, 0)
}

// TestCalibrationDiskAmp: a run that measured its disk (result.device)
// sets disk_amp to its device bytes per record byte over the run's
// replication factor (every replica on that disk), at least 1, unless
// disk_amp is given; without a device figure the default stays.
func TestCalibrationDiskAmp(t *testing.T) {
	run := func(device string, rf int, given float64) Report {
		t.Helper()
		c, err := ParseCalibration([]byte(`{"result": {"mb_per_sec": 300, "broker_cpu_seconds": 90, "duration_s": 30` + device + `},
			"config": {"spawn": 3, "replication_factor": ` + strconv.Itoa(rf) + `}}`))
		if err != nil {
			t.Fatal(err)
		}
		w := reference(t)
		w.Calibration = &c
		w.Limits.DiskWriteAmplification = given
		rep := mustPlan(t, w)
		checkReport(t, rep)
		return rep
	}
	rep := run(`, "device": {"name": "vda", "bytes_per_record_byte": 3.41}`, 3, 0)
	near(t, "disk_amp", stepValue(t, rep, "disk_amp"), 3.41/3, 1e-12)
	near(t, "workload disk_amp", rep.Workload.Limits.DiskWriteAmplification, 3.41/3, 1e-12)
	near(t, "disk_device_total", stepValue(t, rep, "disk_device_total"), stepValue(t, rep, "disk_write_total")*3.41/3, 1e-9)
	rep = run(`, "device": {"bytes_per_record_byte": 0.98}`, 1, 0)
	near(t, "disk_amp at least 1", stepValue(t, rep, "disk_amp"), 1, 0)
	rep = run(`, "device": {"bytes_per_record_byte": 3.41}`, 3, 1.5)
	near(t, "given disk_amp", rep.Workload.Limits.DiskWriteAmplification, 1.5, 0)
	near(t, "disk_device_total with the given amp", stepValue(t, rep, "disk_device_total"), stepValue(t, rep, "disk_write_total")*1.5, 1e-9)
	rep = run(``, 3, 0)
	near(t, "default disk_amp", rep.Workload.Limits.DiskWriteAmplification, DefaultDiskWriteAmplification, 0)
}

func FuzzParseCalibration(f *testing.F) {
	f.Add([]byte(sampleResult))
	f.Add([]byte(`{"result": {"mb_per_sec": 100, "broker_cpu_seconds": 10, "duration_s": 20}}`))
	f.Add([]byte(`{"result": {"records_per_sec": 1e6, "broker_cpu_seconds": 60, "duration_s": 60}, "config": {"record_bytes": 512}}`))
	f.Add([]byte(`{"result": {"mb_per_sec": 300}, "config": {"find_max": 1, "spawn": 3, "replication_factor": 3}}`))
	f.Add([]byte(`{"result": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCalibration(data)
		if err != nil {
			if !errors.Is(err, ErrBadCalibration) {
				t.Fatalf("error not ErrBadCalibration: %v", err)
			}
			return
		}
		for _, v := range []float64{c.RecordsPerSec, c.MBPerSec, c.ProduceP99Ms, c.BrokerCPUSeconds, c.DurationSec, float64(c.RecordBytes)} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("accepted %+v", c)
			}
		}
		if !c.hasCPU() && !c.hasCeiling() {
			t.Fatalf("accepted a calibration with nothing usable: %+v", c)
		}
		// Whatever was accepted plans cleanly or is refused as too large.
		w := Defaults()
		w.SustainedRecordsPerSec = 200_000
		w.Calibration = &c
		rep, err := Plan(w)
		if err != nil {
			if !strings.Contains(err.Error(), "stops at") {
				t.Fatalf("accepted calibration %+v, then Plan: %v", c, err)
			}
			return
		}
		if err := rep.Verify(); err != nil {
			t.Fatal(err)
		}
	})
}
