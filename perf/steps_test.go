package perf

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// randomWorkload draws a valid workload across the model's whole range,
// from one seed so a failure replays.
func randomWorkload(rng *rand.Rand) Workload {
	logUniform := func(lo, hi float64) float64 {
		return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
	}
	w := Defaults()
	w.RecordBytes = int(logUniform(16, 1<<20))
	w.SustainedRecordsPerSec = logUniform(1, 5e6)
	w.PeakRecordsPerSec = w.SustainedRecordsPerSec * (1 + rng.Float64()*4)
	w.CompressionRatio = []float64{1, 1, 1.7, 2.5, 4}[rng.IntN(5)]
	w.ReplicationFactor = 1 + rng.IntN(5)
	w.MinISR = 1 + rng.IntN(w.ReplicationFactor)
	w.BrokersThatMayFail = rng.IntN(3)
	w.ConsumerGroups = rng.IntN(5)
	w.ConsumersPerGroup = rng.IntN(3) * rng.IntN(200)
	w.RetentionHours = logUniform(0.5, 24*365)
	if rng.IntN(3) == 0 {
		w.LocalHotHours = w.RetentionHours * rng.Float64()
	}
	w.Producers = 1 + rng.IntN(500)
	w.LingerMs = []float64{0, 1, 5, 20, 100}[rng.IntN(5)]
	w.BatchBytes = int(logUniform(512, 4<<20))
	w.Keyless = rng.IntN(4) == 0
	if rng.IntN(2) == 0 {
		w.Partitions = 1 + rng.IntN(3000)
	}
	if rng.IntN(2) == 0 {
		w.FixedBrokers = w.BrokersThatMayFail + 1 + rng.IntN(100)
	}
	if rng.IntN(2) == 0 {
		w.Limits = BrokerLimits{
			DiskWriteMBps: logUniform(50, 5000), NetworkMBps: logUniform(100, 12500), Cores: float64(1 + rng.IntN(64)),
			PerCoreMBps: logUniform(10, 500), MemoryGiB: logUniform(8, 1024), DiskGiB: logUniform(100, 100000),
		}
		w.Limits.ReservedMemoryGiB = w.Limits.MemoryGiB * rng.Float64() * 0.9
	}
	if rng.IntN(2) == 0 {
		w.TargetUtilization = 0.2 + rng.Float64()*0.8
	}
	if rng.IntN(4) == 0 {
		w.ClaimedPeakMBps = logUniform(1, 10000)
	}
	if rng.IntN(4) == 0 {
		w.Calibration = &Calibration{MBPerSec: logUniform(10, 2000), BrokerCPUSeconds: logUniform(1, 1000),
			DurationSec: logUniform(10, 600), RecordBytes: 1024, CapacitySearch: rng.IntN(2) == 0,
			ReplicationFactor: rng.IntN(4), Brokers: rng.IntN(4)}
	}
	return w
}

var (
	identRe   = regexp.MustCompile(`[a-z_][a-z0-9_]*`)
	functions = map[string]bool{"ceil": true, "floor": true, "min": true, "max": true, "exp": true}
)

// checkReport is what every plan must satisfy, whatever the workload: the
// printed arithmetic reproduces the printed value, formulas use only
// inputs and earlier steps, symbols are unique, figures are finite, and the
// text and JSON carry the same steps.
func checkReport(t *testing.T, rep Report) {
	t.Helper()
	known := map[string]bool{}
	for _, in := range rep.Inputs {
		known[in.Symbol] = true
	}
	seen := map[string]bool{}
	for _, s := range rep.Steps {
		if seen[s.Symbol] {
			t.Fatalf("step %s defined twice", s.Symbol)
		}
		for _, id := range identRe.FindAllString(s.Formula, -1) {
			if !functions[id] && !known[id] {
				t.Fatalf("step %s: formula %q uses %q before it is defined", s.Symbol, s.Formula, id)
			}
		}
		seen[s.Symbol], known[s.Symbol] = true, true
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			t.Fatalf("step %s = %v", s.Symbol, s.Value)
		}
	}
	checkText(t, rep.Text(), len(rep.Steps))
	if _, err := json.Marshal(rep); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if rep.BrokersNeeded < rep.Workload.ReplicationFactor || rep.Brokers < 1 || rep.Partitions < 1 {
		t.Fatalf("brokers %d needed %d partitions %d", rep.Brokers, rep.BrokersNeeded, rep.Partitions)
	}
	if rep.BrokersGiven && rep.Brokers < rep.BrokersNeeded && !rep.HasWarning("brokers-insufficient") {
		t.Fatalf("%d brokers < %d needed without an error", rep.Brokers, rep.BrokersNeeded)
	}
	for _, b := range []Batching{rep.Sustained, rep.Peak} {
		if b.RecordsPerBatch < 1-1e-9 || b.RecordsPerBatch > b.BatchCapRecords || b.RequestsPerSec > b.BatchesPerSec*(1+1e-9) {
			t.Fatalf("batching out of bounds: %+v", b)
		}
	}
}

// checkText parses every step line of a rendered plan, "symbol = formula =
// arithmetic = value unit", evaluates the arithmetic and compares it with
// the printed value (rounded to 5 significant digits when printed).
func checkText(t *testing.T, text string, wantSteps int) {
	t.Helper()
	_, steps, ok := strings.Cut(text, "\nSteps")
	steps, _, ok2 := strings.Cut(steps, "\nResult\n")
	if !ok || !ok2 {
		t.Fatalf("no Steps section in\n%s", text)
	}
	n := 0
	for _, line := range strings.Split(steps, "\n") {
		if !strings.HasPrefix(line, "      ") { // step lines are indented six spaces
			continue
		}
		parts := strings.Split(strings.TrimSpace(line), " = ")
		if len(parts) != 4 {
			t.Fatalf("step line %q does not split into symbol = formula = arithmetic = value", line)
		}
		n++
		got, err := Eval(parts[2])
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		num, _, _ := strings.Cut(parts[3], " ")
		printed, err := strconv.ParseFloat(strings.ReplaceAll(num, ",", ""), 64)
		if err != nil {
			t.Fatalf("line %q: value %q: %v", line, num, err)
		}
		exact := strings.Contains(parts[2], "ceil(") || strings.Contains(parts[2], "floor(")
		if exact && got != printed || math.Abs(got-printed) > 2e-3*math.Abs(printed)+1e-9 {
			t.Fatalf("line %q: arithmetic gives %v, printed %v", line, got, printed)
		}
	}
	if n != wantSteps {
		t.Fatalf("parsed %d step lines, report has %d steps", n, wantSteps)
	}
}

func TestEveryStepAddsUp(t *testing.T) {
	checkReport(t, mustPlan(t, reference(t)))
	rng := rand.New(rand.NewPCG(20260101, 7))
	planned := 0
	for i := range 2000 {
		w := randomWorkload(rng)
		rep, err := Plan(w)
		if err != nil {
			if strings.Contains(err.Error(), "stops at") {
				continue // beyond the model's range: a clean refusal
			}
			t.Fatalf("case %d: %v (workload %+v)", i, err, w)
		}
		planned++
		checkReport(t, rep)
	}
	if planned < 1500 {
		t.Fatalf("only %d of 2000 random workloads planned", planned)
	}
}

func TestEval(t *testing.T) {
	good := map[string]float64{
		"600,000 × 1,024 / 10^6":               614.4,
		"1,843.2 / (500 × 0.6)":                6.144,
		"ceil(1,843.2 / (500 × 0.6))":          7,
		"max(max(7, 3, 3, 4, 141) + 1, 3)":     142,
		"min(64, 9.3333 / 5.5299)":             9.3333 / 5.5299,
		"1 + (8 - 1) × (1 - exp(-1.0417))":     1 + 7*(1-math.Exp(-1.0417)),
		"4,096 × 2^30 / 10^12":                 4.398046511104,
		"2 ^ 3 ^ 2":                            512,
		"-2 ^ 2":                               -4,
		"64 - 4":                               60,
		"1 - -2":                               3,
		"floor(65,536 × 1 / 1,024)":            64,
		"123,456,789":                          123456789,
		"0.000123":                             0.000123,
		"3 * 4":                                12,
		"max(1, floor(65,536 × 2.56 / 1,024))": 163,
		"10 × min(96, 12) × 1000 / 5.6":        120000 / 5.6,
		"((((1))))":                            1,
		"200,000 / (10 × min(96, 12))":         200000.0 / 120,
		"1,234.5":                              1234.5,
	}
	for expr, want := range good {
		got, err := Eval(expr)
		if err != nil || math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("Eval(%q) = %v, %v; want %v", expr, got, err, want)
		}
	}
	for _, bad := range []string{"", "1 +", "(1", "1)", "foo(1)", "ceil(1, 2)", "1 / 0", "1,02", "12345,678",
		"1.", "exp(1000)", "max()", "1 2", "a", "ceil", "1 , 2", strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100),
		strings.Repeat("-", 200) + "1", "max(1, 2, 3, 4, 5, 6, 7, 8, 9)", strings.Repeat("1+", 3000) + "1"} {
		if v, err := Eval(bad); err == nil {
			t.Errorf("Eval(%q) = %v, want an error", bad, v)
		}
	}
}

func TestFormatNumber(t *testing.T) {
	cases := []struct {
		x    float64
		sig  int
		want string
	}{
		{614.4, 5, "614.4"}, {1843.2, 5, "1,843.2"}, {123863040000000, 5, "123,863,040,000,000"},
		{30.96576, 5, "30.966"}, {30.96576, 3, "31"}, {1666.6666666, 5, "1,666.7"}, {0.0123456, 4, "0.01235"},
		{1.16666666, 5, "1.1667"}, {0, 5, "0"}, {-2.5, 5, "-2.5"}, {65536, 5, "65,536"}, {0.6, 5, "0.6"},
		{1234567.891, 5, "1,234,568"}, {1.0 / 3, 0, "0.3333333333333333"}, {999.99999, 5, "1,000"},
	}
	for _, c := range cases {
		if got := FormatNumber(c.x, c.sig); got != c.want {
			t.Errorf("FormatNumber(%v, %d) = %q, want %q", c.x, c.sig, got, c.want)
		}
	}
}

// Exact formatting reads back to the same float64, the property the step
// recorder's last resort depends on.
func TestFormatNumberRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		x := math.Exp(rng.NormFloat64() * 20)
		if rng.IntN(2) == 0 {
			x = math.Round(x)
		}
		got, err := Eval(FormatNumber(x, 0))
		if err != nil || got != x {
			t.Fatalf("Eval(FormatNumber(%v, 0) = %q) = %v, %v", x, FormatNumber(x, 0), got, err)
		}
		got, err = Eval(FormatNumber(x, 5))
		if err != nil || math.Abs(got-x) > 5e-5*x {
			t.Fatalf("Eval(FormatNumber(%v, 5)) = %v, %v", x, got, err)
		}
	}
}

func FuzzEval(f *testing.F) {
	for _, s := range []string{"600,000 × 1,024 / 10^6", "ceil(1,843.2 / (500 × 0.6))", "max(1, floor(2.5))",
		"1 + (8 - 1) × (1 - exp(-1.0417))", "--1", "2^-3", "1,000,000.5", "min(1, 2, 3)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Eval(s)
		if err != nil {
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("Eval(%q) = %v without an error", s, v)
		}
	})
}

// FuzzFormatNumber: every finite float formats to something Eval reads back,
// exactly at sig 0 and to the requested precision otherwise.
func FuzzFormatNumber(f *testing.F) {
	f.Add(614.4, 5)
	f.Add(1e-300, 3)
	f.Add(-123456789.125, 0)
	f.Add(1e20, 8)
	f.Fuzz(func(t *testing.T, x float64, sig int) {
		if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 1e30 || (x != 0 && math.Abs(x) < 1e-30) {
			return
		}
		sig = sig%17 + 0
		if sig < 0 {
			sig = -sig
		}
		s := FormatNumber(x, sig)
		got, err := Eval(s)
		if err != nil {
			t.Fatalf("Eval(FormatNumber(%v, %d) = %q): %v", x, sig, s, err)
		}
		tol := 0.0
		if sig > 0 {
			tol = math.Pow(10, float64(1-sig)) * math.Abs(x)
		}
		if math.Abs(got-x) > tol {
			t.Fatalf("FormatNumber(%v, %d) = %q reads back as %v", x, sig, s, got)
		}
	})
}

// FuzzPlan: any workload either is refused with an error or yields a report
// whose every step adds up.
func FuzzPlan(f *testing.F) {
	f.Add(uint64(1))
	f.Add(uint64(20260101))
	f.Add(uint64(0xdeadbeef))
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		w := randomWorkload(rng)
		// Perturb one field to anything, including invalid values.
		switch rng.IntN(6) {
		case 0:
			w.SustainedRecordsPerSec = math.Float64frombits(rng.Uint64())
		case 1:
			w.Partitions = int(rng.Int32())
		case 2:
			w.FixedBrokers = int(rng.Int32()) % 1000
		case 3:
			w.Limits.DiskGiB = math.Float64frombits(rng.Uint64())
		case 4:
			w.LingerMs = math.Float64frombits(rng.Uint64())
		}
		rep, err := Plan(w)
		if err != nil {
			return
		}
		checkReport(t, rep)
	})
}
