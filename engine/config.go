package engine

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// LogConfig is one partition log's settings, named after Kafka's topic keys.
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

	// Compaction (cleanup.policy contains "compact"; see cleaner.go).
	DeleteRetentionMs      int64   // delete.retention.ms       (broker: log.cleaner.delete.retention.ms)       1 day
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio (broker: log.cleaner.min.cleanable.ratio)       0.5
	MinCompactionLagMs     int64   // min.compaction.lag.ms     (broker: log.cleaner.min.compaction.lag.ms)     0
	MaxCompactionLagMs     int64   // max.compaction.lag.ms     (broker: log.cleaner.max.compaction.lag.ms)     MaxInt64
}

// Topic-level config keys.
const (
	keySegmentBytes       = "segment.bytes"
	keySegmentMs          = "segment.ms"
	keySegmentIndexBytes  = "segment.index.bytes"
	keyIndexIntervalBytes = "index.interval.bytes"
	keyRetentionMs        = "retention.ms"
	keyRetentionBytes     = "retention.bytes"
	keyMaxMessageBytes    = "max.message.bytes"
	keyTimestampType      = "message.timestamp.type"
	keyCleanupPolicy      = "cleanup.policy"
	keyWriteCaching       = "write.caching"
	keyFlushMessages      = "flush.messages"
	keyFlushMs            = "flush.ms"
	keyPreallocate        = "preallocate"
	keyFileDeleteDelayMs  = "file.delete.delay.ms"
	keyDeleteRetentionMs  = "delete.retention.ms"
	keyMinCleanableRatio  = "min.cleanable.dirty.ratio"
	keyMinCompactionLagMs = "min.compaction.lag.ms"
	keyMaxCompactionLagMs = "max.compaction.lag.ms"
)

// Timestamp types (message.timestamp.type values).
const (
	TimestampCreateTime    = "CreateTime"
	TimestampLogAppendTime = "LogAppendTime"
)

// DefaultLogConfig returns Kafka's defaults (plus Strata's durable-by-default).
func DefaultLogConfig() LogConfig {
	return LogConfig{
		SegmentBytes:         1 << 30,
		SegmentMs:            7 * 24 * 3600 * 1000,
		SegmentIndexBytes:    10 << 20,
		IndexIntervalBytes:   4096,
		RetentionMs:          7 * 24 * 3600 * 1000,
		RetentionBytes:       -1,
		MaxMessageBytes:      1048588,
		MessageTimestampType: TimestampCreateTime,
		CleanupPolicy:        "delete",
		WriteCaching:         false,
		FlushMessages:        math.MaxInt64,
		FlushMs:              math.MaxInt64,
		Preallocate:          true,
		FileDeleteDelayMs:    60000,

		DeleteRetentionMs:      24 * 3600 * 1000,
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs:     0,
		MaxCompactionLagMs:     math.MaxInt64,
	}
}

// configKey describes one topic-level key: how to parse it into a LogConfig
// and how to format it back.
type configKey struct {
	set func(c *LogConfig, v string) error
	get func(c *LogConfig) string
}

func intKey(min, max int64, field func(c *LogConfig) *int64) configKey {
	return configKey{
		set: func(c *LogConfig, v string) error {
			n, err := parseRange(v, min, max)
			if err != nil {
				return err
			}
			*field(c) = n
			return nil
		},
		get: func(c *LogConfig) string { return strconv.FormatInt(*field(c), 10) },
	}
}

func int32Key(min, max int64, field func(c *LogConfig) *int32) configKey {
	return configKey{
		set: func(c *LogConfig, v string) error {
			n, err := parseRange(v, min, max)
			if err != nil {
				return err
			}
			*field(c) = int32(n)
			return nil
		},
		get: func(c *LogConfig) string { return strconv.FormatInt(int64(*field(c)), 10) },
	}
}

func boolKey(field func(c *LogConfig) *bool) configKey {
	return configKey{
		set: func(c *LogConfig, v string) error {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "true":
				*field(c) = true
			case "false":
				*field(c) = false
			default:
				return fmt.Errorf("%q is not a boolean", v)
			}
			return nil
		},
		get: func(c *LogConfig) string { return strconv.FormatBool(*field(c)) },
	}
}

func floatKey(min, max float64, field func(c *LogConfig) *float64) configKey {
	return configKey{
		set: func(c *LogConfig, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || math.IsNaN(f) {
				return fmt.Errorf("%q is not a number", v)
			}
			if f < min || f > max {
				return fmt.Errorf("value %v out of range [%v, %v]", f, min, max)
			}
			*field(c) = f
			return nil
		},
		get: func(c *LogConfig) string { return strconv.FormatFloat(*field(c), 'g', -1, 64) },
	}
}

func parseRange(v string, min, max int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", v)
	}
	if n < min || n > max {
		return 0, fmt.Errorf("value %d out of range [%d, %d]", n, min, max)
	}
	return n, nil
}

// configKeys maps Kafka topic key names to their parsers. Ranges follow
// Kafka's validators (segment.bytes >= 14, segment.index.bytes >= 4, ...);
// the int-typed keys are capped at MaxInt32 as in Kafka.
var configKeys = map[string]configKey{
	keySegmentBytes:       intKey(14, math.MaxInt32, func(c *LogConfig) *int64 { return &c.SegmentBytes }),
	keySegmentMs:          intKey(1, math.MaxInt64, func(c *LogConfig) *int64 { return &c.SegmentMs }),
	keySegmentIndexBytes:  int32Key(4, math.MaxInt32, func(c *LogConfig) *int32 { return &c.SegmentIndexBytes }),
	keyIndexIntervalBytes: int32Key(0, math.MaxInt32, func(c *LogConfig) *int32 { return &c.IndexIntervalBytes }),
	keyRetentionMs:        intKey(-1, math.MaxInt64, func(c *LogConfig) *int64 { return &c.RetentionMs }),
	keyRetentionBytes:     intKey(math.MinInt64, math.MaxInt64, func(c *LogConfig) *int64 { return &c.RetentionBytes }),
	keyMaxMessageBytes:    int32Key(0, math.MaxInt32, func(c *LogConfig) *int32 { return &c.MaxMessageBytes }),
	keyFlushMessages:      intKey(1, math.MaxInt64, func(c *LogConfig) *int64 { return &c.FlushMessages }),
	keyFlushMs:            intKey(0, math.MaxInt64, func(c *LogConfig) *int64 { return &c.FlushMs }),
	keyFileDeleteDelayMs:  intKey(0, math.MaxInt64, func(c *LogConfig) *int64 { return &c.FileDeleteDelayMs }),
	keyDeleteRetentionMs:  intKey(0, math.MaxInt64, func(c *LogConfig) *int64 { return &c.DeleteRetentionMs }),
	keyMinCleanableRatio:  floatKey(0, 1, func(c *LogConfig) *float64 { return &c.MinCleanableDirtyRatio }),
	keyMinCompactionLagMs: intKey(0, math.MaxInt64, func(c *LogConfig) *int64 { return &c.MinCompactionLagMs }),
	keyMaxCompactionLagMs: intKey(1, math.MaxInt64, func(c *LogConfig) *int64 { return &c.MaxCompactionLagMs }),
	keyWriteCaching:       boolKey(func(c *LogConfig) *bool { return &c.WriteCaching }),
	keyPreallocate:        boolKey(func(c *LogConfig) *bool { return &c.Preallocate }),
	keyTimestampType: {
		set: func(c *LogConfig, v string) error {
			switch v = strings.TrimSpace(v); v {
			case TimestampCreateTime, TimestampLogAppendTime:
				c.MessageTimestampType = v
				return nil
			}
			return fmt.Errorf("%q is not CreateTime or LogAppendTime", v)
		},
		get: func(c *LogConfig) string { return c.MessageTimestampType },
	},
	keyCleanupPolicy: {
		set: func(c *LogConfig, v string) error {
			p, err := parseCleanupPolicy(v)
			if err != nil {
				return err
			}
			c.CleanupPolicy = p
			return nil
		},
		get: func(c *LogConfig) string { return c.CleanupPolicy },
	},
}

// parseCleanupPolicy accepts a comma-separated list of "delete" and
// "compact" (each at most once) and returns it normalized.
func parseCleanupPolicy(v string) (string, error) {
	var del, compact bool
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case "delete":
			if del {
				return "", fmt.Errorf("%q lists delete twice", v)
			}
			del = true
		case "compact":
			if compact {
				return "", fmt.Errorf("%q lists compact twice", v)
			}
			compact = true
		default:
			return "", fmt.Errorf("%q: policies are delete and compact", v)
		}
	}
	switch {
	case del && compact:
		return "compact,delete", nil
	case compact:
		return "compact", nil
	default:
		return "delete", nil
	}
}

var sortedKeys = func() []string {
	keys := make([]string, 0, len(configKeys))
	for k := range configKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}()

// TopicKeys lists the topic-level config names LogConfig understands, sorted.
func TopicKeys() []string { return append([]string(nil), sortedKeys...) }

// Apply returns c with topic-level overrides (Kafka topic key names) applied.
// Unknown keys or bad values: ErrInvalidConfig (wrapped with the key).
// Keys are applied in sorted order, so the first bad key reported is stable.
func (c LogConfig) Apply(overrides map[string]string) (LogConfig, error) {
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ck, ok := configKeys[k]
		if !ok {
			return c, fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, k)
		}
		if err := ck.set(&c, overrides[k]); err != nil {
			return c, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, k, err)
		}
	}
	return c, nil
}

// Value returns the string form of a topic-level key's value in c (for DescribeConfigs).
func (c LogConfig) Value(key string) (string, bool) {
	ck, ok := configKeys[key]
	if !ok {
		return "", false
	}
	return ck.get(&c), true
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
