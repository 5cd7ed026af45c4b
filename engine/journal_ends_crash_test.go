package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/vfs"
)

// The ends mode's crash test (Options.JournalEnds, journal.go "With
// Options.JournalEnds"): the engine wholly on a vfs.MemFS with its device
// cache on (SetDeviceCache: overwrites of durable blocks wait in a cache
// shared by every file until any file's fsync flushes it; everything else
// needs its own sync), segment files zero-filled ahead through the test
// layer (endsfiles_test.go), so that the journal group's fdatasync of a
// round's end records is the one flush that makes the round's segment
// writes durable, as on a real disk.
//
// Each run (one seed): several partitions, two producers appending
// batches of random sizes, acknowledgements only from WhenDurable; the
// power goes off after a random number of file system operations
// (PowerOffAfter over the run's operation count: mid-round, between a
// segment write and its end record, in a zero-fill step, in a journal
// group write or its flush, in a segment roll, while the journal's writer
// moves into its next file after a checkpoint) or after the last append.
// The crash keeps flushed writes and drops or keeps every other unsynced
// change on its own, tearing some at 512-byte sectors. The engine then
// reopens over what survived and the run checks:
//
//   - every acknowledged batch is there, at its offset, with its bytes;
//   - offsets run from 0 without a gap, every batch passing its CRC, and
//     the HW is the log end;
//   - every batch served is one the producers appended (no stale or
//     invented bytes);
//   - what is served is stable: a second power loss right after that
//     recovery (unsynced changes of the recovery dropped or kept at
//     random) keeps every batch served after the first, and a clean close
//     and reopen then serves exactly the same log;
//   - the log takes appends at its end.
//
// STRATA_ENDS_CRASH_SEEDS sets the number of runs (default
// endsCrashSeeds, -short endsCrashShort) and STRATA_ENDS_CRASH_FIRST the
// first seed; a failed run is reported by its seed, and the test stops
// after STRATA_ENDS_CRASH_MAXFAIL failed runs (default 3). Scheduling
// varies between runs of one seed (flush workers, the journal's writer),
// so a seed names a workload and a cut, not one interleaving.
//
// A segment with no end record at or past the journal's start (a new
// segment, whose first round syncs itself, or one whose records a
// checkpoint passed) can lose an early write of its next, unacknowledged
// round, wholly or torn at a sector, while a later write of that round
// lands. Recovery cuts that as a lost write (walkSegment: in ends mode a
// bad batch past the recovery point is one); before it did, such runs
// reported the partition corrupt (1 run in 2,000 with zeros, 1 in 100 with
// old bytes).
//
// Odd seeds, and every seed with STRATA_ENDS_CRASH_STALE=1, fill segment reservations with old bytes
// instead of zeros (endsLayer.stale: a recycled segment file's old bytes,
// engine/recycle.go), where a lost write always leaves non-zero bytes and
// the trusted ends are what recovery cuts by.
func TestJournalEndsCrash(t *testing.T) {
	defer func(v int64) { journalMinBytes = v }(journalMinBytes)
	journalMinBytes = journalFiles * (16 << 10) // rounds go round the journal: checkpoints move its start
	seeds := endsCrashSeeds
	if testing.Short() {
		seeds = endsCrashShort
	}
	seeds = envInt(t, "STRATA_ENDS_CRASH_SEEDS", seeds)
	maxFail := envInt(t, "STRATA_ENDS_CRASH_MAXFAIL", 3)
	first := envInt(t, "STRATA_ENDS_CRASH_FIRST", 0)
	root := t.TempDir() // stays empty: every file is on the runs' MemFS

	var st endsCrashStats
	st.cuts = map[string]int{}
	// One run without a power loss measures the workload's operations:
	// the cut falls uniformly in a little more than that.
	calib := endsCrashRun(t, filepath.Join(root, "calibration"), 1<<40, 0, &endsCrashStats{cuts: map[string]int{}})
	if t.Failed() {
		t.FailNow()
	}
	var failed []int
	for seed := first; seed < first+seeds && len(failed) < maxFail; seed++ {
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			endsCrashRun(t, filepath.Join(root, strconv.Itoa(seed)), uint64(seed), calib*6/5, &st)
		})
		if !ok {
			failed = append(failed, seed)
		}
	}
	if ents, err := os.ReadDir(root); err != nil || len(ents) != 0 {
		t.Fatalf("the engine reached the operating system's file system: %d entries in %s (%v)", len(ents), root, err)
	}
	var kinds []string
	for k, n := range st.cuts {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	t.Logf("%d runs (workload ~%d file system operations): %d acknowledged batches checked, %d unacknowledged batches served after recovery, %d appended batches gone; "+
		"power lost after a journal checkpoint in %d runs, after a segment roll in %d; where it went off: %s",
		st.runs, calib, st.acked, st.unackedServed, st.gone, st.afterCkpt, st.afterRoll, strings.Join(kinds, ", "))
	if len(failed) > 0 {
		t.Fatalf("failed seeds: %v", failed)
	}
	if st.acked == 0 || (st.runs >= 50 && (st.afterCkpt == 0 || st.afterRoll == 0)) {
		t.Fatal("the runs exercised nothing: no acknowledgement, journal checkpoint or segment roll before a power loss")
	}
}

const (
	endsCrashSeeds = 500
	endsCrashShort = 60
)

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}

// endsCrashStats sums what the runs did and checked.
type endsCrashStats struct {
	mu                         sync.Mutex
	runs                       int
	acked, unackedServed, gone int64
	afterCkpt, afterRoll       int
	cuts                       map[string]int // where the power went off
}

// endsEngine opens the engine in the ends mode over mfs through a new
// layer.
func endsEngine(t *testing.T, mfs *vfs.MemFS, dir string, step int64, stale bool) (*Engine, *endsLayer) {
	t.Helper()
	l, err := newEndsLayer(mfs, dir, step)
	if err != nil {
		t.Fatalf("layer: %v", err)
	}
	l.stale = stale
	e := openEngine(t, dir, func(o *Options) {
		o.fs, o.files, o.journalFS = l.fs, l, l.fs
		o.JournalBytes, o.JournalEnds = journalMinBytes, true
	})
	if !e.jnlEnds || e.jnl == nil || e.io.dev == nil || e.io.shared == nil {
		t.Fatalf("ends mode not on over the layer: ends %v, journal %v, device flush %v, shared layer %v",
			e.jnlEnds, e.jnl != nil, e.io.dev != nil, e.io.shared != nil)
	}
	return e, l
}

// endsCrashRun is one run (see TestJournalEndsCrash). cutRange > 0: the
// power goes off after a random number of operations below it; 0: after
// the workload (the calibration run, whose workload operation count it
// returns).
func endsCrashRun(t *testing.T, dir string, seed uint64, cutRange int64, st *endsCrashStats) int64 {
	rng := rand.New(rand.NewPCG(seed, 0xe4d5))
	mfs := newDataFS(t, dir)
	mfs.SetDeviceCache(true)
	step := int64(512 * (1 + rng.IntN(8)))
	stale := seed%2 == 1 || os.Getenv("STRATA_ENDS_CRASH_STALE") != "" // see TestJournalEndsCrash
	e, layer := endsEngine(t, mfs, dir, step, stale)
	parts := 2 + rng.IntN(3)
	cfg := map[string]string{
		"segment.bytes":        fmt.Sprint(1024 + rng.IntN(6144)),
		"index.interval.bytes": fmt.Sprint(64 + rng.IntN(512)),
		"segment.index.bytes":  "4096",
	}
	tp := mustTopic(t, e, "ends", int32(parts), cfg)
	logs := topicLogs(tp, parts)
	const producers, perProducer = 2, 40
	type job struct {
		part  int
		batch []byte
		wait  bool // wait for this append's acknowledgement before the next
	}
	jobs := make([][]job, producers)
	for w := range jobs {
		for i := range perProducer {
			b := batchOf(t, 1+rng.IntN(4), rng.IntN(400), int64(1000+i), int(seed%1000)*1000+w*100+i)
			jobs[w] = append(jobs[w], job{rng.IntN(parts), b, rng.IntN(3) == 0})
		}
	}
	e.jnl.mu.Lock()
	ckpts0 := e.jnl.ckpts
	e.jnl.mu.Unlock()
	opsBefore := mfs.Ops()
	cut := int64(0)
	if cutRange > 0 {
		cut = 1 + rng.Int64N(cutRange)
		mfs.PowerOffAfter(cut)
	}

	var (
		mu        sync.Mutex
		acked     []ackedBatch
		attempted = make([]map[string]bool, parts)
		pending   sync.WaitGroup
		wg        sync.WaitGroup
	)
	for p := range attempted {
		attempted[p] = map[string]bool{}
	}
	for w := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, j := range jobs[w] {
				l := logs[j.part]
				info, err := l.Append(j.batch, 0)
				mu.Lock()
				attempted[j.part][string(j.batch)] = true // patched in place: the bytes as stored
				mu.Unlock()
				if err != nil {
					if !errors.Is(err, ErrOffline) {
						t.Errorf("append: %v", err)
					}
					return
				}
				part, data := int32(j.part), j.batch
				done := make(chan error, 1)
				pending.Add(1)
				l.WhenDurable(info.LastOffset, func(err error) {
					defer pending.Done()
					if err == nil {
						mu.Lock()
						acked = append(acked, ackedBatch{part, info.BaseOffset, data})
						mu.Unlock()
					}
					done <- err
				})
				if j.wait {
					select {
					case err := <-done:
						if err != nil {
							return // offline: the power went off
						}
					case <-time.After(30 * time.Second): // deadlock guard, not a timing assertion
						t.Errorf("seed %d: WhenDurable(%d) of p%d never fired", seed, info.LastOffset, part)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	workload := mfs.Ops() - opsBefore
	where := "after the last append"
	if op, path, ok := mfs.PowerLostAt(); ok {
		where = cutKind(op, path, dir)
		if layer.zeroCut.Load() > 0 {
			where = "segment zero-fill " + strings.TrimPrefix(where, "segment ")
		}
	} else {
		if cutRange == 0 || rng.IntN(2) == 0 {
			where = "after the last acknowledgement"
			for _, l := range logs { // let every append be acknowledged first
				if end := l.LogEndOffset(); end > 0 {
					if err := waitDurable(t, l, end-1); err != nil {
						if op, path, ok := mfs.PowerLostAt(); ok && cutRange > 0 {
							where = cutKind(op, path, dir) // the cut came after the last append
							break
						}
						t.Fatalf("seed %d: %v", seed, err)
					}
				}
			}
		}
		mfs.PowerOffAfter(0)
	}
	e.jnl.mu.Lock()
	ckpts := e.jnl.ckpts - ckpts0 // during the workload
	e.jnl.mu.Unlock()
	rolls := 0
	for _, l := range logs {
		rolls += len(*l.segs.Load()) - 1
	}
	_ = e.Close() // offline after the power loss: errors expected
	pending.Wait()
	if cutRange == 0 {
		return workload
	}
	keep, tear := rng.IntN(4) != 0, rng.IntN(2) == 0
	defer func() {
		if t.Failed() {
			t.Logf("seed %d: power off %s (cut at %d of ~%d operations; keep unsynced %v, tear %v; zero-fill step %d, stale fill %v; %d journal checkpoints, %d rolls during the workload)",
				seed, where, cut, cutRange, keep, tear, step, stale, ckpts, rolls)
		}
	}()
	fs1 := mfs.Crash(vfs.CrashOptions{Seed: seed, KeepUnsynced: keep, Tear: tear})

	// First recovery.
	e1, _ := endsEngine(t, fs1, dir, step, stale)
	mu.Lock()
	defer mu.Unlock()
	served1 := endsServed(t, e1, parts, seed, "after the crash")
	for _, a := range acked {
		b, ok := served1[a.part][a.base]
		switch {
		case !ok:
			t.Errorf("seed %d: acknowledged batch at p%d offset %d lost", seed, a.part, a.base)
		case !bytes.Equal(b, a.data):
			t.Errorf("seed %d: acknowledged batch at p%d offset %d differs", seed, a.part, a.base)
		}
	}
	checkAppended := func(served []map[int64][]byte, when string) {
		for p := range served {
			for off, b := range served[p] {
				if !attempted[p][string(b)] {
					t.Errorf("seed %d %s: p%d serves a batch at offset %d that no producer appended", seed, when, p, off)
				}
			}
		}
	}
	checkAppended(served1, "after the crash")

	// A second power loss right after the recovery: nothing served may go.
	fs2 := fs1.Crash(vfs.CrashOptions{Seed: seed ^ 0x5ec0, KeepUnsynced: rng.IntN(2) == 0, Tear: rng.IntN(2) == 0})
	_ = e1.Close()
	e2, _ := endsEngine(t, fs2, dir, step, stale)
	served2 := endsServed(t, e2, parts, seed, "after a crash right after recovery")
	for p := range served1 {
		for off, b := range served1[p] {
			if got, ok := served2[p][off]; !ok || !bytes.Equal(got, b) {
				t.Errorf("seed %d: p%d offset %d, served after the first recovery, is gone or different after a crash right after it (found %v)", seed, p, off, ok)
			}
		}
	}
	checkAppended(served2, "after the second crash")
	if err := e2.Close(); err != nil {
		t.Fatalf("seed %d: clean close: %v", seed, err)
	}
	// A clean reopen serves exactly the same log.
	e3, _ := endsEngine(t, fs2, dir, step, stale)
	defer e3.Close()
	served3 := endsServed(t, e3, parts, seed, "after a clean reopen")
	for p := range served2 {
		if len(served3[p]) != len(served2[p]) {
			t.Errorf("seed %d: p%d serves %d batches after a clean reopen, %d before", seed, p, len(served3[p]), len(served2[p]))
		}
		for off, b := range served2[p] {
			if got, ok := served3[p][off]; !ok || !bytes.Equal(got, b) {
				t.Errorf("seed %d: p%d offset %d changed across a clean reopen", seed, p, off)
			}
		}
	}
	// The recovered logs take appends at their ends.
	tp3 := e3.Topic("ends")
	for p := range parts {
		l := tp3.Partition(int32(p))
		end := l.LogEndOffset()
		info := mustAppend(t, l, batchOf(t, 2, 10, 1, int(seed)))
		if info.BaseOffset != end {
			t.Errorf("seed %d: p%d append after recovery at %d, log end was %d", seed, p, info.BaseOffset, end)
		}
		if err := waitDurable(t, l, info.LastOffset); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	st.runs++
	st.acked += int64(len(acked))
	total := 0
	for p := range served1 {
		total += len(served1[p])
	}
	st.unackedServed += int64(total - len(acked))
	st.gone += int64(producers*perProducer - total)
	st.cuts[where]++
	if ckpts > 0 {
		st.afterCkpt++
	}
	if rolls > 0 {
		st.afterRoll++
	}
	return workload
}

// endsServed reads every partition of topic "ends" (readAllBatches:
// offsets contiguous from 0, every CRC) and checks the HW is the log end.
func endsServed(t *testing.T, e *Engine, parts int, seed uint64, when string) []map[int64][]byte {
	t.Helper()
	tp := e.Topic("ends")
	if tp == nil {
		t.Fatalf("seed %d %s: topic gone", seed, when)
	}
	out := make([]map[int64][]byte, parts)
	for p := range parts {
		l := tp.Partition(int32(p))
		if hw, end := l.HighWatermark(), l.LogEndOffset(); hw != end {
			t.Errorf("seed %d %s: p%d HW %d, log end %d", seed, when, p, hw, end)
		}
		out[p] = readAllBatches(t, l, seed)
	}
	return out
}

// cutKind names where PowerOffAfter's cut fell: the operation refused and
// the kind of file.
func cutKind(op vfs.Op, path, dir string) string {
	name := filepath.Base(path)
	var file string
	switch {
	case strings.Contains(path, journalDirName):
		file = "journal"
	case name == devFlushAnchor:
		file = "flush anchor"
	case strings.HasSuffix(name, logSuffix):
		file = "segment"
	case strings.HasSuffix(name, indexSuffix), strings.HasSuffix(name, timeIndexSuffix), strings.HasSuffix(name, txnIndexSuffix):
		file = "index"
	case strings.Contains(name, "checkpoint"):
		file = "checkpoint file"
	case filepath.Dir(path) == filepath.Join(dir, topicsDirName) || filepath.Dir(path) == dir:
		file = "data dir file"
	default:
		file = "partition dir"
	}
	ops := map[vfs.Op]string{vfs.OpOpen: "open", vfs.OpRead: "read", vfs.OpWrite: "write", vfs.OpSync: "sync",
		vfs.OpSyncDir: "dir sync", vfs.OpTruncate: "truncate", vfs.OpClose: "close", vfs.OpRename: "rename",
		vfs.OpRemove: "remove", vfs.OpMkdir: "mkdir", vfs.OpReadDir: "readdir", vfs.OpStat: "stat"}
	return file + " " + ops[op]
}

// TestJournalEndsFailedGroupReleasesNextRound: a journal group whose
// fdatasync fails while the next round's end records wait in the stage:
// that round must fail too (the journal is offline), not wait forever for
// a writer that stopped, and Close must return. Found by
// TestJournalEndsCrash (a power loss in a journal group's sync hung
// Engine.Close in stopFlusher: a flush worker waited in journal.ends).
func TestJournalEndsFailedGroupReleasesNextRound(t *testing.T) {
	defer func(v int64) { journalMinBytes = v }(journalMinBytes)
	journalMinBytes = journalFiles * (16 << 10)
	dir := filepath.Join(t.TempDir(), "d")
	mfs := newDataFS(t, dir)
	mfs.SetDeviceCache(true)
	layer, err := newEndsLayer(mfs, dir, 4096)
	if err != nil {
		t.Fatal(err)
	}
	var (
		armed   atomic.Bool
		entered = make(chan struct{})
		release = make(chan struct{})
	)
	e := openEngine(t, dir, func(o *Options) {
		o.fs, o.files, o.journalFS = layer.fs, layer, layer.fs
		o.JournalBytes, o.JournalEnds = journalMinBytes, true
		o.syncHook = func(path string) error {
			if strings.Contains(path, journalDirName) && armed.CompareAndSwap(true, false) {
				close(entered)
				<-release
				return syscall.EIO
			}
			return nil
		}
	})
	tp := mustTopic(t, e, "ends", 2, nil)
	l0, l1 := tp.Partition(0), tp.Partition(1)
	// Two rounds each: the first syncs the new segments themselves, the
	// second shares the journal's flush.
	for i := range 2 {
		for _, l := range []*Log{l0, l1} {
			if err := waitDurable(t, l, mustAppend(t, l, batchOf(t, 1, 10, 0, i)).LastOffset); err != nil {
				t.Fatal(err)
			}
		}
	}
	ends := func() (uint64, uint32) {
		e.jnl.mu.Lock()
		defer e.jnl.mu.Unlock()
		return e.jnl.endRecs, e.jnl.stage.count
	}
	if n, _ := ends(); n == 0 {
		t.Fatal("no round went through the journal")
	}
	armed.Store(true)
	done := make(chan error, 2)
	info := mustAppend(t, l0, batchOf(t, 1, 10, 0, 9))
	l0.WhenDurable(info.LastOffset, func(err error) { done <- err })
	<-entered // the writer holds l0's round in its sync
	info = mustAppend(t, l1, batchOf(t, 1, 10, 0, 9))
	l1.WhenDurable(info.LastOffset, func(err error) { done <- err })
	for i := 0; ; i++ { // l1's round stages its end record behind the held group
		if _, staged := ends(); staged > 0 {
			break
		}
		if i == 3000 {
			t.Fatal("l1's round never staged an end record")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	for range 2 {
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a round after a failed journal sync was acknowledged")
			}
		case <-time.After(30 * time.Second): // deadlock guard, not a timing assertion
			t.Fatal("a round whose end records were staged behind a failed journal group never completed")
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second): // deadlock guard
		t.Fatal("Close did not return after the journal failed")
	}
}
