package rlm

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
)

// With uploads held back (no manager yet, then a manager whose passes do
// not run) while the log rolls far more segments than the engine's newest
// three snapshots, and a restart in between, every segment is copied with
// the producer snapshot taken at its end: a follower restarted from any
// copied segment's remote state knows the idempotent producer at the
// sequence it had reached there. Once copied, the snapshots are trimmed to
// the newest three again.
func TestEverySegmentCopiedWithProducerSnapshot(t *testing.T) {
	f := newFixture(t, tieredConfig)
	const pid, pepoch = 42, 2
	type appended struct {
		last    int64 // last offset of the batch
		lastSeq int32
	}
	var idem []appended
	seq := int32(0)
	write := func(rounds int) {
		t.Helper()
		for i := 0; i < rounds; i++ {
			var b record.Builder
			b.Reset(record.CodecNone, t0)
			b.SetProducer(pid, pepoch, seq)
			for j := 0; j < 3; j++ {
				b.Add(t0, nil, []byte(strings.Repeat("i", 200)), nil)
			}
			batch, err := b.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			info, err := f.log.Append(batch, f.log.LeaderEpoch())
			if err != nil {
				t.Fatal(err)
			}
			idem = append(idem, appended{info.LastOffset, seq + 2})
			seq += 3
			f.produce(1)
		}
	}
	write(12) // no manager: nothing copies
	if err := f.eng.Close(); err != nil {
		t.Fatal(err)
	}
	f.openEngine() // a restart with the backlog
	defer f.eng.Close()
	m := f.manager(f.store, nil) // Interval -1: no pass until RunOnce
	defer m.Close()
	write(12)
	sealed := f.log.SealedSegments()
	if len(sealed) < 8 {
		t.Fatalf("%d sealed segments, want a backlog of at least 8", len(sealed))
	}
	snaps := func() []string {
		t.Helper()
		got, err := filepath.Glob(filepath.Join(f.dataDir, "tiered-0", "*.snapshot"))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if n := len(snaps()); n < len(sealed) {
		t.Fatalf("%d producer snapshots on disk for %d uncopied segments", n, len(sealed))
	}

	ctx := context.Background()
	if err := m.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	id := f.log.TopicID()
	segs := m.Segments(id, 0)
	if len(segs) != len(sealed) || finished(segs) != len(segs) {
		t.Fatalf("%d segments copied (%d finished), want %d", len(segs), finished(segs), len(sealed))
	}
	for _, s := range segs {
		if fm, ok := s.Files[KindSnapshot]; !ok || fm.Size == 0 {
			t.Fatalf("segment [%d, %d) copied without its producer snapshot: files %v", s.Base, s.End, s.Files)
		}
		if keys := f.keys(); !contains(keys, ObjectKey("tiered", 0, s.Base, s.ID, KindSnapshot)) {
			t.Fatalf("segment [%d, %d): no snapshot object in the store", s.Base, s.End)
		}
		st, err := m.RemoteLogAuxState(ctx, id, 0, s.End)
		if err != nil {
			t.Fatalf("remote state at %d: %v", s.End, err)
		}
		want := int32(-1)
		for _, a := range idem {
			if a.last < s.End {
				want = a.lastSeq
			}
		}
		fe, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig(), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		tp, err := fe.CreateTopicWithID("tiered", id, 1, tieredConfig)
		if err != nil {
			t.Fatal(err)
		}
		fl := tp.Partition(0)
		if err := fl.RestartAtTiered(st.Offset, st.Epochs, st.ProducerSnapshot); err != nil {
			t.Fatalf("restart at %d: %v", st.Offset, err)
		}
		got, ok := fl.Producer(pid)
		if want < 0 {
			if ok {
				t.Errorf("segment ending %d: follower has producer %+v before its first batch", s.End, got)
			}
		} else if !ok || got.ProducerEpoch != pepoch || got.LastSequence != want {
			t.Errorf("segment ending %d: follower's producer %+v %v, want epoch %d last sequence %d", s.End, got, ok, pepoch, want)
		}
		if err := fe.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Copied: the next roll's snapshot trims to the newest three.
	write(4)
	if after := f.log.SealedSegments(); len(after) == 0 || after[len(after)-1].End <= sealed[len(sealed)-1].End {
		t.Fatal("no roll after the copies")
	}
	if n := len(snaps()); n > 3 {
		t.Fatalf("%d producer snapshots on disk after the copies, want at most 3", n)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
