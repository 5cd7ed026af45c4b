package server

// ShareFetch (API key 78), v1..v2 (Kafka 4.1's and 4.2's; v0 was KIP-932's
// early access): acquires records of the member's share session's
// partitions for it (share.Partition.Acquire, up to MaxRecords, default
// 500, locked for the group's record lock duration) and returns the record
// batches that hold them with AcquiredRecords ranges and their delivery
// counts; piggy-backed acknowledgements are applied first (all or nothing
// per partition, AcknowledgeErrorCode), and answered once durable.
//
// Share sessions (KIP-932): epoch 0 opens the member's session
// (acknowledgements there are INVALID_REQUEST), every later request
// carries the next epoch (INVALID_SHARE_SESSION_EPOCH otherwise,
// SHARE_SESSION_NOT_FOUND without a session), the partitions of a request
// join the session and ForgottenTopicsData leave it, and every fetch reads
// every partition of the session. Epoch -1 closes the session: only its
// acknowledgements are served, then the member's acquired records are
// released. With IsRenewAck (v2, KIP-1222: RENEW acknowledgements) the
// request only acknowledges; RENEW before v2 is INVALID_REQUEST. A fetch
// that acquires nothing waits up to MaxWaitMillis (the
// share tick retries it). Records are read up to the high watermark, or
// with the group's share.isolation.level=read_committed up to the last
// stable offset, the records of aborted transactions archived by the
// broker (archiveAborted). See share.go for durability and limits.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(78, 1, 2, handleShareFetch) }

// defaultShareMaxRecords is ShareFetch's max records when the request has
// none (v0) or asks for 0 or less.
const defaultShareMaxRecords = 500

// shareFetch is one ShareFetch in progress (it may wait for records).
type shareFetch struct {
	s          *Server
	rc         *reqCtx
	req        *kmsg.ShareFetchRequest
	resp       *kmsg.ShareFetchResponse
	key        share.SessionKey
	sess       *share.Session // the session the request used
	maxRecords int
	deadlineMs int64
	durable    durable
	waiter     *engine.HWWaiter // while waiting: new records kick the retry loop
	timer      *time.Timer      // while waiting: MaxWaitMillis kicks it
	// parts are the response's partitions, in order.
	parts map[share.TopicPartition]*kmsg.ShareFetchResponseTopicPartition
	order []share.TopicPartition
}

func handleShareFetch(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	fail := func(code int16, msg string) {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		rc.respond(resp)
	}
	if code, msg := s.shareMemberErr(rc, req.GroupID, req.MemberID); code != 0 {
		fail(code, msg)
		return
	}
	hasAcks := false
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			hasAcks = hasAcks || len(p.AcknowledgementBatches) > 0
		}
	}
	if req.ShareSessionEpoch == share.SessionInitialEpoch && hasAcks {
		fail(kerr.InvalidRequest.Code, "Acknowledge data present on initial fetch request")
		return
	}
	f := &shareFetch{
		s: s, rc: rc, req: req, resp: resp,
		key:        share.SessionKey{Group: *req.GroupID, Member: *req.MemberID},
		maxRecords: defaultShareMaxRecords,
		parts:      map[share.TopicPartition]*kmsg.ShareFetchResponseTopicPartition{},
	}
	if req.Version >= 1 && req.MaxRecords > 0 {
		f.maxRecords = int(req.MaxRecords)
	}
	st := &s.groups.share
	nowMs := s.now().UnixMilli()
	f.deadlineMs = nowMs + int64(max(req.MaxWaitMillis, 0))

	st.mu.Lock()
	resp.AcquisitionLockTimeoutMillis = s.lockDurationMs(f.key.Group)
	final := req.ShareSessionEpoch == share.SessionFinalEpoch
	if !final && !st.groups.IsMember(f.key.Group, f.key.Member) {
		st.mu.Unlock()
		fail(kerr.UnknownMemberID.Code, "")
		return
	}
	sess, _, code := st.sessions.Use(f.key, req.ShareSessionEpoch, rc.conn.ID())
	if code != 0 {
		st.mu.Unlock()
		fail(code, "")
		return
	}
	if sess != nil && !final {
		st.conns[f.key] = rc.conn
	}
	f.sess = sess
	for _, t := range req.Topics {
		topic := s.eng.TopicByID(t.TopicID)
		if topic != nil && topic.Deleted() {
			topic = nil
		}
		for _, rp := range t.Partitions {
			tp := share.TopicPartition{TopicID: t.TopicID, Partition: rp.Partition}
			if topic == nil {
				f.part(tp).ErrorCode = kerr.UnknownTopicID.Code
				continue
			}
			if !s.authorized(rc, auth.OpRead, auth.ResourceTopic, topic.Name()) {
				p := f.part(tp)
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
				if len(rp.AcknowledgementBatches) > 0 {
					p.AcknowledgeErrorCode = kerr.TopicAuthorizationFailed.Code
				}
				continue
			}
			if sess != nil && !final {
				sess.Add(tp)
			}
			if len(rp.AcknowledgementBatches) == 0 {
				continue
			}
			batches := make([]share.AckBatch, len(rp.AcknowledgementBatches))
			for i, b := range rp.AcknowledgementBatches {
				batches[i] = ackBatch(b.FirstOffset, b.LastOffset, b.AcknowledgeTypes)
			}
			code, msg := renewCheck(req.Version, batches)
			if code == 0 {
				code, msg = s.shareAck(nowMs, f.key, topic, rp.Partition, batches, &f.durable)
			}
			if code != 0 {
				p := f.part(tp)
				p.AcknowledgeErrorCode, p.AcknowledgeErrorMessage = code, kmsg.StringPtr(msg)
			} else {
				f.part(tp) // an acknowledged partition is answered
			}
		}
	}
	if sess != nil {
		for _, ft := range req.ForgottenTopicsData {
			for _, p := range ft.Partitions {
				sess.Forget(share.TopicPartition{TopicID: ft.TopicID, Partition: p})
			}
		}
	}
	if final {
		s.closeSession(nowMs, f.key)
		st.mu.Unlock()
		f.send()
		return
	}
	if req.Version >= 2 && req.IsRenewAck {
		// KIP-1222: a fetch carrying RENEW acknowledgements only
		// acknowledges; it acquires nothing.
		st.mu.Unlock()
		f.send()
		return
	}
	got := f.acquire(nowMs)
	if got || req.MaxWaitMillis <= 0 || f.hasErrors() {
		st.mu.Unlock()
		f.send()
		return
	}
	f.arm()
	f.timer = time.AfterFunc(time.Duration(req.MaxWaitMillis)*time.Millisecond, s.shareKick)
	st.waiting[f] = struct{}{}
	st.mu.Unlock()
}

// stopWaiting ends a waiting fetch's registrations (st.mu held).
func (f *shareFetch) stopWaiting() {
	f.waiter.Cancel()
	f.timer.Stop()
}

// arm registers the waiting fetch on the high watermarks of its session's
// partitions (st.mu held): new records kick the retry loop.
func (f *shareFetch) arm() {
	st := &f.s.groups.share
	if f.waiter == nil {
		f.waiter = engine.NewHWWaiter(f.s.shareKick)
	}
	f.waiter.Cancel()
	sess := st.sessions.Get(f.key)
	if sess == nil {
		f.waiter.Arm(0)
		return
	}
	f.waiter.Arm(len(sess.Order))
	for _, tp := range sess.Order {
		if sp := st.parts[sharePartKey{f.key.Group, tp.TopicID, tp.Partition}]; sp != nil {
			f.waiter.Add(sp.log, sp.log.HighWatermark())
		}
	}
}

// ackBatch converts a wire acknowledgement batch.
func ackBatch(first, last int64, types []int8) share.AckBatch {
	b := share.AckBatch{First: first, Last: last, Types: make([]share.AckType, len(types))}
	for i, t := range types {
		b.Types[i] = share.AckType(t)
	}
	return b
}

// renewCheck refuses RENEW (KIP-1222) before v2, which does not have it.
func renewCheck(version int16, batches []share.AckBatch) (int16, string) {
	if version >= 2 {
		return 0, ""
	}
	for _, b := range batches {
		for _, t := range b.Types {
			if t == share.AckRenew {
				return kerr.InvalidRequest.Code, "the RENEW acknowledgement type needs version 2"
			}
		}
	}
	return 0, ""
}

// shareAck applies acknowledgements of key's member to one partition
// (st.mu held): 0 or the error code and message.
func (s *Server) shareAck(nowMs int64, key share.SessionKey, topic *engine.Topic, p int32, batches []share.AckBatch, d *durable) (int16, string) {
	sp, code := s.sharePartition(key.Group, topic, p, d)
	if code != 0 {
		return code, ""
	}
	e, aerr := sp.p.Acknowledge(nowMs, key.Member, batches)
	if aerr != nil {
		return aerr.Code, aerr.Msg
	}
	if err := s.applyEffects(sharePartKey{key.Group, topic.ID(), p}, sp, e, d); err != nil {
		return kerr.KafkaStorageError.Code, err.Error()
	}
	return 0, ""
}

// part returns the response partition of tp, adding it.
func (f *shareFetch) part(tp share.TopicPartition) *kmsg.ShareFetchResponseTopicPartition {
	if p := f.parts[tp]; p != nil {
		return p
	}
	p := new(kmsg.ShareFetchResponseTopicPartition)
	p.Default()
	p.Partition = tp.Partition
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = f.s.cfg.NodeID, 0
	f.parts[tp] = p
	f.order = append(f.order, tp)
	return p
}

// build puts the response partitions into the response, by topic.
func (f *shareFetch) build() {
	idx := map[[16]byte]int{}
	for _, tp := range f.order {
		i, ok := idx[tp.TopicID]
		if !ok {
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = tp.TopicID
			f.resp.Topics = append(f.resp.Topics, t)
			i = len(f.resp.Topics) - 1
			idx[tp.TopicID] = i
		}
		f.resp.Topics[i].Partitions = append(f.resp.Topics[i].Partitions, *f.parts[tp])
	}
}

func (f *shareFetch) hasErrors() bool {
	for _, p := range f.parts {
		if p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 {
			return true
		}
	}
	return false
}

// acquire acquires records of the session's partitions for the member
// and reads their batches (st.mu held). It reports whether any record was
// acquired.
func (f *shareFetch) acquire(nowMs int64) bool {
	s, st := f.s, &f.s.groups.share
	sess := st.sessions.Get(f.key)
	if sess == nil || sess != f.sess || !st.groups.IsMember(f.key.Group, f.key.Member) {
		return false // the session closed or was replaced: the client drops this answer's records
	}
	left := f.maxRecords
	got := false
	n := len(sess.Order)
	for i := range n {
		if left <= 0 {
			break
		}
		tp := sess.Order[(i+int(sess.Epoch))%n] // rotate the first partition
		topic := s.eng.TopicByID(tp.TopicID)
		if topic == nil || topic.Deleted() {
			f.part(tp).ErrorCode = kerr.UnknownTopicID.Code
			continue
		}
		sp, code := s.sharePartition(f.key.Group, topic, tp.Partition, &f.durable)
		if code != 0 {
			f.part(tp).ErrorCode = code
			continue
		}
		k := sharePartKey{f.key.Group, tp.TopicID, tp.Partition}
		if start := sp.log.LogStartOffset(); start > sp.p.StartOffset() {
			if err := s.applyEffects(k, sp, sp.p.AdvanceLogStart(start), &f.durable); err != nil {
				s.log.Error("share: persisting a log start move", "err", err)
			}
		}
		committed := s.readCommitted(f.key.Group)
		end := sp.log.HighWatermark()
		if committed {
			end = sp.log.LastStableOffset()
		}
		recs, e := sp.p.Acquire(nowMs, f.key.Member, left, end)
		if err := s.applyEffects(k, sp, e, &f.durable); err != nil {
			s.log.Error("share: persisting a lock expiry", "err", err)
		}
		if len(recs) == 0 {
			continue
		}
		data, err := readShareBatches(sp.log, recs)
		if err != nil {
			// Give the records back: the member never saw them.
			var bs []share.AckBatch
			for _, r := range recs {
				bs = append(bs, share.AckBatch{First: r.First, Last: r.Last, Types: []share.AckType{share.AckRelease}})
			}
			if e, aerr := sp.p.Acknowledge(nowMs, f.key.Member, bs); aerr == nil {
				_ = s.applyEffects(k, sp, e, &f.durable)
			}
			f.part(tp).ErrorCode = errCode(err)
			continue
		}
		if committed {
			recs = s.archiveAborted(nowMs, f.key.Member, k, sp, recs, data, &f.durable)
			if len(recs) == 0 {
				continue
			}
		}
		p := f.part(tp)
		p.Records = append(p.Records, data...)
		for _, r := range recs {
			p.AcquiredRecords = append(p.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{
				FirstOffset: r.First, LastOffset: r.Last, DeliveryCount: r.Count,
			})
			left -= int(r.Last - r.First + 1)
		}
		got = true
	}
	return got
}

// archiveAborted is read_committed's step after an acquisition (st.mu
// held): the acquired records of aborted transactions in data (the
// batches read for recs) are archived on the member's behalf, as Kafka
// archives them before answering, and the acquired ranges without them
// are returned. A batch is aborted when it is transactional and its
// producer has an aborted transaction (Log.AbortedTransactions) that began
// at or before it and whose abort marker has not been passed yet: the
// consumer's rule in Kafka.
func (s *Server) archiveAborted(nowMs int64, member string, k sharePartKey, sp *sharePart, recs []share.AcquiredRecords, data []byte, d *durable) []share.AcquiredRecords {
	first, last := recs[0].First, recs[len(recs)-1].Last
	aborted := sp.log.AbortedTransactions(nil, first, last+1)
	if len(aborted) == 0 {
		return recs
	}
	slices.SortFunc(aborted, func(a, b engine.AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	open := map[int64]bool{} // producers inside an aborted transaction
	var gone [][2]int64      // aborted offset ranges
	for rest := data; len(rest) >= 61; {
		n := 12 + int(int32(binary.BigEndian.Uint32(rest[8:12])))
		if n < 61 || n > len(rest) {
			break
		}
		base := int64(binary.BigEndian.Uint64(rest))
		end := base + int64(int32(binary.BigEndian.Uint32(rest[23:27])))
		attrs := binary.BigEndian.Uint16(rest[21:23])
		pid := int64(binary.BigEndian.Uint64(rest[43:51]))
		rest = rest[n:]
		for len(aborted) > 0 && aborted[0].FirstOffset <= base {
			open[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		switch {
		case attrs&0x20 != 0: // a control batch: an abort marker ends the producer's transaction
			delete(open, pid)
		case attrs&0x10 != 0 && open[pid]:
			gone = append(gone, [2]int64{base, end})
		}
	}
	if len(gone) == 0 {
		return recs
	}
	isGone := func(o int64) bool {
		for _, g := range gone {
			if o >= g[0] && o <= g[1] {
				return true
			}
		}
		return false
	}
	var keep []share.AcquiredRecords
	var gap []share.AckBatch
	for _, r := range recs {
		for o := r.First; o <= r.Last; o++ {
			if isGone(o) {
				gap = append(gap, share.AckBatch{First: o, Last: o, Types: []share.AckType{share.AckGap}})
				continue
			}
			if n := len(keep); n > 0 && keep[n-1].Last == o-1 && keep[n-1].Count == r.Count {
				keep[n-1].Last = o
			} else {
				keep = append(keep, share.AcquiredRecords{First: o, Last: o, Count: r.Count})
			}
		}
	}
	e, aerr := sp.p.Acknowledge(nowMs, member, gap)
	if aerr != nil {
		s.log.Error("share: archiving aborted records", "err", aerr.Msg)
		return recs
	}
	if err := s.applyEffects(k, sp, e, d); err != nil {
		s.log.Error("share: persisting archived aborted records", "err", err)
	}
	return keep
}

// retry is the share tick's look at a waiting fetch (st.mu held): true
// when it is to be answered.
func (f *shareFetch) retry(nowMs int64) bool {
	select {
	case <-f.rc.conn.Done():
		return true
	default:
	}
	if st := &f.s.groups.share; st.sessions.Get(f.key) != f.sess {
		return true // answer now, empty: a newer session has taken over
	}
	return f.acquire(nowMs) || f.hasErrors() || nowMs >= f.deadlineMs
}

// send answers once the fetch's writes are durable.
func (f *shareFetch) send() {
	f.s.waitDurable(f.durable, func(err error) {
		if err != nil {
			for _, p := range f.parts {
				if p.AcknowledgeErrorCode == 0 {
					p.AcknowledgeErrorCode = kerr.KafkaStorageError.Code
				}
			}
		}
		f.build()
		f.s.meterShareFetch(f.resp)
		f.rc.respond(f.resp)
	})
}

// meterShareFetch counts the record batches a ShareFetch response sends
// in strata_topic_bytes_out_total and strata_topic_records_out_total, as
// Fetch's are counted (meterFetch, meterRecordsOut): their bytes, and the
// record counts of their headers (a batch's records the member did not
// acquire included, as Fetch counts whole batches).
func (s *Server) meterShareFetch(resp *kmsg.ShareFetchResponse) {
	m := s.cfg.Metrics
	if m == nil {
		return
	}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		var bytes, recs int64
		for j := range rt.Partitions {
			b := rt.Partitions[j].Records
			n, _, _, _ := headerRecords(b, int64(len(b)))
			bytes, recs = bytes+int64(len(b)), recs+n
		}
		if bytes == 0 {
			continue
		}
		tc := m.Topic(s.topicName(rt.TopicID))
		tc.Out(bytes)
		tc.OutRecords(recs)
	}
}

// readShareBatches returns the record batches of l that hold the offsets
// of recs, each batch once, in offset order.
func readShareBatches(l *engine.Log, recs []share.AcquiredRecords) ([]byte, error) {
	var out []byte
	next := int64(-1) // first offset not yet covered by out
	for _, r := range recs {
		off := max(r.First, next)
		for off <= r.Last {
			res, err := l.ReadMem(off, 1<<20, true)
			if err != nil {
				return nil, err
			}
			buf, err := shareChunkBytes(res)
			res.Release()
			if err != nil {
				return nil, err
			}
			if len(buf) == 0 {
				return out, nil // below the HW nothing more: gaps
			}
			progressed := false
			for rest := buf; len(rest) >= 61; {
				n := 12 + int(int32(binary.BigEndian.Uint32(rest[8:12])))
				if n < 61 || n > len(rest) {
					break
				}
				base := int64(binary.BigEndian.Uint64(rest))
				last := base + int64(int32(binary.BigEndian.Uint32(rest[23:27])))
				batch := rest[:n]
				rest = rest[n:]
				if last < off {
					continue
				}
				if base > r.Last {
					break
				}
				out = append(out, batch...)
				off, next, progressed = last+1, last+1, true
			}
			if !progressed {
				return out, nil
			}
		}
	}
	return out, nil
}

// shareChunkBytes copies a read's chunks into memory.
func shareChunkBytes(res engine.ReadResult) ([]byte, error) {
	buf := make([]byte, 0, res.Bytes)
	for _, c := range res.Chunks {
		if c.Buf != nil {
			buf = append(buf, c.Buf...)
			continue
		}
		if c.Len < 0 || c.Len > 1<<30 {
			return nil, fmt.Errorf("share: chunk of %d bytes", c.Len)
		}
		n := len(buf)
		buf = append(buf, make([]byte, c.Len)...)
		if _, err := c.File.ReadAt(buf[n:], c.Pos); err != nil {
			return nil, errors.Join(errors.New("share: reading a record batch"), err)
		}
	}
	return buf, nil
}
