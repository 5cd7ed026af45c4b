package group

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// hidingCatalog lists no internal ("__") topic in Names, as a catalog that
// filters them would; Partitions still knows them.
type hidingCatalog map[string]int32

func (c hidingCatalog) Partitions(t string) int32 { return c[t] }
func (c hidingCatalog) Names() []string {
	var out []string
	for t := range c {
		if !strings.HasPrefix(t, "__") {
			out = append(out, t)
		}
	}
	return out
}

func TestRegexResolvesLikeKafka(t *testing.T) {
	topics := map[string]int32{"foo": 1, "foobar": 2, "xfoo": 1, "bar": 3, OffsetsTopic: 50, "__transaction_state": 50, "__user": 1}
	for _, tc := range []struct {
		pattern string
		full    []string // every topic listed by Names
		hiding  []string // Names without "__" topics
	}{
		{".*", []string{"__consumer_offsets", "__transaction_state", "__user", "bar", "foo", "foobar", "xfoo"},
			[]string{"__consumer_offsets", "__transaction_state", "bar", "foo", "foobar", "xfoo"}},
		// Whole-name match (Matcher.matches), not a substring.
		{"foo", []string{"foo"}, []string{"foo"}},
		{"foo.*", []string{"foo", "foobar"}, []string{"foo", "foobar"}},
		{"foo|bar", []string{"bar", "foo"}, []string{"bar", "foo"}},
		{".*foo.*", []string{"foo", "foobar", "xfoo"}, []string{"foo", "foobar", "xfoo"}},
		{"__.*", []string{"__consumer_offsets", "__transaction_state", "__user"}, []string{"__consumer_offsets", "__transaction_state"}},
		{"(?i)FOO", []string{"foo"}, []string{"foo"}},
		// franz-go's wrapping of its client-side patterns.
		{".*(?:(?:oba)).*", []string{"foobar"}, []string{"foobar"}},
		{"nothing", nil, nil},
	} {
		re, code, msg := compileSubscriptionRegex(tc.pattern)
		if code != 0 {
			t.Fatalf("%q: %d %s", tc.pattern, code, msg)
		}
		if got := resolveRegex(re, fakeCatalog(topics)); !slices.Equal(got, tc.full) {
			t.Errorf("%q over every name: %v, want %v", tc.pattern, got, tc.full)
		}
		if got := resolveRegex(re, hidingCatalog(topics)); !slices.Equal(got, tc.hiding) {
			t.Errorf("%q over names without internal topics: %v, want %v", tc.pattern, got, tc.hiding)
		}
	}
	// An internal topic that does not exist is not resolved.
	re, _, _ := compileSubscriptionRegex(".*")
	if got := resolveRegex(re, hidingCatalog{"a": 1}); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("resolved %v, want [a]", got)
	}
}

func TestRegexSubscriptionAssignment(t *testing.T) {
	h := newHarness(t)
	cat := hidingCatalog{"a": 2, OffsetsTopic: 3}
	all := ".*"
	r := h.g.ConsumerHeartbeat(h.now, HeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMs: 5000, Regex: &all}, cat)
	if r.Err != 0 {
		t.Fatalf("join: %+v", r)
	}
	want := map[string][]int32{"a": {0, 1}, OffsetsTopic: {0, 1, 2}}
	if !r.HasAssignment || !sameAssigned(r.Assignment, want) {
		t.Fatalf("match-all assignment %v, want %v", r.Assignment, want)
	}

	// A topic created later is resolved on the next heartbeat; one
	// deleted leaves the assignment.
	cat["b"] = 1
	delete(cat, "a")
	owned := want
	for range 3 {
		r = h.g.ConsumerHeartbeat(h.now, HeartbeatRequest{Group: "g", MemberID: "m", MemberEpoch: r.MemberEpoch,
			RebalanceTimeoutMs: -1, Owned: owned, OwnedSet: true}, cat)
		if r.Err != 0 {
			t.Fatalf("heartbeat: %+v", r)
		}
		if r.HasAssignment {
			owned = r.Assignment
		}
	}
	want = map[string][]int32{"b": {0}, OffsetsTopic: {0, 1, 2}}
	if !sameAssigned(owned, want) {
		t.Fatalf("after create/delete %v, want %v", owned, want)
	}

	// A pattern matches whole names only.
	h2 := newHarness(t)
	sub := "a"
	r = h2.g.ConsumerHeartbeat(h2.now, HeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMs: 5000, Regex: &sub},
		fakeCatalog{"a": 1, "ab": 1, "ba": 1})
	if r.Err != 0 || !sameAssigned(r.Assignment, map[string][]int32{"a": {0}}) {
		t.Fatalf("regex %q: %+v", sub, r)
	}

	// A pattern that does not compile is refused with Kafka's error and
	// message, and the member is not admitted.
	bad := "a("
	r = h2.g.ConsumerHeartbeat(h2.now, HeartbeatRequest{Group: "g", MemberID: "n", RebalanceTimeoutMs: 5000, Regex: &bad}, cat)
	if r.Err != kerr.InvalidRegularExpression.Code || !strings.HasPrefix(r.Msg, "SubscribedTopicRegex `a(` is not a valid regular expression") {
		t.Fatalf("bad regex: %+v", r)
	}
	if _, ok := h2.g.cg.members["n"]; ok {
		t.Fatal("member with a bad regex admitted")
	}
}
