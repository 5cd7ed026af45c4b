package engine

import (
	"errors"
	"testing"
)

// A follower log restarted at a remote segment's end with that segment's
// leader-epoch checkpoint and producer snapshot (RestartAtTiered) knows
// the leader's epochs below its start and deduplicates a retry of a batch
// written before its start; restarted without them (TruncateFullyAndStartAt)
// it takes the retry as new data. A bad snapshot leaves the log untouched.
func TestRestartAtTieredState(t *testing.T) {
	le := openEngine(t, t.TempDir(), nil)
	defer le.Close()
	leader := mustTopic(t, le, "tiered", 1, smallConfig()).Partition(0)
	if err := leader.AssignLeaderEpoch(3); err != nil {
		t.Fatal(err)
	}
	var offs []int64
	epoch := int32(3)
	for i := int32(0); i < 200; i++ {
		if i == 60 {
			epoch = 5
			if err := leader.AssignLeaderEpoch(epoch); err != nil {
				t.Fatal(err)
			}
		}
		info, err := leader.Append(idemBatch(t, 7, 0, 2*i, 2), epoch)
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, info.BaseOffset)
	}
	if err := waitDurable(t, leader, leader.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
	leader.AdvanceHighWatermark(leader.LogEndOffset())
	sealed := leader.SealedSegments()
	if len(sealed) < 3 {
		t.Fatalf("want at least 3 sealed segments, got %+v", sealed)
	}
	seg := sealed[len(sealed)-1] // past epoch 5's start
	files, err := leader.OpenSealedSegment(seg.Base)
	if err != nil {
		t.Fatal(err)
	}
	snap, ckpt := files.ProducerSnapshot, files.LeaderEpochCheckpoint
	files.Close()
	if snap == nil || seg.End <= offs[60] {
		t.Fatalf("segment %+v: snapshot %d bytes; want one past offset %d", seg, len(snap), offs[60])
	}
	// The last batch below the segment's end: its retry is the duplicate.
	last := -1
	for i, off := range offs {
		if off < seg.End {
			last = i
		}
	}

	fdir := t.TempDir()
	fe := openEngine(t, fdir, nil)
	topic := mustTopic(t, fe, "tiered", 2, smallConfig())
	plain, f := topic.Partition(1), topic.Partition(0)

	// A snapshot taken at another offset is refused before the log changes.
	mustAppend(t, f, idemBatch(t, 9, 0, 0, 1))
	if err := f.RestartAtTiered(seg.End+1, ckpt, snap); err == nil || f.LogEndOffset() != 1 {
		t.Fatalf("mismatched snapshot: err %v, log end %d", err, f.LogEndOffset())
	}
	if err := f.RestartAtTiered(seg.End, ckpt, snap); err != nil {
		t.Fatal(err)
	}
	if f.LogStartOffset() != seg.End || f.LogEndOffset() != seg.End || f.HighWatermark() != seg.End {
		t.Fatalf("restarted log: start %d end %d hw %d, want %d", f.LogStartOffset(), f.LogEndOffset(), f.HighWatermark(), seg.End)
	}
	if ep, end := f.EndOffsetForEpoch(5); ep != 5 || end != seg.End || f.LeaderEpoch() != 5 {
		t.Fatalf("epoch 5 ends at (%d, %d), leader epoch %d; want (5, %d), 5", ep, end, f.LeaderEpoch(), seg.End)
	}
	info, err := f.Append(idemBatch(t, 7, 0, int32(2*last), 2), 5)
	if err != nil || !info.Duplicate || info.BaseOffset != offs[last] {
		t.Fatalf("retry of seq %d: %+v, %v; want a duplicate at %d", 2*last, info, err, offs[last])
	}
	if info, err := f.Append(idemBatch(t, 7, 0, int32(2*last+5), 1), 5); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("sequence gap after the restart: %+v, %v; want out of order", info, err)
	}
	if info, err := f.Append(idemBatch(t, 7, 0, int32(2*last+2), 2), 5); err != nil || info.Duplicate || info.BaseOffset != seg.End {
		t.Fatalf("next sequence: %+v, %v; want appended at %d", info, err, seg.End)
	}

	// Without the remote state the same retry is appended again.
	if err := plain.TruncateFullyAndStartAt(seg.End); err != nil {
		t.Fatal(err)
	}
	if ep, end := plain.EndOffsetForEpoch(5); ep != -1 || end != -1 {
		t.Fatalf("plain restart knows epoch 5: (%d, %d)", ep, end)
	}
	if info := mustAppend(t, plain, idemBatch(t, 7, 0, int32(2*last), 2)); info.Duplicate {
		t.Fatalf("plain restart deduplicated: %+v", info)
	}

	// The restored state survives a restart of the follower's engine.
	if err := fe.Close(); err != nil {
		t.Fatal(err)
	}
	fe = openEngine(t, fdir, nil)
	defer fe.Close()
	f = fe.Topic("tiered").Partition(0)
	if ep, end := f.EndOffsetForEpoch(5); ep != 5 || end != f.LogEndOffset() {
		t.Fatalf("after restart epoch 5 ends at (%d, %d), want (5, %d)", ep, end, f.LogEndOffset())
	}
	info, err = f.Append(idemBatch(t, 7, 0, int32(2*last), 2), 5)
	if err != nil || !info.Duplicate || info.BaseOffset != offs[last] {
		t.Fatalf("retry after restart: %+v, %v; want a duplicate at %d", info, err, offs[last])
	}
}
