package loadgen

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// kafkaHead is the start of a request frame naming clientID, followed by
// body: what readOrigin reads, then bytes to echo.
func kafkaHead(clientID string, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(10+len(clientID)+len(body)))
	b = binary.BigEndian.AppendUint16(b, 18) // ApiVersions
	b = binary.BigEndian.AppendUint16(b, 3)
	b = binary.BigEndian.AppendUint32(b, 7) // correlation id
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	return append(b, body...)
}

func TestReadOrigin(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want int
	}{
		{"strata-replica-2", 2},
		{"strata-txn-coordinator-0", 0},
		{"strata-loadgen", originClient},
		{"strata-replica-x", originClient},
		{"strata-replica--1", originClient},
		{"", originClient},
	} {
		frame := kafkaHead(tc.id, []byte("rest"))
		head, origin, err := readOrigin(bytes.NewReader(frame))
		if err != nil || origin != tc.want || !bytes.Equal(head, frame[:14+len(tc.id)]) {
			t.Errorf("%q: origin %d head %q err %v; want %d", tc.id, origin, head, err, tc.want)
		}
	}
	// A client id longer than the frame claims: a client, only the fixed
	// header read.
	bad := kafkaHead("strata-replica-1", nil)
	binary.BigEndian.PutUint32(bad, 12)
	if head, origin, err := readOrigin(bytes.NewReader(bad)); err != nil || origin != originClient || len(head) != 14 {
		t.Errorf("bad length: origin %d head %d bytes err %v", origin, len(head), err)
	}
	// Closed inside the client id.
	if head, _, err := readOrigin(bytes.NewReader(kafkaHead("strata-replica-1", nil)[:20])); err == nil || len(head) != 20 {
		t.Errorf("short: head %d bytes err %v", len(head), err)
	}
}

// echoServer echoes every connection until the test ends.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// proxyConn connects to addr as clientID and checks the echo of its
// first frame.
func proxyConn(t *testing.T, addr, clientID string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	frame := kafkaHead(clientID, []byte("hello"))
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	echoed(t, c, frame)
	return c
}

func echoed(t *testing.T, c net.Conn, want []byte) {
	t.Helper()
	got := make([]byte, len(want))
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound on a hang, not a measurement
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("echo %q, %v; want %q", got, err, want)
	}
	c.SetReadDeadline(time.Time{})
}

// waitHeld waits until the set holds n connections at its gate.
func waitHeld(t *testing.T, s *proxySet, n int) {
	t.Helper()
	for i := 0; ; i++ {
		s.mu.Lock()
		h := s.held
		s.mu.Unlock()
		if h == n {
			return
		}
		if i > 1000 {
			t.Fatalf("%d connections held, want %d", h, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestProxyPartitions runs the proxies of two "brokers" (echo servers)
// and checks what each partition holds: a broker partition holds the
// other brokers' connections to and from the cut-off broker (existing and
// new ones) and no client's; a client partition holds the clients' and no
// broker's; healing delivers what was held.
func TestProxyPartitions(t *testing.T) {
	s := newProxySet()
	defer s.close()
	addr0, err := s.add(0, echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	addr1, err := s.add(1, echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	if up := s.upstreams(); len(up) != 2 || up[addr0] == "" || up[addr1] == "" {
		t.Fatalf("upstreams %v", up)
	}
	client0 := proxyConn(t, addr0, "strata-loadgen")
	repl1to0 := proxyConn(t, addr0, "strata-replica-1")
	repl0to1 := proxyConn(t, addr1, "strata-replica-0")
	self := proxyConn(t, addr0, "strata-replica-0") // a broker's connection to itself

	s.cut(0, false) // broker 0 cut off from the others
	for _, c := range []net.Conn{repl1to0, repl0to1} {
		if _, err := c.Write([]byte("during")); err != nil {
			t.Fatal(err)
		}
	}
	waitHeld(t, s, 2)
	if _, err := client0.Write([]byte("client")); err != nil {
		t.Fatal(err)
	}
	echoed(t, client0, []byte("client")) // clients still get through
	if _, err := self.Write([]byte("self")); err != nil {
		t.Fatal(err)
	}
	echoed(t, self, []byte("self"))
	// A new connection from broker 1 is held after its header.
	late, err := net.Dial("tcp", addr0)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	lateFrame := kafkaHead("strata-txn-coordinator-1", []byte("late"))
	if _, err := late.Write(lateFrame); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, s, 3)
	if p := s.resetHeld(); p != 3 {
		t.Errorf("held peak %d, want 3", p)
	}
	s.heal(0, false)
	echoed(t, repl1to0, []byte("during"))
	echoed(t, repl0to1, []byte("during"))
	echoed(t, late, lateFrame)
	waitHeld(t, s, 0)

	s.cut(0, true) // broker 0 cut off from the clients
	if _, err := client0.Write([]byte("cut")); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, s, 1)
	if _, err := repl1to0.Write([]byte("repl")); err != nil {
		t.Fatal(err)
	}
	echoed(t, repl1to0, []byte("repl")) // replication goes on
	client1 := proxyConn(t, addr1, "strata-loadgen")
	_ = client1 // another broker's clients are not cut
	s.heal(0, true)
	echoed(t, client0, []byte("cut"))

	// Closing the set ends every connection, held ones included.
	s.cut(1, true)
	if _, err := client1.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, s, 1)
	s.close()
	client1.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := client1.Read(make([]byte, 1)); err == nil {
		t.Fatal("read through a closed proxy")
	}
}

// TestProxyForwardsBothWays: a 1 MiB request and a 1 MiB answer of
// different bytes cross the proxy at once, each intact; the broker's
// close reaches the client; a broker that is down (nothing listening)
// shows the client a closed connection.
func TestProxyForwardsBothWays(t *testing.T) {
	const n = 1 << 20
	up := make([]byte, n)
	down := make([]byte, n)
	for i := range up {
		up[i], down[i] = byte(i*7), byte(i*13+1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	frame := kafkaHead("strata-loadgen", up)
	got := make(chan []byte, 1)
	go func() { // the "broker": reads the frame while answering, then closes
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		wdone := make(chan struct{})
		go func() { defer close(wdone); c.Write(down) }()
		b := make([]byte, len(frame))
		if _, err := io.ReadFull(c, b); err != nil {
			b = nil
		}
		<-wdone
		got <- b
	}()
	s := newProxySet()
	defer s.close()
	addr, err := s.add(0, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a bound on a hang, not a measurement
	wdone := make(chan error, 1)
	go func() { _, err := c.Write(frame); wdone <- err }()
	all, err := io.ReadAll(c) // until the broker's close comes through
	if err != nil || !bytes.Equal(all, down) {
		t.Fatalf("client read %d bytes (%v), want the broker's %d", len(all), err, n)
	}
	if err := <-wdone; err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, frame) {
		t.Fatalf("broker read %d bytes, want the client's %d", len(b), len(frame))
	}

	// A broker that is down: the proxy accepts, reads the header, fails
	// to connect on and closes.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	addr2, err := s.add(1, deadAddr)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := net.Dial("tcp", addr2)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c2.Write(kafkaHead("strata-loadgen", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Fatal("read a byte from a proxy whose broker is down")
	}
}
