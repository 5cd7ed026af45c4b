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

// TestMembershipReportsOfflineDir: once OfflineDir reports the data
// directory offline, a heartbeat carries it (KIP-112) well before the next
// scheduled one, and the controller moves the broker's leadership to the
// other ISR member and takes it out of the ISR; the broker stays
// registered and unfenced, and the views list it, with its replica
// offline.
func TestMembershipReportsOfflineDir(t *testing.T) {
	ctl := oneVoter(t)
	var offline atomic.Bool
	m := Join(MembershipConfig{NodeID: 7, Controller: ctl, HeartbeatInterval: time.Hour, // only the offline poll can send a second heartbeat
		Advertised: func() (string, int32) { return "127.0.0.1", 9092 },
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		OfflineDir: offline.Load})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	select {
	case <-m.CaughtUp():
	case <-ctx.Done():
		t.Fatal("never caught up")
	}
	// With an hour's interval broker 7 sends no heartbeat that would
	// unfence it: unfence it as an operator would, and register broker 8
	// by hand.
	propose := func(c controller.Command) controller.Result {
		t.Helper()
		r, err := ctl.Propose(ctx, c)
		if err != nil || r.Code != 0 {
			t.Fatalf("%T: %v %v", c, err, r.Err())
		}
		return r
	}
	propose(controller.UnfenceBroker{ID: 7})
	propose(controller.RegisterBroker{ID: 8, IncarnationID: controller.NewIncarnationID(), Host: "127.0.0.1", Port: 9093})
	propose(controller.UnfenceBroker{ID: 8})
	propose(controller.CreateTopic{Name: "t", ID: controller.NewTopicID(), Assignment: [][]int32{{7, 8}}})

	state := func() (b7 controller.Broker, p controller.Partition) {
		ctl.Read(func(st *controller.State) {
			b7, _ = st.Broker(7)
			pp, _ := st.Partition("t", 0)
			p = *pp
		})
		return b7, p
	}
	if _, p := state(); p.Leader != 7 || len(p.ISR) != 2 {
		t.Fatalf("before: %+v", p)
	}
	offline.Store(true)
	for {
		b7, p := state()
		if p.Leader == 8 && len(p.ISR) == 1 && p.ISR[0] == 8 {
			if !b7.OfflineDir || b7.Fenced || b7.ShuttingDown {
				t.Fatalf("broker 7 after the report: %+v", b7)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("leadership never moved: %+v, broker 7 %+v", p, b7)
		case <-time.After(20 * time.Millisecond):
		}
	}
	v := BuildView(ctl)
	b, ok := v.Broker(7)
	if !ok || b.Fenced || !b.OfflineDir {
		t.Fatalf("view of broker 7: %+v %v", b, ok)
	}
	if n := v.LiveBrokers(); n != 1 {
		t.Fatalf("%d live brokers in the view, want 1 (8)", n)
	}
	vp := v.Topics["t"].Parts[0]
	if vp.Leader != 8 || len(vp.Offline) != 1 || vp.Offline[0] != 7 {
		t.Fatalf("view of t-0: %+v", vp)
	}
}
