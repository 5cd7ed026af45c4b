package metrics

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The phases of a request's time, each a histogram per API key with
// RequestTimeBuckets: queue (the frame read to its handler started),
// processing (handler started to the response handed to the connection)
// and send (handed over to written to the socket). Queue plus processing
// is RequestTotalTime.
const (
	RequestQueueTime      = "strata_request_queue_time_seconds"
	RequestProcessingTime = "strata_request_processing_time_seconds"
	ResponseSendTime      = "strata_response_send_time_seconds"
	// RequestReaderTime is the part of the handler's time spent on the
	// connection's reader (the handler's synchronous part: for Produce
	// the appends, not the wait for durability): the connection reads no
	// further request meanwhile.
	RequestReaderTime = "strata_request_reader_time_seconds"
	// RequestThrottleTime is the throttle_time_ms of Produce and Fetch
	// responses, in seconds.
	RequestThrottleTime = "strata_request_throttle_time_seconds"
)

// ThrottleBuckets are the upper bounds of RequestThrottleTime's buckets:
// 0 (not throttled), then 1 ms doubling to about 33 s.
func ThrottleBuckets() []float64 {
	return append([]float64{0}, prometheus.ExponentialBuckets(0.001, 2, 16)...)
}

// keyHist is a histogram vector labelled by API key ("request") whose
// child of each key is created on the key's first observation and kept in
// an array indexed by key, so an observation allocates nothing.
type keyHist struct {
	vec  *prometheus.HistogramVec
	obs  [numKeys]atomic.Pointer[observer]
	newO sync.Mutex
}

func newKeyHist(name, help string, buckets []float64) *keyHist {
	return &keyHist{vec: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, []string{"request"})}
}

// observe records v seconds for key; keys outside [0, MaxKey] are
// ignored.
func (h *keyHist) observe(key int16, v float64) {
	if key < 0 || int(key) >= numKeys {
		return
	}
	o := h.obs[key].Load()
	if o == nil {
		o = h.child(key)
	}
	o.Observe(v)
}

func (h *keyHist) child(key int16) *observer {
	h.newO.Lock()
	defer h.newO.Unlock()
	if o := h.obs[key].Load(); o != nil {
		return o
	}
	o := &observer{h.vec.WithLabelValues(kmsg.NameForKey(key))}
	h.obs[key].Store(o)
	return o
}

// RequestPhases records the queue and processing time of one request of
// API key (answered, skipped or closed).
func (b *Broker) RequestPhases(key int16, queue, processing time.Duration) {
	if b == nil {
		return
	}
	b.queueTime.observe(key, queue.Seconds())
	b.processTime.observe(key, processing.Seconds())
}

// RequestOnReader records the time a request of API key's handler held
// its connection's reader.
func (b *Broker) RequestOnReader(key int16, d time.Duration) {
	if b == nil {
		return
	}
	b.readerTime.observe(key, d.Seconds())
}

// ResponseSent records the time a response of API key took from being
// handed to its connection to written (or dropped with the connection).
func (b *Broker) ResponseSent(key int16, d time.Duration) {
	if b == nil {
		return
	}
	b.sendTime.observe(key, d.Seconds())
}

// Throttle records the throttle_time_ms of a Produce (key 0) or Fetch
// (key 1) response; other keys are ignored.
func (b *Broker) Throttle(key int16, ms int32) {
	if b == nil || (key != 0 && key != 1) {
		return
	}
	b.throttle.observe(key, float64(max(ms, 0))/1000)
}
