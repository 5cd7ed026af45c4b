package server

// Transaction markers (issue 8): the coordinator's side. The writer and its
// Kafka client live in broker/txnhost (MarkerWriter, Client); this file
// gives it the leader of a partition (markerLeader: this broker through its
// own listener, noteListener) and, once every marker is written, logs the
// Complete record (txnSendMarkers: retried until it is, or the partition
// is unloaded).

import (
	"net"
	"time"

	"github.com/stratalog/strata/broker/txnhost"
	"github.com/stratalog/strata/txn"
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
func (s *Server) markerLeader(topic string, partition int32) (addr string, t txnhost.Target) {
	self := func() (string, txnhost.Target) {
		if a := s.txn.coord.selfAddr.Load(); a != nil {
			return *a, txnhost.TargetLeader
		}
		return "", txnhost.TargetRetry // not serving yet
	}
	if !s.clustered() {
		et := s.eng.Topic(topic)
		if et == nil || et.Partition(partition) == nil {
			return "", txnhost.TargetGone
		}
		return self()
	}
	v := s.cluster.view.Load()
	vt := v.topics[topic]
	if vt == nil || partition < 0 || int(partition) >= len(vt.parts) {
		return "", txnhost.TargetGone
	}
	leader := vt.parts[partition].leader
	if leader == s.cfg.NodeID {
		return self()
	}
	addr, ok := s.brokerAddr(leader)
	if !ok {
		return "", txnhost.TargetRetry
	}
	return addr, txnhost.TargetLeader
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
	if !s.txn.coord.markerWriter.Send(ctx, m, current) {
		return
	}
	// Every marker is written: log Complete*, retrying a failed write.
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

const (
	markerBackoffMin = 100 * time.Millisecond
	markerBackoffMax = 2 * time.Second
)
