package group

import (
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// memTxnLog is memLog with transactional batches and markers: what the
// server's offsetsLog gives the coordinator over the engine.
type memTxnLog struct {
	mu    sync.Mutex
	parts map[int32][]LoadedRecord
	fail  error
}

func (m *memTxnLog) add(p int32, r LoadedRecord) {
	if m.parts == nil {
		m.parts = map[int32][]LoadedRecord{}
	}
	m.parts[p] = append(m.parts[p], r)
}

func (m *memTxnLog) Append(p int32, recs []Record, done func(error)) {
	m.mu.Lock()
	for _, r := range recs {
		m.add(p, LoadedRecord{Key: r.Key, Value: r.Value, ProducerID: -1})
	}
	m.mu.Unlock()
	done(nil)
}

func (m *memTxnLog) AppendTxn(p int32, pid int64, _ int16, recs []Record, done func(error)) {
	m.mu.Lock()
	err := m.fail
	if err == nil {
		for _, r := range recs {
			m.add(p, LoadedRecord{Key: r.Key, Value: r.Value, ProducerID: pid, Transactional: true})
		}
	}
	m.mu.Unlock()
	done(err)
}

// marker appends a marker as the WriteTxnMarkers handler would.
func (m *memTxnLog) marker(p int32, pid int64, commit bool) {
	mk := AbortMarker
	if commit {
		mk = CommitMarker
	}
	m.mu.Lock()
	m.add(p, LoadedRecord{ProducerID: pid, Transactional: true, Marker: mk})
	m.mu.Unlock()
}

func (m *memTxnLog) Load(int32, func(key, value []byte) error) error {
	panic("a TxnLog is loaded with LoadTxn")
}

func (m *memTxnLog) LoadTxn(p int32, fn func(LoadedRecord) error) error {
	m.mu.Lock()
	recs := append([]LoadedRecord(nil), m.parts[p]...)
	m.mu.Unlock()
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func fetchOne(t *testing.T, c *Coordinator, group string, tp TopicPartition) int64 {
	t.Helper()
	got, code := c.Fetch(group, []TopicPartition{tp})
	if code != 0 {
		t.Fatalf("fetch %s: code %d", group, code)
	}
	return got[0].Offset.Offset
}

func TestTxnOffsetCommitStagedUntilMarker(t *testing.T) {
	log := &memTxnLog{}
	c := newTestCoordinator(t, log)
	tp := TopicPartition{"in", 0}
	p := c.PartitionFor("g")
	commit := func(pid int64, off int64) []int16 {
		var codes []int16
		c.TxnCommit(TxnCommitRequest{Group: "g", ProducerID: pid, ProducerEpoch: 0, Generation: -1,
			Offsets: []CommitOffset{{TP: tp, Offset: off, LeaderEpoch: -1}}}, func(cs []int16) { codes = cs })
		return codes
	}

	// A plain commit, then a transactional one: fetch keeps answering the
	// plain one until the commit marker.
	var codes []int16
	c.Commit(CommitRequest{Group: "g", Generation: -1, Offsets: []CommitOffset{{TP: tp, Offset: 5}}}, func(cs []int16) { codes = cs })
	if codes[0] != 0 {
		t.Fatalf("plain commit: %v", codes)
	}
	if codes := commit(1000, 10); codes[0] != 0 {
		t.Fatalf("txn commit: %v", codes)
	}
	if got := fetchOne(t, c, "g", tp); got != 5 {
		t.Fatalf("before the marker: offset %d, want 5", got)
	}
	if !c.HasPendingTxnOffsets("g", tp) {
		t.Fatal("no pending transactional offset reported")
	}
	log.marker(p, 1000, true)
	c.CompleteTxn(p, 1000, true)
	if got := fetchOne(t, c, "g", tp); got != 10 {
		t.Fatalf("after COMMIT: offset %d, want 10", got)
	}

	// An aborted transaction leaves the offset alone.
	commit(1001, 20)
	log.marker(p, 1001, false)
	c.CompleteTxn(p, 1001, false)
	if got := fetchOne(t, c, "g", tp); got != 10 || c.HasPendingTxnOffsets("g", tp) {
		t.Fatalf("after ABORT: offset %d (pending %v), want 10", got, c.HasPendingTxnOffsets("g", tp))
	}

	// A transaction left open (no marker yet) stays staged across a
	// reload, and its marker applies it afterwards.
	commit(1002, 30)
	commit(1003, 40)
	log.marker(p, 1003, false)
	c2 := newTestCoordinator(t, log)
	if got := fetchOne(t, c2, "g", tp); got != 10 {
		t.Fatalf("reloaded: offset %d, want 10", got)
	}
	if pids := c2.PendingTxnProducers("g"); len(pids) != 1 || pids[0] != 1002 {
		t.Fatalf("reloaded pending producers %v, want [1002]", pids)
	}
	c2.CompleteTxn(p, 1002, true)
	if got := fetchOne(t, c2, "g", tp); got != 30 {
		t.Fatalf("reloaded then committed: offset %d, want 30", got)
	}
	// The log replay of the committed marker gives the same answer.
	log.marker(p, 1002, true)
	c3 := newTestCoordinator(t, log)
	if got := fetchOne(t, c3, "g", tp); got != 30 || len(c3.PendingTxnProducers("g")) != 0 {
		t.Fatalf("second reload: offset %d pending %v, want 30 and none", got, c3.PendingTxnProducers("g"))
	}

	// A failed append stages nothing.
	log.mu.Lock()
	log.fail = kerr.NotEnoughReplicas
	log.mu.Unlock()
	if codes := commit(1004, 50); codes[0] != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("failed append answered %v", codes)
	}
	if pids := c3.PendingTxnProducers("g"); len(pids) != 0 {
		t.Fatalf("a failed append left staged offsets of %v", pids)
	}
}

func TestTxnOffsetCommitMemberChecks(t *testing.T) {
	c := newTestCoordinator(t, &memTxnLog{})
	var jr JoinResult
	c.Join(JoinRequest{Group: "m", ProtocolType: "consumer", SessionTimeoutMs: 60000, RebalanceTimeoutMs: 60000,
		Protocols: []Protocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}}, func(r JoinResult) { jr = r })
	if jr.Err != 0 {
		t.Fatalf("join: %+v", jr)
	}
	tp := TopicPartition{"in", 0}
	for _, tc := range []struct {
		gen    int32
		member string
		want   int16
	}{
		{jr.Generation, jr.MemberID, 0},
		{-1, "", 0}, // v0-v2: nothing to check
		{jr.Generation, "nobody", kerr.UnknownMemberID.Code},
		{jr.Generation + 1, jr.MemberID, kerr.IllegalGeneration.Code},
	} {
		var codes []int16
		c.TxnCommit(TxnCommitRequest{Group: "m", ProducerID: 7, Generation: tc.gen, MemberID: tc.member,
			Offsets: []CommitOffset{{TP: tp, Offset: 1}}}, func(cs []int16) { codes = cs })
		if codes[0] != tc.want {
			t.Errorf("generation %d member %q: code %d, want %d", tc.gen, tc.member, codes[0], tc.want)
		}
	}
	// A plain Log cannot take transactional commits.
	plain := newTestCoordinator(t, &memLog{})
	var codes []int16
	plain.TxnCommit(TxnCommitRequest{Group: "x", ProducerID: 7, Generation: -1, Offsets: []CommitOffset{{TP: tp, Offset: 1}}},
		func(cs []int16) { codes = cs })
	if codes[0] != kerr.UnsupportedVersion.Code {
		t.Fatalf("TxnCommit over a plain Log: %v", codes)
	}
}
