package loadgen

import (
	"strings"
	"testing"
	"time"
)

// --spawn-controllers: its range, that it needs --spawn, and that the
// controller faults then need three controllers (not three brokers).
func TestSpawnControllersValidate(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.Spawn = 2
		c.Rate = 1000
		c.Duration = 10 * time.Second
		return c
	}
	for name, tc := range map[string]struct {
		mod  func(*Config)
		want string // "" = valid
	}{
		"three":          {func(c *Config) { c.SpawnControllers = 3 }, ""},
		"faults":         {func(c *Config) { c.SpawnControllers, c.Faults = 3, []string{FaultControllerKill, FaultControllerPause} }, ""},
		"one broker":     {func(c *Config) { c.Spawn, c.SpawnControllers, c.Faults = 1, 3, []string{FaultControllerKill} }, ""},
		"negative":       {func(c *Config) { c.SpawnControllers = -1 }, "--spawn-controllers -1 out of range 0..7"},
		"too many":       {func(c *Config) { c.SpawnControllers = 8 }, "--spawn-controllers 8 out of range 0..7"},
		"no spawn":       {func(c *Config) { c.Spawn, c.Brokers, c.SpawnControllers = 0, []string{"127.0.0.1:1"}, 3 }, "--spawn-controllers needs --spawn"},
		"small quorum":   {func(c *Config) { c.SpawnControllers, c.Faults = 2, []string{FaultControllerPause} }, "need --spawn-controllers 3 or more"},
		"combined small": {func(c *Config) { c.Faults = []string{FaultControllerKill} }, "need --spawn 3 or more"},
	} {
		c := base()
		tc.mod(&c)
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// TestVerifyThroughSeparateControllerFaults: two spawned broker-only
// nodes and three controller-only nodes (--spawn-controllers 3) as the
// quorum, replication factor 2, an idempotent acks=all producer; the
// active controller is killed (and restarted) once and paused once. The
// faults hit controller-only nodes (ids 2 to 4), never a broker: no ISR
// changes; while the controller is down a topic is created and deleted
// through a broker, and another controller logs leading the quorum; every
// acknowledged record is read back once, in order.
func TestVerifyThroughSeparateControllerFaults(t *testing.T) {
	cfg := campaignConfig(2, FaultControllerKill, FaultControllerPause)
	cfg.SpawnControllers = 3
	cfg.Duration = 12 * time.Second
	cfg.FaultInterval = time.Second
	cfg.FaultCount = 2
	cfg.FaultPause = 3 * time.Second
	rep, log := runCampaign(t, cfg, 3*time.Minute)
	f := rep.Faults
	if f == nil || f.Total != 2 || len(f.Events) != 2 || f.Verdict != "ok" {
		t.Fatalf("faults %+v\nlog:\n%s", f, log)
	}
	kinds := map[string]bool{}
	for _, e := range f.Events {
		if e.Error != "" || !e.ControllerOnly || e.Broker < 2 || e.Broker > 4 || e.RecoveredS == nil ||
			e.MetadataS == nil || *e.MetadataS <= 0 || e.NewController == nil ||
			int(*e.NewController) == e.Broker || *e.NewController < 2 || *e.NewController > 4 {
			t.Fatalf("fault event %+v: want a controller-only node (2-4) stopped, metadata written meanwhile, another controller leading\nlog:\n%s", e, log)
		}
		if e.ISRShrinks != 0 || e.ISRExpands != 0 {
			t.Fatalf("fault event %+v: ISR changes, yet no broker was touched", e)
		}
		if e.Kind == FaultControllerPause && e.DownS < 3 {
			t.Fatalf("controller paused %.1f s, want at least 3", e.DownS)
		}
		kinds[e.Kind] = true
	}
	if !kinds[FaultControllerKill] || !kinds[FaultControllerPause] {
		t.Fatalf("events %+v: want one of each kind", f.Events)
	}
	v := rep.Verify
	if v == nil || v.Verdict != "ok" || v.Lost != 0 || v.Duplicated != 0 || v.Reordered != 0 || v.Incomplete != "" {
		t.Fatalf("verify %+v", v)
	}
	if r := rep.Result; r.RecordsAcked != r.RecordsSent || r.RecordsAcked != 6000 {
		t.Fatalf("acked %d of %d sent (failed %d: %+v)", r.RecordsAcked, r.RecordsSent, r.RecordsFailed, r.Errors)
	}
	if len(rep.Target.Brokers) != 2 || rep.Config.SpawnControllers != 3 {
		t.Fatalf("target %+v, spawn_controllers %d", rep.Target, rep.Config.SpawnControllers)
	}
	if !strings.Contains(log, "spawned 3 controller-only node(s) as the quorum") {
		t.Errorf("log lacks the controllers' line:\n%s", log)
	}
	var out strings.Builder
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"controller-kill of the active controller, controller-only node ", "controller-pause of the active controller, controller-only node ",
		"metadata written after ", "(new controller "} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
	t.Logf("table:\n%s", out.String())
}
