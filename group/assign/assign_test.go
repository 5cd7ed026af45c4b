package assign

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// parseAsg turns "C0: t0p0 t1p1; C1: ..." into an Assignment.
func parseAsg(t *testing.T, s string) Assignment {
	t.Helper()
	out := Assignment{}
	for _, part := range strings.Split(s, ";") {
		id, list, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			t.Fatalf("bad spec %q", part)
		}
		tps := []TopicPartition{}
		for _, f := range strings.Fields(list) {
			var p int32
			i := strings.LastIndexByte(f, 'p')
			if _, err := fmt.Sscan(f[i+1:], &p); err != nil {
				t.Fatalf("bad partition %q", f)
			}
			tps = append(tps, TopicPartition{f[:i], p})
		}
		out[strings.TrimSpace(id)] = tps
	}
	return out
}

func TestKafkaJavadocExamples(t *testing.T) {
	both := []string{"t0", "t1"}
	tests := []struct {
		name    string
		fn      func([]Member, Topics) (Assignment, error)
		members []Member
		topics  Topics
		want    string
	}{
		{
			name:    "RangeAssignor javadoc",
			fn:      Range,
			members: []Member{{ID: "C1", Topics: both}, {ID: "C0", Topics: both}},
			topics:  Topics{"t0": 3, "t1": 3},
			want:    "C0: t0p0 t0p1 t1p0 t1p1; C1: t0p2 t1p2",
		},
		{
			name:    "RoundRobinAssignor javadoc, identical subscriptions",
			fn:      RoundRobin,
			members: []Member{{ID: "C0", Topics: both}, {ID: "C1", Topics: both}},
			topics:  Topics{"t0": 3, "t1": 3},
			want:    "C0: t0p0 t0p2 t1p1; C1: t0p1 t1p0 t1p2",
		},
		{
			name: "RoundRobinAssignor javadoc, differing subscriptions",
			fn:   RoundRobin,
			members: []Member{
				{ID: "C2", Topics: []string{"t0", "t1", "t2"}},
				{ID: "C0", Topics: []string{"t0"}},
				{ID: "C1", Topics: []string{"t0", "t1"}},
			},
			topics: Topics{"t0": 1, "t1": 2, "t2": 3},
			want:   "C0: t0p0; C1: t1p0; C2: t1p1 t2p0 t2p1 t2p2",
		},
		{
			name: "Range orders static members first by instance id",
			fn:   Range,
			members: []Member{
				{ID: "a", Topics: []string{"t0"}},
				{ID: "z", InstanceID: "i1", Topics: []string{"t0"}},
				{ID: "m", InstanceID: "i0", Topics: []string{"t0"}},
			},
			topics: Topics{"t0": 4},
			want:   "m: t0p0 t0p1; z: t0p2; a: t0p3",
		},
		{
			// StickyAssignor javadoc: C0 [t0p0 t1p1 t3p0], C1 [t0p1 t2p0 t3p1],
			// C2 [t1p0 t2p1]; C1 leaves. Kafka's result keeps every claim and
			// splits C1's partitions: C0 +t2p0, C2 +t0p1 +t3p1.
			name: "StickyAssignor javadoc, member leaves",
			fn:   Sticky,
			members: []Member{
				{ID: "C0", Topics: []string{"t0", "t1", "t2", "t3"}, Generation: 1,
					Owned: []TopicPartition{{"t0", 0}, {"t1", 1}, {"t3", 0}}},
				{ID: "C2", Topics: []string{"t0", "t1", "t2", "t3"}, Generation: 1,
					Owned: []TopicPartition{{"t1", 0}, {"t2", 1}}},
			},
			topics: Topics{"t0": 2, "t1": 2, "t2": 2, "t3": 2},
			want:   "C0: t0p0 t1p1 t2p0 t3p0; C2: t0p1 t1p0 t2p1 t3p1",
		},
		{
			name: "Sticky: higher generation wins a conflicting claim",
			fn:   Sticky,
			members: []Member{
				{ID: "A", Topics: []string{"t"}, Generation: 3, Owned: []TopicPartition{{"t", 0}}},
				{ID: "B", Topics: []string{"t"}, Generation: 4, Owned: []TopicPartition{{"t", 0}, {"t", 1}}},
			},
			topics: Topics{"t": 2},
			want:   "A: tp1; B: tp0",
		},
		{
			name:    "unknown and empty topics are ignored",
			fn:      Range,
			members: []Member{{ID: "A", Topics: []string{"gone", "empty", "t"}}},
			topics:  Topics{"empty": 0, "t": 1},
			want:    "A: tp0",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.fn(tc.members, tc.topics)
			if err != nil {
				t.Fatal(err)
			}
			want := parseAsg(t, tc.want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
		})
	}
}

func TestCooperativeRevokesFirst(t *testing.T) {
	// A owns everything; B joins. Phase 1 gives B nothing A still owns.
	topics := Topics{"t": 4}
	a := Member{ID: "A", Topics: []string{"t"}, Generation: 1,
		Owned: []TopicPartition{{"t", 0}, {"t", 1}, {"t", 2}, {"t", 3}}}
	b := Member{ID: "B", Topics: []string{"t"}, Generation: 1}
	p1, err := CooperativeSticky([]Member{a, b}, topics)
	if err != nil {
		t.Fatal(err)
	}
	want1 := Assignment{"A": {{"t", 0}, {"t", 1}}, "B": {}}
	if !reflect.DeepEqual(p1, want1) {
		t.Fatalf("phase 1 %v, want %v", p1, want1)
	}
	a.Owned, a.Generation, b.Generation = p1["A"], 2, 2
	p2, err := CooperativeSticky([]Member{a, b}, topics)
	if err != nil {
		t.Fatal(err)
	}
	want2 := Assignment{"A": {{"t", 0}, {"t", 1}}, "B": {{"t", 2}, {"t", 3}}}
	if !reflect.DeepEqual(p2, want2) {
		t.Fatalf("phase 2 %v, want %v", p2, want2)
	}
}

func TestInvalidInput(t *testing.T) {
	fns := map[string]func([]Member, Topics) (Assignment, error){
		"range": Range, "roundrobin": RoundRobin, "sticky": Sticky,
		"cooperative": CooperativeSticky, "uniform": Uniform,
	}
	for name, fn := range fns {
		_, err := fn([]Member{{ID: "a"}, {ID: "a"}}, nil)
		if !errors.Is(err, ErrDuplicateMember) {
			t.Errorf("%s duplicate: %v", name, err)
		}
		_, err = fn([]Member{{ID: "a", Topics: []string{"t"}}}, Topics{"t": -1})
		if !errors.Is(err, ErrNegativeCount) {
			t.Errorf("%s negative: %v", name, err)
		}
		_, err = fn([]Member{{ID: "a", Topics: []string{"t", "u"}}},
			Topics{"t": MaxPartitions, "u": 1})
		if !errors.Is(err, ErrTooManyPartitions) {
			t.Errorf("%s too many: %v", name, err)
		}
		got, err := fn(nil, Topics{"t": 3})
		if err != nil || len(got) != 0 {
			t.Errorf("%s no members: %v %v", name, got, err)
		}
		// Garbage claims (unknown topic, out-of-range, negative partition,
		// unsubscribed topic, duplicates) are ignored, never a panic.
		got, err = fn([]Member{{ID: "a", Topics: []string{"t"}, Owned: []TopicPartition{
			{"x", 0}, {"t", 9}, {"t", -1}, {"u", 0}, {"t", 1}, {"t", 1}}}}, Topics{"t": 2, "u": 1})
		want := Assignment{"a": {{"t", 0}, {"t", 1}}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s garbage claims: %v %v", name, got, err)
		}
	}
}

// Every member claims every partition twice in the same generation: all
// claims tie and are void, the work stays linear in the claims, Sticky
// assigns from scratch and CooperativeSticky grants nothing yet (every
// partition is still claimed by someone else).
func TestHostileClaims(t *testing.T) {
	const members, parts = 200, 1000
	var all []TopicPartition
	for p := int32(0); p < parts; p++ {
		all = append(all, TopicPartition{"t", p}, TopicPartition{"t", p})
	}
	ms := make([]Member, members)
	for i := range ms {
		ms[i] = Member{ID: fmt.Sprintf("m%03d", i), Topics: []string{"t"}, Owned: all, Generation: 5}
	}
	topics := Topics{"t": parts}
	a, err := Sticky(ms, topics)
	if err != nil {
		t.Fatal(err)
	}
	c := tcase{members: ms, topics: topics, identical: true}
	checkValid(t, c, a)
	checkBalanced(t, c, a)
	co, err := CooperativeSticky(ms, topics)
	if err != nil {
		t.Fatal(err)
	}
	for id, tps := range co {
		if len(tps) != 0 {
			t.Fatalf("%s granted %d partitions still claimed by others", id, len(tps))
		}
	}
	// One member in a newer generation wins every claim it makes.
	ms[7].Generation = 6
	a, err = Sticky(ms, topics)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(a["m007"]); got != parts/members {
		t.Fatalf("m007 got %d, want its quota %d", got, parts/members)
	}
	if moved := moves(refPrev(tcase{members: ms, topics: topics}, true), a); moved != parts-parts/members {
		t.Fatalf("moved %d, want %d", moved, parts-parts/members)
	}
}

func TestCooperativeHolders(t *testing.T) {
	topics := Topics{"t": 2, "u": 2}
	// A dropped t from its subscription but still holds t0/t1: B may not
	// get them until A revokes. B wins u0 over C's stale claim, but balance
	// moves u0 to C, which must wait for B to revoke it.
	ms := []Member{
		{ID: "A", Topics: []string{"u"}, Generation: 2, Owned: []TopicPartition{{"t", 0}, {"t", 1}, {"u", 1}}},
		{ID: "B", Topics: []string{"t", "u"}, Generation: 2, Owned: []TopicPartition{{"u", 0}}},
		{ID: "C", Topics: []string{"u"}, Generation: 1, Owned: []TopicPartition{{"u", 0}}},
	}
	got, err := CooperativeSticky(ms, topics)
	if err != nil {
		t.Fatal(err)
	}
	want := Assignment{"A": {{"u", 1}}, "B": {}, "C": {}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	target, _ := Sticky(ms, topics)
	wantTarget := Assignment{"A": {{"u", 1}}, "B": {{"t", 0}, {"t", 1}}, "C": {{"u", 0}}}
	if !reflect.DeepEqual(target, wantTarget) {
		t.Fatalf("target %v, want %v", target, wantTarget)
	}
	// A subscribes to t again: its own hold on t0 never blocks it.
	ms2 := []Member{ms[0], ms[2]}
	ms2[0].Topics = []string{"t", "u"}
	got, err = CooperativeSticky(ms2, topics)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got["A"], TopicPartition{"t", 0}) {
		t.Fatalf("A lost its own t0: %v", got)
	}
	ms3 := []Member{
		{ID: "B", Topics: []string{"u"}, Generation: 2, Owned: []TopicPartition{{"u", 0}, {"u", 1}}},
		{ID: "C", Topics: []string{"u"}, Generation: 1, Owned: []TopicPartition{{"u", 1}}},
	}
	got, err = CooperativeSticky(ms3, topics)
	if err != nil {
		t.Fatal(err)
	}
	// Target B:[u0] C:[u1]; C's stale u1 claim is void and B still holds u1.
	if want := (Assignment{"B": {{"u", 0}}, "C": {}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	ms3[0].Owned = []TopicPartition{{"u", 0}}
	got, err = CooperativeSticky(ms3, topics)
	if err != nil {
		t.Fatal(err)
	}
	// B revoked u1; C's generation-1 claim on u1 is now the only one: it keeps it.
	if want := (Assignment{"B": {{"u", 0}}, "C": {{"u", 1}}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("after revoke got %v, want %v", got, want)
	}
}
