package loadgen

import (
	"math"
	"time"
)

// schedule is one producer's send schedule. Open loop (interval > 0):
// record i is due at exactly start + i×interval, whether or not the sender
// keeps up, and its latency is measured from that scheduled time, so a
// stalled sender shows up as latency instead of silently sending less
// (coordinated omission). Closed loop (interval == 0): from start on, a
// record is due whenever the sender asks and its scheduled time is the time
// it asked.
//
// Times are offsets from the run's base time (monotonic), so the schedule
// is pure arithmetic and tests drive it with any clock.
type schedule struct {
	start    time.Duration // offset of record 0
	interval time.Duration // 0 = closed loop
	end      time.Duration // records scheduled at or after end are not sent; 0 = no end
	limit    int64         // records at most; math.MaxInt64 = no limit
	next     int64         // index of the next record
}

// newSchedule splits a run over producers: producer k of n sends at
// rate/n, offset by k×interval/n so producers do not fire in lockstep, and
// sends its share of limit (the first limit%n producers one more).
func newSchedule(k, n int, rate float64, start, duration time.Duration, limit int64) schedule {
	s := schedule{start: start, limit: math.MaxInt64}
	if rate > 0 {
		s.interval = max(time.Duration(math.Round(float64(n)*1e9/rate)), 1)
		s.start += time.Duration(int64(s.interval) * int64(k) / int64(n))
	}
	if duration > 0 {
		s.end = start + duration
	}
	if limit > 0 {
		s.limit = limit / int64(n)
		if int64(k) < limit%int64(n) {
			s.limit++
		}
	}
	return s
}

// at is record i's scheduled time.
func (s *schedule) at(i int64) time.Duration {
	return s.start + time.Duration(i)*s.interval
}

// done reports whether every record of the schedule has been taken at now.
func (s *schedule) done(now time.Duration) bool {
	if s.next >= s.limit {
		return true
	}
	if s.end == 0 {
		return false
	}
	if s.interval == 0 {
		return now >= s.end
	}
	return s.at(s.next) >= s.end
}

// take returns the next record's scheduled time if it is due at now.
func (s *schedule) take(now time.Duration) (time.Duration, bool) {
	if s.done(now) {
		return 0, false
	}
	if s.interval == 0 {
		if now < s.start {
			return 0, false
		}
		s.next++
		return now, true
	}
	t := s.at(s.next)
	if t > now {
		return 0, false
	}
	s.next++
	return t, true
}

// wait is how long from now until the next record is due (0 if one is due
// already); ok is false when the schedule is done.
func (s *schedule) wait(now time.Duration) (time.Duration, bool) {
	if s.done(now) {
		return 0, false
	}
	if s.interval == 0 {
		return max(s.start-now, 0), true
	}
	return max(s.at(s.next)-now, 0), true
}

// taken is how many records have been taken.
func (s *schedule) taken() int64 { return s.next }

// total is how many records the schedule holds; ok is false when it is
// unbounded (closed loop bounded by time alone).
func (s *schedule) total() (int64, bool) {
	n := s.limit
	if s.end > 0 && s.interval > 0 {
		span := s.end - s.start
		byTime := int64(0)
		if span > 0 {
			byTime = (int64(span) + int64(s.interval) - 1) / int64(s.interval)
		}
		n = min(n, byTime)
	}
	return n, n != math.MaxInt64
}

// overdue reports whether an open-loop sender has fallen so far behind
// that at now it is still sending records scheduled more than grace before
// the schedule's end: the backlog is abandoned rather than letting an
// overloaded run last without bound.
func (s *schedule) overdue(now, grace time.Duration) bool {
	if s.interval == 0 {
		return false
	}
	n, ok := s.total()
	if !ok || s.next >= n {
		return false
	}
	return now > s.at(n-1)+grace
}

// abandon ends the schedule and returns how many of the records it still
// owed are scheduled at or after from (the measured ones).
func (s *schedule) abandon(from time.Duration) int64 {
	n, ok := s.total()
	owed := int64(0)
	first := s.next
	if s.interval > 0 && from > s.start {
		first = max(first, (int64(from-s.start)+int64(s.interval)-1)/int64(s.interval))
	}
	if ok && n > first {
		owed = n - first
	}
	s.next = math.MaxInt64
	s.limit = 0
	return owed
}
