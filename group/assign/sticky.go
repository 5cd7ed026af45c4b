package assign

import (
	"cmp"
	"slices"
)

// Sticky is Kafka's StickyAssignor: a balanced assignment keeping as many
// valid owned partitions as possible; conflicting claims are resolved by
// Generation (see the package doc).
func Sticky(members []Member, topics Topics) (Assignment, error) {
	in, err := prepare(members, topics)
	if err != nil {
		return nil, err
	}
	owner, _, err := stickyOwners(in, true)
	if err != nil {
		return nil, err
	}
	return in.build(owner)
}

// Uniform is the KIP-848 server-side "uniform" assignor: the same balanced,
// sticky target as Sticky, with Generation ignored (Owned is the
// coordinator's current target assignment).
func Uniform(members []Member, topics Topics) (Assignment, error) {
	in, err := prepare(members, topics)
	if err != nil {
		return nil, err
	}
	owner, _, err := stickyOwners(in, false)
	if err != nil {
		return nil, err
	}
	return in.build(owner)
}

// CooperativeSticky is Kafka's CooperativeStickyAssignor: Sticky's target
// minus every partition another member still holds, which that member must
// revoke before the next rebalance hands it over. "Holds" means any claim in
// its Owned list on an existing partition, subscribed or not, unless the
// claim lost to a valid claim from a strictly newer generation (a stale
// member has already lost its partitions, as in Kafka).
func CooperativeSticky(members []Member, topics Topics) (Assignment, error) {
	in, err := prepare(members, topics)
	if err != nil {
		return nil, err
	}
	owner, claims, err := stickyOwners(in, true)
	if err != nil {
		return nil, err
	}
	h := newHolders(in)
	for g, o := range owner {
		if h.blocks(g, int(o), claims[g]) {
			owner[g] = -1
		}
	}
	return in.buildPartial(owner)
}

// holders keeps, per partition, the two highest-generation raw claimants
// (distinct members), enough to answer "does anyone but mi hold it".
type holders struct {
	m1, m2 []int32 // member indices, -1 if none
	g1, g2 []int32 // their generations
}

func newHolders(in *input) *holders {
	h := &holders{
		m1: emptyOwner(in.n), m2: emptyOwner(in.n),
		g1: make([]int32, in.n), g2: make([]int32, in.n),
	}
	for mi := range in.members {
		gen := in.members[mi].Generation
		for _, tp := range in.members[mi].Owned {
			g, _ := in.global(tp)
			if g < 0 || h.m1[g] == int32(mi) || h.m2[g] == int32(mi) {
				continue
			}
			switch {
			case h.m1[g] < 0 || gen > h.g1[g]:
				h.m2[g], h.g2[g] = h.m1[g], h.g1[g]
				h.m1[g], h.g1[g] = int32(mi), gen
			case h.m2[g] < 0 || gen > h.g2[g]:
				h.m2[g], h.g2[g] = int32(mi), gen
			}
		}
	}
	return h
}

// blocks reports whether a member other than mi holds partition g with a
// claim not superseded by the valid claim c.
func (h *holders) blocks(g, mi int, c claim) bool {
	om, og := h.m1[g], h.g1[g]
	if om == int32(mi) {
		om, og = h.m2[g], h.g2[g]
	}
	if om < 0 {
		return false
	}
	return c.owner == claimNone || og >= c.gen
}

const (
	claimNone = -1 // nobody validly claims the partition
	claimTied = -2 // two or more members claim it at the highest generation
)

// claim is the resolved valid ownership claim on one partition.
type claim struct {
	owner int32 // member index, claimNone or claimTied
	gen   int32 // generation of the winning (or tied) claim
}

// resolveClaims validates every member's Owned list and resolves conflicts.
func resolveClaims(in *input, useGeneration bool) []claim {
	claims := make([]claim, in.n)
	for g := range claims {
		claims[g].owner = claimNone
	}
	// last[g] is the member whose list last claimed g: members are walked
	// one at a time, so it drops duplicates in one list in O(1) even when a
	// hostile client repeats or every member claims everything.
	last := make([]int32, in.n)
	for g := range last {
		last[g] = -1
	}
	for mi := range in.members {
		m := &in.members[mi]
		gen := int32(0)
		if useGeneration {
			gen = m.Generation
		}
		for _, tp := range m.Owned {
			g, ti := in.global(tp)
			if g < 0 || last[g] == int32(mi) || !in.subscribed(mi, ti) {
				continue
			}
			last[g] = int32(mi)
			c := &claims[g]
			switch {
			case c.owner == claimNone:
				c.owner, c.gen = int32(mi), gen
			case gen > c.gen:
				c.owner, c.gen = int32(mi), gen
			case gen == c.gen:
				c.owner = claimTied
			}
		}
	}
	return claims
}

// stickyOwners computes the sticky target as a per-partition owner array.
func stickyOwners(in *input, useGeneration bool) ([]int32, []claim, error) {
	claims := resolveClaims(in, useGeneration)
	owner := emptyOwner(in.n)
	for g := range claims {
		if claims[g].owner >= 0 {
			owner[g] = claims[g].owner
		}
	}
	if len(in.members) == 0 || in.n == 0 {
		return owner, claims, nil
	}
	identical := true
	for mi := 1; mi < len(in.members) && identical; mi++ {
		identical = slices.Equal(in.subs[mi], in.subs[0])
	}
	var err error
	if identical {
		err = stickyIdentical(in, owner)
	} else {
		err = stickyGeneral(in, owner)
	}
	return owner, claims, err
}

// stickyIdentical is the optimal path for identical subscriptions: every
// member is eligible for every partition.
func stickyIdentical(in *input, owner []int32) error {
	m, n := len(in.members), in.n
	floor, extra := n/m, n%m
	owned := make([][]int, m)
	for g, o := range owner {
		if o >= 0 {
			owned[o] = append(owned[o], g)
		}
	}
	quota := make([]int, m)
	for mi := range quota {
		quota[mi] = floor
	}
	// Ceil slots go first to members that can fill them from what they own,
	// then to the others, each in member order.
	for pass := 0; pass < 2 && extra > 0; pass++ {
		for mi := 0; mi < m && extra > 0; mi++ {
			if quota[mi] == floor && (pass == 1 || len(owned[mi]) > floor) {
				quota[mi]++
				extra--
			}
		}
	}
	if extra != 0 {
		return errInternal
	}
	deficit := make([]int, m)
	free := 0
	for mi := range owned {
		if len(owned[mi]) > quota[mi] {
			for _, g := range owned[mi][quota[mi]:] {
				owner[g] = -1
			}
			owned[mi] = owned[mi][:quota[mi]]
		}
		deficit[mi] = quota[mi] - len(owned[mi])
		free += deficit[mi]
	}
	// Fill deficits in member order, walking free partitions in
	// (partition, topic) order so a member's share spans topics. A fixed
	// order makes the fill stable, which CooperativeSticky relies on.
	order := make([]int, 0, free)
	for g, o := range owner {
		if o < 0 {
			order = append(order, g)
		}
	}
	if len(order) != free {
		return errInternal
	}
	slices.SortFunc(order, func(a, b int) int {
		ta, tb := in.topicOf(a), in.topicOf(b)
		if c := cmp.Compare(a-in.offset[ta], b-in.offset[tb]); c != 0 {
			return c
		}
		return cmp.Compare(ta, tb)
	})
	mi := 0
	for _, g := range order {
		for deficit[mi] == 0 { // bounded: sum(deficit) == len(order)
			mi++
		}
		owner[g] = int32(mi)
		deficit[mi]--
	}
	return nil
}

// stickyGeneral handles differing subscriptions: keep valid claims, place
// unowned partitions on the least loaded subscriber, then move partitions
// from the most loaded holder of a topic to its least loaded subscriber until
// balanced.
func stickyGeneral(in *input, owner []int32) error {
	m, nt := len(in.members), len(in.topics)
	count := make([]int, m)
	// held[mi*nt+ti] lists member mi's partitions of topic ti; moves give
	// up partitions the member did not previously own first (balancer.pick).
	held := make(map[int][]int)
	orig := slices.Clone(owner)
	for g, o := range owner {
		if o >= 0 {
			k := int(o)*nt + in.topicOf(g)
			held[k] = append(held[k], g)
			count[o]++
		}
	}
	topicOrder := make([]int, nt)
	for ti := range topicOrder {
		topicOrder[ti] = ti
	}
	slices.SortFunc(topicOrder, func(a, b int) int {
		if c := cmp.Compare(len(in.eligible[a]), len(in.eligible[b])); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, ti := range topicOrder {
		for g := in.offset[ti]; g < in.offset[ti+1]; g++ {
			if owner[g] >= 0 {
				continue
			}
			// Least loaded; on a tie the member with fewer subscribed
			// topics, keeping broader members free for topics only they take.
			best := in.eligible[ti][0]
			for _, mi := range in.eligible[ti][1:] {
				if count[mi] < count[best] ||
					(count[mi] == count[best] && len(in.subs[mi]) < len(in.subs[best])) {
					best = mi
				}
			}
			owner[g] = int32(best)
			count[best]++
			held[best*nt+ti] = append(held[best*nt+ti], g)
		}
	}
	// Each move goes from a member to one with at least two fewer, which
	// lowers sum(count^2) by at least 2, so the budget bounds the loop.
	budget := 0
	for _, c := range count {
		budget += c * c
	}
	b := &balancer{owner: owner, orig: orig, count: count, held: held, nt: nt}
	for {
		moved := false
		for _, ti := range topicOrder {
			el := in.eligible[ti]
			for {
				lo, hi := el[0], -1
				for _, mi := range el {
					if count[mi] < count[lo] {
						lo = mi
					}
					if len(held[mi*nt+ti]) > 0 && (hi < 0 || count[mi] > count[hi]) {
						hi = mi
					}
				}
				if hi < 0 || count[hi]-count[lo] < 2 {
					break
				}
				if budget -= 2; budget < 0 {
					return errInternal
				}
				b.move(hi, lo, ti)
				moved = true
			}
		}
		if !moved {
			return nil
		}
	}
}

// balancer holds the general path's working state.
type balancer struct {
	owner []int32
	orig  []int32 // valid previous owner per partition, -1 if none
	count []int
	held  map[int][]int
	nt    int
}

// pick returns the index in held of the partition of topic ti that member
// mi should give up: the last one it did not previously own, else its last.
func (b *balancer) pick(mi, ti int) int {
	h := b.held[mi*b.nt+ti]
	for i := len(h) - 1; i >= 0; i-- {
		if b.orig[h[i]] != int32(mi) {
			return i
		}
	}
	return len(h) - 1
}

// move shifts one partition of topic ti from member from to member to,
// preferring one that to previously owned (it goes home), then pick's choice.
func (b *balancer) move(from, to, ti int) {
	h := b.held[from*b.nt+ti]
	i := slices.IndexFunc(h, func(g int) bool { return b.orig[g] == int32(to) })
	if i < 0 {
		i = b.pick(from, ti)
	}
	g := h[i]
	b.held[from*b.nt+ti] = append(h[:i], h[i+1:]...)
	b.held[to*b.nt+ti] = append(b.held[to*b.nt+ti], g)
	b.owner[g] = int32(to)
	b.count[from]--
	b.count[to]++
}
