package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/stratalog/strata/engine"
)

// roleLog records what a Reconciler asks of its replica manager.
type roleLog struct {
	calls []string
}

func (r *roleLog) BecomeLeader(p PartitionRole) error {
	r.calls = append(r.calls, fmt.Sprintf("leader %s-%d epoch %d isr %v min %d", p.Topic, p.Partition, p.LeaderEpoch, p.ISR, p.MinISR))
	return nil
}

func (r *roleLog) BecomeFollower(p PartitionRole) error {
	r.calls = append(r.calls, fmt.Sprintf("follower %s-%d of %d epoch %d", p.Topic, p.Partition, p.Leader, p.LeaderEpoch))
	return nil
}

func (r *roleLog) Stop(topic string, partition int32) {
	r.calls = append(r.calls, fmt.Sprintf("stop %s-%d", topic, partition))
}

func (r *roleLog) CheckProduce(*engine.Log, int16) error          { return nil }
func (r *roleLog) WaitReplicated(*engine.Log, int64, func(error)) {}
func (r *roleLog) Close() error                                   { return nil }

// take returns the calls since the last take.
func (r *roleLog) take() []string {
	c := r.calls
	r.calls = nil
	return c
}

func viewOf(topics ...*Topic) *View {
	v := EmptyView()
	v.Brokers = []Broker{{ID: 1}, {ID: 2}, {ID: 3}}
	for _, t := range topics {
		v.Topics[t.Name] = t
		v.ByID[t.ID] = t
	}
	return v
}

// TestReconcileFollowsTheViews drives a Reconciler for broker 1 through the
// life of a topic: created with a log only where broker 1 is a replica,
// leader and follower roles by the view, a config change, a partition moved
// away (its role stopped and its log dropped), and the topic deleted.
func TestReconcileFollowsTheViews(t *testing.T) {
	eng, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	roles := &roleLog{}
	r := NewReconciler(1, eng, roles, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	id := [16]byte{7}
	topic := func(configs map[string]string, parts ...Partition) *Topic {
		return &Topic{Name: "orders", ID: id, Configs: configs, Parts: parts}
	}

	// Broker 1 leads partition 0, follows 1, and is not a replica of 2.
	v1 := viewOf(topic(map[string]string{"retention.ms": "60000", ConfigMinInsync: "2"},
		Partition{Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
		Partition{Leader: 2, LeaderEpoch: 5, Replicas: []int32{2, 1}, ISR: []int32{2, 1}},
		Partition{Leader: 3, LeaderEpoch: 1, Replicas: []int32{3, 2}, ISR: []int32{3, 2}},
	))
	if !r.Reconcile(v1) {
		t.Fatal("first reconcile failed")
	}
	et := eng.Topic("orders")
	if et == nil || et.ID() != id || et.Partitions() != 3 {
		t.Fatalf("local topic after the first view: %v", et)
	}
	if et.Partition(0) == nil || et.Partition(1) == nil || et.Partition(2) != nil {
		t.Fatalf("logs: p0 %v p1 %v p2 %v, want logs for partitions 0 and 1 only", et.Partition(0) != nil, et.Partition(1) != nil, et.Partition(2) != nil)
	}
	if got := et.Overrides(); got["retention.ms"] != "60000" || got[ConfigMinInsync] != "" {
		t.Fatalf("engine overrides %v: want retention.ms and no cluster-level key", got)
	}
	want := []string{"leader orders-0 epoch 3 isr [1 2] min 2", "follower orders-1 of 2 epoch 5"}
	if got := roles.take(); !slices.Equal(got, want) {
		t.Fatalf("roles after the first view:\n got %q\nwant %q", got, want)
	}

	// The same view again changes nothing.
	if !r.Reconcile(viewOf(v1.Topics["orders"])) {
		t.Fatal("second reconcile failed")
	}
	if got := roles.take(); len(got) != 0 {
		t.Fatalf("an unchanged view changed roles: %q", got)
	}

	// Leadership of 0 moves to broker 2, partition 1 moves to brokers 2
	// and 3 (broker 1 no longer a replica), and the retention changes.
	v2 := viewOf(topic(map[string]string{"retention.ms": "120000"},
		Partition{Leader: 2, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{2, 1}},
		Partition{Leader: 2, LeaderEpoch: 6, Replicas: []int32{2, 3}, ISR: []int32{2, 3}},
		Partition{Leader: 3, LeaderEpoch: 1, Replicas: []int32{3, 2}, ISR: []int32{3, 2}},
	))
	if !r.Reconcile(v2) {
		t.Fatal("third reconcile failed")
	}
	want = []string{"follower orders-0 of 2 epoch 4", "stop orders-1"}
	if got := roles.take(); !slices.Equal(got, want) {
		t.Fatalf("roles after the move:\n got %q\nwant %q", got, want)
	}
	if et.Partition(1) != nil {
		t.Fatal("the log of partition 1 stayed after broker 1 stopped being its replica")
	}
	if got := et.Overrides()["retention.ms"]; got != "120000" {
		t.Fatalf("retention.ms %q after the config change, want 120000", got)
	}

	// The topic is deleted; a local internal topic the controller never
	// knew stays.
	if _, err := eng.CreateTopic("__local", 1, nil); err != nil {
		t.Fatal(err)
	}
	if !r.Reconcile(viewOf()) {
		t.Fatal("fourth reconcile failed")
	}
	if eng.Topic("orders") != nil {
		t.Fatal("the topic the controller deleted is still here")
	}
	if eng.Topic("__local") == nil {
		t.Fatal("a local internal topic was deleted")
	}
	if got := roles.take(); !slices.Equal(got, []string{"stop orders-0"}) {
		t.Fatalf("roles after the deletion: %q, want [stop orders-0]", got)
	}
}

func TestMinInsync(t *testing.T) {
	for _, c := range []struct {
		v    string
		want int
	}{{"", 2}, {"3", 3}, {"0", 2}, {"x", 2}} {
		tp := &Topic{Configs: map[string]string{}}
		if c.v != "" {
			tp.Configs[ConfigMinInsync] = c.v
		}
		if got := MinInsync(tp, 2); got != c.want {
			t.Errorf("min.insync.replicas %q: %d, want %d", c.v, got, c.want)
		}
	}
}
