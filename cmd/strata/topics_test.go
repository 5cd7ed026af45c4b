package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/stratatest"
	"github.com/stratalog/strata/metrics/metricstest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The strata binary end to end: `strata serve` with tiered storage (the
// local-directory store) and `strata topics describe` against it. A
// topic written with tiered storage off shows all its bytes local and
// none remote; once `strata topics alter-config` turns
// remote.storage.enable on, the broker copies its rolled segments and
// deletes them locally, and describe shows the earliest local offset
// (ListOffsets -4) one past the last tiered offset (-5), the local bytes
// (the active segment) and the remote bytes (the .log objects in the
// store directory), adding up to what was local before; a plain topic
// shows -1 for the tiered fields, a tiered one with nothing copied 0
// remote bytes. `strata consume` then reads every
// record from the beginning, the tiered ones through the remote log
// manager with read-ahead (strata_remote_read_ahead_fetches_total on
// /metrics).
func TestTopicsDescribeTieredBinary(t *testing.T) {
	const hangGuard = 2 * time.Minute // not a performance threshold
	bin, cleanup, err := stratatest.BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	dir := t.TempDir()
	dataDir, storeDir := filepath.Join(dir, "data"), filepath.Join(dir, "store")
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte(strings.Join([]string{
		"strata.remote.storage.type=local",
		"strata.remote.storage.local.dir=" + storeDir,
		"remote.log.manager.task.interval.ms=20",
		"log.retention.check.interval.ms=20",
		"remote.log.reader.read.ahead.bytes=1048576",
	}, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, bin, hangGuard, true, "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--config", props,
		"--metrics-listeners", "http://127.0.0.1:0")
	metricsAddr, addr := srv.metrics, srv.kafka

	strata := func(args ...string) string {
		t.Helper()
		c := exec.Command(bin, args...)
		c.Env = append(os.Environ(), brokersEnv+"="+addr)
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		if err := c.Run(); err != nil {
			t.Fatalf("strata %v: %v\n%s%s", args, err, out.String(), errb.String())
		}
		return out.String()
	}
	describe := func() (tiered, plain, empty partitionJSON) {
		t.Helper()
		var got []topicJSON
		out := strata("topics", "describe", "tiered", "plain", "empty", "--format", "json")
		if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 3 || got[0].Name != "tiered" || got[2].Name != "empty" ||
			len(got[0].Partitions) != 1 || len(got[1].Partitions) != 1 || len(got[2].Partitions) != 1 {
			t.Fatalf("describe --format json: %v\n%s", err, out)
		}
		return got[0].Partitions[0], got[1].Partitions[0], got[2].Partitions[0]
	}

	strata("topics", "create", "tiered", "--partitions", "1", "--config", "segment.bytes=4096",
		"--config", "local.retention.bytes=0", "--config", "file.delete.delay.ms=0")
	strata("topics", "create", "plain", "--partitions", "1")
	strata("topics", "create", "empty", "--partitions", "1", "--config", "remote.storage.enable=true")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("tiered"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	const n = 200
	for i := 0; i < n; i++ { // a batch each: ~15 segments
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%03d-%s", i, strings.Repeat("v", 200)))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// Tiered storage off: everything local, nothing remote.
	p, q, e := describe()
	total := p.LocalBytes
	if p.LogStartOffset != 0 || p.HighWatermark != n || p.LocalLogStartOffset != 0 || p.TieredOffset != -1 ||
		total < n*200 || p.RemoteBytes != -1 {
		t.Fatalf("tiered partition before remote.storage.enable: %+v", p)
	}
	if q.LocalLogStartOffset != 0 || q.TieredOffset != -1 || q.LocalBytes != 0 || q.RemoteBytes != -1 {
		t.Fatalf("plain partition %+v", q)
	}
	if e.LocalLogStartOffset != 0 || e.TieredOffset != -1 || e.LocalBytes != 0 || e.RemoteBytes != 0 {
		t.Fatalf("tiered partition with nothing copied: %+v", e)
	}

	// On: wait (bounded) until the partition directory holds only its
	// active segment and the local log starts past the last tiered offset.
	strata("topics", "alter-config", "tiered", "--set", "remote.storage.enable=true")
	partDir := filepath.Join(dataDir, "tiered-0")
	for {
		p, _, _ = describe()
		logs, err := filepath.Glob(filepath.Join(partDir, "*.log"))
		if err != nil {
			t.Fatal(err)
		}
		if len(logs) == 1 && p.LocalLogStartOffset > 0 && p.TieredOffset == p.LocalLogStartOffset-1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not tiered: %+v, %d local segment files in %s", p, len(logs), partDir)
		case <-time.After(20 * time.Millisecond):
		}
	}
	var remote int64 // the store's .log objects: its files less their 64-byte headers
	if err := filepath.Walk(storeDir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(path, ".log") {
			remote += info.Size() - 64
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if p.LogStartOffset != 0 || p.HighWatermark != n || p.RemoteBytes != remote || p.LocalBytes <= 0 ||
		p.LocalBytes >= 4096 || p.LocalBytes+p.RemoteBytes != total {
		t.Fatalf("tiered partition %+v: want remote bytes %d (the store's .log objects), local and remote adding up to %d", p, remote, total)
	}
	text := strings.Join(strings.Fields(strata("topics", "describe", "tiered")), " ")
	want := fmt.Sprintf("LogStartOffset: 0 HighWatermark: %d LocalLogStartOffset: %d TieredOffset: %d LocalBytes: %d RemoteBytes: %d",
		n, p.LocalLogStartOffset, p.TieredOffset, p.LocalBytes, p.RemoteBytes)
	if !strings.Contains(text, want) {
		t.Fatalf("text describe lacks %q:\n%s", want, text)
	}

	// Every record from the beginning, most of them from the store.
	out := strata("consume", "tiered", "-e")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("consumed %d records, want %d", len(lines), n)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, fmt.Sprintf("%03d-", i)) {
			t.Fatalf("record %d: %.10q", i, l)
		}
	}
	f, err := metricstest.Scrape("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	reads, ahead, misses := f.Counter("strata_remote_reads_total"), f.Counter("strata_remote_read_ahead_fetches_total"), f.Counter("strata_remote_cache_misses_total")
	if reads == 0 || ahead == 0 || misses >= reads {
		t.Fatalf("remote reads %v, read-ahead fetches %v, cache misses %v: the consumer's remote reads were not read ahead", reads, ahead, misses)
	}
	t.Logf("remote reads %v, read-ahead fetches %v, cache misses %v", reads, ahead, misses)

	// The scrape calibrates a tiered plan: its upload and remote read
	// rates (strata_remote_copied_bytes_total / strata_remote_copy_seconds_total,
	// strata_remote_read_bytes_total / strata_remote_read_seconds_total).
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	metricsFile := filepath.Join(t.TempDir(), "metrics.txt")
	if err := os.WriteFile(metricsFile, scrape, 0o644); err != nil {
		t.Fatal(err)
	}
	var planOut, planErr bytes.Buffer
	if err := planMain([]string{"--rate", "1000", "--retention", "24h", "--hot-window", "1h", "--calibrate", metricsFile}, &planOut, &planErr); err != nil {
		t.Fatalf("plan calibrated by the scrape: %v\n%s%s", err, planOut.String(), planErr.String())
	}
	text = planOut.String()
	for _, want := range []string{"upload_mbps = cal_copied_bytes / cal_copy_s / 10^6 = ", "remote_read_mbps = cal_read_bytes / cal_read_s / 10^6 = ",
		"brokers_upload = ceil(write_peak / (upload_mbps × util))", "remote_catchup_h = "} {
		if !strings.Contains(text, want) {
			t.Errorf("plan lacks %q:\n%s", want, text)
		}
	}
	recomputeSteps(t, text)

	srv.stop(t, hangGuard)
}
