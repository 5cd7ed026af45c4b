package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metric names. RequestTotalTime's name, label and buckets are read by
// other tools (the load generator scrapes it): change them together.
const (
	RequestTotalTime  = "strata_request_total_time_seconds"
	RequestsTotal     = "strata_requests_total"
	RequestErrors     = "strata_request_errors_total"
	TopicBytesIn      = "strata_topic_bytes_in_total"
	TopicBytesOut     = "strata_topic_bytes_out_total"
	TopicRecordsIn    = "strata_topic_records_in_total"
	TopicRecordsOut   = "strata_topic_records_out_total"
	Partitions        = "strata_partitions"
	PartitionLeaders  = "strata_partition_leaders"
	UnderReplicated   = "strata_under_replicated_partitions"
	UnderMinISR       = "strata_under_min_isr_partitions"
	OfflinePartitions = "strata_offline_partitions"
)

// RequestTimeBuckets are the upper bounds of RequestTotalTime's buckets:
// 64 exponential buckets from 100 µs to 30 s (each about 22 % wider than
// the one before).
func RequestTimeBuckets() []float64 { return prometheus.ExponentialBucketsRange(0.0001, 30, 64) }

// Bounds of the fixed counter arrays. Served versions and Kafka's error
// codes are well inside them; a version past maxVersion is counted as
// maxVersion, a code outside [-1, maxCode] as maxCode+1 ("UNKNOWN").
const (
	numKeys    = kmsg.MaxKey + 1
	maxVersion = 31
	maxCode    = 159
	numCodes   = maxCode + 3 // -1 .. maxCode, then "UNKNOWN"
)

// Broker is one broker's metrics: a Prometheus registry with the Go and
// process collectors, the request and topic metrics fed by hooks, and the
// sources read at scrape time.
type Broker struct {
	reg *prometheus.Registry

	totalTime *prometheus.HistogramVec
	// observers[key] is totalTime's child for key, created on the key's
	// first request.
	observers [numKeys]atomic.Pointer[observer]
	newObs    sync.Mutex

	requests [numKeys][maxVersion + 1]atomic.Uint64
	errors   [numKeys]atomic.Pointer[[numCodes]atomic.Uint64]

	topics sync.Map // topic name -> *TopicCounters

	opts Options

	// The request phases (requests.go).
	queueTime, processTime, sendTime, throttle, readerTime *keyHist

	// Cluster events (cluster.go).
	isrShrinks, isrExpands, elections atomic.Uint64

	listeners sync.Map // listener name -> *ListenerCounters (conns.go)

	// Scrape-time sources (nil: not reported / not ready).
	partitions atomic.Pointer[func() PartitionCounts]
	topicNames atomic.Pointer[func() []string]
	ready      atomic.Pointer[func() error]
	journal    atomic.Pointer[func() (JournalStats, bool)]
	logs       atomic.Pointer[func() []LogSize]
	tailCache  atomic.Pointer[func() (TailCacheStats, bool)]
	groups     atomic.Pointer[func() []GroupOffset]
	controller atomic.Pointer[func() (RaftStats, bool)]
	device     atomic.Pointer[func() (DeviceStats, bool)] // device.go
}

// Options are the choices of New that change which series exist.
type Options struct {
	// PartitionLabels (metrics.partition.labels) reports the log sizes and
	// consumer group lag per partition (labels topic and partition) instead
	// of per topic and per group: one series per partition (and per group
	// and partition), so it is off by default.
	PartitionLabels bool
	// Now is the clock of the scrape-time figures that depend on it (the
	// consumer groups' lag in seconds); nil leaves those figures out
	// (strata serve passes time.Now).
	Now func() time.Time
}

// now reads b's clock (Options.Now).
func (b *Broker) now() time.Time {
	if b.opts.Now != nil {
		return b.opts.Now()
	}
	return time.Time{}
}

type observer struct{ prometheus.Observer }

// New returns a Broker's metrics with an empty set of sources and the
// default Options.
func New() *Broker { return NewWithOptions(Options{}) }

// NewWithOptions returns a Broker's metrics with an empty set of sources.
func NewWithOptions(o Options) *Broker {
	b := &Broker{reg: prometheus.NewRegistry(), opts: o}
	b.queueTime = newKeyHist(RequestQueueTime,
		"Time from a request's whole frame read to its handler started, by Kafka API (decoding, and admission: Strata calls handlers on the connection's reader, without a request queue).", RequestTimeBuckets())
	b.processTime = newKeyHist(RequestProcessingTime,
		"Time from a request's handler started to its response handed to the connection, by Kafka API (for Produce with acks=all: including the wait for durability and replication; for Fetch: including the long poll).", RequestTimeBuckets())
	b.readerTime = newKeyHist(RequestReaderTime,
		"Time a request's handler held its connection's reader (the handler's synchronous part; for Produce the appends, not the wait for durability and replication), by Kafka API: the connection reads no further request meanwhile.", RequestTimeBuckets())
	b.sendTime = newKeyHist(ResponseSendTime,
		"Time from a response handed to its connection to written to the socket (queued behind earlier responses of the connection included), by Kafka API.", RequestTimeBuckets())
	b.throttle = newKeyHist(RequestThrottleTime,
		"Throttle time (throttle_time_ms) of Produce and Fetch responses, by Kafka API. Strata has no quotas yet: every observation is 0.", ThrottleBuckets())
	b.throttle.child(0) // both series exist from the start
	b.throttle.child(1)
	b.totalTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    RequestTotalTime,
		Help:    "Time from a request's whole frame read to its response handed to the connection, by Kafka API (for Produce with acks=all: including the wait for durability and replication).",
		Buckets: RequestTimeBuckets(),
	}, []string{"request"})
	b.reg.MustRegister(
		b.totalTime, b.queueTime.vec, b.processTime.vec, b.readerTime.vec, b.sendTime.vec, b.throttle.vec,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		(*brokerCollector)(b),
	)
	return b
}

// Registry is the Prometheus registry holding every metric of b; a caller
// may register more collectors on it.
func (b *Broker) Registry() *prometheus.Registry { return b.reg }

// Request records one request of API key at version, answered d after its
// frame was read.
func (b *Broker) Request(key, version int16, d time.Duration) {
	if b == nil || key < 0 || int(key) >= numKeys {
		return
	}
	o := b.observers[key].Load()
	if o == nil {
		o = b.newObserver(key)
	}
	o.Observe(d.Seconds())
	v := min(max(int(version), 0), maxVersion)
	b.requests[key][v].Add(1)
}

func (b *Broker) newObserver(key int16) *observer {
	b.newObs.Lock()
	defer b.newObs.Unlock()
	if o := b.observers[key].Load(); o != nil {
		return o
	}
	o := &observer{b.totalTime.WithLabelValues(kmsg.NameForKey(key))}
	b.observers[key].Store(o)
	return o
}

// Error records an error code (not 0) answered to a request of API key:
// one per request for a top-level code, one per partition (or topic,
// group, ...) for codes inside the response.
func (b *Broker) Error(key, code int16) {
	if b == nil || code == 0 || key < 0 || int(key) >= numKeys {
		return
	}
	codes := b.errors[key].Load()
	if codes == nil {
		b.errors[key].CompareAndSwap(nil, new([numCodes]atomic.Uint64))
		codes = b.errors[key].Load()
	}
	i := int(code) + 1
	if i < 0 || i > maxCode+1 {
		i = numCodes - 1
	}
	codes[i].Add(1)
}

// TopicCounters are one topic's traffic counters. The methods are safe for
// concurrent use and allocate nothing.
type TopicCounters struct {
	bytesIn, recordsIn, bytesOut, recordsOut atomic.Uint64
}

// In counts a record batch appended to the topic: its bytes as the
// producer sent them and its records.
func (t *TopicCounters) In(bytes, records int) {
	t.bytesIn.Add(uint64(bytes))
	t.recordsIn.Add(uint64(records))
}

// Out counts record bytes sent to consumers of the topic.
func (t *TopicCounters) Out(bytes int64) { t.bytesOut.Add(uint64(bytes)) }

// OutRecords counts records sent to consumers of the topic (the record
// counts of the batches sent).
func (t *TopicCounters) OutRecords(records int64) { t.recordsOut.Add(uint64(records)) }

// Topic returns the counters of the named topic, created on first use;
// nil for a nil b. Look it up once per topic of a request, not per batch.
func (b *Broker) Topic(name string) *TopicCounters {
	if b == nil {
		return nil
	}
	if t, ok := b.topics.Load(name); ok {
		return t.(*TopicCounters)
	}
	t, _ := b.topics.LoadOrStore(name, new(TopicCounters))
	return t.(*TopicCounters)
}

// PartitionCounts are the partition gauges, as this broker sees them.
type PartitionCounts struct {
	Replicas        int // partitions with a log on this broker
	Leaders         int // partitions this broker leads
	UnderReplicated int // led here, with fewer in-sync replicas than replicas
	UnderMinISR     int // led here, with fewer in-sync replicas than min.insync.replicas
	Offline         int // partitions of the cluster with no leader (the same count on every broker)
}

// SetPartitions sets the source of the partition gauges, called at each
// scrape (nil: the gauges are not reported).
func (b *Broker) SetPartitions(f func() PartitionCounts) { b.partitions.Store(&f) }

// SetTopics sets the source of the topic names: at each scrape every topic
// it lists is reported (0 if it had no traffic) and counters of topics it
// no longer lists (deleted) are dropped. Without a source every topic with
// traffic is reported.
func (b *Broker) SetTopics(f func() []string) { b.topicNames.Store(&f) }

// SetReady sets the readiness check of /readyz: nil error when the broker
// is ready to serve. Until it is set, /readyz answers not ready.
func (b *Broker) SetReady(f func() error) { b.ready.Store(&f) }

// Stopping makes /readyz answer not ready from now on (the broker is
// shutting down). A nil b does nothing.
func (b *Broker) Stopping() {
	if b != nil {
		b.SetReady(func() error { return errStopping })
	}
}

// Ready runs the readiness check.
func (b *Broker) Ready() error {
	f := b.ready.Load()
	if f == nil || *f == nil {
		return errNotStarted
	}
	return (*f)()
}

// brokerCollector turns b's atomic counters and sources into samples at
// each scrape.
type brokerCollector Broker

var (
	descRequests = prometheus.NewDesc(RequestsTotal,
		"Requests answered, by Kafka API and version.", []string{"request", "version"}, nil)
	descErrors = prometheus.NewDesc(RequestErrors,
		"Error codes answered, by Kafka API and Kafka error name: every non-zero code of a response, the top-level one and one per entry (topic, partition, group, ...) that carries one.", []string{"request", "error"}, nil)
	descBytesIn = prometheus.NewDesc(TopicBytesIn,
		"Record batch bytes appended to the topic's partitions by Produce, as the producers sent them.", []string{"topic"}, nil)
	descRecordsIn = prometheus.NewDesc(TopicRecordsIn,
		"Records appended to the topic's partitions by Produce.", []string{"topic"}, nil)
	descBytesOut = prometheus.NewDesc(TopicBytesOut,
		"Record batch bytes of the topic sent to consumers by Fetch and ShareFetch (follower fetches excluded).", []string{"topic"}, nil)
	descRecordsOut = prometheus.NewDesc(TopicRecordsOut,
		"Records of the topic sent to consumers by Fetch and ShareFetch: the record counts of the batches sent, whole batches as sent (records before the fetch offset in the first batch, and control records, included; follower fetches excluded).", []string{"topic"}, nil)
	descPartitions = prometheus.NewDesc(Partitions,
		"Partitions with a replica (a log) on this broker.", nil, nil)
	descLeaders = prometheus.NewDesc(PartitionLeaders,
		"Partitions this broker leads.", nil, nil)
	descUnderReplicated = prometheus.NewDesc(UnderReplicated,
		"Partitions led by this broker whose in-sync replica set is smaller than their replica set.", nil, nil)
	descUnderMinISR = prometheus.NewDesc(UnderMinISR,
		"Partitions led by this broker with fewer in-sync replicas than min.insync.replicas (acks=all produces fail).", nil, nil)
	descOffline = prometheus.NewDesc(OfflinePartitions,
		"Partitions of the cluster without a leader, as this broker's metadata shows them.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRequests, descErrors, descBytesIn, descRecordsIn, descBytesOut,
		descRecordsOut, descPartitions, descLeaders, descUnderReplicated, descUnderMinISR, descOffline,
		descJournalGroups, descJournalFlushes, descJournalRecords, descJournalBytes, descJournalCheckpoints, descJournalWrite, descJournalFlush, descJournalCommitWait,
		descJournalCkptWait, descJournalRefGroups, descJournalAheadGroups, descDeviceInFlight, descDeviceQueue, descDeviceBusy} {
		ch <- d
	}
	c.describeMore(ch)
}

// Collect implements prometheus.Collector.
func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	b := (*Broker)(c)
	for key := range b.requests {
		name := ""
		for v := range b.requests[key] {
			if n := b.requests[key][v].Load(); n > 0 {
				if name == "" {
					name = kmsg.NameForKey(int16(key))
				}
				ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(n), name, strconv.Itoa(v))
			}
		}
		if codes := b.errors[key].Load(); codes != nil {
			for i := range codes {
				if n := codes[i].Load(); n > 0 {
					ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(n),
						kmsg.NameForKey(int16(key)), errorName(i))
				}
			}
		}
	}
	b.collectTopics(ch)
	b.collectJournal(ch)
	b.collectDevice(ch)
	b.collectMore(ch)
	if f := b.partitions.Load(); f != nil && *f != nil {
		p := (*f)()
		for _, g := range []struct {
			d *prometheus.Desc
			n int
		}{{descPartitions, p.Replicas}, {descLeaders, p.Leaders}, {descUnderReplicated, p.UnderReplicated},
			{descUnderMinISR, p.UnderMinISR}, {descOffline, p.Offline}} {
			ch <- prometheus.MustNewConstMetric(g.d, prometheus.GaugeValue, float64(g.n))
		}
	}
}

func (b *Broker) collectTopics(ch chan<- prometheus.Metric) {
	emit := func(name string, t *TopicCounters) {
		ch <- prometheus.MustNewConstMetric(descBytesIn, prometheus.CounterValue, float64(t.bytesIn.Load()), name)
		ch <- prometheus.MustNewConstMetric(descRecordsIn, prometheus.CounterValue, float64(t.recordsIn.Load()), name)
		ch <- prometheus.MustNewConstMetric(descBytesOut, prometheus.CounterValue, float64(t.bytesOut.Load()), name)
		ch <- prometheus.MustNewConstMetric(descRecordsOut, prometheus.CounterValue, float64(t.recordsOut.Load()), name)
	}
	f := b.topicNames.Load()
	if f == nil || *f == nil {
		b.topics.Range(func(k, v any) bool {
			emit(k.(string), v.(*TopicCounters))
			return true
		})
		return
	}
	names := (*f)()
	live := make(map[string]bool, len(names))
	for _, name := range names {
		if live[name] {
			continue
		}
		live[name] = true
		emit(name, b.Topic(name))
	}
	b.topics.Range(func(k, _ any) bool {
		if !live[k.(string)] {
			b.topics.Delete(k) // a deleted topic: bounded cardinality
		}
		return true
	})
}

// renamed are codes whose Kafka name is newer than kerr's.
var renamed = map[int16]string{
	6: "NOT_LEADER_OR_FOLLOWER", // kerr: NOT_LEADER_FOR_PARTITION (renamed in Kafka 2.6, KIP-392)
}

// errorName is the Kafka name of the error code at index i of a codes
// array (code i-1).
func errorName(i int) string {
	if i == numCodes-1 {
		return "UNKNOWN"
	}
	code := int16(i - 1)
	if name, ok := renamed[code]; ok {
		return name
	}
	if err, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && (err.Code == code) {
		return err.Message
	}
	return "UNKNOWN_CODE_" + strconv.Itoa(int(code))
}
