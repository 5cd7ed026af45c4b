package main

import (
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/server"
)

func TestOpenRemote(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(engine.Options{Dir: filepath.Join(dir, "data"), Log: engine.DefaultLogConfig(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	met := metrics.New()
	srv := server.New(server.Config{Logger: logger, Metrics: met}, eng)
	defer srv.Close()

	props := remotePropsOf(map[string]string{
		"log.retention.ms":                "1000",
		"strata.remote.storage.type":      "local",
		"strata.remote.storage.local.dir": filepath.Join(dir, "store"),
	})
	if len(props) != 2 {
		t.Fatalf("remote props %v", props)
	}
	if m, err := openRemote(config.Defaults(), nil, filepath.Join(dir, "data"), eng, srv, logger); m != nil || err != nil {
		t.Fatalf("no properties: %v %v", m, err)
	}
	m, err := openRemote(config.Defaults(), props, filepath.Join(dir, "data"), eng, srv, logger)
	if err != nil || m == nil {
		t.Fatalf("openRemote: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", remoteMetadataDir)); err != nil {
		t.Fatalf("metadata directory: %v", err)
	}
	// The manager's counters and copy backlog are on /metrics.
	fams, err := met.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range fams {
		found[f.GetName()] = true
	}
	for _, name := range []string{"strata_remote_segments_copied_total", "strata_remote_read_seconds_total", "strata_remote_read_time_seconds", "strata_remote_fetch_throttle_seconds_total", "strata_remote_copy_throttle_seconds_total", "strata_remote_copy_lag_bytes", "strata_remote_read_ahead_fetches_total", "strata_remote_copy_cache_hits_total", "strata_remote_copy_cache_bytes"} {
		if !found[name] {
			t.Errorf("metric %s not exported", name)
		}
	}
	closeRemote(m, srv)
	// remote.log.reader.read.ahead.bytes: its default is on, 0 is off.
	if d := config.Defaults().RemoteReadAheadBytes; readAheadBytes(d) != 16<<20 {
		t.Fatalf("read-ahead default %d", d)
	}
	if readAheadBytes(0) >= 0 {
		t.Fatal("remote.log.reader.read.ahead.bytes=0 does not turn read-ahead off")
	}
	// The throttle keys parse to the fields openRemote passes to rlm.Options.
	thr := config.Defaults()
	if thr.RemoteCopyMaxBytesPerSec != math.MaxInt64 || thr.RemoteFetchMaxBytesPerSec != math.MaxInt64 {
		t.Fatalf("throttle defaults %d %d, want unbounded", thr.RemoteCopyMaxBytesPerSec, thr.RemoteFetchMaxBytesPerSec)
	}
	if thr.RemoteCopySpreadMs != 5000 {
		t.Fatalf("remote.log.manager.copy.spread.ms default %d, want 5000", thr.RemoteCopySpreadMs)
	}
	if err := thr.Apply(map[string]string{"remote.log.manager.copy.max.bytes.per.second": "1000", "remote.log.manager.fetch.max.bytes.per.second": "2000",
		"remote.log.manager.copy.spread.ms": "0"}); err != nil ||
		thr.RemoteCopyMaxBytesPerSec != 1000 || thr.RemoteFetchMaxBytesPerSec != 2000 || thr.RemoteCopySpreadMs != 0 {
		t.Fatalf("throttles %d %d spread %d: %v", thr.RemoteCopyMaxBytesPerSec, thr.RemoteFetchMaxBytesPerSec, thr.RemoteCopySpreadMs, err)
	}
	m, err = openRemote(thr, props, filepath.Join(dir, "data"), eng, srv, logger)
	if err != nil || m == nil {
		t.Fatalf("openRemote with throttles: %v", err)
	}
	closeRemote(m, srv)
	props["strata.remote.storage.typo"] = "x"
	if m, err := openRemote(config.Defaults(), props, filepath.Join(dir, "data"), eng, srv, logger); err == nil || m != nil {
		t.Fatal("an unknown strata.remote.storage key was accepted")
	}
}
