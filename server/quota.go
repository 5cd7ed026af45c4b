package server

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/stratalog/strata/auth"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quotas (issue 20; package auth's Quotas has the model): Produce
// records the request's record bytes against producer_byte_rate, a
// consumer's Fetch the response's bytes against consumer_byte_rate, for
// the connection's user (the principal's name, ANONYMOUS when
// unauthenticated) and client id. A request past its quota is answered at
// once with throttle_time_ms, and the connection is muted (not read) for
// that long: KIP-219's order, so a client that ignores the throttle time
// waits anyway.
//
// request_percentage (KIP-124) limits the time a client keeps the
// broker's handlers busy: each request's time in its handler, on the
// server's clock, is recorded for its user and client id as a percentage
// of one thread (requestTimer), and a client past its quota gets the
// throttle time in its response's throttle_time_ms (the larger of it and
// a byte-rate throttle, for Produce and Fetch) and its connection muted
// for that long, as for the byte rates. Exempt, as in Kafka: what a
// broker sends another (WriteTxnMarkers, a follower's Fetch), a Produce
// with acks=0 (no response to carry the throttle) and the requests of a
// connection still authenticating (Kafka's authenticator serves those
// before its request handlers). controller_mutation_rate (KIP-599) is
// a token bucket of partition mutations that CreateTopics, DeleteTopics
// and CreatePartitions take from, topic by topic (mutation_quota.go).

// muter is what a throttled connection is (netpoll.Conn).
type muter interface{ MuteFor(time.Duration) }

// throttle records v against quota type typ for rc's user and client id
// and mutes the connection for the throttle time, which it returns (0
// without quotas: one atomic load).
func (s *Server) throttle(rc *reqCtx, typ string, v float64) int32 {
	q := s.cfg.Quotas
	if q == nil || !q.Active() {
		return 0
	}
	ms := q.Record(typ, quotaUser(rc), rc.client, v, s.now().UnixMilli())
	ms = max(ms, rc.requestTime()) // Produce and Fetch: one throttle for both quotas, as Kafka
	rc.mute(ms)
	return int32(min(ms, 1<<31-1))
}

// quotaUser is the user rc's quotas are looked up for.
func quotaUser(rc *reqCtx) string { return strings.TrimPrefix(rc.principal(), "User:") }

// mute mutes rc's connection for ms (KIP-219).
func (rc *reqCtx) mute(ms int64) {
	if ms <= 0 {
		return
	}
	if m, ok := rc.conn.(muter); ok {
		m.MuteFor(time.Duration(ms) * time.Millisecond)
	}
}

// requestTimer times one request in its handler for request_percentage:
// from the handler's start to the request's response when the handler
// answers before it returns, else to its return (a Produce waiting for
// its replicas, a Fetch long poll: the handler's thread is free once it
// returns, which is what Kafka counts). The zero requestTimer does not
// time (no request_percentage quota set, or the request is exempt).
type requestTimer struct {
	s     *Server
	start int64        // s.now() in UnixNano as the handler started
	end   atomic.Int64 // as it returned; 0 while it runs
	done  atomic.Bool  // recorded (each request once)
}

// serveTimed runs fn for rc, timing it when a request_percentage quota
// is set and rc is not exempt (dispatch's call of the handler).
func (s *Server) serveTimed(rc *reqCtx, fn handler) {
	q := s.cfg.Quotas
	if q == nil || !q.Sets(auth.QuotaRequestPercentage) || requestQuotaExempt(rc) {
		fn(s, rc)
		return
	}
	t := &rc.quota
	t.s, t.start = s, s.now().UnixNano()
	fn(s, rc)
	if !t.done.Load() {
		t.end.CompareAndSwap(0, s.now().UnixNano())
	}
}

// requestQuotaExempt reports the requests Kafka does not charge to the
// request quota (see the file comment); it runs in dispatch, before the
// handler, so the SASL state it reads is the one saslGate just read.
func requestQuotaExempt(rc *reqCtx) bool {
	switch req := rc.req.(type) {
	case *kmsg.WriteTxnMarkersRequest:
		return true
	case *kmsg.FetchRequest:
		id := req.ReplicaID
		if rc.version >= 15 {
			id = req.ReplicaState.ID
		}
		return id >= 0
	case *kmsg.ProduceRequest:
		return req.Acks == 0
	}
	st, _ := saslStateOf(rc.conn)
	return st != nil && st.phase != saslComplete
}

// requestTime records rc's handler time against request_percentage
// (once: later calls return 0) and returns the throttle time, 0 when
// within the quota or not timed. It does not mute.
func (rc *reqCtx) requestTime() int64 {
	t := &rc.quota
	if t.s == nil || !t.done.CompareAndSwap(false, true) {
		return 0
	}
	q := t.s.cfg.Quotas
	now := t.s.now().UnixNano()
	end := t.end.Load()
	if end == 0 {
		end = now // answered from within the handler
	}
	pct := float64(max(end-t.start, 0)) * 100 / float64(time.Second) // Kafka's nanosToPercentage
	return q.Record(auth.QuotaRequestPercentage, quotaUser(rc), rc.client, pct, now/int64(time.Millisecond))
}

// throttleResponse records rc's handler time as its response resp is
// encoded (respondEncoded) and, past the request_percentage quota, sets
// resp's throttle_time_ms to the throttle (unless resp already carries a
// longer one) and mutes the connection. Produce and Fetch have recorded
// already (throttle), so this is a no-op for them.
func (rc *reqCtx) throttleResponse(resp kmsg.Response) {
	ms := rc.requestTime()
	if ms <= 0 {
		return
	}
	if tr, ok := resp.(interface {
		kmsg.ThrottleResponse
		kmsg.SetThrottleResponse
	}); ok {
		if cur, _ := tr.Throttle(); int64(cur) < ms {
			tr.SetThrottle(int32(min(ms, 1<<31-1)))
		}
	}
	rc.mute(ms)
}

// quotaEntity turns an AlterClientQuotas entity (nil name: the default)
// into auth's; ok false for an unknown or repeated entity type (bad).
func quotaEntity(parts []kmsg.AlterClientQuotasRequestEntryEntity) (e auth.QuotaEntity, bad string, ok bool) {
	for _, p := range parts {
		n := auth.EntityName{Set: true, Default: p.Name == nil}
		if p.Name != nil {
			n.Name = *p.Name
		}
		switch {
		case p.Type == auth.EntityUser && !e.User.Set:
			e.User = n
		case p.Type == auth.EntityClientID && !e.ClientID.Set:
			e.ClientID = n
		default:
			return e, p.Type, false
		}
	}
	return e, "", true
}

// entityParts is an entity as the responses spell it.
func entityParts(e auth.QuotaEntity, add func(typ string, name *string)) {
	for _, p := range []struct {
		typ string
		n   auth.EntityName
	}{{auth.EntityUser, e.User}, {auth.EntityClientID, e.ClientID}} {
		if !p.n.Set {
			continue
		}
		if p.n.Default {
			add(p.typ, nil)
		} else {
			name := p.n.Name
			add(p.typ, &name)
		}
	}
}
