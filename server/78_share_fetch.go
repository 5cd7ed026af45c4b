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
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/broker/sharehost"
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
	st := s.groups.share
	nowMs := s.now().UnixMilli()
	f.deadlineMs = nowMs + int64(max(req.MaxWaitMillis, 0))

	// A cluster: the group's configs as the state topic has them, and
	// the share-partitions this broker leads but has not loaded, read
	// before the lock is taken (sharehost's load.go), so a load does not
	// hold up the other share-partitions' requests.
	if s.clustered() {
		var keys []sharehost.Key
		if req.ShareSessionEpoch == share.SessionInitialEpoch {
			st.RefreshGroupConfigs(f.key.Group)
		} else {
			keys = st.SessionKeys(f.key)
		}
		st.Load(append(keys, s.shareLoadKeys(rc, f.key.Group, shareFetchParts(req))...))
		nowMs = s.now().UnixMilli() // the transitions' time: after the load
	}

	st.Lock()
	resp.AcquisitionLockTimeoutMillis = st.LockDurationMs(f.key.Group)
	final := req.ShareSessionEpoch == share.SessionFinalEpoch
	if !final && !s.shareMember(f.key.Group, f.key.Member) {
		st.Unlock()
		fail(kerr.UnknownMemberID.Code, "")
		return
	}
	sess, _, code := st.Sessions().Use(f.key, req.ShareSessionEpoch, rc.conn.ID())
	if code != 0 {
		st.Unlock()
		fail(code, "")
		return
	}
	if sess != nil && !final {
		st.SetConn(f.key, rc.conn)
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
				f.part(tp).ErrorCode = s.shareNoTopicCode(tp.TopicID)
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
		st.CloseSession(nowMs, f.key)
		st.Unlock()
		f.Send()
		return
	}
	if req.Version >= 2 && req.IsRenewAck {
		// KIP-1222: a fetch carrying RENEW acknowledgements only
		// acknowledges; it acquires nothing.
		st.Unlock()
		f.Send()
		return
	}
	got := f.acquire(nowMs)
	if got || req.MaxWaitMillis <= 0 || f.hasErrors() {
		st.Unlock()
		f.Send()
		return
	}
	f.Arm()
	f.timer = time.AfterFunc(time.Duration(req.MaxWaitMillis)*time.Millisecond, st.Kick)
	st.Wait(f)
	st.Unlock()
}

// Stop ends a waiting fetch's registrations (st.mu held).
func (f *shareFetch) Stop() {
	f.waiter.Cancel()
	f.timer.Stop()
}

// Arm registers the waiting fetch on the high watermarks of its session's
// partitions (st.mu held): new records kick the retry loop.
func (f *shareFetch) Arm() {
	st := f.s.groups.share
	if f.waiter == nil {
		f.waiter = engine.NewHWWaiter(st.Kick)
	}
	f.waiter.Cancel()
	sess := st.Sessions().Get(f.key)
	if sess == nil {
		f.waiter.Arm(0)
		return
	}
	f.waiter.Arm(len(sess.Order))
	for _, tp := range sess.Order {
		if sp := st.PartOf(sharehost.Key{Group: f.key.Group, TopicID: tp.TopicID, Part: tp.Partition}); sp != nil {
			f.waiter.Add(sp.Log, sp.Log.HighWatermark())
		}
	}
}

// shareFetchParts lists a ShareFetch's partitions.
func shareFetchParts(req *kmsg.ShareFetchRequest) []share.TopicPartition {
	var out []share.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			out = append(out, share.TopicPartition{TopicID: t.TopicID, Partition: p.Partition})
		}
	}
	return out
}

// shareLoadKeys returns the share-partitions of group on tps whose topic
// exists and that rc may read: those a request may load (Host.Load).
func (s *Server) shareLoadKeys(rc *reqCtx, group string, tps []share.TopicPartition) []sharehost.Key {
	if !s.clustered() {
		return nil
	}
	var out []sharehost.Key
	for _, tp := range tps {
		t := s.eng.TopicByID(tp.TopicID)
		if t == nil || t.Deleted() || !s.authorized(rc, auth.OpRead, auth.ResourceTopic, t.Name()) {
			continue
		}
		out = append(out, sharehost.Key{Group: group, TopicID: tp.TopicID, Part: tp.Partition})
	}
	return out
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
	sp, code := s.groups.share.Partition(key.Group, topic, p, d)
	if code != 0 {
		return code, ""
	}
	e, aerr := sp.P.Acknowledge(nowMs, key.Member, batches)
	if aerr != nil {
		return aerr.Code, aerr.Msg
	}
	if err := s.groups.share.Apply(sharehost.Key{Group: key.Group, TopicID: topic.ID(), Part: p}, sp, e, d); err != nil {
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
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = f.s.shareLeader(tp.TopicID, tp.Partition)
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
	s, st := f.s, f.s.groups.share
	sess := st.Sessions().Get(f.key)
	if sess == nil || sess != f.sess || !s.shareMember(f.key.Group, f.key.Member) {
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
			f.part(tp).ErrorCode = s.shareNoTopicCode(tp.TopicID)
			continue
		}
		sp, code := st.Partition(f.key.Group, topic, tp.Partition, &f.durable)
		if code != 0 {
			f.part(tp).ErrorCode = code
			continue
		}
		k := sharehost.Key{Group: f.key.Group, TopicID: tp.TopicID, Part: tp.Partition}
		recs, data, err := st.Acquire(nowMs, k, sp, f.key.Member, left, &f.durable)
		if err != nil {
			f.part(tp).ErrorCode = errCode(err)
			continue
		}
		if len(recs) == 0 {
			continue
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

// Retry is the share tick's look at a waiting fetch (st.mu held): true
// when it is to be answered.
func (f *shareFetch) Retry(nowMs int64) bool {
	select {
	case <-f.rc.conn.Done():
		return true
	default:
	}
	if st := f.s.groups.share; st.Sessions().Get(f.key) != f.sess {
		return true // answer now, empty: a newer session has taken over
	}
	return f.acquire(nowMs) || f.hasErrors() || nowMs >= f.deadlineMs
}

// Send answers once the fetch's writes are durable.
func (f *shareFetch) Send() {
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
