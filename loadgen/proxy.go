package loadgen

// The network-partition faults (--faults partition,client-partition) run
// on loopback without privileges: loadgen puts a TCP proxy in front of
// every spawned broker. The proxy listens on a 127.0.0.1 port of its own,
// which the broker advertises (advertised.listeners) to clients and, by
// registering it with the controller, to the other brokers; it forwards to
// the broker's real listener. So every Kafka connection to a broker, a
// client's or another broker's (follower fetches, transaction markers),
// passes through that broker's proxy. The controller quorum's Raft traffic
// does not (its ports are not advertised through Kafka's metadata).
//
// A connection's origin is read from the client id in its first request's
// header: the brokers' own connections name themselves
// strata-replica-<node> and strata-txn-coordinator-<node>; anything else
// is a client. A fault blackholes connections, as a partitioned network
// drops packets: the proxy stops forwarding the bytes of the connections
// the fault covers in both directions (TCP's buffers fill and the sender
// blocks) and holds new ones after their first bytes without connecting
// them on; the peers notice only by their own timeouts. Healing lets the
// held bytes through, as TCP's retransmission would after a partition
// heals: what a peer sent before it gave up on a connection still
// arrives (Kafka's idempotent producer has to cope with exactly that).
//
//   - partition of broker B: connections from other brokers to B and from
//     B to other brokers;
//   - client-partition of broker B: connections from clients to B.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// proxyDialTimeout bounds a proxy's connection to its broker.
const proxyDialTimeout = 5 * time.Second

// originClient is the origin of a connection that is not a broker's.
const originClient = -1

// proxySet is the proxies of one spawned cluster and the partitions in
// force. Its goroutines (one accept loop per proxy, one or two per
// connection) end in close.
type proxySet struct {
	mu     sync.Mutex
	cond   *sync.Cond
	closed bool
	// cutBrokers: brokers cut off from the others (partition);
	// cutClients: brokers cut off from the clients (client-partition).
	cutBrokers map[int]bool
	cutClients map[int]bool
	// held counts the connections waiting at the gate now; heldPeak is
	// its highest value since the last resetHeld.
	held, heldPeak int
	conns          map[net.Conn]struct{}
	proxies        []*brokerProxy
	wg             sync.WaitGroup
}

// brokerProxy forwards the connections to one broker.
type brokerProxy struct {
	node     int
	ln       net.Listener
	upstream string // the broker's own listener
}

func newProxySet() *proxySet {
	s := &proxySet{cutBrokers: map[int]bool{}, cutClients: map[int]bool{}, conns: map[net.Conn]struct{}{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// add starts a proxy for broker node, forwarding to upstream, and returns
// the address it listens on (a free 127.0.0.1 port below the ephemeral
// range, see freeLoopbackAddr; the listener is kept, so nothing can take
// the port meanwhile).
func (s *proxySet) add(node int, upstream string) (string, error) {
	var ln net.Listener
	var err error
	for i := 0; i < 200; i++ {
		if ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))); err == nil {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("loadgen: proxy for broker %d: no free loopback port: %w", node, err)
	}
	p := &brokerProxy{node: node, ln: ln, upstream: upstream}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return "", errors.New("loadgen: proxy set closed")
	}
	s.proxies = append(s.proxies, p)
	s.wg.Add(1)
	s.mu.Unlock()
	go s.accept(p)
	return ln.Addr().String(), nil
}

// upstreams maps each proxy's address to its broker's own.
func (s *proxySet) upstreams() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]string, len(s.proxies))
	for _, p := range s.proxies {
		m[p.ln.Addr().String()] = p.upstream
	}
	return m
}

func (s *proxySet) accept(p *brokerProxy) {
	defer s.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !s.track(c) {
			c.Close()
			return
		}
		s.wg.Add(1)
		go s.serve(p, c)
	}
}

// track registers c so close can end it; false once the set is closed.
func (s *proxySet) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *proxySet) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

// serve forwards one client connection to p's broker.
func (s *proxySet) serve(p *brokerProxy, down net.Conn) {
	defer s.wg.Done()
	defer s.untrack(down)
	head, origin, err := readOrigin(down)
	if err != nil {
		return // closed before its first request's client id
	}
	if !s.wait(p.node, origin) {
		return
	}
	up, derr := net.DialTimeout("tcp", p.upstream, proxyDialTimeout)
	if derr != nil {
		return // the broker is down (a kill fault): the client sees a closed connection
	}
	if !s.track(up) {
		up.Close()
		return
	}
	defer s.untrack(up)
	if _, err := up.Write(head); err != nil {
		return
	}
	done := make(chan struct{})
	go func() { // owned by serve, which waits for it below
		defer close(done)
		s.pump(p.node, origin, down, up)
		down.Close()
		up.Close()
	}()
	s.pump(p.node, origin, up, down)
	down.Close()
	up.Close()
	<-done
}

// pump copies src to dst until either fails, waiting at the gate before
// each write while a fault covers the connection.
func (s *proxySet) pump(target, origin int, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !s.wait(target, origin) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// blocked reports whether a fault covers a connection from origin to
// broker target. s.mu held.
func (s *proxySet) blocked(target, origin int) bool {
	if origin == originClient {
		return s.cutClients[target]
	}
	return origin != target && (s.cutBrokers[target] || s.cutBrokers[origin])
}

// wait returns once no fault covers a connection from origin to target:
// true, or false if the set was closed meanwhile.
func (s *proxySet) wait(target, origin int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	counted := false
	for !s.closed && s.blocked(target, origin) {
		if !counted {
			counted = true
			s.held++
			s.heldPeak = max(s.heldPeak, s.held)
		}
		s.cond.Wait()
	}
	if counted {
		s.held--
	}
	return !s.closed
}

// cut starts a partition of broker node: from the other brokers
// (clients false) or from the clients (clients true).
func (s *proxySet) cut(node int, clients bool) {
	s.setCut(node, clients, true)
}

// heal ends it.
func (s *proxySet) heal(node int, clients bool) {
	s.setCut(node, clients, false)
}

func (s *proxySet) setCut(node int, clients, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.cutBrokers
	if clients {
		m = s.cutClients
	}
	if on {
		m[node] = true
	} else {
		delete(m, node)
	}
	s.cond.Broadcast()
}

// resetHeld starts counting the peak of held connections again and
// returns the peak counted so far.
func (s *proxySet) resetHeld() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.heldPeak
	s.heldPeak = s.held
	return p
}

// close stops every proxy, ends every connection and waits for the
// goroutines.
func (s *proxySet) close() {
	s.mu.Lock()
	s.closed = true
	for _, p := range s.proxies {
		p.ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
}

// Brokers' own client ids (replica/fetcher.go, broker/txnhost).
var brokerClientIDPrefixes = []string{"strata-replica-", "strata-txn-coordinator-"}

// maxPeekHeader bounds the bytes readOrigin reads: the size prefix, the
// request header's api key, version and correlation id, and a client id
// of at most 32 KiB.
const maxPeekHeader = 4 + 8 + 2 + 1<<15

// readOrigin reads the start of a connection's first request, up to the
// end of its client id, and returns the bytes read and the origin they
// name: a broker's node id, or originClient. An error comes with what was
// read before it.
func readOrigin(r io.Reader) (head []byte, origin int, err error) {
	head = make([]byte, 14, maxPeekHeader)
	n, err := io.ReadFull(r, head)
	head = head[:n]
	if err != nil {
		return head, originClient, err
	}
	size := int32(binary.BigEndian.Uint32(head))
	idLen := int16(binary.BigEndian.Uint16(head[12:]))
	if size < 10 || idLen <= 0 || int(idLen) > int(size)-10 {
		return head, originClient, nil // no client id (or not Kafka): a client
	}
	head = head[:14+int(idLen)]
	if n, err := io.ReadFull(r, head[14:]); err != nil {
		return head[:14+n], originClient, err
	}
	return head, originOf(string(head[14:])), nil
}

// originOf is the broker a client id names, or originClient.
func originOf(clientID string) int {
	for _, p := range brokerClientIDPrefixes {
		if rest, ok := strings.CutPrefix(clientID, p); ok {
			if id, err := strconv.Atoi(rest); err == nil && id >= 0 {
				return id
			}
		}
	}
	return originClient
}
