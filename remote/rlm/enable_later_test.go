package rlm

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
)

// plainConfig is tieredConfig without remote storage: the topic's
// segments roll, and its producer snapshots are trimmed to the newest
// three, before remote.storage.enable is turned on.
var plainConfig = map[string]string{
	"segment.bytes":        "4096",
	"retention.ms":         "-1",
	"file.delete.delay.ms": "0",
}

// A topic written with remote storage off (its older segments' producer
// snapshots long trimmed, its first segments deleted by plain retention)
// and then turned on: the first pass copies every sealed segment, each
// with the producer state at its end (rebuilt by the engine where the
// snapshot is gone), so a follower restarted from any copied segment's
// remote state knows every producer as the leader did there: the
// idempotent producer at its sequence (its retry is the duplicate, its
// next batch in sequence is taken), the producer whose only batches were
// deleted by retention, and the transaction open at that offset.
func TestEnableOnExistingTopicCopiesEverySegmentWithProducerState(t *testing.T) {
	f := newFixture(t, plainConfig)
	const (
		pidP, epochP = 42, 2 // idempotent, writes all along
		pidQ, epochQ = 77, 0 // idempotent, only in the first segment
		pidT, epochT = 91, 5 // transactional
	)
	type batchAt struct {
		pid         int64
		epoch       int16
		first, last int64 // offsets
		seq         int32 // base sequence
		n           int   // records
	}
	var batches []batchAt
	seqs := map[int64]int32{}
	appendBatch := func(pid int64, epoch int16, txn bool, n int) batchAt {
		t.Helper()
		var b record.Builder
		b.Reset(record.CodecNone, t0)
		b.SetProducer(pid, epoch, seqs[pid])
		if txn {
			b.SetTransactional()
		}
		for j := 0; j < n; j++ {
			b.Add(t0, nil, []byte(strings.Repeat("p", 150)), nil)
		}
		raw, err := b.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		info, err := f.log.Append(raw, f.log.LeaderEpoch())
		if err != nil || info.Duplicate {
			t.Fatalf("append of producer %d seq %d: %+v %v", pid, seqs[pid], info, err)
		}
		ba := batchAt{pid, epoch, info.BaseOffset, info.LastOffset, seqs[pid], n}
		batches = append(batches, ba)
		seqs[pid] += int32(n)
		return ba
	}
	// T's transactions: first offset and marker offset (-1: open).
	type span struct{ first, marker int64 }
	var txns []span
	marker := func(commit bool) {
		t.Helper()
		info, err := f.log.AppendTxnMarker(pidT, epochT, 3, commit, f.log.LeaderEpoch())
		if err != nil {
			t.Fatal(err)
		}
		txns[len(txns)-1].marker = info.BaseOffset
	}

	appendBatch(pidQ, epochQ, false, 2)
	appendBatch(pidQ, epochQ, false, 2)
	f.produce(3) // fills the first segment: Q's batches leave with it
	for round := 0; round < 14; round++ {
		appendBatch(pidP, epochP, false, 3)
		switch round % 5 {
		case 1:
			ba := appendBatch(pidT, epochT, true, 2)
			txns = append(txns, span{first: ba.first, marker: -1})
		case 3:
			marker(round%2 == 1)
		}
		f.produce(2)
	}
	ba := appendBatch(pidT, epochT, true, 2) // left open
	txns = append(txns, span{first: ba.first, marker: -1})
	f.produce(3)

	// What the leader knew at an offset: each producer's last batch below
	// it, and T's open transaction.
	lastBelow := func(pid int64, end int64) (batchAt, bool) {
		var got batchAt
		ok := false
		for _, b := range batches {
			if b.pid == pid && b.last < end {
				got, ok = b, true
			}
		}
		return got, ok
	}
	openAt := func(end int64) int64 {
		for _, x := range txns {
			if x.first < end && (x.marker < 0 || x.marker >= end) {
				return x.first
			}
		}
		return -1
	}

	// The first segments go (Q's batches with them) before remote storage
	// is on, at a segment end where T has no transaction open (see the
	// limits in docs/tiered-storage.md).
	first := f.log.SealedSegments()
	if len(first) < 10 {
		t.Fatalf("%d sealed segments, want at least 10", len(first))
	}
	cut := int64(-1)
	for _, s := range first[2:6] {
		if openAt(s.End) < 0 {
			cut = s.End
			break
		}
	}
	if cut < 0 {
		t.Fatal("no segment end without an open transaction to delete records to")
	}
	if _, err := f.log.DeleteRecords(cut); err != nil {
		t.Fatal(err)
	}
	f.waitLocalStart(cut)
	snaps, err := filepath.Glob(filepath.Join(f.dataDir, "tiered-0", "*.snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	sealed := f.log.SealedSegments()
	if len(snaps) >= len(sealed) {
		t.Fatalf("%d producer snapshots on disk for %d sealed segments: nothing trimmed, the test shows nothing", len(snaps), len(sealed))
	}

	on := map[string]string{"remote.storage.enable": "true", "local.retention.bytes": "0"}
	for k, v := range plainConfig {
		on[k] = v
	}
	if err := f.eng.SetTopicConfig("tiered", on); err != nil {
		t.Fatal(err)
	}
	m := f.manager(f.store, nil)
	defer m.Close()
	ctx := context.Background()
	if err := m.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	id := f.log.TopicID()
	segs := m.Segments(id, 0)
	if len(segs) != len(sealed) || finished(segs) != len(segs) {
		t.Fatalf("%d segments copied (%d finished), want all %d sealed ones", len(segs), finished(segs), len(sealed))
	}
	keys := f.keys()
	for i, s := range segs {
		if s.Base != sealed[i].Base || s.End != sealed[i].End {
			t.Fatalf("remote segment %d is [%d, %d), local [%d, %d)", i, s.Base, s.End, sealed[i].Base, sealed[i].End)
		}
		for _, kind := range []string{KindLog, KindOffsetIndex, KindTimeIndex, KindSnapshot, KindEpochs} {
			if _, ok := s.Files[kind]; !ok || !contains(keys, ObjectKey("tiered", 0, s.Base, s.ID, kind)) {
				t.Fatalf("segment [%d, %d) copied without its %s: files %v", s.Base, s.End, kind, s.Files)
			}
		}
	}

	for _, s := range segs {
		st, err := m.RemoteLogAuxState(ctx, id, 0, s.End)
		if err != nil {
			t.Fatalf("remote state at %d: %v", s.End, err)
		}
		fe, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig(), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		tp, err := fe.CreateTopicWithID("tiered", id, 1, plainConfig)
		if err != nil {
			t.Fatal(err)
		}
		fl := tp.Partition(0)
		if err := fl.RestartAtTiered(st.Offset, st.Epochs, st.ProducerSnapshot); err != nil {
			t.Fatalf("restart at %d: %v", st.Offset, err)
		}
		for _, pid := range []int64{pidP, pidQ} {
			want, ok := lastBelow(pid, s.End)
			got, known := fl.Producer(pid)
			if !ok {
				if known {
					t.Errorf("state at %d: producer %d %+v before its first batch", s.End, pid, got)
				}
				continue
			}
			if !known || got.ProducerEpoch != want.epoch || got.LastSequence != want.seq+int32(want.n)-1 || got.LastOffset != want.last {
				t.Errorf("state at %d: producer %d %+v (known %v), want epoch %d last sequence %d at %d",
					s.End, pid, got, known, want.epoch, want.seq+int32(want.n)-1, want.last)
			}
		}
		if got, known := fl.Producer(pidT); !known || got.CurrentTxnStartOffset != openAt(s.End) {
			t.Errorf("state at %d: transactional producer %+v (known %v), want its transaction open at %d", s.End, got, known, openAt(s.End))
		}
		// The producers carry on on the restarted log as leader: a retry of
		// the last batch is the duplicate at its original offsets, the next
		// sequence is taken (no OUT_OF_ORDER_SEQUENCE_NUMBER, nothing
		// written twice).
		for _, pid := range []int64{pidP, pidQ} {
			last, ok := lastBelow(pid, s.End)
			if !ok {
				continue
			}
			retry := idemBatch(t, pid, last.epoch, last.seq, last.n)
			info, err := fl.Append(retry, fl.LeaderEpoch())
			if err != nil || !info.Duplicate || info.BaseOffset != last.first || info.LastOffset != last.last {
				t.Errorf("state at %d: retry of producer %d's batch at %d: %+v %v, want the duplicate at [%d, %d]",
					s.End, pid, last.first, info, err, last.first, last.last)
			}
			next := idemBatch(t, pid, last.epoch, last.seq+int32(last.n), 1)
			if info, err := fl.Append(next, fl.LeaderEpoch()); err != nil || info.Duplicate {
				t.Errorf("state at %d: producer %d's next sequence %d: %+v %v", s.End, pid, last.seq+int32(last.n), info, err)
			}
		}
		if err := fe.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// The copies done, local retention takes every copied segment and the
	// snapshots on disk are trimmed at the next roll.
	f.waitLocalStart(segs[len(segs)-1].End)
	f.produce(6)
	got, err := filepath.Glob(filepath.Join(f.dataDir, "tiered-0", "*.snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 3 {
		t.Fatalf("%d producer snapshots on disk once everything was copied, want at most 3: %v", len(got), got)
	}
}

func idemBatch(t *testing.T, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	var b record.Builder
	b.Reset(record.CodecNone, t0)
	b.SetProducer(pid, epoch, seq)
	for j := 0; j < n; j++ {
		b.Add(t0, nil, []byte(strings.Repeat("p", 150)), nil)
	}
	raw, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
