package server

// Metrics hooks (package metrics; Config.Metrics, nil: none).
//
// Every request is timed from dispatch (its whole frame read) until its
// response, skip or close is handed to the connection: rc.metered is the
// Server whose clock and metrics time it, nil when metrics are off, so a
// broker without metrics pays one comparison per request. Just before the
// response goes out (while the request frame, which netpoll reuses after
// the reply, is still valid) the response's error codes are counted, and
// for Produce the bytes and records of each partition appended, per
// topic; Fetch counts the record bytes it sends to consumers per topic
// (01_fetch.go, send). A topic's counters are found once per topic of a
// request, never per batch.
//
// At scrape time the metrics package reads the topic names, the partition
// counts and the readiness check from here.

import (
	"errors"
	"reflect"
	"sync"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/record"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// initMetrics registers the Server's scrape-time sources; called by New.
func (s *Server) initMetrics() {
	m := s.cfg.Metrics
	if m == nil {
		return
	}
	m.SetTopics(s.topicNames)
	m.SetPartitions(s.partitionCounts)
	m.SetReady(s.ready)
	m.SetJournal(s.journalStats)
}

// journalStats hands the engine's journal counters to the metrics package
// (scrape time).
func (s *Server) journalStats() (metrics.JournalStats, bool) {
	js, ok := s.eng.JournalStats()
	if !ok {
		return metrics.JournalStats{}, false
	}
	h := func(x engine.Histogram) metrics.Histogram {
		return metrics.Histogram{Bounds: x.Bounds, Counts: x.Counts, Sum: x.Sum, Count: x.Count}
	}
	return metrics.JournalStats{Groups: js.Groups, Flushes: js.Flushes, Records: js.Records, Bytes: js.Bytes, Checkpoints: js.Checkpoints,
		Write: h(js.Write), Flush: h(js.Flush), CommitWait: h(js.CommitWait)}, true
}

// meterStart starts timing rc (dispatch).
func (s *Server) meterStart(rc *reqCtx) {
	if s.cfg.Metrics != nil {
		rc.metered = s
		rc.start = s.now()
	}
}

// meter records rc as answered, just before its response (resp; nil for
// a hand-framed response, a skip or a close) is handed to the connection,
// so a client never sees an answer the metrics do not count yet: the
// time since its frame was read, its error codes and, for Produce, the
// appended bytes and records (skip: an acks=0 Produce with every
// partition appended). The request frame is still valid here.
func (rc *reqCtx) meter(resp kmsg.Response, skip bool) {
	s := rc.metered
	if s == nil {
		return
	}
	m := s.cfg.Metrics
	if req, ok := rc.req.(*kmsg.ProduceRequest); ok && (resp != nil || skip) {
		pr, _ := resp.(*kmsg.ProduceResponse)
		s.meterProduce(m, rc.version, req, pr)
	} else if resp != nil {
		if i := errorCodeField()[rc.key]; i >= 0 {
			if code := reflect.ValueOf(resp).Elem().Field(i).Int(); code != 0 {
				m.Error(rc.key, int16(code))
			}
		}
	}
	m.Request(rc.key, rc.version, s.now().Sub(rc.start))
}

// meterProduce counts each partition of req: appended (bytes and records
// to its topic) or failed (its error code). resp nil is acks=0, which is
// answered only when every partition was appended.
func (s *Server) meterProduce(m *metrics.Broker, version int16, req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) {
	for i := range req.Topics {
		rt := &req.Topics[i]
		var t *metrics.TopicCounters
		for j := range rt.Partitions {
			if resp != nil && i < len(resp.Topics) && j < len(resp.Topics[i].Partitions) {
				if code := resp.Topics[i].Partitions[j].ErrorCode; code != 0 {
					m.Error(0, code)
					continue
				}
			}
			if t == nil {
				name := rt.Topic
				if version >= produceFirstTopicIDVersion {
					name = s.topicName(rt.TopicID)
				}
				t = m.Topic(name)
			}
			b := rt.Partitions[j].Records
			records := 0
			if h, err := record.ParseHeader(b); err == nil {
				records = int(h.NumRecords)
			}
			t.In(len(b), records)
		}
	}
}

// meterFetch counts a Fetch response about to be sent: its error codes
// and, for a consumer's fetch, the record bytes of each topic.
func (s *Server) meterFetch(body *fetchBody, consumer bool) {
	m := s.cfg.Metrics
	if m == nil {
		return
	}
	m.Error(1, body.errCode)
	for i := range body.topics {
		ft := &body.topics[i]
		var bytes int64
		for j := range ft.partitions {
			fp := &ft.partitions[j]
			m.Error(1, fp.errCode)
			bytes += chunkBytes(fp.chunks)
		}
		if bytes == 0 || !consumer {
			continue
		}
		name := ft.name
		if body.version >= fetchFirstTopicIDVersion {
			name = s.topicName(ft.id)
		}
		m.Topic(name).Out(bytes)
	}
}

// topicName is the name of the topic with id ("" if none: a deleted topic).
func (s *Server) topicName(id [16]byte) string {
	if t := s.eng.TopicByID(id); t != nil {
		return t.Name()
	}
	return ""
}

// errorCodeField holds, per API key, the index of the response struct's
// top-level ErrorCode field (-1: none). Produce and Fetch count their
// partitions' codes instead.
var errorCodeField = sync.OnceValue(func() (idx [kmsg.MaxKey + 1]int) {
	for k := range idx {
		idx[k] = -1
		resp := kmsg.ResponseForKey(int16(k))
		if resp == nil || k == 0 || k == 1 {
			continue
		}
		if f, ok := reflect.TypeOf(resp).Elem().FieldByName("ErrorCode"); ok && len(f.Index) == 1 && f.Type.Kind() == reflect.Int16 {
			idx[k] = f.Index[0]
		}
	}
	return idx
})

// topicNames lists the engine's topics (the metrics' topic source).
func (s *Server) topicNames() []string {
	ts := s.eng.Topics()
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name()
	}
	return out
}

// partitionCounts are the partition gauges: from the controller's view in
// a cluster; a single broker hosts and leads every partition, all offline
// when its log directory is, else those whose log is corrupt
// (engine.Log.Corruption).
func (s *Server) partitionCounts() metrics.PartitionCounts {
	var c metrics.PartitionCounts
	if !s.clustered() {
		for _, t := range s.eng.Topics() {
			c.Replicas += int(t.Partitions())
		}
		c.Leaders = c.Replicas
		if s.eng.Offline() != nil {
			c.Offline = c.Replicas
		} else {
			c.Offline = len(s.eng.CorruptLogs())
		}
		return c
	}
	v := s.cluster.view.Load()
	id := s.cfg.NodeID
	for _, vt := range v.topics {
		minISR := s.minInsync(vt)
		for i := range vt.parts {
			p := &vt.parts[i]
			if p.leader < 0 {
				c.Offline++
			}
			if containsID(p.replicas, id) {
				c.Replicas++
			}
			if p.leader != id {
				continue
			}
			c.Leaders++
			if len(p.isr) < len(p.replicas) {
				c.UnderReplicated++
			}
			if len(p.isr) < minISR {
				c.UnderMinISR++
			}
		}
	}
	return c
}

// ready is /readyz: the log directory is online and, in a cluster, this
// broker is registered with the controller and has caught up on the
// metadata up to its registration.
func (s *Server) ready() error {
	if err := s.eng.Offline(); err != nil {
		return err
	}
	if !s.clustered() {
		return nil
	}
	if s.cluster.epoch.Load() == 0 {
		return errNotRegistered
	}
	select {
	case <-s.cluster.caughtUp:
		return nil
	default:
		return errCatchingUp
	}
}

var (
	errNotRegistered = errors.New("not registered with the controller")
	errCatchingUp    = errors.New("catching up on the cluster metadata")
)
