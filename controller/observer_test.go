package controller

import (
	"net"
	"testing"
)

// TestObserverRejoinsAtNewAddress restarts an observer with the same data
// directory on another port (a broker whose Raft listener takes any free
// port): it joins again under its new address and receives the changes made
// while it was away.
func TestObserverRejoinsAtNewAddress(t *testing.T) {
	clock := &manualClock{}
	ln0, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	voters := map[int32]string{0: ln0.Addr().String()}
	v, err := New(testConfig(0, voters, t.TempDir(), ln0, clock))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()

	dir := t.TempDir()
	startObserver := func() *Controller {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(7, voters, dir, ln, clock)
		cfg.RaftAddr = ln.Addr().String()
		o, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := startObserver()
	r := mustPropose(t, o, RegisterBroker{ID: 7, IncarnationID: NewIncarnationID(), Host: "h", Port: 1})
	if err := o.WaitApplied(testCtx(t), r.Offset); err != nil {
		t.Fatal(err)
	}
	oldAddr := o.selfAddr
	o.Close()

	// A change the observer misses while it is down.
	r = mustPropose(t, v, RegisterBroker{ID: 8, IncarnationID: NewIncarnationID(), Host: "h", Port: 2})

	o = startObserver()
	defer o.Close()
	if o.selfAddr == oldAddr {
		t.Fatalf("observer restarted on the same address %s; the test needs a new one", oldAddr)
	}
	if err := o.WaitApplied(testCtx(t), r.Offset); err != nil {
		t.Fatalf("observer at its new address did not catch up: %v", err)
	}
	if _, ok := o.State().Broker(8); !ok {
		t.Fatal("observer lacks the registration made while it was down")
	}
	// And the leader's configuration names the new address.
	f := v.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range f.Configuration().Servers {
		if s.ID == "7" {
			found = string(s.Address) == o.selfAddr
		}
	}
	if !found {
		t.Fatalf("leader's configuration %+v does not name observer 7 at %s", f.Configuration().Servers, o.selfAddr)
	}
}
