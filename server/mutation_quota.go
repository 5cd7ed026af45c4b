package server

import (
	"math"
	"sync"

	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kerr"
)

// controller_mutation_rate (KIP-599) limits how fast a client mutates
// partitions: CreateTopics counts the partitions of each topic it
// creates, CreatePartitions the partitions it adds, DeleteTopics the
// partitions of each topic it deletes (validate_only requests, and topics
// refused for another reason, count nothing). The quota, in partitions
// per second, is looked up for the request's user and client id with the
// precedence of the other client quotas, and measured per matched entity
// (a default's name replaced by the request's own, as auth.Quotas does).
//
// Kafka measures it with a token bucket (TokenBucket): the bucket holds
// at most quota x quota.window.num x quota.window.size.seconds tokens
// (Kafka's defaults, 11 and 1 s: auth.QuotaConfig is not exposed, and the
// broker uses those), refills at quota tokens per second on the server's
// clock, and each mutation takes its partitions out of it, which may take
// it below zero. Topic by topic, a request of a strict version
// (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+) that finds
// the bucket below zero gets THROTTLING_QUOTA_EXCEEDED for that topic,
// which is not mutated, and the response's throttle_time_ms is the time
// the bucket needs to get back to zero (-tokens / quota); a topic that
// finds it at zero or above is mutated even when it takes the bucket
// below. Older versions (permissive) mutate every topic and are only told
// the throttle time once the bucket is below zero. Either way a throttled
// connection is muted for that long (KIP-219), as for the other quotas.

// Kafka's default quota.window.num and quota.window.size.seconds, which
// size the bucket.
const (
	mutationWindowNum = 11
	mutationWindowSec = 1.0
)

// mutationBucketIdleMs drops a bucket not used for an hour (Kafka's
// inactive sensor expiration).
const mutationBucketIdleMs = 3600_000

// mutationKey is the entity a bucket measures: the matched quota
// entity's parts, with the request's own user and client id.
type mutationKey struct {
	user, client string
	hasU, hasC   bool
}

type mutationBucket struct {
	tokens float64
	lastMs int64
}

// mutationBuckets are one server's buckets.
type mutationBuckets struct {
	mu      sync.Mutex
	buckets map[mutationKey]*mutationBucket
	swept   int64
}

// mutationBuckets is the server's buckets (Server.mutations; the map is
// made at first use).
func (s *Server) mutationBuckets() *mutationBuckets { return &s.mutations }

// mutationQuota is one request's view of its controller_mutation_rate
// quota (Kafka's ControllerMutationQuota); nil, or a zero limit, when no
// quota applies. Used by the request's handler goroutine only.
type mutationQuota struct {
	s      *Server
	key    mutationKey
	limit  float64
	strict bool

	throttleMs int64 // the last throttle time found
	atMs       int64 // when it was found
}

// newMutationQuota returns rc's controller mutation quota: strict from
// version strictSince, permissive before; nil when none applies.
func (s *Server) newMutationQuota(rc *reqCtx, strictSince int16) *mutationQuota {
	q := s.cfg.Quotas
	if q == nil || !q.Sets(auth.QuotaControllerMutationRate) {
		return nil
	}
	limit, key, ok := mutationLimit(q, quotaUser(rc), rc.client)
	if !ok {
		return nil
	}
	return &mutationQuota{s: s, key: key, limit: limit, strict: rc.version >= strictSince}
}

// mutationLimit finds the controller_mutation_rate quota of (user,
// clientID) in auth's precedence (see auth/quota.go) and the key its
// bucket is measured under.
func mutationLimit(q *auth.Quotas, user, clientID string) (float64, mutationKey, bool) {
	all, err := q.Describe(nil, false)
	if err != nil {
		return 0, mutationKey{}, false
	}
	limits := make(map[auth.QuotaEntity]float64, len(all))
	for _, d := range all {
		if v, ok := d.Values[auth.QuotaControllerMutationRate]; ok {
			limits[d.Entity] = v
		}
	}
	named := func(n string) auth.EntityName { return auth.EntityName{Set: true, Name: n} }
	def := auth.EntityName{Set: true, Default: true}
	none := auth.EntityName{}
	for _, e := range [...]auth.QuotaEntity{
		{User: named(user), ClientID: named(clientID)},
		{User: named(user), ClientID: def},
		{User: named(user), ClientID: none},
		{User: def, ClientID: named(clientID)},
		{User: def, ClientID: def},
		{User: def, ClientID: none},
		{User: none, ClientID: named(clientID)},
		{User: none, ClientID: def},
	} {
		v, ok := limits[e]
		if !ok {
			continue
		}
		k := mutationKey{hasU: e.User.Set, hasC: e.ClientID.Set}
		if k.hasU {
			k.user = user
		}
		if k.hasC {
			k.client = clientID
		}
		return v, k, true
	}
	return 0, mutationKey{}, false
}

// record takes permits partition mutations out of the bucket. A strict
// quota that finds the bucket below zero takes nothing and returns
// THROTTLING_QUOTA_EXCEEDED: the caller must not mutate. A permissive
// one always takes them and notes the throttle once below zero.
func (m *mutationQuota) record(permits int) error {
	if m == nil || m.limit <= 0 {
		return nil
	}
	nowMs := m.s.now().UnixMilli()
	bs := m.s.mutationBuckets()
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if nowMs-bs.swept > mutationBucketIdleMs {
		for k, b := range bs.buckets {
			if nowMs-b.lastMs > mutationBucketIdleMs {
				delete(bs.buckets, k)
			}
		}
		bs.swept = nowMs
	}
	burst := m.limit * mutationWindowNum * mutationWindowSec
	b := bs.buckets[m.key]
	if b == nil {
		if bs.buckets == nil {
			bs.buckets = map[mutationKey]*mutationBucket{}
		}
		b = &mutationBucket{tokens: burst, lastMs: nowMs}
		bs.buckets[m.key] = b
	}
	// Refill for the time since the last use (never backwards).
	if d := nowMs - b.lastMs; d > 0 {
		b.tokens = min(burst, b.tokens+m.limit*float64(d)/1000)
		b.lastMs = nowMs
	}
	b.tokens = min(b.tokens, burst) // the quota may have been lowered
	if m.strict && b.tokens < 0 {
		m.throttleMs, m.atMs = m.bucketThrottle(b.tokens), nowMs
		return newAPIError(kerr.ThrottlingQuotaExceeded,
			"controller_mutation_rate quota of %g partitions/s exceeded: retry after %d ms", m.limit, m.throttleMs)
	}
	b.tokens -= float64(permits)
	if !m.strict && b.tokens < 0 {
		m.throttleMs, m.atMs = m.bucketThrottle(b.tokens), nowMs
	}
	return nil
}

// bucketThrottle is how long a bucket at tokens (< 0) needs to refill to
// zero, in ms.
func (m *mutationQuota) bucketThrottle(tokens float64) int64 {
	return int64(math.Round(-tokens / m.limit * 1000))
}

// throttleTime is the throttle to answer with: the last one found, less
// the time since (Kafka's throttleTime).
func (m *mutationQuota) throttleTime() int64 {
	if m == nil || m.throttleMs <= 0 {
		return 0
	}
	return max(0, m.throttleMs-(m.s.now().UnixMilli()-m.atMs))
}

// throttleMutations sets the throttle of rc's response from its mutation
// quota (unless it carries a longer one) and mutes the connection for it;
// request_percentage is added when the response is encoded
// (throttleResponse), which keeps the larger.
func (rc *reqCtx) throttleMutations(m *mutationQuota, cur *int32) {
	ms := m.throttleTime()
	if ms <= 0 {
		return
	}
	if int64(*cur) < ms {
		*cur = int32(min(ms, 1<<31-1))
	}
	rc.mute(ms)
}
