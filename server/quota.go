package server

import (
	"strings"
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
// waits anyway. request_percentage and controller_mutation_rate are
// stored and described, not enforced.

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
	user := strings.TrimPrefix(rc.principal(), "User:")
	ms := q.Record(typ, user, rc.client, v, s.now().UnixMilli())
	if ms <= 0 {
		return 0
	}
	if m, ok := rc.conn.(muter); ok {
		m.MuteFor(time.Duration(ms) * time.Millisecond)
	}
	return int32(min(ms, 1<<31-1))
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
