package engine

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/stratalog/strata/record"
)

// txnBatch is idemBatch with the transactional attribute.
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	b := idemBatch(t, pid, epoch, seq, n)
	attrs := binary.BigEndian.Uint16(b[record.OffsetAttrs:])
	binary.BigEndian.PutUint16(b[record.OffsetAttrs:], attrs|0x10) // transactional
	binary.BigEndian.PutUint32(b[record.OffsetCRC:], crc32.Checksum(b[record.OffsetAttrs:], castagnoliTable))
	return b
}

func mustMarker(t testing.TB, l *Log, pid int64, epoch int16, coord int32, commit bool) AppendInfo {
	t.Helper()
	info, err := l.AppendTxnMarker(pid, epoch, coord, commit, 0)
	if err != nil {
		t.Fatalf("AppendTxnMarker(%d, commit %v): %v", pid, commit, err)
	}
	return info
}

func durable(t testing.TB, l *Log) {
	t.Helper()
	if err := waitDurable(t, l, l.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
}

func wantLSO(t testing.TB, l *Log, want int64) {
	t.Helper()
	if got := l.LastStableOffset(); got != want {
		t.Fatalf("LSO %d, want %d (HW %d, log end %d)", got, want, l.HighWatermark(), l.LogEndOffset())
	}
}

func wantAborted(t testing.TB, l *Log, from, to int64, want ...AbortedTxn) {
	t.Helper()
	got := l.AbortedTransactions(nil, from, to)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("AbortedTransactions(%d, %d) = %+v, want %+v", from, to, got, want)
	}
}

// txnScenario writes, on l: plain records, a committed transaction of
// producer 1, an aborted one of producer 2 and an open one of producer 3,
// with other traffic between. It returns the first offsets of the three
// transactions.
func txnScenario(t *testing.T, l *Log) (first1, first2, first3 int64) {
	t.Helper()
	mustAppend(t, l, batchOf(t, 3, 10, 1000, 1))
	first1 = mustAppend(t, l, txnBatch(t, 1, 0, 0, 2)).BaseOffset
	first2 = mustAppend(t, l, txnBatch(t, 2, 0, 0, 3)).BaseOffset
	mustAppend(t, l, txnBatch(t, 1, 0, 2, 2))
	mustAppend(t, l, batchOf(t, 20, 250, 1000, 2)) // rolls small segments
	mustAppend(t, l, batchOf(t, 20, 250, 1000, 4))
	mustMarker(t, l, 1, 0, 5, true)
	mustAppend(t, l, txnBatch(t, 2, 0, 3, 1))
	mustMarker(t, l, 2, 0, 5, false)
	first3 = mustAppend(t, l, txnBatch(t, 3, 0, 0, 2)).BaseOffset
	mustAppend(t, l, batchOf(t, 2, 10, 1000, 3))
	durable(t, l)
	return first1, first2, first3
}

func TestTxnLastStableOffset(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "lso", 1, nil).Partition(0)
	mustAppend(t, l, batchOf(t, 5, 10, 1000, 1))
	durable(t, l)
	wantLSO(t, l, 5)

	first := mustAppend(t, l, txnBatch(t, 7, 0, 0, 3)).BaseOffset
	mustAppend(t, l, batchOf(t, 4, 10, 1000, 2))
	durable(t, l)
	wantLSO(t, l, first)
	if ps := l.Producers(); len(ps) != 1 || ps[0].CurrentTxnStartOffset != first {
		t.Fatalf("producers %+v, want producer 7 with a transaction open at %d", ps, first)
	}
	// read_committed reads stop at the LSO; read_uncommitted at the HW.
	rr, err := l.ReadCommittedMem(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	if rr.LastStableOffset != first || rr.HighWatermark != 12 {
		t.Fatalf("read_committed result LSO %d HW %d", rr.LastStableOffset, rr.HighWatermark)
	}
	if got := lastOffsetOfChunks(t, rr); got != first-1 {
		t.Fatalf("read_committed read up to %d, want %d", got, first-1)
	}
	rr.Release()
	if rr, err = l.ReadMem(0, 1<<20, true); err != nil || lastOffsetOfChunks(t, rr) != 11 || rr.LastStableOffset != first {
		t.Fatalf("read_uncommitted: %v, last %d, LSO %d", err, lastOffsetOfChunks(t, rr), rr.LastStableOffset)
	}
	rr.Release()

	// The open transaction's producer may not write outside it.
	if _, err := l.Append(idemBatch(t, 7, 0, 3, 1), 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch in an open transaction: %v, want ErrInvalidTxnState", err)
	}
	if _, err := l.Append(txnBatch(t, -1, -1, -1, 1), 0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("transactional batch without producer id: %v, want ErrInvalidRecord", err)
	}
	mustAppend(t, l, txnBatch(t, 7, 0, 3, 1))

	// Fencing: an older marker epoch, then an older coordinator epoch.
	mustMarker(t, l, 7, 0, 3, true)
	durable(t, l)
	wantLSO(t, l, l.HighWatermark())
	end := l.LogEndOffset()
	if _, err := l.AppendTxnMarker(7, 0, 2, false, 0); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("older coordinator epoch: %v", err)
	}
	mustMarker(t, l, 7, 2, 3, false) // a bumped marker epoch (fencing abort): no open txn, no index entry
	if _, err := l.AppendTxnMarker(7, 1, 3, false, 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("older marker epoch: %v", err)
	}
	if l.LogEndOffset() != end+1 {
		t.Fatalf("rejected markers moved the log end: %d -> %d", end, l.LogEndOffset())
	}
	wantAborted(t, l, 0, l.LogEndOffset())
	// The marker bumped the epoch: epoch 0 is fenced, epoch 2 restarts at 0.
	if _, err := l.Append(txnBatch(t, 7, 0, 4, 1), 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("batch of the fenced epoch: %v", err)
	}
	mustAppend(t, l, txnBatch(t, 7, 2, 0, 1))
	if ps := l.Producers(); ps[0].ProducerEpoch != 2 || ps[0].CoordinatorEpoch != 3 {
		t.Fatalf("producer after markers: %+v", ps[0])
	}
}

// lastOffsetOfChunks returns the last offset of the batches rr holds, -1 if none.
func lastOffsetOfChunks(t testing.TB, rr ReadResult) int64 {
	t.Helper()
	last := int64(-1)
	var data []byte
	for _, c := range rr.Chunks {
		if c.File == nil {
			data = append(data, c.Buf...)
			continue
		}
		buf := make([]byte, c.Len)
		if _, err := c.File.ReadAt(buf, c.Pos); err != nil {
			t.Fatal(err)
		}
		data = append(data, buf...)
	}
	for b := data; len(b) > 0; {
		_, rest, h, err := record.Next(b)
		if err != nil {
			t.Fatal(err)
		}
		last, b = h.LastOffset(), rest
	}
	return last
}

func TestTxnAbortedIndex(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	l := mustTopic(t, e, "aborts", 1, smallConfig()).Partition(0)
	_, first2, first3 := txnScenario(t, l)
	wantLSO(t, l, first3)
	all := AbortedTxn{ProducerID: 2, FirstOffset: first2}
	wantAborted(t, l, 0, first3, all)
	wantAborted(t, l, first2+1, first2+2, all)
	wantAborted(t, l, 0, first2) // the range ends before the transaction
	abortAt := findMarker(t, l, 2)
	wantAborted(t, l, abortAt+1, l.LogEndOffset())

	// On disk: one .txnindex, in the segment of the ABORT marker, 34 bytes.
	var files []string
	ents, _ := os.ReadDir(l.dir)
	for _, ent := range ents {
		if filepath.Ext(ent.Name()) == txnIndexSuffix {
			files = append(files, ent.Name())
		}
	}
	segs := *l.segs.Load()
	want := filepath.Base(segmentFileName(l.dir, segs[floorSegment(segs, abortAt)].base, txnIndexSuffix))
	if len(files) != 1 || files[0] != want {
		t.Fatalf("txnindex files %v, want [%s]", files, want)
	}
	data, err := os.ReadFile(filepath.Join(l.dir, want))
	if err != nil || len(data) != txnIndexEntryBytes {
		t.Fatalf("index file: %v, %d bytes", err, len(data))
	}
	got, _, err := decodeTxnIndex(data)
	// No transaction was open after the abort (producer 3's starts later):
	// the entry's LSO is the marker's offset + 1.
	if err != nil || len(got) != 1 || got[0] != (abortedTxn{pid: 2, firstOffset: first2, lastOffset: abortAt, lso: abortAt + 1}) {
		t.Fatalf("index entries %+v, %v", got, err)
	}
	if len(segs) < 3 || floorSegment(segs, abortAt) == floorSegment(segs, first2) {
		t.Fatalf("want the transaction to span segments: %d segments", len(segs))
	}

	// Clean restart: the same LSO, index and producers.
	wantProducers := l.Producers()
	e.Close()
	e = openEngine(t, dir, nil)
	l = e.Topic("aborts").Partition(0)
	wantLSO(t, l, first3)
	wantAborted(t, l, 0, l.LogEndOffset(), all)
	if got := l.Producers(); !reflect.DeepEqual(got, wantProducers) {
		t.Fatalf("producers after restart %+v, want %+v", got, wantProducers)
	}
	// The open transaction still blocks, and ends.
	mustMarker(t, l, 3, 0, 5, false)
	durable(t, l)
	wantLSO(t, l, l.HighWatermark())
	wantAborted(t, l, 0, l.LogEndOffset(), all, AbortedTxn{ProducerID: 3, FirstOffset: first3})
	e.Close()
}

// findMarker returns the offset of producer pid's last control batch.
func findMarker(t testing.TB, l *Log, pid int64) int64 {
	t.Helper()
	at := int64(-1)
	for _, s := range *l.segs.Load() {
		rr, err := l.readUpTo(s.base, 1<<30, true, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		for b := readChunks(t, rr); len(b) > 0; {
			_, rest, h, err := record.Next(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.Control() && h.ProducerID == pid {
				at = h.BaseOffset
			}
			b = rest
		}
		rr.Release()
	}
	return at
}

// TestTxnCrashRestart: an image of the directory taken while the broker
// runs (no clean shutdown, like SIGKILL) rebuilds the LSO, the open
// transactions and the aborted index from snapshots and the log; so does
// an image whose index files and snapshots were lost.
func TestTxnCrashRestart(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	defer e.Close()
	l := mustTopic(t, e, "crash", 1, smallConfig()).Partition(0)
	_, first2, first3 := txnScenario(t, l)
	wantP := l.Producers()
	for _, strip := range []bool{false, true} {
		image := filepath.Join(t.TempDir(), "image")
		copyDir(t, dir, image)
		if strip {
			ents, _ := os.ReadDir(filepath.Join(image, "crash-0"))
			for _, ent := range ents {
				if ext := filepath.Ext(ent.Name()); ext == txnIndexSuffix || ext == snapshotSuffix {
					os.Remove(filepath.Join(image, "crash-0", ent.Name()))
				}
			}
		}
		e2 := openEngine(t, image, nil)
		l2 := e2.Topic("crash").Partition(0)
		wantLSO(t, l2, first3)
		wantAborted(t, l2, 0, l2.LogEndOffset(), AbortedTxn{ProducerID: 2, FirstOffset: first2})
		if got := l2.Producers(); !reflect.DeepEqual(got, wantP) {
			t.Fatalf("strip %v: producers %+v, want %+v", strip, got, wantP)
		}
		e2.Close()
	}
}

// TestTxnFollower: a follower that copies the leader's batches (markers
// included) rebuilds the same LSO and aborted index, and truncation drops
// index entries past the cut.
func TestTxnFollower(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	leader := mustTopic(t, e, "lead", 1, smallConfig()).Partition(0)
	follower := mustTopic(t, e, "follow", 1, smallConfig()).Partition(0)
	_, first2, first3 := txnScenario(t, leader)
	for off := int64(0); off < leader.LogEndOffset(); {
		rr, err := leader.ReadReplica(off, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		b := readChunks(t, rr)
		rr.Release()
		info, err := follower.AppendAsFollower(b)
		if err != nil {
			t.Fatal(err)
		}
		off = info.LastOffset + 1
	}
	durable(t, follower)
	wantLSO(t, follower, first3)
	all := AbortedTxn{ProducerID: 2, FirstOffset: first2}
	wantAborted(t, follower, 0, follower.LogEndOffset(), all)
	if !reflect.DeepEqual(follower.Producers(), leader.Producers()) {
		t.Fatalf("follower producers %+v, leader %+v", follower.Producers(), leader.Producers())
	}
	abortAt := findMarker(t, follower, 2)
	if _, err := follower.TruncateTo(abortAt); err != nil {
		t.Fatal(err)
	}
	wantAborted(t, follower, 0, follower.LogEndOffset())
	wantLSO(t, follower, first2) // producer 2's transaction is open again
	segs := *follower.segs.Load()
	for _, s := range segs {
		if len(s.aborted) != 0 {
			t.Fatalf("segment %d kept index entries past the cut: %+v", s.base, s.aborted)
		}
	}
}

func TestTxnIndexDecode(t *testing.T) {
	entries := []abortedTxn{{1, 0, 5, 6}, {2, 3, 9, 4}, {1 << 40, 10, 10, 11}}
	var b []byte
	for _, a := range entries {
		b = appendTxnIndexEntry(b, a)
	}
	if len(b) != 3*34 {
		t.Fatalf("%d bytes", len(b))
	}
	got, whole, err := decodeTxnIndex(append(b, 0, 0, 0)) // a torn entry
	if err != nil || whole != len(b) || !slices.Equal(got, entries) {
		t.Fatalf("decode: %+v %d %v", got, whole, err)
	}
	bad := slices.Clone(b)
	bad[34+1] = 1 // version 1
	if _, _, err := decodeTxnIndex(bad); !errors.Is(err, errBadTxnIndex) {
		t.Fatalf("bad version: %v", err)
	}
	out := appendTxnIndexEntry(nil, abortedTxn{1, 8, 5, 1}) // first > last
	if _, _, err := decodeTxnIndex(out); !errors.Is(err, errBadTxnIndex) {
		t.Fatalf("first > last: %v", err)
	}
}

func FuzzTxnIndexDecode(f *testing.F) {
	f.Add(appendTxnIndexEntry(nil, abortedTxn{1, 2, 3, 4}))
	f.Add([]byte{})
	f.Add(make([]byte, 70))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, whole, err := decodeTxnIndex(b)
		if err != nil {
			return
		}
		if whole != len(got)*txnIndexEntryBytes || whole > len(b) || len(b)-whole >= txnIndexEntryBytes {
			t.Fatalf("whole %d for %d entries of %d bytes", whole, len(got), len(b))
		}
		var re []byte
		for _, a := range got {
			re = appendTxnIndexEntry(re, a)
		}
		if string(re) != string(b[:whole]) {
			t.Fatal("re-encoding differs")
		}
	})
}

func TestTxnOpenSet(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "open", 1, nil).Partition(0)
	var firsts []int64
	for pid := int64(10); pid < 15; pid++ {
		firsts = append(firsts, mustAppend(t, l, txnBatch(t, pid, 0, 0, 2)).BaseOffset)
	}
	durable(t, l)
	wantLSO(t, l, firsts[0])
	// End them out of order: the LSO is always the oldest still open.
	for _, i := range []int{2, 0, 4, 1, 3} {
		mustMarker(t, l, 10+int64(i), 0, 0, i%2 == 0)
		durable(t, l)
		want := l.HighWatermark()
		for j := range firsts {
			if l.Producers()[j].CurrentTxnStartOffset >= 0 {
				want = min(want, firsts[j])
			}
		}
		wantLSO(t, l, want)
	}
	l.producers.txn.mu.Lock()
	n, m := len(l.producers.txn.open), len(l.producers.txn.ended)
	l.producers.txn.mu.Unlock()
	if n != 0 || m != 0 {
		t.Fatalf("open %d ended %d after every marker", n, m)
	}
	wantAborted(t, l, 0, l.LogEndOffset(),
		AbortedTxn{ProducerID: 11, FirstOffset: firsts[1]}, AbortedTxn{ProducerID: 13, FirstOffset: firsts[3]})
}

// TestTxnCompaction: the cleaner never cleans past the LSO, drops the
// records of aborted transactions (which must not supersede committed
// ones) and carries the aborted index into the segments it writes.
func TestTxnCompaction(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	cfg := smallConfig()
	cfg["cleanup.policy"] = "compact"
	cfg["min.cleanable.dirty.ratio"] = "0"
	tp := mustTopic(t, e, "compact", 1, cfg)
	l := tp.Partition(0)
	key := func(k, v string, pid int64, seq int32, txn bool) []byte {
		var b record.Builder
		b.Reset(record.CodecNone, 1000)
		b.SetProducer(pid, 0, seq)
		b.Add(1000, []byte(k), []byte(v), nil)
		if txn {
			b.SetTransactional()
		}
		out, _ := b.AppendTo(nil)
		return out
	}
	mustAppend(t, l, key("a", "committed", 1, 0, false))
	aborted := mustAppend(t, l, key("a", "aborted", 2, 0, true)).BaseOffset
	mustMarker(t, l, 2, 0, 0, false)
	for i := 0; i < 60; i++ { // roll several segments
		mustAppend(t, l, key("filler", string(rune('a'+i%26)), -1, -1, false))
	}
	durable(t, l)
	if _, err := tp.Compact(0); err != nil {
		t.Fatal(err)
	}
	values := map[string][]string{}
	for off := int64(0); off < l.HighWatermark(); {
		rr, err := l.Read(off, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		b := readChunks(t, rr)
		rr.Release()
		if len(b) == 0 {
			break
		}
		for len(b) > 0 {
			batch, rest, h, _ := record.Next(b)
			if !h.Control() {
				record.Iterate(batch, func(h *record.Header, r *record.Record) error {
					values[string(r.Key)] = append(values[string(r.Key)], string(r.Value))
					return nil
				})
			}
			off, b = h.LastOffset()+1, rest
		}
	}
	if !slices.Equal(values["a"], []string{"committed"}) {
		t.Fatalf("key a after compaction: %v", values["a"])
	}
	if n := len(values["filler"]); n >= 60 {
		t.Fatalf("filler: %d values left, want fewer than 60 (compaction ran)", n)
	}
	wantAborted(t, l, 0, l.LogEndOffset(), AbortedTxn{ProducerID: 2, FirstOffset: aborted})
}

// FuzzParseMarkerBatch: marker batches read back from the log (a follower
// copies them from the leader) never panic the parser, and what it accepts
// re-encodes to a marker with the same outcome and coordinator epoch.
func FuzzParseMarkerBatch(f *testing.F) {
	f.Add(appendMarkerBatch(nil, &txnMarker{pid: 1, epoch: 2, coordinatorEpoch: 3, commit: true}, 1000))
	f.Add(appendMarkerBatch(nil, &txnMarker{pid: 9, coordinatorEpoch: -1}, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		commit, coord, err := parseMarkerBatch(b)
		if err != nil {
			return
		}
		again := appendMarkerBatch(nil, &txnMarker{pid: 1, coordinatorEpoch: coord, commit: commit}, 0)
		c2, co2, err := parseMarkerBatch(again)
		if err != nil || c2 != commit || co2 != coord {
			t.Fatalf("round trip: %v %v %d", err, c2, co2)
		}
	})
}

// TestTxnIndexDeletedWithSegment: deleting the segments (DeleteRecords)
// removes their .txnindex files and entries; an open transaction whose
// first records were deleted holds the LSO at the log start.
func TestTxnIndexDeletedWithSegment(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "del", 1, smallConfig()).Partition(0)
	_, _, first3 := txnScenario(t, l)
	countFiles := func() int {
		n := 0
		ents, _ := os.ReadDir(l.dir)
		for _, ent := range ents {
			if filepath.Ext(ent.Name()) == txnIndexSuffix {
				n++
			}
		}
		return n
	}
	if countFiles() != 1 {
		t.Fatalf("%d txnindex files before the deletion", countFiles())
	}
	start, err := l.DeleteRecords(-1) // everything: the log rolls, old segments go
	if err != nil {
		t.Fatal(err)
	}
	if countFiles() != 0 || start <= first3 {
		t.Fatalf("%d txnindex files left after DeleteRecords to %d", countFiles(), start)
	}
	wantAborted(t, l, 0, l.LogEndOffset())
	mustAppend(t, l, batchOf(t, 3, 10, 1000, 9))
	durable(t, l)
	wantLSO(t, l, start) // producer 3's transaction began below the log start
	mustMarker(t, l, 3, 0, 5, true)
	durable(t, l)
	wantLSO(t, l, l.HighWatermark())
}

// TestTxnMatchesModel drives random transactional traffic (several
// producers, commits and aborts, plain records, segment rolls, clean
// restarts and crash images) and checks the LSO, the open transactions and
// the aborted transactions against a plain model after every step; at the
// end a follower that copied the log agrees too.
func TestTxnMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	defer func() { e.Close() }()
	l := mustTopic(t, e, "model", 1, smallConfig()).Partition(0)
	type prod struct {
		seq  int32
		open int64 // first offset of the open transaction, -1 if none
	}
	prods := map[int64]*prod{}
	for pid := int64(1); pid <= 4; pid++ {
		prods[pid] = &prod{open: -1}
	}
	var aborted []AbortedTxn // in marker order
	restarts := 0
	check := func(step int) {
		t.Helper()
		durable(t, l)
		want := l.HighWatermark()
		for _, p := range prods {
			if p.open >= 0 {
				want = min(want, p.open)
			}
		}
		if got := l.LastStableOffset(); got != want {
			t.Fatalf("step %d: LSO %d, model %d", step, got, want)
		}
		got := l.AbortedTransactions(nil, 0, l.LogEndOffset())
		if len(got) != len(aborted) || (len(got) > 0 && !reflect.DeepEqual(got, aborted)) {
			t.Fatalf("step %d: aborted %+v, model %+v", step, got, aborted)
		}
		for _, ps := range l.Producers() {
			if p := prods[ps.ProducerID]; p != nil && ps.CurrentTxnStartOffset != p.open {
				t.Fatalf("step %d: producer %d open at %d, model %d", step, ps.ProducerID, ps.CurrentTxnStartOffset, p.open)
			}
		}
	}
	for step := 0; step < 400; step++ {
		pid := int64(1 + rng.IntN(4))
		p := prods[pid]
		switch op := rng.IntN(10); {
		case op < 2:
			mustAppend(t, l, batchOf(t, 1+rng.IntN(5), 50+rng.IntN(400), 1000, step))
		case op < 7:
			n := 1 + rng.IntN(4)
			info := mustAppend(t, l, txnBatch(t, pid, 0, p.seq, n))
			p.seq += int32(n)
			if p.open < 0 {
				p.open = info.BaseOffset
			}
		case op < 9 || rng.IntN(3) != 0:
			commit := rng.IntN(2) == 0
			info := mustMarker(t, l, pid, 0, 1, commit)
			if p.open >= 0 && !commit {
				aborted = append(aborted, AbortedTxn{ProducerID: pid, FirstOffset: p.open})
			}
			p.open = -1
			_ = info
		default:
			// Restart: clean, or from a crash image of the live directory.
			restarts++
			durable(t, l)
			if rng.IntN(2) == 0 {
				e.Close()
				e = openEngine(t, dir, nil)
			} else {
				image := filepath.Join(t.TempDir(), "image")
				copyDir(t, dir, image)
				e.Close()
				dir = image
				e = openEngine(t, dir, nil)
			}
			l = e.Topic("model").Partition(0)
		}
		check(step)
	}
	follower := mustTopic(t, e, "model-follower", 1, smallConfig()).Partition(0)
	for off := int64(0); off < l.LogEndOffset(); {
		rr, err := l.ReadReplica(off, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		b := readChunks(t, rr)
		rr.Release()
		info, err := follower.AppendAsFollower(b)
		if err != nil {
			t.Fatal(err)
		}
		off = info.LastOffset + 1
	}
	durable(t, follower)
	if got, want := follower.LastStableOffset(), l.LastStableOffset(); got != want {
		t.Fatalf("follower LSO %d, leader %d", got, want)
	}
	if got := follower.AbortedTransactions(nil, 0, follower.LogEndOffset()); len(aborted) > 0 && !reflect.DeepEqual(got, aborted) {
		t.Fatalf("follower aborted %+v, model %+v", got, aborted)
	}
	if len(aborted) == 0 || restarts == 0 {
		t.Fatalf("the random run aborted %d transactions and restarted %d times", len(aborted), restarts)
	}
}
