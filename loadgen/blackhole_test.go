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
// reports both; --profile leaves the first broker's CPU profile behind.
func TestCompareBlackhole(t *testing.T) {
	cfg := smallRun(EngineNative)
	cfg.Duration = time.Second
	cfg.CompareBlackhole = true
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
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ratio strata / blackhole") {
		t.Fatalf("table has no baseline section:\n%s", out.String())
	}
	prof, err := os.ReadFile(cfg.Profile)
	if err != nil || len(prof) == 0 {
		t.Fatalf("broker CPU profile: %d bytes, %v", len(prof), err)
	}
}
