package server

// Transaction markers (issue 8): the coordinator's WriteTxnMarkers client.
//
// When a transaction is prepared (EndTxn, a fence, a timeout, or Recover
// after a coordinator moved), txnSendMarkers writes its COMMIT or ABORT
// marker into every partition of the transaction by sending
// WriteTxnMarkersRequest v1 to each partition's leader over the Kafka
// protocol — to this broker too, through the same path (dialing its own
// listener, noteListener), so the partition side (27_write_txn_markers.go)
// has one entry point. Partitions are grouped
// by leader, one request per leader per round; a partition is retried
// (backoff 100 ms doubling to 2 s) until its leader answers NONE, or its
// topic no longer exists. TRANSACTION_COORDINATOR_FENCED or
// INVALID_PRODUCER_EPOCH mean a newer coordinator owns the transaction:
// sending stops and the transaction is left to it, as Kafka's
// TransactionMarkerRequestCompletionHandler does. Once every partition is
// done, MarkersDone's Complete record is written (retried until it is, or
// the partition is unloaded).
//
// brokerClient keeps idle connections per address (at most
// maxIdleMarkerConns each); a request takes one (or dials), writes one
// frame, reads one response frame (bounded by maxMarkerResponseBytes
// before allocating) and gives the connection back; any error closes it.

import (
	"context"
	"errors"
	"fmt"
	"github.com/stratalog/strata/netpoll"
	"net"
	"sync"
	"time"

	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	writeTxnMarkersVersion = 1
	maxIdleMarkerConns     = 4
	maxMarkerResponseBytes = 16 << 20
	markerRequestTimeout   = 30 * time.Second
	markerBackoffMin       = 100 * time.Millisecond
	markerBackoffMax       = 2 * time.Second
)

// brokerClient sends requests to brokers for the coordinator.
type brokerClient struct {
	fmtr *kmsg.RequestFormatter
	// dial is ClusterConfig.Dial (the inter-broker listener, TLS if SSL);
	// nil: plain TCP.
	dial func(ctx context.Context, addr string) (net.Conn, error)

	mu     sync.Mutex
	idle   map[string][]net.Conn
	corr   int32
	closed bool
}

func (b *brokerClient) init(clientID string) {
	b.fmtr = kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	b.idle = map[string][]net.Conn{}
}

func (b *brokerClient) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, cs := range b.idle {
		for _, c := range cs {
			c.Close()
		}
	}
	b.idle = map[string][]net.Conn{}
}

// get returns a connection to addr (pooled: an idle one, unless fresh)
// and a correlation id.
func (b *brokerClient) get(ctx context.Context, addr string, fresh bool) (c net.Conn, corr int32, pooled bool, err error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, 0, false, errors.New("server: closing")
	}
	b.corr++
	corr = b.corr
	if cs := b.idle[addr]; len(cs) > 0 && !fresh {
		c = cs[len(cs)-1]
		b.idle[addr] = cs[:len(cs)-1]
		b.mu.Unlock()
		return c, corr, true, nil
	}
	b.mu.Unlock()
	if b.dial != nil {
		c, err = b.dial(ctx, addr)
	} else {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	return c, corr, false, err
}

func (b *brokerClient) put(addr string, c net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(b.idle[addr]) >= maxIdleMarkerConns {
		c.Close()
		return
	}
	b.idle[addr] = append(b.idle[addr], c)
}

// roundTrip sends req to addr and decodes the answer into resp. A pooled
// connection that fails (the peer closed it while idle) is retried once on
// a new one; the requests sent this way (markers, verification) are safe
// to repeat.
func (b *brokerClient) roundTrip(ctx context.Context, addr string, req kmsg.Request, resp kmsg.Response) error {
	err := b.roundTripOnce(ctx, addr, req, resp, false)
	var pe *pooledConnError
	if errors.As(err, &pe) && ctx.Err() == nil {
		err = b.roundTripOnce(ctx, addr, req, resp, true)
	}
	if errors.As(err, &pe) {
		err = pe.err
	}
	return err
}

// pooledConnError is the failure of a request on a pooled connection.
type pooledConnError struct{ err error }

func (e *pooledConnError) Error() string { return e.err.Error() }
func (e *pooledConnError) Unwrap() error { return e.err }

func (b *brokerClient) roundTripOnce(ctx context.Context, addr string, req kmsg.Request, resp kmsg.Response, fresh bool) (err error) {
	c, corr, pooled, err := b.get(ctx, addr, fresh)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && pooled {
			err = &pooledConnError{err}
		}
	}()
	deadline := time.Now().Add(markerRequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	frame := b.fmtr.AppendRequest(nil, req, corr)
	if _, err := c.Write(frame); err != nil {
		c.Close()
		return err
	}
	body, err := netpoll.ReadFrame(c, maxMarkerResponseBytes, nil)
	if err != nil {
		c.Close()
		return err
	}
	// ApiVersions answers with response header v0 at every version (KIP-511).
	rest, gotCorr, err := netpoll.SplitResponseHeader(body, resp.IsFlexible() && resp.Key() != apiVersionsKey)
	if err != nil || gotCorr != corr {
		c.Close()
		if err == nil {
			err = fmt.Errorf("server: response correlation id %d, expected %d", gotCorr, corr)
		}
		return err
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(rest); err != nil {
		c.Close()
		return err
	}
	if stop() {
		c.SetDeadline(time.Time{})
		b.put(addr, c)
	} else {
		c.Close()
	}
	return nil
}

// markerTarget says where a partition's marker goes.
type markerTarget int8

const (
	targetLeader markerTarget = iota // addr is the leader
	targetRetry                      // no leader now: retry later
	targetGone                       // the topic or partition no longer exists: done
)

// noteListener records the address markers to this broker are sent to: the
// listener itself (a wildcard address as loopback), not the advertised
// address, which need not be reachable from inside (NAT, containers).
func (s *Server) noteListener(ln net.Listener) {
	host, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	addr := net.JoinHostPort(host, port)
	s.txn.coord.selfAddr.CompareAndSwap(nil, &addr)
}

// markerLeader finds the leader of topic/partition.
func (s *Server) markerLeader(topic string, partition int32) (addr string, t markerTarget) {
	self := func() (string, markerTarget) {
		if a := s.txn.coord.selfAddr.Load(); a != nil {
			return *a, targetLeader
		}
		return "", targetRetry // not serving yet
	}
	if !s.clustered() {
		et := s.eng.Topic(topic)
		if et == nil || et.Partition(partition) == nil {
			return "", targetGone
		}
		return self()
	}
	v := s.cluster.view.Load()
	vt := v.topics[topic]
	if vt == nil || partition < 0 || int(partition) >= len(vt.parts) {
		return "", targetGone
	}
	leader := vt.parts[partition].leader
	if leader == s.cfg.NodeID {
		return self()
	}
	addr, ok := s.brokerAddr(leader)
	if !ok {
		return "", targetRetry
	}
	return addr, targetLeader
}

// txnSendMarkers writes m's markers (on a coordinator goroutine), then
// completes the transaction. It gives up when tp is unloaded or reloaded
// (the next coordinator recovers the transaction) or the server closes.
func (s *Server) txnSendMarkers(tp *txnPart, gen uint64, m txn.Markers) {
	ctx := s.txn.coord.ctx
	current := func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return tp.gen == gen && tp.state == txnLoaded
	}
	if gate := s.txn.coord.markerGate.Load(); gate != nil {
		select {
		case <-*gate:
		case <-ctx.Done():
			return
		}
	}
	left := m.Partitions
	backoff := markerBackoffMin
	wait := func() bool {
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(2*backoff, markerBackoffMax)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return current()
		}
	}
	for len(left) > 0 {
		if !current() {
			return
		}
		byAddr := map[string][]txn.TopicPartition{}
		var retry []txn.TopicPartition
		for _, p := range left {
			addr, t := s.markerLeader(p.Topic, p.Partition)
			switch t {
			case targetLeader:
				byAddr[addr] = append(byAddr[addr], p)
			case targetRetry:
				retry = append(retry, p)
			}
		}
		var fenced bool
		for addr, parts := range byAddr {
			failed, stop := s.sendMarkerRequest(ctx, addr, m, parts)
			retry = append(retry, failed...)
			fenced = fenced || stop
		}
		if fenced {
			s.log.Warn("txn: a newer coordinator or producer epoch owns the transaction; stopped writing its markers",
				"transactional_id", m.TransactionalID, "producer_id", m.ProducerID, "producer_epoch", m.ProducerEpoch)
			return
		}
		left = retry
		if len(left) > 0 && !wait() {
			return
		}
	}
	// Every marker is written: log Complete*, retrying a failed write.
	backoff = markerBackoffMin
	for {
		tp.mu.Lock()
		if tp.gen != gen || tp.state != txnLoaded {
			tp.mu.Unlock()
			return
		}
		st := tp.coord.MarkersDone(m.TransactionalID, s.now().UnixMilli())
		tp.mu.Unlock()
		if st.Write == nil {
			return
		}
		okc := make(chan bool, 1)
		s.txnWrite(tp, gen, st.Write, func(ok bool) { okc <- ok })
		var ok bool
		select {
		case ok = <-okc:
		case <-ctx.Done():
			return
		}
		tp.mu.Lock()
		if tp.gen != gen || tp.state != txnLoaded {
			tp.mu.Unlock()
			return
		}
		tp.coord.WriteDone(m.TransactionalID, ok, s.now().UnixMilli())
		tp.mu.Unlock()
		if ok || !wait() {
			return
		}
	}
}

// sendMarkerRequest sends m for parts to the leader at addr; it returns the
// partitions to retry, and stop when the coordinator is fenced.
func (s *Server) sendMarkerRequest(ctx context.Context, addr string, m txn.Markers, parts []txn.TopicPartition) (retry []txn.TopicPartition, stop bool) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = writeTxnMarkersVersion
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	for _, p := range parts { // sorted by topic (txn.Metadata.Partitions order)
		if n := len(mk.Topics); n == 0 || mk.Topics[n-1].Topic != p.Topic {
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = p.Topic
			mk.Topics = append(mk.Topics, t)
		}
		t := &mk.Topics[len(mk.Topics)-1]
		t.Partitions = append(t.Partitions, p.Partition)
	}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{mk}
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	if err := s.txn.coord.markers.roundTrip(ctx, addr, req, resp); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("txn: sending transaction markers failed; retrying", "broker", addr, "transactional_id", m.TransactionalID, "err", err)
		}
		return parts, false
	}
	got := map[txn.TopicPartition]int16{}
	for _, rm := range resp.Markers {
		if rm.ProducerID != m.ProducerID {
			continue
		}
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				got[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.ErrorCode
			}
		}
	}
	for _, p := range parts {
		code, ok := got[p]
		switch {
		case !ok:
			retry = append(retry, p)
		case code == 0:
		case code == kerr.TransactionCoordinatorFenced.Code || code == kerr.InvalidProducerEpoch.Code:
			stop = true
		case code == kerr.UnknownTopicOrPartition.Code:
			if _, t := s.markerLeader(p.Topic, p.Partition); t != targetGone {
				retry = append(retry, p)
			}
		case code == kerr.UnsupportedForMessageFormat.Code || code == kerr.UnsupportedVersion.Code:
			s.log.Error("txn: a partition cannot take transaction markers; skipped", "topic", p.Topic, "partition", p.Partition,
				"err", kerr.ErrorForCode(code))
		default:
			retry = append(retry, p)
		}
	}
	return retry, stop
}
