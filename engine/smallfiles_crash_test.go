package engine

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/vfs"

	"github.com/stratalog/strata/internal/stratatest"
)

// The crash-consistency test of the files behind the file-system seam:
// offset checkpoints, the leader-epoch checkpoint, producer snapshots and
// the aborted-transaction index, driven through the engine's own code
// (writeCheckpoint, saveEpochs, snapshotProducers, addAbortedTxn, the
// truncation path loadTxnIndexes + loadNewestSnapshot, and at restart
// readCheckpoint, loadEpochs, loadNewestSnapshot, loadTxnIndex) on a
// vfs.MemFS that loses power after a random operation, sometimes after an
// injected EIO or ENOSPC, and is then crashed (synced state only, or with
// a seeded part of the unsynced changes kept and writes torn).
//
// The test keeps a model of what the engine was told and checks, after
// the restart:
//
//   - a checkpoint holds the value of its last acknowledged write or of a
//     later attempt (never torn, never older, never missing once written);
//   - the leader-epoch checkpoint likewise (its reader ignores a bad file,
//     which would show here as lost entries);
//   - a producer snapshot that loads is byte for byte a state written at
//     that offset, at or below the log end; the others are deleted;
//   - each transaction index holds a prefix of the entries written to it
//     (below the restart's log end), with every acknowledged one (its
//     marker made durable by a flush) and no torn entry.

// memEngine is an Engine holding only what the files behind the seam
// need: a directory on fsys, a fixed clock and a quiet logger.
func memEngine(fsys vfs.FS, dir string) *Engine {
	return &Engine{dir: dir, fs: fsys, now: func() time.Time { return time.UnixMilli(1_700_000_000_000) },
		logger: quietLogger(), topics: map[string]*Topic{}, byID: map[[16]byte]*Topic{}}
}

// memLog is partition t-0 of e with segments at bases, none loaded.
func memLog(e *Engine, bases []int64) *Log {
	l := &Log{e: e, topic: "t", part: 0, dir: filepath.Join(e.dir, partitionDirName("t", 0))}
	segs := make([]*logSegment, len(bases))
	for i, b := range bases {
		segs[i] = newLogSegment(l.dir, b, e.logger)
	}
	l.segs.Store(&segs)
	l.producers.snapOffset = -1
	return l
}

var checkpointNames = []string{recoveryPointFile, logStartFile, cleanerCheckpointFile}

// fileModel is what a round told the engine to write.
type fileModel struct {
	// ckpt: per checkpoint, every value attempted in order; ckptAcked:
	// the index of the last one acknowledged (-1: none).
	ckpt      map[string][]map[topicPartition]int64
	ckptAcked map[string]int
	// epochs: every epoch cache written, and the last acknowledged.
	epochs      [][]epochEntry
	epochsAcked int
	// snaps: every snapshot's bytes written, by offset.
	snaps map[int64][][]byte
	// txn: per segment base, the entries whose write returned (the
	// index's timeline: truncation cuts it), and how many of them a flush
	// made acknowledged.
	bases    []int64
	txn      map[int64][]abortedTxn
	txnAcked map[int64]int

	logEnd    int64 // one past the last offset appended
	durable   int64 // log end as of the last flush: the restart's log end is at least this
	nextEpoch int32
	offline   bool // an index or epoch write failed: the engine went offline
}

func newFileModel() *fileModel {
	md := &fileModel{ckpt: map[string][]map[topicPartition]int64{}, ckptAcked: map[string]int{},
		epochs: [][]epochEntry{nil}, snaps: map[int64][][]byte{}, bases: []int64{0},
		txn: map[int64][]abortedTxn{}, txnAcked: map[int64]int{}}
	for _, n := range checkpointNames {
		md.ckptAcked[n] = -1
	}
	return md
}

// randomProducers is a producer state consistent below end.
func randomProducers(rng *rand.Rand, end int64) map[int64]*producerEntry {
	out := map[int64]*producerEntry{}
	for range rng.IntN(4) {
		e := newProducerEntry()
		e.epoch = int16(rng.IntN(5))
		e.lastMs = rng.Int64N(1 << 40)
		e.coordinatorEpoch = int32(rng.IntN(3)) - 1
		if end > 0 && rng.IntN(3) == 0 {
			e.txnFirstOffset = rng.Int64N(end)
		}
		next := int64(0)
		for b := range rng.IntN(producerBatchesRetained + 2) {
			if next >= end {
				break
			}
			first := next + rng.Int64N(end-next)
			last := first + rng.Int64N(end-first)
			e.add(e.epoch, producerBatch{firstSeq: int32(b * 10), lastSeq: int32(b*10 + int(last-first)),
				firstOffset: first, lastOffset: last, maxTimestamp: rng.Int64N(1 << 40)})
			next = last + 1
		}
		out[rng.Int64N(1<<40)] = e
	}
	return out
}

// step runs one random operation of the engine on l and records it. An
// offline engine (a failed index or epoch write) appends nothing more:
// only checkpoints are still written.
func (md *fileModel) step(rng *rand.Rand, e *Engine, l *Log) {
	defer func() { md.offline = md.offline || e.Offline() != nil }()
	k := rng.IntN(10)
	if md.offline && k >= 2 {
		return
	}
	switch {
	case k < 2: // a checkpoint
		name := checkpointNames[rng.IntN(len(checkpointNames))]
		m := map[topicPartition]int64{}
		for p := range rng.IntN(4) {
			m[topicPartition{"t", int32(p)}] = rng.Int64N(md.logEnd + 1)
		}
		md.ckpt[name] = append(md.ckpt[name], m)
		if e.writeCheckpoint(name, m) == nil {
			md.ckptAcked[name] = len(md.ckpt[name]) - 1
		}
	case k < 3: // a new leader epoch
		l.epochs.assign(md.nextEpoch, md.logEnd)
		md.nextEpoch++
		md.epochs = append(md.epochs, l.epochs.snapshot())
		if l.saveEpochs() != nil {
			md.offline = true // as the engine's ioFailure
		} else {
			md.epochsAcked = len(md.epochs) - 1
		}
	case k < 5: // a producer snapshot at the log end
		md.logEnd += rng.Int64N(5)
		ps := &l.producers
		l.logEnd.Store(md.logEnd)
		ps.entries, ps.coveredEnd, ps.changed = randomProducers(rng, md.logEnd), md.logEnd, true
		md.snaps[md.logEnd] = append(md.snaps[md.logEnd], encodeProducerSnapshot(md.logEnd, ps.entries))
		l.snapshotProducers()
	case k < 8: // an ABORT marker: its index entry first, then the append
		// As applyMarker: the transaction's data precede its marker; the
		// LSO is the marker's offset + 1 or an older open transaction's
		// first offset.
		a := abortedTxn{pid: rng.Int64N(1000), lastOffset: md.logEnd + 1 + rng.Int64N(3)}
		a.firstOffset = max(0, a.lastOffset-1-rng.Int64N(10))
		a.lso = a.lastOffset + 1
		if rng.IntN(3) == 0 {
			a.lso = rng.Int64N(a.firstOffset + 1)
		}
		base := md.bases[len(md.bases)-1]
		if l.addAbortedTxn(a) != nil {
			md.offline = true
			return
		}
		md.txn[base] = append(md.txn[base], a)
		md.logEnd = a.lastOffset + 1
		l.logEnd.Store(md.logEnd)
	case k < 9: // a flush: the directory (new index files), then the markers are durable
		if l.dirDirty {
			if err := e.syncFile(l.dir, func() error { return e.fs.SyncDir(l.dir) }); err != nil {
				md.offline = true
				return
			}
			l.dirDirty = false
		}
		for b, x := range md.txn {
			md.txnAcked[b] = len(x)
		}
		md.durable = md.logEnd
	default: // a roll, or a truncation of the active segment
		last := md.bases[len(md.bases)-1]
		if rng.IntN(2) == 0 {
			md.logEnd++
			l.logEnd.Store(md.logEnd)
			md.bases = append(md.bases, md.logEnd)
			segs := append(slices.Clone(*l.segs.Load()), newLogSegment(l.dir, md.logEnd, e.logger))
			l.segs.Store(&segs)
			return
		}
		end := last + rng.Int64N(md.logEnd-last+1)
		md.logEnd, md.durable = end, min(md.durable, end)
		l.logEnd.Store(end)
		l.loadTxnIndexes(end) // as producersTruncated -> loadProducers
		l.loadNewestSnapshot(end)
		x := md.txn[last]
		k := 0
		for k < len(x) && x[k].lastOffset < end {
			k++
		}
		md.txn[last] = x[:k]
		md.txnAcked[last] = min(md.txnAcked[last], k)
	}
}

// check restarts on after with the log end at end and checks every
// invariant; it returns what it saw for the round's statistics.
func (md *fileModel) check(t *testing.T, seed uint64, after *vfs.MemFS, dir string, end int64) (snapLoaded bool, txnKept int) {
	t.Helper()
	e := memEngine(after, dir)
	var bases []int64
	for _, b := range md.bases {
		if b < end || b == 0 {
			bases = append(bases, b)
		}
	}
	l := memLog(e, bases)
	for _, name := range checkpointNames {
		got, err := e.readCheckpoint(name)
		if err != nil {
			t.Fatalf("seed %d: %s after the crash: %v", seed, name, err)
		}
		from := max(md.ckptAcked[name], 0)
		ok := md.ckptAcked[name] < 0 && len(got) == 0
		for _, v := range md.ckpt[name][min(from, len(md.ckpt[name])):] {
			ok = ok || maps.Equal(got, v)
		}
		if !ok {
			t.Fatalf("seed %d: %s holds %v; acknowledged %d of %v", seed, name, got, md.ckptAcked[name], md.ckpt[name])
		}
	}

	l.loadEpochs()
	ok := false
	for _, v := range md.epochs[md.epochsAcked:] {
		ok = ok || slices.Equal(l.epochs.entries, v)
	}
	if !ok {
		t.Fatalf("seed %d: leader epochs %v after the crash; acknowledged %v, then %v", seed, l.epochs.entries,
			md.epochs[md.epochsAcked], md.epochs[md.epochsAcked+1:])
	}

	entries, from := l.loadNewestSnapshot(end)
	if from >= 0 {
		got := encodeProducerSnapshot(from, entries)
		if from > end || !slices.ContainsFunc(md.snaps[from], func(b []byte) bool { return bytes.Equal(b, got) }) {
			t.Fatalf("seed %d: snapshot at %d (log end %d) loaded a state never written there", seed, from, end)
		}
		snapLoaded = true
	}
	left, err := l.listSnapshots()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(left); n > 0 && left[n-1] > max(from, -1) {
		t.Fatalf("seed %d: snapshot files %v left above the one loaded (%d)", seed, left, from)
	}

	for _, s := range *l.segs.Load() {
		l.loadTxnIndex(s, end)
		want := md.txn[s.base]
		below := 0
		for below < len(want) && want[below].lastOffset < end {
			below++
		}
		got := s.aborted
		if len(got) > below || !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("seed %d: segment %d index holds %v; written %v (log end %d)", seed, s.base, got, want, end)
		}
		if acked := min(md.txnAcked[s.base], below); len(got) < acked {
			t.Fatalf("seed %d: segment %d index lost acknowledged entries: holds %v, acknowledged %v", seed, s.base, got, want[:acked])
		}
		txnKept += len(got)
		fi, err := after.Stat(s.txnPath)
		if err == nil && fi.Size() != int64(len(got)*txnIndexEntryBytes) {
			t.Fatalf("seed %d: segment %d index file is %d bytes after loading %d entries", seed, s.base, fi.Size(), len(got))
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	return snapLoaded, txnKept
}

// TestSmallFilesSurviveCrashes is the crash-consistency test described at
// the top of this file: stratatest.CrashSeeds rounds, each a seeded random sequence
// of up to 60 operations.
func TestSmallFilesSurviveCrashes(t *testing.T) {
	const dir = "/data"
	seeds := stratatest.CrashSeeds(t)
	var rounds, faulted, snapsLoaded, txnKept, powerCuts int
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 0xf11e5))
		m := vfs.NewMemFS()
		pdir := filepath.Join(dir, partitionDirName("t", 0))
		if err := m.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"/", dir} {
			if err := m.SyncDir(d); err != nil {
				t.Fatal(err)
			}
		}
		e := memEngine(m, dir)
		l := memLog(e, []int64{0})
		md := newFileModel()
		if rng.IntN(3) == 0 {
			ops := []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir, vfs.OpRename, vfs.OpTruncate, vfs.OpOpen, vfs.OpRemove}
			errs := []error{syscall.EIO, syscall.ENOSPC}
			m.Inject(vfs.Fault{Ops: ops[rng.IntN(len(ops))], Nth: 1 + rng.Int64N(20), Err: errs[rng.IntN(2)]})
			faulted++
		}
		m.PowerOffAfter(rng.Int64N(400))
		for range 60 {
			if m.PoweredOff() {
				powerCuts++
				break
			}
			md.step(rng, e, l)
		}
		opts := vfs.CrashOptions{Seed: seed, KeepUnsynced: rng.IntN(2) == 0, Tear: rng.IntN(3) != 0}
		after := m.Crash(opts)
		// The log the restart finds ends between the last flush and the
		// last append (unflushed appends may or may not have reached the
		// disk).
		end := md.durable + rng.Int64N(md.logEnd-md.durable+1)
		sl, tk := md.check(t, seed, after, dir, end)
		if sl {
			snapsLoaded++
		}
		txnKept += tk
		rounds++
	}
	t.Logf("%d rounds (%d with a fault, %d cut by the power mid-sequence): %d restarts loaded a snapshot, %d index entries kept",
		rounds, faulted, powerCuts, snapsLoaded, txnKept)
	if snapsLoaded == 0 || txnKept == 0 || powerCuts == 0 {
		t.Fatal("the rounds never reloaded a snapshot, kept an index entry or lost the power mid-sequence: they checked too little")
	}
}
