package engine

import "testing"

// The tail cache's counters: a read at the head of a log that caches is a
// hit, a read of the log after its idle spell (served from the file) a
// miss; an engine without the cache reports none. Log.Size counts the
// segments and the bytes appended.
func TestTailCacheStatsAndLogSize(t *testing.T) {
	clock := newFakeClock(1_700_000_000_000)
	e := openEngine(t, t.TempDir(), func(o *Options) { o.TailCacheBytes = 4 * tailBufBytes; o.Now = clock.Now })
	defer e.Close()
	l := mustTopic(t, e, "counted", 1, smallConfig()).Partition(0)
	if st, ok := e.TailCacheStats(); !ok || st != (TailCacheStats{}) {
		t.Fatalf("fresh engine: %+v %v", st, ok)
	}
	readingHead(t, l)
	appendSome := func(k int) {
		var last AppendInfo
		for i := range k {
			last = mustAppend(t, l, batchOf(t, 2, 300, clock.ms.Load(), i))
		}
		if err := waitDurable(t, l, last.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
	appendSome(20) // rolls the 4 KiB segments
	before, _ := e.TailCacheStats()
	from := l.LogEndOffset()
	appendSome(2)
	res, err := l.ReadMem(from, 1<<20, true)
	if err != nil || len(res.Chunks) == 0 || res.Chunks[0].Buf == nil {
		t.Fatalf("read at the head not from memory: %v %+v", err, res.Chunks)
	}
	res.Release()
	st, _ := e.TailCacheStats()
	if st.Hits != before.Hits+1 || st.Misses != before.Misses {
		t.Fatalf("after a cached read: %+v (before %+v)", st, before)
	}
	// A read of the first segment (rolled: 4 KiB segments) is a miss.
	if l.Size().Segments < 2 {
		t.Fatalf("%+v: want a rolled segment", l.Size())
	}
	res, err = l.ReadMem(0, 1<<20, true)
	if err != nil || len(res.Chunks) == 0 || res.Chunks[0].Buf != nil {
		t.Fatalf("read of an old segment: %v %+v", err, res.Chunks)
	}
	res.Release()
	if st2, _ := e.TailCacheStats(); st2.Misses != st.Misses+1 || st2.Hits != st.Hits {
		t.Fatalf("after a file read: %+v (before %+v)", st2, st)
	}

	off := openEngine(t, t.TempDir(), func(o *Options) { o.TailCacheBytes = -1 })
	defer off.Close()
	if _, ok := off.TailCacheStats(); ok {
		t.Fatal("an engine without a tail cache reports its counters")
	}
	ol := mustTopic(t, off, "sized", 1, nil).Partition(0)
	if sz := ol.Size(); sz != (LogSize{Segments: 1}) {
		t.Fatalf("empty log: %+v", sz)
	}
	var want int64
	for i := range 3 {
		b := batchOf(t, 2, 100, 0, i)
		want += int64(len(b))
		mustAppend(t, ol, b)
	}
	if sz := ol.Size(); sz.Segments != 1 || sz.Bytes != want {
		t.Fatalf("after %d bytes appended: %+v", want, sz)
	}
}
