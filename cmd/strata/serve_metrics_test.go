package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/internal/stratatest"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/metrics/metricstest"
	"github.com/stratalog/strata/segment"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceCount counts the Produce requests a franz-go client wrote.
type produceCount struct {
	mu sync.Mutex
	n  int
}

func (c *produceCount) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 0 && err == nil {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
}

// strata serve --metrics-listeners: the endpoint comes up with the
// broker, /readyz turns ready, /metrics counts the produce a client did
// (scraped over HTTP), a consumer group's lag goes from every record to
// 0 as it consumes and commits, and SIGTERM stops the endpoint with the
// broker.
func TestServeMetricsEndpoint(t *testing.T) {
	const hangGuard = 2 * time.Minute // not a performance threshold
	bin, cleanup, err := stratatest.BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	srv := startServe(t, bin, hangGuard, true, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--metrics-listeners", "http://127.0.0.1:0")
	logs, metricsAddr, kafkaAddr := srv.logs, srv.metrics, srv.kafka
	deadline := time.After(hangGuard)
	base := "http://" + metricsAddr
	for ready := false; !ready; {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ready = resp.StatusCode == http.StatusOK
		if !ready {
			select {
			case <-deadline:
				t.Fatalf("/readyz: %s", resp.Status)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	counts := &produceCount{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.WithHooks(counts), kgo.DefaultProduceTopic("scraped"),
		kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	f, err := metricstest.Scrape(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	counts.mu.Lock()
	reqs := counts.n
	counts.mu.Unlock()
	if got := f.HistogramCount(metrics.RequestTotalTime, "request", "Produce"); got != uint64(reqs) || reqs < 1 {
		t.Errorf("Produce observed %d times, the client wrote %d Produce requests", got, reqs)
	}
	if got := f.Counter(metrics.TopicRecordsIn, "topic", "scraped"); got != n {
		t.Errorf("records in %v, want %d", got, n)
	}
	if f["go_goroutines"] == nil || f["process_resident_memory_bytes"] == nil {
		t.Error("no Go or process metrics")
	}

	// A group that committed offset 0 lags by every record; after it
	// consumes and commits, by none. The log holds the bytes produced.
	adm, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	zero := kadm.Offsets{}
	zero.Add(kadm.Offset{Topic: "scraped", Partition: 0, At: 0, LeaderEpoch: -1})
	if r, err := kadm.NewClient(adm).CommitOffsets(ctx, "scrapers", zero); err != nil || r.Error() != nil {
		t.Fatalf("commit offset 0: %v %v", err, r.Error())
	}
	if f, err = metricstest.Scrape(base + "/metrics"); err != nil {
		t.Fatal(err)
	}
	if got := f.Gauge(metrics.GroupLag, "group", "scrapers"); got != n {
		t.Errorf("lag of a group at offset 0: %v, want %d", got, n)
	}
	if got, in := f.Gauge(metrics.LogSizeBytes, "topic", "scraped"), f.Counter(metrics.TopicBytesIn, "topic", "scraped"); got != in || in == 0 {
		t.Errorf("log size %v, bytes in %v", got, in)
	}
	if got := f.Counter(metrics.ConnectionsAccepted, "listener", "PLAINTEXT"); got < 2 {
		t.Errorf("%v connections accepted", got)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ConsumerGroup("scrapers"), kgo.ConsumeTopics("scraped"),
		kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	consumeAndCommit(t, ctx, cons, n)
	if f, err = metricstest.Scrape(base + "/metrics"); err != nil {
		t.Fatal(err)
	}
	if got := f.Gauge(metrics.GroupLag, "group", "scrapers"); got != 0 {
		t.Errorf("lag after consuming and committing: %v", got)
	}
	if got := f.Gauge(metrics.GroupRetentionMargin, "group", "scrapers"); got != n {
		t.Errorf("retention margin after committing the end: %v, want %d", got, n)
	}

	srv.stop(t, hangGuard)
	if c, err := net.Dial("tcp", metricsAddr); err == nil {
		c.Close()
		t.Fatalf("the metrics endpoint %s still accepts connections after the broker stopped", metricsAddr)
	}
	// The shutdown line names the signal (every log line is in logs now:
	// the reader sent them all before the exit).
	named := false
	for len(logs) > 0 {
		if line := <-logs; strings.Contains(line, `msg="shutting down"`) {
			named = strings.Contains(line, "signal=terminated")
			if !named {
				t.Errorf("shutdown line does not name SIGTERM: %s", line)
			}
		}
	}
	if !named {
		t.Error("no shutdown line naming the signal")
	}
}

// metrics.partition.labels reaches the metrics: log sizes per partition
// with it, per topic without.
func TestStartMetricsPartitionLabels(t *testing.T) {
	for _, labels := range []bool{false, true} {
		cfg := config.Defaults()
		cfg.MetricsListeners = []string{"127.0.0.1:0"}
		cfg.MetricsPartitionLabels = labels
		m, stop, err := startMetrics(cfg, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		m.SetLogs(func() []metrics.LogSize { return []metrics.LogSize{{Topic: "t", Partition: 3, Segments: 1, Bytes: 10}} })
		fams, err := m.Registry().Gather()
		stop()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range fams {
			if f.GetName() != metrics.LogSizeBytes {
				continue
			}
			for _, s := range f.GetMetric() {
				found = true
				hasPartition := false
				for _, l := range s.GetLabel() {
					hasPartition = hasPartition || l.GetName() == "partition"
				}
				if hasPartition != labels {
					t.Errorf("metrics.partition.labels=%v: series %v", labels, s.GetLabel())
				}
			}
		}
		if !found {
			t.Errorf("metrics.partition.labels=%v: no %s series", labels, metrics.LogSizeBytes)
		}
	}
}

// strata serve's metrics report the data directory's block device: with
// a fake sysfs, the device of the directory's filesystem by its number;
// on this machine, the real one when the directory's filesystem has a
// block device in /sys/dev/block, else no series.
func TestStartMetricsDataDevice(t *testing.T) {
	dir := t.TempDir()
	dev, err := segment.DeviceOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	major, minor := segment.DeviceNumbers(dev)
	sys := t.TempDir()
	num := filepath.Join(sys, fmt.Sprintf("%d:%d", major, minor))
	if err := os.Mkdir(num, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(num, "stat"), []byte("1 2 3 4 5 6 7 8 4 2500 9000 0 0 0 0 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, ok := dataDevice(dir, sys)(); !ok || s.InFlight != 4 || s.BusySeconds != 2.5 || s.QueueSeconds != 9 {
		t.Errorf("fake sysfs: %+v %v", s, ok)
	}
	if s, ok := dataDevice(dir, t.TempDir())(); ok {
		t.Errorf("a sysfs without the device: %+v", s)
	}

	cfg := config.Defaults()
	cfg.MetricsListeners = []string{"127.0.0.1:0"}
	m, stop, err := startMetrics(cfg, dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	fams, err := m.Registry().Gather()
	stop()
	if err != nil {
		t.Fatal(err)
	}
	var devices []string
	for _, f := range fams {
		if f.GetName() != metrics.LogDeviceInFlight {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "device" {
					devices = append(devices, l.GetValue())
				}
			}
		}
	}
	real := filepath.Join(sysDevBlock, fmt.Sprintf("%d:%d", major, minor))
	if _, err := os.Stat(filepath.Join(real, "stat")); err != nil {
		t.Logf("%s: %v: no block device to report", dir, err)
		if len(devices) != 0 {
			t.Errorf("%s series %v for a directory without a block device", metrics.LogDeviceInFlight, devices)
		}
		return
	}
	p, err := filepath.EvalSymlinks(real)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Base(p); len(devices) != 1 || devices[0] != want {
		t.Errorf("%s devices %v, want [%s]", metrics.LogDeviceInFlight, devices, want)
	}
}

// consumeAndCommit polls cons (a group member) until it has n records,
// commits them and closes it.
func consumeAndCommit(t *testing.T, ctx context.Context, cons *kgo.Client, n int) {
	t.Helper()
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cons.Close()
}
