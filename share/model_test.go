package share

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// ref is a naive reference model of a share-partition: a map of offsets,
// every rule written out again without the window slice, the change
// tracking or the persisted form.
type ref struct {
	cfg        Config
	start, end int64
	m          map[int64]*refRec
}

type refRec struct {
	state  RecordState
	count  int16
	member string
	lock   int64
	reason Reason
}

func (r *ref) rec(o int64) *refRec {
	if r.m[o] == nil {
		r.m[o] = &refRec{}
	}
	return r.m[o]
}

func (r *ref) finish(x *refRec, why Reason) {
	if r.cfg.DeadLetter {
		x.state, x.reason = Archiving, why
	} else {
		x.state = Archived
	}
}

func (r *ref) release(x *refRec) {
	x.member, x.lock = "", 0
	if x.count >= r.cfg.DeliveryCountLimit {
		r.finish(x, ReasonDeliveryLimit)
	} else {
		x.state = Available
	}
}

func (r *ref) expire(now int64) {
	for o := r.start; o < r.end; o++ {
		if x := r.rec(o); x.state == Acquired && x.lock <= now {
			r.release(x)
		}
	}
}

func (r *ref) advance() {
	for r.start < r.end && (r.rec(r.start).state == Acknowledged || r.rec(r.start).state == Archived) {
		delete(r.m, r.start)
		r.start++
	}
}

func (r *ref) acquire(now int64, member string, n int, logEnd int64) []AcquiredRecords {
	r.expire(now)
	r.advance()
	var out []AcquiredRecords
	take := func(o int64) {
		x := r.rec(o)
		x.state, x.member, x.lock = Acquired, member, now+r.cfg.LockDurationMs
		x.count++
		n--
		if k := len(out); k > 0 && out[k-1].Last+1 == o && out[k-1].Count == x.count {
			out[k-1].Last = o
		} else {
			out = append(out, AcquiredRecords{o, o, x.count})
		}
	}
	for o := r.start; o < r.end && n > 0; o++ {
		if r.rec(o).state == Available {
			take(o)
		}
	}
	for n > 0 && r.end < logEnd && r.end-r.start < int64(r.cfg.MaxRecordLocks) {
		r.end++
		take(r.end - 1)
	}
	return out
}

// valid reports whether an acknowledgement would be accepted.
func (r *ref) valid(now int64, member string, b []AckBatch) bool {
	seen := map[int64]bool{}
	for _, a := range b {
		if a.First < r.start || a.Last >= r.end || a.Last < a.First {
			return false
		}
		for o := a.First; o <= a.Last; o++ {
			x := r.rec(o)
			if seen[o] || x.state != Acquired || x.member != member || x.lock <= now {
				return false
			}
			seen[o] = true
		}
	}
	return true
}

func (r *ref) ack(now int64, b []AckBatch) {
	for _, a := range b {
		for o := a.First; o <= a.Last; o++ {
			t := a.Types[0]
			if len(a.Types) > 1 {
				t = a.Types[o-a.First]
			}
			x := r.rec(o)
			switch t {
			case AckAccept:
				x.state, x.member, x.lock = Acknowledged, "", 0
			case AckRelease:
				r.release(x)
			case AckReject:
				x.member, x.lock = "", 0
				r.finish(x, ReasonRejected)
			case AckGap:
				x.state, x.member, x.lock = Archived, "", 0
			case AckRenew:
				x.lock = now + r.cfg.LockDurationMs
			}
		}
	}
	r.advance()
}

// restart is what a leader that restores the persisted state knows.
func (r *ref) restart() {
	for o := r.start; o < r.end; o++ {
		if x := r.rec(o); x.state == Acquired {
			x.state, x.member, x.lock = Available, "", 0
			x.count--
		}
	}
	for r.end > r.start && r.rec(r.end-1).state == Available && r.rec(r.end-1).count == 0 {
		delete(r.m, r.end-1)
		r.end--
	}
	r.advance()
}

func (r *ref) same(t *testing.T, p *Partition, step int, what string) {
	t.Helper()
	if p.StartOffset() != r.start || p.EndOffset() != r.end {
		t.Fatalf("step %d (%s): SPSO %d end %d, reference %d %d", step, what, p.StartOffset(), p.EndOffset(), r.start, r.end)
	}
	acquired := 0
	for o := r.start; o < r.end; o++ {
		x := r.rec(o)
		st, n, m := p.Record(o)
		if st != x.state || n != x.count || m != x.member {
			t.Fatalf("step %d (%s): offset %d %v/%d/%q, reference %v/%d/%q", step, what, o, st, n, m, x.state, x.count, x.member)
		}
		if x.state == Acquired {
			acquired++
			if got := p.recs[o-p.start].lockUntil; got != x.lock {
				t.Fatalf("step %d (%s): offset %d lock %d, reference %d", step, what, o, got, x.lock)
			}
		}
		if x.state == Archiving && p.recs[o-p.start].reason != x.reason {
			t.Fatalf("step %d (%s): offset %d reason %v, reference %v", step, what, o, p.recs[o-p.start].reason, x.reason)
		}
	}
	if acquired != p.acquired {
		t.Fatalf("step %d (%s): %d acquired, counter says %d", step, what, acquired, p.acquired)
	}
	if p.InFlight() > p.cfg.MaxRecordLocks {
		t.Fatalf("step %d (%s): %d in flight over the limit %d", step, what, p.InFlight(), p.cfg.MaxRecordLocks)
	}
}

// TestAgainstReferenceAndRebuild drives a share-partition with random
// acquisitions, acknowledgements (some refused), lock expiries, members
// leaving, dead-letter completions, log-start moves and restarts, and
// checks after every step that (1) it agrees with the reference model,
// (2) the state obtained by applying every Write it emitted to the initial
// state equals its Snapshot, and (3) Restore of that state has the same
// Snapshot. A restart replaces it with the restored partition.
func TestAgainstReferenceAndRebuild(t *testing.T) {
	for seed := uint64(0); seed < 60; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			cfg := Config{LockDurationMs: 100, DeliveryCountLimit: int16(2 + rng.IntN(3)), MaxRecordLocks: 5 + rng.IntN(20),
				DeadLetter: rng.IntN(2) == 0}.withDefaults()
			p := New(cfg, 5)
			r := &ref{cfg: cfg, start: 5, end: 5, m: map[int64]*refRec{}}
			persisted := State{StartOffset: 5}
			members := []string{"a", "b", "c"}
			now, logEnd := int64(0), int64(5)
			write := func(e Effects) {
				if e.Write != nil {
					persisted = persisted.Apply(*e.Write)
				}
			}
			refused, accepted := 0, 0
			for step := 0; step < 400; step++ {
				now += int64(rng.IntN(40))
				logEnd += int64(rng.IntN(4))
				var what string
				switch x := rng.IntN(20); {
				case x < 6:
					what = "acquire"
					m := members[rng.IntN(len(members))]
					n := 1 + rng.IntN(8)
					got, e := p.Acquire(now, m, n, logEnd)
					write(e)
					if want := r.acquire(now, m, n, logEnd); !slices.Equal(got, want) {
						t.Fatalf("step %d: acquired %v, reference %v", step, got, want)
					}
				case x < 13:
					what = "acknowledge"
					m := members[rng.IntN(len(members))]
					b := randomAck(rng, r, now, m)
					ok := r.valid(now, m, b)
					r.expire(now)
					r.advance()
					e, err := p.Acknowledge(now, m, b)
					write(e)
					if (err == nil) != ok {
						t.Fatalf("step %d: ack %v by %s: error %v, reference says valid %v", step, b, m, err, ok)
					}
					if ok {
						r.ack(now, b)
						accepted++
					} else {
						refused++
					}
				case x < 15:
					what = "tick"
					write(p.Tick(now))
					r.expire(now)
					r.advance()
				case x == 15:
					what = "member leaves"
					m := members[rng.IntN(len(members))]
					write(p.ReleaseMember(now, m))
					r.expire(now)
					for o := r.start; o < r.end; o++ {
						if y := r.rec(o); y.state == Acquired && y.member == m {
							r.release(y)
						}
					}
					r.advance()
				case x == 16:
					what = "dead-lettered"
					first := r.start + int64(rng.IntN(4))
					last := first + int64(rng.IntN(4))
					_, e := p.DeadLettered(first, last)
					write(e)
					for o := first; o <= last && o < r.end; o++ {
						if y := r.rec(o); y.state == Archiving {
							y.state, y.reason = Archived, ReasonNone
						}
					}
					r.advance()
				case x == 17 && rng.IntN(4) == 0:
					what = "log start"
					ls := r.start + int64(rng.IntN(6))
					write(p.AdvanceLogStart(ls))
					for o := r.start; o < ls; o++ {
						delete(r.m, o)
					}
					if ls > r.start {
						r.start = ls
						r.end = max(r.end, ls)
					}
					r.advance()
				default:
					what = "restart"
					q, err := Restore(cfg, persisted)
					if err != nil {
						t.Fatalf("step %d: restore: %v", step, err)
					}
					p = q
					r.restart()
				}
				r.same(t, p, step, what)
				if snap := p.Snapshot(); !reflect.DeepEqual(persisted, snap) {
					t.Fatalf("step %d (%s): emitted writes add up to\n%+v\nthe snapshot is\n%+v", step, what, persisted, snap)
				}
				q, err := Restore(cfg, persisted)
				if err != nil {
					t.Fatalf("step %d: restore: %v", step, err)
				}
				if !reflect.DeepEqual(q.Snapshot(), p.Snapshot()) || !slices.Equal(q.DeadLetters(), p.DeadLetters()) {
					t.Fatalf("step %d (%s): restored %+v, live %+v", step, what, q.Snapshot(), p.Snapshot())
				}
				if p.acquired == 0 && (q.start != p.start || q.end != p.end || !slices.Equal(q.recs, p.recs)) {
					t.Fatalf("step %d (%s): with nothing acquired the restored window differs: %d..%d %+v, live %d..%d %+v", step, what, q.start, q.end, q.recs, p.start, p.end, p.recs)
				}
			}
			if accepted == 0 || refused == 0 {
				t.Fatalf("the run accepted %d and refused %d acknowledgements: it tests too little", accepted, refused)
			}
		})
	}
}

// randomAck builds an acknowledgement: mostly a run of records member
// holds, sometimes any offsets.
func randomAck(rng *rand.Rand, r *ref, now int64, member string) []AckBatch {
	types := []AckType{AckAccept, AckAccept, AckRelease, AckReject, AckGap, AckRenew}
	if rng.IntN(5) == 0 {
		first := r.start - 1 + int64(rng.IntN(int(r.end-r.start)+3))
		return []AckBatch{{First: first, Last: first + int64(rng.IntN(3)), Types: []AckType{types[rng.IntN(len(types))]}}}
	}
	var held []int64
	for o := r.start; o < r.end; o++ {
		if x := r.rec(o); x.state == Acquired && x.member == member && x.lock > now {
			held = append(held, o)
		}
	}
	if len(held) == 0 {
		return []AckBatch{{First: r.start, Last: r.start, Types: []AckType{AckAccept}}}
	}
	i := rng.IntN(len(held))
	j := i
	for j+1 < len(held) && held[j+1] == held[j]+1 && rng.IntN(3) > 0 {
		j++
	}
	b := AckBatch{First: held[i], Last: held[j]}
	if rng.IntN(2) == 0 {
		b.Types = []AckType{types[rng.IntN(len(types))]}
	} else {
		for range held[j] - held[i] + 1 {
			b.Types = append(b.Types, types[rng.IntN(len(types))])
		}
	}
	return []AckBatch{b}
}
