package grouphost

import (
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/group"
)

// wallClock is the wall clock (tests only).
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Tick(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func TestHostWithoutEngine(t *testing.T) {
	h := New(Config{Clock: wallClock{}})
	defer h.Close()
	if h.Coordinator() != nil || h.Route() != nil || h.Err() == nil {
		t.Fatalf("a host without an engine has a coordinator (err %v)", h.Err())
	}
}

// TestHostSingleBrokerCommitSurvivesRestart commits an offset through a
// single broker's host over a real engine: the topic is created on the
// first write with the offsets topic's configs, the commit is answered
// once acknowledged, and a new host over the same engine loads it back.
func TestHostSingleBrokerCommitSurvivesRestart(t *testing.T) {
	eng, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	acked := 0
	newHost := func() *Host {
		return New(Config{Engine: eng, Coordinator: group.Config{OffsetsPartitions: 3, InitialRebalanceDelayMs: -1},
			WhenAcked: func(l *engine.Log, last int64, fn func(error)) { acked++; l.WhenDurable(last, fn) },
			Clock:     wallClock{}})
	}
	h := newHost()
	if h.Coordinator() == nil || h.Err() != nil {
		t.Fatalf("no coordinator: %v", h.Err())
	}
	if eng.Topic(group.OffsetsTopic) != nil {
		t.Fatal("the offsets topic exists before the first write")
	}
	tp := group.TopicPartition{Topic: "in", Partition: 0}
	done := make(chan []int16, 1)
	h.Coordinator().Commit(group.CommitRequest{Group: "g", Generation: -1,
		Offsets: []group.CommitOffset{{TP: tp, Offset: 42, LeaderEpoch: -1}}}, func(c []int16) { done <- c })
	select {
	case codes := <-done:
		if len(codes) != 1 || codes[0] != 0 {
			t.Fatalf("commit: %v", codes)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("commit not answered")
	}
	if acked == 0 {
		t.Fatal("the commit was answered without WhenAcked")
	}
	top := eng.Topic(group.OffsetsTopic)
	if top == nil || top.Partitions() != 3 || top.Overrides()["cleanup.policy"] != "compact" {
		t.Fatalf("offsets topic %v", top)
	}
	h.Close()

	h = newHost()
	defer h.Close()
	got, code := h.Coordinator().Fetch("g", []group.TopicPartition{tp})
	if code != 0 || len(got) != 1 || got[0].Offset.Offset != 42 {
		t.Fatalf("after restart: %+v code %d", got, code)
	}
}
