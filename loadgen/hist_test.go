package loadgen

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestHistogramMergingAcrossProducers records disjoint latency sets into
// one recorder per producer and checks that collecting them gives exactly
// the histogram of all values recorded in one place.
func TestHistogramMergingAcrossProducers(t *testing.T) {
	var set recorderSet
	whole := newHist()
	rng := rand.New(rand.NewPCG(1, 2))
	recs := []*recorder{set.add(), set.add(), set.add(), set.add()}
	for i, r := range recs {
		for range 10_000 {
			// Each producer has its own latency profile.
			d := time.Duration(rng.ExpFloat64()*float64(i+1)*float64(time.Millisecond)) + 50*time.Microsecond
			r.record(d)
			whole.RecordValue(int64(d / time.Microsecond))
		}
	}
	merged := newHist()
	if clamped := set.collect(merged); clamped != 0 {
		t.Fatalf("%d values clamped", clamped)
	}
	if merged.TotalCount() != whole.TotalCount() || merged.TotalCount() != 40_000 {
		t.Fatalf("merged %d values, recorded %d", merged.TotalCount(), whole.TotalCount())
	}
	for _, q := range []float64{50, 90, 99, 99.9, 100} {
		if a, b := merged.ValueAtQuantile(q), whole.ValueAtQuantile(q); a != b {
			t.Fatalf("p%v: merged %d µs, single histogram %d µs", q, a, b)
		}
	}
	if merged.Max() != whole.Max() || merged.Min() != whole.Min() {
		t.Fatal("merged min/max differ")
	}
	// Collecting moves the interval out: a second collect adds nothing.
	again := newHist()
	set.collect(again)
	if again.TotalCount() != 0 {
		t.Fatalf("second collect found %d values", again.TotalCount())
	}
}

func TestRecorderClampsOutOfRange(t *testing.T) {
	r := newRecorder()
	r.record(-time.Second)  // clock went backwards: 1 µs
	r.record(2 * time.Hour) // beyond the range: clamped
	r.record(3 * time.Millisecond)
	h := newHist()
	if c := r.collect(h); c != 1 {
		t.Fatalf("clamped %d, want 1", c)
	}
	if h.TotalCount() != 3 || h.Min() != 1 || !h.ValuesAreEquivalent(h.Max(), histMaxMicros) {
		t.Fatalf("count %d min %d max %d", h.TotalCount(), h.Min(), h.Max())
	}
}

func TestSummarizeAndDistribution(t *testing.T) {
	h := newHist()
	for ms := 1; ms <= 1000; ms++ {
		h.RecordValue(int64(ms) * 1000)
	}
	s := summarize(h)
	near := func(got, want float64) bool { return got >= want*0.999 && got <= want*1.001 }
	if s.Count != 1000 || !near(s.P50Ms, 500) || !near(s.P99Ms, 990) || !near(s.MaxMs, 1000) || !near(s.MeanMs, 500.5) {
		t.Fatalf("summary %+v", s)
	}
	d := distribution(h)
	if len(d) < 10 || d[0].Percentile != 0 || d[len(d)-1].Percentile != 100 {
		t.Fatalf("distribution endpoints %v", d)
	}
	for i := 1; i < len(d); i++ {
		if d[i].Percentile < d[i-1].Percentile || d[i].Ms < d[i-1].Ms {
			t.Fatalf("distribution not monotone at %d: %v then %v", i, d[i-1], d[i])
		}
	}
	if (summarize(newHist()) != Latency{}) || distribution(newHist()) != nil {
		t.Fatal("empty histogram summarised as non-empty")
	}
}
