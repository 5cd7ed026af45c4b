package replica

// Unit tests of the follower side's decisions (core_follower.go).

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestTruncationOffset: KIP-101/279 truncation from the leader's
// OffsetForLeaderEpoch answer.
func TestTruncationOffset(t *testing.T) {
	cases := []struct {
		name        string
		end, hw     int64
		asked       int32
		leaderEpoch int32
		leaderEnd   int64
		oursEnd     int64
		want        int64
	}{
		{"same epoch, leader ends earlier: cut the divergent tail", 100, 50, 5, 5, 80, -1, 80},
		{"same epoch, leader ends later: keep everything", 100, 50, 5, 5, 120, -1, 100},
		{"same epoch, same end", 100, 50, 5, 5, 100, -1, 100},
		{"leader's epoch older, our end of it earlier", 100, 50, 5, 3, 90, 70, 70},
		{"leader's epoch older, its end earlier", 100, 50, 5, 3, 60, 70, 60},
		{"leader's epoch older, unknown to us", 100, 50, 5, 3, 90, -1, 90},
		{"leader knows no epoch: keep what the HW covers", 100, 50, 5, -1, -1, -1, 50},
		{"leader's end unknown: keep what the HW covers", 100, 50, 5, 5, -1, -1, 50},
		{"never past our end, even by the HW", 40, 50, 5, -1, -1, -1, 40},
	}
	for _, tc := range cases {
		if got := truncationOffset(tc.end, tc.hw, tc.asked, tc.leaderEpoch, tc.leaderEnd, tc.oursEnd); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestOnFetchError: what an error in a fetch response does to the
// partition.
func TestOnFetchError(t *testing.T) {
	cases := []struct {
		name        string
		code        int16
		end, lstart int64
		want        fetchStep
	}{
		{"out of range below the leader's start: restart there", kerr.OffsetOutOfRange.Code, 10, 50, fetchStep{restartAt: 50}},
		{"out of range past the leader's end: truncate again", kerr.OffsetOutOfRange.Code, 100, 50, fetchStep{restartAt: -1, retruncate: true}},
		{"out of range, leader's start unknown", kerr.OffsetOutOfRange.Code, 10, -1, fetchStep{restartAt: -1, retruncate: true}},
		{"out of range at the leader's start", kerr.OffsetOutOfRange.Code, 50, 50, fetchStep{restartAt: -1, retruncate: true}},
		{"moved to tiered storage: restart at the leader's local start", kerr.OffsetMovedToTieredStorage.Code, 0, 50, fetchStep{restartAt: 50}},
		{"moved to tiered storage, leader's start unknown", kerr.OffsetMovedToTieredStorage.Code, 0, -1, fetchStep{restartAt: -1, retruncate: true}},
		{"fenced epoch", kerr.FencedLeaderEpoch.Code, 10, 0, fetchStep{restartAt: -1, retruncate: true, backoff: true}},
		{"unknown epoch", kerr.UnknownLeaderEpoch.Code, 10, 0, fetchStep{restartAt: -1, retruncate: true, backoff: true}},
		{"not leader", kerr.NotLeaderForPartition.Code, 10, 0, fetchStep{restartAt: -1, retruncate: true, backoff: true}},
		{"storage error: back off, same offset", kerr.KafkaStorageError.Code, 10, 0, fetchStep{restartAt: -1, backoff: true}},
		{"unknown partition: back off", kerr.UnknownTopicOrPartition.Code, 10, 0, fetchStep{restartAt: -1, backoff: true}},
	}
	for _, tc := range cases {
		if got := onFetchError(tc.code, tc.end, tc.lstart); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestOnAppendError(t *testing.T) {
	cases := []struct {
		err  error
		want appendVerdict
	}{
		{nil, appendOK},
		{fmt.Errorf("append: %w", engine.ErrOffsetOutOfRange), appendResync},
		{engine.ErrCorruptMessage, appendBadBatches},
		{fmt.Errorf("batch 3: %w", engine.ErrInvalidRecord), appendBadBatches},
		{fmt.Errorf("new segment: %w", engine.ErrResource), appendNoResource},
		{engine.ErrClosed, appendFailed},
		{errors.New("disk offline"), appendFailed},
	}
	for _, tc := range cases {
		if got := onAppendError(tc.err); got != tc.want {
			t.Errorf("onAppendError(%v): %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestFollowerSmallDecisions(t *testing.T) {
	straddle := []struct {
		base, last, start, end int64
		want                   bool
	}{
		{95, 104, 100, 100, true},   // empty log at 100, batch 95..104
		{95, 100, 100, 100, true},   // ends exactly at the log's end
		{95, 99, 100, 100, false},   // ends below: nothing to take
		{100, 104, 100, 100, false}, // starts at the end: an ordinary append
		{95, 104, 90, 100, false},   // the log is not empty
	}
	for _, tc := range straddle {
		if got := straddles(tc.base, tc.last, tc.start, tc.end); got != tc.want {
			t.Errorf("straddles(%d..%d, log %d..%d) = %v", tc.base, tc.last, tc.start, tc.end, got)
		}
	}
	starts := []struct {
		leader, hw, ours, want int64
		ok                     bool
	}{
		{50, 80, 10, 50, true}, // follow the leader's start
		{50, 30, 10, 30, true}, // only as far as our HW
		{50, 80, 50, 50, false},
		{40, 80, 50, 40, false}, // never backwards
	}
	for _, tc := range starts {
		if got, ok := followLogStart(tc.leader, tc.hw, tc.ours); got != tc.want || ok != tc.ok {
			t.Errorf("followLogStart(%d, %d, %d) = %d %v, want %d %v", tc.leader, tc.hw, tc.ours, got, ok, tc.want, tc.ok)
		}
	}
	if !refetched(true, 100, 100) || refetched(true, 99, 100) || refetched(false, 200, 100) {
		t.Error("refetched: damaged logs clear at the leader's HW, healthy ones never")
	}
	base := 100 * time.Millisecond
	var b time.Duration
	var got []time.Duration
	for range 6 {
		b = nextBackoff(b, base)
		got = append(got, b)
	}
	want := []time.Duration{base, 2 * base, 4 * base, 8 * base, 8 * base, 8 * base}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backoffs %v, want %v", got, want)
		}
	}
}

// TestRetryAfter: errors that may only mean the leader has not applied
// the metadata yet are retried after 10 ms, doubling to 50 ms (never past
// replica.fetch.backoff.ms); every other error waits the full backoff.
func TestRetryAfter(t *testing.T) {
	behind := []int16{kerr.UnknownTopicID.Code, kerr.UnknownTopicOrPartition.Code, kerr.NotLeaderForPartition.Code, kerr.UnknownLeaderEpoch.Code}
	for _, code := range behind {
		if !leaderBehind(code) {
			t.Errorf("leaderBehind(%v) = false", kerr.ErrorForCode(code))
		}
	}
	for _, code := range []int16{kerr.FencedLeaderEpoch.Code, kerr.KafkaStorageError.Code, kerr.OffsetOutOfRange.Code, kerr.CorruptMessage.Code, 0} {
		if leaderBehind(code) {
			t.Errorf("leaderBehind(%d) = true", code)
		}
	}
	base := time.Second
	var b time.Duration
	var got []time.Duration
	for range 6 {
		b = retryAfter(b, true, base)
		got = append(got, b)
	}
	ms := time.Millisecond
	want := []time.Duration{10 * ms, 20 * ms, 40 * ms, 50 * ms, 50 * ms, 50 * ms}
	if !slices.Equal(got, want) {
		t.Fatalf("leader-behind retries %v, want %v", got, want)
	}
	if d := retryAfter(40*ms, false, base); d != base {
		t.Errorf("another error after leader-behind ones: %v, want %v", d, base)
	}
	if d := retryAfter(0, false, base); d != base {
		t.Errorf("other error: %v, want %v", d, base)
	}
	if d := retryAfter(0, true, 5*ms); d != 5*ms {
		t.Errorf("leader behind with a 5 ms backoff: %v, want 5ms", d)
	}
	if d := retryAfter(20*ms, true, 30*ms); d != 30*ms {
		t.Errorf("leader behind with a 30 ms backoff, after 20 ms: %v, want 30ms", d)
	}
}

func TestPlanFetch(t *testing.T) {
	now := time.Unix(1_000, 0)
	cases := []struct {
		name         string
		truncating   bool
		backoffUntil time.Time
		end, durable int64
		want         fetchPlan
	}{
		{"durable to its end: fetch", false, time.Time{}, 10, 10, fetchPlan{send: true}},
		{"backoff passed: fetch", false, now, 10, 10, fetchPlan{send: true}},
		{"flush pending: wait for it", false, time.Time{}, 10, 8, fetchPlan{flushing: true}},
		{"backing off", false, now.Add(300 * time.Millisecond), 10, 10, fetchPlan{wait: 300 * time.Millisecond}},
		{"truncating: the truncation phase has it", true, time.Time{}, 10, 10, fetchPlan{}},
		{"truncating, backing off", true, now.Add(time.Second), 10, 10, fetchPlan{wait: time.Second}},
	}
	for _, tc := range cases {
		if got := planFetch(tc.truncating, tc.backoffUntil, now, tc.end, tc.durable); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
