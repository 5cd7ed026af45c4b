package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Log sizes, the tail cache and consumer group lag, read at scrape time.
// Sizes and lag are per topic and per group unless Options.PartitionLabels
// (metrics.partition.labels) adds the partition.
const (
	LogSizeBytes    = "strata_log_size_bytes"
	LogSegments     = "strata_log_segments"
	TailCacheHits   = "strata_tail_cache_hits_total"
	TailCacheMisses = "strata_tail_cache_misses_total"
	// GroupLag is a group's committed offsets' distance to the high
	// watermark, in records: per group (summed over its partitions) or,
	// with PartitionLabels, per group, topic and partition.
	GroupLag = "strata_group_lag_records"
	// GroupRetentionMargin is the committed offset's distance above the
	// log start offset: how many records retention may still delete
	// before the group's next read is out of range. Per group (the
	// smallest over its partitions) or per group, topic and partition.
	GroupRetentionMargin = "strata_group_retention_margin_records"
	// GroupLagSeconds is the age of a group's oldest unconsumed record:
	// the scrape's time minus the timestamp of the record at the
	// committed offset (0 when the group is caught up). Per group (the
	// largest over its partitions, as kafka-lag-exporter's
	// kafka_consumergroup_group_max_lag_seconds) or, with
	// PartitionLabels, per group, topic and partition (its
	// kafka_consumergroup_group_lag_seconds).
	GroupLagSeconds = "strata_group_lag_seconds"
)

// LogSize is one partition's log on this broker.
type LogSize struct {
	Topic     string
	Partition int32
	Segments  int
	Bytes     int64
}

// SetLogs sets the source of the log sizes, called at each scrape.
func (b *Broker) SetLogs(f func() []LogSize) { b.logs.Store(&f) }

// TailCacheStats are the tail cache's counters.
type TailCacheStats struct{ Hits, Misses uint64 }

// SetTailCache sets the source of the tail-cache counters; ok false (the
// cache is off) reports nothing.
func (b *Broker) SetTailCache(f func() (TailCacheStats, bool)) { b.tailCache.Store(&f) }

// GroupOffset is a group's committed offset of one partition against the
// partition's log on this broker.
type GroupOffset struct {
	Group, Topic string
	Partition    int32
	Lag          int64 // high watermark - committed offset (0 if above it)
	Margin       int64 // committed offset - log start offset (negative: fell off)
	// Oldest is the timestamp of the oldest unconsumed record (the first
	// record of the batch holding the committed offset) when Lag > 0;
	// the zero Time when it could not be read (the partition then has no
	// lag-seconds series). Ignored when Lag is 0: the age is 0.
	Oldest time.Time
}

// SetGroups sets the source of the group offsets, called at each scrape.
func (b *Broker) SetGroups(f func() []GroupOffset) { b.groups.Store(&f) }

var (
	partLabels        = []string{"topic", "partition"}
	groupPartLabels   = []string{"group", "topic", "partition"}
	descLogBytesTopic = prometheus.NewDesc(LogSizeBytes,
		"Bytes of the partitions' logs on this broker (record batches in their segments), by topic.", []string{"topic"}, nil)
	descLogBytesPart = prometheus.NewDesc(LogSizeBytes,
		"Bytes of the partition's log on this broker (record batches in its segments).", partLabels, nil)
	descLogSegsTopic = prometheus.NewDesc(LogSegments,
		"Segments of the partitions' logs on this broker, by topic.", []string{"topic"}, nil)
	descLogSegsPart = prometheus.NewDesc(LogSegments,
		"Segments of the partition's log on this broker.", partLabels, nil)
	descTailHits = prometheus.NewDesc(TailCacheHits,
		"Reads (consumer and follower fetches, one per segment read) served from the tail cache in memory.", nil, nil)
	descTailMisses = prometheus.NewDesc(TailCacheMisses,
		"Reads that could use the tail cache and were served from the segment file.", nil, nil)
	descLagGroup = prometheus.NewDesc(GroupLag,
		"Records between the group's committed offsets and the high watermarks, summed over the partitions it committed (whose log is on this broker).", []string{"group"}, nil)
	descLagPart = prometheus.NewDesc(GroupLag,
		"Records between the group's committed offset and the partition's high watermark.", groupPartLabels, nil)
	descMarginGroup = prometheus.NewDesc(GroupRetentionMargin,
		"The smallest, over the group's committed partitions, of committed offset minus log start offset: records retention may delete before the group's position is gone (negative: it is gone).", []string{"group"}, nil)
	descMarginPart = prometheus.NewDesc(GroupRetentionMargin,
		"The group's committed offset minus the partition's log start offset (negative: records it had not read were deleted).", groupPartLabels, nil)
	descLagSecsGroup = prometheus.NewDesc(GroupLagSeconds,
		"Age of the group's oldest unconsumed record, the largest over the partitions it committed (whose log is on this broker): now minus the timestamp of the record at the committed offset; 0 when caught up.", []string{"group"}, nil)
	descLagSecsPart = prometheus.NewDesc(GroupLagSeconds,
		"Age of the group's oldest unconsumed record of the partition: now minus the timestamp of the record at the committed offset; 0 when caught up.", groupPartLabels, nil)
)

// lagSeconds is the age of o's oldest unconsumed record at now: 0 when o
// lags by no record, never negative (a producer's clock ahead of the
// broker's); ok false when o lags but its record's time is unknown.
func lagSeconds(o GroupOffset, now time.Time) (float64, bool) {
	if now.IsZero() {
		return 0, false // no clock (Options.Now)
	}
	if o.Lag <= 0 {
		return 0, true
	}
	if o.Oldest.IsZero() {
		return 0, false
	}
	return max(now.Sub(o.Oldest).Seconds(), 0), true
}

func (b *Broker) collectLogs(ch chan<- prometheus.Metric) {
	if f := b.tailCache.Load(); f != nil && *f != nil {
		if s, ok := (*f)(); ok {
			ch <- prometheus.MustNewConstMetric(descTailHits, prometheus.CounterValue, float64(s.Hits))
			ch <- prometheus.MustNewConstMetric(descTailMisses, prometheus.CounterValue, float64(s.Misses))
		}
	}
	if f := b.logs.Load(); f != nil && *f != nil {
		logs := (*f)()
		if b.opts.PartitionLabels {
			for _, l := range logs {
				p := strconv.Itoa(int(l.Partition))
				ch <- prometheus.MustNewConstMetric(descLogBytesPart, prometheus.GaugeValue, float64(l.Bytes), l.Topic, p)
				ch <- prometheus.MustNewConstMetric(descLogSegsPart, prometheus.GaugeValue, float64(l.Segments), l.Topic, p)
			}
		} else {
			type sum struct {
				bytes int64
				segs  int
			}
			by := map[string]*sum{}
			var order []string
			for _, l := range logs {
				s := by[l.Topic]
				if s == nil {
					s = &sum{}
					by[l.Topic] = s
					order = append(order, l.Topic)
				}
				s.bytes += l.Bytes
				s.segs += l.Segments
			}
			for _, t := range order {
				ch <- prometheus.MustNewConstMetric(descLogBytesTopic, prometheus.GaugeValue, float64(by[t].bytes), t)
				ch <- prometheus.MustNewConstMetric(descLogSegsTopic, prometheus.GaugeValue, float64(by[t].segs), t)
			}
		}
	}
	if f := b.groups.Load(); f != nil && *f != nil {
		offs := (*f)()
		now := b.now()
		if b.opts.PartitionLabels {
			seen := make(map[GroupOffset]bool, len(offs))
			for _, o := range offs {
				k := GroupOffset{Group: o.Group, Topic: o.Topic, Partition: o.Partition}
				if seen[k] {
					continue // one series per group and partition
				}
				seen[k] = true
				p := strconv.Itoa(int(o.Partition))
				ch <- prometheus.MustNewConstMetric(descLagPart, prometheus.GaugeValue, float64(o.Lag), o.Group, o.Topic, p)
				ch <- prometheus.MustNewConstMetric(descMarginPart, prometheus.GaugeValue, float64(o.Margin), o.Group, o.Topic, p)
				if secs, ok := lagSeconds(o, now); ok {
					ch <- prometheus.MustNewConstMetric(descLagSecsPart, prometheus.GaugeValue, secs, o.Group, o.Topic, p)
				}
			}
			return
		}
		type agg struct {
			lag, margin int64
			secs        float64
			known       bool // secs holds at least one partition's age
		}
		by := map[string]*agg{}
		var order []string
		for _, o := range offs {
			a := by[o.Group]
			if a == nil {
				a = &agg{margin: o.Margin}
				by[o.Group] = a
				order = append(order, o.Group)
			}
			a.lag += o.Lag
			a.margin = min(a.margin, o.Margin)
			if secs, ok := lagSeconds(o, now); ok {
				a.secs = max(a.secs, secs)
				a.known = true
			}
		}
		for _, g := range order {
			a := by[g]
			ch <- prometheus.MustNewConstMetric(descLagGroup, prometheus.GaugeValue, float64(a.lag), g)
			ch <- prometheus.MustNewConstMetric(descMarginGroup, prometheus.GaugeValue, float64(a.margin), g)
			if a.known {
				ch <- prometheus.MustNewConstMetric(descLagSecsGroup, prometheus.GaugeValue, a.secs, g)
			}
		}
	}
}

// describeMore and collectMore add the metrics of requests.go's siblings
// (cluster.go, conns.go, logs.go) to brokerCollector.
func (c *brokerCollector) describeMore(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descISRShrinks, descISRExpands, descElections, descControllerRole, descControllerVoter,
		descControllerTerm, descControllerCommit, descControllerApplied, descControllerLast,
		descConnections, descConnAccepted, descConnClosed, descTailHits, descTailMisses} {
		ch <- d
	}
	if c.opts.PartitionLabels {
		for _, d := range []*prometheus.Desc{descLogBytesPart, descLogSegsPart, descLagPart, descMarginPart, descLagSecsPart} {
			ch <- d
		}
	} else {
		for _, d := range []*prometheus.Desc{descLogBytesTopic, descLogSegsTopic, descLagGroup, descMarginGroup, descLagSecsGroup} {
			ch <- d
		}
	}
}

func (b *Broker) collectMore(ch chan<- prometheus.Metric) {
	b.collectCluster(ch)
	b.collectConns(ch)
	b.collectLogs(ch)
}
