package sharehost

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/share"
	"github.com/twmb/franz-go/pkg/kerr"
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
	if _, found, _ := h.loadState(key); found {
		t.Fatal("state found before any write")
	}
	write(snap(1, 5))
	write(snap(2, 8))
	write(snap(1, 6)) // epoch 1's leader, deposed, writes late
	if s, found, _ := h.loadState(key); !found || s.StartOffset != 8 {
		t.Fatalf("loaded %+v %v, want start offset 8 (epoch 2's)", s, found)
	}
	write(snap(2, 9))
	if s, found, _ := h.loadState(key); !found || s.StartOffset != 9 {
		t.Fatalf("loaded %+v %v, want start offset 9", s, found)
	}
	write(nil)
	if s, found, _ := h.loadState(key); found {
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

// remoteCluster is a Cluster whose state partitions are read from batches
// (a broker that hosts no replica of them).
type remoteCluster struct {
	batches map[int32][]byte
	reads   int
	err     error // what ReadPartition fails with
}

func (c *remoteCluster) Leads(*engine.Topic, int32) (int32, bool) { return 1, true }
func (c *remoteCluster) StateTopic() (int32, bool)                { return 3, true }
func (c *remoteCluster) InSync(string, int32) bool                { return false }
func (c *remoteCluster) MemberGone(string, string, time.Duration) {}
func (c *remoteCluster) CreateTopic(_ string, _ map[string]string, done func(error)) {
	done(errors.New("not in this test"))
}
func (c *remoteCluster) Produce(context.Context, string, int32, []byte) error {
	return errors.New("not here")
}

func (c *remoteCluster) ReadPartitionSince(context.Context, string, int32, int64, func([]byte) error) error {
	return errors.New("not in this test")
}

func (c *remoteCluster) ReadPartition(_ context.Context, topic string, p int32, fn func([]byte) error) error {
	if topic != StateTopic {
		return errors.New("wrong topic")
	}
	c.reads++
	if c.err != nil {
		return c.err
	}
	return fn(c.batches[p])
}

// TestLoadStateFromTheLeaderWithoutAReplica: a broker whose
// __share_group_state topic hosts no log of the key's partition (more
// brokers than the topic's replicas) reads the partition at its leader.
func TestLoadStateFromTheLeaderWithoutAReplica(t *testing.T) {
	eng, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.CreateReplicaTopic(StateTopic, [16]byte{7}, 3, map[string]string{"cleanup.policy": "compact"}, nil); err != nil {
		t.Fatal(err)
	}
	k := Key{Group: "g", TopicID: [16]byte{1}, Part: 2}
	key := shareStateKey(k)
	var b record.Builder
	b.Reset(record.CodecNone, 1)
	for i, epoch := range []int32{3, 4, 3} { // the last: a deposed leader's late write
		v, err := json.Marshal(snapshot{State: share.State{StartOffset: int64(10 + i)}, LeaderEpoch: epoch})
		if err != nil {
			t.Fatal(err)
		}
		b.Add(1, key, v, nil)
	}
	batch, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := &remoteCluster{batches: map[int32][]byte{share.StatePartition(key, 3): batch}}
	h := &Host{eng: eng, log: slog.Default(), cluster: rc, ctx: context.Background()}
	s, found, _ := h.loadState(key)
	if !found || s.StartOffset != 11 || rc.reads != 1 {
		t.Fatalf("loaded %+v %v after %d remote reads, want start offset 11 (epoch 4's) after 1", s, found, rc.reads)
	}
}

// TestLoadStateFromTheLeaderWhenOutOfSync: a replica out of the state
// partition's ISR may miss acknowledged snapshots: the leader is read
// instead of it.
func TestLoadStateFromTheLeaderWhenOutOfSync(t *testing.T) {
	eng, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	st, err := eng.CreateTopic(StateTopic, 3, map[string]string{"cleanup.policy": "compact"})
	if err != nil {
		t.Fatal(err)
	}
	k := Key{Group: "g", TopicID: [16]byte{1}, Part: 2}
	key := shareStateKey(k)
	p := share.StatePartition(key, 3)
	batchOf := func(epoch int32, start int64) []byte {
		v, err := json.Marshal(snapshot{State: share.State{StartOffset: start}, LeaderEpoch: epoch})
		if err != nil {
			t.Fatal(err)
		}
		var b record.Builder
		b.Reset(record.CodecNone, 1)
		b.Add(1, key, v, nil)
		batch, err := b.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		return batch
	}
	l := st.Partition(p)
	if _, err := l.Append(batchOf(2, 99), l.LeaderEpoch()); err != nil { // the lagging replica's old snapshot
		t.Fatal(err)
	}
	rc := &remoteCluster{batches: map[int32][]byte{p: batchOf(3, 11)}}
	h := &Host{eng: eng, log: slog.Default(), cluster: rc, ctx: context.Background()}
	if s, found, _ := h.loadState(key); !found || s.StartOffset != 11 || rc.reads != 1 {
		t.Fatalf("loaded %+v %v after %d remote reads, want the leader's start offset 11", s, found, rc.reads)
	}
}

// TestUnreadableStateIsNotStartedOver: when the state partition can be
// read neither here nor at its leader, the share-partition is refused
// (LEADER_NOT_AVAILABLE, clients retry), not started over from the reset
// point, which would deliver accepted records again or skip some.
func TestUnreadableStateIsNotStartedOver(t *testing.T) {
	eng, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.CreateReplicaTopic(StateTopic, [16]byte{7}, 3, nil, nil); err != nil {
		t.Fatal(err)
	}
	jobs, err := eng.CreateTopic("jobs", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := &remoteCluster{err: errors.New("no leader")}
	h := &Host{eng: eng, log: slog.Default(), cluster: rc, ctx: context.Background(),
		parts: map[Key]*Part{}, stored: map[Key]share.State{}, configs: map[string]map[string]string{}}
	h.Load([]Key{{Group: "g", TopicID: jobs.ID(), Part: 0}}) // the handlers' read, without the lock
	var d Durable
	if sp, code := h.Partition("g", jobs, 0, &d); sp != nil || code != kerr.LeaderNotAvailable.Code {
		t.Fatalf("Partition with an unreadable state partition: %v, code %d; want none, LEADER_NOT_AVAILABLE", sp, code)
	}
	if len(h.parts) != 0 || len(d) != 0 || rc.reads == 0 {
		t.Fatalf("parts %v, writes %d, reads %d: nothing may be created", h.parts, len(d), rc.reads)
	}
}
