package server

// Metrics hooks (package metrics; Config.Metrics, nil: none).
//
// Every request is timed at four clock readings: its whole frame read
// (dispatch's first step), its handler started, its response, skip or
// close handed to the connection (meter), and that response written or
// dropped (sendMeter: the pooled response buffer's release, or the Fetch
// parts' done callback): queue, processing and send time per API key.
// rc.metered is the Server whose clock and metrics time it, nil when
// metrics are off, so a broker without metrics pays one comparison per
// request. Just before the response goes out (while the request frame,
// which netpoll reuses after the reply, is still valid) the response's
// error codes and Produce's throttle time are counted, and for Produce the
// bytes and records of each partition appended, per topic; Fetch counts
// its throttle time and the record bytes it sends to consumers per topic
// (01_fetch.go, send). A topic's counters are found once per topic of a
// request, never per batch.
//
// Connections are counted by listener: accepted by a counting
// net.Listener around each Kafka listener (Serve, ServeListener), closed
// in ConnClosed. ISR shrinks and expansions of the partitions this broker
// leads, and the partitions whose leadership moved to it, are counted
// from each change of the metadata view (watchLoop, meterView).
//
// At scrape time the metrics package reads from here the topic names, the
// partition counts, the readiness check, the journal's counters, the log
// sizes, the tail cache's counters, the groups' committed offsets against
// the local logs (lag in records and seconds, retention margin) and the
// controller's Raft figures.

import (
	"errors"
	"net"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/metrics"
	"github.com/stratalog/strata/netpoll"
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
	m.SetLogs(s.logSizes)
	m.SetTailCache(s.tailCacheStats)
	m.SetGroups(s.groupOffsets)
	if s.clustered() {
		m.SetController(s.raftStats)
	}
}

// logSizes lists the size of every partition's log on this broker.
func (s *Server) logSizes() []metrics.LogSize {
	var out []metrics.LogSize
	for _, t := range s.eng.Topics() {
		for p := range t.Partitions() {
			l := t.Partition(p)
			if l == nil {
				continue
			}
			sz := l.Size()
			out = append(out, metrics.LogSize{Topic: t.Name(), Partition: p, Segments: sz.Segments, Bytes: sz.Bytes})
		}
	}
	return out
}

func (s *Server) tailCacheStats() (metrics.TailCacheStats, bool) {
	st, ok := s.eng.TailCacheStats()
	return metrics.TailCacheStats{Hits: st.Hits, Misses: st.Misses}, ok
}

// groupOffsets are the committed offsets of every group this broker
// coordinates against the partitions' logs here (a partition without a
// log on this broker is left out): lag to the high watermark and margin
// above the log start offset.
func (s *Server) groupOffsets() []metrics.GroupOffset {
	coord := s.groups.coord
	if coord == nil {
		return nil
	}
	groups, _ := coord.List()
	var out []metrics.GroupOffset
	for _, g := range groups {
		offs, code := coord.Fetch(g.Group, nil)
		if code != 0 {
			continue
		}
		for _, o := range offs {
			if o.Offset.Offset < 0 {
				continue
			}
			t := s.eng.Topic(o.TP.Topic)
			if t == nil {
				continue
			}
			l := t.Partition(o.TP.Partition)
			if l == nil {
				continue
			}
			committed := o.Offset.Offset
			row := metrics.GroupOffset{Group: g.Group, Topic: o.TP.Topic, Partition: o.TP.Partition,
				Lag: max(l.HighWatermark()-committed, 0), Margin: committed - l.LogStartOffset()}
			if row.Lag > 0 {
				row.Oldest = oldestUnconsumed(l, committed)
			}
			out = append(out, row)
		}
	}
	return out
}

// oldestUnconsumed is the time of the oldest record at or after offset in
// l (from the log start if offset is below it): the first timestamp of the
// batch holding it, read from that batch's header alone (one offset index
// lookup and a header scan of at most one index interval, as any fetch
// does, then 61 bytes); the batch's append time for a LogAppendTime topic.
// A consumer commits the offset after the last record it polled, which
// starts a batch, so this is the record's own time; inside a batch it is
// the batch's first record's, up to the batch's span older. The zero Time
// when nothing is readable there (a read error, an unreadable header).
func oldestUnconsumed(l *engine.Log, offset int64) time.Time {
	res, err := l.Read(max(offset, l.LogStartOffset()), 0, true)
	if err != nil {
		return time.Time{}
	}
	defer res.Release()
	if len(res.Chunks) == 0 {
		return time.Time{}
	}
	c := res.Chunks[0]
	var hb [record.HeaderSize]byte
	switch {
	case len(c.Buf) >= record.HeaderSize:
		copy(hb[:], c.Buf)
	case c.Buf == nil && c.File != nil && c.Len >= record.HeaderSize:
		if _, err := c.File.ReadAt(hb[:], c.Pos); err != nil {
			return time.Time{}
		}
	default:
		return time.Time{}
	}
	h, err := record.ParseHeader(hb[:])
	if err != nil {
		return time.Time{}
	}
	ts := h.BaseTimestamp
	if h.LogAppendTime() {
		ts = h.MaxTimestamp
	}
	if ts < 0 {
		return time.Time{}
	}
	return time.UnixMilli(ts)
}

func (s *Server) raftStats() (metrics.RaftStats, bool) {
	st := s.cluster.ctl.RaftStats()
	return metrics.RaftStats{Role: st.Role, Voter: st.Voter, Term: st.Term, CommitIndex: st.CommitIndex,
		AppliedIndex: st.AppliedIndex, LastIndex: st.LastIndex}, true
}

// meterListener counts the connections ln accepts for the Kafka listener
// name; ln itself when metrics are off.
func (s *Server) meterListener(ln net.Listener, name string) net.Listener {
	if s.cfg.Metrics == nil {
		return ln
	}
	return countingListener{Listener: ln, c: s.cfg.Metrics.Listener(listenerLabel(name))}
}

// meterConnClosed counts c closed on its listener.
func (s *Server) meterConnClosed(c *netpoll.Conn) {
	if m := s.cfg.Metrics; m != nil {
		m.Listener(listenerLabel(c.Listener())).Closed()
	}
}

// listenerLabel names the unnamed listener of Serve as Kafka names a
// broker's only listener.
func listenerLabel(name string) string {
	if name == "" {
		return "PLAINTEXT"
	}
	return name
}

// countingListener counts the connections its Listener accepts.
type countingListener struct {
	net.Listener
	c *metrics.ListenerCounters
}

func (l countingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err == nil {
		l.c.Accepted()
	}
	return nc, err
}

// meterView counts, from the change of the metadata view old to v, the
// ISR shrinks and expansions of partitions this broker leads in v and the
// partitions whose leadership moved to it (a new leader epoch). Partitions
// of topics new in v are not counted (their first leaders and ISRs).
// Changes applied between two views are seen as one.
func (s *Server) meterView(old, v *clusterView) {
	m := s.cfg.Metrics
	if m == nil || old == nil {
		return
	}
	id := s.cfg.NodeID
	var shrinks, expands, elections int
	for tid, vt := range v.ByID {
		ot := old.ByID[tid]
		if ot == nil {
			continue
		}
		for i := range vt.Parts {
			if i >= len(ot.Parts) {
				break
			}
			p, op := &vt.Parts[i], &ot.Parts[i]
			if p.Leader != id {
				continue
			}
			if p.LeaderEpoch != op.LeaderEpoch && op.Leader != id {
				elections++
			}
			switch {
			case len(p.ISR) < len(op.ISR):
				shrinks++
			case len(p.ISR) > len(op.ISR):
				expands++
			}
		}
	}
	m.ISRShrink(shrinks)
	m.ISRExpand(expands)
	m.LeaderElection(elections)
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
		RefGroups: js.RefGroups, AheadGroups: js.Ahead, Write: h(js.Write), Flush: h(js.Flush), CommitWait: h(js.CommitWait), CheckpointWait: h(js.CheckpointWait)}, true
}

// meterRead is the time a request's frame was read (dispatch's first
// step): the clock when metrics are on, else the zero time (no clock read).
func (s *Server) meterRead() time.Time {
	if s.cfg.Metrics != nil {
		return s.now()
	}
	return time.Time{}
}

// meterStart starts timing rc, whose frame was read at read, as its
// handler starts (dispatch).
func (s *Server) meterStart(rc *reqCtx, read time.Time) {
	if s.cfg.Metrics != nil {
		rc.metered = s
		rc.start = read
		rc.handler = s.now()
	}
}

// meterReader records the time since began (meterRead, before the
// handler) that a request of API key held its connection's reader
// (metrics.RequestReaderTime). rc itself may be answered and its
// connection gone by now: the caller passes the key.
func (s *Server) meterReader(key int16, began time.Time) {
	if m := s.cfg.Metrics; m != nil {
		m.RequestOnReader(key, s.now().Sub(began))
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
		if pr != nil {
			m.Throttle(0, pr.ThrottleMillis) // the throttle_time_ms answered
		}
	} else if resp != nil && rc.key >= 0 && int(rc.key) < len(errorPlans()) {
		if p := errorPlans()[rc.key]; p != nil {
			p.count(m, rc.key, reflect.ValueOf(resp).Elem())
		}
	}
	now := s.now()
	m.Request(rc.key, rc.version, now.Sub(rc.start))
	m.RequestPhases(rc.key, rc.handler.Sub(rc.start), now.Sub(rc.handler))
	rc.start = now // from here: when the response was handed over (sendMeter)
}

// sendMeter times one response's write: from handed to the connection
// (meter) to written or dropped (done, from the response's release
// callback on the connection's writer). The zero sendMeter does nothing.
type sendMeter struct {
	s    *Server
	key  int16
	sent time.Time
}

// sendMeter is the meter of rc's response, just handed over by meter.
func (rc *reqCtx) sendMeter() sendMeter {
	if rc.metered == nil {
		return sendMeter{}
	}
	return sendMeter{s: rc.metered, key: rc.key, sent: rc.start}
}

func (sm sendMeter) done() {
	if sm.s != nil {
		sm.s.cfg.Metrics.ResponseSent(sm.key, sm.s.now().Sub(sm.sent))
	}
}

// meterSent wraps done (a response's release callback, may be nil) to time
// the response's write; done itself when rc is not metered.
func (rc *reqCtx) meterSent(done func()) func() {
	sm := rc.sendMeter()
	if sm.s == nil {
		return done
	}
	return func() {
		sm.done()
		if done != nil {
			done()
		}
	}
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
	m.Throttle(1, body.throttleMs) // the throttle_time_ms the response carries
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

// errorPlan finds the error codes of a response struct: its own
// ErrorCode field and those of the structs in its slices (topics,
// partitions, groups, members, ...), as Kafka counts a response's errors
// (AbstractResponse.errorCounts): one per entry with a code.
type errorPlan struct {
	code int // index of the struct's ErrorCode int16 field, -1: none
	subs []errorSub
}

// errorSub is a slice field of structs that hold error codes.
type errorSub struct {
	field int
	elem  *errorPlan
}

// count records every non-zero code of v (a struct of plan p's type)
// under key. It allocates nothing.
func (p *errorPlan) count(m *metrics.Broker, key int16, v reflect.Value) {
	if p.code >= 0 {
		if code := v.Field(p.code).Int(); code != 0 {
			m.Error(key, int16(code))
		}
	}
	for _, sub := range p.subs {
		sl := v.Field(sub.field)
		for i := range sl.Len() {
			sub.elem.count(m, key, sl.Index(i))
		}
	}
}

// planErrors is the errorPlan of struct type t, nil when t holds no error
// code (kmsg's types nest a few levels and never recursively; depth bounds
// the walk anyway).
func planErrors(t reflect.Type, depth int) *errorPlan {
	if t.Kind() != reflect.Struct || depth > 6 {
		return nil
	}
	p := &errorPlan{code: -1}
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16:
			p.code = i
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			if sub := planErrors(f.Type.Elem(), depth+1); sub != nil {
				p.subs = append(p.subs, errorSub{field: i, elem: sub})
			}
		}
	}
	if p.code < 0 && len(p.subs) == 0 {
		return nil
	}
	return p
}

// errorPlans holds, per API key, the errorPlan of its response (nil:
// none). Produce and Fetch count their partitions' codes themselves
// (meterProduce, meterFetch).
var errorPlans = sync.OnceValue(func() (plans [kmsg.MaxKey + 1]*errorPlan) {
	for k := range plans {
		resp := kmsg.ResponseForKey(int16(k))
		if resp == nil || k == 0 || k == 1 {
			continue
		}
		plans[k] = planErrors(reflect.TypeOf(resp).Elem(), 0)
	}
	return plans
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
	for _, vt := range v.Topics {
		minISR := s.minInsync(vt)
		for i := range vt.Parts {
			p := &vt.Parts[i]
			if p.Leader < 0 {
				c.Offline++
			}
			if slices.Contains(p.Replicas, id) {
				c.Replicas++
			}
			if p.Leader != id {
				continue
			}
			c.Leaders++
			if len(p.ISR) < len(p.Replicas) {
				c.UnderReplicated++
			}
			if len(p.ISR) < minISR {
				c.UnderMinISR++
			}
		}
	}
	return c
}

// ready is /readyz: the log directory is online and, in a cluster, this
// broker is registered with the controller, has caught up on the metadata
// up to its registration, and its metadata shows it unfenced (Kafka's
// RUNNING state: a registered broker is fenced until the controller
// unfences it, and until then it leads nothing and Metadata leaves it out).
func (s *Server) ready() error {
	if err := s.eng.Offline(); err != nil {
		return err
	}
	if !s.clustered() {
		return nil
	}
	if s.cluster.member.Epoch() == 0 {
		return errNotRegistered
	}
	select {
	case <-s.cluster.member.CaughtUp():
	default:
		return errCatchingUp
	}
	if v := s.cluster.view.Load(); v != nil {
		for _, b := range v.Brokers {
			if b.ID == s.cfg.NodeID && !b.Fenced {
				return nil
			}
		}
	}
	return errFenced
}

var (
	errNotRegistered = errors.New("not registered with the controller")
	errCatchingUp    = errors.New("catching up on the cluster metadata")
	errFenced        = errors.New("fenced: registered, not yet unfenced by the controller")
)
