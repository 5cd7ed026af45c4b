package server

import (
	"maps"
	"testing"

	"github.com/stratalog/strata/broker/coordhost"
	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// hostView hands the coordinator host exactly what the leader loops read
// before it existed: the partitions this broker leads in the view whose
// log it holds as the same topic (by id), at the view's leader epochs.
func TestHostViewLed(t *testing.T) {
	eng, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	local, err := eng.CreateTopic("__t", 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{eng: eng, cfg: Config{NodeID: 1}}
	parts := []viewPartition{
		{Leader: 1, LeaderEpoch: 4},
		{Leader: 2, LeaderEpoch: 7},
		{Leader: 1, LeaderEpoch: 2},
		{Leader: 1, LeaderEpoch: 9}, // not held locally: the local topic has 3 partitions
	}
	view := func(id [16]byte) hostView {
		return hostView{s: s, v: &clusterView{
			Topics:  map[string]*viewTopic{"__t": {Name: "__t", ID: id, Parts: parts}},
			Brokers: []viewBroker{{ID: 1}, {ID: 2, Fenced: true}, {ID: 3}},
			Changed: make(chan struct{}),
		}}
	}
	v := view(local.ID())
	if got, want := v.Led("__t"), (coordhost.Leadership{0: 4, 2: 2}); !maps.Equal(got, want) {
		t.Fatalf("Led = %v, want %v", got, want)
	}
	if got := view([16]byte{0xee}).Led("__t"); len(got) != 0 {
		t.Fatalf("Led over another incarnation of the topic = %v, want none", got)
	}
	if got := v.Led("__absent"); len(got) != 0 {
		t.Fatalf("Led of a topic not in the view = %v", got)
	}
	if n, ok := v.Partitions("__t"); n != 4 || !ok {
		t.Fatalf("Partitions = %d, %v; want 4, true", n, ok)
	}
	if _, ok := v.Partitions("__absent"); ok {
		t.Fatal("Partitions: absent topic reported present")
	}
	if l := v.Leader("__t", 1); l != 2 {
		t.Fatalf("Leader(1) = %d, want 2", l)
	}
	if l := v.Leader("__t", 4); l != -1 {
		t.Fatalf("Leader(4) = %d, want -1", l)
	}
	if n := v.LiveBrokers(); n != 2 {
		t.Fatalf("LiveBrokers = %d, want 2", n)
	}

	// coordinatorBroker answers the leader if it is registered and
	// unfenced, else COORDINATOR_NOT_AVAILABLE.
	s.cluster.view.Store(v.v)
	h := coordhost.New(coordhost.Config{
		Topic:     coordhost.Topic{Name: "__t", Partitions: 4},
		Partition: func(key string, _ int32) int32 { return int32(key[0] - '0') },
	})
	for _, c := range []struct {
		key  string
		id   int32
		code int16
	}{
		{"0", 1, 0},
		{"1", 0, kerr.CoordinatorNotAvailable.Code}, // broker 2 is fenced
		{"3", 1, 0},
		{"4", 0, kerr.CoordinatorNotAvailable.Code}, // outside the topic
	} {
		b, code := s.coordinatorBroker(h, c.key)
		if code != c.code || (code == 0 && b.ID != c.id) {
			t.Errorf("coordinatorBroker(%q) = broker %d, code %d; want %d, %d", c.key, b.ID, code, c.id, c.code)
		}
	}
	if _, code := s.coordinatorBroker(nil, "0"); code != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("coordinatorBroker without a host: code %d", code)
	}
}
