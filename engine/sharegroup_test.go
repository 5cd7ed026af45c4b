package engine

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"
)

func openShareEngine(t *testing.T, dir string, clk *fakeClock) *Engine {
	t.Helper()
	e := openEngine(t, dir, func(o *Options) { o.Now = clk.Now })
	t.Cleanup(func() { e.Close() })
	return e
}

func mustShareGroup(t *testing.T, e *Engine, id string, opts ShareGroupOptions) *ShareGroup {
	t.Helper()
	g, err := e.ShareGroup(id, opts)
	if err != nil {
		t.Fatalf("ShareGroup: %v", err)
	}
	return g
}

func mustShareJoin(t *testing.T, g *ShareGroup, topics ...string) *ShareMember {
	t.Helper()
	m, err := g.Join(topics...)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	return m
}

func mustAcquire(t *testing.T, m *ShareMember, max int) []ShareRecord {
	t.Helper()
	rs, err := m.Acquire(max)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return rs
}

// offsetsOf lists the records' offsets and delivery counts as "o/n".
func offsetsOf(rs []ShareRecord) string {
	s := ""
	for i, r := range rs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d/%d", r.Offset, r.DeliveryCount)
	}
	return s
}

func wantState(t *testing.T, g *ShareGroup, tp TopicPartition, off int64, st ShareRecordState, n int16) {
	t.Helper()
	got, cnt, _, err := g.RecordState(tp, off)
	if err != nil {
		t.Fatal(err)
	}
	if got != st || cnt != n {
		t.Fatalf("offset %d is %s with delivery count %d, want %s with %d", off, got, cnt, st, n)
	}
}

// TestShareGroupReleaseRedelivers: a released record is delivered again,
// to another member, with its delivery count one higher; an accepted one
// never is.
func TestShareGroupReleaseRedelivers(t *testing.T) {
	clk := newFakeClock(1_000_000)
	e := openShareEngine(t, t.TempDir(), clk)
	tp := mustTopic(t, e, "q", 1, smallConfig())
	produceN(t, tp, 4)
	g := mustShareGroup(t, e, "workers", ShareGroupOptions{Reset: ResetEarliest})
	a, b := mustShareJoin(t, g, "q"), mustShareJoin(t, g, "q")
	ra := mustAcquire(t, a, 3)
	if got := offsetsOf(ra); got != "0/1 1/1 2/1" {
		t.Fatalf("a acquired %s", got)
	}
	if string(ra[1].Value) != "1" || ra[1].Topic != "q" {
		t.Fatalf("record 1 is %q of %q", ra[1].Value, ra[1].Topic)
	}
	if got := offsetsOf(mustAcquire(t, b, 10)); got != "3/1" {
		t.Fatalf("b acquired %s, want only the record a does not hold", got)
	}
	if err := a.Accept(ra[0], ra[2]); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ra[1]); err != nil {
		t.Fatal(err)
	}
	q0 := TopicPartition{"q", 0}
	wantState(t, g, q0, 1, ShareAvailable, 1)
	rb := mustAcquire(t, b, 10)
	if got := offsetsOf(rb); got != "1/2" {
		t.Fatalf("b acquired %s after the release, want 1/2", got)
	}
	if string(rb[0].Value) != "1" {
		t.Fatalf("redelivered %q", rb[0].Value)
	}
	if err := a.Accept(ra[1]); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("a accepted a record b holds: %v", err)
	}
	if err := b.Accept(rb...); err != nil {
		t.Fatal(err)
	}
	if got := mustAcquire(t, a, 10); len(got) != 0 {
		t.Fatalf("acquired %s after everything was accepted but offset 3", offsetsOf(got))
	}
	if o, err := g.Offsets(q0); err != nil || o.Start != 3 || o.End != 4 || o.InFlight != 1 {
		t.Fatalf("Offsets = %+v, %v; want start 3, end 4, 1 in flight", o, err)
	}
}

// TestShareGroupLockExpiry: a record whose acquisition lock expired is
// delivered again and its first holder can no longer acknowledge it; Renew
// keeps a lock.
func TestShareGroupLockExpiry(t *testing.T) {
	clk := newFakeClock(1_000_000)
	e := openShareEngine(t, t.TempDir(), clk)
	tp := mustTopic(t, e, "q", 1, smallConfig())
	produceN(t, tp, 3)
	g := mustShareGroup(t, e, "g", ShareGroupOptions{Reset: ResetEarliest, LockDuration: time.Second})
	a, b := mustShareJoin(t, g, "q"), mustShareJoin(t, g, "q")
	ra := mustAcquire(t, a, 3)
	clk.Advance(999)
	if got := mustAcquire(t, b, 10); len(got) != 0 {
		t.Fatalf("b acquired %s before the locks expired", offsetsOf(got))
	}
	if err := a.Renew(ra[2]); err != nil {
		t.Fatal(err)
	}
	clk.Advance(1)
	rb := mustAcquire(t, b, 10)
	if got := offsetsOf(rb); got != "0/2 1/2" {
		t.Fatalf("b acquired %s when the locks expired, want 0/2 1/2 (2 was renewed)", got)
	}
	if err := a.Accept(ra[0]); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("a accepted a record after its lock expired: %v", err)
	}
	if err := a.Accept(ra[2]); err != nil {
		t.Fatalf("accepting the renewed record: %v", err)
	}
	if err := b.Accept(rb...); err != nil {
		t.Fatal(err)
	}
	if o, _ := g.Offsets(TopicPartition{"q", 0}); o.Start != 3 || o.InFlight != 0 {
		t.Fatalf("Offsets = %+v, want everything done", o)
	}
}

// TestShareGroupArchives: REJECT archives a record at once; a record
// released or expired DeliveryCountLimit times is archived; neither is
// delivered again, and the start offset moves past them.
func TestShareGroupArchives(t *testing.T) {
	clk := newFakeClock(1_000_000)
	e := openShareEngine(t, t.TempDir(), clk)
	tp := mustTopic(t, e, "q", 1, smallConfig())
	produceN(t, tp, 3)
	g := mustShareGroup(t, e, "g", ShareGroupOptions{Reset: ResetEarliest, LockDuration: time.Second, DeliveryCountLimit: 2})
	m := mustShareJoin(t, g, "q")
	q0 := TopicPartition{"q", 0}
	r := mustAcquire(t, m, 3)
	if err := m.Reject(r[0]); err != nil {
		t.Fatal(err)
	}
	wantState(t, g, q0, 0, ShareArchived, 0) // below the start offset: done
	if err := m.Release(r[1]); err != nil {
		t.Fatal(err)
	}
	wantState(t, g, q0, 1, ShareAvailable, 1)
	clk.Advance(1000) // offset 2's lock expires: delivered once, available
	r = mustAcquire(t, m, 3)
	if got := offsetsOf(r); got != "1/2 2/2" {
		t.Fatalf("acquired %s, want the two records again at their second delivery", got)
	}
	if err := m.Release(r[0]); err != nil {
		t.Fatal(err)
	}
	// At the limit: archived, and the start offset moved past 0 and 1.
	if o, _ := g.Offsets(q0); o.Start != 2 || o.InFlight != 1 {
		t.Fatalf("Offsets = %+v, want start 2 with offset 2 in flight", o)
	}
	wantState(t, g, q0, 2, ShareAcquired, 2)
	clk.Advance(1000)
	wantState(t, g, q0, 2, ShareArchived, 0) // expired at the limit, and the start moved past it
	if got := mustAcquire(t, m, 10); len(got) != 0 {
		t.Fatalf("acquired %s: archived records delivered again", offsetsOf(got))
	}
	if o, _ := g.Offsets(q0); o.Start != 3 || o.InFlight != 0 {
		t.Fatalf("Offsets = %+v, want start 3", o)
	}
}

// TestShareGroupAcknowledgeAllOrNone: acknowledgements over several
// partitions are refused whole when one record is not the member's.
func TestShareGroupAcknowledgeAllOrNone(t *testing.T) {
	clk := newFakeClock(1_000_000)
	e := openShareEngine(t, t.TempDir(), clk)
	tp := mustTopic(t, e, "q", 2, smallConfig())
	produceN(t, tp, 4)
	g := mustShareGroup(t, e, "g", ShareGroupOptions{Reset: ResetEarliest})
	m := mustShareJoin(t, g, "q")
	r := mustAcquire(t, m, 10)
	if len(r) != 4 {
		t.Fatalf("acquired %d records, want 4", len(r))
	}
	bogus := r[0]
	bogus.Offset = 99
	if err := m.Accept(append(r[:len(r):len(r)], bogus)...); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("Accept with an offset never acquired: %v", err)
	}
	for _, x := range r {
		wantState(t, g, TopicPartition{x.Topic, x.Partition}, x.Offset, ShareAcquired, 1)
	}
	if err := m.Acknowledge(TopicPartition{"q", 0}, 0, 1, ShareAccept); err != nil {
		t.Fatal(err)
	}
	if err := m.Acknowledge(TopicPartition{"q", 1}, 0, 1, ShareReject); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if o, _ := g.Offsets(TopicPartition{"q", p}); o.Start != 2 {
			t.Fatalf("partition %d: %+v, want start 2", p, o)
		}
	}
	if err := m.Leave(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(1); !errors.Is(err, ErrMemberLeft) {
		t.Fatalf("Acquire after Leave: %v", err)
	}
}

// TestShareGroupLeaveReleases: a member's records are delivered to the
// others when it leaves.
func TestShareGroupLeaveReleases(t *testing.T) {
	clk := newFakeClock(1_000_000)
	e := openShareEngine(t, t.TempDir(), clk)
	tp := mustTopic(t, e, "q", 1, smallConfig())
	produceN(t, tp, 2)
	g := mustShareGroup(t, e, "g", ShareGroupOptions{Reset: ResetEarliest})
	a, b := mustShareJoin(t, g, "q"), mustShareJoin(t, g, "q")
	mustAcquire(t, a, 2)
	if err := a.Leave(); err != nil {
		t.Fatal(err)
	}
	if got := offsetsOf(mustAcquire(t, b, 10)); got != "0/2 1/2" {
		t.Fatalf("b acquired %s after a left", got)
	}
	if got := g.Members(); len(got) != 1 || got[0] != b.ID() {
		t.Fatalf("members %v", got)
	}
}

// TestShareGroupReopenKeepsState: after a close and reopen, accepted and
// rejected records stay done, a released record keeps its delivery count,
// and one acquired at the close is delivered again with the count it had
// before (acquisitions are not persisted, as in KIP-932).
func TestShareGroupReopenKeepsState(t *testing.T) {
	dir := t.TempDir()
	clk := newFakeClock(1_000_000)
	e := openEngine(t, dir, func(o *Options) { o.Now = clk.Now })
	tp := mustTopic(t, e, "q", 1, smallConfig())
	produceN(t, tp, 10)
	opts := ShareGroupOptions{Reset: ResetEarliest}
	g := mustShareGroup(t, e, "g", opts)
	m := mustShareJoin(t, g, "q")
	r := mustAcquire(t, m, 8)
	if err := m.Accept(r[:4]...); err != nil {
		t.Fatal(err)
	}
	if err := m.Reject(r[4]); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(r[5]); err != nil {
		t.Fatal(err)
	}
	if err := m.Accept(r[7]); err != nil {
		t.Fatal(err)
	}
	// Offset 6 is still acquired; 8 and 9 were never delivered.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = openShareEngine(t, dir, clk)
	g = mustShareGroup(t, e, "g", opts)
	q0 := TopicPartition{"q", 0}
	if o, err := g.Offsets(q0); err != nil || o.Start != 5 {
		t.Fatalf("Offsets after the reopen = %+v, %v; want start 5", o, err)
	}
	wantState(t, g, q0, 7, ShareAcknowledged, 1)
	m = mustShareJoin(t, g, "q")
	if got := offsetsOf(mustAcquire(t, m, 100)); got != "5/2 6/1 8/1 9/1" {
		t.Fatalf("acquired %s after the reopen, want 5/2 6/1 8/1 9/1", got)
	}

	// A group with latest reset that never acquired keeps its start too.
	g2 := mustShareGroup(t, e, "late", ShareGroupOptions{})
	if o, _ := g2.Offsets(q0); o.Start != 10 {
		t.Fatalf("latest reset starts at %d, want 10", o.Start)
	}
	produceN(t, e.Topic("q"), 1)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openShareEngine(t, dir, clk)
	g2 = mustShareGroup(t, e, "late", ShareGroupOptions{})
	if got := offsetsOf(mustAcquire(t, mustShareJoin(t, g2, "q"), 100)); got != "10/1" {
		t.Fatalf("latest group acquired %s after the reopen, want the record produced after it started", got)
	}
}

func TestShareGroupOptions(t *testing.T) {
	e := openShareEngine(t, t.TempDir(), newFakeClock(0))
	if _, err := e.ShareGroup("g", ShareGroupOptions{Reset: ResetNone}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("reset none: %v", err)
	}
	g := mustShareGroup(t, e, "g", ShareGroupOptions{DeliveryCountLimit: 3})
	if g2 := mustShareGroup(t, e, "g", ShareGroupOptions{}); g2 != g {
		t.Fatal("a second ShareGroup call returned another group")
	}
	if g2 := mustShareGroup(t, e, "g", ShareGroupOptions{DeliveryCountLimit: 3, LockDuration: 30 * time.Second, Reset: ResetLatest}); g2 != g {
		t.Fatal("the same options spelt out (Kafka's defaults) returned another group")
	}
	if _, err := e.ShareGroup("g", ShareGroupOptions{DeliveryCountLimit: 4}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("other options: %v", err)
	}
	cg, err := e.ConsumerGroup("g", GroupOptions{})
	if err != nil || cg == nil {
		t.Fatalf("a consumer group beside the share group: %v", err)
	}
}

// TestShareGroupConcurrentMembers: members acquire, release and accept on
// their own goroutines; no record is ever held by two members at once and
// every record is accepted exactly once (run with -race).
func TestShareGroupConcurrentMembers(t *testing.T) {
	clk := newFakeClock(1_000_000)
	e := openShareEngine(t, t.TempDir(), clk)
	tp := mustTopic(t, e, "q", 1, smallConfig())
	const n = 200
	produceN(t, tp, n)
	g := mustShareGroup(t, e, "g", ShareGroupOptions{Reset: ResetEarliest, DeliveryCountLimit: 100})

	var mu sync.Mutex
	held := map[int64]string{}  // offset -> member holding it
	accepted := map[int64]int{} // offset -> times accepted
	var failures []string
	var wg sync.WaitGroup
	for w := range 4 {
		m := mustShareJoin(t, g, "q")
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for range 2000 {
				mu.Lock()
				done := len(accepted) == n
				mu.Unlock()
				if done {
					return
				}
				rs, err := m.Acquire(1 + rng.Intn(9))
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					return
				}
				mu.Lock()
				for _, r := range rs {
					if h, ok := held[r.Offset]; ok {
						failures = append(failures, fmt.Sprintf("%s acquired offset %d that %s holds", m.ID(), r.Offset, h))
					}
					held[r.Offset] = m.ID()
				}
				mu.Unlock()
				var acc, rel []ShareRecord
				for _, r := range rs {
					if rng.Intn(3) == 0 {
						rel = append(rel, r)
					} else {
						acc = append(acc, r)
					}
				}
				// Forget them before acknowledging: once acknowledged
				// another member may acquire them.
				mu.Lock()
				for _, r := range rs {
					delete(held, r.Offset)
				}
				for _, r := range acc {
					accepted[r.Offset]++
				}
				mu.Unlock()
				if err := errors.Join(m.Release(rel...), m.Accept(acc...)); err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d failures, first: %s", len(failures), failures[0])
	}
	if len(accepted) != n {
		t.Fatalf("%d records accepted, want %d", len(accepted), n)
	}
	for o, c := range accepted {
		if c != 1 {
			t.Fatalf("offset %d accepted %d times", o, c)
		}
	}
	if o, _ := g.Offsets(TopicPartition{"q", 0}); o.Start != n {
		t.Fatalf("start offset %d, want %d", o.Start, n)
	}
}

// TestShareGroupSkipsControlRecords: a transaction marker's offset is not
// delivered: Acquire acknowledges it as a gap on the member's behalf.
func TestShareGroupSkipsControlRecords(t *testing.T) {
	clk := newFakeClock(1_000_000)
	e := openShareEngine(t, t.TempDir(), clk)
	tp := mustTopic(t, e, "q", 1, smallConfig())
	l := tp.Partition(0)
	mustAppend(t, l, txnBatch(t, 7, 0, 0, 3))
	mustMarker(t, l, 7, 0, 0, true)
	durable(t, l)
	produceN(t, tp, 1)
	g := mustShareGroup(t, e, "g", ShareGroupOptions{Reset: ResetEarliest})
	m := mustShareJoin(t, g, "q")
	rs := mustAcquire(t, m, 10)
	if got := offsetsOf(rs); got != "0/1 1/1 2/1 4/1" {
		t.Fatalf("acquired %s, want the data records only", got)
	}
	q0 := TopicPartition{"q", 0}
	wantState(t, g, q0, 3, ShareArchived, 1)
	if err := m.Accept(rs...); err != nil {
		t.Fatal(err)
	}
	if o, _ := g.Offsets(q0); o.Start != 5 || o.InFlight != 0 {
		t.Fatalf("Offsets = %+v, want start 5", o)
	}
}
