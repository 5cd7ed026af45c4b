// Package metricstest scrapes a metrics endpoint over HTTP and finds
// samples in what it read, for tests of the metrics the broker exports.
package metricstest

import (
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are the metric families of one scrape, by name.
type Families map[string]*dto.MetricFamily

// Scrape GETs url (http://host:port/metrics) and parses the Prometheus
// text format it answers.
func Scrape(url string) (Families, error) {
	cl := http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: parsing: %w", url, err)
	}
	return Families(fams), nil
}

// Find returns the sample of the family name whose labels include every
// pair of labels (name, value, name, value, ...); nil if there is none.
func (f Families) Find(name string, labels ...string) *dto.Metric {
	fam := f[name]
	if fam == nil {
		return nil
	}
next:
	for _, m := range fam.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
					break
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

// Counter is the value of a counter sample, 0 if there is none.
func (f Families) Counter(name string, labels ...string) float64 {
	return f.Find(name, labels...).GetCounter().GetValue()
}

// Gauge is the value of a gauge sample, -1 if there is none.
func (f Families) Gauge(name string, labels ...string) float64 {
	m := f.Find(name, labels...)
	if m == nil {
		return -1
	}
	return m.GetGauge().GetValue()
}

// HistogramCount is the sample count of a histogram, 0 if there is none.
func (f Families) HistogramCount(name string, labels ...string) uint64 {
	return f.Find(name, labels...).GetHistogram().GetSampleCount()
}
