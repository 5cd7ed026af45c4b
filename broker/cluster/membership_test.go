package cluster

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/controller"
)

// oneVoter starts a single-voter metadata quorum on loopback.
func oneVoter(t *testing.T) *controller.Controller {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := controller.New(controller.Config{
		NodeID: 1, Voters: map[int32]string{1: ln.Addr().String()}, DataDir: t.TempDir(), Listener: ln,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		SessionTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	return ctl
}

// TestMembershipRegistersHeartbeatsAndShutsDown joins a real quorum: no
// registration before the advertised port is known, then a registration
// with that endpoint, CaughtUp, an unfenced broker (heartbeats), and a
// controlled shutdown the controller allows (no leaderships to move).
func TestMembershipRegistersHeartbeatsAndShutsDown(t *testing.T) {
	ctl := oneVoter(t)
	var port atomic.Int32
	m := Join(MembershipConfig{NodeID: 7, Controller: ctl, Rack: "r1", HeartbeatInterval: 50 * time.Millisecond,
		Advertised: func() (string, int32) { return "127.0.0.1", port.Load() },
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer m.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Let the loop look at the unknown port a few times: nothing is
	// registered.
	time.Sleep(100 * time.Millisecond)
	if m.Epoch() != 0 {
		t.Fatalf("registered with port 0: epoch %d", m.Epoch())
	}
	port.Store(9092)
	select {
	case <-m.CaughtUp():
	case <-ctx.Done():
		t.Fatal("never caught up")
	}
	if m.Epoch() <= 0 {
		t.Fatalf("epoch %d after catching up", m.Epoch())
	}
	live := func() (controller.Broker, bool) {
		var b controller.Broker
		var ok bool
		ctl.Read(func(st *controller.State) { b, ok = st.Broker(7) })
		return b, ok
	}
	for {
		if b, ok := live(); ok && b.Live() {
			if b.Port != 9092 || b.Rack != "r1" || b.Epoch != m.Epoch() {
				t.Fatalf("registered %+v, epoch %d", b, m.Epoch())
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the broker was never unfenced")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := m.ControlledShutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if b, _ := live(); !b.ShuttingDown {
		t.Fatalf("after the controlled shutdown: %+v", b)
	}
}
