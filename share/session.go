package share

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Share session epochs (KIP-932): 0 opens a session, -1 closes it, and
// every other request must carry the session's next epoch, which goes up
// by one per request (wrapping from MaxInt32 to 1).
const (
	SessionInitialEpoch int32 = 0
	SessionFinalEpoch   int32 = -1
)

// SessionKey names a share session: one per member of a group (on this
// broker).
type SessionKey struct {
	Group, Member string
}

// TopicPartition names a partition by topic id.
type TopicPartition struct {
	TopicID   [16]byte
	Partition int32
}

// Session is a share session: the partitions a member fetches from this
// broker (added by ShareFetch, removed by its forgotten topics), the epoch
// its next request must carry, and the connection it belongs to (the
// shell's id; closing the connection closes the session).
type Session struct {
	Key   SessionKey
	Epoch int32 // expected in the next request
	Parts map[TopicPartition]struct{}
	Order []TopicPartition // Parts in the order they were added (fetch order)
	Conn  uint64
}

// Add puts tp in the session.
func (s *Session) Add(tp TopicPartition) {
	if _, ok := s.Parts[tp]; ok {
		return
	}
	s.Parts[tp] = struct{}{}
	s.Order = append(s.Order, tp)
}

// Forget removes tp from the session.
func (s *Session) Forget(tp TopicPartition) {
	if _, ok := s.Parts[tp]; !ok {
		return
	}
	delete(s.Parts, tp)
	for i, o := range s.Order {
		if o == tp {
			s.Order = append(s.Order[:i], s.Order[i+1:]...)
			break
		}
	}
}

// Sessions is the share-session cache: pure bookkeeping, serialized by
// its owner. MaxSessions bounds it (Kafka's
// group.share.max.share.sessions).
type Sessions struct {
	MaxSessions int
	m           map[SessionKey]*Session
}

// DefaultMaxSessions is group.share.max.share.sessions.
const DefaultMaxSessions = 2000

// Get returns the session of key, nil if none.
func (ss *Sessions) Get(key SessionKey) *Session { return ss.m[key] }

// All returns every session (the caller must not keep the slice).
func (ss *Sessions) All() []*Session {
	out := make([]*Session, 0, len(ss.m))
	for _, s := range ss.m {
		out = append(out, s)
	}
	return out
}

// Remove drops the session of key and returns it (nil if none).
func (ss *Sessions) Remove(key SessionKey) *Session {
	s := ss.m[key]
	delete(ss.m, key)
	return s
}

// Use checks a request's session epoch and returns the session it works
// on, moved to its next epoch, or a Kafka error code:
//   - 0 opens a new session for key on conn (replacing an old one, which
//     is returned as replaced so the shell can release its records);
//     SHARE_SESSION_LIMIT_REACHED when the cache is full;
//   - -1 returns the session to close (nil if there is none: the request's
//     acknowledgements are still served); the caller removes it;
//   - any other epoch must be the session's: SHARE_SESSION_NOT_FOUND
//     without one, INVALID_SHARE_SESSION_EPOCH with another.
func (ss *Sessions) Use(key SessionKey, epoch int32, conn uint64) (s, replaced *Session, code int16) {
	if ss.m == nil {
		ss.m = map[SessionKey]*Session{}
	}
	switch {
	case epoch == SessionInitialEpoch:
		old := ss.m[key]
		max := ss.MaxSessions
		if max <= 0 {
			max = DefaultMaxSessions
		}
		if old == nil && len(ss.m) >= max {
			return nil, nil, kerr.ShareSessionLimitReached.Code
		}
		s = &Session{Key: key, Epoch: 1, Parts: map[TopicPartition]struct{}{}, Conn: conn}
		ss.m[key] = s
		return s, old, 0
	case epoch == SessionFinalEpoch:
		return ss.m[key], nil, 0
	case epoch < -1:
		return nil, nil, kerr.InvalidShareSessionEpoch.Code
	}
	s = ss.m[key]
	switch {
	case s == nil:
		return nil, nil, kerr.ShareSessionNotFound.Code
	case s.Epoch != epoch:
		return nil, nil, kerr.InvalidShareSessionEpoch.Code
	}
	if s.Epoch == math.MaxInt32 {
		s.Epoch = 1
	} else {
		s.Epoch++
	}
	s.Conn = conn
	return s, nil, 0
}
