package assign

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// This file checks the assignors against plain, independent reference code
// (STYLE habit 10): validity, balance and, for the sticky family, that no
// balanced assignment moves fewer partitions (exhaustive search on small
// inputs, an analytic bound on larger ones).

type tcase struct {
	members   []Member
	topics    Topics
	identical bool
}

func (c tcase) String() string {
	return fmt.Sprintf("topics=%v members=%+v", c.topics, c.members)
}

// genCase builds a random case. Partition totals stay <= maxParts.
func genCase(r *rand.Rand, maxMembers, maxTopics, maxParts int, identical bool) tcase {
	c := tcase{topics: Topics{}, identical: identical}
	nt := 1 + r.IntN(maxTopics)
	names := make([]string, nt)
	budget := maxParts
	for i := range names {
		names[i] = fmt.Sprintf("t%d", i)
		n := r.IntN(min(budget, 2*maxParts/nt+1) + 1)
		budget -= n
		c.topics[names[i]] = int32(n)
	}
	randSubs := func() []string {
		var s []string
		for _, t := range names {
			if r.IntN(2) == 0 {
				s = append(s, t)
			}
		}
		if r.IntN(4) == 0 {
			s = append(s, "unknown")
		}
		return s
	}
	shared := randSubs()
	if r.IntN(2) == 0 {
		shared = slices.Clone(names)
	}
	nm := 1 + r.IntN(maxMembers)
	ids := r.Perm(nm + 2) // extra ids stand for departed members
	for i := 0; i < nm; i++ {
		m := Member{ID: fmt.Sprintf("m%02d", ids[i]), Generation: int32(1 + r.IntN(3))}
		if r.IntN(3) == 0 {
			m.InstanceID = fmt.Sprintf("i%02d", r.IntN(100))
		}
		if identical {
			m.Topics = slices.Clone(shared)
			r.Shuffle(len(m.Topics), func(a, b int) { m.Topics[a], m.Topics[b] = m.Topics[b], m.Topics[a] })
		} else {
			m.Topics = randSubs()
		}
		c.members = append(c.members, m)
	}
	// Fix duplicated instance ids (the coordinator never hands out two).
	seenInst := map[string]bool{}
	for i := range c.members {
		if c.members[i].InstanceID != "" && seenInst[c.members[i].InstanceID] {
			c.members[i].InstanceID = ""
		}
		seenInst[c.members[i].InstanceID] = true
	}
	// Previous ownership: each partition to a random present member, a
	// departed one or nobody; sometimes a second, conflicting claim; a few
	// claims on partitions that no longer exist.
	for _, t := range names {
		for p := int32(0); p < c.topics[t]; p++ {
			k := r.IntN(nm + 2)
			if k < nm {
				c.members[k].Owned = append(c.members[k].Owned, TopicPartition{t, p})
			}
			if r.IntN(6) == 0 {
				k2 := r.IntN(nm)
				c.members[k2].Owned = append(c.members[k2].Owned, TopicPartition{t, p})
			}
		}
		if r.IntN(5) == 0 {
			k := r.IntN(nm)
			c.members[k].Owned = append(c.members[k].Owned, TopicPartition{t, c.topics[t] + 1})
		}
	}
	return c
}

// ---- reference code ----

func refSubscribes(m *Member, topic string) bool { return slices.Contains(m.Topics, topic) }

// refPartitions lists every partition that must be assigned, sorted.
func refPartitions(c tcase) []TopicPartition {
	var out []TopicPartition
	for t, n := range c.topics {
		used := false
		for i := range c.members {
			used = used || refSubscribes(&c.members[i], t)
		}
		for p := int32(0); used && p < n; p++ {
			out = append(out, TopicPartition{t, p})
		}
	}
	slices.SortFunc(out, tpCmp)
	return out
}

func tpCmp(a, b TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

// refClaims returns, per partition, the valid claimants at the highest
// generation (generation ignored when useGen is false).
func refClaims(c tcase, useGen bool) map[TopicPartition][]string {
	type cl struct {
		id  string
		gen int32
	}
	all := map[TopicPartition][]cl{}
	for _, m := range c.members {
		for _, tp := range m.Owned {
			n, ok := c.topics[tp.Topic]
			if !ok || tp.Partition < 0 || tp.Partition >= n || !refSubscribes(&m, tp.Topic) {
				continue
			}
			if slices.ContainsFunc(all[tp], func(x cl) bool { return x.id == m.ID }) {
				continue
			}
			g := m.Generation
			if !useGen {
				g = 0
			}
			all[tp] = append(all[tp], cl{m.ID, g})
		}
	}
	out := map[TopicPartition][]string{}
	for tp, cls := range all {
		best := cls[0].gen
		for _, x := range cls {
			best = max(best, x.gen)
		}
		for _, x := range cls {
			if x.gen == best {
				out[tp] = append(out[tp], x.id)
			}
		}
	}
	return out
}

// refPrev is the valid previous owner of each partition (unique top claim).
func refPrev(c tcase, useGen bool) map[TopicPartition]string {
	out := map[TopicPartition]string{}
	for tp, ids := range refClaims(c, useGen) {
		if len(ids) == 1 {
			out[tp] = ids[0]
		}
	}
	return out
}

func member(c tcase, id string) *Member {
	for i := range c.members {
		if c.members[i].ID == id {
			return &c.members[i]
		}
	}
	return nil
}

// checkValid: an entry per member, sorted lists, only subscribed topics,
// every required partition exactly once.
func checkValid(t *testing.T, c tcase, a Assignment) {
	t.Helper()
	if len(a) != len(c.members) {
		t.Fatalf("%d entries for %d members\n%v", len(a), len(c.members), c)
	}
	seen := map[TopicPartition]string{}
	for id, tps := range a {
		m := member(c, id)
		if m == nil || tps == nil {
			t.Fatalf("entry %q: member %v, list nil=%v", id, m, tps == nil)
		}
		if !slices.IsSortedFunc(tps, tpCmp) {
			t.Fatalf("%s unsorted: %v", id, tps)
		}
		for _, tp := range tps {
			if !refSubscribes(m, tp.Topic) {
				t.Fatalf("%s got %v without subscribing\n%v", id, tp, c)
			}
			if prev, dup := seen[tp]; dup {
				t.Fatalf("%v assigned to %s and %s", tp, prev, id)
			}
			seen[tp] = id
		}
	}
	want := refPartitions(c)
	if len(seen) != len(want) {
		t.Fatalf("assigned %d partitions, want %d\n%v\n%v", len(seen), len(want), a, c)
	}
	for _, tp := range want {
		if _, ok := seen[tp]; !ok {
			t.Fatalf("%v unassigned", tp)
		}
	}
}

// isBalanced is Kafka's balance definition: nobody holding a partition of t
// has >= 2 more than any subscriber of t.
func isBalanced(c tcase, sizes map[string]int, holds map[string]map[string]bool) bool {
	for _, a := range c.members {
		for t := range holds[a.ID] {
			for _, b := range c.members {
				if refSubscribes(&b, t) && sizes[a.ID]-sizes[b.ID] > 1 {
					return false
				}
			}
		}
	}
	return true
}

func checkBalanced(t *testing.T, c tcase, a Assignment) {
	t.Helper()
	sizes, holds := map[string]int{}, map[string]map[string]bool{}
	for id, tps := range a {
		sizes[id] = len(tps)
		holds[id] = map[string]bool{}
		for _, tp := range tps {
			holds[id][tp.Topic] = true
		}
	}
	if !isBalanced(c, sizes, holds) {
		t.Fatalf("unbalanced %v\n%v", a, c)
	}
	// Identical subscriptions => sizes differ by at most one (explicitly).
	for _, x := range c.members {
		for _, y := range c.members {
			if slices.Equal(sortedSubs(c, x), sortedSubs(c, y)) && sizes[x.ID]-sizes[y.ID] > 1 {
				t.Fatalf("identical subscriptions %s=%d %s=%d", x.ID, sizes[x.ID], y.ID, sizes[y.ID])
			}
		}
	}
}

func sortedSubs(c tcase, m Member) []string {
	var s []string
	for _, t := range m.Topics {
		if c.topics[t] > 0 && !slices.Contains(s, t) {
			s = append(s, t)
		}
	}
	slices.Sort(s)
	return s
}

func moves(prev map[TopicPartition]string, a Assignment) int {
	n := 0
	for id, tps := range a {
		for _, tp := range tps {
			if p, ok := prev[tp]; ok && p != id {
				n++
			}
		}
	}
	// Partitions whose previous owner left are not moves: they must go somewhere.
	return n
}

// analyticMinMoves is the fewest moves of any balanced assignment when all
// members subscribe to the same topics: each member keeps at most its size,
// sizes are floor/ceil with n%m ceils, and a ceil only helps a member that
// owned at least ceil.
func analyticMinMoves(c tcase, prev map[TopicPartition]string) int {
	n, m := len(refPartitions(c)), len(c.members)
	floor, extra := n/m, n%m
	owned := map[string]int{}
	total := 0
	for _, id := range prev {
		owned[id]++
		total++
	}
	kept, rich := 0, 0
	for _, mb := range c.members {
		kept += min(owned[mb.ID], floor)
		if owned[mb.ID] > floor {
			rich++
		}
	}
	return total - kept - min(extra, rich)
}

// bruteMinMoves enumerates every assignment of the (few) partitions to
// subscribed members and returns the fewest moves of a balanced one
// (Kafka's balance definition, as in isBalanced, over index arrays).
func bruteMinMoves(c tcase, prev map[TopicPartition]string) int {
	parts := refPartitions(c)
	nm := len(c.members)
	var topicNames []string
	for _, tp := range parts {
		if !slices.Contains(topicNames, tp.Topic) {
			topicNames = append(topicNames, tp.Topic)
		}
	}
	subs := make([][]bool, nm) // subs[member][topic]
	for mi := range c.members {
		subs[mi] = make([]bool, len(topicNames))
		for ti, t := range topicNames {
			subs[mi][ti] = refSubscribes(&c.members[mi], t)
		}
	}
	elig := make([][]int, len(parts))
	ptopic := make([]int, len(parts))
	prevIdx := make([]int, len(parts))
	for i, tp := range parts {
		ptopic[i] = slices.Index(topicNames, tp.Topic)
		prevIdx[i] = -1
		for mi := range c.members {
			if subs[mi][ptopic[i]] {
				elig[i] = append(elig[i], mi)
			}
			if p, ok := prev[tp]; ok && p == c.members[mi].ID {
				prevIdx[i] = mi
			}
		}
	}
	best := -1
	choice := make([]int, len(parts))
	sizes := make([]int, nm)
	holds := make([][]bool, nm)
	for mi := range holds {
		holds[mi] = make([]bool, len(topicNames))
	}
	balanced := func() bool {
		for a := 0; a < nm; a++ {
			for ti := range topicNames {
				if !holds[a][ti] {
					continue
				}
				for b := 0; b < nm; b++ {
					if subs[b][ti] && sizes[a]-sizes[b] > 1 {
						return false
					}
				}
			}
		}
		return true
	}
	for iter := 0; iter < 1<<20; iter++ { // bounded: <= 4^8 combinations
		clear(sizes)
		for _, h := range holds {
			clear(h)
		}
		mv := 0
		for i := range parts {
			mi := elig[i][choice[i]]
			sizes[mi]++
			holds[mi][ptopic[i]] = true
			if prevIdx[i] >= 0 && prevIdx[i] != mi {
				mv++
			}
		}
		if (best < 0 || mv < best) && balanced() {
			best = mv
		}
		i := 0
		for ; i < len(parts); i++ {
			choice[i]++
			if choice[i] < len(elig[i]) {
				break
			}
			choice[i] = 0
		}
		if i == len(parts) {
			return best
		}
	}
	panic("enumeration bound exceeded")
}

// ---- properties ----

func TestPropertyRangeRoundRobin(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		c := genCase(r, 8, 4, 40, i%2 == 0)
		ra, err := Range(c.members, c.topics)
		if err != nil {
			t.Fatal(err)
		}
		checkValid(t, c, ra)
		// Range: per topic, subscribers' shares differ by at most one.
		for topic := range c.topics {
			lo, hi := 1<<30, -1
			for _, m := range c.members {
				if !refSubscribes(&m, topic) {
					continue
				}
				k := 0
				for _, tp := range ra[m.ID] {
					if tp.Topic == topic {
						k++
					}
				}
				lo, hi = min(lo, k), max(hi, k)
			}
			if hi >= 0 && hi-lo > 1 {
				t.Fatalf("range topic %s shares %d..%d\n%v", topic, lo, hi, c)
			}
		}
		rr, err := RoundRobin(c.members, c.topics)
		if err != nil {
			t.Fatal(err)
		}
		checkValid(t, c, rr)
		if c.identical {
			checkBalanced(t, c, rr)
		}
	}
}

func TestPropertyStickyMinimalMovesSmall(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 1500; i++ {
		c := genCase(r, 4, 3, 8, true)
		for _, useGen := range []bool{true, false} {
			fn := Sticky
			if !useGen {
				fn = Uniform
			}
			a, err := fn(c.members, c.topics)
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, c, a)
			checkBalanced(t, c, a)
			prev := refPrev(c, useGen)
			brute, analytic, got := bruteMinMoves(c, prev), analyticMinMoves(c, prev), moves(prev, a)
			if brute != analytic {
				t.Fatalf("reference disagrees: brute %d analytic %d\n%v", brute, analytic, c)
			}
			if got != brute {
				t.Fatalf("useGen=%v moved %d, minimum %d\n%v\n%v", useGen, got, brute, a, c)
			}
		}
	}
}

func TestPropertyStickyMinimalMovesLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 300; i++ {
		c := genCase(r, 40, 6, 400, true)
		for _, useGen := range []bool{true, false} {
			fn := Sticky
			if !useGen {
				fn = Uniform
			}
			a, err := fn(c.members, c.topics)
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, c, a)
			checkBalanced(t, c, a)
			prev := refPrev(c, useGen)
			if got, want := moves(prev, a), analyticMinMoves(c, prev); got != want {
				t.Fatalf("moved %d, minimum %d\n%v", got, want, c)
			}
		}
	}
}

// Differing subscriptions: always valid and balanced; stickiness is best
// effort, so moves are only compared against the exhaustive minimum for a
// report, and must never exceed the partitions that had an owner.
func TestPropertyStickyDifferingSubscriptions(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	worse, total := 0, 0
	for i := 0; i < 1500; i++ {
		c := genCase(r, 4, 3, 8, false)
		a, err := Sticky(c.members, c.topics)
		if err != nil {
			t.Fatal(err)
		}
		checkValid(t, c, a)
		checkBalanced(t, c, a)
		prev := refPrev(c, true)
		if excess := moves(prev, a) - bruteMinMoves(c, prev); excess > 0 {
			worse++
			if excess > 1 {
				t.Fatalf("moved %d more than the minimum\n%v", excess, c)
			}
		}
		total++
		u, err := Uniform(c.members, c.topics)
		if err != nil {
			t.Fatal(err)
		}
		checkValid(t, c, u)
		checkBalanced(t, c, u)
	}
	t.Logf("differing subscriptions: %d/%d cases moved more than the minimum", worse, total)
	if worse*100 > total {
		t.Fatalf("%d/%d cases above the minimum; expected under 1%%", worse, total)
	}
	for i := 0; i < 200; i++ {
		c := genCase(r, 30, 8, 300, false)
		a, err := Sticky(c.members, c.topics)
		if err != nil {
			t.Fatal(err)
		}
		checkValid(t, c, a)
		checkBalanced(t, c, a)
	}
}

// checkPhase1 asserts a cooperative round gives nobody a partition outside
// the Sticky target or one another member still validly claims.
func checkPhase1(t *testing.T, c tcase, p1 Assignment) {
	t.Helper()
	target, err := Sticky(c.members, c.topics)
	if err != nil {
		t.Fatal(err)
	}
	// A member still holds a partition if its Owned names it (subscribed or
	// not) and no valid claim from a strictly newer generation beat it.
	winGen := map[TopicPartition]int32{}
	for _, m := range c.members {
		for _, tp := range m.Owned {
			if n := c.topics[tp.Topic]; tp.Partition >= 0 && tp.Partition < n && refSubscribes(&m, tp.Topic) {
				if g, ok := winGen[tp]; !ok || m.Generation > g {
					winGen[tp] = m.Generation
				}
			}
		}
	}
	granted := 0
	for _, m := range c.members {
		granted += len(p1[m.ID])
		for _, tp := range p1[m.ID] {
			if !slices.Contains(target[m.ID], tp) {
				t.Fatalf("cooperative gave %s %v outside the target", m.ID, tp)
			}
			for _, o := range c.members {
				if o.ID == m.ID || !slices.Contains(o.Owned, tp) {
					continue
				}
				if g, ok := winGen[tp]; !ok || o.Generation >= g {
					t.Fatalf("cooperative gave %s %v still held by %s\n%v", m.ID, tp, o.ID, c)
				}
			}
		}
	}
	// Everything in the target not held by another member is granted now.
	want := 0
	for _, m := range c.members {
	next:
		for _, tp := range target[m.ID] {
			for _, o := range c.members {
				if g, ok := winGen[tp]; o.ID != m.ID && slices.Contains(o.Owned, tp) && (!ok || o.Generation >= g) {
					continue next
				}
			}
			want++
		}
	}
	if granted != want {
		t.Fatalf("cooperative granted %d of the %d unheld target partitions", granted, want)
	}
}

// revokeAndRejoin returns the next round's input: members own exactly what
// the last round gave them, in a new generation.
func revokeAndRejoin(c tcase, a Assignment) tcase {
	next := tcase{topics: c.topics, identical: c.identical}
	gen := int32(0)
	for _, m := range c.members {
		gen = max(gen, m.Generation)
	}
	for _, m := range c.members {
		m.Owned, m.Generation = a[m.ID], gen+1
		next.members = append(next.members, m)
	}
	return next
}

func TestPropertyCooperative(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	maxRounds := map[bool]int{}
	for i := 0; i < 1500; i++ {
		c := genCase(r, 6, 4, 30, i%2 == 0)
		target, err := Sticky(c.members, c.topics)
		if err != nil {
			t.Fatal(err)
		}
		// Rounds: revoke, rejoin, reassign, until a round needs no revocation
		// (everything assigned). Identical subscriptions: exactly two rounds,
		// ending at the first round's target.
		round, cur := 1, c
		for ; ; round++ {
			p, err := CooperativeSticky(cur.members, cur.topics)
			if err != nil {
				t.Fatal(err)
			}
			checkPhase1(t, cur, p)
			done := 0
			for _, tps := range p {
				done += len(tps)
			}
			if done == len(refPartitions(c)) {
				checkValid(t, cur, p)
				checkBalanced(t, cur, p)
				if c.identical && !reflect.DeepEqual(p, target) {
					t.Fatalf("converged to %v, target %v\n%v", p, target, c)
				}
				break
			}
			if round >= 6 || (c.identical && round >= 2) {
				t.Fatalf("no convergence after %d rounds\n%v", round, c)
			}
			cur = revokeAndRejoin(cur, p)
		}
		maxRounds[c.identical] = max(maxRounds[c.identical], round)
	}
	t.Logf("max rounds to converge: identical %d, differing %d", maxRounds[true], maxRounds[false])
}

func TestPropertyDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	fns := []func([]Member, Topics) (Assignment, error){Range, RoundRobin, Sticky, CooperativeSticky, Uniform}
	for i := 0; i < 500; i++ {
		c := genCase(r, 8, 4, 40, i%2 == 0)
		shuffled := slices.Clone(c.members)
		r.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		for k := range shuffled {
			m := &shuffled[k]
			m.Topics, m.Owned = slices.Clone(m.Topics), slices.Clone(m.Owned)
			r.Shuffle(len(m.Topics), func(a, b int) { m.Topics[a], m.Topics[b] = m.Topics[b], m.Topics[a] })
			r.Shuffle(len(m.Owned), func(a, b int) { m.Owned[a], m.Owned[b] = m.Owned[b], m.Owned[a] })
		}
		for fi, fn := range fns {
			a1, err1 := fn(c.members, c.topics)
			a2, err2 := fn(shuffled, c.topics)
			if err1 != nil || err2 != nil || !reflect.DeepEqual(a1, a2) {
				t.Fatalf("assignor %d not deterministic: %v %v\n%v\n%v", fi, err1, err2, a1, a2)
			}
		}
	}
}

// FuzzAssignors derives a case from fuzz bytes and checks every invariant.
func FuzzAssignors(f *testing.F) {
	f.Add(uint64(1), uint64(2), false)
	f.Add(uint64(42), uint64(7), true)
	f.Fuzz(func(t *testing.T, s1, s2 uint64, identical bool) {
		c := genCase(rand.New(rand.NewPCG(s1, s2)), 6, 4, 30, identical)
		for _, fn := range []func([]Member, Topics) (Assignment, error){Range, RoundRobin, Sticky, Uniform} {
			a, err := fn(c.members, c.topics)
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, c, a)
		}
		a, _ := Sticky(c.members, c.topics)
		checkBalanced(t, c, a)
		p1, err := CooperativeSticky(c.members, c.topics)
		if err != nil {
			t.Fatal(err)
		}
		checkPhase1(t, c, p1)
	})
}
