package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/record"
)

// TestCrashMidCompaction runs seeded rounds of a compacted topic wholly
// over a vfs.MemFS (segment data, indexes, checkpoints, the cleaner's
// .cleaned and .swap files, directories): acknowledged keyed updates and
// tombstones, then the cleaner compacting while a writer goes on
// appending, and the power cut at a random operation of the cleaning pass
// or a few operations after one of the swap's steps ("cleaned", "swap",
// "deleted"); the restart finds the MemFS as the crash left it (only
// synced state, or in some rounds a seeded part of the unsynced writes
// with the last one torn and of the directory changes, in order or not). After the restart: no .cleaned, .swap or
// .deleted file is left; every record read passes its CRC, sits at an
// offset the log assigned to that very record, and offsets only grow;
// every key's latest acknowledged write is still its last record (or a
// later write of it is; a tombstone may be gone, never resurrect an older
// value); the log end is past every acknowledged offset; a new cleaning
// pass keeps every key's last record; the log takes appends. Nothing
// reaches the operating system's file system.
func TestCrashMidCompaction(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 60
	}
	root := t.TempDir()
	var st compactCrashStats
	for seed := range seeds {
		compactCrashRound(t, filepath.Join(root, fmt.Sprint(seed)), uint64(seed), &st)
		if t.Failed() {
			t.Fatalf("seed %d failed", seed)
		}
	}
	if ents, err := os.ReadDir(root); err != nil || len(ents) != 0 {
		t.Fatalf("the engine reached the operating system's file system: %d entries in %s (%v)", len(ents), root, err)
	}
	t.Logf("%d rounds: %d cut inside the cleaning pass (%d after its commit point), %d after it; the crashed MemFS held .cleaned files %d times, .swap files %d times; %d acknowledged keys checked, %d records removed by the passes before the cut",
		seeds, st.cutInPass, st.cutPastCommit, st.cutAfterPass, st.cleanedLeft, st.swapLeft, st.keys, st.removed)
	if st.cutInPass == 0 || st.cutPastCommit == 0 || st.cleanedLeft == 0 || st.swapLeft == 0 || st.removed == 0 {
		t.Fatal("the cuts never fell inside a cleaning pass, past its commit point, or left the cleaner's files: the test checked too little")
	}
}

// compactCrashStats sums what the rounds exercised.
type compactCrashStats struct {
	cutInPass, cutPastCommit, cutAfterPass int
	cleanedLeft, swapLeft                  int
	keys                                   int
	removed                                int64
}

// sentRecord is a record the log took, at its offset.
type sentRecord struct {
	key   string
	value []byte // nil: a tombstone
}

func compactCrashRound(t *testing.T, dir string, seed uint64, st *compactCrashStats) {
	rng := rand.New(rand.NewPCG(seed, 0xc1ea))
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	open := func(fsys *vfs.MemFS) *Engine {
		return openEngine(t, dir, func(o *Options) {
			o.fs = fsys
			o.Now = clk.Now
			o.RetentionCheckInterval = -1
			o.Cleaner.Disabled = true // the test runs the passes (Topic.Compact)
			o.Cleaner.IOMaxBytesPerSecond = -1
		})
	}
	mfs := newDataFS(t, dir)
	e := open(mfs)
	cfg := compactConfig(400 + rng.IntN(1200))
	cfg["index.interval.bytes"] = fmt.Sprint(64 + rng.IntN(512))
	cfg["segment.index.bytes"] = "4096"
	tp := mustTopic(t, e, "cc", 1, cfg)
	l := tp.Partition(0)

	keys := 4 + rng.IntN(16)
	// Cold keys are written once, early, and never again: a cleaned
	// segment that is lost takes them with it (hot keys' latest records
	// sit near the log end).
	cold, nextCold := 5+rng.IntN(20), 0
	var (
		mu      sync.Mutex
		sent    = map[int64]sentRecord{}
		acked   [][2]int64 // [first, last] offsets of acknowledged batches
		pending sync.WaitGroup
	)
	// appendOne appends one batch of 1-4 keyed records (a tenth of them
	// tombstones) and records its offsets; its ack is recorded when
	// WhenDurable succeeds.
	appendOne := func(i int) error {
		n := 1 + rng.IntN(4)
		recs := make([]testRecord, n)
		for j := range recs {
			recs[j] = testRecord{ts: clk.ms.Load(), key: fmt.Appendf(nil, "k%d", rng.IntN(keys))}
			if rng.IntN(10) != 0 {
				recs[j].value = fmt.Appendf(nil, "v%d-%d-%d", seed, i, j)
			}
			if i >= 0 && i < 1000 && nextCold < cold && rng.IntN(2) == 0 {
				recs[j] = testRecord{ts: clk.ms.Load(), key: fmt.Appendf(nil, "c%d", nextCold), value: fmt.Appendf(nil, "cold-%d", seed)}
				nextCold++
			}
		}
		var b record.Builder // not makeBatch: the writer goroutine must not call t.Fatal
		b.Reset(record.CodecNone, recs[0].ts)
		for _, r := range recs {
			b.Add(r.ts, r.key, r.value, nil)
		}
		batch, err := b.AppendTo(nil)
		if err != nil {
			return err
		}
		info, err := l.Append(batch, 0)
		if err != nil {
			return err
		}
		mu.Lock()
		for j, r := range recs {
			sent[info.BaseOffset+int64(j)] = sentRecord{string(r.key), r.value}
		}
		mu.Unlock()
		pending.Add(1)
		l.WhenDurable(info.LastOffset, func(err error) {
			defer pending.Done()
			if err == nil {
				mu.Lock()
				acked = append(acked, [2]int64{info.BaseOffset, info.LastOffset})
				mu.Unlock()
			}
		})
		return nil
	}

	// Acknowledged history, then a roll past segment.ms: everything
	// before the filler is cleanable.
	for i := range 20 + rng.IntN(60) {
		if err := appendOne(i); err != nil {
			t.Fatalf("seed %d: append: %v", seed, err)
		}
	}
	clk.Advance(120_000)
	if err := appendOne(-1); err != nil {
		t.Fatalf("seed %d: append: %v", seed, err)
	}
	if err := waitDurable(t, l, l.LogEndOffset()-1); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if rng.IntN(3) == 0 {
		// A first pass completes: the cut falls into a pass over a log
		// already cleaned once (merging cleaned segments, fewer removals).
		s, err := tp.Compact(0)
		if err != nil {
			t.Fatalf("seed %d: first pass: %v", seed, err)
		}
		st.removed += s.RecordsRemoved
		for i := range 5 + rng.IntN(20) {
			if err := appendOne(1000 + i); err != nil {
				t.Fatalf("seed %d: append: %v", seed, err)
			}
		}
		clk.Advance(120_000)
		if err := appendOne(-2); err != nil {
			t.Fatalf("seed %d: append: %v", seed, err)
		}
		if err := waitDurable(t, l, l.LogEndOffset()-1); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}

	// The cut: at a random operation from now, or a few operations past
	// one of the swap's steps.
	var committed bool // the swap's commit point passed (its "swap" step)
	step, cutAfter := "", int64(0)
	if rng.IntN(4) == 0 {
		mfs.PowerOffAfter(rng.Int64N(250))
	} else {
		steps := []string{"cleaned", "swap", "swap", "deleted"}
		step, cutAfter = steps[rng.IntN(len(steps))], rng.Int64N(5)
	}
	e.cl.hook = func(s string) error {
		if s == "swap" {
			committed = true
		}
		if s == step && !mfs.PoweredOff() {
			mfs.PowerOffAfter(cutAfter)
		}
		return nil
	}
	writerDone := make(chan struct{})
	go func() { // appends while the cleaner runs, until the power is lost
		defer close(writerDone)
		for i := range 40 {
			if appendOne(2000+i) != nil {
				return
			}
		}
	}()
	s, cerr := tp.Compact(0)
	cutInPass := mfs.PoweredOff()
	<-writerDone
	if cerr != nil && !cutInPass {
		t.Fatalf("seed %d: pass failed without a power cut: %v", seed, cerr)
	}
	if cerr == nil {
		st.removed += s.RecordsRemoved
	}
	switch {
	case cutInPass && committed:
		st.cutInPass++
		st.cutPastCommit++
	case cutInPass:
		st.cutInPass++
	default:
		st.cutAfterPass++
	}
	// Only synced state, or also a seeded part of the rest: in order
	// (an ordered metadata journal) or any subset of the directory
	// changes (no order without a directory sync).
	keep := rng.IntN(4)
	after := mfs.Crash(vfs.CrashOptions{Seed: seed, KeepUnsynced: keep > 0, Reorder: keep >= 2, Tear: keep > 0})
	_ = e.Close() // offline after the crash: errors expected
	pending.Wait()

	pdir := filepath.Join(dir, partitionDirName("cc", 0))
	if ents, err := after.ReadDir(pdir); err == nil {
		var cleaned, swap bool
		for _, ent := range ents {
			cleaned = cleaned || strings.HasSuffix(ent.Name(), cleanedSuffix)
			swap = swap || strings.HasSuffix(ent.Name(), swapSuffix)
		}
		if cleaned {
			st.cleanedLeft++
		}
		if swap {
			st.swapLeft++
		}
	}

	e2 := open(after)
	defer e2.Close()
	l2 := e2.Topic("cc").Partition(0)
	if ents, err := after.ReadDir(pdir); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	} else {
		for _, ent := range ents {
			if n := ent.Name(); strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) || strings.HasSuffix(n, deletedSuffix) {
				t.Errorf("seed %d: %s left after Open", seed, n)
			}
		}
	}

	mu.Lock()
	defer mu.Unlock()
	// The latest acknowledged write of each key, and the acknowledged end.
	ackedLatest := map[string]int64{}
	ackedEnd := int64(0)
	for _, a := range acked {
		for off := a[0]; off <= a[1]; off++ {
			k := sent[off].key
			if cur, ok := ackedLatest[k]; !ok || off > cur {
				ackedLatest[k] = off
			}
		}
		ackedEnd = max(ackedEnd, a[1]+1)
	}
	last := readCompactedLog(t, l2, seed, sent)
	checkLatest := func(when string, last map[string]int64) {
		for k, a := range ackedLatest {
			g, ok := last[k]
			switch {
			case !ok && sent[a].value == nil:
				// The acknowledged tombstone and what it deleted are gone.
			case !ok:
				t.Errorf("seed %d %s: key %s lost (acknowledged %q at %d)", seed, when, k, sent[a].value, a)
			case g < a:
				t.Errorf("seed %d %s: key %s reads %q from offset %d, acknowledged %q at %d", seed, when, k, sent[g].value, g, sent[a].value, a)
			}
		}
	}
	checkLatest("after the restart", last)
	st.keys += len(ackedLatest)
	if end := l2.LogEndOffset(); end < ackedEnd {
		t.Errorf("seed %d: log end %d after the restart, acknowledged up to %d", seed, end, ackedEnd)
	}

	// A new pass finishes the job and keeps every key's last record.
	if _, err := e2.Topic("cc").Compact(0); err != nil {
		t.Fatalf("seed %d: pass after the restart: %v", seed, err)
	}
	again := readCompactedLog(t, l2, seed, sent)
	for k, off := range last {
		if g, ok := again[k]; sent[off].value != nil && (!ok || g != off) {
			t.Errorf("seed %d: the pass after the restart moved key %s's last record from %d to %d (present %v)", seed, k, off, g, ok)
		}
	}
	checkLatest("after the next pass", again)

	end := l2.LogEndOffset()
	info := mustAppend(t, l2, makeBatch(t, testRecord{ts: clk.ms.Load(), key: []byte("k0"), value: []byte("after")}))
	if info.BaseOffset != end {
		t.Errorf("seed %d: append after recovery at %d, log end was %d", seed, info.BaseOffset, end)
	}
	if err := waitDurable(t, l2, info.LastOffset); err != nil {
		t.Errorf("seed %d: %v", seed, err)
	}
}

// readCompactedLog reads l from its start and returns the offset of each
// key's last record, checking that every batch passes its CRC, every
// record sits at the offset the log gave it (sent) with its key and
// value, and offsets only grow (compaction leaves gaps, never reorders).
func readCompactedLog(t *testing.T, l *Log, seed uint64, sent map[int64]sentRecord) map[string]int64 {
	t.Helper()
	last := map[string]int64{}
	next, prev := l.LogStartOffset(), int64(-1)
	for guard := 0; guard < 100_000; guard++ {
		res, err := l.Read(next, 1<<20, true)
		if err != nil {
			t.Fatalf("seed %d: Read(%d): %v", seed, next, err)
		}
		if len(res.Chunks) == 0 {
			res.Release()
			return last
		}
		data, err := segmentResultBytes(&res)
		res.Release()
		if err != nil {
			t.Fatalf("seed %d: ReadAt: %v", seed, err)
		}
		for rest := data; len(rest) > 0; {
			b, r, h, err := record.Next(rest)
			if err != nil {
				t.Fatalf("seed %d: batch at %d: %v", seed, next, err)
			}
			if !record.CheckCRC(b) {
				t.Fatalf("seed %d: batch at %d fails its CRC", seed, h.BaseOffset)
			}
			err = record.Iterate(b, func(h *record.Header, rec *record.Record) error {
				off := h.BaseOffset + int64(rec.OffsetDelta)
				want, ok := sent[off]
				switch {
				case off <= prev:
					return fmt.Errorf("offset %d after %d", off, prev)
				case !ok:
					return fmt.Errorf("offset %d: record the log never took (key %q)", off, rec.Key)
				case want.key != string(rec.Key) || !bytes.Equal(want.value, rec.Value) || (want.value == nil) != (rec.Value == nil):
					return fmt.Errorf("offset %d holds %q=%q, the log took %q=%q there", off, rec.Key, rec.Value, want.key, want.value)
				}
				prev = off
				last[string(rec.Key)] = off
				return nil
			})
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			next = h.LastOffset() + 1
			rest = r
		}
	}
	t.Fatalf("seed %d: reading %s did not end", seed, l)
	return nil
}
