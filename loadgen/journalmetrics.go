package loadgen

import (
	"context"
	"fmt"
	"net/http"

	"github.com/stratalog/strata/metrics"
)

// The spawned brokers' journal (log.io.journal.bytes) over the measured
// window, read from the same /metrics endpoints as the broker-side produce
// latency (brokermetrics.go): how long a journal group's write took, how
// many flushes (fdatasync) there were and how long they took, and how long
// an acks=all append waited for its group (first append staged → durable). Brokers without a journal report
// nothing and the figures stay absent.

// journalSample is the brokers' journal histograms, summed.
type journalSample struct {
	write, flush, commit, ckpt promHist
}

// scrapeJournal reads the journal histograms from a /metrics URL (empty
// when the broker has no journal).
func scrapeJournal(ctx context.Context, cl *http.Client, url string) (journalSample, error) {
	var s journalSample
	fams, err := scrapeFamilies(ctx, cl, url)
	if err != nil {
		return s, err
	}
	for name, h := range map[string]*promHist{metrics.JournalWrite: &s.write, metrics.JournalFlush: &s.flush, metrics.JournalCommitWait: &s.commit, metrics.JournalCkptWait: &s.ckpt} {
		fam := fams[name]
		if fam == nil || len(fam.GetMetric()) == 0 {
			continue
		}
		dh := fam.GetMetric()[0].GetHistogram()
		if dh == nil {
			return s, fmt.Errorf("GET %s: %s is not a histogram", url, name)
		}
		if *h, err = histFrom(dh); err != nil {
			return s, fmt.Errorf("GET %s: %s: %w", url, name, err)
		}
	}
	return s, nil
}

// brokerJournalSample reads and sums the spawned brokers' journal
// histograms; nil when not measured (as brokerProduceSample).
func (c *Cluster) brokerJournalSample(ctx context.Context) *journalSample {
	if c == nil || c.metricsOff {
		return nil
	}
	var sum journalSample
	for _, b := range c.Brokers {
		if b.MetricsAddr == "" {
			return nil
		}
		sctx, cancel := context.WithTimeout(ctx, brokerMetricsTimeout)
		s, err := scrapeJournal(sctx, c.httpClient(), "http://"+b.MetricsAddr+"/metrics")
		cancel()
		if err == nil {
			if sum.write, err = sum.write.add(s.write); err == nil {
				if sum.flush, err = sum.flush.add(s.flush); err == nil {
					if sum.commit, err = sum.commit.add(s.commit); err == nil {
						sum.ckpt, err = sum.ckpt.add(s.ckpt)
					}
				}
			}
		}
		if err != nil {
			c.metricsFailed(fmt.Errorf("broker %d: %w", b.NodeID, err))
			return nil
		}
	}
	return &sum
}

// setBrokerJournal fills r's journal figures from two readings.
func (r *Result) setBrokerJournal(j0, j1 *journalSample) error {
	if j0 == nil || j1 == nil {
		return nil
	}
	w, err := j1.write.sub(j0.write)
	if err != nil {
		return err
	}
	c, err := j1.commit.sub(j0.commit)
	if err != nil {
		return err
	}
	fl, err := j1.flush.sub(j0.flush)
	if err != nil {
		return err
	}
	ck, err := j1.ckpt.sub(j0.ckpt)
	if err != nil {
		return err
	}
	if w.count == 0 {
		return nil
	}
	const s2ms = 1000
	r.BrokerJournalGroups = int64(w.count)
	r.BrokerJournalWriteP50Ms, r.BrokerJournalWriteP99Ms = s2ms*w.quantile(0.5), s2ms*w.quantile(0.99)
	r.BrokerJournalWriteMeanMs = s2ms * w.sum / float64(w.count)
	if fl.count > 0 {
		r.BrokerJournalFlushes = int64(fl.count)
		r.BrokerJournalFlushP50Ms, r.BrokerJournalFlushP99Ms = s2ms*fl.quantile(0.5), s2ms*fl.quantile(0.99)
	}
	if c.count > 0 {
		r.BrokerJournalCommitP50Ms, r.BrokerJournalCommitP99Ms = s2ms*c.quantile(0.5), s2ms*c.quantile(0.99)
		r.BrokerJournalCommitMeanMs = s2ms * c.sum / float64(c.count)
	}
	if ck.count > 0 {
		r.BrokerJournalCkptWaits, r.BrokerJournalCkptWaitMs = int64(ck.count), s2ms*ck.sum
	}
	return nil
}
