package loadgen

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
)

// held are the loopback addresses freeLoopbackAddr picked for nodes not
// started yet, each with the listener that keeps it taken until
// releaseAddrs, just before its node's process starts. A picked port that
// is let go at once can be picked again, by a later pick in this process
// (a cluster picks every node's quorum address before it starts the
// first node) or by another process's probe, and the node then fails to
// start with "address already in use".
var held = struct {
	sync.Mutex
	m map[string]net.Listener
}{m: map[string]net.Listener{}}

// freeLoopbackAddr returns a free loopback address for a spawned node to
// listen on, held until releaseAddrs. Its port is below Linux's default
// ephemeral range (32768-60999): a port the kernel picks for :0 can be
// handed to an outgoing connection before the node binds it.
func freeLoopbackAddr() (string, error) {
	var err error
	for i := 0; i < 200; i++ {
		var ln net.Listener
		ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err != nil {
			continue // taken (held included): try another
		}
		addr := ln.Addr().String()
		held.Lock()
		held.m[addr] = ln
		held.Unlock()
		return addr, nil
	}
	return "", fmt.Errorf("no free loopback port in 20000-31999 after 200 tries: %w", err)
}

// releaseAddrs lets go of addresses freeLoopbackAddr holds, for their
// node to bind; addresses not held ("" included) are ignored.
func releaseAddrs(addrs ...string) {
	held.Lock()
	defer held.Unlock()
	for _, a := range addrs {
		if ln, ok := held.m[a]; ok {
			ln.Close()
			delete(held.m, a)
		}
	}
}
