package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stratalog/strata/group/assign"
)

func openGroupEngine(t *testing.T, dir string) *Engine {
	t.Helper()
	e := openEngine(t, dir, nil)
	t.Cleanup(func() { e.Close() })
	return e
}

// produceN writes n records with nil keys (round-robin over partitions) and
// returns how many went to each partition.
func produceN(t *testing.T, tp *Topic, n int) map[int32]int64 {
	t.Helper()
	per := map[int32]int64{}
	for i := 0; i < n; i++ {
		p, _, err := tp.Produce(nil, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		per[p]++
	}
	return per
}

func mustJoin(t *testing.T, g *ConsumerGroup, reset OffsetReset, topics ...string) *GroupMember {
	t.Helper()
	m, err := g.Join(MemberOptions{Topics: topics, Reset: reset})
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	return m
}

// wantAssignment checks every member's partitions against what the assignor
// computes for the same members and topics, and that they cover every
// partition exactly once.
func wantAssignment(t *testing.T, fn func([]assign.Member, assign.Topics) (assign.Assignment, error), topics assign.Topics, ms ...*GroupMember) {
	t.Helper()
	var am []assign.Member
	for _, m := range ms {
		am = append(am, assign.Member{ID: m.ID(), Topics: m.topics})
	}
	want, err := fn(am, topics)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[TopicPartition]int{}
	for _, m := range ms {
		got, _ := m.Assignment()
		var w []TopicPartition
		for _, tp := range want[m.ID()] {
			w = append(w, TopicPartition{tp.Topic, tp.Partition})
		}
		if !slices.Equal(got, w) {
			t.Fatalf("%s owns %v, want %v", m.ID(), got, w)
		}
		for _, tp := range got {
			seen[tp]++
		}
	}
	total := 0
	for _, n := range topics {
		total += int(n)
	}
	if len(seen) != total {
		t.Fatalf("%d partitions assigned, want %d", len(seen), total)
	}
	for tp, n := range seen {
		if n != 1 {
			t.Fatalf("%v assigned %d times", tp, n)
		}
	}
}

func TestConsumerGroupAssignsAndRebalances(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   func([]assign.Member, assign.Topics) (assign.Assignment, error)
	}{{AssignRange, assign.Range}, {AssignRoundRobin, assign.RoundRobin}} {
		t.Run(tc.name, func(t *testing.T) {
			e := openGroupEngine(t, t.TempDir())
			mustTopic(t, e, "a", 4, smallConfig())
			mustTopic(t, e, "b", 3, smallConfig())
			g, err := e.ConsumerGroup("g", GroupOptions{Assignor: tc.name})
			if err != nil {
				t.Fatal(err)
			}
			if g2, err := e.ConsumerGroup("g", GroupOptions{}); err != nil || g2 != g {
				t.Fatalf("second ConsumerGroup: %v %v", g2, err)
			}
			other := map[string]string{AssignRange: AssignRoundRobin, AssignRoundRobin: AssignRange}[tc.name]
			if _, err := e.ConsumerGroup("g", GroupOptions{Assignor: other}); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("other assignor for an existing group: %v", err)
			}
			topics := assign.Topics{"a": 4, "b": 3}
			m1 := mustJoin(t, g, ResetEarliest, "a", "b")
			wantAssignment(t, tc.fn, topics, m1)
			m2 := mustJoin(t, g, ResetEarliest, "a", "b")
			wantAssignment(t, tc.fn, topics, m1, m2)
			m3 := mustJoin(t, g, ResetEarliest, "b", "a")
			wantAssignment(t, tc.fn, topics, m1, m2, m3)
			if gen := g.Generation(); gen != 3 {
				t.Fatalf("generation %d after three joins", gen)
			}
			if err := m2.Leave(); err != nil {
				t.Fatal(err)
			}
			wantAssignment(t, tc.fn, topics, m1, m3)
			if !slices.Equal(g.Members(), []string{m1.ID(), m3.ID()}) {
				t.Fatalf("members %v", g.Members())
			}
			if _, err := m2.Poll(1); !errors.Is(err, ErrMemberLeft) {
				t.Fatalf("Poll after Leave: %v", err)
			}
			// A topic created and a topic grown after the joins are
			// assigned at the next Poll.
			mustTopic(t, e, "c", 2, smallConfig())
			m4 := mustJoin(t, g, ResetEarliest, "c")
			wantAssignment(t, tc.fn, assign.Topics{"a": 4, "b": 3, "c": 2}, m1, m3, m4)
			if err := e.CreatePartitions("a", 6); err != nil {
				t.Fatal(err)
			}
			if _, err := m1.Poll(1); err != nil {
				t.Fatal(err)
			}
			wantAssignment(t, tc.fn, assign.Topics{"a": 6, "b": 3, "c": 2}, m1, m3, m4)
			// A deleted topic's partitions are withdrawn at the next Poll.
			gen := g.Generation()
			if err := e.DeleteTopic("c"); err != nil {
				t.Fatal(err)
			}
			if rs, err := m4.Poll(10); err != nil || len(rs) != 0 {
				t.Fatalf("Poll after the topic was deleted: %v %v", rs, err)
			}
			if own, g4 := m4.Assignment(); len(own) != 0 || g4 != gen+1 {
				t.Fatalf("after deleting c: m4 owns %v at generation %d (was %d)", own, g4, gen)
			}
			wantAssignment(t, tc.fn, assign.Topics{"a": 6, "b": 3}, m1, m3)
		})
	}
}

// TestConsumerGroupHandOffAtCommittedOffset: a partition that moves to a
// new member is read from the group's committed offset; records polled and
// not committed are polled again (at least once), none is skipped.
func TestConsumerGroupHandOffAtCommittedOffset(t *testing.T) {
	e := openGroupEngine(t, t.TempDir())
	tp := mustTopic(t, e, "t", 2, smallConfig())
	produceN(t, tp, 20) // 10 per partition
	g, err := e.ConsumerGroup("hand", GroupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m1 := mustJoin(t, g, ResetEarliest, "t")
	count := map[[2]int64]int{}
	poll := func(m *GroupMember, max int) int {
		t.Helper()
		rs, err := m.Poll(max)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Topic != "t" {
				t.Fatalf("record of topic %q", r.Topic)
			}
			count[[2]int64{int64(r.Partition), r.Offset}]++
		}
		return len(rs)
	}
	// The first Poll starts at partition 0: offsets 0..7. The commit
	// stores 8 for partition 0 and 0 for partition 1 (not read yet).
	if n := poll(m1, 8); n != 8 || count[[2]int64{0, 7}] != 1 {
		t.Fatalf("first Poll: %d records %v", n, count)
	}
	if err := m1.Commit(); err != nil {
		t.Fatal(err)
	}
	if off, err := e.Committed("hand", "t", 0); err != nil || off != 8 {
		t.Fatalf("committed %d, %v; want 8", off, err)
	}
	// The next Poll starts at partition 1: offsets 0 and 1, not committed.
	if n := poll(m1, 2); n != 2 || count[[2]int64{1, 1}] != 1 {
		t.Fatalf("second Poll: %d records %v", n, count)
	}
	// m2 joins: with range, m1 keeps partition 0 and m2 takes 1.
	m2 := mustJoin(t, g, ResetEarliest, "t")
	own1, _ := m1.Assignment()
	own2, gen := m2.Assignment()
	if !slices.Equal(own1, []TopicPartition{{"t", 0}}) || !slices.Equal(own2, []TopicPartition{{"t", 1}}) || gen != 2 {
		t.Fatalf("assignments %v %v at generation %d", own1, own2, gen)
	}
	for range 5 {
		poll(m1, 100)
		poll(m2, 100)
	}
	for p := int64(0); p < 2; p++ {
		for o := int64(0); o < 10; o++ {
			want := 1
			if p == 1 && o < 2 {
				want = 2 // polled by m1, not committed, polled again by m2
			}
			if count[[2]int64{p, o}] != want {
				t.Fatalf("partition %d offset %d polled %d times, want %d", p, o, count[[2]int64{p, o}], want)
			}
		}
	}
	for _, m := range []*GroupMember{m1, m2} {
		if err := m.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for part := int32(0); part < 2; part++ {
		if off, err := e.Committed("hand", "t", part); err != nil || off != 10 {
			t.Fatalf("partition %d committed %d, %v; want 10", part, off, err)
		}
	}
}

// TestConsumerGroupLostPartitionNotCommitted: a member whose partition moved
// away does not commit its old position over the new owner's, and when the
// partition comes back it starts at the committed offset, not its old
// position.
func TestConsumerGroupLostPartitionNotCommitted(t *testing.T) {
	e := openGroupEngine(t, t.TempDir())
	tp := mustTopic(t, e, "t", 2, smallConfig())
	produceN(t, tp, 20)
	g, _ := e.ConsumerGroup("lost", GroupOptions{Assignor: AssignRoundRobin})
	x := mustJoin(t, g, ResetEarliest, "t")
	// x reads partition 0 to its end and 3 records of partition 1.
	if rs, err := x.Poll(13); err != nil || len(rs) != 13 {
		t.Fatalf("Poll: %d, %v", len(rs), err)
	}
	if pos, _ := x.Position(TopicPartition{"t", 1}); pos != 3 {
		t.Fatalf("x's position on partition 1: %d", pos)
	}
	// y joins: round robin gives x partition 0 and y partition 1.
	y := mustJoin(t, g, ResetEarliest, "t")
	if own, _ := y.Assignment(); !slices.Equal(own, []TopicPartition{{"t", 1}}) {
		t.Fatalf("y owns %v", own)
	}
	if rs, err := y.Poll(100); err != nil || len(rs) != 10 || rs[0].Offset != 0 {
		t.Fatalf("y's Poll: %d records, %v", len(rs), err)
	}
	if err := y.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := x.Commit(); err != nil {
		t.Fatal(err)
	}
	if off, _ := e.Committed("lost", "t", 1); off != 10 {
		t.Fatalf("partition 1 committed %d after x's commit, want y's 10", off)
	}
	if off, _ := e.Committed("lost", "t", 0); off != 10 {
		t.Fatalf("partition 0 committed %d, want x's 10", off)
	}
	// y leaves: partition 1 comes back to x, which starts at the
	// committed 10, not its own old position 3.
	if err := y.Leave(); err != nil {
		t.Fatal(err)
	}
	if rs, err := x.Poll(100); err != nil || len(rs) != 0 {
		t.Fatalf("x polled %d records (%v) after partition 1 came back", len(rs), err)
	}
	if pos, _ := x.Position(TopicPartition{"t", 1}); pos != 10 {
		t.Fatalf("x's position on partition 1: %d, want the committed 10", pos)
	}
}

// TestConsumerGroupResetBelowLogStart: a position below the log start (the
// records were deleted) resumes at the earliest retained record with
// ResetEarliest, jumps to the end with ResetLatest, and fails with
// ErrOffsetOutOfRange with ResetNone; a partition with no committed offset
// and ResetNone fails with ErrNoOffset.
func TestConsumerGroupResetBelowLogStart(t *testing.T) {
	e := openGroupEngine(t, t.TempDir())
	tp := mustTopic(t, e, "t", 1, smallConfig())
	produceN(t, tp, 10)
	if err := e.Commit("earliest", "t", 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := e.Commit("latest", "t", 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := e.Commit("none", "t", 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := tp.Truncate(0, 6); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Consume(0, 2, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Topic.Consume below the log start: %v", err)
	}

	ge, _ := e.ConsumerGroup("earliest", GroupOptions{})
	rs, err := mustJoin(t, ge, ResetEarliest, "t").Poll(100)
	if err != nil || len(rs) != 4 || rs[0].Offset != 6 || rs[3].Offset != 9 {
		t.Fatalf("earliest: %d records from %v, %v; want 6..9", len(rs), rs, err)
	}

	gl, _ := e.ConsumerGroup("latest", GroupOptions{})
	ml := mustJoin(t, gl, ResetLatest, "t")
	if rs, err := ml.Poll(100); err != nil || len(rs) != 0 {
		t.Fatalf("latest: %d records, %v", len(rs), err)
	}
	produceN(t, tp, 1)
	if rs, err := ml.Poll(100); err != nil || len(rs) != 1 || rs[0].Offset != 10 {
		t.Fatalf("latest after a produce: %v, %v", rs, err)
	}

	gn, _ := e.ConsumerGroup("none", GroupOptions{})
	if _, err := mustJoin(t, gn, ResetNone, "t").Poll(100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("none below the log start: %v", err)
	}
	gx, _ := e.ConsumerGroup("never-committed", GroupOptions{})
	if _, err := mustJoin(t, gx, ResetNone, "t").Poll(100); !errors.Is(err, ErrNoOffset) {
		t.Fatalf("none without a commit: %v", err)
	}
	// Without a commit, earliest starts at the log start too.
	gy, _ := e.ConsumerGroup("fresh", GroupOptions{})
	if rs, err := mustJoin(t, gy, ResetEarliest, "t").Poll(100); err != nil || len(rs) != 5 || rs[0].Offset != 6 {
		t.Fatalf("fresh earliest: %v, %v", rs, err)
	}
}

// TestConsumerGroupCommitSurvivesRestart: the group's commits are in
// __consumer_offsets; a group in a reopened engine starts where they say.
func TestConsumerGroupCommitSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, nil)
	tp := mustTopic(t, e, "t", 3, smallConfig())
	produceN(t, tp, 30)
	g, _ := e.ConsumerGroup("r", GroupOptions{Assignor: AssignRoundRobin})
	m := mustJoin(t, g, ResetEarliest, "t")
	if rs, err := m.Poll(12); err != nil || len(rs) != 12 {
		t.Fatalf("Poll: %d, %v", len(rs), err)
	}
	if err := m.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openGroupEngine(t, dir)
	g, _ = e.ConsumerGroup("r", GroupOptions{Assignor: AssignRoundRobin})
	m = mustJoin(t, g, ResetEarliest, "t")
	n := 0
	for range 10 {
		rs, err := m.Poll(100)
		if err != nil {
			t.Fatal(err)
		}
		n += len(rs)
	}
	if n != 18 {
		t.Fatalf("after the restart polled %d records, want the 18 not committed", n)
	}
}

// TestConsumerGroupConcurrentMembers: members poll and commit on their own
// goroutines while others join and leave; every record is polled at least
// once (run with -race).
func TestConsumerGroupConcurrentMembers(t *testing.T) {
	e := openGroupEngine(t, t.TempDir())
	tp := mustTopic(t, e, "t", 6, smallConfig())
	const total = 300
	produceN(t, tp, total)
	g, _ := e.ConsumerGroup("c", GroupOptions{Assignor: AssignRoundRobin})
	var mu sync.Mutex
	seen := map[[2]int64]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	stable := make([]*GroupMember, 2)
	for i := range stable {
		stable[i] = mustJoin(t, g, ResetEarliest, "t")
	}
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == total
	}
	for _, m := range stable {
		wg.Add(1)
		go func(m *GroupMember) {
			defer wg.Done()
			for i := 0; i < 100000 && !done(); i++ {
				rs, err := m.Poll(7)
				if err == nil {
					err = m.Commit()
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, r := range rs {
					seen[[2]int64{int64(r.Partition), r.Offset}] = true
				}
				mu.Unlock()
			}
		}(m)
	}
	// Churn: members join and leave while the others poll.
	for range 20 {
		m := mustJoin(t, g, ResetEarliest, "t")
		rs, err := m.Poll(3)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for _, r := range rs {
			seen[[2]int64{int64(r.Partition), r.Offset}] = true
		}
		mu.Unlock()
		if err := m.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := m.Leave(); err != nil {
			t.Fatal(err)
		}
	}
	// The two stable members drain the rest.
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if !done() {
		t.Fatalf("%d of %d records polled", len(seen), total)
	}
}

// TestConsumerGroupSkipsTransactionMarkers: Poll never hands a transaction
// marker to the application, and the member's position (and so its
// commit) moves past a marker at the end of the log, as a Kafka
// consumer's does.
func TestConsumerGroupSkipsTransactionMarkers(t *testing.T) {
	e := openGroupEngine(t, t.TempDir())
	tp := mustTopic(t, e, "tx", 1, smallConfig())
	l := tp.Partition(0)
	mustAppend(t, l, txnBatch(t, 7, 0, 0, 3)) // offsets 0-2
	mustMarker(t, l, 7, 0, 0, true)           // offset 3: the commit marker
	durable(t, l)
	g, err := e.ConsumerGroup("g", GroupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := mustJoin(t, g, ResetEarliest, "tx")
	recs, err := m.Poll(10)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, r := range recs {
		offs = append(offs, r.Offset)
	}
	if !slices.Equal(offs, []int64{0, 1, 2}) {
		t.Fatalf("polled offsets %v, want the data records 0-2 only", offs)
	}
	q := TopicPartition{"tx", 0}
	if pos, _ := m.Position(q); pos != 4 {
		t.Fatalf("position %d after the marker at 3, want 4", pos)
	}
	produceN(t, tp, 1) // offset 4
	recs, err = m.Poll(10)
	if err != nil || len(recs) != 1 || recs[0].Offset != 4 {
		t.Fatalf("second poll: %v %v, want offset 4", recs, err)
	}
}
