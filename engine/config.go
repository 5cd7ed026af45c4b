package engine

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/stratalog/strata/internal/configkeys"
)

// LogConfig is one partition log's settings, named after Kafka's topic keys.
// The keys' types, ranges, defaults and broker names are in
// internal/configkeys; this file binds each to its field.
type LogConfig struct {
	SegmentBytes         int64  // segment.bytes            (broker: log.segment.bytes)          1 GiB
	SegmentMs            int64  // segment.ms               (broker: log.roll.ms)                 7 days
	SegmentIndexBytes    int32  // segment.index.bytes      (broker: log.index.size.max.bytes)   10 MiB
	IndexIntervalBytes   int32  // index.interval.bytes     (broker: log.index.interval.bytes)   4096
	RetentionMs          int64  // retention.ms             (broker: log.retention.ms)           7 days, -1 = forever
	RetentionBytes       int64  // retention.bytes          (broker: log.retention.bytes)        -1
	MaxMessageBytes      int32  // max.message.bytes        (broker: message.max.bytes)          1048588
	MessageTimestampType string // message.timestamp.type   (broker: log.message.timestamp.type) CreateTime
	CleanupPolicy        string // cleanup.policy           (broker: log.cleanup.policy)          delete
	WriteCaching         bool   // write.caching: true = ack/HW from page cache, flush by flush.ms/messages; false (default) = HW is durable (group commit)
	FlushMessages        int64  // flush.messages           (broker: log.flush.interval.messages) only with write.caching
	FlushMs              int64  // flush.ms                 (broker: log.flush.interval.ms)       only with write.caching
	Preallocate          bool   // preallocate              (broker: log.preallocate)             true
	FileDeleteDelayMs    int64  // file.delete.delay.ms     (broker: log.segment.delete.delay.ms) 60000

	// Tiered storage (KIP-405; remote.go, the remote/rlm package).
	RemoteStorageEnable bool  // remote.storage.enable                                                false
	LocalRetentionMs    int64 // local.retention.ms    (broker: log.local.retention.ms)    -2 = retention.ms
	LocalRetentionBytes int64 // local.retention.bytes (broker: log.local.retention.bytes) -2 = retention.bytes

	// Compaction (cleanup.policy contains "compact"; see cleaner.go).
	DeleteRetentionMs      int64   // delete.retention.ms       (broker: log.cleaner.delete.retention.ms)       1 day
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio (broker: log.cleaner.min.cleanable.ratio)       0.5
	MinCompactionLagMs     int64   // min.compaction.lag.ms     (broker: log.cleaner.min.compaction.lag.ms)     0
	MaxCompactionLagMs     int64   // max.compaction.lag.ms     (broker: log.cleaner.max.compaction.lag.ms)     MaxInt64

	// DLQGroupEnable is errors.deadletterqueue.group.enable (KIP-1191):
	// the topic may be a share group's dead-letter topic. The engine only
	// keeps it; the server's dead-letter writer checks it.
	DLQGroupEnable bool
}

// Timestamp types (message.timestamp.type values).
const (
	TimestampCreateTime    = "CreateTime"
	TimestampLogAppendTime = "LogAppendTime"
)

// logField binds a topic key of internal/configkeys (its name, type,
// range and default live there) to its LogConfig field.
type logField struct {
	set func(c *LogConfig, v configkeys.Value)
	get func(c *LogConfig) string
}

func int64Field(field func(c *LogConfig) *int64) logField {
	return logField{
		set: func(c *LogConfig, v configkeys.Value) { *field(c) = v.Int },
		get: func(c *LogConfig) string { return strconv.FormatInt(*field(c), 10) },
	}
}

func int32Field(field func(c *LogConfig) *int32) logField {
	return logField{
		set: func(c *LogConfig, v configkeys.Value) { *field(c) = int32(v.Int) }, // the table bounds Int keys
		get: func(c *LogConfig) string { return strconv.FormatInt(int64(*field(c)), 10) },
	}
}

func boolField(field func(c *LogConfig) *bool) logField {
	return logField{
		set: func(c *LogConfig, v configkeys.Value) { *field(c) = v.Bool },
		get: func(c *LogConfig) string { return strconv.FormatBool(*field(c)) },
	}
}

func float64Field(field func(c *LogConfig) *float64) logField {
	return logField{
		set: func(c *LogConfig, v configkeys.Value) { *field(c) = v.Float },
		get: func(c *LogConfig) string { return strconv.FormatFloat(*field(c), 'g', -1, 64) },
	}
}

func stringField(field func(c *LogConfig) *string) logField {
	return logField{
		set: func(c *LogConfig, v configkeys.Value) { *field(c) = v.Text },
		get: func(c *LogConfig) string { return *field(c) },
	}
}

// logFields holds the field of every configkeys key marked Log, by topic
// name (checked when the package initializes: a key without a field, or a
// field without a key, panics).
var logFields = map[string]logField{
	"segment.bytes":             int64Field(func(c *LogConfig) *int64 { return &c.SegmentBytes }),
	"segment.ms":                int64Field(func(c *LogConfig) *int64 { return &c.SegmentMs }),
	"segment.index.bytes":       int32Field(func(c *LogConfig) *int32 { return &c.SegmentIndexBytes }),
	"index.interval.bytes":      int32Field(func(c *LogConfig) *int32 { return &c.IndexIntervalBytes }),
	"retention.ms":              int64Field(func(c *LogConfig) *int64 { return &c.RetentionMs }),
	"retention.bytes":           int64Field(func(c *LogConfig) *int64 { return &c.RetentionBytes }),
	"max.message.bytes":         int32Field(func(c *LogConfig) *int32 { return &c.MaxMessageBytes }),
	"message.timestamp.type":    stringField(func(c *LogConfig) *string { return &c.MessageTimestampType }),
	"flush.messages":            int64Field(func(c *LogConfig) *int64 { return &c.FlushMessages }),
	"flush.ms":                  int64Field(func(c *LogConfig) *int64 { return &c.FlushMs }),
	"file.delete.delay.ms":      int64Field(func(c *LogConfig) *int64 { return &c.FileDeleteDelayMs }),
	"delete.retention.ms":       int64Field(func(c *LogConfig) *int64 { return &c.DeleteRetentionMs }),
	"min.cleanable.dirty.ratio": float64Field(func(c *LogConfig) *float64 { return &c.MinCleanableDirtyRatio }),
	"min.compaction.lag.ms":     int64Field(func(c *LogConfig) *int64 { return &c.MinCompactionLagMs }),
	"max.compaction.lag.ms":     int64Field(func(c *LogConfig) *int64 { return &c.MaxCompactionLagMs }),
	"write.caching":             boolField(func(c *LogConfig) *bool { return &c.WriteCaching }),
	"preallocate":               boolField(func(c *LogConfig) *bool { return &c.Preallocate }),
	"remote.storage.enable":     boolField(func(c *LogConfig) *bool { return &c.RemoteStorageEnable }),
	"local.retention.ms":        int64Field(func(c *LogConfig) *int64 { return &c.LocalRetentionMs }),
	"local.retention.bytes":     int64Field(func(c *LogConfig) *int64 { return &c.LocalRetentionBytes }),
	"cleanup.policy": {
		// The table checks the items; the log keeps them in one order.
		set: func(c *LogConfig, v configkeys.Value) { c.CleanupPolicy = normalCleanupPolicy(v.Items()) },
		get: func(c *LogConfig) string { return c.CleanupPolicy },
	},

	// Dead-letter topics of share groups (KIP-1191).
	"errors.deadletterqueue.group.enable": boolField(func(c *LogConfig) *bool { return &c.DLQGroupEnable }),
}

// normalCleanupPolicy writes a checked cleanup.policy list in one order.
func normalCleanupPolicy(items []string) string {
	var del, compact bool
	for _, p := range items {
		del = del || p == "delete"
		compact = compact || p == "compact"
	}
	switch {
	case del && compact:
		return "compact,delete"
	case compact:
		return "compact"
	default:
		return "delete"
	}
}

// sortedKeys are the topic names of logFields, sorted; defaultLogConfig
// has every key at its table default.
var sortedKeys, defaultLogConfig = func() ([]string, LogConfig) {
	var keys []string
	var c LogConfig
	for _, k := range configkeys.All() {
		if !k.Log {
			continue
		}
		f, ok := logFields[k.Topic]
		if !ok {
			panic("engine: configkeys log key " + k.Topic + " has no LogConfig field")
		}
		v, err := k.Parse(k.Default)
		if err != nil {
			panic("engine: " + err.Error())
		}
		f.set(&c, v)
		keys = append(keys, k.Topic)
	}
	if len(keys) != len(logFields) {
		panic(fmt.Sprintf("engine: %d LogConfig fields, %d configkeys log keys", len(logFields), len(keys)))
	}
	sort.Strings(keys)
	return keys, c
}()

// DefaultLogConfig returns every topic key at its default: Kafka's, plus
// Strata's durable-by-default (internal/configkeys holds them).
func DefaultLogConfig() LogConfig { return defaultLogConfig }

// TopicKeys lists the topic-level config names LogConfig understands, sorted.
func TopicKeys() []string { return append([]string(nil), sortedKeys...) }

// Apply returns c with topic-level overrides (Kafka topic key names) applied.
// Unknown keys or bad values (as internal/configkeys checks them):
// ErrInvalidConfig, wrapping the configkeys error. Keys are applied in
// sorted order, so the first bad key reported is stable.
func (c LogConfig) Apply(overrides map[string]string) (LogConfig, error) {
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, name := range keys {
		f, ok := logFields[name]
		if !ok {
			return c, fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, name)
		}
		k, _ := configkeys.TopicKey(name)
		v, err := k.Parse(overrides[name])
		if err != nil {
			return c, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		f.set(&c, v)
	}
	return c, nil
}

// Value returns the string form of a topic-level key's value in c (for DescribeConfigs).
func (c LogConfig) Value(key string) (string, bool) {
	f, ok := logFields[key]
	if !ok {
		return "", false
	}
	return f.get(&c), true
}

// LogDefaults returns the broker-wide topic defaults: the ones the engine
// was opened with (Options.Log, or DefaultLogConfig), or the last
// SetLogDefaults.
func (e *Engine) LogDefaults() LogConfig {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	return e.defaults
}

// config returns the log's current config (immutable; replaced whole when
// the topic's config changes at runtime). One atomic load: Append takes it
// once per request so a request sees one consistent config.
func (l *Log) config() *LogConfig { return l.cfg.Load() }

// compacted reports whether cleanup.policy includes compact.
func (c *LogConfig) compacted() bool { return strings.Contains(c.CleanupPolicy, "compact") }

// deletes reports whether cleanup.policy includes delete (retention applies).
func (c *LogConfig) deletes() bool { return strings.Contains(c.CleanupPolicy, "delete") }

// logAppendTime reports whether the broker stamps batches with its clock.
func (c *LogConfig) logAppendTime() bool { return c.MessageTimestampType == TimestampLogAppendTime }

// Index geometry. An index file holds maxEntries+1 slots: the spare slot
// keeps room for the time index's final entry written when a segment is
// sealed, so a sealed segment's largest timestamp is always its last entry.
func (c *LogConfig) maxOffsetEntries() int { return int(c.SegmentIndexBytes) / offsetEntrySize }
func (c *LogConfig) maxTimeEntries() int   { return int(c.SegmentIndexBytes) / timeEntrySize }
func (c *LogConfig) offsetIndexBytes() int { return (c.maxOffsetEntries() + 1) * offsetEntrySize }
func (c *LogConfig) timeIndexBytes() int   { return (c.maxTimeEntries() + 1) * timeEntrySize }

const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)
