package rlm

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stratalog/strata/internal/vfs"
)

// crashFS passes calls to a MemFS until its budget of changing calls is
// spent, then loses the power there (MemFS.Crash with opts): that call
// and every later one fail. after is the file system a restart finds.
type crashFS struct {
	mem    *vfs.MemFS
	budget int
	opts   vfs.CrashOptions
	after  *vfs.MemFS
}

var errPowerCut = errors.New("power cut")

// step spends one changing call of the budget.
func (c *crashFS) step() error {
	if c.after != nil {
		return errPowerCut
	}
	if c.budget--; c.budget < 0 {
		c.after = c.mem.Crash(c.opts)
		return errPowerCut
	}
	return nil
}

func (c *crashFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		if err := c.step(); err != nil {
			return nil, err
		}
	} else if c.after != nil {
		return nil, errPowerCut
	}
	f, err := c.mem.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, c: c}, nil
}

func (c *crashFS) Remove(name string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.mem.Remove(name)
}

func (c *crashFS) RemoveAll(name string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.mem.RemoveAll(name)
}

func (c *crashFS) Rename(o, n string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.mem.Rename(o, n)
}

func (c *crashFS) Truncate(name string, size int64) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.mem.Truncate(name, size)
}

func (c *crashFS) Mkdir(name string, perm fs.FileMode) error    { return c.mem.Mkdir(name, perm) }
func (c *crashFS) MkdirAll(name string, perm fs.FileMode) error { return c.mem.MkdirAll(name, perm) }
func (c *crashFS) ReadDir(name string) ([]fs.DirEntry, error)   { return c.mem.ReadDir(name) }
func (c *crashFS) Stat(name string) (fs.FileInfo, error)        { return c.mem.Stat(name) }

func (c *crashFS) SyncDir(name string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.mem.SyncDir(name)
}

type crashFile struct {
	vfs.File
	c *crashFS
}

func (f *crashFile) Write(b []byte) (int, error) {
	if err := f.c.step(); err != nil {
		return 0, err
	}
	return f.File.Write(b)
}

func (f *crashFile) WriteAt(b []byte, off int64) (int, error) {
	if err := f.c.step(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(b, off)
}

func (f *crashFile) Sync() error {
	if err := f.c.step(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *crashFile) Truncate(size int64) error {
	if err := f.c.step(); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// metaModel is what the metadata must be: the partitions as the
// acknowledged events left them.
type metaModel map[tp]*partitionMeta

func (mm metaModel) apply(k tp, ev Event) metaModel {
	out := metaModel{}
	for kk, v := range mm {
		out[kk] = v
	}
	pm := cloneMeta(mm[k], k, ev.Topic)
	if applyEvent(pm, ev) {
		delete(out, k)
	} else {
		out[k] = pm
	}
	return out
}

// canon is parts without their sequence numbers, as JSON.
func canon(parts map[tp]*partitionMeta) string {
	type row struct {
		K  string
		PM partitionMeta
	}
	var rows []row
	for k, pm := range parts {
		c := *pm
		c.Seq = 0
		rows = append(rows, row{fmt.Sprintf("%x-%d", k.id, k.p), c})
	}
	for i := range rows {
		for j := i + 1; j < len(rows); j++ {
			if rows[j].K < rows[i].K {
				rows[i], rows[j] = rows[j], rows[i]
			}
		}
	}
	b, _ := json.Marshal(rows)
	return string(b)
}

// randomEvent is a plausible next event for one of three partitions
// (two topics).
func randomEvent(rng *rand.Rand, mm metaModel, n int) (tp, Event) {
	ids := [][16]byte{{1}, {2}}
	k := tp{ids[rng.IntN(2)], int32(rng.IntN(2))}
	if k.id == ids[1] {
		k.p = 0
	}
	topic := fmt.Sprintf("t%d", k.id[0])
	ev := Event{TopicID: fmt.Sprintf("%x", k.id[:]), Topic: topic, Partition: k.p, EventMs: int64(n)}
	pm := mm[k]
	var started, finished, deleting []Segment
	if pm != nil {
		for _, s := range pm.Segments {
			switch s.State {
			case CopyStarted:
				started = append(started, s)
			case CopyFinished:
				finished = append(finished, s)
			case DeleteStarted:
				deleting = append(deleting, s)
			}
		}
	}
	switch r := rng.IntN(20); {
	case r < 6 || pm == nil:
		base := int64(n * 10)
		ev.Type = string(CopyStarted)
		ev.Segment = &Segment{ID: fmt.Sprintf("s%d", n), Base: base, End: base + 10, Size: int64(100 + n), MaxTimestamp: int64(n)}
	case r < 11 && len(started) > 0:
		s := started[rng.IntN(len(started))]
		ev.Type = string(CopyFinished)
		ev.Segment = &Segment{ID: s.ID, Base: s.Base, End: s.End, Files: map[string]FileMeta{KindLog: {Size: s.Size, SHA256: fmt.Sprintf("%064d", n)}}}
	case r < 14 && len(finished) > 0:
		ev.Type = string(DeleteStarted)
		ev.Segment = &Segment{ID: finished[rng.IntN(len(finished))].ID}
	case r < 17 && len(deleting) > 0:
		ev.Type = string(DeleteFinished)
		ev.Segment = &Segment{ID: deleting[rng.IntN(len(deleting))].ID}
	case r < 19:
		ev.Type = EventLogStart
		ev.LogStart = int64(n)
	default:
		ev.Type = EventPartitionDeleted
	}
	return k, ev
}

// TestEventLogCrash drives the metadata log with random events (a log
// small enough to be compacted every few events) and loses the power at
// a random changing call, with or without unsynced changes kept, torn or
// reordered: after a restart the metadata is what the acknowledged events
// made it, plus at most the one in flight; a second restart (after a
// compaction at open and more events) agrees; and nothing is ever refused.
func TestEventLogCrash(t *testing.T) {
	defer func(n int64) { eventLogBytes = n }(eventLogBytes)
	eventLogBytes = 8 << 10
	const dir = "/meta"
	runs := 600
	if testing.Short() {
		runs = 150
	}
	for seed := range runs {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		mem := vfs.NewMemFS()
		if err := ensureDir(mem, dir); err != nil {
			t.Fatal(err)
		}
		if seed%5 == 0 {
			// A broker of the JSON-files-only layout: its files are the
			// first snapshots.
			pm := &partitionMeta{Version: metaVersion, Topic: "t1", TopicID: fmt.Sprintf("%x", [16]byte{1}), Partition: 1, CopiedEnd: 42,
				Segments: []Segment{{ID: "old", Base: 0, End: 42, State: CopyFinished, Files: map[string]FileMeta{KindLog: {Size: 7}}}}}
			b, _ := json.Marshal(pm)
			if err := vfs.WriteFileAtomicFS(mem, filepath.Join(dir, metaFileName([16]byte{1}, 1)), b); err != nil {
				t.Fatal(err)
			}
		}
		rb, err := loadState(mem, dir)
		if err != nil {
			t.Fatal(err)
		}
		model := metaModel(rb.parts)
		opts := vfs.CrashOptions{Seed: uint64(seed), KeepUnsynced: rng.IntN(2) == 0}
		opts.Reorder = opts.KeepUnsynced && rng.IntN(2) == 0
		opts.Tear = rng.IntN(2) == 0
		cfs := &crashFS{mem: mem, budget: rng.IntN(400), opts: opts}
		var inflight metaModel
		// may: the states a crash may leave, from the last append that
		// synced on (a third of the appends do not sync: they are
		// durable only with a later one).
		may := []string{canon(model)}
		el, _, err := openEventLog(cfs, dir)
		for n := 0; err == nil && n < 300; n++ {
			k, ev := randomEvent(rng, model, n)
			next := model.apply(k, ev)
			cur := model
			sync := rng.IntN(3) != 0
			if _, err = el.append(k, ev, func() map[tp]*partitionMeta { return cur }, sync); err == nil {
				model = next
				if sync {
					may = may[:0]
				}
				may = append(may, canon(model))
			} else {
				inflight = next
			}
		}
		if err == nil && rng.IntN(2) == 0 {
			err = el.syncUnsynced()
			if err == nil {
				may = []string{canon(model)}
			}
		}
		if cfs.after == nil {
			cfs.after = mem.Crash(opts)
		}
		rs, err := loadState(cfs.after, dir)
		if err != nil {
			t.Fatalf("seed %d: after the crash: %v", seed, err)
		}
		got := rs.parts
		if g := canon(got); !slices.Contains(may, g) && (inflight == nil || g != canon(inflight)) {
			t.Fatalf("seed %d (%+v): after the crash\n got %s\nwant one of %d states from %s\n  or %v", seed, opts, g, len(may), may[0], inflight)
		}
		// Open (replays and compacts), go on, restart cleanly: the state
		// carries over.
		el2, parts, err := openEventLog(cfs.after, dir)
		if err != nil {
			t.Fatalf("seed %d: reopening: %v", seed, err)
		}
		model = metaModel(parts)
		for n := 1000; n < 1020; n++ {
			k, ev := randomEvent(rng, model, n)
			cur := model
			if _, err := el2.append(k, ev, func() map[tp]*partitionMeta { return cur }, true); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			model = model.apply(k, ev)
		}
		el2.close()
		rs, err = loadState(cfs.after, dir)
		if err != nil || canon(rs.parts) != canon(model) {
			t.Fatalf("seed %d: after a restart: %v\n got %s\nwant %s", seed, err, canon(rs.parts), canon(model))
		}
	}
}

// TestEventLogReplayStops checks the rules a replay stops by: a record
// whose CRC fails, one that does not carry the next sequence number (an
// older generation's behind a compaction), and a header slot torn.
func TestEventLogReplayStops(t *testing.T) {
	defer func(n int64) { eventLogBytes = n }(eventLogBytes)
	eventLogBytes = 64 << 10
	dir := t.TempDir()
	el, _, err := openEventLog(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	k := tp{[16]byte{9}, 0}
	model := metaModel{}
	var offs []int64
	for n := range 5 {
		ev := Event{Type: string(CopyStarted), TopicID: fmt.Sprintf("%x", k.id[:]), Topic: "x", Partition: 0,
			Segment: &Segment{ID: fmt.Sprintf("s%d", n), Base: int64(n * 10), End: int64(n*10 + 10)}}
		offs = append(offs, el.off)
		cur := model
		if _, err := el.append(k, ev, func() map[tp]*partitionMeta { return cur }, true); err != nil {
			t.Fatal(err)
		}
		model = model.apply(k, ev)
	}
	el.close()
	path := filepath.Join(dir, eventLogName)
	segs := func() int {
		t.Helper()
		rs, err := loadState(vfs.OS, dir)
		if err != nil {
			t.Fatal(err)
		}
		parts := rs.parts
		if parts[k] == nil {
			return 0
		}
		return len(parts[k].Segments)
	}
	if n := segs(); n != 5 {
		t.Fatalf("%d segments replayed, want 5", n)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A flipped byte in the fourth record's value: three replayed.
	b[offs[3]+eventRecHeader+3] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := segs(); n != 3 {
		t.Fatalf("%d segments replayed past a bad CRC, want 3", n)
	}
	b[offs[3]+eventRecHeader+3] ^= 0xff
	// The third record with another number (and a good CRC): two.
	reseq := func(off int64, seq uint64) {
		l := int64(binary.BigEndian.Uint32(b[off:]))
		binary.BigEndian.PutUint64(b[off+8:], seq)
		binary.BigEndian.PutUint32(b[off+4:], crc32.Checksum(b[off+8:off+eventRecHeader+l], castagnoli))
	}
	seq2 := binary.BigEndian.Uint64(b[offs[2]+8:])
	reseq(offs[2], seq2+7)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := segs(); n != 2 {
		t.Fatalf("%d segments replayed past a sequence gap, want 2", n)
	}
	reseq(offs[2], seq2)
	// A torn second header slot (a compaction's, with a higher base)
	// leaves the first: all five again.
	copy(b[eventSlotBytes:], headerSlot(100)[:20])
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := segs(); n != 5 {
		t.Fatalf("%d segments replayed with a torn header slot, want 5", n)
	}
	// Both slots bad: refused, not taken for an empty log.
	copy(b, make([]byte, 24))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadState(vfs.OS, dir); err == nil {
		t.Fatal("a log with no valid header loaded")
	}
}

// syncCounter is a file system counting the fsyncs and fdatasyncs of
// files by the base name they were opened with.
type syncCounter struct {
	vfs.FS
	mu sync.Mutex
	n  map[string]int
}

func (c *syncCounter) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &countedFile{File: f, c: c}, nil
}

// count is the syncs of files whose base name starts with prefix (the
// metadata log is made under a temporary name, then renamed).
func (c *syncCounter) count(prefix string) (n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, k := range c.n {
		if strings.HasPrefix(name, prefix) {
			n += k
		}
	}
	return n
}

type countedFile struct {
	vfs.File
	c *syncCounter
}

func (f *countedFile) Sync() error {
	f.c.mu.Lock()
	f.c.n[filepath.Base(f.Name())]++
	f.c.mu.Unlock()
	return f.File.Sync()
}

// A pass copying n segments syncs the metadata log n+1 times, not 2n:
// each segment's COPY_SEGMENT_STARTED carries the previous one's
// COPY_SEGMENT_FINISHED, and the pass ends with a sync that publishes the
// last. Every copy is published when the pass returns, and the state
// carries over a restart.
func TestCopyPassSyncsMetadataOncePerSegment(t *testing.T) {
	f := newFixture(t, tieredConfig)
	f.produce(12)
	sealed := f.log.SealedSegments()
	n := len(sealed)
	if n < 3 {
		t.Fatalf("%d sealed segments", n)
	}
	last := sealed[n-1].End
	c := &syncCounter{FS: vfs.OS, n: map[string]int{}}
	m := f.manager(f.store, func(o *Options) { o.FS = c })
	before := c.count(eventLogName)
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := c.count(eventLogName) - before; got != n+1 {
		t.Fatalf("%d syncs of %s for %d segments copied, want %d", got, eventLogName, n, n+1)
	}
	segs := m.Segments(f.log.TopicID(), 0)
	if len(segs) != n || finished(segs) != n || m.CopiedEnd(f.log.TopicID(), "tiered", 0) != last {
		t.Fatalf("after the pass: %d segments, %d finished, copied end %d (want %d)", len(segs), finished(segs), m.CopiedEnd(f.log.TopicID(), "tiered", 0), last)
	}
	// A pass with nothing to copy syncs nothing.
	before = c.count(eventLogName)
	if err := m.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := c.count(eventLogName) - before; got != 0 {
		t.Fatalf("an idle pass synced the metadata log %d times", got)
	}
	f.waitLocalStart(last) // local retention goes by the published copies
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	rs, err := loadState(vfs.OS, f.metaDir)
	if err != nil {
		t.Fatal(err)
	}
	if pm := rs.parts[tp{f.log.TopicID(), 0}]; pm == nil || pm.CopiedEnd != last || finished(pm.Segments) != n {
		t.Fatalf("after a restart: %+v", pm)
	}
}
