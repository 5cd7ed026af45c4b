package share

import (
	"testing"
	"time"
)

func TestParseReset(t *testing.T) {
	for _, tc := range []struct {
		in   string
		kind ResetKind
		d    time.Duration
		ts   int64 // Timestamp(1_000_000_000)
		bad  bool
	}{
		{in: "latest", kind: ResetLatest, ts: -1},
		{in: "LATEST", kind: ResetLatest, ts: -1},
		{in: "earliest", kind: ResetEarliest, ts: -2},
		{in: "by_duration:PT1H", kind: ResetByDuration, d: time.Hour, ts: 1_000_000_000 - 3_600_000},
		{in: "by_duration:P1DT2H30M", kind: ResetByDuration, d: 26*time.Hour + 30*time.Minute, ts: 1_000_000_000 - 95_400_000},
		{in: "by_duration:PT0.5S", kind: ResetByDuration, d: 500 * time.Millisecond, ts: 1_000_000_000 - 500},
		{in: "by_duration:pt10m", kind: ResetByDuration, d: 10 * time.Minute, ts: 1_000_000_000 - 600_000},
		{in: "by_duration:PT0S", kind: ResetByDuration, ts: 1_000_000_000},
		{in: "by_duration:-PT1H", bad: true},
		{in: "by_duration:PT-1H", bad: true},
		{in: "by_duration:PT", bad: true},
		{in: "by_duration:P", bad: true},
		{in: "by_duration:1H", bad: true},
		{in: "by_duration:PT1M2H", bad: true}, // units out of order
		{in: "by_duration:P1H", bad: true},    // hours need T
		{in: "by_duration:P1.5D", bad: true},
		{in: "by_duration:PT99999999999999999999H", bad: true},
		{in: "by_duration:", bad: true},
		{in: "none", bad: true},
		{in: "", bad: true},
	} {
		r, err := ParseReset(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q parsed as %+v", tc.in, r)
			}
			continue
		}
		if err != nil || r.Kind != tc.kind || r.Duration != tc.d {
			t.Errorf("%q: %+v %v, want kind %d duration %v", tc.in, r, err, tc.kind, tc.d)
			continue
		}
		if ts := r.Timestamp(1_000_000_000); ts != tc.ts {
			t.Errorf("%q: timestamp %d, want %d", tc.in, ts, tc.ts)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.LockDurationMs != 30_000 || c.DeliveryCountLimit != 5 || c.MaxRecordLocks != 2000 {
		t.Fatalf("defaults %+v", c)
	}
	if c := (Config{MaxRecordLocks: MaxWindow * 2}).withDefaults(); c.MaxRecordLocks != MaxWindow {
		t.Fatalf("MaxRecordLocks not capped: %d", c.MaxRecordLocks)
	}
}
