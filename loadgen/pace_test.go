package loadgen

import (
	"testing"
	"time"
)

// takeAll takes every record due at now.
func takeAll(s *schedule, now time.Duration) []time.Duration {
	var out []time.Duration
	for range 1_000_000 {
		t, ok := s.take(now)
		if !ok {
			break
		}
		out = append(out, t)
	}
	return out
}

func TestScheduleTimesAreExactMultiplesOfTheInterval(t *testing.T) {
	start := 5 * time.Millisecond
	s := newSchedule(0, 1, 1000, start, 0, 0) // 1000/s: every 1 ms
	if s.interval != time.Millisecond {
		t.Fatalf("interval %v, want 1ms", s.interval)
	}
	if got := takeAll(&s, start-time.Nanosecond); len(got) != 0 {
		t.Fatalf("%d records due before the start", len(got))
	}
	// An injected clock stepping unevenly: every record still carries its
	// exact slot, never the time it was taken.
	var all []time.Duration
	for _, now := range []time.Duration{5 * time.Millisecond, 5*time.Millisecond + 300*time.Microsecond, 7*time.Millisecond + 999*time.Microsecond, 12 * time.Millisecond} {
		all = append(all, takeAll(&s, now)...)
	}
	if len(all) != 8 { // slots 5,6,...,12 ms
		t.Fatalf("%d records taken by 12ms, want 8", len(all))
	}
	for i, at := range all {
		if want := start + time.Duration(i)*time.Millisecond; at != want {
			t.Fatalf("record %d scheduled at %v, want %v", i, at, want)
		}
	}
	if w, ok := s.wait(12 * time.Millisecond); !ok || w != time.Millisecond {
		t.Fatalf("wait = %v %v, want 1ms", w, ok)
	}
}

// TestStalledSenderAccumulatesLatency is coordinated omission: a sender
// that stalls for 40 ms at 1000 records/s still owes the 40 records it
// should have sent, and each is measured from its own slot, so the stall
// shows as up to 40 ms of latency rather than disappearing.
func TestStalledSenderAccumulatesLatency(t *testing.T) {
	s := newSchedule(0, 1, 1000, 0, 0, 0)
	rec := newRecorder()
	// On time for the first 10 ms: each record acked 100 µs after its slot.
	for now := time.Duration(0); now < 10*time.Millisecond; now += time.Millisecond {
		for _, at := range takeAll(&s, now) {
			rec.record(now + 100*time.Microsecond - at)
		}
	}
	// Stall until 50 ms, then catch up: everything owed is sent at once and
	// acked 100 µs later.
	now := 50 * time.Millisecond
	owed := takeAll(&s, now)
	if len(owed) != 41 { // slots 10..50 ms
		t.Fatalf("%d records owed after the stall, want 41", len(owed))
	}
	ts := make([]int64, len(owed))
	for i, at := range owed {
		ts[i] = int64(at)
	}
	rec.recordSince(now+100*time.Microsecond, ts, 0)

	h := newHist()
	rec.collect(h)
	if h.TotalCount() != 51 {
		t.Fatalf("%d latencies, want 51", h.TotalCount())
	}
	if max := h.Max(); max < 40_000 || max > 40_200 { // µs
		t.Fatalf("max latency %d µs, want about 40.1 ms (the stall)", max)
	}
	// Half the records waited through part of the stall.
	if p50 := h.ValueAtQuantile(50); p50 < 9_000 {
		t.Fatalf("p50 %d µs: the stall is hidden", p50)
	}
	if min := h.Min(); min < 99 || min > 101 {
		t.Fatalf("min latency %d µs, want 100", min)
	}
}

func TestScheduleSplitsRateAndCountAcrossProducers(t *testing.T) {
	const n = 3
	var all []time.Duration
	total := int64(0)
	for k := range n {
		s := newSchedule(k, n, 3000, 0, 0, 10) // 3000/s over 3 = every 1 ms each
		got := takeAll(&s, time.Second)
		want := []int{4, 3, 3}[k]
		if len(got) != want {
			t.Fatalf("producer %d took %d records, want %d", k, len(got), want)
		}
		total += s.taken()
		if !s.done(time.Second) {
			t.Fatalf("producer %d not done after its share", k)
		}
		all = append(all, got...)
	}
	if total != 10 {
		t.Fatalf("%d records over all producers, want 10", total)
	}
	// Producer k is offset by k/3 ms: together they tick every 1/3 ms.
	want := []time.Duration{0, 1e6, 2e6, 3e6, 333333, 1333333, 2333333, 666666, 1666666, 2666666}
	for i := range want {
		if all[i] != want[i] {
			t.Fatalf("schedules %v, want %v", all, want)
		}
	}
}

func TestScheduleDurationBound(t *testing.T) {
	s := newSchedule(0, 1, 1000, time.Second, 10*time.Millisecond, 0)
	got := takeAll(&s, time.Hour)
	if len(got) != 10 || got[9] != time.Second+9*time.Millisecond {
		t.Fatalf("took %d records (last %v), want 10 ending at 1.009s", len(got), got[len(got)-1])
	}
	if _, ok := s.wait(time.Hour); ok {
		t.Fatal("schedule not done after its duration")
	}
}

func TestClosedLoopScheduleUsesTheTimeAsked(t *testing.T) {
	s := newSchedule(0, 1, 0, 0, time.Second, 5)
	if _, ok := s.take(-1); ok {
		t.Fatal("closed loop sent before its start")
	}
	if w, ok := s.wait(-5); !ok || w != 5 {
		t.Fatalf("wait before the start = %v %v, want 5ns", w, ok)
	}
	for i, now := range []time.Duration{3, 7, 7, 100, 200} {
		at, ok := s.take(now)
		if !ok || at != now {
			t.Fatalf("record %d: take(%v) = %v %v", i, now, at, ok)
		}
	}
	if _, ok := s.take(300); ok {
		t.Fatal("closed loop went past its record limit")
	}
	d := newSchedule(0, 1, 0, 0, time.Second, 0)
	if _, ok := d.take(time.Second); ok {
		t.Fatal("closed loop went past its duration")
	}
}

func TestOverdueScheduleIsAbandoned(t *testing.T) {
	s := newSchedule(0, 1, 1000, 0, 100*time.Millisecond, 0) // 100 records, slots 0..99 ms
	if n, ok := s.total(); !ok || n != 100 {
		t.Fatalf("total %d %v, want 100", n, ok)
	}
	takeAll(&s, 10*time.Millisecond) // 11 sent
	if s.overdue(99*time.Millisecond+time.Second, time.Second) {
		t.Fatal("overdue exactly at the grace limit")
	}
	if !s.overdue(100*time.Millisecond+time.Second, time.Second) {
		t.Fatal("not overdue past the grace limit")
	}
	lead := s
	if owed := lead.abandon(50 * time.Millisecond); owed != 50 {
		t.Fatalf("abandoned %d records scheduled from 50 ms, want 50 (slots 50..99)", owed)
	}
	if owed := s.abandon(0); owed != 89 {
		t.Fatalf("abandoned %d records, want 89", owed)
	}
	if _, ok := s.take(time.Hour); ok || !s.done(time.Hour) {
		t.Fatal("abandoned schedule still sends")
	}
	c := newSchedule(0, 1, 0, 0, time.Second, 0)
	if c.overdue(time.Hour, 0) {
		t.Fatal("a closed loop cannot be overdue")
	}
}
