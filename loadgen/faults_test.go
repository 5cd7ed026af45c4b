package loadgen

import (
	"strings"
	"testing"
	"time"
)

// TestVerifyThroughKills is a short fault campaign against real brokers:
// three spawned brokers, replication factor 3, an idempotent acks=all
// producer, three SIGKILL-and-restart cycles while producing, then the
// read-back: every acknowledged record read back once, in order.
func TestVerifyThroughKills(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Spawn = 3
	cfg.StrataBin = strataBin
	cfg.SpawnSegmentBytes = 4 << 20
	cfg.ReplicationFactor = 3
	cfg.Partitions = 4
	cfg.RecordBytes = 100
	cfg.Idempotent = true
	cfg.Rate = 500
	cfg.Duration = 8 * time.Second
	cfg.Verify = true
	cfg.VerifyTimeout = 30 * time.Second
	cfg.Faults = []string{FaultKill}
	cfg.FaultInterval = time.Second
	cfg.FaultCount = 3
	cfg.DrainTimeout = 20 * time.Second
	var logw strings.Builder
	cfg.Log = &logw
	rep, err := Run(testCtx(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, logw.String())
	}
	f := rep.Faults
	if f == nil || f.Version != FaultsVersion || len(f.Ran) != 1 || f.Ran[0].Kind != FaultKill || f.Ran[0].Count != 3 ||
		f.Ran[0].Failed != 0 || f.Total != 3 || len(f.Events) != 3 {
		t.Fatalf("faults %+v", f)
	}
	killed := map[int]bool{}
	for _, e := range f.Events {
		if e.Error != "" || e.DownS <= 0 || e.AtS <= 0 {
			t.Fatalf("fault event %+v", e)
		}
		killed[e.Broker] = true
	}
	if len(killed) != 3 {
		t.Fatalf("three kills hit brokers %v: want each broker once (one round)", killed)
	}
	v := rep.Verify
	if v == nil || v.Version != VerifyVersion || len(v.Partitions) != 4 {
		t.Fatalf("verify %+v", v)
	}
	if v.Verdict != "ok" || v.Lost != 0 || v.Duplicated != 0 || v.Reordered != 0 || v.Incomplete != "" {
		t.Fatalf("verify %s\n%+v", v.Summary(), v)
	}
	r := rep.Result
	if v.Acked != r.RecordsAcked || r.RecordsAcked != 4000 || v.Read < v.Acked {
		t.Fatalf("verify acked %d read %d, run acked %d of %d sent (failed %d: %+v)", v.Acked, v.Read, r.RecordsAcked, r.RecordsSent, r.RecordsFailed, r.Errors)
	}
	var txt strings.Builder
	if err := rep.WriteTable(&txt); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"kill   3 ran, 0 failed", "verify OK: 4,000 acknowledged"} {
		if !strings.Contains(txt.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, txt.String())
		}
	}
}
