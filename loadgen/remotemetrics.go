package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// Tiered storage (docs/tiered-storage.md) on spawned brokers: the remote
// log manager's counters, read from the same /metrics endpoints as the
// broker-side produce latency (brokermetrics.go) when the measurement
// starts and once the run's consumers are done, summed over the brokers:
// segments and bytes copied to the object store, the store's put time,
// the copy backlog when the run ended, and what fetches read back from
// the store (bytes fetched, remote reads, their mean and p99 time). A
// broker without an object store exports none of these series; with none
// on any broker the report has no remote object.
//
// A spawn config (--spawn-config) that names an object store (a
// strata.remote.storage.* key) also makes loadgen create its topic with
// remote.storage.enable=true: Kafka has no broker default for that topic
// key, and a spawned broker's topic is created by loadgen.

// The broker's remote-storage series (cmd/strata/serve_remote.go).
const (
	remoteSegmentsCopied = "strata_remote_segments_copied_total"
	remoteCopiedBytes    = "strata_remote_copied_bytes_total"
	remoteCopySeconds    = "strata_remote_copy_seconds_total"
	remoteCopyFailures   = "strata_remote_copy_failures_total"
	remoteStoreRetries   = "strata_remote_store_retries_total"
	remoteLagSegments    = "strata_remote_copy_lag_segments"
	remoteLagBytes       = "strata_remote_copy_lag_bytes"
	remoteFetchedBytes   = "strata_remote_fetched_bytes_total"
	remoteReads          = "strata_remote_reads_total"
	remoteReadBytes      = "strata_remote_read_bytes_total"
	remoteReadSeconds    = "strata_remote_read_seconds_total"
	remoteReadTime       = "strata_remote_read_time_seconds"
)

// remoteStorageKeyPrefix starts the broker keys naming an object store.
const remoteStorageKeyPrefix = "strata.remote.storage."

// RemoteResult is the spawned brokers' tiered storage over a run, summed
// over the brokers: counters from the measurement's start to the end of
// the run (consumers done), the backlog at the end.
type RemoteResult struct {
	SegmentsUploaded int64 `json:"segments_uploaded"`
	BytesUploaded    int64 `json:"bytes_uploaded"` // every object of the copied segments
	// UploadSeconds is the object store's time for those puts (retries
	// included, throttle waits not); UploadMBps is BytesUploaded over it.
	UploadSeconds  float64 `json:"upload_seconds"`
	UploadMBps     float64 `json:"upload_mbps,omitempty"`
	UploadFailures int64   `json:"upload_failures"` // copies given up (retried later)
	StoreRetries   int64   `json:"store_retries"`
	// UploadLagSegments and UploadLagBytes: rolled segments of tiered
	// topics not copied yet when the run ended.
	UploadLagSegments int64 `json:"upload_lag_segments"`
	UploadLagBytes    int64 `json:"upload_lag_bytes"`
	// FetchedBytes is what fetches below the local log start read from
	// the object store; RemoteReads those fetches (cache hits included)
	// and RemoteReadBytes what they returned.
	FetchedBytes     int64   `json:"fetched_bytes"`
	RemoteReads      int64   `json:"remote_reads"`
	RemoteReadBytes  int64   `json:"remote_read_bytes"`
	RemoteReadMeanMs float64 `json:"remote_read_mean_ms,omitempty"`
	RemoteReadP99Ms  float64 `json:"remote_read_p99_ms,omitempty"`
}

// remoteSample is one reading of the brokers' remote-storage series,
// summed; on is false when no broker exports them.
type remoteSample struct {
	on                                  bool
	segments, bytes, failures, retries  float64
	copySeconds, lagSegments, lagBytes  float64
	fetched, reads, readBytes, readSecs float64
	readTime                            promHist
}

// scrapeRemote reads the remote-storage series from a /metrics URL.
func scrapeRemote(ctx context.Context, cl *http.Client, url string) (remoteSample, error) {
	var s remoteSample
	fams, err := scrapeFamilies(ctx, cl, url)
	if err != nil {
		return s, err
	}
	if fams[remoteSegmentsCopied] == nil {
		return s, nil // no object store on this broker
	}
	s.on = true
	for name, v := range map[string]*float64{
		remoteSegmentsCopied: &s.segments, remoteCopiedBytes: &s.bytes, remoteCopySeconds: &s.copySeconds,
		remoteCopyFailures: &s.failures, remoteStoreRetries: &s.retries, remoteLagSegments: &s.lagSegments,
		remoteLagBytes: &s.lagBytes, remoteFetchedBytes: &s.fetched, remoteReads: &s.reads,
		remoteReadBytes: &s.readBytes, remoteReadSeconds: &s.readSecs,
	} {
		*v = familyValue(fams[name])
	}
	if fam := fams[remoteReadTime]; fam != nil && len(fam.GetMetric()) > 0 {
		dh := fam.GetMetric()[0].GetHistogram()
		if dh == nil {
			return s, fmt.Errorf("GET %s: %s is not a histogram", url, remoteReadTime)
		}
		if s.readTime, err = histFrom(dh); err != nil {
			return s, fmt.Errorf("GET %s: %s: %w", url, remoteReadTime, err)
		}
	}
	return s, nil
}

// familyValue is the sum of a counter or gauge family's series (0 when
// absent).
func familyValue(fam *dto.MetricFamily) float64 {
	var v float64
	for _, m := range fam.GetMetric() {
		switch {
		case m.GetCounter() != nil:
			v += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			v += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			v += m.GetUntyped().GetValue()
		}
	}
	return v
}

// add sums two brokers' readings.
func (s remoteSample) add(o remoteSample) (remoteSample, error) {
	h, err := s.readTime.add(o.readTime)
	if err != nil {
		return s, err
	}
	return remoteSample{
		on: s.on || o.on, segments: s.segments + o.segments, bytes: s.bytes + o.bytes,
		failures: s.failures + o.failures, retries: s.retries + o.retries, copySeconds: s.copySeconds + o.copySeconds,
		lagSegments: s.lagSegments + o.lagSegments, lagBytes: s.lagBytes + o.lagBytes, fetched: s.fetched + o.fetched,
		reads: s.reads + o.reads, readBytes: s.readBytes + o.readBytes, readSecs: s.readSecs + o.readSecs, readTime: h,
	}, nil
}

// brokerRemoteSample reads and sums the spawned brokers' remote-storage
// series; nil when not measured (as brokerProduceSample).
func (c *Cluster) brokerRemoteSample(ctx context.Context) *remoteSample {
	if c == nil || c.metricsOff {
		return nil
	}
	var sum remoteSample
	for _, b := range c.Brokers {
		if b.MetricsAddr == "" {
			return nil
		}
		sctx, cancel := context.WithTimeout(ctx, brokerMetricsTimeout)
		s, err := scrapeRemote(sctx, c.httpClient(), "http://"+b.MetricsAddr+"/metrics")
		cancel()
		if err == nil {
			sum, err = sum.add(s)
		}
		if err != nil {
			c.metricsFailed(fmt.Errorf("broker %d: %w", b.NodeID, err))
			return nil
		}
	}
	return &sum
}

// setBrokerRemote fills r.Remote from two readings: nil when either is
// missing or no broker has an object store.
func (r *Result) setBrokerRemote(s0, s1 *remoteSample) error {
	if s0 == nil || s1 == nil || !s1.on {
		return nil
	}
	rt, err := s1.readTime.sub(s0.readTime)
	if err != nil {
		return err
	}
	if s1.segments < s0.segments || s1.bytes < s0.bytes || s1.reads < s0.reads || s1.fetched < s0.fetched {
		return fmt.Errorf("remote-storage counters went back (did a broker restart?)")
	}
	rr := &RemoteResult{
		SegmentsUploaded: int64(s1.segments - s0.segments), BytesUploaded: int64(s1.bytes - s0.bytes),
		UploadSeconds: s1.copySeconds - s0.copySeconds, UploadFailures: int64(s1.failures - s0.failures),
		StoreRetries: int64(s1.retries - s0.retries), UploadLagSegments: int64(s1.lagSegments), UploadLagBytes: int64(s1.lagBytes),
		FetchedBytes: int64(s1.fetched - s0.fetched), RemoteReads: int64(s1.reads - s0.reads),
		RemoteReadBytes: int64(s1.readBytes - s0.readBytes),
	}
	if rr.UploadSeconds > 0 {
		rr.UploadMBps = float64(rr.BytesUploaded) / rr.UploadSeconds / 1e6
	}
	const s2ms = 1000
	if rr.RemoteReads > 0 {
		rr.RemoteReadMeanMs = s2ms * (s1.readSecs - s0.readSecs) / float64(rr.RemoteReads)
	}
	if rt.count > 0 {
		rr.RemoteReadP99Ms = s2ms * rt.quantile(0.99)
	}
	r.Remote = rr
	return nil
}

// summary is the report table's line.
func (rr *RemoteResult) summary() string {
	s := fmt.Sprintf("remote storage: %s segments, %s uploaded (%s MB/s while the store took them), %s segments / %s not uploaded at the end; %s fetched from the store, %s remote reads",
		commas(float64(rr.SegmentsUploaded), 0), mib1(rr.BytesUploaded), f2(rr.UploadMBps),
		commas(float64(rr.UploadLagSegments), 0), mib1(rr.UploadLagBytes), mib1(rr.FetchedBytes), commas(float64(rr.RemoteReads), 0))
	if rr.RemoteReads > 0 {
		s += fmt.Sprintf(", mean %s ms, p99 %s ms", f2(rr.RemoteReadMeanMs), f2(rr.RemoteReadP99Ms))
	}
	if rr.UploadFailures > 0 || rr.StoreRetries > 0 {
		s += fmt.Sprintf("; %d copies given up, %d store retries", rr.UploadFailures, rr.StoreRetries)
	}
	return s
}

// topicConfigs is the configs loadgen creates its topic with:
// remote.storage.enable=true when the brokers are spawned from a config
// naming an object store, none otherwise.
func (c *Config) topicConfigs() (map[string]*string, error) {
	if c.Spawn == 0 || c.SpawnConfig == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.SpawnConfig)
	if err != nil {
		return nil, fmt.Errorf("loadgen: spawn config: %w", err)
	}
	if !hasKeyPrefix(b, remoteStorageKeyPrefix) {
		return nil, nil
	}
	on := "true"
	return map[string]*string{"remote.storage.enable": &on}, nil
}

// hasKeyPrefix reports whether a properties file's text sets a key
// starting with prefix.
func hasKeyPrefix(props []byte, prefix string) bool {
	for line := range strings.Lines(string(props)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

// mib1 is bytes in MiB with one decimal (a short run uploads little).
func mib1(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
