package rlm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/remote/objstore"
	"github.com/stratalog/strata/remote/objstore/weedtest"
)

// RemoteLogAuxState names the remote segment holding the offset below a
// leader's local log start and returns its copied leader-epoch checkpoint
// and producer snapshot, byte for byte; an offset no finished segment
// holds is ErrNotRemote, and a replaced object is refused by its checksum.
func TestRemoteLogAuxState(t *testing.T) {
	f := newFixture(t, tieredConfig)
	defer f.eng.Close() // after the manager's Close: nothing writes into the test's directory past the test
	f.produce(40)
	m := f.manager(f.store, nil)
	defer m.Close()
	sealed := f.log.SealedSegments()
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := f.log.TopicID()
	seg := sealed[len(sealed)-1] // the newest: the engine still had its producer snapshot
	var rs *Segment
	for _, s := range m.Segments(id, 0) {
		if s.End == seg.End {
			rs = &s
		}
	}
	if rs == nil {
		t.Fatalf("no remote segment ends at %d", seg.End)
	}
	object := func(kind string) []byte {
		r, _, err := f.store.Get(ctx, ObjectKey("tiered", 0, rs.Base, rs.ID, kind))
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	wantEpochs, wantSnap := object(KindEpochs), object(KindSnapshot)
	// The leader's local log start at the segment's end, and inside it.
	for _, start := range []int64{seg.End, seg.Base + 1} {
		st, err := m.RemoteLogAuxState(ctx, id, 0, start)
		if err != nil {
			t.Fatalf("local start %d: %v", start, err)
		}
		if st.Offset != seg.End || !bytes.Equal(st.Epochs, wantEpochs) || !bytes.Equal(st.ProducerSnapshot, wantSnap) || len(st.Epochs) == 0 || len(wantSnap) == 0 {
			t.Fatalf("local start %d: offset %d, epochs %q, snapshot %d bytes; want %d, %q, %d bytes",
				start, st.Offset, st.Epochs, len(st.ProducerSnapshot), seg.End, wantEpochs, len(wantSnap))
		}
	}
	copiedEnd := sealed[len(sealed)-1].End
	for _, start := range []int64{0, copiedEnd + 1} {
		if _, err := m.RemoteLogAuxState(ctx, id, 0, start); !errors.Is(err, ErrNotRemote) {
			t.Fatalf("local start %d: %v, want ErrNotRemote", start, err)
		}
	}
	// A snapshot object replaced in the store is refused.
	m.cache.drop(rs.ID)
	key := ObjectKey("tiered", 0, rs.Base, rs.ID, KindSnapshot)
	bad := append([]byte(nil), wantSnap...)
	bad[len(bad)-1] ^= 1
	if _, err := f.store.Put(ctx, key, bytes.NewReader(bad), int64(len(bad)), objstore.SumOf(bad)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RemoteLogAuxState(ctx, id, 0, seg.End); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("replaced snapshot: %v, want ErrCorrupt", err)
	}
}

// Against the real S3-compatible server: a follower's log restarted from
// the remote state below the leader's local log start
// (RemoteLogAuxState over S3, then engine.Log.RestartAtTiered) holds the
// leader's producer state and leader epoch from before its start.
func TestFollowerStateFromS3(t *testing.T) {
	w := weedtest.Start(t)
	s3 := newS3(t, w, "strata-rlm-follower")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	f := newFixture(t, tieredConfig)
	defer f.eng.Close()
	f.store = s3
	if err := f.log.AssignLeaderEpoch(4); err != nil {
		t.Fatal(err)
	}
	const pid = 42
	for seq := int32(0); seq < 15; seq += 3 {
		var b record.Builder
		b.Reset(record.CodecNone, t0)
		b.SetProducer(pid, 2, seq)
		for j := 0; j < 3; j++ {
			b.Add(t0, nil, []byte(strings.Repeat("i", 200)), nil)
		}
		batch, err := b.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.log.Append(batch, 4); err != nil {
			t.Fatal(err)
		}
	}
	f.produce(20)
	m := f.manager(s3, nil)
	defer m.Close()
	if err := m.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	id := f.log.TopicID()
	segs := m.Segments(id, 0)
	if len(segs) < 3 || finished(segs) != len(segs) {
		t.Fatalf("%d segments copied (%d finished)", len(segs), finished(segs))
	}
	localStart := segs[len(segs)-1].End
	f.waitLocalStart(localStart)
	want, ok := f.log.Producer(pid)
	if !ok {
		t.Fatal("the leader lost the producer")
	}
	st, err := m.RemoteLogAuxState(ctx, id, 0, localStart)
	if err != nil {
		t.Fatal(err)
	}
	if st.Offset != localStart || st.ProducerSnapshot == nil || st.Epochs == nil {
		t.Fatalf("remote state: offset %d (want %d), snapshot %d bytes, epochs %q", st.Offset, localStart, len(st.ProducerSnapshot), st.Epochs)
	}

	fe, err := engine.Open(engine.Options{Dir: t.TempDir(), Log: engine.DefaultLogConfig(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	tp, err := fe.CreateTopicWithID("tiered", id, 1, tieredConfig)
	if err != nil {
		t.Fatal(err)
	}
	fl := tp.Partition(0)
	if err := fl.RestartAtTiered(st.Offset, st.Epochs, st.ProducerSnapshot); err != nil {
		t.Fatal(err)
	}
	got, ok := fl.Producer(pid)
	if !ok || got.ProducerEpoch != want.ProducerEpoch || got.LastSequence != want.LastSequence || got.LastSequence != 14 {
		t.Fatalf("follower's producer %d: %+v %v, leader's %+v", pid, got, ok, want)
	}
	if fl.LogStartOffset() != localStart || fl.LeaderEpoch() != 4 {
		t.Fatalf("follower log start %d, epoch %d; want %d, 4", fl.LogStartOffset(), fl.LeaderEpoch(), localStart)
	}
}
