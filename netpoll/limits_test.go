package netpoll

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// serveNamed serves listeners with the given names on one Server, each on
// a fresh 127.0.0.1 port, and returns their addresses by name.
func serveNamed(tb testing.TB, cfg Config, names ...string) (*Server, map[string]string) {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger, _ = newLogger(tb)
	}
	s := NewServer(cfg, echo)
	addrs := map[string]string{}
	served := make(chan error, len(names))
	for _, n := range names {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		addrs[n] = ln.Addr().String()
		go func() { served <- s.ServeListener(ln, Listener{Name: n}) }()
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
		for range names {
			if err := <-served; err != nil {
				tb.Errorf("ServeListener returned %v after Close", err)
			}
		}
	})
	// Every Serve loop counts itself before it accepts (protected
	// listeners depend on how many are served).
	eventually(tb, "listeners served", func() bool {
		s.limits.mu.Lock()
		defer s.limits.mu.Unlock()
		return len(s.limits.served) == len(names)
	})
	return s, addrs
}

func limitsCfg(f func(l *ConnLimits)) Config {
	l := DefaultConnLimits()
	f(&l)
	return Config{Limits: &l}
}

// ping checks that c is served: a frame is echoed.
func ping(tb testing.TB, c net.Conn) {
	tb.Helper()
	writeFrame(tb, c, []byte("ping"))
	if got := readFrame(tb, c); string(got) != "ping" {
		tb.Fatalf("got %q", got)
	}
}

// notServed checks that c's frame is not answered while nothing changes
// (the connection waits in the accept loop); the frame stays queued.
func notServed(tb testing.TB, c net.Conn) {
	tb.Helper()
	writeFrame(tb, c, []byte("ping"))
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		tb.Fatalf("a connection over the limit was answered or closed: %v", err)
	}
	c.SetReadDeadline(time.Time{})
}

// dialFrom connects from a local address (127.0.0.x: Linux routes the
// whole 127/8 to lo).
func dialFrom(tb testing.TB, local, addr string) net.Conn {
	tb.Helper()
	d := net.Dialer{Timeout: ioTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// max.connections.per.ip: the connection past the limit is closed at
// once; the others keep working; a slot frees when a client leaves.
func TestMaxConnectionsPerIP(t *testing.T) {
	s, addrs := serveNamed(t, limitsCfg(func(l *ConnLimits) { l.MaxConnectionsPerIP = 2 }), "PLAINTEXT")
	addr := addrs["PLAINTEXT"]
	a, b := dial(t, addr), dial(t, addr)
	ping(t, a)
	ping(t, b)
	c := dial(t, addr)
	expectClosed(t, c)
	ping(t, a)
	ping(t, b)
	if n := s.ConnsFrom("127.0.0.1"); n != 2 {
		t.Fatalf("ConnsFrom = %d, want 2", n)
	}
	a.Close()
	eventually(t, "the count to go down", func() bool { return s.ConnsFrom("127.0.0.1") == 1 })
	ping(t, dial(t, addr))
	if n := s.NumConns(); n != 2 {
		t.Fatalf("NumConns = %d, want 2", n)
	}
}

// max.connections.per.ip=0 with an override: only the listed address
// connects, up to its own limit.
func TestMaxConnectionsPerIPOverrides(t *testing.T) {
	s, addrs := serveNamed(t, limitsCfg(func(l *ConnLimits) {
		l.MaxConnectionsPerIP = 0
		l.MaxConnectionsPerIPByAddr = map[string]int{"127.0.0.1": 1}
	}), "PLAINTEXT")
	addr := addrs["PLAINTEXT"]
	expectClosed(t, dialFrom(t, "127.0.0.2", addr))
	a := dialFrom(t, "127.0.0.1", addr)
	ping(t, a)
	expectClosed(t, dialFrom(t, "127.0.0.1", addr))
	ping(t, a)
	if s.ConnsFrom("127.0.0.2") != 0 || s.ConnsFrom("127.0.0.1") != 1 {
		t.Fatalf("counts: 127.0.0.1 %d, 127.0.0.2 %d", s.ConnsFrom("127.0.0.1"), s.ConnsFrom("127.0.0.2"))
	}
	// Dynamic: raising the default lets 127.0.0.2 in.
	lim := s.ConnLimits()
	lim.MaxConnectionsPerIP = 5
	s.SetConnLimits(lim)
	ping(t, dialFrom(t, "127.0.0.2", addr))
}

// max.connections: the accept loop waits (the connection is not served)
// until a connection closes; then the waiting one is served.
func TestMaxConnections(t *testing.T) {
	s, addrs := serveNamed(t, limitsCfg(func(l *ConnLimits) { l.MaxConnections = 2 }), "PLAINTEXT")
	addr := addrs["PLAINTEXT"]
	a, b := dial(t, addr), dial(t, addr)
	ping(t, a)
	ping(t, b)
	c := dial(t, addr)
	notServed(t, c)
	ping(t, a) // existing clients keep working
	a.Close()
	if got := readFrame(t, c); string(got) != "ping" {
		t.Fatalf("got %q", got)
	}
	if n := s.ListenerConns("PLAINTEXT"); n != 2 {
		t.Fatalf("ListenerConns = %d, want 2", n)
	}

	// Raising the limit at runtime lets a waiting connection in.
	d := dial(t, addr)
	notServed(t, d)
	lim := s.ConnLimits()
	lim.MaxConnections = 3
	s.SetConnLimits(lim)
	if got := readFrame(t, d); string(got) != "ping" {
		t.Fatalf("got %q", got)
	}
}

// listener.name.<l>.max.connections holds that listener only.
func TestListenerMaxConnections(t *testing.T) {
	_, addrs := serveNamed(t, limitsCfg(func(l *ConnLimits) {
		l.Listeners = map[string]ListenerLimits{"EXTERNAL": {MaxConnections: 1, MaxConnectionCreationRate: Unlimited}}
	}), "EXTERNAL", "INTERNAL")
	a := dial(t, addrs["EXTERNAL"])
	ping(t, a)
	b := dial(t, addrs["EXTERNAL"])
	notServed(t, b)
	ping(t, dial(t, addrs["INTERNAL"]))
	ping(t, dial(t, addrs["INTERNAL"]))
	a.Close()
	if got := readFrame(t, b); string(got) != "ping" {
		t.Fatalf("got %q", got)
	}
}

// The inter-broker listener is not held by max.connections when another
// listener is served: it takes the connection and the least recently
// active connection of another listener is closed.
func TestInterBrokerListenerProtected(t *testing.T) {
	var nowNs atomic.Int64
	nowNs.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	cfg := limitsCfg(func(l *ConnLimits) {
		l.MaxConnections = 2
		l.InterBrokerListener = "INTERNAL"
	})
	cfg.Now = func() time.Time { return time.Unix(0, nowNs.Load()) }
	s, addrs := serveNamed(t, cfg, "EXTERNAL", "INTERNAL")
	old := dial(t, addrs["EXTERNAL"])
	ping(t, old)
	nowNs.Add(int64(time.Second))
	recent := dial(t, addrs["EXTERNAL"])
	ping(t, recent)
	nowNs.Add(int64(time.Second))
	broker := dial(t, addrs["INTERNAL"])
	ping(t, broker)
	expectClosed(t, old)
	ping(t, recent)
	ping(t, broker)
	eventually(t, "the count to go down", func() bool { return s.NumConns() == 2 })
}

// max.connection.creation.rate: a connection past the rate is held for
// its throttle time by the server's clock, then served.
func TestMaxConnectionCreationRate(t *testing.T) {
	var nowNs atomic.Int64
	nowNs.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	cfg := limitsCfg(func(l *ConnLimits) {
		l.MaxConnectionCreationRate = 1
		l.QuotaWindowNum = 2 // the rate counts over at least one 1 s window
	})
	cfg.Now = func() time.Time { return time.Unix(0, nowNs.Load()) }
	_, addrs := serveNamed(t, cfg, "PLAINTEXT")
	a := dial(t, addrs["PLAINTEXT"])
	ping(t, a)
	b := dial(t, addrs["PLAINTEXT"]) // 2 connections in 1 s: held 1 s
	notServed(t, b)
	ping(t, a)
	nowNs.Add(int64(1500 * time.Millisecond))
	if got := readFrame(t, b); string(got) != "ping" {
		t.Fatalf("got %q", got)
	}
}

// The rate and its throttle: Kafka's Rate over samples, the throttle
// (rate - limit) / limit x window, at most one window.
func TestConnRate(t *testing.T) {
	r := newConnRate(11, 0)
	// 10 connections at t=0 over the minimum 10 s window: 1/s.
	for i := range 10 {
		if th := r.record(0, 1, 1000); th != 0 {
			t.Fatalf("connection %d throttled %d ms", i+1, th)
		}
	}
	// The 11th: 1.1/s, (1.1-1)/1 x 10 s = 1000 ms.
	if th := r.record(0, 1, 1000); th != 1000 {
		t.Fatalf("throttle %d, want 1000", th)
	}
	// A window later, 12 connections over 10 s are within 5/s.
	if th := r.record(1000, 5, 1000); th != 0 {
		t.Fatalf("throttle %d, want 0", th)
	}
	// Past the samples the old windows no longer count.
	r2 := newConnRate(2, 0)
	r2.record(0, 1, 1000)
	// 2 over 1.5 s (500 ms elapsed plus the one full window counted):
	// (1.33-1)/1 x 1500 ms.
	if th := r2.record(500, 1, 1000); th != 499 {
		t.Fatalf("throttle %d, want 499", th)
	}
	if th := r2.record(5000, 1, 1000); th != 0 {
		t.Fatalf("throttle %d after the windows expired", th)
	}
	// A limit of 0 holds every connection a whole window.
	if th := newConnRate(11, 0).record(0, 0, 1000); th != 1000 {
		t.Fatalf("limit 0: throttle %d", th)
	}
}
