package sharehost

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/share"
)

// TestLoadStateSkipsDeposedLeadersWrites: a new leader loads the last
// state of the highest leader epoch from its replica of
// __share_group_state; a record of an older epoch that landed after (a
// deposed leader's late write) is not loaded, a tombstone deletes.
func TestLoadStateSkipsDeposedLeadersWrites(t *testing.T) {
	eng, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	st, err := eng.CreateTopic(StateTopic, 3, map[string]string{"cleanup.policy": "compact"})
	if err != nil {
		t.Fatal(err)
	}
	h := &Host{eng: eng, log: slog.Default()}
	k := Key{Group: "g", TopicID: [16]byte{1}, Part: 0}
	key := shareStateKey(k)
	l := st.Partition(share.StatePartition(key, 3))
	write := func(value []byte) {
		var b record.Builder
		b.Reset(record.CodecNone, 1)
		b.Add(1, key, value, nil)
		batch, err := b.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(batch, l.LeaderEpoch()); err != nil {
			t.Fatal(err)
		}
	}
	snap := func(epoch int32, start int64) []byte {
		v, err := json.Marshal(snapshot{State: share.State{StartOffset: start}, LeaderEpoch: epoch})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if _, found := h.loadState(key); found {
		t.Fatal("state found before any write")
	}
	write(snap(1, 5))
	write(snap(2, 8))
	write(snap(1, 6)) // epoch 1's leader, deposed, writes late
	if s, found := h.loadState(key); !found || s.StartOffset != 8 {
		t.Fatalf("loaded %+v %v, want start offset 8 (epoch 2's)", s, found)
	}
	write(snap(2, 9))
	if s, found := h.loadState(key); !found || s.StartOffset != 9 {
		t.Fatalf("loaded %+v %v, want start offset 9", s, found)
	}
	write(nil)
	if s, found := h.loadState(key); found {
		t.Fatalf("loaded %+v after a tombstone", s)
	}
}

// TestWriterAfterCloseFailsAtOnce: a state record queued once the writer
// has stopped fails at once (a handler waiting for it is answered instead
// of hanging the broker's shutdown), as does what was queued before.
func TestWriterAfterCloseFailsAtOnce(t *testing.T) {
	h := &Host{log: slog.Default()}
	h.w.kick, h.w.done = make(chan struct{}, 1), make(chan struct{})
	stop := make(chan struct{})
	close(stop)
	h.writeLoop(stop) // returns at once: stop is closed
	got := make(chan error, 1)
	h.WaitDurable(Durable{h.enqueue([]byte("k"), []byte("v"))}, func(err error) { got <- err })
	select {
	case err := <-got:
		if err != errClosed {
			t.Fatalf("a record queued after the writer stopped: %v, want %v", err, errClosed)
		}
	default:
		t.Fatal("a record queued after the writer stopped is still waiting")
	}
}
