package loadgen

import (
	"math"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency histograms hold microseconds from 1 µs to histMaxMicros with 3
// significant digits (0.1% error at every magnitude). Longer latencies are
// clamped to the maximum and counted in clamped.
const (
	histMaxMicros = int64(time.Hour / time.Microsecond)
	histSigFigs   = 3
)

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, histMaxMicros, histSigFigs)
}

// recorder is one writer's latency histogram (a producer connection, a kgo
// client's callbacks or a consumer). Writers record into the interval
// histogram under the mutex; once a second the sampler moves the interval
// into its own running totals (collect), so recording touches one
// histogram and contends only with that once-a-second swap.
type recorder struct {
	mu       sync.Mutex
	interval *hdrhistogram.Histogram
	clamped  int64
}

func newRecorder() *recorder { return &recorder{interval: newHist()} }

// record adds one latency.
func (r *recorder) record(d time.Duration) {
	r.mu.Lock()
	r.recordLocked(d)
	r.mu.Unlock()
}

// recordSince adds now-t for each scheduled time t in ts (nanosecond
// offsets on the run's clock) at or after from, under one lock: a batch's
// records.
func (r *recorder) recordSince(now time.Duration, ts []int64, from int64) {
	r.mu.Lock()
	for _, t := range ts {
		if t >= from {
			r.recordLocked(now - time.Duration(t))
		}
	}
	r.mu.Unlock()
}

func (r *recorder) recordLocked(d time.Duration) {
	us := int64(d / time.Microsecond)
	switch {
	case us < 1:
		us = 1
	case us > histMaxMicros:
		us = histMaxMicros
		r.clamped++
	}
	r.interval.RecordValue(us) // in range, cannot fail
}

// merge adds latencies recorded elsewhere (the consumer process's) and
// their clamped count.
func (r *recorder) merge(h *hdrhistogram.Histogram, clamped int64) {
	r.mu.Lock()
	r.interval.Merge(h)
	r.clamped += clamped
	r.mu.Unlock()
}

// collect merges the interval histogram into dst and resets it; it returns
// the number of values clamped since the last collect.
func (r *recorder) collect(dst *hdrhistogram.Histogram) int64 {
	r.mu.Lock()
	dst.Merge(r.interval)
	r.interval.Reset()
	c := r.clamped
	r.clamped = 0
	r.mu.Unlock()
	return c
}

// recorderSet is every recorder of one kind (produce or end-to-end) in a
// run. Recorders are added before the run starts and read by the sampler.
type recorderSet struct {
	mu   sync.Mutex
	recs []*recorder
}

func (s *recorderSet) add() *recorder {
	r := newRecorder()
	s.mu.Lock()
	s.recs = append(s.recs, r)
	s.mu.Unlock()
	return r
}

// collect merges every recorder's interval into dst.
func (s *recorderSet) collect(dst *hdrhistogram.Histogram) (clamped int64) {
	s.mu.Lock()
	recs := s.recs
	s.mu.Unlock()
	for _, r := range recs {
		clamped += r.collect(dst)
	}
	return clamped
}

// Latency is a latency summary in milliseconds.
type Latency struct {
	Count  int64   `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func summarize(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	q := func(p float64) float64 { return float64(h.ValueAtQuantile(p)) / 1000 }
	return Latency{
		Count:  h.TotalCount(),
		MeanMs: h.Mean() / 1000,
		P50Ms:  q(50),
		P90Ms:  q(90),
		P99Ms:  q(99),
		P999Ms: q(99.9),
		MaxMs:  float64(h.Max()) / 1000,
	}
}

// PercentilePoint is one point of a latency percentile distribution.
type PercentilePoint struct {
	Percentile float64 `json:"percentile"`
	Ms         float64 `json:"ms"`
}

// distribution samples h at percentiles spread evenly on the log(1/(1-p))
// axis HdrHistogram plots use, from p0 to the maximum.
func distribution(h *hdrhistogram.Histogram) []PercentilePoint {
	if h.TotalCount() == 0 {
		return nil
	}
	var out []PercentilePoint
	// 1/(1-p) from 1 to 10^6 in steps of 10^(1/10): p0 .. p99.9999.
	for i := 0; i <= 60; i++ {
		x := math.Pow(10, float64(i)/10)
		p := 100 * (1 - 1/x)
		out = append(out, PercentilePoint{Percentile: p, Ms: float64(h.ValueAtQuantile(p)) / 1000})
		if float64(h.TotalCount())*(1-p/100) < 1 {
			break // past the last recorded value
		}
	}
	out = append(out, PercentilePoint{Percentile: 100, Ms: float64(h.Max()) / 1000})
	return out
}
