package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stratalog/strata/metrics"
)

// The broker's own produce latency. Every spawned broker serves Prometheus
// metrics on a loopback port of its own (metrics.listeners in its
// properties file, spawn.go); runOnce scrapes each broker's /metrics where
// it reads CPU and device counters, when the measurement starts and when
// the last acknowledgement arrived, and keeps the difference of the
// histogram strata_request_total_time_seconds{request="Produce"} (a
// request's whole frame read → its response handed to the connection, so
// with acks=all the wait for durability and replication too), summed over
// the brokers. Its percentiles are interpolated linearly within a bucket as
// Prometheus's histogram_quantile does (the buckets grow by about 22 %
// each, so a figure is within a bucket's width of the truth), and its
// maximum is only known as the upper bound of the highest bucket that
// holds a request. These are per request, the client's are per record.

// brokerMetricsTimeout bounds one scrape.
const brokerMetricsTimeout = 5 * time.Second

// produceRequest is the label value of Produce in RequestTotalTime.
const produceRequest = "Produce"

// promHist is a Prometheus histogram: cumulative counts by ascending upper
// bound (seconds; the last may be +Inf), the sample count and sum.
type promHist struct {
	bounds []float64
	cum    []uint64
	count  uint64
	sum    float64
}

// produceHist is the Produce series of the request-time histogram family
// (metrics.RequestTotalTime or metrics.RequestReaderTime) in a scrape of
// url; a broker that has not answered a Produce yet, or does not export
// the family, has an empty one.
func produceHist(fams map[string]*dto.MetricFamily, url, family string) (promHist, error) {
	fam := fams[family]
	if fam == nil {
		return promHist{}, nil
	}
	for _, m := range fam.GetMetric() {
		produce := false
		for _, lp := range m.GetLabel() {
			produce = produce || lp.GetName() == "request" && lp.GetValue() == produceRequest
		}
		if !produce {
			continue
		}
		dh := m.GetHistogram()
		if dh == nil {
			return promHist{}, fmt.Errorf("GET %s: %s is not a histogram", url, family)
		}
		h, err := histFrom(dh)
		if err != nil {
			return promHist{}, fmt.Errorf("GET %s: %s: %w", url, family, err)
		}
		return h, nil
	}
	return promHist{}, nil
}

// scrapeFamilies reads and parses a /metrics URL.
func scrapeFamilies(ctx context.Context, cl *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return fams, nil
}

// histFrom turns a scraped histogram into a promHist, checked.
func histFrom(dh *dto.Histogram) (promHist, error) {
	h := promHist{count: dh.GetSampleCount(), sum: dh.GetSampleSum()}
	for _, b := range dh.GetBucket() {
		h.bounds = append(h.bounds, b.GetUpperBound())
		h.cum = append(h.cum, b.GetCumulativeCount())
	}
	return h, h.check()
}

// check: bounds ascending, counts not decreasing and within the count.
func (h promHist) check() error {
	for i := range h.bounds {
		if i > 0 && (h.bounds[i] <= h.bounds[i-1] || h.cum[i] < h.cum[i-1]) {
			return errors.New("buckets out of order")
		}
		if h.cum[i] > h.count {
			return errors.New("a bucket counts more than the histogram")
		}
	}
	return nil
}

// sameBounds reports whether a and b have the same buckets.
func sameBounds(a, b promHist) bool { return slices.Equal(a.bounds, b.bounds) }

// sub is h minus an earlier reading of the same histogram.
func (h promHist) sub(earlier promHist) (promHist, error) {
	if earlier.count == 0 && len(earlier.bounds) == 0 {
		return h, nil
	}
	if !sameBounds(h, earlier) || h.count < earlier.count {
		return promHist{}, errors.New("the histogram went back (did the broker restart?)")
	}
	d := promHist{bounds: h.bounds, cum: make([]uint64, len(h.cum)), count: h.count - earlier.count, sum: h.sum - earlier.sum}
	for i := range h.cum {
		if h.cum[i] < earlier.cum[i] {
			return promHist{}, errors.New("a bucket went back (did the broker restart?)")
		}
		d.cum[i] = h.cum[i] - earlier.cum[i]
	}
	return d, nil
}

// add sums two brokers' histograms.
func (h promHist) add(o promHist) (promHist, error) {
	switch {
	case len(o.bounds) == 0 && o.count == 0:
		return h, nil
	case len(h.bounds) == 0 && h.count == 0:
		return o, nil
	case !sameBounds(h, o):
		return promHist{}, errors.New("brokers' histograms have different buckets")
	}
	s := promHist{bounds: h.bounds, cum: make([]uint64, len(h.cum)), count: h.count + o.count, sum: h.sum + o.sum}
	for i := range h.cum {
		s.cum[i] = h.cum[i] + o.cum[i]
	}
	return s, nil
}

// quantile is the q-quantile (0..1) in seconds, interpolated linearly
// within its bucket (the first bucket starts at 0); in the +Inf bucket it
// is the last finite bound. NaN when empty.
func (h promHist) quantile(q float64) float64 {
	if h.count == 0 || len(h.bounds) == 0 {
		return math.NaN()
	}
	rank := q * float64(h.count)
	for i, ub := range h.bounds {
		if float64(h.cum[i]) < rank {
			continue
		}
		lo, below := 0.0, uint64(0)
		if i > 0 {
			lo, below = h.bounds[i-1], h.cum[i-1]
		}
		if math.IsInf(ub, 1) {
			return lo
		}
		in := h.cum[i] - below
		if in == 0 {
			return ub
		}
		return lo + (ub-lo)*(rank-float64(below))/float64(in)
	}
	// Past the listed buckets (an exposition without +Inf): the last bound.
	return h.bounds[len(h.bounds)-1]
}

// maxBucket is the upper bound (seconds) of the highest bucket holding a
// request; +Inf past the last finite bound. NaN when empty.
func (h promHist) maxBucket() float64 {
	prev := uint64(0)
	top := math.NaN()
	for i, ub := range h.bounds {
		if h.cum[i] > prev {
			top = ub
		}
		prev = h.cum[i]
	}
	if h.count > prev {
		top = math.Inf(1) // counted but in no listed bucket
	}
	return top
}

// brokerProduceSample reads and sums the spawned brokers' Produce
// histograms, one scrape per broker: request→response (total) and the
// time handlers held their connection's reader (reader: a client's
// latency far above the broker's request→response with long reader times
// is requests waiting in the socket behind earlier ones). Both nil when
// they are not measured. The first failure of a run is logged
// (clusterlog) and ends the measurement for the run.
func (c *Cluster) brokerProduceSample(ctx context.Context) (total, reader *promHist) {
	if c == nil || c.metricsOff {
		return nil, nil
	}
	var sum, rsum promHist
	for _, b := range c.Brokers {
		if b.MetricsAddr == "" {
			return nil, nil
		}
		url := "http://" + b.MetricsAddr + "/metrics"
		sctx, cancel := context.WithTimeout(ctx, brokerMetricsTimeout)
		fams, err := scrapeFamilies(sctx, c.httpClient(), url)
		cancel()
		var h, rh promHist
		if err == nil {
			h, err = produceHist(fams, url, metrics.RequestTotalTime)
		}
		if err == nil {
			rh, err = produceHist(fams, url, metrics.RequestReaderTime)
		}
		if err == nil {
			sum, err = sum.add(h)
		}
		if err == nil {
			rsum, err = rsum.add(rh)
		}
		if err != nil {
			c.metricsFailed(fmt.Errorf("broker %d: %w", b.NodeID, err))
			return nil, nil
		}
	}
	return &sum, &rsum
}

func (c *Cluster) httpClient() *http.Client {
	if c.http == nil {
		c.http = &http.Client{Timeout: brokerMetricsTimeout}
	}
	return c.http
}

// metricsFailed stops scraping for the rest of the target's runs and says
// why once.
func (c *Cluster) metricsFailed(err error) {
	c.metricsOff = true
	if c.log != nil {
		fmt.Fprintf(c.log, "broker produce latency not measured: %v\n", err)
	}
}

// windowFigs are a request-time histogram's figures over the window, in
// milliseconds: the difference of two readings (ok false when either is
// missing or the window holds no request).
type windowFigs struct {
	n                                int64
	mean, p50, p90, p99, p999, maxMs float64
	pastLast                         bool // past the last finite bound: at least maxMs
}

func figsOf(h0, h1 *promHist) (f windowFigs, ok bool, err error) {
	if h0 == nil || h1 == nil {
		return f, false, nil
	}
	d, err := h1.sub(*h0)
	if err != nil || d.count == 0 {
		return f, false, err
	}
	const s2ms = 1000
	f = windowFigs{n: int64(d.count), mean: s2ms * d.sum / float64(d.count), p50: s2ms * d.quantile(0.5),
		p90: s2ms * d.quantile(0.9), p99: s2ms * d.quantile(0.99), p999: s2ms * d.quantile(0.999)}
	top := d.maxBucket()
	if math.IsInf(top, 1) {
		f.pastLast = true
		top = d.bounds[len(d.bounds)-1]
		if math.IsInf(top, 1) && len(d.bounds) > 1 {
			top = d.bounds[len(d.bounds)-2]
		}
	}
	f.maxMs = s2ms * top
	return f, true, nil
}

// setBrokerReader fills r's reader-time figures (BrokerReader*) from two
// readings of brokerProduceSample's reader histogram.
func (r *Result) setBrokerReader(h0, h1 *promHist) error {
	f, ok, err := figsOf(h0, h1)
	if ok {
		r.BrokerReaderRequests, r.BrokerReaderMeanMs, r.BrokerReaderMaxBucketMs = f.n, f.mean, f.maxMs
		r.BrokerReaderP50Ms, r.BrokerReaderP90Ms, r.BrokerReaderP99Ms, r.BrokerReaderP999Ms = f.p50, f.p90, f.p99, f.p999
	}
	return err
}

// setBrokerProduce fills r's broker-side produce figures from two readings.
func (r *Result) setBrokerProduce(h0, h1 *promHist) error {
	f, ok, err := figsOf(h0, h1)
	if ok {
		r.BrokerProduceRequests, r.BrokerProduceMeanMs, r.BrokerProduceMaxBucketMs = f.n, f.mean, f.maxMs
		r.BrokerProduceP50Ms, r.BrokerProduceP90Ms, r.BrokerProduceP99Ms, r.BrokerProduceP999Ms = f.p50, f.p90, f.p99, f.p999
		r.BrokerProducePastLastBucket = f.pastLast
	}
	return err
}
