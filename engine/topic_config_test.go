package engine

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/stratalog/strata/record"
)

func TestSetTopicConfigAppliesWithoutRestart(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	dir := t.TempDir()
	e, l := retentionTopic(t, dir, clk, map[string]string{"retention.ms": "-1"})
	for i := 0; i < 4; i++ {
		appendAt(t, l, t0-10_000, i)
	}
	if n := e.enforceRetention(); n != 0 {
		t.Fatalf("retention.ms=-1 deleted %d", n)
	}
	before := l.SegmentCount()
	over := e.Topic("ret").Overrides()
	over["retention.ms"] = "1000"
	over["message.timestamp.type"] = "LogAppendTime"
	if err := e.SetTopicConfig("ret", over); err != nil {
		t.Fatal(err)
	}
	if c := e.Topic("ret").Config(); c.RetentionMs != 1000 || c.MessageTimestampType != TimestampLogAppendTime {
		t.Fatalf("topic config not applied: %+v", c)
	}
	// Retention and the append path see the new values. SetTopicConfig
	// starts a retention pass of its own, which may delete the segments
	// before (or while) this one runs: count the segments, not the
	// deletions of one pass.
	e.enforceRetention()
	for deadline := time.Now().Add(10 * time.Second); l.SegmentCount() != before-3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // hang guard
			t.Fatalf("after retention.ms=1000: %d segments, want %d (3 deleted)", l.SegmentCount(), before-3)
		}
	}
	info := mustAppend(t, l, batchOf(t, 1, 10, 5, 9))
	if info.LogAppendTime != t0 {
		t.Fatalf("LogAppendTime %d, want the broker clock %d", info.LogAppendTime, t0)
	}
	// Bad values and unknown topics change nothing.
	bad := maps.Clone(over)
	bad["retention.ms"] = "soon"
	if err := e.SetTopicConfig("ret", bad); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad value: %v", err)
	}
	if err := e.SetTopicConfig("nope", over); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
	if got := e.Topic("ret").Overrides(); !maps.Equal(got, over) {
		t.Fatalf("overrides %v, want %v", got, over)
	}
	// A changed segment.index.bytes rolls the non-empty active segment.
	segs := l.SegmentCount()
	over["segment.index.bytes"] = "8192"
	if err := e.SetTopicConfig("ret", over); err != nil {
		t.Fatal(err)
	}
	if l.SegmentCount() != segs+1 {
		t.Fatalf("%d segments after resizing indexes, want %d", l.SegmentCount(), segs+1)
	}
	mustAppend(t, l, batchOf(t, 1, 10, 5, 10))
	// Persisted: a restart sees the same overrides; deleting a key returns
	// it to the default.
	delete(over, "message.timestamp.type")
	if err := e.SetTopicConfig("ret", over); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2, l2 := reopenRetention(t, dir, clk)
	defer e2.Close()
	if got := e2.Topic("ret").Overrides(); !maps.Equal(got, over) {
		t.Fatalf("overrides after reopen %v, want %v", got, over)
	}
	if c := e2.Topic("ret").Config(); c.RetentionMs != 1000 || c.MessageTimestampType != TimestampCreateTime || c.SegmentIndexBytes != 8192 {
		t.Fatalf("config after reopen %+v", c)
	}
	checkIndexesAgainstWalk(t, l2)
}

// Switching a topic to compact makes keyless records invalid from the next append.
func TestSetTopicConfigCompactRefusesKeyless(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "c", 1, nil).Partition(0)
	keyless := makeBatch(t, testRecord{ts: 1, value: []byte("v")})
	mustAppend(t, l, keyless)
	if err := e.SetTopicConfig("c", map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	keyless = makeBatch(t, testRecord{ts: 1, value: []byte("v")})
	if _, err := l.Append(keyless, 0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("keyless after switching to compact: %v", err)
	}
	var b record.Builder
	b.Reset(record.CodecZstd, 1)
	b.Add(1, []byte("k"), []byte("v"), nil)
	b.Add(1, nil, []byte("v"), nil)
	z, _ := b.AppendTo(nil)
	if _, err := l.Append(z, 0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("compressed keyless record: %v", err)
	}
}

// segment.ms changed at runtime rolls the active segment at the next append.
func TestSetTopicConfigSegmentMs(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clk := newFakeClock(t0)
	e, l := retentionTopic(t, t.TempDir(), clk, map[string]string{"segment.bytes": "1048576"})
	defer e.Close()
	mustAppend(t, l, batchOf(t, 1, 10, t0, 1))
	clk.Advance(5000)
	mustAppend(t, l, batchOf(t, 1, 10, t0, 2))
	if l.SegmentCount() != 1 {
		t.Fatalf("%d segments before the change", l.SegmentCount())
	}
	over := e.Topic("ret").Overrides()
	over["segment.ms"] = "1000"
	if err := e.SetTopicConfig("ret", over); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, batchOf(t, 1, 10, t0, 3))
	if l.SegmentCount() != 2 {
		t.Fatalf("%d segments after segment.ms=1000 and an append 5 s after the first, want 2", l.SegmentCount())
	}
}
