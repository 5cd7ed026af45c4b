package engine

import (
	"errors"
	"math"
	"reflect"
	"sort"
	"testing"

	"github.com/stratalog/strata/internal/configkeys"
)

func TestDefaultLogConfigIsKafkas(t *testing.T) {
	c := DefaultLogConfig()
	want := map[string]string{
		"segment.bytes":          "1073741824",
		"segment.ms":             "604800000",
		"segment.index.bytes":    "10485760",
		"index.interval.bytes":   "4096",
		"retention.ms":           "604800000",
		"retention.bytes":        "-1",
		"max.message.bytes":      "1048588",
		"message.timestamp.type": "CreateTime",
		"cleanup.policy":         "delete",
		"write.caching":          "false",
		"flush.messages":         "9223372036854775807",
		"flush.ms":               "9223372036854775807",
		"preallocate":            "true",
		"file.delete.delay.ms":   "60000",

		"delete.retention.ms":       "86400000",
		"min.cleanable.dirty.ratio": "0.5",
		"min.compaction.lag.ms":     "0",
		"max.compaction.lag.ms":     "9223372036854775807",

		"remote.storage.enable": "false",
		"local.retention.ms":    "-2",
		"local.retention.bytes": "-2",

		"errors.deadletterqueue.group.enable": "false",
	}
	keys := TopicKeys()
	if !sort.StringsAreSorted(keys) || len(keys) != len(want) {
		t.Fatalf("TopicKeys() = %v", keys)
	}
	for _, k := range keys {
		v, ok := c.Value(k)
		if !ok || v != want[k] {
			t.Errorf("default %s = %q (%v), want %q", k, v, ok, want[k])
		}
	}
	if _, ok := c.Value("nope"); ok {
		t.Error("Value of an unknown key reported ok")
	}
	if err := validateConfig(c); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestApplyParsesAndValidates(t *testing.T) {
	c, err := DefaultLogConfig().Apply(map[string]string{
		"segment.bytes":          " 2048 ",
		"retention.ms":           "-1",
		"message.timestamp.type": "LogAppendTime",
		"cleanup.policy":         "delete, compact",
		"write.caching":          "TRUE",
		"flush.ms":               "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.SegmentBytes != 2048 || c.RetentionMs != -1 || !c.logAppendTime() || c.CleanupPolicy != "compact,delete" || !c.WriteCaching || c.FlushMs != 0 {
		t.Fatalf("applied config %+v", c)
	}
	for _, bad := range []map[string]string{
		{"segment.bytes": "13"},
		{"segment.bytes": "2147483648"},
		{"segment.index.bytes": "3"},
		{"retention.ms": "-2"},
		{"max.message.bytes": "-1"},
		{"message.timestamp.type": "Now"},
		{"cleanup.policy": "delete,delete"},
		{"cleanup.policy": ""},
		{"preallocate": "yes"},
		{"flush.messages": "0"},
		{"segment.ms": "x"},
		{"unknown.key": "1"},
	} {
		got, err := DefaultLogConfig().Apply(bad)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Apply(%v) = %v, want ErrInvalidConfig", bad, err)
		}
		if !reflect.DeepEqual(got, DefaultLogConfig()) {
			t.Errorf("Apply(%v) changed the config on error", bad)
		}
	}
	// Every key round-trips through Value.
	for _, k := range TopicKeys() {
		v, _ := c.Value(k)
		back, err := DefaultLogConfig().Apply(map[string]string{k: v})
		if err != nil {
			t.Fatalf("%s=%q does not re-parse: %v", k, v, err)
		}
		if v2, _ := back.Value(k); v2 != v {
			t.Fatalf("%s: %q became %q", k, v, v2)
		}
	}
	if c := DefaultLogConfig(); c.FlushMs != math.MaxInt64 {
		t.Fatal("flush.ms default")
	}
}

func FuzzApplyConfig(f *testing.F) {
	for _, k := range TopicKeys() {
		v, _ := DefaultLogConfig().Value(k)
		f.Add(k, v)
	}
	f.Add("cleanup.policy", "compact,delete")
	f.Add("segment.bytes", "-9223372036854775808")
	f.Fuzz(func(t *testing.T, key, value string) {
		c, err := DefaultLogConfig().Apply(map[string]string{key: value})
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		// Anything accepted is a valid config that round-trips.
		if err := validateConfig(c); err != nil {
			t.Fatalf("accepted %s=%q yields an invalid config: %v", key, value, err)
		}
	})
}

// LogConfig's keys, defaults and checks are internal/configkeys' Log keys:
// a refused value wraps both ErrInvalidConfig and the table's ErrInvalid,
// and an engine's LogDefaults are what it was opened with.
func TestLogConfigReadsTheTable(t *testing.T) {
	defaults := configkeys.TopicDefaults()
	if len(defaults) != len(TopicKeys()) {
		t.Fatalf("%d table log keys, %d engine keys", len(defaults), len(TopicKeys()))
	}
	c := DefaultLogConfig()
	for k, want := range defaults {
		if v, ok := c.Value(k); !ok || v != want {
			t.Errorf("%s: default %q, table %q", k, v, want)
		}
	}
	_, err := c.Apply(map[string]string{"segment.bytes": "13"})
	if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, configkeys.ErrInvalid) {
		t.Fatalf("segment.bytes=13: %v", err)
	}
	if _, err := c.Apply(map[string]string{"min.insync.replicas": "2"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a topic key the log does not hold: %v", err)
	}
	lc := DefaultLogConfig()
	lc.SegmentBytes = 1 << 20
	e, err := Open(Options{Dir: t.TempDir(), Log: lc})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.LogDefaults() != lc {
		t.Fatalf("LogDefaults %+v", e.LogDefaults())
	}
}
