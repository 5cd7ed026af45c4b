package engine

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/stratalog/strata/internal/stratatest"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/record"
	"github.com/stratalog/strata/segment"
)

// TestCrashKeepsTransactionState: seeded rounds of one partition wholly on
// a vfs.MemFS (segment data, indexes, checkpoints, producer snapshots and
// transaction indexes alike) taking plain batches, idempotent batches of
// producer 1, transactional batches of producers 2 and 3 with their commit
// and abort markers, DeleteRecords up to the last stable offset (the log
// start moves; its checkpoint is written), recovery-point checkpoints
// (the flush coordinator's: indexes written back, then the checkpoint)
// and group offsets (Engine.Commit, to a compacted __consumer_offsets).
// Segments are small, so rolls write producer snapshots, seal and sync
// indexes; abort markers write transaction indexes. Every record carries
// its own timestamp, increasing through the log (markers take the
// engine's clock, below them all), so the time index means something.
// Appends are acknowledged (WhenDurable) now and then; in a quarter of the
// rounds an EIO or ENOSPC is injected into a write, sync, rename, truncate,
// open or remove; the MemFS loses power after a random number of its
// operations (inside a snapshot, checkpoint, index or transaction-index
// write as often as between them), and the crash keeps, in most rounds, a
// random part of the unsynced writes with torn ones. After the restart,
// against a model of what the round appended (txnSent):
//
//   - the log is what was appended, cut at some end: every batch from the
//     first segment's base to the log end is the one appended at its
//     offset (bytes, or the marker's producer and kind), offsets are
//     contiguous, every CRC holds, the end passes every acknowledged batch
//     and the HW is the end;
//   - the log start is at least the last acknowledged DeleteRecords and at
//     most the largest one tried, the committed offset (Engine.Committed)
//     at least the last acknowledged Commit and at most the largest tried;
//   - every offset index entry points at the start of a batch of its
//     segment whose last offset is the entry's; every time index entry
//     points into a batch of its segment with no earlier batch reaching
//     its timestamp (a lookup scanning from it misses nothing); each
//     segment's largest timestamp is its batches'; Read finds every
//     offset from the log start, and OffsetForTimestamp every record's
//     own offset by its timestamp;
//   - the aborted transactions (the transaction indexes) are exactly those
//     whose abort marker the retained segments hold, the LSO and each
//     producer's last sequence and open transaction are the model's; a
//     producer whose newest batch is retained is known, and a retry of
//     its newest batch is answered as a duplicate at the original offsets;
//   - each producer goes on: the idempotent one with its next sequence,
//     an open transaction is aborted and the LSO reaches the HW;
//   - after a clean close and reopen the indexes still match the log and
//     the aborted transactions, producers and committed offset are
//     unchanged.
func TestCrashKeepsTransactionState(t *testing.T) {
	seeds := stratatest.CrashSeeds(t)
	if testing.Short() {
		seeds = 40
	}
	root := t.TempDir() // stays empty: every file is on the rounds' MemFS
	var st txnCrashStats
	for seed := range uint64(seeds) {
		txnCrashRound(t, filepath.Join(root, fmt.Sprint(seed)), seed, &st)
		if t.Failed() {
			t.Fatalf("seed %d failed", seed)
		}
	}
	t.Logf("%d rounds (%d with a fault, %d cut mid-sequence): %d acknowledged batches checked; "+
		"%d DeleteRecords, %d checkpoints and %d group commits acknowledged, %d restarts with the log start moved past a segment; "+
		"after the crash the MemFS held %d snapshots, %d transaction-index entries, %d offset and %d time index entries; "+
		"after the restart %d offset and %d time index entries checked, %d aborted transactions and %d open ones recovered, "+
		"%d retries answered as duplicates; %d producers whose batches were all deleted known only by a retained marker",
		seeds, st.faulted, st.cut, st.acked, st.deletes, st.checkpoints, st.commits, st.startMoved,
		st.snapshots, st.txnEntries, st.indexEntries, st.timeEntries,
		st.offChecked, st.timChecked, st.aborted, st.open, st.duplicates, st.markerOnly)
	for _, c := range []struct {
		what string
		n    int64
	}{
		{"acknowledged batches", int64(st.acked)}, {"snapshots", st.snapshots}, {"transaction-index entries", st.txnEntries},
		{"offset index entries", st.indexEntries}, {"time index entries", st.timeEntries},
		{"aborted transactions", int64(st.aborted)}, {"open transactions", int64(st.open)}, {"cut rounds", int64(st.cut)},
		{"acknowledged DeleteRecords", int64(st.deletes)}, {"restarts past a deleted segment", int64(st.startMoved)},
		{"checkpoints", int64(st.checkpoints)}, {"duplicates", int64(st.duplicates)}, {"group commits", int64(st.commits)},
		{"offset entries checked", int64(st.offChecked)}, {"time entries checked", int64(st.timChecked)},
	} {
		if c.n == 0 {
			t.Errorf("no %s in %d rounds: the rounds checked too little", c.what, seeds)
		}
	}
}

type txnCrashStats struct {
	cut, acked, faulted, deletes, checkpoints, startMoved int
	commits                                               int
	snapshots, txnEntries, indexEntries, timeEntries      int64
	aborted, open, duplicates, offChecked, timChecked     int
	markerOnly                                            int
}

// txnProducer is what a round sent for one producer.
type txnProducer struct {
	seq   int32 // next sequence
	inTxn bool
	isTxn bool
}

// txnSent is one append of a round that returned, or the one whose
// failure took the engine offline (maybe: the crash may keep it or not).
type txnSent struct {
	base, last int64
	pid        int64 // -1: a plain batch
	seq        int32 // first sequence
	txn        bool  // a transactional data batch
	marker     bool
	commit     bool
	firstTs    int64  // data: record i is stamped firstTs+i
	data       []byte // data: the batch as appended
	maybe      bool
}

const (
	txnCrashClockMs = 1_000_000         // the engine's clock: markers' timestamps
	txnCrashFirstTs = 1_700_000_000_000 // the first record's timestamp
)

// tsBatch is a batch of n records stamped firstTs, firstTs+1, ..., of
// producer pid from sequence seq (pid < 0: none), transactional or not.
func tsBatch(t testing.TB, pid int64, seq int32, n, valueLen int, firstTs int64, txn bool) []byte {
	t.Helper()
	var b record.Builder
	b.Reset(record.CodecNone, firstTs)
	if pid >= 0 {
		b.SetProducer(pid, 0, seq)
	}
	if txn {
		b.SetTransactional()
	}
	for i := range n {
		b.Add(firstTs+int64(i), []byte("k"), bytes.Repeat([]byte{byte(firstTs) + byte(i)}, valueLen), nil)
	}
	out, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// txnRoundState is what a round's appends left to check.
type txnRoundState struct {
	sent                     []txnSent
	ackedEnd                 int64 // every offset below it was acknowledged
	ackedStart, triedStart   int64 // DeleteRecords: last acknowledged, largest tried
	ackedCommit, triedCommit int64 // group offsets: last acknowledged, largest tried (-1: none)
}

func txnCrashRound(t *testing.T, dir string, seed uint64, st *txnCrashStats) {
	rng := rand.New(rand.NewPCG(seed, 0x7c4a))
	mfs := newDataFS(t, dir)
	clock := newFakeClock(txnCrashClockMs) // never moves: the coordinator writes no checkpoint of its own
	open := func(fsys vfs.FS) *Engine {
		return openEngine(t, dir, func(o *Options) { o.fs, o.Now = fsys, clock.Now })
	}
	e := open(mfs)
	cfg := map[string]string{
		"segment.bytes":        fmt.Sprint(600 + rng.IntN(1500)),
		"index.interval.bytes": fmt.Sprint(64 + rng.IntN(256)),
		"segment.index.bytes":  "4096",
		"preallocate":          "false",
	}
	l := mustTopic(t, e, "txc", 1, cfg).Partition(0)
	// Group offsets (Engine.Commit) go to a one-partition __consumer_offsets.
	offCfg := maps.Clone(cfg)
	offCfg["cleanup.policy"] = "compact"
	mustTopic(t, e, OffsetsTopic, 1, offCfg)
	if rng.IntN(4) == 0 {
		// A failed write, sync, rename... of a file behind the seam: the
		// engine reports it or goes offline, never acknowledges what it
		// lost.
		ops := []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir, vfs.OpRename, vfs.OpTruncate, vfs.OpOpen, vfs.OpRemove}
		errs := []error{syscall.EIO, syscall.ENOSPC}
		suffixes := []string{"", snapshotSuffix, txnIndexSuffix, indexSuffix, timeIndexSuffix, tmpSuffix}
		mfs.Inject(vfs.Fault{Ops: ops[rng.IntN(len(ops))], Suffix: suffixes[rng.IntN(len(suffixes))],
			Nth: 1 + rng.Int64N(30), Err: errs[rng.IntN(2)]})
		st.faulted++
	}
	mfs.PowerOffAfter(1 + rng.Int64N(1500))
	rs := txnAppendRound(t, rng, seed, e, l, mfs, st)
	mfsAfter := mfs.Crash(vfs.CrashOptions{Seed: seed, KeepUnsynced: rng.IntN(2) == 0, Tear: rng.IntN(3) != 0})
	_ = e.Close()
	countCrashedFiles(mfsAfter, filepath.Join(dir, partitionDirName("txc", 0)), st)

	e2 := open(mfsAfter)
	defer func() { _ = e2.Close() }()
	l2 := e2.Topic("txc").Partition(0)
	end, start := l2.LogEndOffset(), l2.LogStartOffset()
	if hw := l2.HighWatermark(); hw != end {
		t.Errorf("seed %d: HW %d, log end %d after recovery", seed, hw, end)
	}
	if end < rs.ackedEnd {
		t.Errorf("seed %d: log end %d after recovery, %d acknowledged", seed, end, rs.ackedEnd)
	}
	if start < rs.ackedStart || start > rs.triedStart || start > end {
		t.Errorf("seed %d: log start %d after recovery; DeleteRecords acknowledged to %d, tried to %d; log end %d",
			seed, start, rs.ackedStart, rs.triedStart, end)
	}
	got := recoveredBatches(t, seed, l2)
	first := (*l2.segs.Load())[0].base
	if first > 0 {
		st.startMoved++
	}
	logSent := checkRecoveredAgainstSent(t, seed, got, rs.sent, first, end)
	for _, s := range rs.sent {
		if s.base < rs.ackedEnd && s.base >= first {
			st.acked++
		}
	}
	checkIndexes(t, seed, l2, got, st)
	committed, err := e2.Committed("g", "txc", 0)
	if err != nil || committed < rs.ackedCommit || committed > rs.triedCommit {
		t.Errorf("seed %d: committed offset %d (%v); commits acknowledged to %d, tried to %d", seed, committed, err, rs.ackedCommit, rs.triedCommit)
	}
	checkLookups(t, seed, l2, logSent)
	m := modelTxns(logSent, first)
	checkTxnState(t, seed, l2, m, first, st)
	aborted, producers := l2.AbortedTransactions(nil, 0, end), l2.Producers()

	// Producers go on where the recovered log left them.
	if s, ok := l2.Producer(1); ok {
		info := mustAppend(t, l2, idemBatch(t, 1, 0, s.LastSequence+1, 2))
		if info.BaseOffset != end || info.Duplicate {
			t.Errorf("seed %d: producer 1's next batch at %d (duplicate %v), log end %d", seed, info.BaseOffset, info.Duplicate, end)
		}
	}
	for pid := range m.open {
		mustMarker(t, l2, pid, 0, 0, false)
	}
	durable(t, l2)
	if lso, hw := l2.LastStableOffset(), l2.HighWatermark(); lso != hw {
		t.Errorf("seed %d: LSO %d, HW %d after aborting every open transaction", seed, lso, hw)
	}
	end2 := l2.LogEndOffset()
	aborted, producers = l2.AbortedTransactions(nil, 0, end2), l2.Producers()

	// A clean close and reopen keeps what recovery rebuilt.
	if err := e2.Close(); err != nil {
		t.Fatalf("seed %d: Close after recovery: %v", seed, err)
	}
	e3 := open(mfsAfter)
	defer func() { _ = e3.Close() }()
	l3 := e3.Topic("txc").Partition(0)
	if l3.LogEndOffset() != end2 || l3.LogStartOffset() != start {
		t.Errorf("seed %d: reopened with log [%d, %d), closed with [%d, %d)", seed, l3.LogStartOffset(), l3.LogEndOffset(), start, end2)
	}
	checkIndexes(t, seed, l3, recoveredBatches(t, seed, l3), st)
	if a := l3.AbortedTransactions(nil, 0, end2); !slices.Equal(a, aborted) {
		t.Errorf("seed %d: reopened with aborted transactions %+v, closed with %+v", seed, a, aborted)
	}
	if p := l3.Producers(); !slices.Equal(p, producers) {
		t.Errorf("seed %d: reopened with producers %+v, closed with %+v", seed, p, producers)
	}
	if c, err := e3.Committed("g", "txc", 0); c != committed || err != nil {
		t.Errorf("seed %d: reopened with committed offset %d (%v), closed with %d", seed, c, err, committed)
	}
}

// txnAppendRound appends up to 80 batches, markers, DeleteRecords and
// checkpoints to l until the MemFS loses its power or the engine goes
// offline, and returns what it sent.
func txnAppendRound(t *testing.T, rng *rand.Rand, seed uint64, e *Engine, l *Log, mfs *vfs.MemFS, st *txnCrashStats) txnRoundState {
	rs := txnRoundState{ackedCommit: -1, triedCommit: -1}
	prods := map[int64]*txnProducer{1: {}, 2: {isTxn: true}, 3: {isTxn: true}}
	ts := int64(txnCrashFirstTs)
	for range 80 {
		if mfs.PoweredOff() {
			st.cut++
			return rs
		}
		pid := int64(1 + rng.IntN(3))
		p := prods[pid]
		s := txnSent{pid: -1}
		var info AppendInfo
		var err error
		prev := l.LogEndOffset()
		switch k := rng.IntN(13); {
		case k == 12:
			off := l.LogEndOffset()
			rs.triedCommit = max(rs.triedCommit, off)
			if err = e.Commit("g", "txc", 0, off); err == nil {
				rs.ackedCommit = max(rs.ackedCommit, off)
				st.commits++
			}
		case k == 10:
			var acked bool
			acked, err = txnDeleteRecords(rng, l, &rs)
			if acked {
				st.deletes++
			}
		case k == 11:
			// What the flush coordinator does every checkpointIntervalMs
			// (it only logs a failure: the next one retries).
			e.writeBackIndexes()
			cerr := e.writeRecoveryCheckpoint()
			e.recoveryCheckpointWritten(cerr)
			if cerr == nil {
				st.checkpoints++
			}
		case k < 2:
			n := 1 + rng.IntN(3)
			s.firstTs, s.last = ts, prev+int64(n)-1
			s.data = tsBatch(t, -1, 0, n, rng.IntN(100), ts, false)
			ts += int64(n)
			info, err = l.Append(s.data, 0)
		case p.inTxn && k < 4:
			s.pid, s.marker, s.commit, s.last = pid, true, rng.IntN(2) == 0, prev
			info, err = l.AppendTxnMarker(pid, 0, 0, s.commit, 0)
			if err == nil {
				p.inTxn = false
			}
		default:
			n := 1 + rng.IntN(3)
			s.pid, s.seq, s.txn, s.firstTs, s.last = pid, p.seq, p.isTxn, ts, prev+int64(n)-1
			s.data = tsBatch(t, pid, p.seq, n, rng.IntN(40), ts, p.isTxn)
			ts += int64(n)
			info, err = l.Append(s.data, 0)
			if err == nil {
				p.seq += int32(n)
				p.inTxn = p.isTxn
			}
		}
		switch {
		case errors.Is(err, ErrResource):
			continue // an injected ENOSPC at a roll or a checkpoint: nothing appended, the log stays online
		case errors.Is(err, ErrOffline) && (s.data != nil || s.marker):
			s.base, s.maybe = prev, true
			rs.sent = append(rs.sent, s)
			st.cut++
			return rs
		case errors.Is(err, ErrOffline):
			st.cut++
			return rs
		case err != nil:
			t.Fatalf("seed %d: %v", seed, err)
		case s.data == nil && !s.marker:
			continue
		}
		if info.BaseOffset != prev || info.LastOffset != s.last {
			t.Fatalf("seed %d: appended at [%d, %d], log end was %d", seed, info.BaseOffset, info.LastOffset, prev)
		}
		s.base = info.BaseOffset
		rs.sent = append(rs.sent, s)
		if rng.IntN(4) == 0 && waitDurable(t, l, info.LastOffset) == nil {
			rs.ackedEnd = info.LastOffset + 1
		}
	}
	return rs
}

// txnDeleteRecords moves l's start to a random offset above it, at most
// the last stable offset (never past an open transaction's first offset),
// recording what was tried and acknowledged; nothing when there is no
// room.
func txnDeleteRecords(rng *rand.Rand, l *Log, rs *txnRoundState) (acked bool, err error) {
	start := l.LogStartOffset()
	top := min(l.HighWatermark(), l.LastStableOffset())
	if top <= start {
		return false, nil
	}
	before := start + 1 + rng.Int64N(top-start)
	rs.triedStart = max(rs.triedStart, before)
	if _, err := l.DeleteRecords(before); err != nil {
		return false, err
	}
	rs.ackedStart = max(rs.ackedStart, before)
	return true, nil
}

// countCrashedFiles adds what the crashed MemFS holds in pdir to st.
func countCrashedFiles(m *vfs.MemFS, pdir string, st *txnCrashStats) {
	ents, err := m.ReadDir(pdir)
	if err != nil {
		return
	}
	for _, ent := range ents {
		fi, err := m.Stat(filepath.Join(pdir, ent.Name()))
		if err != nil {
			continue
		}
		switch filepath.Ext(ent.Name()) {
		case snapshotSuffix:
			st.snapshots++
		case txnIndexSuffix:
			st.txnEntries += fi.Size() / txnIndexEntryBytes
		case indexSuffix:
			st.indexEntries += fi.Size() / offsetEntrySize
		case timeIndexSuffix:
			st.timeEntries += fi.Size() / timeEntrySize
		}
	}
}

// recBatch is one batch of a recovered log and the segment holding it.
type recBatch struct {
	seg  *logSegment
	info segment.BatchInfo
	data []byte
}

// recoveredBatches walks l's segments from the first one's base to the
// log end, checking that offsets are contiguous (across segments too) and
// every batch passes its CRC.
func recoveredBatches(t *testing.T, seed uint64, l *Log) []recBatch {
	t.Helper()
	segs := *l.segs.Load()
	var out []recBatch
	next := segs[0].base
	for _, s := range segs {
		if s.base != next {
			t.Errorf("seed %d: segment %d starts where the batches before it end, %d", seed, s.base, next)
		}
		var infos []segment.BatchInfo
		if err := s.seg.Scan(0, s.readEnd(), func(b segment.BatchInfo) bool {
			infos = append(infos, b)
			return true
		}); err != nil {
			t.Fatalf("seed %d: scanning segment %d: %v", seed, s.base, err)
		}
		for _, b := range infos {
			data, err := readBatch(s, b)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if !record.CheckCRC(data) {
				t.Errorf("seed %d: batch at %d fails its CRC (torn batch readable)", seed, b.BaseOffset)
			}
			if b.BaseOffset != next {
				t.Errorf("seed %d: batch at %d, expected %d (offsets not contiguous)", seed, b.BaseOffset, next)
			}
			next = b.LastOffset + 1
			out = append(out, recBatch{seg: s, info: b, data: data})
		}
	}
	if next != l.LogEndOffset() {
		t.Errorf("seed %d: batches end at %d, log end %d", seed, next, l.LogEndOffset())
	}
	return out
}

// checkRecoveredAgainstSent checks that every recovered batch is the one
// appended at its offset, and returns the appended batches below end:
// the log the restart holds (those below first are deleted).
func checkRecoveredAgainstSent(t *testing.T, seed uint64, got []recBatch, sent []txnSent, first, end int64) []txnSent {
	t.Helper()
	byBase := map[int64]txnSent{}
	k := 0
	for _, s := range sent {
		byBase[s.base] = s
		if s.base < end {
			k++
		}
	}
	for _, b := range got {
		s, ok := byBase[b.info.BaseOffset]
		switch {
		case !ok || s.last != b.info.LastOffset:
			t.Errorf("seed %d: recovered batch [%d, %d] was never appended", seed, b.info.BaseOffset, b.info.LastOffset)
		case s.marker:
			h, err := record.ParseHeader(b.data)
			commit, _, merr := parseMarkerBatch(b.data)
			if err != nil || merr != nil || !h.Control() || h.ProducerID != s.pid || commit != s.commit {
				t.Errorf("seed %d: marker at %d differs: %+v commit %v (%v %v), appended %+v", seed, s.base, h, commit, err, merr, s)
			}
		case !bytes.Equal(b.data[record.OffsetAttrs:], s.data[record.OffsetAttrs:]):
			t.Errorf("seed %d: batch at %d differs from the one appended", seed, s.base)
		}
	}
	if k > 0 && sent[k-1].last != end-1 {
		t.Errorf("seed %d: log end %d cuts the batch appended at [%d, %d]", seed, end, sent[k-1].base, sent[k-1].last)
	}
	if k == 0 && end != first {
		t.Errorf("seed %d: log end %d with nothing appended below it", seed, end)
	}
	return sent[:k]
}

// checkIndexes checks every offset and time index entry of l against the
// batches of its segment, and each segment's largest timestamp.
func checkIndexes(t *testing.T, seed uint64, l *Log, got []recBatch, st *txnCrashStats) {
	t.Helper()
	l.idxMu.RLock()
	defer l.idxMu.RUnlock()
	for _, s := range *l.segs.Load() {
		var bs []segment.BatchInfo
		for _, b := range got {
			if b.seg == s {
				bs = append(bs, b.info)
			}
		}
		atPos := map[int64]segment.BatchInfo{}
		maxTs := int64(-1)
		for _, b := range bs {
			atPos[b.Pos] = b
			maxTs = max(maxTs, b.MaxTimestamp)
		}
		if len(bs) > 0 && s.maxTs != maxTs {
			t.Errorf("seed %d: segment %d's largest timestamp %d, its batches' %d", seed, s.base, s.maxTs, maxTs)
		}
		for i := 0; s.off != nil; i++ {
			off, pos, ok := s.off.Entry(i)
			if !ok {
				break
			}
			st.offChecked++
			if b, ok := atPos[pos]; !ok || b.LastOffset != off {
				t.Errorf("seed %d: segment %d's offset index entry %d (%d -> %d) points at no batch ending there (%+v)", seed, s.base, i, off, pos, b)
			}
		}
		for i := 0; s.tim != nil; i++ {
			ts, off, ok := s.tim.Entry(i)
			if !ok {
				break
			}
			st.timChecked++
			// A lower bound for timestamp lookups: no batch before the one
			// holding off reaches ts. (Written, it names the batch that
			// first reached ts; a torn write of the active segment's
			// index, never synced, can keep the timestamp and lose part
			// of the offset, which still bounds a lookup.)
			j := slices.IndexFunc(bs, func(b segment.BatchInfo) bool { return b.BaseOffset <= off && off <= b.LastOffset })
			if j < 0 || slices.ContainsFunc(bs[:j], func(b segment.BatchInfo) bool { return b.MaxTimestamp >= ts }) {
				t.Errorf("seed %d: segment %d's time index entry %d (%d -> %d) points past a batch reaching that timestamp, or at none", seed, s.base, i, ts, off)
			}
		}
	}
}

// checkLookups reads every offset from the log start through Read (the
// offset index) and finds every record from the log start by its
// timestamp through OffsetForTimestamp (the time index).
func checkLookups(t *testing.T, seed uint64, l *Log, logSent []txnSent) {
	t.Helper()
	start, end := l.LogStartOffset(), l.LogEndOffset()
	hb := make([]byte, record.HeaderSize)
	for off := start; off < end; off++ {
		res, err := l.Read(off, 1, true)
		if err != nil || len(res.Chunks) == 0 {
			t.Fatalf("seed %d: Read(%d): %v", seed, off, err)
		}
		_, err = res.seg.seg.ReadAt(hb, res.Chunks[0].Pos)
		res.Release()
		h, perr := record.ParseHeader(hb)
		if err != nil || perr != nil || h.BaseOffset > off || h.LastOffset() < off {
			t.Fatalf("seed %d: Read(%d) found the batch [%d, %d]: %v %v", seed, off, h.BaseOffset, h.LastOffset(), err, perr)
		}
	}
	for _, s := range logSent {
		if s.data == nil {
			continue
		}
		for off := max(s.base, start); off <= s.last; off++ {
			ts := s.firstTs + off - s.base
			if got, gotTs, ok := l.OffsetForTimestamp(ts); !ok || got != off || gotTs != ts {
				t.Errorf("seed %d: OffsetForTimestamp(%d) = (%d, %d, %v), the record is at %d", seed, ts, got, gotTs, ok, off)
			}
		}
	}
}

// txnModel is what the appended batches say about transactions and
// producers.
type txnModel struct {
	aborted []AbortedTxn      // abort markers in the retained segments
	open    map[int64]int64   // producer -> first offset of its open transaction
	newest  map[int64]txnSent // producer -> its newest data batch
}

func modelTxns(logSent []txnSent, first int64) txnModel {
	m := txnModel{open: map[int64]int64{}, newest: map[int64]txnSent{}}
	for _, s := range logSent {
		switch {
		case s.pid < 0:
		case s.marker:
			if f, ok := m.open[s.pid]; ok && !s.commit && s.base >= first {
				m.aborted = append(m.aborted, AbortedTxn{ProducerID: s.pid, FirstOffset: f})
			}
			delete(m.open, s.pid)
		default:
			m.newest[s.pid] = s
			if _, ok := m.open[s.pid]; s.txn && !ok {
				m.open[s.pid] = s.base
			}
		}
	}
	return m
}

// checkTxnState checks l's aborted transactions, LSO and producers against
// the model, and that a retry of each known producer's newest batch is a
// duplicate.
func checkTxnState(t *testing.T, seed uint64, l *Log, m txnModel, first int64, st *txnCrashStats) {
	t.Helper()
	end, start, hw := l.LogEndOffset(), l.LogStartOffset(), l.HighWatermark()
	gotAborted := l.AbortedTransactions(nil, 0, end)
	byFirst := func(a, b AbortedTxn) int {
		return cmp.Or(cmp.Compare(a.FirstOffset, b.FirstOffset), cmp.Compare(a.ProducerID, b.ProducerID))
	}
	slices.SortFunc(gotAborted, byFirst)
	slices.SortFunc(m.aborted, byFirst)
	if !slices.Equal(gotAborted, m.aborted) {
		t.Errorf("seed %d: aborted transactions %+v, the log holds %+v", seed, gotAborted, m.aborted)
	}
	wantLSO := hw
	for _, f := range m.open {
		wantLSO = min(wantLSO, f)
	}
	wantLSO = min(max(wantLSO, start), hw)
	if lso := l.LastStableOffset(); lso != wantLSO {
		t.Errorf("seed %d: LSO %d, the log says %d", seed, lso, wantLSO)
	}
	st.aborted += len(m.aborted)
	st.open += len(m.open)
	known := map[int64]ProducerState{}
	for _, ps := range l.Producers() {
		known[ps.ProducerID] = ps
		s, ok := m.newest[ps.ProducerID]
		f, isOpen := m.open[ps.ProducerID]
		wantSeq := s.seq + int32(s.last-s.base)
		if ok && s.base < first && ps.LastSequence == -1 && !isOpen {
			// Its batches deleted, a retained marker of it replayed.
			st.markerOnly++
			continue
		}
		if !ok || ps.LastSequence != wantSeq || (isOpen && ps.CurrentTxnStartOffset != f) || (!isOpen && ps.CurrentTxnStartOffset != -1) {
			t.Errorf("seed %d: producer %+v; the log says last sequence %d (known %v), open transaction at %d (%v)",
				seed, ps, wantSeq, ok, f, isOpen)
		}
	}
	for _, pid := range slices.Sorted(maps.Keys(m.newest)) {
		s := m.newest[pid]
		ps, ok := known[pid]
		if !ok || ps.LastSequence == -1 {
			if s.base >= first {
				t.Errorf("seed %d: producer %d, whose batch at %d the log holds, is unknown after recovery", seed, pid, s.base)
			}
			continue
		}
		info, err := l.Append(slices.Clone(s.data), 0)
		if err != nil || !info.Duplicate || info.BaseOffset != s.base || info.LastOffset != s.last {
			t.Errorf("seed %d: retry of producer %d's batch [%d, %d] (sequence %d): %+v, %v; want a duplicate",
				seed, pid, s.base, s.last, s.seq, info, err)
		}
		st.duplicates++
	}
	if l.LogEndOffset() != end {
		t.Errorf("seed %d: retries moved the log end from %d to %d", seed, end, l.LogEndOffset())
	}
}
