package rlm

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/engine"
)

// readLatencyBounds are the remote read histogram's upper bounds in
// seconds: 100 µs doubling to ~52 s (20 buckets and one past), from a
// cache hit to a store call retried up to its deadline.
var readLatencyBounds = func() []float64 {
	b := make([]float64, 20)
	for i := range b {
		b[i] = 100e-6 * math.Exp2(float64(i))
	}
	return b
}()

// latencyHist is a fixed-bucket histogram of durations updated with
// atomics (no lock, no allocation per observation).
type latencyHist struct {
	counts [21]atomic.Uint64
	sumNs  atomic.Int64
}

func (h *latencyHist) observe(d time.Duration) {
	d = max(d, 0)
	s := d.Seconds()
	i := 0
	for i < len(readLatencyBounds) && s > readLatencyBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// snapshot is the histogram as engine.Histogram (per-bucket counts, the
// last past every bound).
func (h *latencyHist) snapshot() engine.Histogram {
	out := engine.Histogram{Bounds: readLatencyBounds, Counts: make([]uint64, len(h.counts))}
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
		out.Count += out.Counts[i]
	}
	out.Sum = time.Duration(h.sumNs.Load()).Seconds()
	return out
}
