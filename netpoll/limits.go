package netpoll

import (
	"math"
	"net"
	"sort"
	"sync"
	"time"
)

// Connection limits (Kafka's KIP-402 and KIP-612), applied as a
// connection is accepted, in Kafka's order:
//
//  1. The connection creation rates: max.connection.creation.rate
//     (broker-wide) and the listener's max.connection.creation.rate. A
//     connection that takes a rate past its limit is held (not served)
//     for the throttle time, and the accept loop with it: the connections
//     behind it wait in the kernel's backlog. The inter-broker listener is
//     held only by its own listener rate.
//  2. The connection counts: while the listener has its
//     max.connections, or the broker has max.connections, the accept loop
//     waits for a connection to close (the client's connect completes in
//     the kernel, nothing is read). The inter-broker listener is not held
//     by max.connections when the broker serves more than one listener:
//     its connection is taken and, when the broker is then over
//     max.connections, the least recently active connection of another
//     listener is closed.
//  3. max.connections.per.ip (or its max.connections.per.ip.overrides
//     entry): a connection from an address that already has that many is
//     closed at once, with one log line.
//
// Rates are Kafka's Rate over ConnLimits.QuotaWindowNum windows of
// QuotaWindowMs (at least QuotaWindowNum-1 windows are counted, so a
// fresh broker takes a burst), on the Config's clock; a throttle is
// (rate - limit) / limit x window, at most one window (Kafka's bound for
// connections).

// Unlimited is Kafka's default of every connection limit
// (Integer.MAX_VALUE).
const Unlimited = math.MaxInt32

// ConnLimits are the broker's connection limits, with Kafka's values
// (0 is a limit of zero; Unlimited is none). Start from
// DefaultConnLimits.
type ConnLimits struct {
	MaxConnections            int            // max.connections
	MaxConnectionsPerIP       int            // max.connections.per.ip
	MaxConnectionsPerIPByAddr map[string]int // max.connections.per.ip.overrides, by IP address (hosts resolved by the caller)
	MaxConnectionCreationRate int            // max.connection.creation.rate, connections a second
	// Listeners are the per-listener limits
	// (listener.name.<listener>.max.connections and
	// .max.connection.creation.rate) by listener name; a listener not
	// listed is unlimited.
	Listeners map[string]ListenerLimits
	// InterBrokerListener is the listener protected from the broker-wide
	// limits (inter.broker.listener.name) when more than one is served.
	InterBrokerListener string
	// QuotaWindowNum and QuotaWindowMs are the rates' samples
	// (quota.window.num, quota.window.size.seconds); 0: 11 and 1000.
	QuotaWindowNum int
	QuotaWindowMs  int64
}

// ListenerLimits are one listener's limits (Kafka's values).
type ListenerLimits struct {
	MaxConnections            int
	MaxConnectionCreationRate int
}

// DefaultConnLimits are Kafka's defaults: nothing limited.
func DefaultConnLimits() ConnLimits {
	return ConnLimits{MaxConnections: Unlimited, MaxConnectionsPerIP: Unlimited, MaxConnectionCreationRate: Unlimited}
}

func (l ConnLimits) listener(name string) ListenerLimits {
	if ll, ok := l.Listeners[name]; ok {
		return ll
	}
	return ListenerLimits{MaxConnections: Unlimited, MaxConnectionCreationRate: Unlimited}
}

func (l ConnLimits) perIP(ip string) int {
	if n, ok := l.MaxConnectionsPerIPByAddr[ip]; ok {
		return n
	}
	return l.MaxConnectionsPerIP
}

// limiter counts connections and applies ConnLimits. Its lock is never
// held with Server.mu.
type limiter struct {
	mu          sync.Mutex
	lim         ConnLimits
	total       int
	byIP        map[string]int
	byListener  map[string]int // connections per listener
	served      map[string]int // listeners being served (Serve loops per name)
	brokerRate  *connRate
	listenRates map[string]*connRate
	// changed is closed (and replaced) whenever a connection closes or
	// the limits change: the accept loops waiting for a slot look again.
	changed chan struct{}
}

func newLimiter(l ConnLimits) *limiter {
	lm := &limiter{byIP: map[string]int{}, byListener: map[string]int{}, served: map[string]int{},
		listenRates: map[string]*connRate{}, changed: make(chan struct{})}
	lm.set(l)
	return lm
}

func (lm *limiter) set(l ConnLimits) {
	if l.QuotaWindowNum < 2 {
		l.QuotaWindowNum = 11
	}
	if l.QuotaWindowMs <= 0 {
		l.QuotaWindowMs = 1000
	}
	by := make(map[string]int, len(l.MaxConnectionsPerIPByAddr))
	for a, n := range l.MaxConnectionsPerIPByAddr {
		if ip := net.ParseIP(a); ip != nil {
			a = ip.String()
		}
		by[a] = n
	}
	l.MaxConnectionsPerIPByAddr = by
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.lim.QuotaWindowNum != l.QuotaWindowNum || lm.lim.QuotaWindowMs != l.QuotaWindowMs {
		lm.brokerRate, lm.listenRates = nil, map[string]*connRate{}
	}
	lm.lim = l
	lm.wakeLocked()
}

func (lm *limiter) wakeLocked() {
	close(lm.changed)
	lm.changed = make(chan struct{})
}

// protectedLocked: the inter-broker listener while more than one
// listener is served (Kafka's protectedListener).
func (lm *limiter) protectedLocked(name string) bool {
	return name == lm.lim.InterBrokerListener && len(lm.served) > 1
}

func (lm *limiter) slotLocked(name string) bool {
	if lm.byListener[name] >= lm.lim.listener(name).MaxConnections {
		return false
	}
	return lm.protectedLocked(name) || lm.total < lm.lim.MaxConnections
}

// throttleLocked records a connection on the listener's rate and, unless
// the listener is protected, the broker's, and returns the longer
// throttle.
func (lm *limiter) throttleLocked(name string, nowMs int64) int64 {
	var t int64
	if !lm.protectedLocked(name) && lm.lim.MaxConnectionCreationRate < Unlimited {
		if lm.brokerRate == nil {
			lm.brokerRate = newConnRate(lm.lim.QuotaWindowNum, nowMs)
		}
		t = lm.brokerRate.record(nowMs, lm.lim.MaxConnectionCreationRate, lm.lim.QuotaWindowMs)
	}
	if limit := lm.lim.listener(name).MaxConnectionCreationRate; limit < Unlimited {
		r := lm.listenRates[name]
		if r == nil {
			r = newConnRate(lm.lim.QuotaWindowNum, nowMs)
			lm.listenRates[name] = r
		}
		t = max(t, r.record(nowMs, limit, lm.lim.QuotaWindowMs))
	}
	return t
}

func (lm *limiter) release(name, ip string) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	lm.total--
	if lm.byIP[ip]--; lm.byIP[ip] <= 0 {
		delete(lm.byIP, ip)
	}
	if lm.byListener[name]--; lm.byListener[name] <= 0 {
		delete(lm.byListener, name)
	}
	lm.wakeLocked()
}

// serving counts a Serve loop of listener name (+1 when it starts, -1
// when it ends).
func (lm *limiter) serving(name string, d int) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.served[name] += d; lm.served[name] <= 0 {
		delete(lm.served, name)
	}
	lm.wakeLocked()
}

// connRate is a connection count's rate: Kafka's Rate over samples.
type connRate struct {
	starts []int64
	counts []float64
	cur    int
}

func newConnRate(samples int, nowMs int64) *connRate {
	r := &connRate{starts: make([]int64, samples), counts: make([]float64, samples)}
	for i := range r.starts {
		r.starts[i] = -1
	}
	r.starts[0] = nowMs
	return r
}

// record adds one connection at nowMs and returns the throttle time (0
// within limit): (rate - limit) / limit x window, at most windowMs.
func (r *connRate) record(nowMs int64, limit int, windowMs int64) int64 {
	if nowMs-r.starts[r.cur] >= windowMs {
		r.cur = (r.cur + 1) % len(r.starts)
		r.starts[r.cur], r.counts[r.cur] = nowMs, 0
	}
	r.counts[r.cur]++
	n := int64(len(r.starts))
	oldest, total := nowMs, 0.0
	for i, st := range r.starts {
		if st < 0 || nowMs-st >= n*windowMs {
			continue
		}
		total += r.counts[i]
		oldest = min(oldest, st)
	}
	elapsed := nowMs - oldest
	if full := elapsed / windowMs; full < n-1 {
		elapsed += (n - 1 - full) * windowMs
	}
	rate := total / (float64(elapsed) / 1000)
	if rate <= float64(limit) {
		return 0
	}
	if limit <= 0 {
		return windowMs
	}
	t := int64((rate - float64(limit)) / float64(limit) * float64(elapsed))
	return min(max(t, 1), windowMs)
}

// SetConnLimits changes the connection limits while the Server runs (Kafka
// applies its dynamic max.connections* keys this way): accept loops held by
// a count look again at once; one held by a rate keeps its throttle time.
// Connections already open are not closed.
func (s *Server) SetConnLimits(l ConnLimits) { s.limits.set(l) }

// ConnLimits returns the limits in force.
func (s *Server) ConnLimits() ConnLimits {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	return s.limits.lim
}

// ConnsFrom returns the number of open connections from ip.
func (s *Server) ConnsFrom(ip string) int {
	if p := net.ParseIP(ip); p != nil {
		ip = p.String()
	}
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	return s.limits.byIP[ip]
}

// ListenerConns returns the number of open connections of listener name.
func (s *Server) ListenerConns(name string) int {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	return s.limits.byListener[name]
}

// remoteIP is the address a connection is counted under.
func remoteIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// admit applies the limits to a connection just accepted on l: it waits
// out a rate throttle and a full listener or broker, then counts the
// connection, or closes it (per-IP limit, or the Server closed) and
// reports false.
func (s *Server) admit(nc net.Conn, l *Listener, ip string) bool {
	lm := s.limits
	lm.mu.Lock()
	end := s.cfg.Now().UnixMilli() + lm.throttleLocked(l.Name, s.cfg.Now().UnixMilli())
	logged := false
	for {
		remaining := end - s.cfg.Now().UnixMilli()
		if remaining <= 0 && lm.slotLocked(l.Name) {
			break
		}
		if remaining <= 0 && !logged {
			logged = true
			s.logLimit("connection limit reached; not accepting connections until one closes", l, ip,
				"max_connections", lm.lim.MaxConnections, "listener_max_connections", lm.lim.listener(l.Name).MaxConnections)
		}
		ch := lm.changed
		lm.mu.Unlock()
		var t *time.Timer
		var tc <-chan time.Time
		if remaining > 0 {
			// The server's clock decides when the throttle ends (tests
			// move it); the timer only bounds one sleep.
			t = time.NewTimer(min(time.Duration(remaining)*time.Millisecond, muteRecheck))
			tc = t.C
		}
		select {
		case <-ch:
		case <-tc:
		case <-s.done:
			nc.Close()
			return false
		}
		if t != nil {
			t.Stop()
		}
		lm.mu.Lock()
	}
	if n, limit := lm.byIP[ip], lm.lim.perIP(ip); n >= limit {
		lm.mu.Unlock()
		s.logLimit("rejected connection: the address already has its maximum of connections (max.connections.per.ip)", l, ip, "max", limit)
		nc.Close()
		return false
	}
	lm.byIP[ip]++
	lm.byListener[l.Name]++
	lm.total++
	over := 0
	if lm.protectedLocked(l.Name) {
		over = lm.total - lm.lim.MaxConnections
	}
	lm.mu.Unlock()
	if over > 0 {
		s.closeLRU(over, l.Name)
	}
	return true
}

// closeLRU closes the n least recently active connections of listeners
// other than protected (Kafka's processors close one per poll while the
// inter-broker listener holds the broker past max.connections).
func (s *Server) closeLRU(n int, protected string) {
	s.mu.Lock()
	var cand []*Conn
	for c := range s.conns {
		if c.l.Name != protected {
			cand = append(cand, c)
		}
	}
	s.mu.Unlock()
	sort.Slice(cand, func(i, j int) bool { return cand[i].active.Load() < cand[j].active.Load() })
	for _, c := range cand[:min(n, len(cand))] {
		s.logLimit("max.connections exceeded by the inter-broker listener; closing the least recently active connection", c.l, remoteIP(c.remote))
		c.Close()
	}
}

// logLimit logs a connection limit's action, rate-limited like refused
// frames.
func (s *Server) logLimit(msg string, l *Listener, ip string, args ...any) {
	ok, held := s.refused.Allow(s.cfg.Now())
	if !ok {
		return
	}
	s.log.Info("netpoll: "+msg, append([]any{"remote_ip", ip, "listener", l.Name, "similar_lines_suppressed", held}, args...)...)
}
