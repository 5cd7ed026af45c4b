package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/remote/objstore"
	"github.com/stratalog/strata/remote/rlm"
	"github.com/stratalog/strata/server"
)

// Tiered storage in `strata serve` (docs/tiered-storage.md): the
// strata.remote.storage.* properties of the config file name the object
// store; with any of them set the broker runs a remote log manager
// (remote/rlm) over it, keeping its metadata in the data directory's
// remoteMetadataDir, and Fetch and ListOffsets read remote data through
// it. Topics turn it on with remote.storage.enable=true.

// remoteMetadataDir is where the remote log manager keeps its metadata,
// under the data directory (the engine leaves that entry alone).
const remoteMetadataDir = engine.RemoteMetadataDirName

// isRemoteKey reports whether a property configures the object store
// (internal/config does not know them: objstore.Open checks them).
func isRemoteKey(k string) bool { return strings.HasPrefix(k, objstore.ConfigPrefix) }

// remotePropsOf picks the object-store properties of a config file.
func remotePropsOf(props map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range props {
		if isRemoteKey(k) {
			out[k] = v
		}
	}
	return out
}

// openRemote opens the object store and the remote log manager when the
// properties name a store (nil, nil when none is configured), with the
// broker's remote.log.* keys, and installs the manager in srv.
func openRemote(cfg config.Broker, props map[string]string, dataDir string, eng *engine.Engine, srv *server.Server, logger *slog.Logger) (*rlm.Manager, error) {
	if len(props) == 0 {
		return nil, nil
	}
	store, err := objstore.Open(props, vfs.OS)
	if err != nil {
		return nil, fmt.Errorf("tiered storage: %w", err)
	}
	m, err := rlm.Open(rlm.Options{
		Engine: eng, Store: store, Dir: filepath.Join(dataDir, remoteMetadataDir), Logger: logger,
		Interval:               time.Duration(cfg.RemoteTaskIntervalMs) * time.Millisecond,
		CopyMaxBytesPerSecond:  cfg.RemoteCopyMaxBytesPerSec,
		CopySpread:             time.Duration(cfg.RemoteCopySpreadMs) * time.Millisecond,
		FetchMaxBytesPerSecond: cfg.RemoteFetchMaxBytesPerSec,
		CacheBytes:             cfg.RemoteReaderCacheBytes,
		MaxCachedSegmentBytes:  cfg.RemoteReaderCacheBytes / 4,
		ReadAheadBytes:         readAheadBytes(cfg.RemoteReadAheadBytes),
		Metadata:               srv.RemoteMetadata(), // cluster mode: __remote_log_metadata
	})
	if err != nil {
		return nil, fmt.Errorf("tiered storage: %w", err)
	}
	srv.SetRemoteLog(m)
	if met := srv.Config().Metrics; met != nil {
		if err := met.Registry().Register(remoteCollector{m, eng}); err != nil {
			logger.Warn("tiered storage metrics not registered", "err", err)
		}
	}
	kind := props[objstore.KeyType]
	if kind == "" {
		kind = "local"
	}
	logger.Info("tiered storage on", "store", kind, "metadata", filepath.Join(dataDir, remoteMetadataDir))
	return m, nil
}

// readAheadBytes maps remote.log.reader.read.ahead.bytes to
// rlm.Options.ReadAheadBytes (the key's 0, off, is the option's -1).
func readAheadBytes(v int64) int64 {
	if v <= 0 {
		return -1
	}
	return v
}

// remoteCollector exports the remote log manager's counters and copy
// backlog, and the engine's copy cache, on /metrics.
type remoteCollector struct {
	m   *rlm.Manager
	eng *engine.Engine // nil: no copy-cache figures
}

var remoteDescs = struct {
	copied, copiedBytes, retries, failures, deleted, fetched, hits, misses, readAheads, reads, readSeconds, readTime, copyThrottle, fetchThrottle, lagSegments, lagBytes, copySeconds, readBytes *prometheus.Desc
	copyMemHits, copyMemMisses, copyMemEvicted, copyMemBytes                                                                                                                                     *prometheus.Desc
}{
	copied:         prometheus.NewDesc("strata_remote_segments_copied_total", "Segments copied to the object store (COPY_SEGMENT_FINISHED).", nil, nil),
	copiedBytes:    prometheus.NewDesc("strata_remote_copied_bytes_total", "Bytes of every object of the segments copied.", nil, nil),
	retries:        prometheus.NewDesc("strata_remote_store_retries_total", "Object store calls retried after a failure.", nil, nil),
	failures:       prometheus.NewDesc("strata_remote_copy_failures_total", "Segment copies given up (cleaned up and retried at a later pass).", nil, nil),
	deleted:        prometheus.NewDesc("strata_remote_segments_deleted_total", "Remote segments deleted (retention, DeleteRecords, topic deletion, cleanup).", nil, nil),
	fetched:        prometheus.NewDesc("strata_remote_fetched_bytes_total", "Bytes read from the object store for fetches.", nil, nil),
	hits:           prometheus.NewDesc("strata_remote_cache_hits_total", "Remote reads answered from the cache.", nil, nil),
	misses:         prometheus.NewDesc("strata_remote_cache_misses_total", "Remote reads that went to the object store.", nil, nil),
	readAheads:     prometheus.NewDesc("strata_remote_read_ahead_fetches_total", "Chunks and segments fetched into the cache ahead of sequential remote readers (remote.log.reader.read.ahead.bytes).", nil, nil),
	reads:          prometheus.NewDesc("strata_remote_reads_total", "Remote reads (fetches below the local log start).", nil, nil),
	readSeconds:    prometheus.NewDesc("strata_remote_read_seconds_total", "Total time of remote reads (divided by strata_remote_reads_total: the mean latency).", nil, nil),
	readTime:       prometheus.NewDesc("strata_remote_read_time_seconds", "Time of each remote read, cache hits included (Kafka's RemoteLogReaderFetchRateAndTimeMs).", nil, nil),
	copyThrottle:   prometheus.NewDesc("strata_remote_copy_throttle_seconds_total", "Time copies waited for their pace: remote.log.manager.copy.max.bytes.per.second and remote.log.manager.copy.spread.ms (Kafka's remote-copy-throttle-time).", nil, nil),
	fetchThrottle:  prometheus.NewDesc("strata_remote_fetch_throttle_seconds_total", "Time remote reads waited for remote.log.manager.fetch.max.bytes.per.second (Kafka's remote-fetch-throttle-time).", nil, nil),
	lagSegments:    prometheus.NewDesc("strata_remote_copy_lag_segments", "Rolled segments of tiered topics not copied yet.", nil, nil),
	lagBytes:       prometheus.NewDesc("strata_remote_copy_lag_bytes", "Bytes of the rolled segments of tiered topics not copied yet.", nil, nil),
	copySeconds:    prometheus.NewDesc("strata_remote_copy_seconds_total", "Time the object store took to take the copied objects (retries included, throttle waits not): strata_remote_copied_bytes_total over it is the upload rate.", nil, nil),
	readBytes:      prometheus.NewDesc("strata_remote_read_bytes_total", "Bytes remote reads returned: over strata_remote_read_seconds_total, the remote read rate.", nil, nil),
	copyMemHits:    prometheus.NewDesc("strata_remote_copy_cache_hits_total", "Segment copies that read the segment's bytes from memory (remote.log.copy.cache.bytes).", nil, nil),
	copyMemMisses:  prometheus.NewDesc("strata_remote_copy_cache_misses_total", "Segment copies of tiered topics that read the segment file from the disk.", nil, nil),
	copyMemEvicted: prometheus.NewDesc("strata_remote_copy_cache_evicted_total", "Rolled segments whose bytes in memory went to newer appends before their copy (held 30 s: a store down or failing, with the copy cache's budget spent).", nil, nil),
	copyMemBytes:   prometheus.NewDesc("strata_remote_copy_cache_bytes", "Memory the copy cache holds (allocated as used, reused, at most remote.log.copy.cache.bytes).", nil, nil),
}

func (c remoteCollector) Describe(ch chan<- *prometheus.Desc) {
	d := remoteDescs
	for _, x := range []*prometheus.Desc{d.copied, d.copiedBytes, d.retries, d.failures, d.deleted, d.fetched, d.hits, d.misses, d.readAheads, d.reads, d.readSeconds, d.readTime, d.copyThrottle, d.fetchThrottle, d.lagSegments, d.lagBytes, d.copySeconds, d.readBytes, d.copyMemHits, d.copyMemMisses, d.copyMemEvicted, d.copyMemBytes} {
		ch <- x
	}
}

func (c remoteCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.m.Stats()
	d := remoteDescs
	counter := func(desc *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v)
	}
	counter(d.copied, float64(st.SegmentsCopied))
	counter(d.copiedBytes, float64(st.BytesCopied))
	counter(d.retries, float64(st.Retries))
	counter(d.failures, float64(st.CopyFailures))
	counter(d.deleted, float64(st.SegmentsDeleted))
	counter(d.fetched, float64(st.FetchedBytes))
	counter(d.hits, float64(st.CacheHits))
	counter(d.misses, float64(st.CacheMisses))
	counter(d.readAheads, float64(st.ReadAheads))
	counter(d.reads, float64(st.Reads))
	counter(d.readSeconds, st.ReadTime.Seconds())
	ch <- metrics.ConstHistogram(d.readTime, metrics.Histogram(st.ReadLatency))
	counter(d.copyThrottle, st.CopyThrottleTime.Seconds())
	counter(d.fetchThrottle, st.FetchThrottleTime.Seconds())
	counter(d.copySeconds, st.CopyTime.Seconds())
	counter(d.readBytes, float64(st.ReadBytes))
	n, b := c.m.Lag()
	ch <- prometheus.MustNewConstMetric(d.lagSegments, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(d.lagBytes, prometheus.GaugeValue, float64(b))
	if c.eng == nil {
		return
	}
	if cs, ok := c.eng.CopyCacheStats(); ok {
		counter(d.copyMemHits, float64(cs.Hits))
		counter(d.copyMemMisses, float64(cs.Misses))
		counter(d.copyMemEvicted, float64(cs.Evicted))
		ch <- prometheus.MustNewConstMetric(d.copyMemBytes, prometheus.GaugeValue, float64(cs.Bytes))
	}
}

// closeRemote stops the remote log manager (before the engine closes).
func closeRemote(m *rlm.Manager, srv *server.Server) {
	if m == nil {
		return
	}
	srv.SetRemoteLog(nil)
	if met := srv.Config().Metrics; met != nil {
		met.Registry().Unregister(remoteCollector{m: m}) // matched by its descriptors
	}
	m.Close()
}
