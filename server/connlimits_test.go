package server

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/netpoll"
	"github.com/twmb/franz-go/pkg/kgo"
)

// dialFrom makes a franz-go client connect from a local address
// (127.0.0.x: Linux routes the whole 127/8 to lo).
func dialFrom(local string) kgo.Opt {
	d := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return kgo.Dialer(d.DialContext)
}

// Connection limits (issue 20) with franz-go clients:
// max.connections.per.ip=0 with an override for 127.0.0.1 serves clients
// from 127.0.0.1; at max.connections a new client is held (its connection
// waits unaccepted, the broker logs it) until another client leaves, then
// it is served; a client from 127.0.0.2 (limited to 0) is refused and
// never counted; the counts go back to zero as clients leave.
func TestConnectionLimitsClients(t *testing.T) {
	lim := netpoll.DefaultConnLimits()
	lim.MaxConnectionsPerIP = 0
	lim.MaxConnectionsPerIPByAddr = map[string]int{"127.0.0.1": netpoll.Unlimited}
	addr, s, _ := startBroker(t, func(c *Config, _ *engine.Options) { c.ConnLimits = &lim })
	ctx := testCtx(t)
	waitLog := func(what string) {
		t.Helper()
		for !strings.Contains(logsOf(s), what) {
			select {
			case <-ctx.Done():
				t.Fatalf("the broker never logged %q", what)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	ok := newClient(t, addr, dialFrom("127.0.0.1"), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("limits"))
	if err := ok.ProduceSync(ctx, kgo.StringRecord("a")).FirstErr(); err != nil {
		t.Fatalf("client from 127.0.0.1: %v", err)
	}

	// max.connections: the open connections fill it; a new client waits.
	open := s.np.NumConns()
	lim2 := s.np.ConnLimits()
	lim2.MaxConnections = open
	s.np.SetConnLimits(lim2)
	if err := ok.ProduceSync(ctx, kgo.StringRecord("b")).FirstErr(); err != nil {
		t.Fatalf("an existing client at max.connections: %v", err)
	}
	waiting := newClient(t, addr, dialFrom("127.0.0.1"))
	pinged := make(chan error, 1)
	go func() { pinged <- waiting.Ping(ctx) }()
	waitLog("connection limit reached")
	select {
	case err := <-pinged:
		t.Fatalf("a client past max.connections was answered (%v) while the broker held its connection", err)
	default:
	}
	if n := s.np.NumConns(); n != open {
		t.Fatalf("%d connections counted at max.connections=%d", n, open)
	}
	ok.Close() // its connections close: the waiting client gets a slot
	if err := <-pinged; err != nil {
		t.Fatalf("after a client left: %v", err)
	}

	// max.connections.per.ip: 127.0.0.2 has no override, so its limit is 0.
	lim2.MaxConnections = netpoll.Unlimited
	s.np.SetConnLimits(lim2)
	refused := newClient(t, addr, dialFrom("127.0.0.2"))
	if err := refused.Ping(ctx); err == nil { // Ping tries the seed once
		t.Fatal("a client from an address limited to 0 connections was served")
	}
	waitLog("max.connections.per.ip")
	if n := s.np.ConnsFrom("127.0.0.2"); n != 0 {
		t.Fatalf("127.0.0.2 holds %d connections", n)
	}
	if err := waiting.Ping(ctx); err != nil {
		t.Fatalf("127.0.0.1 after 127.0.0.2 was refused: %v", err)
	}

	refused.Close()
	waiting.Close()
	for s.np.NumConns() != 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d connections still counted after every client left", s.np.NumConns())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if n := s.np.ConnsFrom("127.0.0.1"); n != 0 {
		t.Fatalf("127.0.0.1 still counted with %d connections", n)
	}
}
