package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// consumerProcGone reports whether pid has exited (reaped, or a zombie
// nobody reaps).
func consumerProcGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// TestConsumersInTheirOwnProcess: by default the consumers run in a child
// process (another pid, reaped when Run returns); every acknowledged record
// is consumed there, its end-to-end latencies come back into the report and
// the timeline, and its CPU is part of the client CPU.
func TestConsumersInTheirOwnProcess(t *testing.T) {
	for _, engine := range []string{EngineKgo, EngineNative} {
		t.Run(engine, func(t *testing.T) {
			cfg := smallRun(engine)
			rep, err := Run(testCtx(t, 2*time.Minute), cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkClean(t, rep, 4000)
			r := rep.Result
			if r.ConsumerPID <= 0 || r.ConsumerPID == os.Getpid() {
				t.Fatalf("consumer pid %d (this process %d)", r.ConsumerPID, os.Getpid())
			}
			if !consumerProcGone(r.ConsumerPID) {
				t.Fatalf("consumer process %d still running after Run", r.ConsumerPID)
			}
			if want := clientGCPercent(os.Getenv("GOGC")); r.ConsumerGCPercent != want {
				t.Fatalf("consumer process GOGC %d, want %d", r.ConsumerGCPercent, want)
			}
			if want := processGCPercent(); r.GCPercent != want {
				t.Fatalf("producing process GOGC %d, want %d", r.GCPercent, want)
			}
			// 1 µs is the histograms' floor: a run clock placed wrong in
			// the child clamps there or lands beyond the run.
			if r.E2EP50Ms <= 0.001 || r.E2EMaxMs > (cfg.Duration+cfg.DrainTimeout).Seconds()*1000 {
				t.Fatalf("end-to-end p50 %v ms, max %v ms", r.E2EP50Ms, r.E2EMaxMs)
			}
			c := r.ClientCPUConsumerProcessSeconds
			if c == nil || *c < 0 || r.ClientCPUMainSeconds <= 0 || r.ClientCPUSeconds != r.ClientCPUMainSeconds+*c {
				t.Fatalf("client cpu %v = main %v + consumer process %v?", r.ClientCPUSeconds, r.ClientCPUMainSeconds, c)
			}
			var consumed, e2e bool
			for _, s := range rep.Timeline {
				consumed = consumed || s.ConsumedPerSec > 0
				e2e = e2e || s.E2EP99Ms > 0
			}
			if !consumed || !e2e {
				t.Fatalf("timeline without consumption (%v) or end-to-end latency (%v): %+v", consumed, e2e, rep.Timeline)
			}
			if rep.Config.ConsumersIn != "process" {
				t.Fatalf("config consumers_in %q", rep.Config.ConsumersIn)
			}
		})
	}
}

// TestConsumersInProcess: --consumers-in-process keeps them in the
// loadgen's own runtime: no child, no consumer-process CPU.
func TestConsumersInProcess(t *testing.T) {
	cfg := smallRun(EngineNative)
	cfg.ConsumersInProcess = true
	rep, err := Run(testCtx(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, rep, 4000)
	r := rep.Result
	if r.ConsumerPID != 0 || r.ClientCPUConsumerProcessSeconds != nil || r.ClientCPUSeconds != r.ClientCPUMainSeconds {
		t.Fatalf("consumer pid %d, consumer process cpu %v, client cpu %v main %v", r.ConsumerPID,
			r.ClientCPUConsumerProcessSeconds, r.ClientCPUSeconds, r.ClientCPUMainSeconds)
	}
	if rep.Config.ConsumersIn != "loadgen" {
		t.Fatalf("config consumers_in %q", rep.Config.ConsumersIn)
	}
}

// TestChildReportsFoldIntoTheRun: what a consumer process writes (counters
// every report, a histogram now and then, errors in the final one) lands in
// the parent's counters, e2e recorder and error table exactly once.
func TestChildReportsFoldIntoTheRun(t *testing.T) {
	child := newRunStats()
	crec := child.e2e.add()
	var out bytes.Buffer
	w := &childWriter{enc: json.NewEncoder(&out)}
	hist := newHist()
	for i := 1; i <= 100; i++ {
		crec.record(time.Duration(i) * time.Millisecond)
	}
	child.consumed.Add(100)
	if err := w.report(child, hist, false, false); err != nil { // counters only
		t.Fatal(err)
	}
	if err := w.report(child, hist, true, false); err != nil { // and the 100 latencies
		t.Fatal(err)
	}
	crec.record(2 * time.Hour) // clamped
	child.consumed.Add(1)
	child.consumeErrors.Add(2)
	child.noteError("consume: boom", 2)
	if err := w.report(child, hist, true, true); err != nil {
		t.Fatal(err)
	}

	parent := newRunStats()
	p := &consumerProc{st: parent, rec: parent.e2e.add(), ready: make(chan error, 1), readDone: make(chan struct{})}
	p.read(&out)
	if p.readErr != nil || !p.final.Load() {
		t.Fatalf("read error %v, final %v", p.readErr, p.final.Load())
	}
	if got := parent.consumed.Load(); got != 101 {
		t.Fatalf("consumed %d, want 101", got)
	}
	if got := parent.consumeErrors.Load(); got != 2 {
		t.Fatalf("consume errors %d, want 2", got)
	}
	if errs := parent.errorList(); len(errs) != 1 || errs[0].Error != "consume: boom" || errs[0].Count != 2 {
		t.Fatalf("errors %+v", errs)
	}
	got := newHist()
	clamped := parent.e2e.collect(got)
	if got.TotalCount() != 101 || clamped != 1 {
		t.Fatalf("merged %d latencies (clamped %d, max %d µs), want 101 (1 clamped)", got.TotalCount(), clamped, got.Max())
	}
	if p50 := got.ValueAtQuantile(50); p50 < 50_000 || p50 > 51_100 {
		t.Fatalf("merged p50 %d µs, want about 50 ms", p50)
	}
	if err := <-p.ready; err == nil {
		t.Fatal("a child that never said ready was taken as ready")
	}
}

// TestChildReportsRejectAForeignHistogram: a histogram of another shape is
// an error, not a silent mis-merge.
func TestChildReportsRejectAForeignHistogram(t *testing.T) {
	if _, err := decodeHist("not base64 at all!!"); err == nil {
		t.Fatal("garbage decoded")
	}
	b, err := hdrhistogram.New(1, 1000, 2).Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeHist(string(b)); err == nil {
		t.Fatal("a 1..1000, 2-digit histogram was accepted")
	}
}
