package engine

import (
	"bytes"
	"io"
	"testing"
)

// copyTopic opens an engine with a remote hook installed (budget: the
// copy cache's bytes, 0 for the default) and a topic with cfg over
// smallConfig (4 KiB segments).
func copyTopic(t *testing.T, budget int64, cfg map[string]string) (*Engine, *Log, *fakeClock) {
	t.Helper()
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	e := openEngine(t, t.TempDir(), func(o *Options) {
		o.Now = clk.Now
		o.RetentionCheckInterval = -1
		o.Cleaner.Disabled = true
		o.CopyCacheBytes = budget
	})
	h := &copiedHook{}
	h.end.Store(-1)
	e.SetRemoteHook(h)
	t.Cleanup(func() { e.SetRemoteHook(nil) })
	c := smallConfig()
	for k, v := range cfg {
		c[k] = v
	}
	return e, mustTopic(t, e, "tiered", 1, c).Partition(0), clk
}

// copyOf opens the sealed segment at base and reads its .log as the
// remote log manager's copy does (LogReader); fromMem tells whether the
// bytes came from the copy cache.
func copyOf(t *testing.T, l *Log, base int64) (data, file []byte, fromMem bool) {
	t.Helper()
	f, err := l.OpenSealedSegment(base)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := f.LogReader()
	data, err = io.ReadAll(r)
	r.Close()
	if err != nil || int64(len(data)) != f.Segment.Size {
		t.Fatalf("segment %d: read %d of %d bytes: %v", base, len(data), f.Segment.Size, err)
	}
	file = make([]byte, f.Segment.Size)
	if _, err := f.s.seg.ReadAt(file, 0); err != nil {
		t.Fatalf("segment %d: reading the file: %v", base, err)
	}
	viaLog, err := io.ReadAll(io.NewSectionReader(f.Log, 0, f.Segment.Size))
	if err != nil || !bytes.Equal(viaLog, data) {
		t.Fatalf("segment %d: Log (ReaderAt) and LogReader differ (%v)", base, err)
	}
	return data, file, f.mem != nil
}

// freeBlocks checks that every block the pool made is back in it.
func freeBlocks(t *testing.T, e *Engine) {
	t.Helper()
	p := e.copies
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) != p.made {
		t.Fatalf("copy cache: %d blocks made, %d free", p.made, len(p.free))
	}
}

// A remote-enabled log's sealed segments are copied from memory, with
// the file's bytes; the memory goes back to the pool once copied, and a
// second copy of the same segment reads the file.
func TestCopyCacheServesCopies(t *testing.T) {
	e, l, _ := copyTopic(t, 0, map[string]string{"remote.storage.enable": "true"})
	for i := 0; i < 4; i++ {
		appendAt(t, l, 1_700_000_000_000+int64(i), i)
	}
	sealed := l.SealedSegments()
	if len(sealed) != 3 {
		t.Fatalf("sealed %+v", sealed)
	}
	for _, s := range sealed {
		data, file, mem := copyOf(t, l, s.Base)
		if !mem || !bytes.Equal(data, file) {
			t.Fatalf("segment %d: from memory %v, equal to the file %v", s.Base, mem, bytes.Equal(data, file))
		}
	}
	if data, file, mem := copyOf(t, l, 0); mem || !bytes.Equal(data, file) {
		t.Fatalf("second copy: from memory %v, equal %v", mem, bytes.Equal(data, file))
	}
	st, ok := e.CopyCacheStats()
	if !ok || st.Hits != 3 || st.Misses != 1 || st.Evicted != 0 || st.Dropped != 0 {
		t.Fatalf("stats %+v (ok %v)", st, ok)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	freeBlocks(t, e) // the active segment's stage and nothing else was left
}

// Only remote-enabled logs with a hook installed and segments small
// enough for the budget are staged.
func TestCopyCacheStagesOnlyWhatIsCopied(t *testing.T) {
	e, l, _ := copyTopic(t, 8*copyBlockBytes, nil) // remote storage off
	defer e.Close()
	big := mustTopic(t, e, "big", 1, map[string]string{"remote.storage.enable": "true", "segment.bytes": "1048576"}).Partition(0)
	for i := 0; i < 3; i++ {
		appendAt(t, l, 1_700_000_000_000+int64(i), i)
	}
	if _, _, mem := copyOf(t, l, 0); mem {
		t.Fatal("a log without remote storage was staged")
	}
	// segment.bytes above an eighth of the budget: not staged.
	for i := 0; i < 400; i++ {
		mustAppend(t, big, batchOf(t, 1, 3000, 1_700_000_000_000, i))
	}
	if err := waitDurable(t, big, big.LogEndOffset()-1); err != nil {
		t.Fatal(err)
	}
	if len(big.SealedSegments()) == 0 {
		t.Fatal("no segment sealed")
	}
	if _, _, mem := copyOf(t, big, 0); mem {
		t.Fatal("a segment larger than an eighth of the budget was staged")
	}
	// Without a remote log manager nothing is copied, so nothing staged.
	e.SetRemoteHook(nil)
	c := smallConfig()
	c["remote.storage.enable"] = "true"
	on := mustTopic(t, e, "nohook", 1, c).Partition(0)
	for i := 0; i < 3; i++ {
		appendAt(t, on, 1_700_000_000_000+int64(i), i)
	}
	if _, _, mem := copyOf(t, on, 0); mem {
		t.Fatal("staged without a remote hook")
	}
	st, _ := e.CopyCacheStats()
	if st.Hits != 0 || st.Bytes != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// When the budget is spent, new segments are not staged (the memory of
// older ones is what the next copies read); copies give memory back, and
// memory a sealed segment held for copyStaleMs goes to newer appends,
// oldest first.
func TestCopyCacheBudget(t *testing.T) {
	e, l, clk := copyTopic(t, 8*copyBlockBytes, map[string]string{"remote.storage.enable": "true"})
	const t0 = int64(1_700_000_000_000)
	for i := 0; i < 12; i++ { // segments 0-11, one block each: 0-7 staged
		appendAt(t, l, t0+int64(i), i)
	}
	check := func(base int64, wantMem bool) {
		t.Helper()
		data, file, mem := copyOf(t, l, base)
		if !bytes.Equal(data, file) {
			t.Fatalf("segment %d: copy differs from the file", base)
		}
		if mem != wantMem {
			t.Fatalf("segment %d: from memory %v", base, mem)
		}
	}
	for base := int64(0); base < 4; base++ {
		check(base, true) // four blocks back to the pool
	}
	for i := 12; i < 16; i++ { // segment 11 rolls unstaged; 12-15 staged
		appendAt(t, l, t0+int64(i), i)
	}
	clk.Advance(copyStaleMs)
	appendAt(t, l, t0+16, 16) // 15 sealed; 16 takes the stale memory of 4
	for base := int64(4); base < 16; base++ {
		check(base, base >= 5 && base < 8 || base >= 12)
	}
	st, _ := e.CopyCacheStats()
	if st.Hits != 11 || st.Misses != 5 || st.Evicted != 1 || st.Dropped != 4 || st.Bytes != 8*copyBlockBytes {
		t.Fatalf("stats %+v", st)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	freeBlocks(t, e)
}

// A truncation into a sealed segment drops its memory: the bytes
// appended after the cut are what its next copy reads.
func TestCopyCacheDroppedByTruncation(t *testing.T) {
	e, l, _ := copyTopic(t, 0, map[string]string{"remote.storage.enable": "true"})
	const ts = int64(1_700_000_000_000)
	for i := 0; i < 6; i++ { // two 1.5 KB batches a segment
		mustAppend(t, l, batchOf(t, 1, 1500, ts, i))
	}
	if err := waitDurable(t, l, 5); err != nil {
		t.Fatal(err)
	}
	if s := l.SealedSegments(); len(s) != 2 || s[1].Base != 2 {
		t.Fatalf("sealed %+v", s)
	}
	if _, err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	// The same sizes (keys of as many digits), other bytes: offset 3
	// again, then 4 and 5.
	for i := 0; i < 3; i++ {
		mustAppend(t, l, batchOf(t, 1, 1500, ts, 7+i))
	}
	if err := waitDurable(t, l, 5); err != nil {
		t.Fatal(err)
	}
	data, file, mem := copyOf(t, l, 2)
	if mem || !bytes.Equal(data, file) {
		t.Fatalf("after the cut: from memory %v, equal to the file %v", mem, bytes.Equal(data, file))
	}
	if !bytes.Contains(data, bytes.Repeat([]byte{7}, 1500)) {
		t.Fatal("the copy lacks the batch appended after the cut")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	freeBlocks(t, e)
}
