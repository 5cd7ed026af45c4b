package loadgen

// End-to-end tests against real `strata serve` child processes. The strata
// binary is built once, in TestMain.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/stratatest"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var strataBin string

func TestMain(m *testing.M) {
	bin, cleanup, err := stratatest.BuildBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	strataBin = bin
	code := m.Run()
	if bench.cluster != nil {
		if err := bench.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the benchmark broker:", err)
		}
	}
	cleanup()
	os.Exit(code)
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// smallRun is a bounded run against one spawned broker: 2 s at 2000
// records/s to 8 partitions, with a tail consumer.
func smallRun(engine string) Config {
	cfg := DefaultConfig()
	cfg.Spawn = 1
	cfg.StrataBin = strataBin
	cfg.SpawnSegmentBytes = 8 << 20
	cfg.Engine = engine
	cfg.Partitions = 8
	cfg.Rate = 2000
	cfg.Duration = 2 * time.Second
	cfg.Consumers = 1
	cfg.DrainTimeout = 20 * time.Second
	return cfg
}

func checkClean(t *testing.T, rep *Report, wantRecords int64) {
	t.Helper()
	r := rep.Result
	if r.RecordsSent != wantRecords || r.RecordsAcked != wantRecords {
		t.Fatalf("sent %d acked %d, want %d each; errors %+v", r.RecordsSent, r.RecordsAcked, wantRecords, r.Errors)
	}
	if r.RecordsFailed != 0 || r.ConsumeErrors != 0 || len(r.Errors) != 0 {
		t.Fatalf("failed %d, consume errors %d: %+v", r.RecordsFailed, r.ConsumeErrors, r.Errors)
	}
	if r.RecordsConsumed != r.RecordsAcked {
		t.Fatalf("consumed %d of %d acked records", r.RecordsConsumed, r.RecordsAcked)
	}
	if r.ProduceP50Ms <= 0 || r.ProduceMaxMs < r.ProduceP99Ms || r.E2EP50Ms <= 0 {
		t.Fatalf("latencies p50 %v p99 %v max %v e2e p50 %v", r.ProduceP50Ms, r.ProduceP99Ms, r.ProduceMaxMs, r.E2EP50Ms)
	}
	if r.Batches == 0 || r.Requests == 0 || r.RecordsPerBatch < 1 {
		t.Fatalf("batches %d requests %d records/batch %v", r.Batches, r.Requests, r.RecordsPerBatch)
	}
	if r.BrokerCPUSeconds == nil || *r.BrokerCPUSeconds <= 0 || r.BrokerRSSBytes <= 0 || r.ClientCPUSeconds <= 0 {
		t.Fatalf("resources: broker cpu %v rss %d client cpu %v", r.BrokerCPUSeconds, r.BrokerRSSBytes, r.ClientCPUSeconds)
	}
	if len(rep.Timeline) == 0 || len(rep.Distribution.Produce) == 0 || len(rep.Distribution.E2E) == 0 {
		t.Fatalf("timeline %d, distributions %d/%d", len(rep.Timeline), len(rep.Distribution.Produce), len(rep.Distribution.E2E))
	}
}

// checkDevice checks a spawned run's device traffic where the spawn
// directory is on a block device: present, and with written (acks=all
// flushes the log) true, bytes written.
func checkDevice(t *testing.T, r *Result, written bool) {
	t.Helper()
	if _, err := lookupDevice(spawnParentDir()); err != nil {
		if r.Device != nil {
			t.Fatalf("device traffic %+v without a block device (%v)", r.Device, err)
		}
		t.Logf("no device traffic: %v", err)
		return
	}
	d := r.Device
	if d == nil || d.Name == "" || d.WriteBytes < 0 || d.ReadBytes < 0 || d.BusyMs < 0 || d.BusyShare < 0 {
		t.Fatalf("device traffic %+v", d)
	}
	if written && (d.WriteBytes <= 0 || d.WriteRequests <= 0 || d.MeanWriteBytes <= 0 || d.BytesPerRecordByte <= 0) {
		t.Fatalf("device traffic of a storing broker: %+v", d)
	}
	t.Logf("device %s: %d bytes in %d writes, %.2f bytes/record byte, busy %.1f%%", d.Name, d.WriteBytes, d.WriteRequests,
		d.BytesPerRecordByte, 100*d.BusyShare)
}

func TestLoadAgainstSpawnedBroker(t *testing.T) {
	for _, engine := range []string{EngineKgo, EngineNative} {
		t.Run(engine, func(t *testing.T) {
			cfg := smallRun(engine)
			cfg.ConsumerProfile = filepath.Join(t.TempDir(), "consumer.pprof")
			rep, err := Run(testCtx(t, 2*time.Minute), cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkClean(t, rep, 4000)
			if rep.Result.TargetRate != 2000 || rep.Result.DurationS < 1.9 {
				t.Fatalf("target %v over %v s", rep.Result.TargetRate, rep.Result.DurationS)
			}
			if prof, err := os.ReadFile(cfg.ConsumerProfile); err != nil || len(prof) == 0 {
				t.Fatalf("consumer process CPU profile: %d bytes, %v", len(prof), err)
			}
			checkDevice(t, &rep.Result, true)
		})
	}
}

// TestConsumerDelay: consumers that start 1 s after the producers read
// back everything from the run's first offsets; the first records waited
// about that long, so end-to-end max is at least the delay, while the
// produce latencies do not include it.
func TestConsumerDelay(t *testing.T) {
	cfg := smallRun(EngineNative)
	cfg.ConsumerDelay = time.Second
	rep, err := Run(testCtx(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, rep, 4000)
	r := rep.Result
	if r.E2EMaxMs < 900 || r.ProduceP99Ms >= 900 {
		t.Fatalf("end-to-end max %v ms, produce p99 %v ms: want the 1 s delay in the first and not in the second", r.E2EMaxMs, r.ProduceP99Ms)
	}
	if rep.Config.ConsumerDelayS != 1 {
		t.Fatalf("report config consumer_delay_s %v", rep.Config.ConsumerDelayS)
	}
}

// TestLeadInNotCounted: after a warm-up, each measured run starts with a
// lead-in whose records are produced (and consumed) but not counted, on
// both engines. Without consumers the warm-up is a run of its own and the
// lead-in a quarter of the measured run (500 ms here); with consumers the
// warm-up is the lead-in, the consumers reading from its start
// (consumersWarmUp), so the topic holds fewer records.
func TestLeadInNotCounted(t *testing.T) {
	for _, engine := range []string{EngineKgo, EngineNative} {
		for _, consumers := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s/consumers=%d", engine, consumers), func(t *testing.T) {
				ctx := testCtx(t, 2*time.Minute)
				cl, err := Spawn(ctx, SpawnOptions{Bin: strataBin, Brokers: 1, SegmentBytes: 8 << 20})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cl.Stop() })
				cfg := smallRun(engine)
				cfg.Spawn, cfg.Brokers = 0, cl.Addrs()
				cfg.Warmup = 500 * time.Millisecond
				cfg.Consumers = consumers
				rep, err := Run(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				r := rep.Result // 2 s at 2000 rec/s
				if r.RecordsSent != 4000 || r.RecordsAcked != 4000 || r.RecordsConsumed != int64(4000*consumers) || r.RecordsFailed != 0 || len(r.Errors) != 0 {
					t.Fatalf("sent %d acked %d consumed %d failed %d, want 4000, 4000, %d, 0: %+v",
						r.RecordsSent, r.RecordsAcked, r.RecordsConsumed, r.RecordsFailed, 4000*consumers, r.Errors)
				}
				if d := rep.Result.DurationS; d < 1.9 || d > 3 {
					t.Fatalf("measured %v s, want about 2", d)
				}
				if rep.Config.WarmupConsumers != (consumers > 0) {
					t.Fatalf("config warmup_consumers %v with %d consumers", rep.Config.WarmupConsumers, consumers)
				}
				admin, err := kgo.NewClient(kgo.SeedBrokers(cl.Addrs()...))
				if err != nil {
					t.Fatal(err)
				}
				defer admin.Close()
				ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, cfg.Topic)
				if err != nil {
					t.Fatal(err)
				}
				var total int64
				ends.Each(func(lo kadm.ListedOffset) { total += lo.Offset })
				// Without consumers: the warm-up's 1000, the lead-in's 1000
				// and the measured 4000; with them: the warm-up as the
				// lead-in, 1000, and the measured 4000.
				want := int64(6000)
				if consumers > 0 {
					want = 5000
				}
				if total != want {
					t.Fatalf("the topic holds %d records, want %d", total, want)
				}
			})
		}
	}
}

// TestKeyedCompressedLoad runs the keyed, skewed, compressed, acks=1 and
// closed-loop variants on both engines, bounded by a record count.
func TestKeyedCompressedLoad(t *testing.T) {
	for _, engine := range []string{EngineKgo, EngineNative} {
		t.Run(engine, func(t *testing.T) {
			cfg := smallRun(engine)
			cfg.Rate = 0 // closed loop
			cfg.Duration = 0
			cfg.Records = 3000
			cfg.Keys = 100
			cfg.KeyDist = KeyDistHot
			cfg.Compression = record.CodecLZ4
			cfg.Compressible = true
			cfg.Acks = 1
			cfg.Producers = 2
			cfg.Consumers = 3
			rep, err := Run(testCtx(t, 2*time.Minute), cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkClean(t, rep, 3000)
		})
	}
}

// findMaxRun runs a capacity search of two 1 s steps from 500 rec/s with
// the produce p99 bound maxP99 (and retries) and returns its report.
func findMaxRun(t *testing.T, maxP99 time.Duration, retries int) *Report {
	t.Helper()
	cfg := smallRun(EngineNative)
	cfg.Consumers = 0
	cfg.FindMax = true
	cfg.StartRate = 500
	cfg.StepDuration = time.Second
	cfg.MaxSteps = 2
	cfg.StepRetries = retries
	cfg.MaxP99 = maxP99
	rep, err := Run(testCtx(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestFindMaxSteps(t *testing.T) {
	rep := findMaxRun(t, time.Minute, 1) // every step healthy
	fm := rep.FindMax
	if fm == nil || len(fm.Steps) != 2 || fm.Steps[0].Rate != 500 || fm.Steps[1].Rate != 750 {
		t.Fatalf("steps %+v", fm)
	}
	if !fm.Steps[1].Healthy || fm.MaxHealthyRate != 750 || rep.Result.TargetRate != 750 {
		t.Fatalf("max healthy %v, result target %v, step 2 %+v", fm.MaxHealthyRate, rep.Result.TargetRate, fm.Steps[1])
	}
	if len(rep.Timeline) < 2 {
		t.Fatalf("timeline over both steps has %d samples", len(rep.Timeline))
	}
	// Two healthy steps and --max-steps 2: cut short before the maximum.
	if fm.SearchComplete || !strings.Contains(fm.Incomplete, "stopped by --max-steps 2 after 2 runs before any rate was unhealthy: the maximum is above 750 rec/s") {
		t.Fatalf("search complete %v: %q", fm.SearchComplete, fm.Incomplete)
	}
	for _, s := range fm.Steps {
		checkDevice(t, &s.Result, true)
	}
}

func TestSpawnStartsAndStopsBrokers(t *testing.T) {
	c, err := Spawn(testCtx(t, time.Minute), SpawnOptions{Bin: strataBin, Brokers: 2, SegmentBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	addrs := c.Addrs()
	if len(addrs) != 2 || addrs[0] == addrs[1] {
		t.Fatalf("addresses %v", addrs)
	}
	for _, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		if host != "127.0.0.1" {
			t.Fatalf("broker on %s, not loopback", a)
		}
		conn, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			t.Fatalf("broker %s not accepting: %v", a, err)
		}
		conn.Close()
	}
	if cpu, rss, _ := c.usage(); cpu < 0 || rss <= 0 {
		t.Fatalf("usage cpu %v rss %d", cpu, rss)
	}
	dir := c.dir
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("data directory %s left behind: %v", dir, err)
	}
	for _, b := range c.Brokers {
		select {
		case <-b.exited:
		default:
			t.Fatalf("broker %d still running", b.NodeID)
		}
		if b.cmd.ProcessState == nil || !b.cmd.ProcessState.Success() {
			t.Fatalf("broker %d exit: %v", b.NodeID, b.cmd.ProcessState)
		}
	}
}

// An unhealthy rate is run again StepRetries times before the search moves
// on; retries do not count against MaxSteps and are marked in the steps.
func TestFindMaxRetriesUnhealthyStep(t *testing.T) {
	rep := findMaxRun(t, time.Nanosecond, 1) // every step unhealthy
	fm := rep.FindMax
	if fm == nil || len(fm.Steps) != 4 {
		t.Fatalf("steps %+v", fm)
	}
	want := []struct {
		rate  float64
		retry int
	}{{500, 0}, {500, 1}, {250, 0}, {250, 1}}
	for i, w := range want {
		s := fm.Steps[i]
		if s.Rate != w.rate || s.Retry != w.retry || s.Healthy {
			t.Fatalf("step %d: rate %v retry %d healthy %v, want rate %v retry %d unhealthy", i+1, s.Rate, s.Retry, s.Healthy, w.rate, w.retry)
		}
	}
	if fm.MaxHealthyRate != 0 {
		t.Fatalf("max healthy rate %v with no healthy step", fm.MaxHealthyRate)
	}
	if fm.SearchComplete || !strings.Contains(fm.Incomplete, "the maximum lies between 0 and 250 rec/s") {
		t.Fatalf("search complete %v: %q", fm.SearchComplete, fm.Incomplete)
	}
	var txt strings.Builder
	if err := rep.WriteTable(&txt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "retry 1, unhealthy") {
		t.Fatalf("text report does not mark the retry:\n%s", txt.String())
	}
}

// A search that brackets the maximum and bisects it BisectSteps times is
// complete, however few steps that took.
func TestFindMaxCompleteSearch(t *testing.T) {
	cfg := smallRun(EngineNative)
	cfg.Consumers = 0
	cfg.FindMax = true
	cfg.StartRate = 500
	cfg.StepDuration = time.Second
	cfg.MaxSteps = 3
	cfg.BisectSteps = 0
	cfg.StepRetries = 0
	cfg.MaxP99 = time.Nanosecond // the first step is unhealthy: bracketed at once
	rep, err := Run(testCtx(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if fm := rep.FindMax; fm == nil || len(fm.Steps) != 1 || !fm.SearchComplete || fm.Incomplete != "" {
		t.Fatalf("find-max %+v", fm)
	}
	if rep.Host.CPUs < 1 || rep.Host.DataDir == "" {
		t.Fatalf("host %+v", rep.Host)
	}
}

// TestSpawnedClusterFormed: once Spawn returns, every broker's own
// Metadata lists every broker (each learns the others from its copy of
// the metadata log, at its own pace), so a topic with a replication
// factor of all of them is created at the first attempt whichever broker
// answers.
func TestSpawnedClusterFormed(t *testing.T) {
	for round := range 2 {
		ctx := testCtx(t, time.Minute)
		c, err := Spawn(ctx, SpawnOptions{Bin: strataBin, Brokers: 3, SegmentBytes: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range c.Brokers {
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
			cl.Close()
			if err != nil {
				t.Fatal(err)
			}
			if n := len(resp.(*kmsg.MetadataResponse).Brokers); n != 3 {
				t.Fatalf("round %d: broker %d lists %d brokers right after Spawn", round, b.NodeID, n)
			}
		}
		for _, b := range c.Brokers {
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
			if err != nil {
				t.Fatal(err)
			}
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("rf3-%d", b.NodeID), 3, 3
			req.Topics = append(req.Topics, rt)
			req.TimeoutMillis = 10000
			resp, err := cl.SeedBrokers()[0].Request(ctx, req)
			cl.Close()
			if err != nil {
				t.Fatal(err)
			}
			if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
				t.Fatalf("round %d: CreateTopics RF 3 through broker %d: %v", round, b.NodeID, kerr.ErrorForCode(code))
			}
		}
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStuckStopKeepsTheLog: a broker that ignores SIGTERM gets SIGQUIT
// (the Go runtime's goroutine dump) and, if need be, SIGKILL; its log is
// copied out of the run's directory and the error names the copy.
func TestStuckStopKeepsTheLog(t *testing.T) {
	dir := t.TempDir()
	b := &SpawnedBroker{NodeID: 7, LogPath: filepath.Join(dir, "node-7.log"),
		bin: "/bin/sh", args: []string{"-c", "trap '' TERM; echo up; exec sleep 30"}}
	if err := b.launch(os.O_TRUNC); err != nil {
		t.Fatal(err)
	}
	cmd, exited := b.proc()
	for i := 0; i < 200 && !strings.Contains(tailFile(b.LogPath, 100), "up"); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM) // ignored
	err := b.stuckStop(cmd, exited)
	if !isClosed(exited) {
		t.Fatal("the process outlived stuckStop")
	}
	_, kept, ok := strings.Cut(fmt.Sprint(err), "is kept in ")
	if !ok {
		t.Fatalf("error does not name the kept log: %v", err)
	}
	defer os.Remove(kept)
	if data, rerr := os.ReadFile(kept); rerr != nil || !strings.Contains(string(data), "up") {
		t.Fatalf("kept log %s: %q %v", kept, data, rerr)
	}
}
