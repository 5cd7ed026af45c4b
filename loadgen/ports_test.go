package loadgen

import (
	"net"
	"testing"
)

// TestFreeLoopbackAddrHeldUntilReleased: a picked address stays taken
// (for this process's later picks and for anyone else) until its node's
// launch releases it, then it can be bound.
func TestFreeLoopbackAddrHeldUntilReleased(t *testing.T) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseAddrs(addr) })
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("%s could be bound while held", addr)
	}
	for range 50 {
		other, err := freeLoopbackAddr()
		if err != nil {
			t.Fatal(err)
		}
		releaseAddrs(other)
		if other == addr {
			t.Fatalf("%s picked again while held", addr)
		}
	}
	releaseAddrs(addr, "")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s after release: %v", addr, err)
	}
	ln.Close()
	releaseAddrs(addr) // not held any more: ignored
}
