package engine

import (
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestGroupCommitBatchesSyncs(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) {
		o.syncHook = func(path string) error {
			// A slow disk: appends queue up behind each sync.
			if filepath.Ext(path) == logSuffix {
				time.Sleep(2 * time.Millisecond)
			}
			return nil
		}
	})
	defer e.Close()
	cfg := smallConfig()
	cfg["segment.bytes"] = "10000000"
	l := mustTopic(t, e, "gc", 1, cfg).Partition(0)
	const producers, each = 16, 40
	var fired atomic.Int64
	var wg sync.WaitGroup
	before := e.syncs.Load()
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			batch := batchOf(t, 1, 100, 1, p)
			for i := 0; i < each; i++ {
				info, err := l.Append(batch, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if err := waitDurable(t, l, info.LastOffset); err != nil {
					t.Error(err)
					return
				}
				fired.Add(1)
			}
		}(p)
	}
	wg.Wait()
	syncs := e.syncs.Load() - before
	if fired.Load() != producers*each {
		t.Fatalf("%d of %d WhenDurable callbacks fired", fired.Load(), producers*each)
	}
	if syncs*4 > producers*each {
		t.Fatalf("%d fdatasyncs for %d appends: no group commit", syncs, producers*each)
	}
	t.Logf("%d appends, %d fdatasyncs", producers*each, syncs)
}

func TestWhenDurableFiresForEveryWaiter(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "wd", 1, smallConfig()).Partition(0)
	var fired atomic.Int64
	var order []int64
	var mu sync.Mutex
	// Register before the offsets exist, in reverse order.
	for off := int64(199); off >= 0; off-- {
		l.WhenDurable(off, func(err error) {
			if err == nil {
				fired.Add(1)
				mu.Lock()
				order = append(order, off)
				mu.Unlock()
			}
		})
	}
	var last int64
	for i := 0; i < 200; i++ {
		last = mustAppend(t, l, batchOf(t, 1, 10, 1, i)).LastOffset
	}
	if err := waitDurable(t, l, last); err != nil {
		t.Fatal(err)
	}
	if fired.Load() != 200 {
		t.Fatalf("%d of 200 callbacks fired by the time the HW passed them", fired.Load())
	}
	mu.Lock()
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			t.Fatalf("callbacks fired out of offset order: %d after %d", order[i], order[i-1])
		}
	}
	mu.Unlock()
	// Already durable: inline.
	inline := false
	l.WhenDurable(0, func(err error) { inline = err == nil })
	if !inline {
		t.Fatal("WhenDurable for a durable offset did not run inline")
	}
}

func TestFsyncFailureTakesEngineOffline(t *testing.T) {
	var fail atomic.Bool
	e := openEngine(t, t.TempDir(), func(o *Options) {
		o.syncHook = func(path string) error {
			if fail.Load() {
				return errors.New("injected EIO")
			}
			return nil
		}
	})
	defer e.Close()
	l := mustTopic(t, e, "off", 1, smallConfig()).Partition(0)
	info := mustAppend(t, l, batchOf(t, 1, 10, 1, 0))
	if err := waitDurable(t, l, info.LastOffset); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	w := l.Wait(l.HighWatermark())
	info = mustAppend(t, l, batchOf(t, 1, 10, 1, 1))
	if err := waitDurable(t, l, info.LastOffset); !errors.Is(err, ErrOffline) {
		t.Fatalf("WhenDurable after a failed fsync: %v, want ErrOffline", err)
	}
	<-w // Wait channels are released
	if err := e.Offline(); !errors.Is(err, ErrOffline) {
		t.Fatalf("Offline() = %v", err)
	}
	if hw := l.HighWatermark(); hw != 1 {
		t.Fatalf("HW moved to %d past a failed sync", hw)
	}
	fail.Store(false) // never retried, even if the disk recovers
	if _, err := l.Append(batchOf(t, 1, 10, 1, 2), 0); !errors.Is(err, ErrOffline) {
		t.Fatalf("Append while offline: %v", err)
	}
	if err := waitDurable(t, l, 0); !errors.Is(err, ErrOffline) {
		t.Fatalf("new WhenDurable while offline: %v", err)
	}
	if _, err := e.CreateTopic("x", 1, nil); !errors.Is(err, ErrOffline) {
		t.Fatalf("CreateTopic while offline: %v", err)
	}
	if _, err := l.Read(0, 100, true); !errors.Is(err, ErrOffline) {
		t.Fatalf("Read while offline: %v", err)
	}
}

func TestWriteCachingAdvancesHWAtAppend(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	cfg := smallConfig()
	cfg["write.caching"] = "true"
	cfg["flush.messages"] = "10"
	l := mustTopic(t, e, "wc", 1, cfg).Partition(0)
	before := e.syncs.Load()
	for i := 0; i < 9; i++ {
		info := mustAppend(t, l, batchOf(t, 1, 10, 1, i))
		if l.HighWatermark() != info.LastOffset+1 {
			t.Fatalf("HW %d right after append of %d with write.caching", l.HighWatermark(), info.LastOffset)
		}
	}
	if n := e.syncs.Load() - before; n != 0 {
		t.Fatalf("%d syncs before flush.messages was reached", n)
	}
	if d := l.durable.Load(); d != 0 {
		t.Fatalf("durable offset %d without a flush", d)
	}
	mustAppend(t, l, batchOf(t, 1, 10, 1, 9))
	// The 10th record triggers a flush; wait for the durable offset.
	for i := 0; l.durable.Load() != 10; i++ {
		if i > 30000 {
			t.Fatalf("durable offset stuck at %d", l.durable.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWriteCachingFlushMs(t *testing.T) {
	clock := newFakeClock(1_000_000)
	e := openEngine(t, t.TempDir(), func(o *Options) { o.Now = clock.Now })
	defer e.Close()
	cfg := smallConfig()
	cfg["write.caching"] = "true"
	cfg["flush.ms"] = "1000"
	l := mustTopic(t, e, "wcms", 1, cfg).Partition(0)
	waitDurableOffset := func(want int64) {
		t.Helper()
		for i := 0; l.durable.Load() != want; i++ {
			if i > 30000 {
				t.Fatalf("durable offset stuck at %d, want %d", l.durable.Load(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for round := int64(1); round <= 3; round++ {
		mustAppend(t, l, batchOf(t, 1, 10, 1, int(round)))
		if l.HighWatermark() != round {
			t.Fatalf("HW %d after append %d", l.HighWatermark(), round)
		}
		clock.Advance(1000) // flush.ms elapsed since the last flush
		e.kickFlusher()
		waitDurableOffset(round)
	}
}

// blockingHook blocks the syncs of files under one directory until released
// and reports when the first one started.
type blockingHook struct {
	dir     string
	entered chan struct{} // closed when a sync under dir started
	release chan struct{} // close to let them finish
	once    sync.Once
}

func newBlockingHook() *blockingHook {
	return &blockingHook{entered: make(chan struct{}), release: make(chan struct{})}
}

func (h *blockingHook) hook(path string) error {
	if h.dir != "" && filepath.Dir(path) == h.dir {
		h.once.Do(func() { close(h.entered) })
		<-h.release
	}
	return nil
}

// TestNoHeadOfLineBlockingAcrossLogs: while one log's fdatasync hangs, the
// other logs' appends still become durable. With flush rounds (every dirty
// log synced, then the next round) the hung sync held every other log back.
func TestNoHeadOfLineBlockingAcrossLogs(t *testing.T) {
	h := newBlockingHook()
	e := openEngine(t, t.TempDir(), func(o *Options) { o.syncHook = h.hook })
	tp := mustTopic(t, e, "hol", 3, smallConfig())
	slow, fast1, fast2 := tp.Partition(0), tp.Partition(1), tp.Partition(2)
	h.dir = slow.dir
	stuck := mustAppend(t, slow, batchOf(t, 1, 10, 1, 0))
	<-h.entered // a worker is inside the slow log's sync now
	// More appends to the slow log wait for the hung flush, never beside it.
	mustAppend(t, slow, batchOf(t, 1, 10, 1, 1))
	for i := 0; i < 50; i++ {
		for _, l := range []*Log{fast1, fast2} {
			info := mustAppend(t, l, batchOf(t, 1, 10, 1, i))
			if err := waitDurable(t, l, info.LastOffset); err != nil {
				t.Fatal(err)
			}
		}
	}
	if hw := slow.HighWatermark(); hw != 0 {
		t.Fatalf("slow log's HW %d while its sync is still hanging", hw)
	}
	close(h.release)
	if err := waitDurable(t, slow, stuck.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLogSyncedByOneWorkerAtATime: many producers on a few logs with many
// workers; the hook checks that no two syncs of one log's files overlap and
// every append becomes durable.
func TestLogSyncedByOneWorkerAtATime(t *testing.T) {
	var (
		mu      sync.Mutex
		active  = map[string]int{}
		overlap atomic.Int64
	)
	e := openEngine(t, t.TempDir(), func(o *Options) {
		o.flushWorkers = 8
		o.syncHook = func(path string) error {
			dir := filepath.Dir(path)
			mu.Lock()
			active[dir]++
			if active[dir] > 1 {
				overlap.Add(1)
			}
			mu.Unlock()
			time.Sleep(50 * time.Microsecond) // widen the window a second sync would hit
			mu.Lock()
			active[dir]--
			mu.Unlock()
			return nil
		}
	})
	defer e.Close()
	tp := mustTopic(t, e, "one", 3, map[string]string{"segment.bytes": "100000"})
	var wg sync.WaitGroup
	for p := 0; p < 12; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			l := tp.Partition(int32(p % 3))
			for i := 0; i < 40; i++ {
				info, err := l.Append(batchOf(t, 2, 100, 1, p*100+i), 0)
				if err != nil {
					t.Error(err)
					return
				}
				if err := waitDurable(t, l, info.LastOffset); err != nil {
					t.Error(err)
					return
				}
			}
		}(p)
	}
	wg.Wait()
	if n := overlap.Load(); n != 0 {
		t.Fatalf("%d syncs overlapped another sync of the same log", n)
	}
	for p := int32(0); p < 3; p++ {
		l := tp.Partition(p)
		if hw, end := l.HighWatermark(), l.LogEndOffset(); hw != end || end != 4*2*40 {
			t.Fatalf("partition %d: HW %d, log end %d, want both %d", p, hw, end, 4*2*40)
		}
	}
}

// TestCloseFlushesWriteCachingData: data a write-caching log has not synced
// (flush.ms and flush.messages far away) is durable once Close returns.
func TestCloseFlushesWriteCachingData(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	cfg := smallConfig()
	cfg["write.caching"] = "true"
	l := mustTopic(t, e, "wcclose", 1, cfg).Partition(0)
	before := e.syncs.Load()
	var last int64
	for i := 0; i < 5; i++ {
		last = mustAppend(t, l, batchOf(t, 1, 10, 1, i)).LastOffset
	}
	if d := l.durable.Load(); d != 0 {
		t.Fatalf("durable offset %d before any flush", d)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if d := l.durable.Load(); d != last+1 {
		t.Fatalf("durable offset %d after Close, want %d", d, last+1)
	}
	if e.syncs.Load() == before {
		t.Fatal("Close synced nothing")
	}
}

// TestRecoveryCheckpointWrittenByCoordinator: the recovery point advances in
// the checkpoint file once checkpointIntervalMs passed on the engine's clock.
func TestRecoveryCheckpointWrittenByCoordinator(t *testing.T) {
	clock := newFakeClock(1_000_000)
	dir := t.TempDir()
	e := openEngine(t, dir, func(o *Options) { o.Now = clock.Now })
	defer e.Close()
	l := mustTopic(t, e, "ckpt", 1, smallConfig()).Partition(0)
	var last int64
	for i := 0; i < 3; i++ {
		last = mustAppend(t, l, batchOf(t, 1, 10, 1, i)).LastOffset
	}
	if err := waitDurable(t, l, last); err != nil {
		t.Fatal(err)
	}
	read := func() int64 {
		m, err := readOffsetCheckpoint(filepath.Join(dir, recoveryPointFile))
		if err != nil {
			t.Fatal(err)
		}
		return m[topicPartition{"ckpt", 0}]
	}
	if rp := read(); rp != 0 {
		t.Fatalf("recovery point %d written before the interval passed", rp)
	}
	clock.Advance(checkpointIntervalMs)
	for i := 0; read() != last+1; i++ {
		if i > 30000 {
			t.Fatalf("recovery point stuck at %d, want %d", read(), last+1)
		}
		e.kickFlusher()
		time.Sleep(time.Millisecond)
	}
}

func TestLogQueueFIFO(t *testing.T) {
	var q logQueue
	logs := make([]*Log, 200)
	for i := range logs {
		logs[i] = &Log{part: int32(i)}
	}
	next := 0
	// Interleave pushes and pops so the ring wraps while it grows.
	for i, l := range logs {
		q.push(l)
		if i%3 == 2 {
			if got := q.pop(); got != logs[next] {
				t.Fatalf("pop %d: got partition %d", next, got.part)
			}
			next++
		}
	}
	for q.len() > 0 {
		if got := q.pop(); got != logs[next] {
			t.Fatalf("pop %d: got partition %d", next, got.part)
		}
		next++
	}
	if next != len(logs) {
		t.Fatalf("popped %d of %d", next, len(logs))
	}
}
