package loadgen

import (
	"bytes"
	"encoding/json"
	"html/template"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// syntheticReport is a report as a 20-second run with consumers and
// spawned brokers would produce it, without running one.
func syntheticReport(findMax bool) *Report {
	cfg := DefaultConfig()
	cfg.Spawn = 1
	cfg.Rate = 50000
	cfg.Consumers = 2
	cfg.FindMax = findMax
	rep := &Report{Config: cfg.json(), Workload: cfg.describe()}
	rep.Target.Brokers = []string{"127.0.0.1:9092"}
	rep.Target.Spawned = 1
	prod, e2e := newHist(), newHist()
	for i := range 20 {
		rep.Timeline = append(rep.Timeline, Sample{
			TS: float64(i + 1), RecordsPerSec: 50000 - float64(i), MBPerSec: 51.2, ConsumedPerSec: 49990,
			ProduceP50Ms: 2 + float64(i)/10, ProduceP99Ms: 8 + float64(i%5), ProduceMaxMs: 20 + float64(i),
			E2EP99Ms: 9 + float64(i%5), ClientCPUPercent: 30, BrokerCPUPercent: 55, BrokerRSSBytes: 100 << 20,
		})
	}
	for i := 1; i <= 100000; i++ {
		prod.RecordValue(int64(1000 + i%9000))
		e2e.RecordValue(int64(1500 + i%9500))
	}
	cpu, ccpu := 11.5, 1.25
	out := &runOutcome{
		result: Result{Engine: "native", Brokers: rep.Target.Brokers, TargetRate: 50000, DurationS: 20, RecordBytes: 1024,
			RecordsSent: 1_000_000, RecordsAcked: 1_000_000, RecordsConsumed: 1_000_000, RecordsPerSec: 50000, MBPerSec: 51.2,
			ProduceP50Ms: 5, ProduceP99Ms: 9.9, ProduceP999Ms: 10, ProduceMaxMs: 10, E2EP99Ms: 10.4,
			ClientCPUSeconds: 4, ClientCPUMainSeconds: 2.75, ClientCPUConsumerProcessSeconds: &ccpu, ConsumerPID: 4242, ConsumerGCPercent: 400,
			BrokerCPUSeconds:      &cpu,
			BrokerProduceRequests: 12345, BrokerProduceMeanMs: 3.1, BrokerProduceP50Ms: 2.71, BrokerProduceP90Ms: 4.2,
			BrokerProduceP99Ms: 7.77, BrokerProduceP999Ms: 8.8, BrokerProduceMaxBucketMs: 12.34},
		timeline: rep.Timeline,
		produce:  prod,
		e2e:      e2e,
	}
	rep.setOutcome(out)
	if findMax {
		yes, no := true, false
		rep.FindMax = &FindMax{MaxHealthyRate: 50000, MaxP99Ms: 15, MaxErrorRate: 0.001, SearchComplete: true, Steps: []Step{
			{Rate: 33333, Healthy: true, Reason: "ok", Result: Result{ProduceP99Ms: 5, Healthy: &yes}},
			{Rate: 50000, Healthy: true, Reason: "ok", Result: Result{ProduceP99Ms: 9.9, Healthy: &yes}},
			{Rate: 75000, Healthy: false, Reason: "produce p99 40 ms over 15 ms", Result: Result{ProduceP99Ms: 40, Healthy: &no}},
		}}
	}
	return rep
}

func TestJSONReportHasConfigResultAndTimeline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lg.json")
	if err := syntheticReport(false).WriteJSONFile(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Config   map[string]any   `json:"config"`
		Result   map[string]any   `json:"result"`
		Timeline []map[string]any `json:"timeline"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("JSON does not parse: %v", err)
	}
	for k, want := range map[string]any{"engine": "kgo", "partitions": 96.0, "record_bytes": 1024.0, "rate": 50000.0,
		"acks": "all", "linger_ms": 5.0, "batch_bytes": 65536.0, "compression": "none", "spawn": 1.0, "consumers": 2.0} {
		if doc.Config[k] != want {
			t.Errorf("config.%s = %v, want %v", k, doc.Config[k], want)
		}
	}
	// The fields the capacity planner reads.
	for k, want := range map[string]float64{"records_per_sec": 50000, "mb_per_sec": 51.2, "produce_p99_ms": 9.9,
		"broker_cpu_seconds": 11.5, "duration_s": 20, "record_bytes": 1024} {
		if v, ok := doc.Result[k].(float64); !ok || v != want {
			t.Errorf("result.%s = %v, want %v", k, doc.Result[k], want)
		}
	}
	for k, want := range map[string]float64{"broker_produce_requests": 12345, "broker_produce_p50_ms": 2.71, "broker_produce_p99_ms": 7.77,
		"broker_produce_p999_ms": 8.8, "broker_produce_max_bucket_ms": 12.34, "client_cpu_seconds": 4, "client_cpu_main_seconds": 2.75,
		"client_cpu_consumer_process_seconds": 1.25} {
		if v, ok := doc.Result[k].(float64); !ok || v != want {
			t.Errorf("result.%s = %v, want %v", k, doc.Result[k], want)
		}
	}
	for _, k := range []string{"produce_p50_ms", "produce_p999_ms", "produce_max_ms", "e2e_p99_ms", "client_cpu_seconds", "records_per_batch"} {
		if _, ok := doc.Result[k]; !ok {
			t.Errorf("result has no %s", k)
		}
	}
	if len(doc.Timeline) != 20 || doc.Timeline[0]["produce_p99_ms"] != 8.0 || doc.Timeline[19]["t_s"] != 20.0 {
		t.Fatalf("timeline %d samples: first %v", len(doc.Timeline), doc.Timeline[0])
	}
}

func TestJSONReportBrokerCPUIsNullForExternalBrokers(t *testing.T) {
	rep := syntheticReport(false)
	rep.Result.BrokerCPUSeconds = nil
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"broker_cpu_seconds":null`)) {
		t.Fatal("unknown broker CPU is not null")
	}
}

var (
	svgRe      = regexp.MustCompile(`<svg [^>]*>`)
	polylineRe = regexp.MustCompile(`<polyline class="series" data-name="([^"]*)" data-points="(\d+)"[^>]* points="([^"]*)"`)
)

func TestHTMLReportHasChartsWithData(t *testing.T) {
	for _, fm := range []bool{false, true} {
		var buf bytes.Buffer
		if err := syntheticReport(fm).WriteHTML(&buf); err != nil {
			t.Fatal(err)
		}
		page := buf.String()
		wantCharts := 4
		if fm {
			wantCharts = 5
		}
		if n := len(svgRe.FindAllString(page, -1)); n != wantCharts {
			t.Fatalf("find-max %v: %d charts, want %d", fm, n, wantCharts)
		}
		series := map[string]int{}
		for _, m := range polylineRe.FindAllStringSubmatch(page, -1) {
			n, _ := strconv.Atoi(m[2])
			if pts := strings.Fields(m[3]); len(pts) != n {
				t.Fatalf("series %q claims %d points, draws %d", m[1], n, len(pts))
			}
			series[m[1]] = n
		}
		for _, name := range []string{"produce p50", "produce p99", "produce max", "end-to-end p99", "acknowledged records/s",
			"consumed records/s", "loadgen (client) CPU %", "broker CPU %"} {
			if series[name] != 20 {
				t.Errorf("series %q has %d points, want 20 (one per second)", name, series[name])
			}
		}
		var dist int
		for name, n := range series {
			if strings.HasPrefix(name, "produce (max") || strings.HasPrefix(name, "end-to-end (max") {
				dist++
				if n < 20 {
					t.Errorf("percentile series %q has only %d points", name, n)
				}
			}
		}
		if dist != 2 {
			t.Errorf("%d percentile series, want 2: %v", dist, series)
		}
		for _, label := range []string{"latency (ms)", "time since start (s)", "records per second", "percentile", "99.9%", "CPU (% of a core)"} {
			if !strings.Contains(page, ">"+label+"<") {
				t.Errorf("no axis label %q", label)
			}
		}
		if fm && series["produce p99 (ms) by target rate"] != 3 {
			t.Errorf("capacity chart: %v", series)
		}
		for _, want := range []string{"broker produce (request frame → response; 12,345 requests", ">7.77<", ">≤ 12.34<",
			"loadgen 2.75 s", "consumer process 1.25 s"} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %q", want)
			}
		}
		// Self-contained: no scripts, nothing fetched.
		if strings.Contains(page, "<script") || strings.Contains(page, "src=") || strings.Contains(page, "href=") {
			t.Fatal("report is not self-contained")
		}
	}
}

func TestTableShowsTheFigures(t *testing.T) {
	var buf bytes.Buffer
	if err := syntheticReport(true).WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"native engine", "1 spawned strata broker(s)", "50,000.0", "51.20", "9.90", "end-to-end",
		"broker cpu", "11.50 s", "max healthy rate: 50,000 rec/s", "unhealthy: produce p99 40 ms over 15 ms",
		"broker produce (request→response)", "7.77", "≤ 12.34", "12,345 Produce requests", "loadgen 2.75 s + consumer process 1.25 s (GOGC 400)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// The baseline table compares the device's writes and reads side by side
// (reads: a consumer that fell behind the tail cache onto the device).
func TestBaselineTableShowsDeviceReads(t *testing.T) {
	r := syntheticReport(false)
	r.Result.Device = &DeviceTraffic{Name: "vda", WriteBytes: 8_727_000_000, ReadBytes: 221_000_000, BytesPerRecordByte: 2.13, BusyShare: 0.464}
	bl := &Baseline{Mode: BaselineBinary, Binary: "/old/strata", Result: r.Result, Ratio: 1}
	bl.Result.Device = &DeviceTraffic{Name: "vda", WriteBytes: 8_700_000_000, ReadBytes: 100_000, BytesPerRecordByte: 2.12, BusyShare: 0.4}
	var b strings.Builder
	writeBaseline(&b, r, bl)
	out := b.String()
	for _, want := range []string{"device MB written", "8727.0", "8700.0", "device MB read", "221.0", "0.1"} {
		if !strings.Contains(out, want) {
			t.Errorf("baseline table lacks %q:\n%s", want, out)
		}
	}
}

func TestCommas(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.891: "1,234,568", -45000: "-45,000"} {
		if got := commas(v, 0); got != want {
			t.Errorf("commas(%v) = %q, want %q", v, got, want)
		}
	}
	if got := commas(49999.25, 1); got != "49,999.2" && got != "49,999.3" {
		t.Errorf("commas with decimals: %q", got)
	}
}

func TestConfigValidation(t *testing.T) {
	good := DefaultConfig()
	good.Spawn = 1
	if err := good.Validate(); err != nil {
		t.Fatalf("default config with --spawn 1: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"no target":         func(c *Config) { c.Spawn = 0 },
		"both targets":      func(c *Config) { c.Brokers = []string{"x:1"} },
		"tiny records":      func(c *Config) { c.RecordBytes = 4 },
		"bad dist":          func(c *Config) { c.KeyDist = "pareto" },
		"zipf s <= 1":       func(c *Config) { c.KeyDist = KeyDistZipf; c.ZipfS = 1 },
		"hot share":         func(c *Config) { c.KeyDist = KeyDistHot; c.HotKeyShare = 1.5 },
		"unbounded":         func(c *Config) { c.Duration = 0 },
		"idempotent acks 1": func(c *Config) { c.Idempotent = true; c.Acks = 1 },
		"group without":     func(c *Config) { c.Group = "g" },
		"delay without":     func(c *Config) { c.Consumers = 0; c.ConsumerDelay = time.Second },
		"negative delay":    func(c *Config) { c.ConsumerDelay = -time.Second },
		"engine":            func(c *Config) { c.Engine = "librdkafka" },
		"inflight":          func(c *Config) { c.MaxInflight = 0 },
		"buffered negative": func(c *Config) { c.MaxBufferedRecords = -1 },
		"buffered native":   func(c *Config) { c.Engine = EngineNative; c.MaxBufferedRecords = 1000 },
		"negative rate":     func(c *Config) { c.Rate = -1 },
		"find-max step":     func(c *Config) { c.FindMax = true; c.StepDuration = time.Millisecond },
	} {
		c := good
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The kgo engine's window is franz-go's default unless set, raised to a
// batch per partition; the native engine has none.
func TestMaxBufferedRecords(t *testing.T) {
	c := DefaultConfig()
	for _, tc := range []struct {
		engine     string
		set, parts int
		want       int
	}{
		{EngineKgo, 0, 96, 50_000},
		{EngineKgo, 0, 10_000, 10_000 * 64},
		{EngineKgo, 10_000, 96, 10_000},
		{EngineNative, 0, 96, 0},
	} {
		c.Engine, c.MaxBufferedRecords = tc.engine, tc.set
		if got := c.maxBufferedRecords(tc.parts); got != tc.want {
			t.Errorf("%s, set %d, %d partitions: %d, want %d", tc.engine, tc.set, tc.parts, got, tc.want)
		}
	}
}

// Consumers run through the warm-up unless the run starts them late,
// counts records, searches, faults, verifies or compares share groups; the
// workload line says which.
func TestConsumersWarmUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want bool
	}{
		{"consumers", func(c *Config) {}, true},
		{"no consumers", func(c *Config) { c.Consumers = 0 }, false},
		{"no warm-up", func(c *Config) { c.Warmup = 0 }, false},
		{"consumer delay", func(c *Config) { c.ConsumerDelay = time.Second }, false},
		{"record count", func(c *Config) { c.Records = 1000 }, false},
		{"find max", func(c *Config) { c.FindMax = true }, false},
		{"faults", func(c *Config) { c.Faults = []string{FaultKill} }, false},
		{"verify", func(c *Config) { c.Verify = true }, false},
		{"share group comparison", func(c *Config) { c.CompareShareGroup = true }, false},
	} {
		c := DefaultConfig()
		c.Consumers, c.Duration, c.Warmup = 1, 20*time.Second, 10*time.Second
		tc.set(&c)
		if got := c.consumersWarmUp(); got != tc.want {
			t.Errorf("%s: consumersWarmUp %v, want %v", tc.name, got, tc.want)
		}
		if got := strings.Contains(c.describe(), "warm-up with the consumers"); got != tc.want {
			t.Errorf("%s: workload line %q", tc.name, c.describe())
		}
		if got := c.json().WarmupConsumers; got != tc.want {
			t.Errorf("%s: warmup_consumers %v", tc.name, got)
		}
	}
}

func TestParseAcks(t *testing.T) {
	for in, want := range map[string]int16{"all": -1, "-1": -1, "1": 1, "0": 0} {
		if got, err := ParseAcks(in); err != nil || got != want {
			t.Errorf("ParseAcks(%q) = %d, %v", in, got, err)
		}
	}
	if _, err := ParseAcks("2"); err == nil {
		t.Error("acks 2 accepted")
	}
}

func TestProcStatParsing(t *testing.T) {
	stat := []byte("1234 (strata (serve) x) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 130 0 0 20 0 12 0 100 0 0\n")
	cpu, err := parseProcStatCPU(stat)
	if err != nil || cpu != 3800*time.Millisecond {
		t.Fatalf("cpu %v err %v, want 3.8s", cpu, err)
	}
	if _, err := parseProcStatCPU([]byte("1234 (x) S 1 2")); err == nil {
		t.Fatal("short stat accepted")
	}
	status := []byte("Name:\tstrata\nVmHWM:\t  20480 kB\nVmRSS:\t   10240 kB\n")
	if parseStatusKB(status, "VmRSS:") != 10240 || parseStatusKB(status, "VmHWM:") != 20480 || parseStatusKB(status, "VmSwap:") != 0 {
		t.Fatal("status parsing")
	}
	// This process's own numbers are readable and plausible.
	if c, rss, _, err := procStats(os.Getpid()); err != nil || c < 0 || rss <= 0 {
		t.Fatalf("procStats(self) = %v %d %v", c, rss, err)
	}
}

// A search cut short says so in the table, the JSON and the HTML report;
// a finished one says nothing of the kind.
func TestIncompleteSearchIsReported(t *testing.T) {
	const why = "stopped by --max-steps 3 after 3 runs before any rate was unhealthy: the maximum is above 50,000 rec/s (raise --max-steps or --start-rate)"
	for _, complete := range []bool{true, false} {
		rep := syntheticReport(true)
		rep.FindMax.Steps = rep.FindMax.Steps[:2]
		if !complete {
			rep.FindMax.SearchComplete, rep.FindMax.Incomplete = false, why
		}
		var txt, page bytes.Buffer
		if err := rep.WriteTable(&txt); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteHTML(&page); err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			FindMax map[string]any `json:"find_max"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.FindMax["search_complete"] != complete {
			t.Errorf("complete %v: JSON search_complete = %v", complete, doc.FindMax["search_complete"])
		}
		hasTable := strings.Contains(txt.String(), "SEARCH INCOMPLETE: "+why) && strings.Contains(txt.String(), "max healthy rate: at least 50,000 rec/s")
		hasHTML := strings.Contains(page.String(), "Search incomplete:</b> "+template.HTMLEscapeString(why)) && strings.Contains(page.String(), "at least 50,000 records/s")
		if hasTable == complete || hasHTML == complete || (doc.FindMax["incomplete"] == why) == complete {
			t.Errorf("complete %v: table says incomplete %v, HTML %v, JSON %v\n%s", complete, hasTable, hasHTML, doc.FindMax["incomplete"], txt.String())
		}
	}
}

func TestHostFacts(t *testing.T) {
	if got := memTotal("MemFree:  10 kB\nMemTotal:       16318268 kB\n"); got != 16318268*1024 {
		t.Errorf("memTotal %d", got)
	}
	if got := memTotal("nothing"); got != 0 {
		t.Errorf("memTotal of nothing %d", got)
	}
	mi := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /tmp rw,nosuid shared:5 - tmpfs tmpfs rw
31 22 259:2 / /data rw - xfs /dev/nvme0n1 rw
32 31 0:40 / /data/my\040dir rw - btrfs /dev/sdb rw
`
	for path, want := range map[string]string{"/tmp/strata-1/node-0": "tmpfs", "/tmp": "tmpfs", "/tmpx/a": "ext4",
		"/data/x": "xfs", "/data/my dir/n": "btrfs", "/": "ext4"} {
		if got := mountFSType(mi, path); got != want {
			t.Errorf("mountFSType(%q) = %q, want %q", path, got, want)
		}
	}
	h := hostFacts(t.TempDir())
	if h.CPUs < 1 || h.OS == "" || h.DataDir == "" {
		t.Fatalf("%+v", h)
	}
	if runtime.GOOS == "linux" && (h.MemoryBytes <= 0 || h.Kernel == "" || h.DataDirFS == "") {
		t.Fatalf("linux host facts missing: %+v", h)
	}
	if d := h.describe(); !strings.Contains(d, "CPUs") || !strings.Contains(d, h.DataDir) {
		t.Errorf("describe: %q", d)
	}
}
