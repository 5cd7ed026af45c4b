package txnhost

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

const testWait = 10 * time.Second

// call runs Do and waits for its reply.
func call(t *testing.T, h *Host, id string, fn func(c *txn.Coordinator, nowMs int64) (txn.Step, error)) txn.Reply {
	t.Helper()
	got := make(chan txn.Reply, 1)
	h.Do(id, fn, func(r txn.Reply) { got <- r })
	select {
	case r := <-got:
		return r
	case <-time.After(testWait):
		t.Fatal("no reply")
		return txn.Reply{}
	}
}

// fixedBlocks hands out consecutive blocks of 10 ids from first.
type fixedBlocks struct{ next int64 }

func (b *fixedBlocks) AllocateBlock(context.Context) (txn.Block, error) {
	blk := txn.Block{First: b.next, Size: 10}
	b.next += 10
	return blk, nil
}

func TestHostWithoutEngineAnswersNotAvailable(t *testing.T) {
	h := New(Config{Clock: realClock{}})
	defer h.Close()
	if _, err := h.NewProducerID(); !errors.Is(err, ErrNoProducerIDs) {
		t.Fatalf("NewProducerID without a source: %v", err)
	}
	if h.Ready() || h.Route() != nil {
		t.Fatal("a host without an engine is ready")
	}
	if r := call(t, h, "x", nil); r.Err != txn.ErrorCode(kerr.CoordinatorNotAvailable.Code) {
		t.Fatalf("Do: %v", r.Err)
	}
	if code := h.View(0, func(*txn.Coordinator) { t.Fatal("viewed") }); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("View: %d", code)
	}
	if code := h.EnsureTopic(); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("EnsureTopic: %d", code)
	}
	// Without an engine, producer ids are still handed out.
	h2 := New(Config{Clock: realClock{}, ProducerIDs: &fixedBlocks{next: 500}})
	defer h2.Close()
	if id, err := h2.NewProducerID(); err != nil || id != 500 || h2.Ready() {
		t.Fatalf("NewProducerID without an engine: %d %v (ready %v)", id, err, h2.Ready())
	}
}

// TestHostSingleBroker runs a transaction on a single broker's host over a
// real engine: the topic is created on first use, the coordinator's
// writes are durable, verification answers from it, and a new host over
// the same engine replays the prepared transaction.
func TestHostSingleBroker(t *testing.T) {
	dir := t.TempDir()
	eng, err := engine.Open(engine.Options{Dir: dir, Log: engine.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.CreateTopic("in", 2, nil); err != nil {
		t.Fatal(err)
	}
	newHost := func() *Host {
		return New(Config{NodeID: 1, StatePartitions: 4, Engine: eng, Clock: realClock{}, ProducerIDs: &fixedBlocks{next: 1000},
			WhenAcked: func(l *engine.Log, last int64, done func(error)) { l.WhenDurable(last, done) }})
	}
	h := newHost()
	if !h.Ready() || h.Partitions() != 4 {
		t.Fatalf("ready %v, %d partitions", h.Ready(), h.Partitions())
	}
	if r := call(t, h, "", nil); r.Err != txn.ErrorCode(kerr.InvalidRequest.Code) {
		t.Fatalf("empty id: %v", r.Err)
	}
	newID := h.NewProducerID
	r := call(t, h, "tx", func(c *txn.Coordinator, nowMs int64) (txn.Step, error) {
		return c.InitProducerID("tx", 60000, nil, nowMs, newID)
	})
	if r.Err != txn.None || r.ProducerID != 1000 || r.ProducerEpoch != 0 {
		t.Fatalf("InitProducerID: %+v", r)
	}
	if eng.Topic(StateTopic) == nil || eng.Topic(StateTopic).Partitions() != 4 {
		t.Fatal("no __transaction_state after the first request")
	}
	pid, epoch := r.ProducerID, r.ProducerEpoch
	in0 := txn.TopicPartition{Topic: "in", Partition: 0}
	in1 := txn.TopicPartition{Topic: "in", Partition: 1}
	if r := call(t, h, "tx", func(c *txn.Coordinator, nowMs int64) (txn.Step, error) {
		return c.AddPartitions("tx", pid, epoch, []txn.TopicPartition{in0}, nowMs), nil
	}); r.Err != txn.None {
		t.Fatalf("AddPartitions: %v", r.Err)
	}
	codes := make(chan []int16, 1)
	h.PartitionsOp("tx", pid, epoch, []txn.TopicPartition{in0, in1}, false, true, false, func(c []int16) { codes <- c })
	if c := <-codes; c[0] != 0 || c[1] != kerr.TransactionAbortable.Code {
		t.Fatalf("verification codes %v", c)
	}
	h.PartitionsOp("tx", pid, epoch+1, []txn.TopicPartition{in0}, false, false, false, func(c []int16) { codes <- c })
	if c := <-codes; c[0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("verification with a wrong epoch: %v", c)
	}
	// EndTxn is answered once PrepareCommit is durable; the markers
	// wait for a listener (none here).
	if r := call(t, h, "tx", func(c *txn.Coordinator, nowMs int64) (txn.Step, error) {
		return c.EndTxn("tx", pid, epoch, true, false, nowMs, newID)
	}); r.Err != txn.None {
		t.Fatalf("EndTxn: %v", r.Err)
	}
	state := func(h *Host) txn.State {
		var md txn.Metadata
		var ok bool
		if code := h.View(h.PartitionFor("tx"), func(c *txn.Coordinator) { md, _, ok = c.Get("tx") }); code != 0 || !ok {
			t.Fatalf("View: code %d, found %v", code, ok)
		}
		return md.State
	}
	if st := state(h); st != txn.PrepareCommit {
		t.Fatalf("state %v after EndTxn, want PrepareCommit", st)
	}
	h.Close()

	// A new host replays the partition: the transaction is still being
	// committed.
	h2 := newHost()
	defer h2.Close()
	if st := state(h2); st != txn.PrepareCommit {
		t.Fatalf("state %v after reloading, want PrepareCommit", st)
	}
	// Another partition of the topic is coordinated too, empty.
	other := (h2.PartitionFor("tx") + 1) % h2.Partitions()
	if code := h2.View(other, func(c *txn.Coordinator) {
		if ids := c.IDs(); len(ids) != 0 {
			t.Errorf("ids %v in an untouched partition", ids)
		}
	}); code != 0 {
		t.Fatalf("View of partition %d: %d", other, code)
	}
}
