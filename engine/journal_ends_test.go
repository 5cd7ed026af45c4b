package engine

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// endsOpts: the journal holding segment ends only (Options.JournalEnds),
// over zero-filled O_DIRECT segments with shared flushes.
func endsOpts(o *Options) {
	o.IOBackend, o.JournalBytes, o.JournalEnds = IOBackendUring, JournalMinBytes, true
}

// TestJournalEndsMakesAppendsDurable: with log.io.journal.ends, acks=all
// appends are durable once the journal group holding their segments' ends
// is: the rounds stage end records and never a write record, no shared
// device flush of their own runs (the journal's fdatasync is the flush),
// the HW follows, and everything acknowledged is there after a crash (a
// copy of the directory as the process left it) and after a clean close,
// the journal replaying no bytes into the segments.
func TestJournalEndsMakesAppendsDurable(t *testing.T) {
	requireSharedFlush(t)
	dir := t.TempDir()
	e := openEngine(t, dir, endsOpts)
	if e.jnl == nil || !e.jnlEnds || e.io.dev == nil {
		t.Fatalf("ends mode not on: journal %v, ends %v, shared flush %v", e.jnl != nil, e.jnlEnds, e.io.dev != nil)
	}
	const parts = 8
	tp := mustTopic(t, e, "ends", parts, nil)
	want := appendRoundsDurable(t, tp, parts, 40, 4, 1000, hwCoversDurable(t))
	e.jnl.mu.Lock()
	ends, staged := e.jnl.endRecs, e.jnl.nextSeq
	e.jnl.mu.Unlock()
	if ends == 0 {
		t.Fatal("no end record was staged: the rounds did not go through the journal")
	}
	if ends != staged-1 {
		t.Fatalf("%d records staged, %d of them ends: the journal took record bytes", staged-1, ends)
	}
	if n := e.io.dev.flushes.Load(); n != 0 {
		t.Fatalf("%d shared device flushes ran beside the journal's", n)
	}
	t.Logf("%d end records", ends)

	crash := t.TempDir()
	copyDir(t, dir, crash)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{crash, dir} {
		e2 := openEngine(t, d, endsOpts)
		if r := e2.jnl.replayed; r.written != 0 {
			t.Errorf("%s: the journal replayed record bytes: %+v", d, r)
		}
		tp2 := e2.Topic("ends")
		for p := range parts {
			if err := readHead(tp2.Partition(int32(p)), want[p], false); err != nil {
				t.Errorf("%s: partition %d: %v", d, p, err)
			}
		}
		if err := e2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJournalEndsWhereItRuns: log.io.journal.ends takes effect with the
// journal and shared device flushes, zero-filling fresh segments even with
// log.io.zero.fill=false; without the journal, with one fdatasync per
// segment, or with the pwrite backend the engine opens without it (the
// journal holding the records where there is one), so the key never stops
// a broker from starting.
func TestJournalEndsWhereItRuns(t *testing.T) {
	requireSharedFlush(t)
	for _, c := range []struct {
		name   string
		mutate func(*Options)
		ends   bool
	}{
		{"ends", endsOpts, true},
		{"zero.fill=false", func(o *Options) { endsOpts(o); o.NoZeroFill = true }, true},
		{"no journal", func(o *Options) { endsOpts(o); o.JournalBytes = 0 }, false},
		{"flush.shared=false", func(o *Options) { endsOpts(o); o.DisableSharedFlush = true }, false},
		{"pwrite", func(o *Options) { endsOpts(o); o.IOBackend = IOBackendPwrite }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			e := openEngine(t, dir, c.mutate)
			if e.jnlEnds != c.ends {
				t.Fatalf("ends mode %v, want %v", e.jnlEnds, c.ends)
			}
			if c.ends && !e.io.prewrite(dir) {
				t.Fatal("fresh segments are not zero-filled in ends mode")
			}
			l := mustTopic(t, e, "t", 1, nil).Partition(0)
			for i := range 5 { // a new segment's first round syncs it alone
				info := mustAppend(t, l, batchOf(t, 3, 100, int64(i), i))
				if err := waitDurable(t, l, info.LastOffset); err != nil {
					t.Fatal(err)
				}
			}
			if e.jnl == nil {
				return
			}
			e.jnl.mu.Lock()
			ends, staged := e.jnl.endRecs, e.jnl.nextSeq-1
			e.jnl.mu.Unlock()
			if c.ends != (ends > 0) || (!c.ends && staged == 0) {
				t.Fatalf("%d records staged, %d of them ends; ends mode %v", staged, ends, c.ends)
			}
		})
	}
}

// TestJournalEndsCutLostWriteWithoutZeros: a crash that loses a round's
// write while a later write of the same segment reached the disk, over
// bytes that are not zeros (a recycled file's old bytes, which the zeroed
// header test of the write-once mode cannot tell from damage): recovery
// trusts the durable end the journal's end records vouch for and cuts
// from it (nothing past it was acknowledged) instead of reporting the
// partition corrupt; every acknowledged batch is there. Damage to bytes
// of rounds whose flush completed (a later journal group follows) is
// reported as corruption, not cut: in the middle of the log, and in the
// last batch with nothing valid after it.
func TestJournalEndsCutLostWriteWithoutZeros(t *testing.T) {
	requireSharedFlush(t)
	dir := t.TempDir()
	e := openEngine(t, dir, endsOpts)
	tp := mustTopic(t, e, "lost", 2, nil)
	l := tp.Partition(0)
	var want [][]byte
	var last int64
	for i := range 30 {
		b := batchOf(t, 3, 500, int64(i), i)
		info := mustAppend(t, l, b)
		if err := waitDurable(t, l, info.LastOffset); err != nil {
			t.Fatal(err)
		}
		want, last = append(want, append([]byte(nil), b...)), info.LastOffset
	}
	l.mu.Lock()
	seg := l.active
	l.mu.Unlock()
	durable, path := seg.seg.Durable(), seg.logPath
	crash, damaged := t.TempDir(), t.TempDir()
	copyDir(t, dir, crash)
	copyDir(t, dir, damaged)
	// Rounds of the other partition until one stages an end record (a
	// zero-filled segment's first sync is its own fdatasync): a later
	// journal group, so partition 0's last round is known flushed too.
	other := tp.Partition(1)
	endRecs := func() uint64 {
		e.jnl.mu.Lock()
		defer e.jnl.mu.Unlock()
		return e.jnl.endRecs
	}
	for before, i := endRecs(), 0; endRecs() == before; i++ {
		if i == 10 {
			t.Fatal("ten rounds of partition 1 staged no end record")
		}
		info := mustAppend(t, other, batchOf(t, 1, 10, 0, i))
		if err := waitDurable(t, other, info.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
	tailDamaged := t.TempDir()
	copyDir(t, dir, tailDamaged)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// Damage to an acknowledged round that later groups follow (its flush
	// completed) is damage, though it lies past the recovery point: the
	// partition is reported corrupt, nothing cut.
	// writeAt writes b at pos of the segment file (path) in the copy root.
	writeAt := func(root string, b []byte, pos int64) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(root, strings.TrimPrefix(path, dir)), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, pos); err != nil {
			t.Fatal(err)
		}
	}
	wantCorrupt := func(root, what string) {
		t.Helper()
		e := openEngine(t, root, endsOpts)
		defer e.Close()
		if err := readHead(e.Topic("lost").Partition(0), want, false); err == nil || !strings.Contains(err.Error(), "corrupt") {
			t.Fatalf("damage to %s: %v, want the partition reported corrupt", what, err)
		}
	}
	at := int64(0)
	for _, b := range want[:10] {
		at += int64(len(b))
	}
	writeAt(damaged, bytes.Repeat([]byte{0xa7}, 64), at+30)
	wantCorrupt(damaged, "an acknowledged round")
	// The same for the last round's last batch, with nothing valid after
	// it (which would pass for a torn tail), once a later group shows its
	// round was flushed.
	writeAt(tailDamaged, bytes.Repeat([]byte{0xa7}, 64), durable-int64(len(want[len(want)-1]))+30)
	wantCorrupt(tailDamaged, "the last acknowledged batch")

	// The crash: the round after the last acknowledged one wrote two
	// batches; the first write was lost over old bytes, the second landed.
	cpath := filepath.Join(crash, strings.TrimPrefix(path, dir))
	late := batchOf(t, 3, 500, 99, 99)
	binary.BigEndian.PutUint64(late, uint64(last+4)) // after the lost batch's offsets
	writeAt(crash, append(bytes.Repeat([]byte{0xa7}, 4096), late...), durable)

	e2 := openEngine(t, crash, endsOpts)
	defer e2.Close()
	if end, ok := e2.jnl.replayed.ends[cpath]; !ok || end != durable {
		t.Fatalf("replay trusts %d (%v) for %s, want the durable end %d", end, ok, cpath, durable)
	}
	l2 := e2.Topic("lost").Partition(0)
	if err := readHead(l2, want, false); err != nil {
		t.Fatalf("after the crash: %v", err)
	}
	if end := l2.LogEndOffset(); end != last+1 {
		t.Fatalf("log end %d after the crash, want %d (the lost round cut)", end, last+1)
	}
}

// TestJournalEndsReleasedRound: in the ends mode a round hands its log
// back once its end records are staged (releaseRound), so an append made
// while that round waits for its journal group gets a round of its own at
// once instead of waiting for the group; both publish their ends once
// their groups are durable, and TruncateTo waits for them.
func TestJournalEndsReleasedRound(t *testing.T) {
	g := newGatedEnds(t, "released")
	l := g.l
	waitFor := g.waitFor
	if err := waitDurable(t, l, mustAppend(t, l, batchOf(t, 2, 1000, 0, 1)).LastOffset); err != nil {
		t.Fatal(err)
	}
	r0 := g.endRecs()
	g.blocking.Store(true)
	first := mustAppend(t, l, batchOf(t, 2, 1000, 0, 2)).LastOffset
	waitFor("the first round's end record", func() bool { return g.endRecs() == r0+1 })
	second := mustAppend(t, l, batchOf(t, 2, 1000, 0, 3)).LastOffset
	waitFor("the second round's end record while the first waits for its group", func() bool { return g.endRecs() == r0+2 })
	if d := l.durable.Load(); d > first {
		t.Fatalf("durable to %d while the journal's flush waits", d)
	}
	truncated := make(chan error, 1)
	go func() { _, err := l.TruncateTo(second + 1); truncated <- err }() // a no-op past the end, after lockIdle
	g.open()
	if err := waitDurable(t, l, second); err != nil {
		t.Fatal(err)
	}
	if err := <-truncated; err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	tails, state := l.flushTails, l.flushState
	l.mu.Unlock()
	if tails != 0 || state != flushIdle {
		t.Fatalf("after both rounds: flushTails %d, state %d", tails, state)
	}
}

// TestJournalEndsRoundBehindReleased: while a released round
// (releaseRound) waits for its journal group, a later round of the same
// log that completes without a group (here one with nothing left to write)
// must not publish an end that covers the released round's bytes: they are
// durable only once that group is. The crash test found it (seed 483, an
// acknowledged batch lost when the power cut the released round's group).
func TestJournalEndsRoundBehindReleased(t *testing.T) {
	g := newGatedEnds(t, "behind")
	e, l := g.e, g.l
	waitFor := g.waitFor
	if err := waitDurable(t, l, mustAppend(t, l, batchOf(t, 2, 1000, 0, 1)).LastOffset); err != nil {
		t.Fatal(err)
	}
	hw0 := l.HighWatermark()
	r0 := g.endRecs()
	g.blocking.Store(true)
	last := mustAppend(t, l, batchOf(t, 2, 1000, 0, 2)).LastOffset
	waitFor("the round's end record", func() bool { return g.endRecs() == r0+1 })
	waitFor("the round's release", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.flushTails == 1 && l.flushState == flushIdle
	})
	// A second round with nothing to write: it completes at once.
	syncs := e.syncs.Load()
	l.mu.Lock()
	e.markDirty(l, true)
	l.mu.Unlock()
	waitFor("the empty round", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.flushState == flushIdle
	})
	if s := e.syncs.Load(); s != syncs {
		t.Fatalf("the second round synced %d segments; the test wants one with nothing to write", s-syncs)
	}
	if hw, d := l.HighWatermark(), l.durable.Load(); hw != hw0 || d > hw0 {
		t.Fatalf("HW %d, durable %d while the released round's group waits (before it: %d)", hw, d, hw0)
	}
	g.open()
	if err := waitDurable(t, l, last); err != nil {
		t.Fatal(err)
	}
	waitFor("the released round's completion", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.flushTails == 0 && l.heldEnd == 0
	})
	if hw := l.HighWatermark(); hw != last+1 {
		t.Fatalf("HW %d after the group, want %d", hw, last+1)
	}
}

// TestJournalEndsFromEarlierGroup: a round's end record names as its from
// the end a previous round's record vouches for when that record is in an
// earlier journal group (stagedEnd), even while that group's fdatasync is
// still running and the segment's durable end not yet raised: recovery may
// find only the later record (a checkpoint moved the start past the
// earlier one), and a from that lagged would let it cut acknowledged
// batches as never acknowledged.
func TestJournalEndsFromEarlierGroup(t *testing.T) {
	g := newGatedEnds(t, "from")
	e, l := g.e, g.l
	waitFor := g.waitFor
	b1, b2, b3 := batchOf(t, 2, 1000, 0, 1), batchOf(t, 2, 1000, 0, 2), batchOf(t, 2, 1000, 0, 3)
	if err := waitDurable(t, l, mustAppend(t, l, b1).LastOffset); err != nil {
		t.Fatal(err)
	}
	r0 := g.endRecs()
	g.blocking.Store(true)
	mustAppend(t, l, b2)
	waitFor("the first round's end record", func() bool { return g.endRecs() == r0+1 })
	waitFor("the writer taking its group", func() bool { e.jnl.mu.Lock(); defer e.jnl.mu.Unlock(); return e.jnl.stage.count == 0 })
	last := mustAppend(t, l, b3).LastOffset
	waitFor("the second round's end record", func() bool { return g.endRecs() == r0+2 })
	e.jnl.mu.Lock()
	st := e.jnl.stage
	count := st.count
	var pos, from int64 = -1, -1
	if count == 1 {
		r := st.buf[journalGroupHdr:]
		pos = int64(binary.BigEndian.Uint64(r[40:]))
		from = int64(binary.BigEndian.Uint64(r[journalRecHdr+len(l.topic):]))
	}
	e.jnl.mu.Unlock()
	if count != 1 {
		t.Fatalf("the next stage holds %d records, want the second round's end record alone", count)
	}
	if want := int64(len(b1) + len(b2)); from != want || pos != want+int64(len(b3)) {
		t.Fatalf("the second round's end record: from %d, end %d; want from %d (the first round's end), end %d", from, pos, want, want+int64(len(b3)))
	}
	g.open()
	if err := waitDurable(t, l, last); err != nil {
		t.Fatal(err)
	}
}

// gatedEnds is an ends-mode engine whose journal fdatasyncs wait at a
// gate while blocking is set, with one single-partition topic.
type gatedEnds struct {
	t        *testing.T
	e        *Engine
	l        *Log
	blocking atomic.Bool
	gate     chan struct{}
	opened   bool
}

func newGatedEnds(t *testing.T, topic string) *gatedEnds {
	t.Helper()
	requireSharedFlush(t)
	g := &gatedEnds{t: t, gate: make(chan struct{})}
	g.e = openEngine(t, t.TempDir(), func(o *Options) {
		endsOpts(o)
		o.syncHook = func(path string) error { // the journal's fdatasync waits at the gate
			if g.blocking.Load() && strings.Contains(path, journalDirName) {
				<-g.gate
			}
			return nil
		}
	})
	t.Cleanup(func() { g.e.Close() })
	t.Cleanup(g.open) // runs first: a failed test must not leave Close waiting at the gate
	g.l = mustTopic(t, g.e, topic, 1, nil).Partition(0)
	return g
}

// open lets the journal's fdatasyncs through (once; the test's goroutine
// or its cleanup).
func (g *gatedEnds) open() {
	if !g.opened {
		g.opened = true
		close(g.gate)
	}
}

// endRecs is the count of end records staged so far.
func (g *gatedEnds) endRecs() uint64 {
	g.e.jnl.mu.Lock()
	defer g.e.jnl.mu.Unlock()
	return g.e.jnl.endRecs
}

// waitFor polls cond; a minute without it is a hang, not a timing check.
func (g *gatedEnds) waitFor(what string, cond func() bool) {
	g.t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			g.t.Fatalf("still waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestJournalModeSwitchAfterCrash: a data directory left by a crash in one
// journal mode opens in the other with every acknowledged batch, as an
// upgrade across the default's change (records to ends) or a switch back
// needs: replay writes the records' bytes and trusts the ends whatever
// the mode it runs in.
func TestJournalModeSwitchAfterCrash(t *testing.T) {
	requireSharedFlush(t)
	records := func(o *Options) { o.IOBackend, o.JournalBytes = IOBackendUring, JournalMinBytes }
	for _, c := range []struct {
		name     string
		from, to func(*Options)
		replays  bool // the segments lack bytes the journal's records hold
	}{
		{"records to ends", records, endsOpts, true},
		{"ends to records", endsOpts, records, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			e := openEngine(t, dir, c.from)
			const parts = 4
			want := appendRoundsDurable(t, mustTopic(t, e, "switch", parts, nil), parts, 20, 3, 700, nil)
			crash := t.TempDir()
			copyDir(t, dir, crash) // the files as a SIGKILL leaves them
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e2 := openEngine(t, crash, c.to)
			defer e2.Close()
			if w := e2.jnl.replayed.written; (w > 0) != c.replays {
				t.Fatalf("the journal replayed %d writes", w)
			}
			tp2 := e2.Topic("switch")
			for p := range parts {
				if err := readHead(tp2.Partition(int32(p)), want[p], false); err != nil {
					t.Errorf("partition %d: %v", p, err)
				}
			}
		})
	}
}
