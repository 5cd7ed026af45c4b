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
