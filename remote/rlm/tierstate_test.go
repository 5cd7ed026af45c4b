package rlm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stratalog/strata/remote/objstore"
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
