package engine

import (
	"errors"
	"testing"
	"time"
)

// SetLogDefaults changes the effective config of every topic without an
// override of the key, at once and for topics created after it; a topic
// with an override keeps it; an invalid default changes nothing.
func TestSetLogDefaultsFollowsTopicsWithoutOverride(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	plain, err := e.CreateTopic("plain", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := e.CreateTopic("pinned", 1, map[string]string{"retention.ms": "5000"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.LogDefaults().Apply(map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetLogDefaults(d); err != nil {
		t.Fatal(err)
	}
	if c := plain.Config(); c.RetentionMs != 1000 || c.CleanupPolicy != "compact,delete" {
		t.Fatalf("plain: retention.ms %d cleanup.policy %q, want the new defaults", c.RetentionMs, c.CleanupPolicy)
	}
	for p := int32(0); p < 2; p++ {
		if got := plain.Partition(p).config().RetentionMs; got != 1000 {
			t.Fatalf("plain-%d log: retention.ms %d, want 1000", p, got)
		}
	}
	if c := pinned.Config(); c.RetentionMs != 5000 || c.CleanupPolicy != "compact,delete" {
		t.Fatalf("pinned: retention.ms %d cleanup.policy %q, want its override and the new policy", c.RetentionMs, c.CleanupPolicy)
	}
	later, err := e.CreateTopic("later", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if later.Config().RetentionMs != 1000 || e.LogDefaults().RetentionMs != 1000 {
		t.Fatalf("a topic created after: retention.ms %d", later.Config().RetentionMs)
	}
	// Overrides set afterwards are applied over the new defaults.
	if err := e.SetTopicConfig("plain", map[string]string{"segment.bytes": "1048576"}); err != nil {
		t.Fatal(err)
	}
	if c := plain.Config(); c.RetentionMs != 1000 || c.SegmentBytes != 1048576 {
		t.Fatalf("plain after SetTopicConfig: %+v", c)
	}
	bad := d
	bad.SegmentBytes = 1
	if err := e.SetLogDefaults(bad); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("SetLogDefaults(segment.bytes=1) = %v, want ErrInvalidConfig", err)
	}
	if e.LogDefaults().SegmentBytes == 1 {
		t.Fatal("an invalid default was kept")
	}
}

// SetCleanerThrottle changes the cleaner's rate and backoff in force: an
// unthrottled rate lets a read of any size through at once where the
// rate the engine was opened with would make it wait for days.
func TestSetCleanerThrottle(t *testing.T) {
	e := openEngine(t, t.TempDir(), func(o *Options) { o.Cleaner.IOMaxBytesPerSecond = 1 })
	if rate, backoff := e.CleanerThrottle(); rate != 1 || backoff != defaultCleanerBackoff {
		t.Fatalf("opened with %d %v", rate, backoff)
	}
	e.SetCleanerThrottle(-1, 2*time.Second)
	if rate, backoff := e.CleanerThrottle(); rate != -1 || backoff != 2*time.Second {
		t.Fatalf("after SetCleanerThrottle: %d %v", rate, backoff)
	}
	e.cl.runMu.Lock()
	ok := e.throttle(1 << 40)
	e.cl.runMu.Unlock()
	if !ok {
		t.Fatal("throttle refused")
	}
	e.SetCleanerThrottle(0, 0)
	if rate, backoff := e.CleanerThrottle(); rate != defaultCleanerIORate || backoff != defaultCleanerBackoff {
		t.Fatalf("zero values: %d %v, want the defaults", rate, backoff)
	}
}
