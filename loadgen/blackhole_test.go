package loadgen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCompareBlackhole: --compare-blackhole runs the workload against a
// storing broker and then a --blackhole broker, each spawned for it, and
// reports both; --profile leaves the first broker's CPU profile behind;
// --compare-device then probes the spawn directory's filesystem.
func TestCompareBlackhole(t *testing.T) {
	cfg := smallRun(EngineNative)
	cfg.Duration = time.Second
	cfg.CompareBlackhole = true
	cfg.CompareDevice, cfg.DeviceProbeBytes = true, 16<<20
	cfg.Profile = filepath.Join(t.TempDir(), "broker.pprof")
	rep, err := Run(testCtx(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, rep, 2000)
	bl := rep.Baseline
	if bl == nil || bl.Mode != "blackhole" {
		t.Fatalf("no blackhole baseline: %+v", bl)
	}
	if bl.Result.RecordsAcked != 2000 || bl.Result.RecordsFailed != 0 {
		t.Fatalf("baseline acked %d, failed %d: %+v", bl.Result.RecordsAcked, bl.Result.RecordsFailed, bl.Result.Errors)
	}
	if bl.Result.RecordsConsumed != 0 {
		t.Fatalf("baseline consumed %d records; it runs without consumers", bl.Result.RecordsConsumed)
	}
	if bl.Ratio <= 0 || bl.Result.BrokerCPUSeconds == nil {
		t.Fatalf("baseline ratio %v, broker cpu %v", bl.Ratio, bl.Result.BrokerCPUSeconds)
	}
	checkDevice(t, &rep.Result, true)
	checkDevice(t, &bl.Result, false)
	db := rep.DeviceBaseline
	if db == nil || db.Mode != "device" || db.MBPerSec <= 0 || db.Bytes != 16<<20 || db.Ratio <= 0 {
		t.Fatalf("device baseline %+v", db)
	}
	if ents, err := os.ReadDir(db.Dir); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "strata-loadgen-probe-") {
				t.Errorf("probe file %s left in %s", e.Name(), db.Dir)
			}
		}
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ratio strata / blackhole", "device ceiling MB/s", "acked record MB/s / ceiling"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, out.String())
		}
	}
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil || !strings.Contains(page.String(), "Device ceiling") {
		t.Fatalf("HTML report without the device ceiling (%v)", err)
	}
	t.Logf("table:\n%s", out.String())
	prof, err := os.ReadFile(cfg.Profile)
	if err != nil || len(prof) == 0 {
		t.Fatalf("broker CPU profile: %d bytes, %v", len(prof), err)
	}
}
