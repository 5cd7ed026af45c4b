package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Connections per Kafka listener.
const (
	Connections         = "strata_connections"
	ConnectionsAccepted = "strata_connections_accepted_total"
	ConnectionsClosed   = "strata_connections_closed_total"
)

// ListenerCounters are one Kafka listener's connection counters. The
// methods are safe for concurrent use and allocate nothing; a nil
// *ListenerCounters does nothing.
type ListenerCounters struct {
	accepted, closed atomic.Uint64
}

// Accepted counts a connection accepted on the listener.
func (l *ListenerCounters) Accepted() {
	if l != nil {
		l.accepted.Add(1)
	}
}

// Closed counts a connection of the listener closed.
func (l *ListenerCounters) Closed() {
	if l != nil {
		l.closed.Add(1)
	}
}

// Listener returns the counters of the named Kafka listener, created on
// first use; nil for a nil b. The names are the broker's configured
// listeners, so the series are few.
func (b *Broker) Listener(name string) *ListenerCounters {
	if b == nil {
		return nil
	}
	if l, ok := b.listeners.Load(name); ok {
		return l.(*ListenerCounters)
	}
	l, _ := b.listeners.LoadOrStore(name, new(ListenerCounters))
	return l.(*ListenerCounters)
}

var (
	descConnections = prometheus.NewDesc(Connections,
		"Open client connections, by Kafka listener (accepted minus closed).", []string{"listener"}, nil)
	descConnAccepted = prometheus.NewDesc(ConnectionsAccepted,
		"Connections accepted, by Kafka listener.", []string{"listener"}, nil)
	descConnClosed = prometheus.NewDesc(ConnectionsClosed,
		"Connections closed (by either side), by Kafka listener.", []string{"listener"}, nil)
)

func (b *Broker) collectConns(ch chan<- prometheus.Metric) {
	b.listeners.Range(func(k, v any) bool {
		name, l := k.(string), v.(*ListenerCounters)
		closed := l.closed.Load() // before accepted: open never negative
		accepted := l.accepted.Load()
		ch <- prometheus.MustNewConstMetric(descConnections, prometheus.GaugeValue, float64(accepted-min(closed, accepted)), name)
		ch <- prometheus.MustNewConstMetric(descConnAccepted, prometheus.CounterValue, float64(accepted), name)
		ch <- prometheus.MustNewConstMetric(descConnClosed, prometheus.CounterValue, float64(closed), name)
		return true
	})
}
