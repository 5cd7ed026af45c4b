package server

// ShareAcknowledge (API key 79), v1..v2: a member's acknowledgements of
// records it acquired with ShareFetch, per partition all or nothing
// (INVALID_RECORD_STATE with Kafka's message when an offset is not
// acquired by the member), answered once the new state is durable. The
// request uses the member's share session (78_share_fetch.go): epoch 0 is
// INVALID_SHARE_SESSION_EPOCH (a session is opened by ShareFetch), -1
// closes the session after the acknowledgements and releases the records
// the member still holds (with or without a session here: in a cluster the
// group's coordinator sends such a request to every broker when a member
// leaves or is fenced); any other epoch must be the session's next.
// RENEW (v2, KIP-1222) extends the locks.

import (
	"github.com/stratalog/strata/auth"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(79, 1, 2, handleShareAcknowledge) }

func handleShareAcknowledge(s *Server, rc *reqCtx) {
	req := rc.req.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
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
	if req.ShareSessionEpoch == share.SessionInitialEpoch {
		fail(kerr.InvalidShareSessionEpoch.Code, "a share session is opened by ShareFetch")
		return
	}
	key := share.SessionKey{Group: *req.GroupID, Member: *req.MemberID}
	st := s.groups.share
	// A cluster: the share-partitions led here but not loaded are read
	// before the lock is taken (sharehost's load.go).
	var tps []share.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, share.TopicPartition{TopicID: t.TopicID, Partition: p.Partition})
		}
	}
	st.Load(s.shareLoadKeys(rc, key.Group, tps))
	nowMs := s.now().UnixMilli()
	st.Lock()
	resp.AcquisitionLockTimeoutMillis = st.LockDurationMs(key.Group)
	_, _, code := st.Sessions().Use(key, req.ShareSessionEpoch, rc.conn.ID())
	if code != 0 {
		st.Unlock()
		fail(code, "")
		return
	}
	var d durable
	for _, t := range req.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		topic := s.eng.TopicByID(t.TopicID)
		if topic != nil && topic.Deleted() {
			topic = nil
		}
		for _, rp := range t.Partitions {
			p := kmsg.NewShareAcknowledgeResponseTopicPartition()
			p.Partition = rp.Partition
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = s.shareLeader(t.TopicID, rp.Partition)
			switch {
			case topic == nil:
				p.ErrorCode = s.shareNoTopicCode(t.TopicID)
			case !s.authorized(rc, auth.OpRead, auth.ResourceTopic, topic.Name()):
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			default:
				batches := make([]share.AckBatch, len(rp.AcknowledgementBatches))
				for i, b := range rp.AcknowledgementBatches {
					batches[i] = ackBatch(b.FirstOffset, b.LastOffset, b.AcknowledgeTypes)
				}
				code, msg := renewCheck(req.Version, batches)
				if code == 0 {
					code, msg = s.shareAck(nowMs, key, topic, rp.Partition, batches, &d)
				}
				if code != 0 {
					p.ErrorCode, p.ErrorMessage = code, kmsg.StringPtr(msg)
				}
			}
			rt.Partitions = append(rt.Partitions, p)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ShareSessionEpoch == share.SessionFinalEpoch {
		st.CloseSession(nowMs, key)
		// Without a session here too: the group's coordinator telling
		// the partition leaders a member left or was fenced
		// (shareCluster.MemberGone).
		st.ReleaseMember(nowMs, key.Group, key.Member)
	}
	st.Unlock()
	s.waitDurable(d, func(err error) {
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = kerr.KafkaStorageError.Code, kmsg.StringPtr(err.Error())
		}
		rc.respond(resp)
	})
}
