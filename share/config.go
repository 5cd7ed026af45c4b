package share

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults of Kafka's share-group configurations (Kafka 4.2).
const (
	// DefaultLockDurationMs is group.share.record.lock.duration.ms.
	DefaultLockDurationMs = 30_000
	// DefaultDeliveryCountLimit is group.share.delivery.count.limit.
	DefaultDeliveryCountLimit = 5
	// DefaultMaxRecordLocks is group.share.partition.max.record.locks.
	DefaultMaxRecordLocks = 2000
	// MaxWindow caps the in-flight window a restored state may span,
	// whatever the configuration, so a corrupt state cannot make Restore
	// allocate without bound.
	MaxWindow = 1 << 20
)

// Config is a share-partition's configuration.
type Config struct {
	// LockDurationMs is group.share.record.lock.duration.ms: how long a
	// record stays ACQUIRED before it is released (or archived at the
	// delivery count limit). 0: DefaultLockDurationMs.
	LockDurationMs int64
	// DeliveryCountLimit is group.share.delivery.count.limit: a record
	// delivered this many times is archived instead of being made
	// available again. 0: DefaultDeliveryCountLimit.
	DeliveryCountLimit int16
	// MaxRecordLocks is group.share.partition.max.record.locks: the most
	// offsets the in-flight window [SPSO, SPEO] may span. New records are
	// not acquired while it is full; redeliveries inside it still are.
	// 0: DefaultMaxRecordLocks.
	MaxRecordLocks int
	// DeadLetter sends records that reach the delivery count limit or
	// are rejected to ARCHIVING instead of ARCHIVED: the core reports
	// them in Effects.DeadLetters and they stay in the window (the SPSO
	// cannot pass them) until DeadLettered says they were written to the
	// dead-letter topic (KIP-1191's errors.deadletterqueue.group.enable).
	DeadLetter bool
}

func (c Config) withDefaults() Config {
	if c.LockDurationMs <= 0 {
		c.LockDurationMs = DefaultLockDurationMs
	}
	if c.DeliveryCountLimit <= 0 {
		c.DeliveryCountLimit = DefaultDeliveryCountLimit
	}
	if c.MaxRecordLocks <= 0 {
		c.MaxRecordLocks = DefaultMaxRecordLocks
	}
	c.MaxRecordLocks = min(c.MaxRecordLocks, MaxWindow)
	return c
}

// ResetKind is the kind of share.auto.offset.reset.
type ResetKind int8

const (
	ResetLatest     ResetKind = iota // "latest", Kafka's default
	ResetEarliest                    // "earliest"
	ResetByDuration                  // "by_duration:<ISO-8601 duration>"
)

// Reset is a parsed share.auto.offset.reset: where a share-partition with
// no persisted state starts (its initial SPSO).
type Reset struct {
	Kind     ResetKind
	Duration time.Duration // ResetByDuration only
}

// ParseReset parses share.auto.offset.reset: "earliest", "latest" or
// "by_duration:<duration>" with an ISO-8601 duration as Java's
// Duration.parse reads it (PnDTnHnMn.nS, e.g. "by_duration:PT1H30M"); a
// negative duration is refused, as in Kafka.
func ParseReset(s string) (Reset, error) {
	switch {
	case strings.EqualFold(s, "latest"):
		return Reset{Kind: ResetLatest}, nil
	case strings.EqualFold(s, "earliest"):
		return Reset{Kind: ResetEarliest}, nil
	}
	const prefix = "by_duration:"
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return Reset{}, fmt.Errorf("share.auto.offset.reset %q: want earliest, latest or by_duration:<ISO-8601 duration>", s)
	}
	d, err := parseISODuration(s[len(prefix):])
	if err != nil {
		return Reset{}, fmt.Errorf("share.auto.offset.reset %q: %w", s, err)
	}
	if d < 0 {
		return Reset{}, fmt.Errorf("share.auto.offset.reset %q: the duration is negative", s)
	}
	return Reset{Kind: ResetByDuration, Duration: d}, nil
}

// Timestamp is the ListOffsets timestamp whose offset is the initial SPSO
// at nowMs: -2 (earliest: the log start offset), -1 (latest: the log end
// offset, the last stable offset for read_committed) or nowMs minus the
// duration (the first offset with a timestamp at or after it; Kafka takes
// the latest offset when there is none).
func (r Reset) Timestamp(nowMs int64) int64 {
	switch r.Kind {
	case ResetEarliest:
		return -2
	case ResetByDuration:
		return nowMs - r.Duration.Milliseconds()
	}
	return -1
}

func (r Reset) String() string {
	switch r.Kind {
	case ResetEarliest:
		return "earliest"
	case ResetByDuration:
		return "by_duration:" + r.Duration.String()
	}
	return "latest"
}

// parseISODuration reads [-]PnDTnHnMn.nS (java.time.Duration.parse: days,
// hours, minutes, seconds with an optional fraction; each part signed).
func parseISODuration(s string) (time.Duration, error) {
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if len(s) < 2 || (s[0] != 'P' && s[0] != 'p') {
		return 0, errors.New("not an ISO-8601 duration (PnDTnHnMn.nS)")
	}
	s = s[1:]
	var total time.Duration
	inTime, any := false, false
	units := "D"
	for s != "" {
		if s[0] == 'T' || s[0] == 't' {
			if inTime {
				return 0, errors.New("duration has two T")
			}
			inTime, units = true, "HMS"
			s = s[1:]
			if s == "" {
				return 0, errors.New("duration ends after T")
			}
			continue
		}
		i := 0
		for i < len(s) && (s[i] == '-' || s[i] == '+' || s[i] == '.' || s[i] == ',' || (s[i] >= '0' && s[i] <= '9')) {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, errors.New("duration part without a number or a unit")
		}
		num, unit := strings.Replace(s[:i], ",", ".", 1), s[i]|0x20
		s = s[i+1:]
		j := strings.IndexByte(strings.ToLower(units), unit)
		if j < 0 {
			return 0, fmt.Errorf("unit %q out of place", unit)
		}
		units = units[j+1:]
		var scale time.Duration
		switch unit {
		case 'd':
			scale = 24 * time.Hour
		case 'h':
			scale = time.Hour
		case 'm':
			scale = time.Minute
		case 's':
			scale = time.Second
		}
		if unit != 's' && strings.Contains(num, ".") {
			return 0, errors.New("only seconds may have a fraction")
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, fmt.Errorf("duration part %q: %w", num, err)
		}
		v := f * float64(scale)
		if v > float64(1<<62) || v < -float64(1<<62) {
			return 0, errors.New("duration out of range")
		}
		total += time.Duration(v)
		if total > 1<<62 || total < -(1<<62) {
			return 0, errors.New("duration out of range")
		}
		any = true
	}
	if !any {
		return 0, errors.New("empty duration")
	}
	if neg {
		total = -total
	}
	return total, nil
}
