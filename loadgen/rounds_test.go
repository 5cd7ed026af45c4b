package loadgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCompareRounds: --compare-rounds 2 runs strata and the blackhole
// twice, each side first once, with fresh brokers, and reports both pairs,
// their median ratio and spread, in the table and the JSON.
func TestCompareRounds(t *testing.T) {
	cfg := smallRun(EngineNative)
	cfg.Duration = time.Second
	cfg.CompareBlackhole, cfg.CompareRounds = true, 2
	rep, err := RunRounds(testCtx(t, 3*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, rep, 2000)
	rs := rep.Rounds
	if rs == nil || len(rs.Rounds) != 2 {
		t.Fatalf("rounds: %+v", rs)
	}
	if rs.Rounds[0].First != "strata" || rs.Rounds[1].First != "blackhole" {
		t.Fatalf("first sides %q, %q: want strata, then blackhole", rs.Rounds[0].First, rs.Rounds[1].First)
	}
	for i, r := range rs.Rounds {
		if r.RecordsPerSec <= 0 || r.BaselineRecordsPerSec <= 0 || r.Ratio <= 0 || r.BrokerCPUUsPerRecord <= 0 || r.BaselineBrokerCPUUs <= 0 || r.ClientCPUUsPerRecord <= 0 || r.BaselineClientCPUUs <= 0 {
			t.Fatalf("round %d: %+v", i+1, r)
		}
		if want := r.RecordsPerSec / r.BaselineRecordsPerSec; r.Ratio < want*0.999 || r.Ratio > want*1.001 {
			t.Fatalf("round %d: ratio %v, want %v", i+1, r.Ratio, want)
		}
		// The strata side consumed; the blackhole side has no consumers.
		if r.E2EP99Ms <= 0 || r.BaselineE2EP99Ms != 0 {
			t.Fatalf("round %d: e2e p99 %v ms, blackhole's %v", i+1, r.E2EP99Ms, r.BaselineE2EP99Ms)
		}
	}
	lo, hi := min(rs.Rounds[0].Ratio, rs.Rounds[1].Ratio), max(rs.Rounds[0].Ratio, rs.Rounds[1].Ratio)
	if rs.MinRatio != lo || rs.MaxRatio != hi || rs.MedianRatio != (lo+hi)/2 {
		t.Fatalf("min %v max %v median %v; rounds %v and %v", rs.MinRatio, rs.MaxRatio, rs.MedianRatio, lo, hi)
	}
	if rs.Report < 1 || rs.Report > 2 || rep.Baseline == nil || rep.Baseline.Ratio != rs.Rounds[rs.Report-1].Ratio {
		t.Fatalf("report round %d, its baseline %+v", rs.Report, rep.Baseline)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "over 2 rounds: median") || !strings.Contains(out.String(), "blackhole e2e p99 ms") {
		t.Fatalf("table without the rounds:\n%s", out.String())
	}
	b, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(b), `"median_ratio"`) {
		t.Fatalf("JSON without the rounds (%v)", err)
	}
	t.Logf("table:\n%s", out.String())
}

func TestCompareRoundsNeedsBlackhole(t *testing.T) {
	cfg := smallRun(EngineNative)
	cfg.CompareRounds = 3
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--compare-rounds") {
		t.Fatalf("--compare-rounds without --compare-blackhole: %v", err)
	}
	cfg.CompareBlackhole, cfg.CompareRounds = true, MaxCompareRounds+1
	if err := cfg.Validate(); err == nil {
		t.Fatal("--compare-rounds above the maximum accepted")
	}
}

// TestCompareBinary: --compare-binary with --compare-rounds 2 runs the
// workload, consumers included, against brokers spawned from the other
// executable on the baseline side only (a wrapper that logs its calls),
// each side first once, and reports both builds.
func TestCompareBinary(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	other := filepath.Join(dir, "strata-before")
	script := fmt.Sprintf("#!/bin/sh\necho \"$1\" >> %q\nexec %q \"$@\"\n", calls, strataBin)
	if err := os.WriteFile(other, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := smallRun(EngineNative)
	cfg.Duration = time.Second
	cfg.CompareBinary, cfg.CompareRounds = other, 2
	rep, err := RunRounds(testCtx(t, 3*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, rep, 2000)
	bl := rep.Baseline
	if bl == nil || bl.Mode != BaselineBinary || bl.Binary != other {
		t.Fatalf("baseline %+v", bl)
	}
	if bl.Result.RecordsAcked != 2000 || bl.Result.RecordsConsumed != bl.Result.RecordsAcked {
		t.Fatalf("baseline side acked %d, consumed %d: the workload (consumers too) must run there", bl.Result.RecordsAcked, bl.Result.RecordsConsumed)
	}
	rs := rep.Rounds
	if rs == nil || rs.Mode != BaselineBinary || len(rs.Rounds) != 2 || rs.Rounds[0].First != "strata" || rs.Rounds[1].First != "baseline" {
		t.Fatalf("rounds: %+v", rs)
	}
	got, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(got), "serve\n"); n != 2 {
		t.Fatalf("the other executable served %d times, want once per round:\n%s", n, got)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"brokers spawned from " + other, "ratio strata / baseline over 2 rounds", "end-to-end p99 ms"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("table without %q:\n%s", want, out.String())
		}
	}
	t.Logf("table:\n%s", out.String())
}

func TestCompareBinaryExclusive(t *testing.T) {
	cfg := smallRun(EngineNative)
	cfg.CompareBinary, cfg.CompareBlackhole = "/bin/true", true
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "exclusive") {
		t.Fatalf("--compare-binary with --compare-blackhole: %v", err)
	}
	cfg.CompareBlackhole, cfg.Spawn, cfg.Brokers = false, 0, []string{"127.0.0.1:1"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--spawn") {
		t.Fatalf("--compare-binary without --spawn: %v", err)
	}
}
