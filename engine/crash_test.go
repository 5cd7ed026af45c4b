package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/segment"
	"github.com/stratalog/strata/segment/segmenttest"
)

// memFiles is a fileLayer of segmenttest.MemFiles for tests whose other
// files are on the operating system's file system: segment data lives in
// memory and a crash keeps only what was synced (plus, at random, a prefix
// of the unsynced writes with the last one torn). An empty file is left at
// each path so the engine's directory scans find the segments. The crash
// tests over a vfs.MemFS (newDataFS) need no file layer: the engine keeps
// segment data on its file system with everything else (fsFiles).
type memFiles struct {
	mu      sync.Mutex
	files   map[string]*segmenttest.MemFile
	crashed bool
}

func newMemFiles() *memFiles { return &memFiles{files: map[string]*segmenttest.MemFile{}} }

func (m *memFiles) Create(path string) (segment.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return nil, segmenttest.ErrCrashed
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return nil, err
	}
	f := segmenttest.NewMemFile(nil)
	m.files[path] = f
	return f, nil
}

func (m *memFiles) Open(path string) (segment.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return nil, segmenttest.ErrCrashed
	}
	f, ok := m.files[path]
	if !ok {
		if _, err := os.Stat(path); err != nil {
			return nil, err
		}
		f = segmenttest.NewMemFile(nil)
		m.files[path] = f
	}
	return f, nil
}

// crash simulates power loss: it returns the files as a restart finds
// them, and every later call on the current files fails (ErrCrashed), so
// the running engine sees I/O errors from then on.
func (m *memFiles) crash(rng *rand.Rand, torn bool) *memFiles {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashed = true
	out := newMemFiles()
	paths := make([]string, 0, len(m.files))
	for p := range m.files {
		paths = append(paths, p)
	}
	sort.Strings(paths) // deterministic per seed
	for _, p := range paths {
		if torn {
			out.files[p] = m.files[p].CrashRandom(rng)
		} else {
			out.files[p] = m.files[p].Crash()
		}
	}
	return out
}

// newDataFS is a vfs.MemFS holding dir (and its parents) durably, as a
// data directory exists before the broker starts: the engine under test
// keeps every file and directory there (Options.fs), segment data
// included.
func newDataFS(t testing.TB, dir string) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMemFS()
	if err := m.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for p := dir; ; p = filepath.Dir(p) {
		if err := m.SyncDir(p); err != nil {
			t.Fatal(err)
		}
		if p == filepath.Dir(p) {
			return m
		}
	}
}

// segmentBasesFS lists the base offsets of the .log files of dir on fsys.
func segmentBasesFS(t testing.TB, fsys vfs.FS, dir string) []int64 {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range ents {
		if b, ok := parseSegmentFileName(e.Name(), logSuffix); ok {
			out = append(out, b)
		}
	}
	return out // sorted by name: the same order for these fixed-width names
}

// ackedBatch is a batch whose WhenDurable fired without error.
type ackedBatch struct {
	part int32
	base int64
	data []byte
}

// TestCrashKeepsEveryAcknowledgedRecord runs seeded rounds of concurrent
// appends whose acks wait for WhenDurable (acks=all with fsync before the
// ack), the engine wholly on a vfs.MemFS, crashes at a random moment (only
// synced bytes survive, in most rounds with a random part of the unsynced
// writes and a torn last one; sometimes the active offset index loses
// entries or gains a bogus one), reopens and checks: every acknowledged batch is there at its offset
// with the same bytes, offsets are contiguous from 0, every readable batch
// passes its CRC, the HW is the log end, and the log takes appends again.
func TestCrashKeepsEveryAcknowledgedRecord(t *testing.T) {
	crashRounds(t, 200, 40, false)
}

// TestCrashKeepsEveryAcknowledgedRecordJournal is the same crash rounds
// with the journal (journal.go) making appends durable: its files are on
// the MemFS with the other files behind the seam, and it is a journal of
// four 16 KiB files, so that rounds go round it and checkpoints move its
// start while appends run.
func TestCrashKeepsEveryAcknowledgedRecordJournal(t *testing.T) {
	defer func(v int64) { journalMinBytes = v }(journalMinBytes)
	journalMinBytes = journalFiles * (16 << 10)
	defer func(v int) { journalAheadMin = v }(journalAheadMin)
	journalAheadMin = 1 << 10 // bursts are written ahead of their flush
	crashRounds(t, 500, 60, true)
}

// crashRounds runs seeds crash rounds (short under -short), stopping at
// the first that fails.
func crashRounds(t *testing.T, seeds, short int, journal bool) {
	if testing.Short() {
		seeds = short
	}
	// Every file is on the rounds' MemFS: root stays empty on the
	// operating system's file system.
	root := t.TempDir()
	var st crashStats
	for seed := range seeds {
		crashRound(t, filepath.Join(root, fmt.Sprint(seed)), uint64(seed), journal, &st)
		if t.Failed() {
			t.Fatalf("seed %d failed", seed)
		}
	}
	if ents, err := os.ReadDir(root); err != nil || len(ents) != 0 {
		t.Fatalf("the engine reached the operating system's file system: %d entries in %s (%v)", len(ents), root, err)
	}
	t.Logf("%d rounds: %d acknowledged batches checked, %d unacknowledged batches lost, %d bytes walked by recovery, "+
		"%d leader-epoch entries checked, %d journal groups written ahead; the crashed MemFS held %d recovery-point checkpoints and %d offset index entries",
		seeds, st.acked, st.lost, st.walked, st.epochs, st.ahead, st.checkpoints, st.indexEntries)
	if st.acked == 0 {
		t.Fatal("no append was ever acknowledged: the test checked nothing")
	}
	if journal && st.ahead == 0 {
		t.Fatal("the journal never wrote a group ahead of its flush: the test did not exercise it")
	}
	if st.checkpoints == 0 || st.indexEntries == 0 {
		t.Fatal("no checkpoint or index entry ever survived a crash: the files behind the seam were not exercised")
	}
}

// crashStats sums what crashRounds checked.
type crashStats struct {
	acked, lost, walked       int64 // batches; bytes walked by recovery
	checkpoints, indexEntries int64 // found in the MemFS after the crash
	epochs                    int64 // leader-epoch entries checked after recovery
	ahead                     int64 // journal groups written ahead of their flush
}

// checkEpochs checks that the recovered log's leader-epoch cache is the
// one its batches make, assigned in offset order as appends and
// recovery's walk do: entries below the recovery point come from
// leader-epoch-checkpoint, which an append that starts an epoch leaves to
// the next recovery-point checkpoint (epochsAssigned), so a checkpoint
// that let its recovery point pass an entry missing from the file shows
// here as a start moved to the first batch recovery walked. It returns
// how many entries it checked.
func checkEpochs(t *testing.T, seed uint64, l *Log, batches map[int64][]byte) int {
	t.Helper()
	offs := make([]int64, 0, len(batches))
	for o := range batches {
		offs = append(offs, o)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	var want epochCache
	for _, o := range offs {
		h, err := record.ParseHeader(batches[o])
		if err != nil {
			t.Fatalf("seed %d: %s batch at %d: %v", seed, l, o, err)
		}
		want.assign(h.PartitionLeaderEpoch, h.BaseOffset)
	}
	l.epochMu.Lock()
	got := l.epochs.snapshot()
	l.epochMu.Unlock()
	if !slices.Equal(got, want.entries) {
		t.Errorf("seed %d: %s leader epochs %v after recovery, its batches make %v (recovery walked %v)", seed, l, got, want.entries, l.recoveredBases)
	}
	return len(want.entries)
}

func crashRound(t *testing.T, dir string, seed uint64, journal bool, st *crashStats) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	mfs := newDataFS(t, dir)
	var mfsAfter *vfs.MemFS
	files := func(o *Options, fsys *vfs.MemFS) {
		o.fs = fsys
		if journal {
			o.JournalBytes, o.journalFS = journalMinBytes, o.fs
			if seed%2 == 1 {
				// Files twice as large: a held stage may then grow (it
				// stays under half a staging buffer, half a file, less
				// 4 KiB of alignment) and be written ahead.
				o.JournalBytes *= 2
			}
		}
	}
	e := openEngine(t, dir, func(o *Options) { files(o, mfs) })
	cfg := map[string]string{
		"segment.bytes":        fmt.Sprint(1024 + rng.IntN(4096)),
		"index.interval.bytes": fmt.Sprint(64 + rng.IntN(512)),
		"segment.index.bytes":  "4096",
		"preallocate":          "false",
	}
	const parts = 3
	tp := mustTopic(t, e, "crash", parts, cfg)
	logs := topicLogs(tp, parts)

	// Batches are built here: makeBatch may call t.Fatal.
	const writers, perWriter = 3, 40
	// With the journal, each writer holds it (Engine.HoldJournal, as a
	// produce request does) over bursts of one to four appends, which the
	// journal writes ahead of their flush past journalAheadMin. In odd
	// seeds a writer then waits for its burst to be durable before the
	// next, as a producer with one acks=all request in flight does (the
	// writer then keeps up, and a held stage grows while it waits).
	requests := journal && seed%2 == 1
	type job struct {
		part    int
		batch   []byte
		release bool // the last append of its burst
	}
	jobs := make([][]job, writers)
	for w := range jobs {
		for i := range perWriter {
			b := batchOf(t, 1+rng.IntN(4), rng.IntN(300), int64(1000+i), int(seed)*7+w*101+i)
			jobs[w] = append(jobs[w], job{rng.IntN(parts), b, i == perWriter-1 || rng.IntN(3) == 0})
		}
	}
	crashAt := int64(rng.IntN(writers*perWriter + 20)) // past the end: crash after the last append
	torn := rng.IntN(4) != 0

	var (
		mu      sync.Mutex
		acks    []ackedBatch
		once    sync.Once
		count   atomic.Int64
		pending sync.WaitGroup
	)
	crash := func() {
		once.Do(func() {
			mfsAfter = mfs.Crash(vfs.CrashOptions{Seed: seed, KeepUnsynced: torn, Tear: torn})
		})
	}
	var partMu [parts]sync.Mutex
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var burst sync.WaitGroup // the appends of the writer's burst
			holding := false
			defer func() {
				if holding {
					e.ReleaseJournal()
				}
			}()
			for _, j := range jobs[w] {
				if journal && !holding {
					e.HoldJournal()
					holding = true
				}
				n := count.Add(1)
				if n == crashAt {
					crash()
				}
				if n%16 == 0 {
					// The coordinator's recovery-point checkpoint, more
					// often than its interval: recovery then starts past
					// whole segments, whose epochs only the files keep.
					// (After the crash it fails: nothing to check.)
					_ = e.writeRecoveryCheckpoint()
				}
				l := logs[j.part]
				// The leader epoch moves on every 25 appends of the round,
				// so rounds start epochs whose entries recovery must
				// rebuild (checkEpochs, below). As a leader's, a log's
				// epochs never go back: read and appended under the
				// partition's lock.
				partMu[j.part].Lock()
				info, err := l.Append(j.batch, int32(count.Load()/25))
				partMu[j.part].Unlock()
				if err != nil {
					if !errors.Is(err, ErrOffline) {
						t.Errorf("append: %v", err)
					}
					return
				}
				part, data := int32(j.part), j.batch // patched in place: the stored bytes
				pending.Add(1)
				burst.Add(1)
				l.WhenDurable(info.LastOffset, func(err error) {
					defer pending.Done()
					defer burst.Done()
					if err == nil {
						mu.Lock()
						acks = append(acks, ackedBatch{part, info.BaseOffset, data})
						mu.Unlock()
					}
				})
				if holding && j.release {
					e.ReleaseJournal()
					holding = false
					if requests {
						waited := make(chan struct{})
						go func() { burst.Wait(); close(waited) }()
						select {
						case <-waited:
						case <-time.After(time.Minute): // a hang detector, not a timing claim
							t.Errorf("seed %d: a burst's appends never became durable", seed)
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	if js, ok := e.JournalStats(); ok {
		st.ahead += int64(js.Ahead)
	}
	if count.Load() < crashAt {
		// Every append went in before the crash point: let some of them
		// become durable first (no timing: a WhenDurable on one log).
		done := make(chan struct{})
		logs[0].WhenDurable(logs[0].LogEndOffset()-1, func(error) { close(done) })
		<-done
	}
	crash()
	_ = e.Close() // offline after the crash: errors expected
	pending.Wait()
	// Close ran after the power loss: its marker and checkpoints failed.
	if _, err := mfsAfter.Stat(filepath.Join(dir, cleanShutdownFile)); err == nil {
		t.Fatalf("seed %d: a clean shutdown marker survived the power loss", seed)
	}

	// The active offset index was never synced: besides what the crash
	// kept of its write-backs, lose entries or add a bogus one now and
	// then, as a mapping's pages written back in any order can (recovery
	// must not trust it blindly).
	if _, err := mfsAfter.Stat(filepath.Join(dir, recoveryPointFile)); err == nil {
		st.checkpoints++
	}
	for p := range parts {
		bases := segmentBasesFS(t, mfsAfter, filepath.Join(dir, partitionDirName("crash", int32(p))))
		for _, b := range bases {
			if fi, err := mfsAfter.Stat(segmentFileName(filepath.Join(dir, partitionDirName("crash", int32(p))), b, indexSuffix)); err == nil {
				st.indexEntries += fi.Size() / offsetEntrySize
			}
		}
		if len(bases) == 0 {
			continue
		}
		idx := segmentFileName(filepath.Join(dir, partitionDirName("crash", int32(p))), bases[len(bases)-1], indexSuffix)
		damageIndex(t, mfsAfter, idx, rng)
	}

	e2 := openEngine(t, dir, func(o *Options) { files(o, mfsAfter) })
	defer e2.Close()
	tp2 := e2.Topic("crash")
	got := make([]map[int64][]byte, parts)
	for p := range parts {
		l := tp2.Partition(int32(p))
		st.walked += l.recoveredBytes
		if l.HighWatermark() != l.LogEndOffset() {
			t.Errorf("seed %d p%d: HW %d, log end %d after recovery", seed, p, l.HighWatermark(), l.LogEndOffset())
		}
		got[p] = readAllBatches(t, l, seed)
		st.epochs += int64(checkEpochs(t, seed, l, got[p]))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range acks {
		b, ok := got[a.part][a.base]
		if !ok {
			t.Errorf("seed %d: acknowledged batch at p%d offset %d lost", seed, a.part, a.base)
			continue
		}
		if !bytes.Equal(b, a.data) {
			t.Errorf("seed %d: acknowledged batch at p%d offset %d differs", seed, a.part, a.base)
		}
	}
	st.acked += int64(len(acks))
	total := 0
	for p := range got {
		total += len(got[p])
	}
	st.lost += int64(writers*perWriter - total)

	// The recovered log takes appends at its end.
	l := tp2.Partition(0)
	end := l.LogEndOffset()
	info := mustAppend(t, l, batchOf(t, 2, 10, 1, int(seed)))
	if info.BaseOffset != end {
		t.Errorf("seed %d: append after recovery at %d, log end was %d", seed, info.BaseOffset, end)
	}
	if err := waitDurable(t, l, info.LastOffset); err != nil {
		t.Errorf("seed %d: %v", seed, err)
	}
}

// damageIndex does to the active offset index what a crash can (its
// pages are never synced while appends run; the file starts zeroed and is
// only appended to): lose a tail of entries, lose a run of entries in the
// middle (zeros), or stay at its preallocated size with zero entries at
// the end — or nothing.
func damageIndex(t *testing.T, fsys vfs.FS, path string, rng *rand.Rand) {
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return
	}
	n := len(data) / 8
	switch rng.IntN(4) {
	case 0:
		data = data[:8*rng.IntN(n+1)]
	case 1:
		if n == 0 {
			return
		}
		i := rng.IntN(n)
		clear(data[8*i : 8*min(n, i+1+rng.IntN(4))])
	case 2:
		data = append(data, make([]byte, 4096-len(data)%4096)...)
	default:
		return
	}
	if err := vfs.WriteFile(fsys, path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := vfs.SyncPathFS(fsys, path); err != nil {
		t.Fatal(err)
	}
}

// readAllBatches reads l from offset 0 through Read and returns its batches
// by base offset, checking contiguity and every CRC. Chunks are read
// through the segment (memory-backed segments have no *os.File).
func readAllBatches(t *testing.T, l *Log, seed uint64) map[int64][]byte {
	t.Helper()
	out := map[int64][]byte{}
	next := int64(0)
	for guard := 0; guard < 100_000; guard++ {
		res, err := l.Read(next, 1<<20, true)
		if err != nil {
			t.Fatalf("seed %d: Read(%d) of %s: %v", seed, next, l, err)
		}
		if len(res.Chunks) == 0 {
			res.Release()
			if next != l.LogEndOffset() {
				for _, sg := range *l.segs.Load() {
					t.Logf("seg base %d end %d size %d written %d", sg.base, sg.end.Load(), sg.seg.Size(), sg.seg.Written())
				}
				t.Errorf("seed %d: %s reads end at %d, log end %d", seed, l, next, l.LogEndOffset())
			}
			return out
		}
		data, err := segmentResultBytes(&res)
		res.Release()
		if err != nil {
			t.Fatalf("seed %d: ReadAt: %v", seed, err)
		}
		for rest := data; len(rest) > 0; {
			b, r, h, err := record.Next(rest)
			if err != nil {
				t.Fatalf("seed %d: %s at %d: %v", seed, l, next, err)
			}
			if !record.CheckCRC(b) {
				t.Fatalf("seed %d: %s: batch at %d fails its CRC (torn batch readable)", seed, l, h.BaseOffset)
			}
			if h.BaseOffset != next {
				t.Fatalf("seed %d: %s: batch at %d, expected %d (offsets not contiguous)", seed, l, h.BaseOffset, next)
			}
			out[h.BaseOffset] = append([]byte(nil), b...)
			next = h.LastOffset() + 1
			rest = r
		}
	}
	t.Fatalf("seed %d: reading %s did not end", seed, l)
	return nil
}

// TestRecoveryWalksOnlyTheUnflushedTail: after a crash, the segment holding
// the recovery point is walked from the last offset index entry below it,
// not from its start, and the log reads back whole (index lookups included).
func TestRecoveryWalksOnlyTheUnflushedTail(t *testing.T) {
	dir := t.TempDir()
	mf := newMemFiles()
	e := openEngine(t, dir, func(o *Options) { o.files = mf })
	l := mustTopic(t, e, "tail", 1, map[string]string{"segment.bytes": "8388608", "preallocate": "false"}).Partition(0)
	var last AppendInfo
	for i := range 600 {
		last = mustAppend(t, l, batchOf(t, 2, 500, int64(i), i))
	}
	if err := waitDurable(t, l, last.LastOffset); err != nil {
		t.Fatal(err)
	}
	if err := e.writeRecoveryCheckpoint(); err != nil {
		t.Fatal(err)
	}
	rp := l.LogEndOffset()
	flushedBytes := l.active.end.Load()
	for i := range 30 {
		last = mustAppend(t, l, batchOf(t, 2, 500, int64(1000+i), 1000+i))
	}
	if err := waitDurable(t, l, last.LastOffset); err != nil {
		t.Fatal(err)
	}
	tailBytes := l.active.end.Load() - flushedBytes
	after := mf.crash(nil, false)
	_ = e.Close()
	if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	// As a crash leaves it: the active index at a preallocated size.
	idx := segmentFileName(filepath.Join(dir, partitionDirName("tail", 0)), 0, indexSuffix)
	data, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(idx, append(data, make([]byte, 1<<16)...), 0o644); err != nil {
		t.Fatal(err)
	}

	e2 := openEngine(t, dir, func(o *Options) { o.files = after })
	defer e2.Close()
	l2 := e2.Topic("tail").Partition(0)
	interval := int64(l2.config().IndexIntervalBytes)
	// (The checkpoint may be newer than rp — Close or the coordinator can
	// write one — which only shortens the walk.)
	if l2.recoveredBytes > tailBytes+2*interval+2048 || l2.recoveredBytes <= 0 {
		t.Fatalf("recovery walked %d bytes; the tail past the recovery point (offset %d) is %d bytes of %d",
			l2.recoveredBytes, rp, tailBytes, flushedBytes+tailBytes)
	}
	if l2.LogEndOffset() != last.LastOffset+1 {
		t.Fatalf("log end %d after recovery, want %d", l2.LogEndOffset(), last.LastOffset+1)
	}
	got := readAllBatches(t, l2, 0)
	if len(got) != 630 {
		t.Fatalf("%d batches after recovery, want 630", len(got))
	}
	// Every offset is found through the (partly kept, partly rebuilt) index.
	for off := int64(0); off <= last.LastOffset; off += 7 {
		res, err := l2.Read(off, 1, true)
		if err != nil || len(res.Chunks) != 1 {
			t.Fatalf("Read(%d): %v, %d chunks", off, err, len(res.Chunks))
		}
		hb := make([]byte, record.HeaderSize)
		if _, err := res.seg.seg.ReadAt(hb, res.Chunks[0].Pos); err != nil {
			t.Fatal(err)
		}
		res.Release()
		h, err := record.ParseHeader(hb)
		if err != nil || h.BaseOffset > off || h.LastOffset() < off {
			t.Fatalf("Read(%d) returned the batch [%d, %d]: %v", off, h.BaseOffset, h.LastOffset(), err)
		}
	}
	t.Logf("walked %d of %d bytes (tail %d)", l2.recoveredBytes, flushedBytes+tailBytes, tailBytes)
}

// FuzzRecoveryIndex: whatever a crash did to the active offset index
// (never synced while appends run; the file starts zeroed and is only
// appended to, so a crash leaves its entries correct or zero: a lost tail,
// lost pages in the middle, or the preallocated zero tail) and wherever the
// recovery point lies, Open neither panics nor loses or alters a synced
// batch, and every offset is found through the index it kept or rebuilt.
// zeroMask picks entries to zero (bit i of byte i/8), keep how many entries
// survive (beyond the real ones: zero entries).
func FuzzRecoveryIndex(f *testing.F) {
	f.Add([]byte{}, uint16(0), uint16(0))
	f.Add([]byte{}, uint16(1000), uint16(40))
	f.Add([]byte{0x10}, uint16(1000), uint16(25))
	f.Add([]byte{0, 0xff}, uint16(12), uint16(59))
	f.Add([]byte{1}, uint16(3), uint16(60))

	// One synced log, built once; every run starts from a copy of it.
	tmpl := f.TempDir()
	mf := newMemFiles()
	e := openEngine(f, tmpl, func(o *Options) { o.files = mf })
	l := mustTopic(f, e, "fz", 1, map[string]string{"index.interval.bytes": "256", "preallocate": "false"}).Partition(0)
	var last AppendInfo
	var want [][]byte
	for i := range 60 {
		b := batchOf(f, 1, 100+i%7*40, int64(i), i)
		last = mustAppend(f, l, b)
		want = append(want, append([]byte(nil), b...))
	}
	if err := waitDurable(f, l, last.LastOffset); err != nil {
		f.Fatal(err)
	}
	if err := e.Close(); err != nil {
		f.Fatal(err)
	}
	images := mf.crash(nil, false)
	partDir := partitionDirName("fz", 0)

	realIndex, err := os.ReadFile(segmentFileName(filepath.Join(tmpl, partDir), 0, indexSuffix))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, zeroMask []byte, keep, rp uint16) {
		index := make([]byte, 8*int(keep%600))
		copy(index, realIndex)
		for i := 0; i < len(index)/8 && i/8 < len(zeroMask); i++ {
			if zeroMask[i/8]&(1<<(i%8)) != 0 {
				clear(index[8*i : 8*i+8])
			}
		}
		dir := t.TempDir()
		copyDir(t, tmpl, dir)
		os.Remove(filepath.Join(dir, cleanShutdownFile))
		ckpt := formatOffsetCheckpoint(map[topicPartition]int64{{"fz", 0}: int64(rp % 61)})
		if err := os.WriteFile(filepath.Join(dir, recoveryPointFile), ckpt, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(segmentFileName(filepath.Join(dir, partDir), 0, indexSuffix), index, 0o644); err != nil {
			t.Fatal(err)
		}
		files := newMemFiles()
		for p, img := range images.files {
			rel, _ := filepath.Rel(tmpl, p)
			files.files[filepath.Join(dir, rel)] = segmenttest.NewMemFile(img.Bytes())
		}
		e := openEngine(t, dir, func(o *Options) { o.files = files })
		defer e.Close()
		l := e.Topic("fz").Partition(0)
		got := readAllBatches(t, l, uint64(rp))
		if len(got) != len(want) {
			t.Fatalf("%d batches after recovery, want %d", len(got), len(want))
		}
		for i, w := range want {
			if !bytes.Equal(got[int64(i)], w) {
				t.Fatalf("batch %d differs after recovery", i)
			}
		}
		for off := int64(0); off < int64(len(want)); off++ {
			res, err := l.Read(off, 1, true)
			if err != nil || len(res.Chunks) != 1 {
				t.Fatalf("Read(%d): %v", off, err)
			}
			hb := make([]byte, record.HeaderSize)
			_, err = res.seg.seg.ReadAt(hb, res.Chunks[0].Pos)
			res.Release()
			h, perr := record.ParseHeader(hb)
			if err != nil || perr != nil || h.BaseOffset != off {
				t.Fatalf("Read(%d) found the batch at %d: %v %v", off, h.BaseOffset, err, perr)
			}
		}
	})
}

// segmentResultBytes gathers a ReadResult's bytes, file chunks read through
// the segment (which serves them on any file system, a MemFS included). It
// does not release res.
func segmentResultBytes(res *ReadResult) ([]byte, error) {
	var data []byte
	for _, c := range res.Chunks {
		buf := c.Buf
		if buf == nil {
			buf = make([]byte, c.Len)
			if _, err := res.seg.seg.ReadAt(buf, c.Pos); err != nil {
				return nil, err
			}
		}
		data = append(data, buf...)
	}
	return data, nil
}
