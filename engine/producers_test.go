package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stratalog/strata/record"
)

// idemBatch builds a batch of n records from producer pid/epoch starting at
// sequence seq.
func idemBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	var b record.Builder
	b.Reset(record.CodecNone, 1000)
	b.SetProducer(pid, epoch, seq)
	for i := 0; i < n; i++ {
		b.Add(1000+int64(i), []byte("k"), []byte("value"), nil)
	}
	out, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type produceStep struct {
	name   string
	pid    int64
	epoch  int16
	seq    int32
	n      int
	want   error // nil: accepted
	dupOf  int64 // >= 0: a duplicate answered with this base offset
	offset int64 // expected base offset when accepted (-1: don't care)
}

func runSteps(t *testing.T, l *Log, steps []produceStep) {
	t.Helper()
	for _, st := range steps {
		end := l.LogEndOffset()
		info, err := l.Append(idemBatch(t, st.pid, st.epoch, st.seq, st.n), 0)
		switch {
		case st.want != nil:
			if !errors.Is(err, st.want) {
				t.Fatalf("%s: err %v, want %v", st.name, err, st.want)
			}
			if l.LogEndOffset() != end {
				t.Fatalf("%s: rejected batch moved the log end %d -> %d", st.name, end, l.LogEndOffset())
			}
		case err != nil:
			t.Fatalf("%s: %v", st.name, err)
		case st.dupOf >= 0:
			if !info.Duplicate || info.BaseOffset != st.dupOf || info.LastOffset != st.dupOf+int64(st.n)-1 {
				t.Fatalf("%s: got %+v, want duplicate of %d..%d", st.name, info, st.dupOf, st.dupOf+int64(st.n)-1)
			}
			if l.LogEndOffset() != end {
				t.Fatalf("%s: duplicate was written: log end %d -> %d", st.name, end, l.LogEndOffset())
			}
		default:
			if info.Duplicate || (st.offset >= 0 && info.BaseOffset != st.offset) {
				t.Fatalf("%s: got %+v, want a new append at %d", st.name, info, st.offset)
			}
		}
	}
}

// TestProducerRules walks Kafka's checks one by one.
func TestProducerRules(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "idem", 1, nil).Partition(0)
	ok := func(name string, pid int64, epoch int16, seq int32, n int, at int64) produceStep {
		return produceStep{name: name, pid: pid, epoch: epoch, seq: seq, n: n, dupOf: -1, offset: at}
	}
	dup := func(name string, pid int64, epoch int16, seq int32, n int, of int64) produceStep {
		return produceStep{name: name, pid: pid, epoch: epoch, seq: seq, n: n, dupOf: of}
	}
	bad := func(name string, pid int64, epoch int16, seq int32, n int, err error) produceStep {
		return produceStep{name: name, pid: pid, epoch: epoch, seq: seq, n: n, want: err, dupOf: -1}
	}
	runSteps(t, l, []produceStep{
		ok("first batch", 7, 0, 0, 3, 0),              // seq 0-2 at 0-2
		ok("next", 7, 0, 3, 2, 3),                     // 3-4 at 3-4
		dup("retry of last", 7, 0, 3, 2, 3),           // answered with 3
		dup("retry of first", 7, 0, 0, 3, 0),          // still among the last five
		bad("gap", 7, 0, 6, 1, ErrOutOfOrderSequence), // expected 5
		bad("overlap", 7, 0, 4, 2, ErrOutOfOrderSequence),
		ok("b3", 7, 0, 5, 1, 5),
		ok("b4", 7, 0, 6, 1, 6),
		ok("b5", 7, 0, 7, 1, 7),
		dup("fifth back", 7, 0, 3, 2, 3),
		ok("b6", 7, 0, 8, 1, 8), // evicts seq 0-2
		bad("sixth back", 7, 0, 0, 3, ErrOutOfOrderSequence),
		bad("new epoch not at 0", 7, 1, 9, 1, ErrOutOfOrderSequence),
		ok("new epoch at 0", 7, 1, 0, 2, 9),
		bad("old epoch", 7, 0, 9, 1, ErrInvalidProducerEpoch),
		bad("old epoch retry", 7, 0, 8, 1, ErrInvalidProducerEpoch), // a duplicate only within its epoch
		dup("new epoch retry", 7, 1, 0, 2, 9),
		ok("unknown producer, any sequence", 8, 3, 42, 1, 11),
		ok("its successor", 8, 3, 43, 1, 12),
		bad("seq below", 8, 3, 40, 1, ErrOutOfOrderSequence),
		ok("wrap: ends at MaxInt32", 9, 0, math.MaxInt32-2, 3, 13),
		bad("wrap: 1 after MaxInt32", 9, 0, 1, 1, ErrOutOfOrderSequence),
		ok("wrap: 0 after MaxInt32", 9, 0, 0, 1, 16),
		ok("crossing the wrap", 10, 0, math.MaxInt32, 2, 17), // sequences MaxInt32, 0
		dup("crossing retry", 10, 0, math.MaxInt32, 2, 17),
		ok("after crossing", 10, 0, 1, 1, 19),
		bad("negative sequence", 11, 0, -1, 1, ErrInvalidRecord),
	})
	// Batches without a producer id are untouched by all this.
	info := mustAppend(t, l, batchOf(t, 2, 10, 1, 1))
	if info.Duplicate || info.BaseOffset != 20 {
		t.Fatalf("plain batch: %+v", info)
	}
	got := l.Producers()
	if len(got) != 4 || got[0].ProducerID != 7 || got[0].ProducerEpoch != 1 || got[0].LastSequence != 1 ||
		got[1].LastSequence != 43 || got[2].LastSequence != 0 || got[3].LastSequence != 1 || got[3].LastOffset != 19 {
		t.Fatalf("Producers() = %+v", got)
	}
	for _, want := range got {
		if one, ok := l.Producer(want.ProducerID); !ok || one != want {
			t.Fatalf("Producer(%d) = %+v, %v; want %+v", want.ProducerID, one, ok, want)
		}
	}
	if _, ok := l.Producer(123456); ok {
		t.Fatal("Producer of an unknown id found")
	}
}

// TestProducerMultiBatchAppend: batches of one request are checked in order
// against each other and recorded only if all pass.
func TestProducerMultiBatchAppend(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "multi", 1, nil).Partition(0)
	two := append(idemBatch(t, 1, 0, 0, 2), idemBatch(t, 1, 0, 2, 3)...)
	if info := mustAppend(t, l, two); info.BaseOffset != 0 || info.LastOffset != 4 {
		t.Fatalf("got %+v", info)
	}
	bad := append(idemBatch(t, 1, 0, 5, 1), idemBatch(t, 1, 0, 7, 1)...)
	if _, err := l.Append(bad, 0); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap inside a request: %v", err)
	}
	// The first half of the failed request was not recorded: 5 is next.
	runSteps(t, l, []produceStep{{name: "after failed request", pid: 1, seq: 5, n: 1, dupOf: -1, offset: 5}})
	// Epoch bump inside one request.
	bump := append(idemBatch(t, 1, 0, 6, 1), idemBatch(t, 1, 1, 0, 1)...)
	if info := mustAppend(t, l, bump); info.BaseOffset != 6 {
		t.Fatalf("bump: %+v", info)
	}
	if p := l.Producers(); p[0].ProducerEpoch != 1 || p[0].LastSequence != 0 {
		t.Fatalf("after bump: %+v", p)
	}
}

// appendSeq appends n single-record batches for pid from seq and returns
// the base offset of each.
func appendSeq(t *testing.T, l *Log, pid int64, seq int32, n int) []int64 {
	t.Helper()
	offs := make([]int64, n)
	for i := 0; i < n; i++ {
		info := mustAppend(t, l, idemBatch(t, pid, 0, seq+int32(i), 2))
		if info.Duplicate {
			t.Fatalf("seq %d: unexpected duplicate", seq+int32(i))
		}
		offs[i] = info.BaseOffset
	}
	return offs
}

// expectDuplicates retries the last five batches of pid (sequences from
// seq, two records each) and wants their original offsets back.
func expectDuplicates(t *testing.T, l *Log, pid int64, seq int32, offs []int64) {
	t.Helper()
	for i, off := range offs {
		info, err := l.Append(idemBatch(t, pid, 0, seq+int32(2*i), 2), 0)
		if err != nil || !info.Duplicate || info.BaseOffset != off {
			t.Fatalf("retry of seq %d: %+v, %v; want duplicate at %d", seq+int32(2*i), info, err, off)
		}
	}
}

func snapshotFiles(t *testing.T, dir string) []int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range ents {
		if off, ok := parseSegmentFileName(e.Name(), snapshotSuffix); ok {
			out = append(out, off)
		}
	}
	return out
}

// TestProducerStateCleanRestart: Close writes <log end>.snapshot; Open
// loads it without replaying any batch and deduplicates as before.
func TestProducerStateCleanRestart(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	l := mustTopic(t, e, "clean", 1, smallConfig()).Partition(0)
	var offs []int64
	for i := int32(0); i < 40; i++ {
		info := mustAppend(t, l, idemBatch(t, 5, 0, 2*i, 2))
		offs = append(offs, info.BaseOffset)
	}
	mustAppend(t, l, idemBatch(t, 6, 2, 100, 1))
	end := l.LogEndOffset()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "clean-0")
	snaps := snapshotFiles(t, pdir)
	if len(snaps) == 0 || len(snaps) > snapshotsKept || snaps[len(snaps)-1] != end {
		t.Fatalf("snapshots %v, want at most %d ending at the log end %d", snaps, snapshotsKept, end)
	}

	e = openEngine(t, dir, nil)
	defer e.Close()
	l = e.Topic("clean").Partition(0)
	if n := l.producers.replayed; n != 0 {
		t.Fatalf("clean restart replayed %d batches", n)
	}
	for i := 35; i < 40; i++ {
		info, err := l.Append(idemBatch(t, 5, 0, int32(2*i), 2), 0)
		if err != nil || !info.Duplicate || info.BaseOffset != offs[i] {
			t.Fatalf("retry %d after restart: %+v %v, want duplicate at %d", i, info, err, offs[i])
		}
	}
	runSteps(t, l, []produceStep{
		{name: "old epoch after restart", pid: 6, epoch: 1, seq: 0, n: 1, want: ErrInvalidProducerEpoch, dupOf: -1},
		{name: "gap after restart", pid: 5, seq: 81, n: 1, want: ErrOutOfOrderSequence, dupOf: -1},
		{name: "next after restart", pid: 5, seq: 80, n: 1, dupOf: -1, offset: end},
	})
}

// TestProducerStateCrashRestart: a copy of a running engine's directory
// (what SIGKILL leaves) rebuilds the state from the newest snapshot (the
// last roll) plus the log after it.
func TestProducerStateCrashRestart(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	l := mustTopic(t, e, "crash", 1, smallConfig()).Partition(0)
	var offs []int64
	for i := int32(0); i < 60; i++ {
		for pid := int64(1); pid <= 3; pid++ {
			info := mustAppend(t, l, idemBatch(t, pid, 0, 2*i, 2))
			if pid == 2 {
				offs = append(offs, info.BaseOffset)
			}
		}
	}
	if err := waitDurable(t, l, l.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
	want := l.Producers()
	image := filepath.Join(t.TempDir(), "image")
	copyDir(t, dir, image)
	e.Close()

	snaps := snapshotFiles(t, filepath.Join(image, "crash-0"))
	if len(snaps) == 0 {
		t.Fatal("no snapshot was written at the rolls")
	}
	e2 := openEngine(t, image, nil)
	defer e2.Close()
	l2 := e2.Topic("crash").Partition(0)
	if got := l2.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("rebuilt state\n%+v\nwant\n%+v", got, want)
	}
	if n := l2.producers.replayed; n == 0 || n >= 180 {
		t.Fatalf("replayed %d batches; want the tail after the newest snapshot only", n)
	}
	expectDuplicates(t, l2, 2, 110, offs[55:])
	runSteps(t, l2, []produceStep{{name: "continue", pid: 2, seq: 120, n: 1, dupOf: -1, offset: l2.LogEndOffset()}})
}

// TestProducerSnapshotFallback: a torn newest snapshot and one above the
// log end are ignored and deleted; the state comes from the log.
func TestProducerSnapshotFallback(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	l := mustTopic(t, e, "fb", 1, smallConfig()).Partition(0)
	for i := int32(0); i < 50; i++ {
		mustAppend(t, l, idemBatch(t, 4, 0, i, 1))
	}
	want := l.Producers()
	end := l.LogEndOffset()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "fb-0")
	// Tear the newest (at the log end) and plant one from the future.
	newest := segmentFileName(pdir, end, snapshotSuffix)
	data, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newest, data[:len(data)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	future := segmentFileName(pdir, end+100, snapshotSuffix)
	if err := os.WriteFile(future, encodeProducerSnapshot(end+100, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, nil)
	defer e.Close()
	l = e.Topic("fb").Partition(0)
	if got := l.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("state %+v, want %+v", got, want)
	}
	if l.producers.replayed == 0 {
		t.Fatal("nothing replayed although the newest snapshot was torn")
	}
	for _, p := range []string{newest, future} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s should have been deleted: %v", filepath.Base(p), err)
		}
	}
	runSteps(t, l, []produceStep{{name: "dup after fallback", pid: 4, seq: 49, n: 1, dupOf: 49}})
}

// TestProducerExpiry: a producer idle for producer.id.expiration.ms is
// forgotten, in memory and across a restart.
func TestProducerExpiry(t *testing.T) {
	dir := t.TempDir()
	clock := newFakeClock(1_000_000)
	opts := func(o *Options) { o.Now = clock.Now; o.ProducerIDExpirationMs = 60_000 }
	e := openEngine(t, dir, opts)
	l := mustTopic(t, e, "exp", 1, nil).Partition(0)
	mustAppend(t, l, idemBatch(t, 1, 5, 0, 1))
	clock.Advance(30_000)
	mustAppend(t, l, idemBatch(t, 2, 0, 0, 1))
	clock.Advance(30_000) // producer 1 idle 60 s: gone; producer 2 idle 30 s
	if p := l.Producers(); len(p) != 1 || p[0].ProducerID != 2 {
		t.Fatalf("after 60 s: %+v", p)
	}
	// Forgotten: an older epoch and any sequence are accepted again.
	runSteps(t, l, []produceStep{{name: "expired producer", pid: 1, epoch: 0, seq: 17, n: 1, dupOf: -1, offset: 2}})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(45_000) // producer 2 idle 75 s; producer 1 idle 45 s
	e = openEngine(t, dir, opts)
	defer e.Close()
	l = e.Topic("exp").Partition(0)
	if p := l.Producers(); len(p) != 1 || p[0].ProducerID != 1 || p[0].LastSequence != 17 {
		t.Fatalf("after restart: %+v", p)
	}
	if _, ok := l.producers.entries[2]; ok {
		t.Fatal("expired producer 2 still in memory after Open")
	}
}

// TestProducerDuplicateLogAppendTime: a retry on a LogAppendTime topic
// gets the append time of the original write, as Kafka answers.
func TestProducerDuplicateLogAppendTime(t *testing.T) {
	clock := newFakeClock(7_000_000)
	e := openEngine(t, t.TempDir(), func(o *Options) { o.Now = clock.Now })
	defer e.Close()
	l := mustTopic(t, e, "lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"}).Partition(0)
	first := mustAppend(t, l, idemBatch(t, 2, 0, 0, 3))
	clock.Advance(5000)
	again := mustAppend(t, l, idemBatch(t, 2, 0, 0, 3))
	if first.LogAppendTime != 7_000_000 || !again.Duplicate || again.LogAppendTime != first.LogAppendTime || again.BaseOffset != 0 {
		t.Fatalf("first %+v, retry %+v", first, again)
	}
}

// TestProducerPeriodicSnapshot: a log with producers snapshots on append
// every 30 s of the engine clock, so a crash replays little; a new log's
// first append writes none (its first is due within the interval).
func TestProducerPeriodicSnapshot(t *testing.T) {
	dir := t.TempDir()
	clock := newFakeClock(5_000_000)
	e := openEngine(t, dir, func(o *Options) { o.Now = clock.Now })
	l := mustTopic(t, e, "periodic", 1, nil).Partition(0)
	for i := int32(0); i < 10; i++ {
		mustAppend(t, l, idemBatch(t, 1, 0, i, 1))
	}
	pdir := filepath.Join(dir, "periodic-0")
	if got := snapshotFiles(t, pdir); len(got) != 0 {
		t.Fatalf("snapshots %v after a new log's first appends, want none", got)
	}
	clock.Advance(producerSnapshotIntervalMs)
	mustAppend(t, l, idemBatch(t, 1, 0, 10, 1))
	if got := snapshotFiles(t, pdir); len(got) != 1 || got[0] != 11 {
		t.Fatalf("snapshots %v, want [11]", got)
	}
	mustAppend(t, l, idemBatch(t, 1, 0, 11, 1))
	if err := waitDurable(t, l, 11); err != nil {
		t.Fatal(err)
	}
	image := filepath.Join(t.TempDir(), "image")
	copyDir(t, dir, image) // a crash now
	e.Close()
	e2 := openEngine(t, image, func(o *Options) { o.Now = clock.Now })
	defer e2.Close()
	l2 := e2.Topic("periodic").Partition(0)
	if n := l2.producers.replayed; n != 1 {
		t.Fatalf("replayed %d batches after the crash, want 1 (the one after the last snapshot)", n)
	}
	runSteps(t, l2, []produceStep{{name: "dup after crash", pid: 1, seq: 11, n: 1, dupOf: 11}})
}

// TestProducerSnapshotsSpread: the logs of a new topic do not all write
// their periodic snapshot in the same produce request: half an interval
// after the topic's creation some have, some have not.
func TestProducerSnapshotsSpread(t *testing.T) {
	dir := t.TempDir()
	clock := newFakeClock(5_000_000)
	e := openEngine(t, dir, func(o *Options) { o.Now = clock.Now })
	defer e.Close()
	const parts = 40
	tp := mustTopic(t, e, "spread", parts, nil)
	round := func(seq int32) (snapped int) {
		for p := range int32(parts) {
			mustAppend(t, tp.Partition(p), idemBatch(t, int64(p+1), 0, seq, 1))
			if len(snapshotFiles(t, filepath.Join(dir, partitionDirName("spread", p)))) > 0 {
				snapped++
			}
		}
		return snapped
	}
	if n := round(0); n != 0 {
		t.Fatalf("%d of %d new logs wrote a snapshot at their first append", n, parts)
	}
	clock.Advance(producerSnapshotIntervalMs / 2)
	if n := round(1); n == 0 || n == parts {
		t.Fatalf("%d of %d logs had written a snapshot half an interval after the topic's creation; want some, not all", n, parts)
	}
}

// TestProducerFollowerCatchUp: batches appended as a follower are replayed
// into the state before the next leader append, so a new leader answers
// retries of them as duplicates; a truncation rebuilds the state.
func TestProducerFollowerCatchUp(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	leader := mustTopic(t, e, "lead", 1, nil).Partition(0)
	follower := mustTopic(t, e, "follow", 1, nil).Partition(0)
	var all []byte
	for i := int32(0); i < 8; i++ {
		b := idemBatch(t, 3, 0, i, 1)
		mustAppend(t, leader, b) // patches the offset into b
		all = append(all, b...)
	}
	if _, err := follower.AppendAsFollower(all); err != nil {
		t.Fatal(err)
	}
	// Applied from memory on append (followProducers): no replay from the
	// segment is left for the roll's snapshot or the next leader append.
	follower.mu.Lock()
	covered, replayed := follower.producers.coveredEnd, follower.producers.replayed
	follower.mu.Unlock()
	if end := follower.LogEndOffset(); covered != end || replayed != 8 {
		t.Fatalf("after the follower append: producer state covers %d of log end %d, %d batches applied, want all 8", covered, end, replayed)
	}
	runSteps(t, follower, []produceStep{
		{name: "retry after promotion", pid: 3, seq: 7, n: 1, dupOf: 7},
		{name: "next after promotion", pid: 3, seq: 8, n: 1, dupOf: -1, offset: 8},
	})
	// A divergent tail: truncate to 5, then the new leader's history
	// (producer 4) refills the log past where the state was.
	if _, err := follower.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	other := mustTopic(t, e, "other", 1, nil).Partition(0)
	mustAppend(t, other, batchOf(t, 5, 10, 1, 1))
	var tail []byte
	for i := int32(0); i < 8; i++ {
		b := idemBatch(t, 4, 0, i, 1)
		mustAppend(t, other, b)
		tail = append(tail, b...)
	}
	if _, err := follower.AppendAsFollower(tail); err != nil {
		t.Fatal(err)
	}
	runSteps(t, follower, []produceStep{
		// Offset 8 now holds producer 4's record: producer 3's batch at 8
		// was truncated and must not be answered as a duplicate.
		{name: "truncated batch is no duplicate", pid: 3, seq: 8, n: 1, want: ErrOutOfOrderSequence, dupOf: -1},
		{name: "producer 3 continues after the cut", pid: 3, seq: 5, n: 1, dupOf: -1, offset: 13},
		{name: "new history deduplicates", pid: 4, seq: 7, n: 1, dupOf: 12},
	})
	// Emptied and restarted far ahead: nothing of the old state remains.
	follower.mu.Lock()
	follower.snapshotProducers()
	follower.mu.Unlock()
	if err := follower.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if p := follower.Producers(); len(p) != 0 {
		t.Fatalf("producers after TruncateFullyAndStartAt: %+v", p)
	}
	if snaps := snapshotFiles(t, follower.dir); len(snaps) != 0 {
		t.Fatalf("snapshots after TruncateFullyAndStartAt: %v", snaps)
	}
	runSteps(t, follower, []produceStep{{name: "after restart at 100", pid: 4, seq: 7, n: 1, dupOf: -1, offset: 100}})
}

// TestProducerStateMatchesReplay: the state built by Append equals the state
// a replay of the whole log builds (the plain version).
func TestProducerStateMatchesReplay(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	defer e.Close()
	l := mustTopic(t, e, "prop", 1, smallConfig()).Partition(0)
	rng := rand.New(rand.NewSource(1))
	seqs := map[int64]int32{}
	epochs := map[int64]int16{}
	for i := 0; i < 400; i++ {
		pid := int64(rng.Intn(6))
		if rng.Intn(20) == 0 {
			epochs[pid]++
			seqs[pid] = 0
		}
		n := 1 + rng.Intn(3)
		b := idemBatch(t, pid, epochs[pid], seqs[pid], n)
		if rng.Intn(4) == 0 && seqs[pid] > 0 { // a retry of the previous batch
			b = idemBatch(t, pid, epochs[pid], seqs[pid]-1, 1)
		}
		info, err := l.Append(b, 0)
		if err != nil && !errors.Is(err, ErrOutOfOrderSequence) {
			t.Fatal(err)
		}
		if err == nil && !info.Duplicate {
			seqs[pid] += int32(n)
		}
	}
	l.mu.Lock()
	want := l.producers.entries
	var fresh Log
	fresh.e, fresh.topic, fresh.dir = l.e, l.topic, l.dir
	fresh.segs.Store(l.segs.Load())
	fresh.logEnd.Store(l.logEnd.Load())
	err := fresh.replayProducers(0, l.logEnd.Load(), e.nowMs())
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh.producers.entries) != len(want) {
		t.Fatalf("replay found %d producers, append recorded %d", len(fresh.producers.entries), len(want))
	}
	for pid, w := range want {
		g := fresh.producers.entries[pid]
		if g == nil {
			t.Fatalf("producer %d missing from the replay", pid)
		}
		g.lastMs = w.lastMs // the clock of the append vs the replay
		if !reflect.DeepEqual(*g, *w) {
			t.Fatalf("producer %d: replay %+v, append %+v", pid, *g, *w)
		}
	}
}

// TestProducerSnapshotRoundTrip: encode/decode keeps every field.
func TestProducerSnapshotRoundTrip(t *testing.T) {
	entries := map[int64]*producerEntry{}
	rng := rand.New(rand.NewSource(2))
	off := int64(0)
	for pid := int64(0); pid < 50; pid++ {
		e := newProducerEntry()
		e.epoch, e.lastMs = int16(rng.Intn(100)), rng.Int63n(1<<40)
		for j := 0; j < rng.Intn(8); j++ {
			n := int64(1 + rng.Intn(10))
			e.add(e.epoch, producerBatch{firstSeq: int32(j), lastSeq: int32(j), firstOffset: off, lastOffset: off + n - 1, maxTimestamp: off})
			off += n
		}
		entries[pid*1000] = e
	}
	data := encodeProducerSnapshot(off, entries)
	got, dec, err := decodeProducerSnapshot(data)
	if err != nil || got != off {
		t.Fatalf("decode: %d %v", got, err)
	}
	for pid, e := range entries {
		d := dec[pid]
		if d == nil || d.epoch != e.epoch || d.lastMs != e.lastMs || d.n != e.n {
			t.Fatalf("producer %d: %+v, want %+v", pid, d, e)
		}
		for i := 0; i < int(e.n); i++ {
			if *d.at(i) != *e.at(i) {
				t.Fatalf("producer %d batch %d: %+v, want %+v", pid, i, *d.at(i), *e.at(i))
			}
		}
	}
	for i := range data { // every single-byte change is caught
		c := append([]byte(nil), data...)
		c[i] ^= 0x40
		if _, _, err := decodeProducerSnapshot(c); err == nil {
			t.Fatalf("flipping byte %d went unnoticed", i)
		}
	}
}

// TestProducerCheckNoAllocs: checking and recording a batch of a known
// producer allocates nothing.
func TestProducerCheckNoAllocs(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "alloc", 1, nil).Partition(0)
	mustAppend(t, l, idemBatch(t, 9, 0, 0, 1))
	b := idemBatch(t, 9, 0, 1, 1)
	seq := int32(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	realEnd := l.logEnd.Load()
	defer l.logEnd.Store(realEnd) // nothing was written
	allocs := testing.AllocsPerRun(200, func() {
		binaryPutSeq(b, seq)
		if _, done, err := l.checkProducers(b, 0, nil); done || err != nil {
			t.Fatalf("check: %v", err)
		}
		end := l.logEnd.Load()
		l.logEnd.Store(end + 1) // as Append does
		l.recordProducers(end, end+1, 0, -1)
		seq++
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per batch", allocs)
	}
}

// binaryPutSeq rewrites a batch's base sequence (the CRC goes stale: only
// for calls that skip validation).
func binaryPutSeq(b []byte, seq int32) {
	b[53], b[54], b[55], b[56] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
}

// FuzzProducerSnapshot: decoding arbitrary bytes never panics, and whatever
// decodes re-encodes to a snapshot that decodes to the same state.
func FuzzProducerSnapshot(f *testing.F) {
	e := newProducerEntry()
	e.epoch = 3
	e.add(3, producerBatch{firstSeq: 0, lastSeq: 4, firstOffset: 10, lastOffset: 14, maxTimestamp: 99})
	f.Add(encodeProducerSnapshot(20, map[int64]*producerEntry{7: e}))
	f.Add(encodeProducerSnapshot(0, nil))
	f.Add([]byte{0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		off, entries, err := decodeProducerSnapshot(data)
		if err != nil {
			return
		}
		again := encodeProducerSnapshot(off, entries)
		off2, entries2, err := decodeProducerSnapshot(again)
		if err != nil || off2 != off || !reflect.DeepEqual(entries, entries2) {
			t.Fatalf("re-encoded snapshot differs: %v", err)
		}
		for _, e := range entries {
			for i := 0; i < int(e.n); i++ {
				if b := e.at(i); b.lastOffset >= off || b.firstOffset > b.lastOffset {
					t.Fatalf("decoded batch %+v outside snapshot offset %d", *b, off)
				}
			}
		}
	})
}

// BenchmarkProducerCheck measures the producer hooks of Append (check under
// mu, record after the write) for a batch without a producer id (the
// baseline) and for a known idempotent producer, per batch.
func BenchmarkProducerCheck(b *testing.B) {
	for _, idem := range []bool{false, true} {
		b.Run(fmt.Sprintf("idempotent=%v", idem), func(b *testing.B) {
			e := openEngine(b, b.TempDir(), nil)
			defer e.Close()
			l := mustTopic(b, e, "bench", 1, nil).Partition(0)
			batch := batchOf(b, 10, 100, 1, 0)
			if idem {
				mustAppend(b, l, idemBatch(b, 9, 0, 0, 1))
				batch = idemBatch(b, 9, 0, 1, 10)
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			realEnd := l.logEnd.Load()
			defer l.logEnd.Store(realEnd)
			seq := int32(1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				binaryPutSeq(batch, seq)
				if _, done, err := l.checkProducers(batch, 0, nil); done || err != nil {
					b.Fatal(err)
				}
				end := l.logEnd.Load()
				l.logEnd.Store(end + 10)
				l.recordProducers(end, end+10, 0, -1)
				seq += 10
			}
		})
	}
}

// modelProducer is the plain version of a producer's state: every batch of
// the current epoch, not a five-slot ring.
type modelProducer struct {
	known   bool
	epoch   int16
	batches []producerBatch
}

// modelAppend applies Kafka's rules to the model and returns what Append
// must answer: dup >= 0 (a duplicate of the batch at offset dup), err, or
// acceptance at end.
func modelAppend(m *modelProducer, epoch int16, seq int32, n int, end int64) (dup int64, err error) {
	last := incrementSequence(seq, int32(n-1))
	if m.known && epoch == m.epoch {
		k := max(len(m.batches)-producerBatchesRetained, 0)
		for _, b := range m.batches[k:] {
			if b.firstSeq == seq && b.lastSeq == last {
				return b.firstOffset, nil
			}
		}
	}
	switch {
	case m.known && epoch < m.epoch:
		return -1, ErrInvalidProducerEpoch
	case m.known && epoch > m.epoch && seq != 0:
		return -1, ErrOutOfOrderSequence
	case m.known && epoch == m.epoch:
		prev := int32(noSequence)
		if len(m.batches) > 0 {
			prev = m.batches[len(m.batches)-1].lastSeq
		}
		if !inSequence(prev, seq) {
			return -1, ErrOutOfOrderSequence
		}
	}
	if !m.known || epoch != m.epoch {
		m.known, m.epoch, m.batches = true, epoch, nil
	}
	m.batches = append(m.batches, producerBatch{firstSeq: seq, lastSeq: last, firstOffset: end, lastOffset: end + int64(n) - 1})
	return -1, nil
}

// TestProducerMatchesModel drives random appends, retries (including of
// evicted batches), gaps, epoch bumps, stale epochs and sequence wraps
// through the engine and the plain model, with clean restarts and crash
// copies in between: every answer must match.
func TestProducerMatchesModel(t *testing.T) {
	const seed = 42
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	defer func() { e.Close() }()
	l := mustTopic(t, e, "model", 1, smallConfig()).Partition(0)
	models := map[int64]*modelProducer{}
	nextSeq := map[int64]int32{}
	end := int64(0)
	outcomes := map[string]int{}
	for op := 0; op < 1500; op++ {
		if op%250 == 249 { // restart: clean, or from a crash copy
			if err := waitDurable(t, l, end-1); err != nil {
				t.Fatal(err)
			}
			if rng.Intn(2) == 0 {
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				image := filepath.Join(t.TempDir(), "image")
				copyDir(t, dir, image)
				e.Close()
				dir = image
			}
			e = openEngine(t, dir, nil)
			l = e.Topic("model").Partition(0)
		}
		pid := int64(rng.Intn(4))
		m := models[pid]
		if m == nil {
			m = &modelProducer{}
			models[pid] = m
			if pid == 3 {
				nextSeq[pid] = math.MaxInt32 - 40 // this one wraps
			}
		}
		epoch, seq, n := m.epoch, nextSeq[pid], 1+rng.Intn(3)
		switch r := rng.Intn(20); {
		case r < 4 && len(m.batches) > 0: // retry one of the last seven batches
			b := m.batches[max(len(m.batches)-1-rng.Intn(7), 0)]
			seq, n = b.firstSeq, int(int64(b.lastSeq-b.firstSeq)+1)
			if b.lastSeq < b.firstSeq { // crossed the wrap
				n = int(int64(b.lastSeq) + int64(math.MaxInt32) - int64(b.firstSeq) + 2)
			}
		case r == 4:
			seq = incrementSequence(seq, int32(1+rng.Intn(3))) // a gap
		case r == 5 && epoch > 0:
			epoch-- // a zombie
		case r == 6 && pid != 3:
			epoch, seq = epoch+1, 0 // an epoch bump
		case r == 7 && pid != 3:
			epoch, seq = epoch+1, 3 // a bump that does not restart sequences
		}
		dup, wantErr := modelAppend(m, epoch, seq, n, end)
		info, err := l.Append(idemBatch(t, pid, epoch, seq, n), 0)
		switch {
		case wantErr != nil:
			outcomes[wantErr.Error()]++
			if !errors.Is(err, wantErr) {
				t.Fatalf("op %d (seed %d) pid %d epoch %d seq %d n %d: err %v, want %v", op, seed, pid, epoch, seq, n, err, wantErr)
			}
		case err != nil:
			t.Fatalf("op %d pid %d epoch %d seq %d n %d: %v", op, pid, epoch, seq, n, err)
		case dup >= 0:
			outcomes["duplicate"]++
			if !info.Duplicate || info.BaseOffset != dup {
				t.Fatalf("op %d pid %d epoch %d seq %d n %d: %+v, want a duplicate of %d", op, pid, epoch, seq, n, info, dup)
			}
		default:
			if info.Duplicate || info.BaseOffset != end {
				t.Fatalf("op %d pid %d epoch %d seq %d n %d: %+v, want appended at %d", op, pid, epoch, seq, n, info, end)
			}
			end += int64(n)
			nextSeq[pid] = incrementSequence(seq, int32(n))
			outcomes["appended"]++
		}
	}
	t.Logf("outcomes: %v", outcomes)
	for _, k := range []string{"appended", "duplicate", ErrOutOfOrderSequence.Error(), ErrInvalidProducerEpoch.Error()} {
		if outcomes[k] < 20 {
			t.Fatalf("only %d of %q: the run did not exercise it", outcomes[k], k)
		}
	}
	if nextSeq[3] > 10_000 { // producer 3 keeps its epoch from MaxInt32-40
		t.Fatalf("producer 3 at sequence %d never wrapped", nextSeq[3])
	}
	if l.LogEndOffset() != end {
		t.Fatalf("log end %d, model %d", l.LogEndOffset(), end)
	}
}
