package engine

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stratalog/strata/record"
)

// lockedBuf is a log sink for the ERROR lines the tests check.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuf) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// errorLines returns the ERROR lines logged to w.
func (w *lockedBuf) errorLines() []string {
	var out []string
	for _, ln := range strings.Split(w.String(), "\n") {
		if strings.Contains(ln, "level=ERROR") {
			out = append(out, ln)
		}
	}
	return out
}

// corruptImage builds a two-partition topic "cor" in a running engine:
// batches appended to both partitions and made durable, the recovery
// point checkpointed, then tail unsynced batches on partition 0, and the
// directory copied without closing (as crashImage).
func corruptImage(t *testing.T, batches, tail int, cfg map[string]string) (image string, want0, want1 [][]byte) {
	t.Helper()
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	defer e.Close()
	tp := mustTopic(t, e, "cor", 2, cfg)
	l0, l1 := tp.Partition(0), tp.Partition(1)
	for i := 0; i < batches; i++ {
		b := batchOf(t, 1+i%4, 30+i%200, int64(1000+i), i)
		mustAppend(t, l0, b)
		want0 = append(want0, append([]byte(nil), b...))
		b = batchOf(t, 2, 40, int64(1000+i), 500+i)
		mustAppend(t, l1, b)
		want1 = append(want1, append([]byte(nil), b...))
	}
	for _, l := range []*Log{l0, l1} {
		if err := waitDurable(t, l, l.LogEndOffset()-1); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.writeRecoveryCheckpoint(); err != nil {
		t.Fatal(err)
	}
	rp, err := os.ReadFile(filepath.Join(dir, recoveryPointFile))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < tail; i++ {
		b := batchOf(t, 2, 50, int64(5000+i), 7000+i)
		mustAppend(t, l0, b)
		want0 = append(want0, append([]byte(nil), b...))
	}
	if tail > 0 { // the tail is in the file, past the recovery point restored below
		if err := waitDurable(t, l0, l0.LogEndOffset()-1); err != nil {
			t.Fatal(err)
		}
	}
	image = t.TempDir()
	copyDir(t, dir, image)
	// The image crashed before the recovery point passed the tail (the
	// flusher may have moved it meanwhile: the tail's bytes would then be
	// below it, and a bad batch there corruption, not a torn tail).
	if err := os.WriteFile(filepath.Join(image, recoveryPointFile), rp, 0o644); err != nil {
		t.Fatal(err)
	}
	return image, want0, want1
}

// logFiles returns the contents of every .log file of a partition
// directory, by name.
func logFiles(t *testing.T, pdir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, b := range segmentBases(t, pdir) {
		p := segmentFileName(pdir, b, logSuffix)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = data
	}
	return out
}

func sameFiles(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d segment files, had %d", what, len(got), len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Fatalf("%s: %s deleted", what, name)
		}
		if len(g) != len(w) {
			t.Fatalf("%s: %s is %d bytes, was %d", what, name, len(g), len(w))
		}
		if !bytes.Equal(g, w) {
			t.Fatalf("%s: %s changed", what, name)
		}
	}
}

// bigSegments is smallConfig with segments that hold every batch a test
// appends: the recovery point lies inside the active segment.
func bigSegments() map[string]string {
	cfg := smallConfig()
	cfg["segment.bytes"] = "1048576"
	return cfg
}

// flip xors a byte of the file at pos.
func flip(t *testing.T, path string, pos int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[pos] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkCorrupt asserts that l is stopped by corruption at segment seg,
// position pos: every call fails with ErrLogCorrupt (an ErrOffline, so
// KAFKA_STORAGE_ERROR), while the engine stays online.
func checkCorrupt(t *testing.T, e *Engine, l *Log, seg string, pos int64) {
	t.Helper()
	c := l.Corruption()
	if c == nil {
		t.Fatalf("%s not marked corrupt", l)
	}
	if c.Segment != seg || c.Pos != pos {
		t.Fatalf("corruption at %s:%d, want %s:%d", c.Segment, c.Pos, seg, pos)
	}
	if _, err := l.Read(l.LogStartOffset(), 1<<20, true); !errors.Is(err, ErrLogCorrupt) || !errors.Is(err, ErrOffline) {
		t.Fatalf("Read of a corrupt log: %v", err)
	}
	if _, err := l.Append(batchOf(t, 1, 5, 1, 0), 0); !errors.Is(err, ErrLogCorrupt) {
		t.Fatalf("Append to a corrupt log: %v", err)
	}
	if _, err := l.DeleteRecords(-1); !errors.Is(err, ErrLogCorrupt) {
		t.Fatalf("DeleteRecords of a corrupt log: %v", err)
	}
	if _, err := l.TruncateTo(0); !errors.Is(err, ErrLogCorrupt) {
		t.Fatalf("TruncateTo of a corrupt log: %v", err)
	}
	if !l.Damaged() {
		t.Fatalf("corrupt %s not marked damaged (eligible to lead)", l)
	}
	if err := e.Offline(); err != nil {
		t.Fatalf("engine offline because of one corrupt log: %v", err)
	}
}

// checkServes asserts that l returns want and takes an append.
func checkServes(t *testing.T, l *Log, want [][]byte) {
	t.Helper()
	got, _ := readAll(t, l, 0, 1<<20)
	if len(got) != len(want) {
		t.Fatalf("%s: read %d batches, want %d", l, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: batch %d differs", l, i)
		}
	}
	info := mustAppend(t, l, batchOf(t, 1, 5, 1, 0))
	if err := waitDurable(t, l, info.LastOffset); err != nil {
		t.Fatal(err)
	}
}

// A flipped byte in a middle segment, inside the window recovery walks,
// with valid batches after it in that segment and later segments: the
// partition goes offline with one ERROR naming the file, the position
// and the offsets; no byte of any segment is cut or deleted; the other
// partition serves. The mark survives a clean restart; undoing the flip
// brings every batch back.
func TestCorruptMiddleSegmentKeepsEverything(t *testing.T) {
	image, want0, want1 := corruptImage(t, 80, 0, smallConfig())
	pdir := filepath.Join(image, "cor-0")
	bases := segmentBases(t, pdir)
	if len(bases) < 4 {
		t.Fatalf("need 4 segments, have %d", len(bases))
	}
	// Forget the recovery point: every segment is in the window walked.
	if err := os.Remove(filepath.Join(image, recoveryPointFile)); err != nil {
		t.Fatal(err)
	}
	victim := segmentFileName(pdir, bases[1], logSuffix)
	walk := naiveWalk(t, victim)
	if len(walk) < 3 {
		t.Fatalf("segment %d holds %d batches", bases[1], len(walk))
	}
	at := walk[1].pos + record.HeaderSize // inside batch 1's records: its CRC breaks
	flip(t, victim, at)
	before := logFiles(t, pdir)

	var logs lockedBuf
	e := openEngine(t, image, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	tp := e.Topic("cor")
	l0, l1 := tp.Partition(0), tp.Partition(1)
	checkCorrupt(t, e, l0, victim, walk[1].pos)
	if c := l0.Corruption(); c.FirstOffset != walk[1].base || c.NextValid != walk[2].base {
		t.Fatalf("corruption offsets %s, want [%d, %d)", c.Offsets(), walk[1].base, walk[2].base)
	}
	errs := logs.errorLines()
	if len(errs) != 1 {
		t.Fatalf("%d ERROR lines, want 1:\n%s", len(errs), logs.String())
	}
	for _, want := range []string{victim, "pos=" + i64s(walk[1].pos), i64s(walk[1].base)} {
		if !strings.Contains(errs[0], want) {
			t.Fatalf("ERROR line %q does not name %q", errs[0], want)
		}
	}
	checkServes(t, l1, want1)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "after the corrupt open", logFiles(t, pdir), before)

	// A clean restart does not forget it (the marker makes Open verify).
	e = openEngine(t, image, nil)
	checkCorrupt(t, e, e.Topic("cor").Partition(0), victim, walk[1].pos)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "after the second open", logFiles(t, pdir), before)

	// Repaired: every batch is back and the log takes appends.
	flip(t, victim, at)
	e = openEngine(t, image, nil)
	defer e.Close()
	l0 = e.Topic("cor").Partition(0)
	if c := l0.Corruption(); c != nil {
		t.Fatalf("repaired log still corrupt: %s", c)
	}
	if _, err := os.Stat(filepath.Join(pdir, corruptFile)); !os.IsNotExist(err) {
		t.Fatalf("corruption marker left after a clean verification: %v", err)
	}
	checkServes(t, l0, want0)
}

// A flipped byte in the middle of the active segment, past the recovery
// point, with valid batches after it: corruption, not a torn tail.
func TestCorruptActiveSegmentNotTruncated(t *testing.T) {
	image, _, want1 := corruptImage(t, 60, 10, bigSegments())
	pdir := filepath.Join(image, "cor-0")
	bases := segmentBases(t, pdir)
	active := segmentFileName(pdir, bases[len(bases)-1], logSuffix)
	walk := naiveWalk(t, active)
	if len(walk) < 3 {
		t.Fatalf("active segment holds %d batches", len(walk))
	}
	i := len(walk) - 2 // the last batch stays valid after it
	flip(t, active, walk[i].pos+int64(walk[i].size)-1)
	before := logFiles(t, pdir)

	e := openEngine(t, image, nil)
	checkCorrupt(t, e, e.Topic("cor").Partition(0), active, walk[i].pos)
	checkServes(t, e.Topic("cor").Partition(1), want1)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "after open", logFiles(t, pdir), before)
}

// A batch past the recovery point whose bytes are all zero, with valid
// batches after it, after a crash: a write that never reached the disk
// while later ones did (a failed fdatasync drops the pages it covered; a
// device persists unsynced writes in any order). It is cut with what
// follows, like a torn tail, and the log serves. Zeroing only part of the
// header is damage to written bytes: corruption, nothing cut.
func TestLostWriteBeforeLaterWritesCut(t *testing.T) {
	image, want0, _ := corruptImage(t, 60, 10, bigSegments())
	pdir := filepath.Join(image, "cor-0")
	bases := segmentBases(t, pdir)
	active := segmentFileName(pdir, bases[len(bases)-1], logSuffix)
	walk := naiveWalk(t, active)
	if len(walk) < 4 {
		t.Fatalf("active segment holds %d batches", len(walk))
	}
	lost := walk[len(walk)-3] // two valid batches after it
	for _, zeroed := range []string{"whole-batch", "part-of-header"} {
		t.Run(zeroed, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, image, dir)
			path := filepath.Join(dir, "cor-0", filepath.Base(active))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			n := lost.size
			if zeroed == "part-of-header" {
				n = 8 // the base offset
			}
			clear(data[lost.pos : lost.pos+int64(n)])
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			var logs lockedBuf
			e := openEngine(t, dir, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
			defer e.Close()
			l := e.Topic("cor").Partition(0)
			if zeroed == "part-of-header" {
				checkCorrupt(t, e, l, path, lost.pos)
				return
			}
			if c := l.Corruption(); c != nil {
				t.Fatalf("lost write taken for corruption: %s", c)
			}
			if l.LogEndOffset() != lost.base {
				t.Fatalf("log end %d, want %d (cut at the lost write)", l.LogEndOffset(), lost.base)
			}
			if fi, err := os.Stat(path); err != nil || fi.Size() != lost.pos {
				t.Fatalf("active segment not cut at %d: %v %v", lost.pos, fi.Size(), err)
			}
			if !strings.Contains(logs.String(), "write lost in the crash") {
				t.Fatalf("no WARN for the cut:\n%s", logs.String())
			}
			got, _ := readAll(t, l, 0, 1<<20)
			if len(got) == 0 || len(got) >= len(want0) {
				t.Fatalf("read %d batches of %d appended", len(got), len(want0))
			}
			checkServes(t, l, want0[:len(got)])
		})
	}
}

// A bad last batch past the recovery point is a torn tail: cut, the log
// serves and takes appends, nothing is marked.
func TestTornTailStillTruncated(t *testing.T) {
	image, want0, _ := corruptImage(t, 60, 10, bigSegments())
	pdir := filepath.Join(image, "cor-0")
	bases := segmentBases(t, pdir)
	active := segmentFileName(pdir, bases[len(bases)-1], logSuffix)
	walk := naiveWalk(t, active)
	lastB := walk[len(walk)-1]
	// "offset": a torn write that lost the sector holding the batch's base
	// offset (zeros there) and kept the rest: its CRC, which does not cover
	// the base offset, still passes, and only the offsets tell it is bad.
	for _, torn := range []string{"cut", "flip", "offset"} {
		t.Run(torn, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, image, dir)
			path := filepath.Join(dir, "cor-0", filepath.Base(active))
			switch torn {
			case "cut":
				if err := os.Truncate(path, lastB.pos+int64(lastB.size)/2); err != nil {
					t.Fatal(err)
				}
			case "flip":
				flip(t, path, lastB.pos+int64(lastB.size)-1)
			default:
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				_, err = f.WriteAt(make([]byte, 8), lastB.pos)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			e := openEngine(t, dir, nil)
			defer e.Close()
			l := e.Topic("cor").Partition(0)
			if c := l.Corruption(); c != nil {
				t.Fatalf("torn tail taken for corruption: %s", c)
			}
			if l.LogEndOffset() != lastB.base {
				t.Fatalf("log end %d, want %d (cut before the torn batch)", l.LogEndOffset(), lastB.base)
			}
			if fi, err := os.Stat(path); err != nil || fi.Size() != lastB.pos {
				t.Fatalf("active segment not cut at %d: %v %v", lastB.pos, fi.Size(), err)
			}
			// What the image held before the torn batch (the copy may
			// have missed some of the unsynced tail).
			got, _ := readAll(t, l, 0, 1<<20)
			if len(got) == 0 || len(got) >= len(want0) {
				t.Fatalf("read %d batches of %d appended", len(got), len(want0))
			}
			checkServes(t, l, want0[:len(got)])
		})
	}
}

// Segments below the recovery point are trusted unless log.recovery.verify
// (Options.VerifyRecovery) asks for every CRC: then a flip there marks the
// log corrupt the same way, with nothing changed on disk.
func TestVerifyRecoveryChecksTrustedSegments(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	tp := mustTopic(t, e, "cor", 2, smallConfig())
	var want1 [][]byte
	for i := 0; i < 60; i++ {
		mustAppend(t, tp.Partition(0), batchOf(t, 2, 60, int64(i), i))
		b := batchOf(t, 1, 30, int64(i), 100+i)
		mustAppend(t, tp.Partition(1), b)
		want1 = append(want1, b)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "cor-0")
	bases := segmentBases(t, pdir)
	victim := segmentFileName(pdir, bases[1], logSuffix)
	walk := naiveWalk(t, victim)
	flip(t, victim, walk[0].pos+record.HeaderSize+3)
	before := logFiles(t, pdir)

	// Not verified: a clean shutdown trusts every segment.
	e = openEngine(t, dir, nil)
	if c := e.Topic("cor").Partition(0).Corruption(); c != nil {
		t.Fatalf("corruption found without verification: %s", c)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, func(o *Options) { o.VerifyRecovery = true })
	checkCorrupt(t, e, e.Topic("cor").Partition(0), victim, walk[0].pos)
	checkServes(t, e.Topic("cor").Partition(1), want1)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "after a verified open", logFiles(t, pdir), before)
}

// A read that meets a batch header that does not parse below the HW marks
// the log corrupt and fails with ErrLogCorrupt instead of sending it.
func TestReadOfCorruptHeaderFails(t *testing.T) {
	dir, victim, walk := closedLog(t, 1)
	flip(t, victim, walk[1].pos+16) // the magic byte: the header no longer parses
	e := openEngine(t, dir, nil)
	defer e.Close()
	l := e.Topic("cor").Partition(0)
	if _, err := l.Read(walk[1].base, 1<<20, true); !errors.Is(err, ErrLogCorrupt) {
		t.Fatalf("Read over a corrupt header: %v", err)
	}
	checkCorrupt(t, e, l, victim, walk[1].pos)
	if c := l.Corruption(); c.FirstOffset != walk[1].base {
		t.Fatalf("corruption from offset %d, want %d", c.FirstOffset, walk[1].base)
	}
}

func i64s(v int64) string { return strconv.FormatInt(v, 10) }

// closedLog writes 60 batches to partition 0 of a topic "cor" of
// partitions partitions (small segments), closes the engine cleanly and
// returns the data directory, partition 0's second segment file and a
// naive walk of it.
func closedLog(t *testing.T, partitions int32) (dir, victim string, walk []walkedBatch) {
	t.Helper()
	dir = t.TempDir()
	e := openEngine(t, dir, nil)
	l := mustTopic(t, e, "cor", partitions, smallConfig()).Partition(0)
	for i := 0; i < 60; i++ {
		mustAppend(t, l, batchOf(t, 2, 60, int64(i), i))
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "cor-0")
	victim = segmentFileName(pdir, segmentBases(t, pdir)[1], logSuffix)
	return dir, victim, naiveWalk(t, victim)
}

// A read never sends a batch whose CRC fails: bytes trusted by recovery (a
// clean shutdown checks nothing) are checked before they are sent; the
// reads before the bad batch succeed with valid batches only, the read that
// reaches it fails with ErrLogCorrupt and the partition goes offline, as
// does a read that starts past the checked part.
func TestReadNeverSendsBadCRC(t *testing.T) {
	for _, start := range []string{"from-0", "at-bad"} {
		t.Run(start, func(t *testing.T) {
			dir, victim, walk := closedLog(t, 2)
			bad := walk[2]
			flip(t, victim, bad.pos+int64(bad.size)-3) // a record byte: only the CRC tells
			e := openEngine(t, dir, nil)
			defer e.Close()
			l := e.Topic("cor").Partition(0)
			if c := l.Corruption(); c != nil {
				t.Fatalf("found at open without verification: %s", c)
			}
			next := int64(0)
			if start == "at-bad" {
				next = bad.base
			}
			var err error
			for guard := 0; guard < 1000; guard++ {
				var res ReadResult
				res, err = l.Read(next, 300, true)
				if err != nil {
					break
				}
				if len(res.Chunks) == 0 {
					res.Release()
					t.Fatal("read the whole log without meeting the bad batch")
				}
				for _, c := range res.Chunks {
					buf := make([]byte, c.Len)
					if _, err := c.File.ReadAt(buf, c.Pos); err != nil {
						t.Fatal(err)
					}
					for rest := buf; len(rest) > 0; {
						b, r, h, err := record.Next(rest)
						if err != nil || !record.CheckCRC(b) {
							t.Fatalf("a read sent a batch that fails its checks (offset %d): %v", h.BaseOffset, err)
						}
						next = h.LastOffset() + 1
						rest = r
					}
				}
				res.Release()
			}
			if !errors.Is(err, ErrLogCorrupt) {
				t.Fatalf("read over the bad batch: %v", err)
			}
			if next != bad.base {
				t.Fatalf("reads stopped at offset %d, the bad batch is at %d", next, bad.base)
			}
			checkCorrupt(t, e, l, victim, bad.pos)
			if c := l.Corruption(); c.FirstOffset != bad.base || c.NextValid != walk[3].base {
				t.Fatalf("corruption offsets %s, want [%d, %d)", c.Offsets(), bad.base, walk[3].base)
			}
			checkServes(t, e.Topic("cor").Partition(1), nil)
		})
	}
}

// In a cluster (Options.RefetchCorrupt) a corrupt log is cut at its last
// good offset and marked damaged, so its replica re-fetches the rest from
// the leader; the cut bytes stay on disk as *.corrupt files (the damaged
// segment's tail, the later segments whole) and later Opens leave them.
// Both ways corruption is found: the walk, and log.recovery.verify over
// trusted segments.
func TestCorruptInClusterCutAndKeptAside(t *testing.T) {
	for _, how := range []string{"walk", "verify"} {
		t.Run(how, func(t *testing.T) {
			image, want0, _ := corruptImage(t, 80, 0, smallConfig())
			if how == "walk" {
				if err := os.Remove(filepath.Join(image, recoveryPointFile)); err != nil {
					t.Fatal(err)
				}
			} else { // a clean shutdown: every segment trusted
				e := openEngine(t, image, nil)
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
			}
			pdir := filepath.Join(image, "cor-0")
			bases := segmentBases(t, pdir)
			victim := segmentFileName(pdir, bases[1], logSuffix)
			walk := naiveWalk(t, victim)
			flip(t, victim, walk[1].pos+record.HeaderSize)
			before := logFiles(t, pdir)
			cluster := func(o *Options) { o.RefetchCorrupt, o.VerifyRecovery = true, how == "verify" }

			var logs lockedBuf
			e := openEngine(t, image, func(o *Options) {
				cluster(o)
				o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			l := e.Topic("cor").Partition(0)
			if c := l.Corruption(); c != nil {
				t.Fatalf("cluster log left corrupt: %s", c)
			}
			if !l.Damaged() {
				t.Fatal("cut log not marked damaged: it could lead without the cut records")
			}
			if l.LogEndOffset() != walk[1].base {
				t.Fatalf("log end %d, want %d (the last good offset)", l.LogEndOffset(), walk[1].base)
			}
			if errs := logs.errorLines(); len(errs) != 1 || !strings.Contains(errs[0], victim) || !strings.Contains(errs[0], "pos="+i64s(walk[1].pos)) {
				t.Fatalf("ERROR lines %q", errs)
			}
			got, _ := readAll(t, l, 0, 1<<20)
			if len(got) == 0 || len(got) >= len(want0) {
				t.Fatalf("read %d batches of %d", len(got), len(want0))
			}
			checkServes(t, l, want0[:len(got)])
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			// Every byte is still on disk: the kept prefix plus the tail
			// kept aside, and the later segments renamed.
			after := logFiles(t, pdir)
			if first := segmentFileName(pdir, bases[0], logSuffix); !bytes.Equal(after[filepath.Base(first)], before[filepath.Base(first)]) {
				t.Fatal("the segment before the damage changed")
			}
			for name, old := range before {
				if name < filepath.Base(victim) {
					continue // before the damage: kept as it was
				}
				p := filepath.Join(pdir, name)
				aside, err := os.ReadFile(p + corruptSuffix)
				if err != nil {
					t.Fatalf("%s not kept aside: %v", name, err)
				}
				if name == filepath.Base(victim) {
					if got := after[name]; !bytes.Equal(got[:walk[1].pos], old[:walk[1].pos]) {
						t.Fatal("the damaged segment's good prefix changed")
					}
					if !bytes.Equal(aside, old[walk[1].pos:]) {
						t.Fatal("the damaged segment's tail kept aside differs")
					}
					continue
				}
				if _, ok := after[name]; ok {
					t.Fatalf("%s still in the log after the cut", name)
				}
				if !bytes.Equal(aside, old) {
					t.Fatalf("%s kept aside differs", name)
				}
			}
			e = openEngine(t, image, cluster)
			defer e.Close()
			if got, _ := readAll(t, e.Topic("cor").Partition(0), 0, 1<<20); len(got) == 0 {
				t.Fatal("log empty after a second open")
			}
		})
	}
}
