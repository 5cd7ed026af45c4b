package txn

import (
	"math"
	"testing"
)

var (
	tpA = TopicPartition{"a", 0}
	tpB = TopicPartition{"b", 1}
	tpC = TopicPartition{"a", 2}
)

func TestInitProducerIDErrors(t *testing.T) {
	h := newHarness(t)
	wantErr(t, "empty id", h.init("", 1000, nil), InvalidRequest)
	wantErr(t, "zero timeout", h.init("x", 0, nil), InvalidTransactionTimeout)
	wantErr(t, "timeout over max", h.init("x", DefaultMaxTimeoutMs+1, nil), InvalidTransactionTimeout)
	if len(h.c.IDs()) != 0 || len(h.log) != 0 {
		t.Fatal("a refused InitProducerId left state behind")
	}
}

func TestInitProducerIDNewAndBump(t *testing.T) {
	h := newHarness(t)
	r := h.init("x", 1000, nil)
	wantErr(t, "new", r, None)
	if r.ProducerID != 101 || r.ProducerEpoch != 0 {
		t.Fatalf("new id: %+v", r)
	}
	if md := h.md("x"); md.State != Empty || md.TimeoutMs != 1000 || len(h.log) != 1 {
		t.Fatalf("after init: %+v, %d records", md, len(h.log))
	}
	r = h.init("x", 2000, nil)
	if r.Err != None || r.ProducerID != 101 || r.ProducerEpoch != 1 {
		t.Fatalf("second init: %+v", r)
	}
	if md := h.md("x"); md.TimeoutMs != 2000 || md.LastProducerEpoch != NoProducerEpoch {
		t.Fatalf("second init: %+v", md)
	}
}

func TestInitProducerIDKIP360(t *testing.T) {
	h := newHarness(t)
	r := h.init("x", 1000, nil) // epoch 0
	cur := &ProducerIDAndEpoch{r.ProducerID, r.ProducerEpoch}
	r = h.init("x", 1000, cur)
	if r.Err != None || r.ProducerEpoch != 1 {
		t.Fatalf("bump with expected: %+v", r)
	}
	// Retry of the same call (response lost): same epoch, no bump.
	r = h.init("x", 1000, cur)
	if r.Err != None || r.ProducerEpoch != 1 {
		t.Fatalf("retry: %+v", r)
	}
	wantErr(t, "wrong producer id", h.init("x", 1000, &ProducerIDAndEpoch{999, 1}), ProducerFenced)
	// A new instance bumps to 2 and clears the last epoch: the stale
	// expected epoch 0 is now fenced.
	wantErr(t, "new instance", h.init("x", 1000, nil), None)
	wantErr(t, "stale expected", h.init("x", 1000, cur), ProducerFenced)
}

func TestInitProducerIDRotation(t *testing.T) {
	h := newHarness(t)
	md := &Metadata{TransactionalID: "x", ProducerID: 7, PrevProducerID: -1, NextProducerID: -1, ProducerEpoch: math.MaxInt16 - 1,
		LastProducerEpoch: -1, TimeoutMs: 1000, State: CompleteCommit, StartMs: 5, LastUpdateMs: h.now}
	if err := h.c.Load(EncodeKey(nil, "x"), EncodeValue(nil, md)); err != nil {
		t.Fatal(err)
	}
	exp := &ProducerIDAndEpoch{7, math.MaxInt16 - 1}
	r := h.init("x", 1000, exp)
	if r.Err != None || r.ProducerID != 101 || r.ProducerEpoch != 0 {
		t.Fatalf("rotation: %+v", r)
	}
	if got := h.md("x"); got.PrevProducerID != 7 {
		t.Fatalf("prev producer id %d", got.PrevProducerID)
	}
	r = h.init("x", 1000, exp) // retry with the old id and epoch
	if r.Err != None || r.ProducerID != 101 || r.ProducerEpoch != 0 {
		t.Fatalf("rotation retry: %+v", r)
	}
}

func TestAddPartitions(t *testing.T) {
	h := newHarness(t)
	r := h.init("x", 1000, nil)
	pid, ep := r.ProducerID, r.ProducerEpoch
	wantErr(t, "unknown id", h.add("y", pid, ep, tpA), InvalidProducerIDMapping)
	wantErr(t, "empty id", h.add("", pid, ep, tpA), InvalidRequest)
	wantErr(t, "wrong pid", h.add("x", pid+1, ep, tpA), InvalidProducerIDMapping)
	wantErr(t, "wrong epoch", h.add("x", pid, ep-1, tpA), ProducerFenced)
	wantErr(t, "future epoch", h.add("x", pid, ep+1, tpA), ProducerFenced)
	n := len(h.log)
	wantErr(t, "add", h.add("x", pid, ep, tpB, tpA), None)
	md := h.md("x")
	if md.State != Ongoing || len(md.Partitions) != 2 || md.Partitions[0] != tpA || md.StartMs != h.now || len(h.log) != n+1 {
		t.Fatalf("after add: %+v", md)
	}
	h.now += 10
	wantErr(t, "subset", h.add("x", pid, ep, tpA), None)
	if len(h.log) != n+1 {
		t.Fatal("adding known partitions wrote a record")
	}
	wantErr(t, "more", h.add("x", pid, ep, tpC), None)
	if md := h.md("x"); len(md.Partitions) != 3 || md.StartMs != h.now-10 {
		t.Fatalf("after second add: %+v", md)
	}
	// AddOffsetsToTxn is AddPartitions with the group's offsets partition.
	wantErr(t, "offsets", h.add("x", pid, ep, TopicPartition{"__consumer_offsets", 7}), None)
}

func TestVerifyPartitions(t *testing.T) {
	h := newHarness(t)
	r := h.init("x", 1000, nil)
	code, per := h.c.VerifyPartitions("x", r.ProducerID, r.ProducerEpoch, []TopicPartition{tpA})
	if code != None || per[0] != TransactionAbortable {
		t.Fatalf("verify in Empty: %d %v", code, per)
	}
	h.add("x", r.ProducerID, r.ProducerEpoch, tpA)
	code, per = h.c.VerifyPartitions("x", r.ProducerID, r.ProducerEpoch, []TopicPartition{tpA, tpB})
	if code != None || per[0] != None || per[1] != TransactionAbortable {
		t.Fatalf("verify: %d %v", code, per)
	}
	if code, _ := h.c.VerifyPartitions("x", r.ProducerID, r.ProducerEpoch-1, []TopicPartition{tpA}); code != ProducerFenced {
		t.Fatalf("stale epoch verify: %d", code)
	}
	if code, _ := h.c.VerifyPartitions("x", 5, r.ProducerEpoch, []TopicPartition{tpA}); code != InvalidProducerIDMapping {
		t.Fatalf("wrong pid verify: %d", code)
	}
	if md := h.md("x"); len(md.Partitions) != 1 {
		t.Fatal("verify changed the transaction")
	}
}

func TestEndTxnV1(t *testing.T) {
	for _, commit := range []bool{true, false} {
		h := newHarness(t)
		r := h.init("x", 1000, nil)
		pid, ep := r.ProducerID, r.ProducerEpoch
		wantErr(t, "end in Empty", h.end("x", pid, ep, commit, false), InvalidTxnState)
		h.add("x", pid, ep, tpA, tpB)
		wantErr(t, "wrong pid", h.end("x", pid+1, ep, commit, false), InvalidProducerIDMapping)
		wantErr(t, "wrong epoch", h.end("x", pid, ep+1, commit, false), ProducerFenced)
		wantErr(t, "unknown", h.end("y", pid, ep, commit, false), InvalidProducerIDMapping)
		r = h.end("x", pid, ep, commit, false)
		wantErr(t, "end", r, None)
		if len(h.markers) != 1 {
			t.Fatalf("%d marker sets", len(h.markers))
		}
		m := h.markers[0]
		if m.Commit != commit || m.ProducerID != pid || m.ProducerEpoch != ep || m.CoordinatorEpoch != 3 || len(m.Partitions) != 2 {
			t.Fatalf("markers %+v", m)
		}
		want := CompleteAbort
		if commit {
			want = CompleteCommit
		}
		if md := h.md("x"); md.State != want || len(md.Partitions) != 0 || md.ProducerEpoch != ep {
			t.Fatalf("after end: %+v", md)
		}
		wantErr(t, "retry", h.end("x", pid, ep, commit, false), None)
		wantErr(t, "opposite", h.end("x", pid, ep, !commit, false), InvalidTxnState)
		// the next transaction starts afresh
		wantErr(t, "next add", h.add("x", pid, ep, tpC), None)
		if md := h.md("x"); md.State != Ongoing || len(md.Partitions) != 1 {
			t.Fatalf("next txn: %+v", md)
		}
	}
}

func TestConcurrentTransactions(t *testing.T) {
	h := newHarness(t)
	r := h.init("x", 1000, nil)
	pid, ep := r.ProducerID, r.ProducerEpoch
	h.add("x", pid, ep, tpA)
	h.holdMarkers = true
	wantErr(t, "end", h.end("x", pid, ep, true, false), None)
	if md := h.md("x"); md.State != PrepareCommit {
		t.Fatalf("state %v", md.State)
	}
	wantErr(t, "add during prepare", h.add("x", pid, ep, tpB), ConcurrentTransactions)
	wantErr(t, "init during prepare", h.init("x", 1000, nil), ConcurrentTransactions)
	wantErr(t, "commit again", h.end("x", pid, ep, true, false), ConcurrentTransactions)
	wantErr(t, "abort during commit", h.end("x", pid, ep, false, false), InvalidTxnState)
	h.holdMarkers = false
	h.run(h.c.MarkersDone("x", h.now))
	if md := h.md("x"); md.State != CompleteCommit {
		t.Fatalf("state %v", md.State)
	}
	// A pending write refuses everything else.
	s := h.c.AddPartitions("x", pid, ep, []TopicPartition{tpB}, h.now)
	if s.Write == nil {
		t.Fatal("no write")
	}
	wantErr(t, "add while pending", h.add("x", pid, ep, tpB), ConcurrentTransactions)
	wantErr(t, "init while pending", h.init("x", 1000, nil), ConcurrentTransactions)
	h.failWrites = true
	wantErr(t, "failed write", h.c.WriteDone("x", false, h.now).Reply, NotCoordinator)
	if md := h.md("x"); md.State != CompleteCommit {
		t.Fatalf("failed write changed state to %v", md.State)
	}
}

func TestFenceOngoing(t *testing.T) {
	h := newHarness(t)
	r := h.init("x", 1000, nil)
	pid, ep := r.ProducerID, r.ProducerEpoch
	h.add("x", pid, ep, tpA)
	// A new instance of the producer: the open transaction is aborted
	// with a bumped epoch and the caller retries.
	wantErr(t, "fencing init", h.init("x", 1000, nil), ConcurrentTransactions)
	if len(h.markers) != 1 || h.markers[0].Commit || h.markers[0].ProducerEpoch != ep+1 {
		t.Fatalf("fence markers %+v", h.markers)
	}
	if md := h.md("x"); md.State != CompleteAbort || md.ProducerEpoch != ep+1 {
		t.Fatalf("after fence %+v", md)
	}
	wantErr(t, "old producer add", h.add("x", pid, ep, tpB), ProducerFenced)
	wantErr(t, "old producer commit", h.end("x", pid, ep, true, false), ProducerFenced)
	r = h.init("x", 1000, nil)
	if r.Err != None || r.ProducerEpoch != ep+2 {
		t.Fatalf("retried init %+v", r)
	}
}

func TestTimeoutAborts(t *testing.T) {
	h := newHarness(t)
	r := h.init("x", 1000, nil)
	pid, ep := r.ProducerID, r.ProducerEpoch
	h.add("x", pid, ep, tpA)
	h.now += 1000
	h.tick()
	if len(h.markers) != 0 {
		t.Fatal("aborted at the timeout, not after it")
	}
	h.now++
	h.tick()
	if len(h.markers) != 1 || h.markers[0].Commit || h.markers[0].ProducerEpoch != ep+1 {
		t.Fatalf("timeout markers %+v", h.markers)
	}
	wantErr(t, "commit after timeout", h.end("x", pid, ep, true, false), ProducerFenced)
	if md := h.md("x"); md.State != CompleteAbort {
		t.Fatalf("state %v", md.State)
	}
}

func TestTimeoutFenceWriteFails(t *testing.T) {
	h := newHarness(t)
	r := h.init("x", 1000, nil)
	h.add("x", r.ProducerID, r.ProducerEpoch, tpA)
	h.now += 2000
	h.failWrites = true
	h.tick()
	h.failWrites = false
	h.tick()
	if md := h.md("x"); md.State != CompleteAbort || md.ProducerEpoch != r.ProducerEpoch+1 {
		t.Fatalf("after retried fence: %+v (epoch must be bumped once)", md)
	}
}

func TestEndTxnV2(t *testing.T) {
	h := newHarness(t)
	r := h.init("x", 1000, nil)
	pid, ep := r.ProducerID, r.ProducerEpoch
	h.add("x", pid, ep, tpA)
	r = h.end("x", pid, ep, true, true)
	if r.Err != None || r.ProducerID != pid || r.ProducerEpoch != ep+1 {
		t.Fatalf("v5 commit: %+v", r)
	}
	if h.markers[0].ProducerEpoch != ep+1 || !h.markers[0].Commit {
		t.Fatalf("markers %+v", h.markers[0])
	}
	// retry with the old epoch: answered, nothing written
	n := len(h.log)
	if r := h.end("x", pid, ep, true, true); r.Err != None || r.ProducerEpoch != ep+1 || len(h.log) != n {
		t.Fatalf("v5 retry: %+v", r)
	}
	wantErr(t, "retry opposite", h.end("x", pid, ep, false, true), InvalidTxnState)
	wantErr(t, "commit nothing", h.end("x", pid, ep+1, true, true), InvalidTxnState)
	// next transaction with the new epoch; the old one is fenced
	wantErr(t, "old epoch add", h.add("x", pid, ep, tpA), ProducerFenced)
	wantErr(t, "add", h.add("x", pid, ep+1, tpA), None)
	wantErr(t, "stale end", h.end("x", pid, ep, false, true), ProducerFenced)
	// abort with nothing added (from Empty): epoch bump, no markers
	h2 := newHarness(t)
	r = h2.init("y", 1000, nil)
	r2 := h2.end("y", r.ProducerID, r.ProducerEpoch, false, true)
	if r2.Err != None || r2.ProducerEpoch != r.ProducerEpoch+1 || len(h2.markers) != 0 {
		t.Fatalf("empty abort: %+v, markers %v", r2, h2.markers)
	}
	if md := h2.md("y"); md.State != CompleteAbort {
		t.Fatalf("empty abort state %v", md.State)
	}
}

func TestEndTxnV2Rotation(t *testing.T) {
	h := newHarness(t)
	md := &Metadata{TransactionalID: "x", ProducerID: 7, PrevProducerID: -1, NextProducerID: -1, ProducerEpoch: math.MaxInt16 - 1,
		LastProducerEpoch: -1, TimeoutMs: 1000, State: Ongoing, Partitions: []TopicPartition{tpA}, StartMs: h.now, LastUpdateMs: h.now, TV2: true}
	if err := h.c.Load(EncodeKey(nil, "x"), EncodeValue(nil, md)); err != nil {
		t.Fatal(err)
	}
	r := h.end("x", 7, math.MaxInt16-1, true, true)
	if r.Err != None || r.ProducerID != 101 || r.ProducerEpoch != 0 {
		t.Fatalf("rotating end: %+v", r)
	}
	if m := h.markers[0]; m.ProducerID != 7 || m.ProducerEpoch != math.MaxInt16 {
		t.Fatalf("markers %+v", m)
	}
	if got := h.md("x"); got.ProducerID != 101 || got.ProducerEpoch != 0 || got.PrevProducerID != 7 || got.State != CompleteCommit {
		t.Fatalf("after rotation %+v", got)
	}
	// The client retries with the old id and the epoch it last saw bumped.
	if r := h.end("x", 7, math.MaxInt16, true, true); r.Err != None || r.ProducerID != 101 {
		t.Fatalf("overflow retry: %+v", r)
	}
}

func TestExpiration(t *testing.T) {
	h := newHarness(t)
	h.init("x", 1000, nil)
	h.now += DefaultIDExpirationMs - 1
	h.tick()
	h.md("x")
	h.now++
	h.tick()
	if _, _, ok := h.c.Get("x"); ok {
		t.Fatal("expired id still known")
	}
	if last := h.log[len(h.log)-1]; last[1] != nil {
		t.Fatal("expiration did not write a tombstone")
	}
	h.reload()
	if _, _, ok := h.c.Get("x"); ok {
		t.Fatal("tombstone not honoured on reload")
	}
}

func TestFailedFirstWriteForgetsID(t *testing.T) {
	h := newHarness(t)
	h.failWrites = true
	wantErr(t, "init", h.init("x", 1000, nil), NotCoordinator)
	if _, _, ok := h.c.Get("x"); ok {
		t.Fatal("an id whose first write failed is kept")
	}
}

func TestReloadRoundTrip(t *testing.T) {
	h := newHarness(t)
	r := h.init("a", 1000, nil)
	h.add("a", r.ProducerID, r.ProducerEpoch, tpA, tpB)
	r2 := h.init("b", 5000, nil)
	h.add("b", r2.ProducerID, r2.ProducerEpoch, tpC)
	h.end("b", r2.ProducerID, r2.ProducerEpoch, true, true)
	h.init("c", 1000, nil)
	h.holdMarkers = true
	r3 := h.init("d", 1000, nil)
	h.add("d", r3.ProducerID, r3.ProducerEpoch, tpA)
	h.end("d", r3.ProducerID, r3.ProducerEpoch, false, false) // PrepareAbort, markers unacknowledged
	before := map[string]Metadata{}
	for _, id := range h.c.IDs() {
		before[id] = h.md(id)
	}
	h.holdMarkers = false
	nm := len(h.markers)
	h.reload()
	if len(h.markers) != nm+1 || h.markers[nm].TransactionalID != "d" || h.markers[nm].Commit || h.markers[nm].CoordinatorEpoch != 4 {
		t.Fatalf("recovery did not resend d's markers with the new coordinator epoch: %+v", h.markers[nm:])
	}
	for id, want := range before {
		got := h.md(id)
		if id == "d" {
			if got.State != CompleteAbort {
				t.Fatalf("d after recovery: %v", got.State)
			}
			continue
		}
		if got.LastProducerEpoch = want.LastProducerEpoch; !got.Equal(&want) {
			t.Fatalf("%s reloaded as %+v, want %+v", id, got, want)
		}
	}
}
