package controller

import (
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestMuxCloseWaitsForRaftHandlers: Close closes Raft's accepted
// connections and returns only after the transport's handler has closed
// its connection, so the node's stores can be closed after it. (The
// handler may be in Raft's heartbeat fast path, which writes the stable
// store; a store closed under it panicked Raft in CI.)
func TestMuxCloseWaitsForRaftHandlers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := newMux(ln, ln.Addr(), func(c net.Conn) { c.Close() }, peerSecurity{}, slog.New(slog.DiscardHandler))
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	defer peer.Close()
	if _, err := peer.Write([]byte{0}); err != nil { // rpcAppendEntries: a Raft connection
		m.Close()
		t.Fatal(err)
	}
	conn, err := m.Accept()
	if err != nil {
		m.Close()
		t.Fatal(err)
	}

	// The handler: reads until its connection fails, then finishes its
	// command (until release) and closes the connection, as Raft's
	// NetworkTransport.handleConn does.
	readFailed, release := make(chan struct{}), make(chan struct{})
	var handlerDone atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, conn)
		close(readFailed)
		<-release
		handlerDone.Store(true)
		conn.Close()
	}()

	closed := make(chan struct{})
	go func() { m.Close(); close(closed) }()
	select {
	case <-readFailed:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("mux.Close did not close the Raft connection it had accepted")
	}
	select {
	case <-closed:
		close(release)
		t.Fatal("mux.Close returned while a Raft connection's handler was still running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("mux.Close did not return after the handler closed its connection")
	}
	if !handlerDone.Load() {
		t.Fatal("mux.Close returned before the handler finished")
	}
}
