package loadgen

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// runStats is everything one run counts. Counters are atomics written by
// producers, connection readers, kgo callbacks and consumers; histograms
// are recorder sets; the sampler reads both once a second.
type runStats struct {
	base          struct{ batches, requests, batchRecords int64 } // at the start of the measurement (markMeasured)
	sent          atomic.Int64                                    // records handed to a producer client
	acked         atomic.Int64                                    // records acknowledged (written, for acks=0)
	failed        atomic.Int64                                    // records that failed to produce
	ackedBytes    atomic.Int64                                    // value bytes acknowledged
	batches       atomic.Int64                                    // record batches sent
	batchRecords  atomic.Int64                                    // records in those batches
	requests      atomic.Int64                                    // produce requests sent
	consumed      atomic.Int64                                    // records of this run consumed
	consumeErrors atomic.Int64
	redelivered   atomic.Int64 // of consumed: a share group's records delivered before

	produce recorderSet
	e2e     recorderSet

	errMu  sync.Mutex
	errors map[string]int64 // distinct error messages, bounded
}

const maxDistinctErrors = 20

func newRunStats() *runStats { return &runStats{errors: map[string]int64{}} }

// markMeasured records the batch and request counters at the start of the
// measurement (they also count the lead-in's).
func (s *runStats) markMeasured() {
	s.base.batches, s.base.requests, s.base.batchRecords = s.batches.Load(), s.requests.Load(), s.batchRecords.Load()
}

// noteError counts n occurrences of an error message.
func (s *runStats) noteError(msg string, n int64) {
	s.errMu.Lock()
	if _, ok := s.errors[msg]; ok || len(s.errors) < maxDistinctErrors {
		s.errors[msg] += n
	} else {
		s.errors["(other errors)"] += n
	}
	s.errMu.Unlock()
}

// failRecords counts n failed records with their reason.
func (s *runStats) failRecords(n int64, err error) {
	if n <= 0 {
		return
	}
	s.failed.Add(n)
	s.noteError(err.Error(), n)
}

func (s *runStats) errorList() []ErrorCount {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	out := make([]ErrorCount, 0, len(s.errors))
	for m, n := range s.errors {
		out = append(out, ErrorCount{Error: m, Count: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	return out
}

// ErrorCount is one distinct error: how many records failed with it, or for
// connection and consumer errors how often it happened.
type ErrorCount struct {
	Error string `json:"error"`
	Count int64  `json:"count"`
}

// Sample is one second of a run.
type Sample struct {
	TS               float64 `json:"t_s"` // seconds since the schedule started, end of the interval
	RecordsPerSec    float64 `json:"records_per_sec"`
	MBPerSec         float64 `json:"mb_per_sec"`
	ConsumedPerSec   float64 `json:"consumed_per_sec"`
	Errors           int64   `json:"errors"`
	ProduceP50Ms     float64 `json:"produce_p50_ms"`
	ProduceP99Ms     float64 `json:"produce_p99_ms"`
	ProduceMaxMs     float64 `json:"produce_max_ms"`
	E2EP99Ms         float64 `json:"e2e_p99_ms"`
	ClientCPUPercent float64 `json:"client_cpu_pct"`
	BrokerCPUPercent float64 `json:"broker_cpu_pct,omitempty"`
	BrokerRSSBytes   int64   `json:"broker_rss_bytes,omitempty"`
}

// usage is a CPU and memory reading: this process, and the spawned brokers
// when there are any.
type usage struct {
	clientCPU    time.Duration // this process
	consumerCPU  time.Duration // the consumer process, if consumerProc
	consumerProc bool
	brokerCPU    time.Duration
	brokerRSS    int64
	brokerPeak   int64
	brokers      bool
}

// sampler turns the counters and recorders into a per-second timeline and
// running totals. It is owned by one run: start launches its goroutine,
// stop ends it and takes a final sample.
type sampler struct {
	st       *runStats
	now      func() time.Duration // run clock
	startOff time.Duration        // schedule start on the run clock
	usage    func() usage
	progress io.Writer
	bytesRec int64 // value bytes per record

	produceTotal *hdrhistogram.Histogram
	e2eTotal     *hdrhistogram.Histogram
	clamped      int64
	timeline     []Sample

	last struct {
		at                      time.Duration
		acked, failed, consumed int64
		usage                   usage
	}
	interval  *hdrhistogram.Histogram // scratch
	interval2 *hdrhistogram.Histogram

	stopc chan struct{}
	done  chan struct{}
}

func newSampler(st *runStats, now func() time.Duration, startOff time.Duration, u func() usage, progress io.Writer, recordBytes int) *sampler {
	s := &sampler{
		st: st, now: now, startOff: startOff, usage: u, progress: progress, bytesRec: int64(recordBytes),
		produceTotal: newHist(), e2eTotal: newHist(), interval: newHist(), interval2: newHist(),
		stopc: make(chan struct{}), done: make(chan struct{}),
	}
	s.last.at = startOff
	s.last.usage = u()
	return s
}

// start samples every second until stop.
func (s *sampler) start() {
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				s.sample(true)
				return
			case <-t.C:
				s.sample(false)
			}
		}
	}()
}

func (s *sampler) stop() {
	close(s.stopc)
	<-s.done
}

// sample takes one timeline point. The final one is kept only if it covers
// at least a tenth of a second (or is the only one), so a short tail does
// not show a bogus rate.
func (s *sampler) sample(final bool) {
	now := s.now()
	st := s.st
	s.interval.Reset()
	s.interval2.Reset()
	s.clamped += st.produce.collect(s.interval)
	s.clamped += st.e2e.collect(s.interval2)
	s.produceTotal.Merge(s.interval)
	s.e2eTotal.Merge(s.interval2)
	acked, failed, consumed := st.acked.Load(), st.failed.Load(), st.consumed.Load()
	u := s.usage()
	dt := (now - s.last.at).Seconds()
	if now <= s.startOff || dt <= 0 || (final && dt < 0.1 && len(s.timeline) > 0) {
		s.last.at, s.last.acked, s.last.failed, s.last.consumed, s.last.usage = now, acked, failed, consumed, u
		return
	}
	smp := Sample{
		TS:               (now - s.startOff).Seconds(),
		RecordsPerSec:    float64(acked-s.last.acked) / dt,
		MBPerSec:         float64((acked-s.last.acked)*s.bytesRec) / dt / 1e6,
		ConsumedPerSec:   float64(consumed-s.last.consumed) / dt,
		Errors:           failed - s.last.failed,
		ClientCPUPercent: 100 * (u.clientCPU + u.consumerCPU - s.last.usage.clientCPU - s.last.usage.consumerCPU).Seconds() / dt,
	}
	if s.interval.TotalCount() > 0 {
		smp.ProduceP50Ms = float64(s.interval.ValueAtQuantile(50)) / 1000
		smp.ProduceP99Ms = float64(s.interval.ValueAtQuantile(99)) / 1000
		smp.ProduceMaxMs = float64(s.interval.Max()) / 1000
	}
	if s.interval2.TotalCount() > 0 {
		smp.E2EP99Ms = float64(s.interval2.ValueAtQuantile(99)) / 1000
	}
	if u.brokers {
		smp.BrokerCPUPercent = 100 * (u.brokerCPU - s.last.usage.brokerCPU).Seconds() / dt
		smp.BrokerRSSBytes = u.brokerRSS
	}
	s.timeline = append(s.timeline, smp)
	s.last.at, s.last.acked, s.last.failed, s.last.consumed, s.last.usage = now, acked, failed, consumed, u
	if s.progress != nil {
		p99 := "-"
		if s.produceTotal.TotalCount() > 0 {
			p99 = fmt.Sprintf("%.2f ms", float64(s.produceTotal.ValueAtQuantile(99))/1000)
		}
		line := fmt.Sprintf("[%5.1fs] %s rec/s  %.1f MB/s  p99 %.2f ms (so far %s)  errors %d (total %d)",
			smp.TS, commas(smp.RecordsPerSec, 0), smp.MBPerSec, smp.ProduceP99Ms, p99, smp.Errors, failed)
		if consumed > 0 {
			line += fmt.Sprintf("  consumed %s/s e2e p99 %.2f ms", commas(smp.ConsumedPerSec, 0), smp.E2EP99Ms)
		}
		if u.brokers {
			line += fmt.Sprintf("  broker cpu %.0f%% rss %s", smp.BrokerCPUPercent, mib(u.brokerRSS))
		}
		fmt.Fprintln(s.progress, line)
	}
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
