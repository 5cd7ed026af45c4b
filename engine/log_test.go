package engine

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratalog/strata/record"
)

func TestAppendReadRoundTripAcrossRolls(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "rt", 1, smallConfig()).Partition(0)
	rng := rand.New(rand.NewSource(1))
	var want [][]byte
	var last int64
	next := int64(0)
	for i := 0; i < 400; i++ {
		n := 1 + rng.Intn(5)
		b := batchOf(t, n, rng.Intn(300), int64(1000+i), i)
		info := mustAppend(t, l, b)
		if info.BaseOffset != next || info.LastOffset != next+int64(n)-1 {
			t.Fatalf("append %d: got [%d, %d], want base %d, %d records", i, info.BaseOffset, info.LastOffset, next, n)
		}
		if info.LogAppendTime != -1 {
			t.Fatalf("LogAppendTime = %d with CreateTime", info.LogAppendTime)
		}
		next += int64(n)
		last = info.LastOffset
		want = append(want, append([]byte(nil), b...)) // b was patched in place
	}
	if err := waitDurable(t, l, last); err != nil {
		t.Fatal(err)
	}
	if got := l.LogEndOffset(); got != next {
		t.Fatalf("LogEndOffset = %d, want %d", got, next)
	}
	if bases := segmentBases(t, l.dir); len(bases) < 10 {
		t.Fatalf("only %d segments after 400 appends into 4 KiB segments", len(bases))
	}
	for _, maxBytes := range []int32{1, 700, 5000, 1 << 20} {
		got, _ := readAll(t, l, 0, maxBytes)
		if len(got) != len(want) {
			t.Fatalf("maxBytes %d: read %d batches, want %d", maxBytes, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("maxBytes %d: batch %d differs", maxBytes, i)
			}
		}
	}
	// A read starting in the middle of a batch returns that whole batch.
	h, _ := record.ParseHeader(want[10])
	if h.LastOffset() > h.BaseOffset {
		res, err := l.Read(h.BaseOffset+1, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		data := readChunks(t, res)
		res.Release()
		if !bytes.Equal(data, want[10]) {
			t.Fatalf("read inside a batch did not return the batch")
		}
	}
	checkIndexesAgainstWalk(t, l)
}

func TestReadMaxBytesMinOneBatchAndSegmentBoundary(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	cfg := smallConfig()
	cfg["segment.bytes"] = "3000"
	l := mustTopic(t, e, "mb", 1, cfg).Partition(0)
	var size int64
	var last int64
	for i := 0; i < 10; i++ {
		b := batchOf(t, 1, 900, 1, i)
		size = int64(len(b))
		last = mustAppend(t, l, b).LastOffset
	}
	if err := waitDurable(t, l, last); err != nil {
		t.Fatal(err)
	}
	read := func(off int64, maxBytes int32, minOne bool) ReadResult {
		t.Helper()
		res, err := l.Read(off, maxBytes, minOne)
		if err != nil {
			t.Fatalf("Read(%d, %d, %v): %v", off, maxBytes, minOne, err)
		}
		res.Release()
		return res
	}
	if res := read(0, int32(size-1), false); len(res.Chunks) != 0 {
		t.Fatalf("first batch larger than maxBytes without minOneBatch returned %d bytes", res.Bytes)
	}
	if res := read(0, int32(size-1), true); res.Bytes != size {
		t.Fatalf("minOneBatch returned %d bytes, want one batch of %d", res.Bytes, size)
	}
	if res := read(0, int32(2*size+size/2), false); res.Bytes != 2*size {
		t.Fatalf("2.5 batches of room returned %d bytes, want %d", res.Bytes, 2*size)
	}
	// Segments hold 3 batches (3000 bytes, ~960 each): a big read stops at
	// the segment end.
	bases := segmentBases(t, l.dir)
	if len(bases) < 3 || bases[1] != 3 {
		t.Fatalf("segment bases %v, want a roll every 3 batches", bases)
	}
	if res := read(1, 1<<20, false); res.Bytes != 2*size {
		t.Fatalf("read from offset 1 returned %d bytes, want the 2 batches left in the segment", res.Bytes)
	}
	if res := read(3, 1<<20, false); res.Bytes != 3*size {
		t.Fatalf("read from offset 3 returned %d bytes, want the next segment's 3 batches", res.Bytes)
	}
}

func TestReadOutOfRangeAndAtEnd(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "oor", 1, smallConfig()).Partition(0)
	res, err := l.Read(0, 1000, true)
	if err != nil || len(res.Chunks) != 0 {
		t.Fatalf("read of empty log: %v, %d chunks", err, len(res.Chunks))
	}
	var last int64
	for i := 0; i < 5; i++ {
		last = mustAppend(t, l, batchOf(t, 2, 10, 1, i)).LastOffset
	}
	if err := waitDurable(t, l, last); err != nil {
		t.Fatal(err)
	}
	res, err = l.Read(10, 1000, true)
	if err != nil || len(res.Chunks) != 0 || res.HighWatermark != 10 || res.LogStartOffset != 0 {
		t.Fatalf("read at log end: err %v, %d chunks, hw %d", err, len(res.Chunks), res.HighWatermark)
	}
	if _, err := l.Read(11, 1000, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past log end: %v, want ErrOffsetOutOfRange", err)
	}
	if _, err := l.Read(-1, 1000, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read at -1: %v, want ErrOffsetOutOfRange", err)
	}
	var zero ReadResult
	zero.Release() // safe on a zero value
}

func TestReadNeverPassesHighWatermark(t *testing.T) {
	gate := make(chan struct{})
	var gated sync.Once
	dir := t.TempDir()
	e := openEngine(t, dir, func(o *Options) {
		o.syncHook = func(path string) error {
			if filepath.Ext(path) == logSuffix {
				<-gate // hold the first segment sync until the test checks the HW
			}
			return nil
		}
	})
	defer e.Close()
	defer gated.Do(func() { close(gate) })
	l := mustTopic(t, e, "hw", 1, smallConfig()).Partition(0)
	info := mustAppend(t, l, batchOf(t, 3, 10, 1, 0))
	if hw := l.HighWatermark(); hw != 0 {
		t.Fatalf("HW %d before the sync completed", hw)
	}
	res, err := l.Read(0, 1<<20, true)
	if err != nil || len(res.Chunks) != 0 {
		t.Fatalf("read below an unsynced append returned %d chunks (err %v)", len(res.Chunks), err)
	}
	select {
	case <-l.Wait(0):
		t.Fatal("Wait(0) closed before the HW moved")
	default:
	}
	w := l.Wait(0)
	gated.Do(func() { close(gate) })
	if err := waitDurable(t, l, info.LastOffset); err != nil {
		t.Fatal(err)
	}
	<-w // closed by the HW advance
	if hw := l.HighWatermark(); hw != 3 {
		t.Fatalf("HW %d after sync, want 3", hw)
	}
}

func TestIndexEntriesEveryIntervalBytes(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	cfg := smallConfig()
	cfg["segment.bytes"] = "1000000"
	cfg["index.interval.bytes"] = "1000"
	l := mustTopic(t, e, "idx", 1, cfg).Partition(0)
	// Plain model of Kafka's rule: an entry for a batch when >= interval
	// bytes were written since the previous entry (before this batch).
	var since int64
	var want []walkedBatch
	pos := int64(0)
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 200; i++ {
		b := batchOf(t, 1+rng.Intn(3), rng.Intn(400), int64(i), i)
		info := mustAppend(t, l, b)
		if since >= 1000 {
			want = append(want, walkedBatch{pos: pos, last: info.LastOffset})
			since = 0
		}
		since += int64(len(b))
		pos += int64(len(b))
	}
	s := l.active
	l.idxMu.RLock()
	defer l.idxMu.RUnlock()
	if got := s.off.Entries(); got != len(want) {
		t.Fatalf("offset index has %d entries, want %d", got, len(want))
	}
	for _, w := range want {
		eo, p := s.off.Lookup(w.last)
		if eo != w.last || p != w.pos {
			t.Fatalf("Lookup(%d) = (%d, %d), want (%d, %d)", w.last, eo, p, w.last, w.pos)
		}
	}
	if got := s.tim.Entries(); got == 0 || got > len(want) {
		t.Fatalf("time index has %d entries (offset index %d)", got, len(want))
	}
}

func TestAppendValidation(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	cfg := smallConfig()
	cfg["max.message.bytes"] = "500"
	l := mustTopic(t, e, "val", 1, cfg).Partition(0)
	good := batchOf(t, 2, 10, 1, 0)
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 0xff
	big := batchOf(t, 1, 600, 1, 0)
	for _, tc := range []struct {
		name string
		buf  []byte
		want error
	}{
		{"empty", nil, ErrInvalidRecord},
		{"garbage", []byte("hello world"), ErrInvalidRecord},
		{"torn", good[:len(good)-3], ErrInvalidRecord},
		{"crc", corrupt, ErrCorruptMessage},
		{"too large", big, ErrMessageTooLarge},
		{"good then corrupt", append(append([]byte(nil), good...), corrupt...), ErrCorruptMessage},
	} {
		if _, err := l.Append(tc.buf, 0); !errors.Is(err, tc.want) {
			t.Errorf("%s: Append err %v, want %v", tc.name, err, tc.want)
		}
	}
	if end := l.LogEndOffset(); end != 0 {
		t.Fatalf("failed appends changed the log end to %d", end)
	}
	if size := l.active.end.Load(); size != 0 {
		t.Fatalf("failed appends wrote %d bytes", size)
	}
	// Two batches in one request get consecutive offsets.
	two := append(append([]byte(nil), good...), batchOf(t, 3, 5, 2, 1)...)
	info := mustAppend(t, l, two)
	if info.BaseOffset != 0 || info.LastOffset != 4 {
		t.Fatalf("two-batch append: [%d, %d], want [0, 4]", info.BaseOffset, info.LastOffset)
	}
	h, _ := record.ParseHeader(two[len(good):])
	if h.BaseOffset != 2 {
		t.Fatalf("second batch patched to base %d, want 2", h.BaseOffset)
	}
}

func TestLogAppendTime(t *testing.T) {
	clock := newFakeClock(1_700_000_000_000)
	e := openEngine(t, t.TempDir(), func(o *Options) { o.Now = clock.Now })
	defer e.Close()
	cfg := smallConfig()
	cfg["message.timestamp.type"] = "LogAppendTime"
	l := mustTopic(t, e, "lat", 1, cfg).Partition(0)
	info := mustAppend(t, l, batchOf(t, 2, 10, 5, 0))
	if info.LogAppendTime != clock.ms.Load() {
		t.Fatalf("LogAppendTime = %d, want %d", info.LogAppendTime, clock.ms.Load())
	}
	if err := waitDurable(t, l, info.LastOffset); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, l, 0, 1<<20)
	h, _ := record.ParseHeader(got[0])
	if !h.LogAppendTime() || h.MaxTimestamp != clock.ms.Load() {
		t.Fatalf("stored batch: logAppendTime %v maxTimestamp %d", h.LogAppendTime(), h.MaxTimestamp)
	}
	if !record.CheckCRC(got[0]) {
		t.Fatal("stamped batch fails its CRC")
	}
}

func TestRollBySegmentMs(t *testing.T) {
	clock := newFakeClock(1_000_000)
	e := openEngine(t, t.TempDir(), func(o *Options) { o.Now = clock.Now })
	defer e.Close()
	cfg := smallConfig()
	cfg["segment.bytes"] = "1000000"
	cfg["segment.ms"] = "60000"
	l := mustTopic(t, e, "roll", 1, cfg).Partition(0)
	mustAppend(t, l, batchOf(t, 1, 10, 1, 0))
	clock.Advance(59_999)
	mustAppend(t, l, batchOf(t, 1, 10, 1, 1))
	if n := len(segmentBases(t, l.dir)); n != 1 {
		t.Fatalf("%d segments before segment.ms elapsed", n)
	}
	clock.Advance(1)
	mustAppend(t, l, batchOf(t, 1, 10, 1, 2))
	if bases := segmentBases(t, l.dir); len(bases) != 2 || bases[1] != 2 {
		t.Fatalf("segments %v after segment.ms, want a roll at offset 2", bases)
	}
}

func TestOffsetForTimestampMatchesLinearScan(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "ts", 1, smallConfig()).Partition(0)
	rng := rand.New(rand.NewSource(3))
	type rec struct{ off, ts int64 }
	var all []rec
	var last int64
	for i := 0; i < 300; i++ {
		n := 1 + rng.Intn(4)
		recs := make([]testRecord, n)
		base := int64(1000 + i*10 + rng.Intn(50) - 25) // mostly increasing, with jitter
		for j := range recs {
			recs[j] = testRecord{ts: base + int64(rng.Intn(30)), value: make([]byte, rng.Intn(200))}
		}
		info := mustAppend(t, l, makeBatch(t, recs...))
		for j, r := range recs {
			all = append(all, rec{info.BaseOffset + int64(j), r.ts})
		}
		last = info.LastOffset
	}
	if err := waitDurable(t, l, last); err != nil {
		t.Fatal(err)
	}
	for q := int64(900); q <= 4100; q += 7 {
		wantOff, wantTs, wantFound := int64(-1), int64(-1), false
		for _, r := range all {
			if r.ts >= q {
				wantOff, wantTs, wantFound = r.off, r.ts, true
				break
			}
		}
		off, ts, found := l.OffsetForTimestamp(q)
		if found != wantFound || off != wantOff || ts != wantTs {
			t.Fatalf("OffsetForTimestamp(%d) = (%d, %d, %v), linear scan says (%d, %d, %v)", q, off, ts, found, wantOff, wantTs, wantFound)
		}
	}
	bestOff, bestTs := int64(-1), int64(-1)
	for _, r := range all {
		if r.ts > bestTs {
			bestOff, bestTs = r.off, r.ts
		}
	}
	if off, ts := l.MaxTimestamp(); off != bestOff || ts != bestTs {
		t.Fatalf("MaxTimestamp = (%d, %d), want (%d, %d)", off, ts, bestOff, bestTs)
	}
}

func TestDeleteRecordsKeepsOffsets(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	l := mustTopic(t, e, "del", 1, smallConfig()).Partition(0)
	var last int64
	for i := 0; i < 100; i++ {
		last = mustAppend(t, l, batchOf(t, 2, 100, 1, i)).LastOffset
	}
	if err := waitDurable(t, l, last); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteRecords(last + 2); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the HW: %v", err)
	}
	before := len(segmentBases(t, l.dir))
	// Pin the first segment with a read: its file must stay readable.
	pinned, err := l.Read(0, 100, true)
	if err != nil || len(pinned.Chunks) != 1 {
		t.Fatalf("Read(0): %v", err)
	}
	start, err := l.DeleteRecords(101)
	if err != nil || start != 101 || l.LogStartOffset() != 101 {
		t.Fatalf("DeleteRecords(101) = %d, %v; log start %d", start, err, l.LogStartOffset())
	}
	bases := segmentBases(t, l.dir)
	if len(bases) >= before || bases[0] > 101 {
		t.Fatalf("segments %v after deleting below 101 (had %d)", bases, before)
	}
	if data := readChunks(t, pinned); len(data) == 0 {
		t.Fatal("pinned chunk unreadable after delete")
	}
	pinned.Release()
	pinned.Release() // idempotent
	if _, err := l.Read(100, 100, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	got, _ := readAll(t, l, 101, 1<<20)
	h, _ := record.ParseHeader(got[0])
	if h.BaseOffset != 100 || h.LastOffset() != 101 {
		t.Fatalf("first batch after delete is [%d, %d], want the batch [100, 101]", h.BaseOffset, h.LastOffset())
	}
	ents, _ := os.ReadDir(l.dir)
	for _, ent := range ents {
		if filepath.Ext(ent.Name()) == deletedSuffix {
			t.Fatalf("%s left behind after release", ent.Name())
		}
	}
	// Delete everything: the active segment rolls so it can go too.
	if _, err := l.DeleteRecords(-1); err != nil {
		t.Fatal(err)
	}
	if bases := segmentBases(t, l.dir); len(bases) != 1 || bases[0] != 200 {
		t.Fatalf("segments %v after deleting to the HW, want one empty segment at 200", bases)
	}
	info := mustAppend(t, l, batchOf(t, 1, 10, 1, 0))
	if info.BaseOffset != 200 || info.LogStartOffset != 200 {
		t.Fatalf("append after delete: base %d logStart %d", info.BaseOffset, info.LogStartOffset)
	}
	if err := waitDurable(t, l, info.LastOffset); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := openEngine(t, dir, nil)
	defer e2.Close()
	l2 := e2.Topic("del").Partition(0)
	if l2.LogStartOffset() != 200 || l2.LogEndOffset() != 201 {
		t.Fatalf("after restart: log start %d end %d, want 200 201", l2.LogStartOffset(), l2.LogEndOffset())
	}
}

func TestLeaderEpochs(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	l := mustTopic(t, e, "ep", 1, smallConfig()).Partition(0)
	for _, ep := range []int32{0, 0, 1, 1, 3} {
		if _, err := l.Append(batchOf(t, 2, 10, 1, 0), ep); err != nil {
			t.Fatal(err)
		}
	}
	check := func(l *Log) {
		t.Helper()
		for _, c := range []struct {
			ask     int32
			epoch   int32
			endOffs int64
		}{{0, 0, 4}, {1, 1, 8}, {2, 1, 8}, {3, 3, 10}, {4, -1, -1}, {-1, -1, -1}} {
			ep, end := l.EndOffsetForEpoch(c.ask)
			if ep != c.epoch || end != c.endOffs {
				t.Errorf("EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", c.ask, ep, end, c.epoch, c.endOffs)
			}
		}
		if got := l.LeaderEpoch(); got != 3 {
			t.Errorf("LeaderEpoch = %d, want 3", got)
		}
	}
	check(l)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "ep-0", epochCheckpoint))
	if err != nil || string(data) != "0\n3\n0 0\n1 4\n3 8\n" {
		t.Fatalf("leader-epoch-checkpoint = %q (%v)", data, err)
	}
	e2 := openEngine(t, dir, nil)
	defer e2.Close()
	check(e2.Topic("ep").Partition(0))
}

func TestConcurrentAppendAndRead(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "conc", 1, smallConfig()).Partition(0)
	const writers, perWriter = 4, 100
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				if _, err := l.Append(batchOf(t, 1, 50, 1, w*1000+i), 0); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	stop := make(chan struct{})
	var rg sync.WaitGroup
	rg.Add(1)
	go func() { // a reader racing the writers must only see whole, valid batches
		defer rg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, _ := readAll(t, l, l.LogStartOffset(), 4096)
			for i, b := range got {
				if h, _ := record.ParseHeader(b); h.BaseOffset != int64(i) {
					t.Errorf("batch %d has base offset %d", i, h.BaseOffset)
					return
				}
			}
		}
	}()
	wg.Wait()
	if err := waitDurable(t, l, writers*perWriter-1); err != nil {
		t.Fatal(err)
	}
	close(stop)
	rg.Wait()
	got, _ := readAll(t, l, 0, 1<<20)
	if len(got) != writers*perWriter {
		t.Fatalf("read %d batches, want %d", len(got), writers*perWriter)
	}
}

// TestReadMatchesNaive checks Read against a plain model built from a naive
// walk of each segment: the batch holding the offset, then whole batches
// while they fit maxBytes, never past the HW or the segment.
func TestReadMatchesNaive(t *testing.T) {
	gate := make(chan struct{})
	var gateOn sync.Once
	var holding atomic.Bool
	e := openEngine(t, t.TempDir(), func(o *Options) {
		o.syncHook = func(path string) error {
			if holding.Load() && filepath.Ext(path) == logSuffix {
				<-gate
			}
			return nil
		}
	})
	defer e.Close()
	defer gateOn.Do(func() { close(gate) })
	cfg := smallConfig()
	cfg["segment.bytes"] = "20000"
	cfg["index.interval.bytes"] = "300"
	l := mustTopic(t, e, "naive", 1, cfg).Partition(0)
	rng := rand.New(rand.NewSource(5))
	var last int64
	for i := 0; i < 400; i++ {
		last = mustAppend(t, l, batchOf(t, 1+rng.Intn(4), rng.Intn(250), 1, i)).LastOffset
	}
	if err := waitDurable(t, l, last); err != nil {
		t.Fatal(err)
	}
	holding.Store(true) // later appends stay above the HW
	for i := 0; i < 30; i++ {
		mustAppend(t, l, batchOf(t, 2, 50, 1, i))
	}
	hw := l.HighWatermark()
	if hw != last+1 || l.LogEndOffset() <= hw {
		t.Fatalf("HW %d, log end %d: the test needs a tail above the HW", hw, l.LogEndOffset())
	}
	type seg struct {
		base int64
		walk []walkedBatch
	}
	var segs []seg
	for _, s := range *l.segs.Load() {
		segs = append(segs, seg{s.base, naiveWalk(t, s.seg.Path())})
	}
	for trial := 0; trial < 3000; trial++ {
		off := rng.Int63n(hw + 1)
		maxBytes := int32(rng.Intn(6000))
		minOne := rng.Intn(2) == 0
		res, err := l.Read(off, maxBytes, minOne)
		if err != nil {
			t.Fatal(err)
		}
		res.Release()
		// Model.
		var wantPos, wantLen int64
		if off < hw {
			k := len(segs) - 1
			for segs[k].base > off {
				k--
			}
			for _, b := range segs[k].walk {
				if b.last < off {
					continue
				}
				if b.base >= hw {
					break
				}
				if wantLen == 0 {
					if int64(b.size) > int64(maxBytes) && !minOne {
						break
					}
					wantPos, wantLen = b.pos, int64(b.size)
					if wantLen >= int64(maxBytes) {
						break
					}
					continue
				}
				if wantLen+int64(b.size) > int64(maxBytes) {
					break
				}
				wantLen += int64(b.size)
			}
		}
		var gotPos, gotLen int64
		if len(res.Chunks) == 1 {
			gotPos, gotLen = res.Chunks[0].Pos, res.Chunks[0].Len
		}
		if gotLen != wantLen || (wantLen > 0 && gotPos != wantPos) {
			t.Fatalf("Read(%d, %d, %v) = [%d, +%d), model says [%d, +%d)", off, maxBytes, minOne, gotPos, gotLen, wantPos, wantLen)
		}
	}
}
