package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratalog/strata/record"
)

// snapshotLog is a remote.storage.enable log without a remote hook (so
// the engine keeps the snapshot at every segment end: none is copied)
// written by an idempotent producer that bumps its epoch, a transactional
// one whose transactions commit, abort and span rolls, and plain batches,
// over more than ten segments.
func snapshotLog(t *testing.T) (*Engine, *Log) {
	t.Helper()
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	e, l := retentionTopic(t, t.TempDir(), clk, map[string]string{"remote.storage.enable": "true", "retention.bytes": "-1"})
	seqs := map[int64]int32{}
	add := func(pid int64, epoch int16, txn bool) {
		t.Helper()
		var b record.Builder
		b.Reset(record.CodecNone, t0)
		if pid >= 0 {
			b.SetProducer(pid, epoch, seqs[pid])
			seqs[pid] += 2
		}
		if txn {
			b.SetTransactional()
		}
		for j := 0; j < 2; j++ {
			b.Add(t0, nil, []byte(strings.Repeat("s", 300)), nil)
		}
		raw, err := b.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if info, err := l.Append(raw, 0); err != nil || info.Duplicate {
			t.Fatalf("append of producer %d: %+v %v", pid, info, err)
		}
		clk.Advance(10)
	}
	for round := 0; round < 40; round++ {
		epochP := int16(1)
		if round >= 25 {
			epochP = 2
		}
		if round == 25 {
			seqs[7] = 0 // a new epoch starts at sequence 0
		}
		add(7, epochP, false)
		if round%7 == 6 {
			add(8, 0, false) // a producer seen now and then
		}
		add(-1, 0, false)
		switch round % 6 {
		case 1, 2, 3:
			add(9, 3, true)
		case 4:
			if _, err := l.AppendTxnMarker(9, 3, 11, round%12 == 4, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := waitDurable(t, l, l.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
	return e, l
}

// sameProducerState fails unless the snapshots hold the same offset and
// producers (epochs, batches, coordinator epochs, open transactions): all
// but the clock time each producer was last seen, which a replay sets to
// its own time.
func sameProducerState(t *testing.T, what string, got, want []byte) {
	t.Helper()
	gOff, g, err := decodeProducerSnapshot(got)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	wOff, w, err := decodeProducerSnapshot(want)
	if err != nil {
		t.Fatalf("%s: the engine's own snapshot: %v", what, err)
	}
	if gOff != wOff || len(g) != len(w) {
		t.Fatalf("%s: snapshot at %d with %d producers, want at %d with %d", what, gOff, len(g), wOff, len(w))
	}
	for pid, we := range w {
		ge := g[pid]
		if ge == nil {
			t.Fatalf("%s: producer %d missing", what, pid)
		}
		if ge.epoch != we.epoch || ge.coordinatorEpoch != we.coordinatorEpoch || ge.txnFirstOffset != we.txnFirstOffset || ge.n != we.n {
			t.Fatalf("%s: producer %d %+v, want %+v", what, pid, *ge, *we)
		}
		for i := 0; i < int(we.n); i++ {
			if *ge.at(i) != *we.at(i) {
				t.Fatalf("%s: producer %d batch %d %+v, want %+v", what, pid, i, *ge.at(i), *we.at(i))
			}
		}
	}
}

// A segment whose producer snapshot the engine no longer has is opened
// for copying with one rebuilt from the log that equals the snapshot the
// roll wrote (but for the times producers were last seen): from the
// first segment, from a snapshot kept in the middle, and in any order.
// The rebuilt files are the log's snapshots from then on: trimmed once
// their segments are copied.
func TestRebuiltSegmentSnapshotsEqualTheRolls(t *testing.T) {
	e, l := snapshotLog(t)
	defer e.Close()
	defer e.SetRemoteHook(nil)
	sealed := l.SealedSegments()
	if len(sealed) < 10 {
		t.Fatalf("%d sealed segments, want at least 10", len(sealed))
	}
	rolled := map[int64][]byte{}
	for _, s := range sealed {
		b, err := os.ReadFile(l.snapshotPath(s.End))
		if err != nil {
			t.Fatalf("the roll's snapshot at %d: %v", s.End, err)
		}
		rolled[s.End] = b
	}
	removeAll := func(keep ...int64) {
		t.Helper()
		for _, s := range sealed {
			if !contains64(keep, s.End) {
				if err := os.Remove(l.snapshotPath(s.End)); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
			}
		}
	}
	open := func(s SealedSegment) []byte {
		t.Helper()
		f, err := l.OpenSealedSegment(s.Base)
		if err != nil {
			t.Fatalf("OpenSealedSegment(%d): %v", s.Base, err)
		}
		defer f.Close()
		if f.ProducerSnapshot == nil {
			t.Fatalf("segment [%d, %d) opened without a producer snapshot", s.Base, s.End)
		}
		return f.ProducerSnapshot
	}

	// Every one gone, opened oldest first (as the copies go).
	removeAll()
	for _, s := range sealed {
		sameProducerState(t, "oldest first", open(s), rolled[s.End])
		onDisk, err := os.ReadFile(l.snapshotPath(s.End))
		if err != nil {
			t.Fatalf("rebuilt snapshot at %d not written: %v", s.End, err)
		}
		sameProducerState(t, "on disk", onDisk, rolled[s.End])
	}
	// Every one gone, newest first: the first call rebuilds from the first
	// segment; a middle one kept: rebuilt from it.
	removeAll()
	for i := len(sealed) - 1; i >= 0; i-- {
		sameProducerState(t, "newest first", open(sealed[i]), rolled[sealed[i].End])
	}
	mid := sealed[len(sealed)/2].End
	removeAll(mid)
	last := sealed[len(sealed)-1]
	sameProducerState(t, "from the middle", open(last), rolled[last.End])
	for _, s := range sealed {
		if _, err := os.Stat(l.snapshotPath(s.End)); (err == nil) != (s.End >= mid) {
			t.Fatalf("snapshot at %d: %v; only those from the kept one at %d on should be rebuilt", s.End, err, mid)
		}
	}

	// Copied: the next snapshot trims the rebuilt ones with the others.
	removeAll()
	for _, s := range sealed {
		open(s)
	}
	h := &copiedHook{}
	h.end.Store(last.End)
	e.SetRemoteHook(h)
	for n := len(l.SealedSegments()); len(l.SealedSegments()) == n; {
		mustAppend(t, l, batchOf(t, 1, 3000, 1_700_000_000_000, 1))
	}
	got, err := filepath.Glob(filepath.Join(l.dir, "*"+snapshotSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > snapshotsKept {
		t.Fatalf("%d snapshots on disk once everything is copied, want at most %d: %v", len(got), snapshotsKept, got)
	}
}

// A rebuilt snapshot is not written for a segment a truncation changed
// while it was replayed.
func TestRebuiltSnapshotRefusedAfterTruncation(t *testing.T) {
	e, l := snapshotLog(t)
	defer e.Close()
	segs := *l.segs.Load()
	k := len(segs) - 3
	last, next := segs[k], segs[k+1].base
	lastEnd := last.end.Load()
	data, err := os.ReadFile(l.snapshotPath(next))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(l.snapshotPath(next)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TruncateTo(last.base + 1); err != nil {
		t.Fatal(err)
	}
	if err := l.installRebuiltSnapshot(next, data, last, lastEnd); !errors.Is(err, errLogChanged) {
		t.Fatalf("install after a truncation: %v, want errLogChanged", err)
	}
	if _, err := os.Stat(l.snapshotPath(next)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("snapshot at %d written for a truncated log: %v", next, err)
	}
}

func contains64(xs []int64, x int64) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
