package engine

import (
	"bytes"
	"io"
	"sync/atomic"
	"testing"
)

// copiedHook is a RemoteHook whose CopiedEnd the test sets.
type copiedHook struct{ end atomic.Int64 }

func (h *copiedHook) CopiedEnd([16]byte, string, int32) int64 { return h.end.Load() }

// With remote.storage.enable, local retention deletes only segments below
// the hook's CopiedEnd, by local.retention.bytes (-2: retention.bytes).
func TestRemoteStorageGatesLocalRetention(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	dir := t.TempDir()
	e, l := retentionTopic(t, dir, clk, map[string]string{
		"remote.storage.enable": "true", "retention.bytes": "-1", "local.retention.bytes": "0",
	})
	defer e.Close()
	defer e.SetRemoteHook(nil)
	for i := 0; i < 6; i++ {
		appendAt(t, l, t0+int64(i)*1000, i)
	}
	// No hook: nothing is copied, so nothing goes.
	if n := e.enforceRetention(); n != 0 || l.LogStartOffset() != 0 {
		t.Fatalf("without a hook deleted %d, start %d", n, l.LogStartOffset())
	}
	h := &copiedHook{}
	h.end.Store(-1)
	e.SetRemoteHook(h)
	if n := e.enforceRetention(); n != 0 {
		t.Fatalf("nothing copied: deleted %d", n)
	}
	sealed := l.SealedSegments()
	if len(sealed) != 5 || sealed[0].Base != 0 || sealed[0].End != 1 || sealed[4].End != 5 || sealed[2].MaxTimestamp != t0+2000 {
		t.Fatalf("sealed segments %+v", sealed)
	}
	// Copied through offset 3 (segments 0, 1, 2): those three go.
	h.end.Store(3)
	if n := e.enforceRetention(); n != 3 || l.LogStartOffset() != 3 {
		t.Fatalf("deleted %d, start %d; want 3, 3", n, l.LogStartOffset())
	}
	// A remote-disabled topic is retained as before.
	e2, l2 := e, mustTopic(t, e, "plain", 1, map[string]string{"segment.bytes": "4096", "retention.bytes": "0"}).Partition(0)
	for i := 0; i < 3; i++ {
		appendAt(t, l2, t0+int64(i)*1000, i)
	}
	h.end.Store(-1)
	if n := e2.enforceRetention(); n != 2 || l2.LogStartOffset() != 2 {
		t.Fatalf("plain topic: deleted %d, start %d", n, l2.LogStartOffset())
	}
}

func TestLocalRetentionBounds(t *testing.T) {
	c := DefaultLogConfig()
	for _, tc := range []struct{ local, whole, want int64 }{
		{-2, 100, 100}, {-2, -1, -1}, {50, 100, 50}, {500, 100, 100}, {-1, 100, 100}, {-1, -1, -1}, {7, -1, 7},
	} {
		c.LocalRetentionMs, c.RetentionMs = tc.local, tc.whole
		c.LocalRetentionBytes, c.RetentionBytes = tc.local, tc.whole
		ms, b := c.LocalRetention()
		if ms != tc.want || b != tc.want {
			t.Errorf("local %d whole %d: %d %d, want %d", tc.local, tc.whole, ms, b, tc.want)
		}
	}
}

// OpenSealedSegment gives the segment's bytes and index files.
func TestOpenSealedSegment(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	e, l := retentionTopic(t, t.TempDir(), clk, nil)
	defer e.Close()
	for i := 0; i < 3; i++ {
		appendAt(t, l, t0+int64(i), i)
	}
	f, err := l.OpenSealedSegment(1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f.Log, 0, f.Segment.Size))
	if err != nil || int64(len(data)) != f.Segment.Size || f.Segment.Size < 3000 {
		t.Fatalf("read %d of %d: %v", len(data), f.Segment.Size, err)
	}
	rr, err := l.Read(1, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	got := make([]byte, rr.Chunks[0].Len)
	if _, err := rr.Chunks[0].File.ReadAt(got, rr.Chunks[0].Pos); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("segment bytes differ from Read's (%v)", err)
	}
	if f.TimeIndex == nil || f.OffsetIndex == nil || !bytes.Contains(f.LeaderEpochCheckpoint, []byte("0\n")) {
		t.Fatalf("files: off %d tim %d epochs %q", len(f.OffsetIndex), len(f.TimeIndex), f.LeaderEpochCheckpoint)
	}
	if _, err := l.OpenSealedSegment(2); err == nil {
		t.Fatal("the active segment opened as sealed")
	}
}

// ClearRemoteHook removes only the hook it is given: an older manager
// stopping after a newer one took over leaves the newer hook in place.
func TestClearRemoteHookOnlyOwn(t *testing.T) {
	clk := newFakeClock(1_700_000_000_000)
	e, l := retentionTopic(t, t.TempDir(), clk, map[string]string{"remote.storage.enable": "true"})
	defer e.Close()
	defer e.SetRemoteHook(nil)
	older, newer := &copiedHook{}, &copiedHook{}
	older.end.Store(1)
	newer.end.Store(7)
	e.SetRemoteHook(older)
	e.SetRemoteHook(newer)
	e.ClearRemoteHook(older)
	if got := e.remoteCopiedEnd(l); got != 7 {
		t.Fatalf("after clearing the replaced hook: copied end %d, want the newer hook's 7", got)
	}
	e.ClearRemoteHook(newer)
	if got := e.remoteCopiedEnd(l); got != -1 {
		t.Fatalf("after clearing the current hook: copied end %d, want -1 (no hook)", got)
	}
}
