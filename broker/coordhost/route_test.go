package coordhost

import (
	"errors"
	"io"
	"log/slog"
	"maps"
	"sync"
	"testing"
)

func TestTopicSpec(t *testing.T) {
	base := map[string]string{"cleanup.policy": "compact"}
	cases := []struct {
		name    string
		topic   Topic
		live    int
		repl    int16
		configs map[string]string
	}{
		{"capped by live brokers", Topic{Replication: 3, Configs: base}, 2, 2, base},
		{"wanted fits", Topic{Replication: 3, Configs: base}, 5, 3, base},
		{"no live broker counts as one", Topic{Replication: 3, Configs: base}, 0, 1, base},
		{"min.insync capped by replication", Topic{Replication: 3, MinInsync: 2, Configs: base}, 1, 1,
			map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "1"}},
		{"min.insync as wanted", Topic{Replication: 3, MinInsync: 2, Configs: base}, 3, 3,
			map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "2"}},
		{"no configs", Topic{Replication: 1}, 3, 1, map[string]string{}},
		{"no replication wanted", Topic{}, 3, 1, map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.topic.Name, c.topic.Partitions = "__t", 7
			s := c.topic.Spec(c.live)
			if s.Name != "__t" || s.Partitions != 7 || s.Replication != c.repl || !maps.Equal(s.Configs, c.configs) {
				t.Fatalf("Spec(%d) = %+v, want replication %d configs %v", c.live, s, c.repl, c.configs)
			}
		})
	}
	if _, ok := base["min.insync.replicas"]; ok {
		t.Fatal("Spec wrote into the topic's own configs")
	}
}

// fakeCreator records proposals; the test finishes them.
type fakeCreator struct {
	mu    sync.Mutex
	specs []Spec
	dones []func(error)
}

func (c *fakeCreator) CreateTopic(spec Spec, done func(error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.specs = append(c.specs, spec)
	c.dones = append(c.dones, done)
}

func (c *fakeCreator) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.specs)
}

func TestCoordinator(t *testing.T) {
	cr := &fakeCreator{}
	h := New(Config{
		Topic:     Topic{Name: "__t", Partitions: 3, Replication: 3, Configs: map[string]string{"cleanup.policy": "compact"}},
		Name:      "test",
		Partition: func(key string, n int32) int32 { return int32(len(key)) % (n + 1) }, // may step outside: "ccc" with n=3
		Creator:   cr,
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	missing := &fakeView{live: 2}
	if _, ok := h.Coordinator(missing, "a"); ok {
		t.Fatal("a coordinator in a view without the topic")
	}
	if h.Ensure(missing) {
		t.Fatal("Ensure: topic reported present")
	}
	if _, ok := h.Coordinator(missing, "b"); ok {
		t.Fatal("a coordinator in a view without the topic")
	}
	if cr.count() != 1 {
		t.Fatalf("%d proposals in flight, want 1", cr.count())
	}
	if s := cr.specs[0]; s.Name != "__t" || s.Partitions != 3 || s.Replication != 2 {
		t.Fatalf("proposal %+v", s)
	}
	cr.dones[0](errors.New("controller moved")) // failed: the next request proposes again
	h.Ensure(missing)
	if cr.count() != 2 {
		t.Fatalf("%d proposals after a failed one, want 2", cr.count())
	}
	cr.dones[1](nil)

	v := &fakeView{leaders: map[string][]int32{"__t": {10, 11, 12}}, live: 3}
	if !h.Ensure(v) {
		t.Fatal("Ensure: topic reported missing")
	}
	cases := []struct {
		key    string
		leader int32
		ok     bool
	}{
		{"", 10, true},
		{"a", 11, true},
		{"bb", 12, true},
		{"ccc", -1, false}, // partition 3 of 3
	}
	for _, c := range cases {
		leader, ok := h.Coordinator(v, c.key)
		if leader != c.leader || ok != c.ok {
			t.Errorf("Coordinator(%q) = %d, %v; want %d, %v", c.key, leader, ok, c.leader, c.ok)
		}
	}
	if cr.count() != 2 {
		t.Fatalf("proposals with the topic present: %d", cr.count())
	}
}

func TestCoordinatorWithoutCreator(t *testing.T) {
	h := New(Config{Topic: Topic{Name: "__t", Partitions: 1}, Partition: func(string, int32) int32 { return 0 }})
	if h.Ensure(&fakeView{}) {
		t.Fatal("Ensure: topic reported present")
	}
	if _, ok := h.Coordinator(&fakeView{}, "k"); ok {
		t.Fatal("a coordinator without the topic")
	}
}
