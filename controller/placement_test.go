package controller

import (
	"fmt"
	"math/rand"
	"testing"
)

// spreads returns max-min of leader and of replica counts over brokers.
func spreads(brokers []PlacementBroker, a [][]int32) (leader, replica int) {
	lc := map[int32]int{}
	rc := map[int32]int{}
	for _, b := range brokers {
		lc[b.ID], rc[b.ID] = 0, 0
	}
	for _, rs := range a {
		lc[rs[0]]++
		for _, r := range rs {
			rc[r]++
		}
	}
	span := func(m map[int32]int) int {
		lo, hi := 1<<30, -1
		for _, v := range m {
			lo, hi = min(lo, v), max(hi, v)
		}
		return hi - lo
	}
	return span(lc), span(rc)
}

func rackCount(brokers []PlacementBroker) int {
	m := map[string]bool{}
	for _, b := range brokers {
		m[b.Rack] = true
	}
	return len(m)
}

// checkPlacement asserts the hard properties: right shape, replicas
// distinct and eligible, each partition on as many racks as possible,
// leader counts within one.
func checkPlacement(brokers []PlacementBroker, n, rf int, a [][]int32) error {
	if len(a) != n {
		return fmt.Errorf("%d partitions, want %d", len(a), n)
	}
	rack := map[int32]string{}
	for _, b := range brokers {
		rack[b.ID] = b.Rack
	}
	wantRacks := min(rf, rackCount(brokers))
	for i, rs := range a {
		if len(rs) != rf || hasDup(rs) {
			return fmt.Errorf("partition %d: %v", i, rs)
		}
		racks := map[string]bool{}
		for _, r := range rs {
			rk, ok := rack[r]
			if !ok {
				return fmt.Errorf("partition %d: broker %d not eligible", i, r)
			}
			racks[rk] = true
		}
		if len(racks) != wantRacks {
			return fmt.Errorf("partition %d: %v spans %d racks, want %d", i, rs, len(racks), wantRacks)
		}
	}
	if ls, _ := spreads(brokers, a); ls > 1 {
		return fmt.Errorf("leader counts differ by %d: %v", ls, a)
	}
	return nil
}

// bruteBestReplicaSpread enumerates every assignment satisfying the hard
// properties and returns the smallest replica-count spread among them.
func bruteBestReplicaSpread(brokers []PlacementBroker, n, rf int) int {
	var lists [][]int32
	var perm func(cur []int32)
	perm = func(cur []int32) {
		if len(cur) == rf {
			lists = append(lists, cloneInt32s(cur))
			return
		}
		for _, b := range brokers {
			if !contains(cur, b.ID) {
				perm(append(cur, b.ID))
			}
		}
	}
	perm(nil)
	best := 1 << 30
	a := make([][]int32, n)
	var rec func(i int)
	rec = func(i int) {
		if i == n {
			if checkPlacement(brokers, n, rf, a) == nil {
				_, rs := spreads(brokers, a)
				best = min(best, rs)
			}
			return
		}
		for _, l := range lists {
			a[i] = l
			rec(i + 1)
		}
	}
	rec(0)
	return best
}

func randomBrokers(rng *rand.Rand, maxN int) []PlacementBroker {
	n := 1 + rng.Intn(maxN)
	racks := rng.Intn(4) // 0: no racks
	bs := make([]PlacementBroker, n)
	for i := range bs {
		bs[i].ID = int32(i*3 + rng.Intn(3)) // gaps in ids
		if racks > 0 {
			bs[i].Rack = string(rune('a' + rng.Intn(racks)))
		}
	}
	rng.Shuffle(n, func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
	return bs
}

// TestPlaceAgainstBruteForce checks small cases exhaustively: the greedy
// placement satisfies the hard properties and reaches the best replica
// balance any valid assignment can.
func TestPlaceAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 300; iter++ {
		bs := randomBrokers(rng, 4)
		rf := 1 + rng.Intn(len(bs))
		n := 1 + rng.Intn(3)
		if rf == 3 && n == 3 && len(bs) == 4 && iter%4 != 0 {
			n = 2 // the largest case (24^3 assignments) only now and then
		}
		a, err := Place(bs, n, rf, nil, nil)
		if err != nil {
			t.Fatalf("brokers %v n %d rf %d: %v", bs, n, rf, err)
		}
		if err := checkPlacement(bs, n, rf, a); err != nil {
			t.Fatalf("brokers %v n %d rf %d: %v", bs, n, rf, err)
		}
		_, got := spreads(bs, a)
		if best := bruteBestReplicaSpread(bs, n, rf); got != best {
			t.Fatalf("brokers %v n %d rf %d: replica spread %d, brute force reaches %d: %v", bs, n, rf, got, best, a)
		}
	}
}

// TestPlaceLarge checks the hard properties on larger random clusters, and
// that replica counts are within one when racks are absent or equal-sized.
func TestPlaceLarge(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for iter := 0; iter < 300; iter++ {
		bs := randomBrokers(rng, 12)
		rf := 1 + rng.Intn(min(len(bs), 4))
		n := 1 + rng.Intn(100)
		a, err := Place(bs, n, rf, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPlacement(bs, n, rf, a); err != nil {
			t.Fatalf("brokers %v n %d rf %d: %v", bs, n, rf, err)
		}
		perRack := map[string]int{}
		for _, b := range bs {
			perRack[b.Rack]++
		}
		equal := true
		for _, c := range perRack {
			equal = equal && c == perRack[bs[0].Rack]
		}
		if _, rs := spreads(bs, a); equal && rs > 1 {
			t.Fatalf("brokers %v n %d rf %d: replica counts differ by %d", bs, n, rf, rs)
		}
	}
}

// TestPlaceGrow checks that adding partitions keeps a topic's leader counts
// within one, as placing them all at once would.
func TestPlaceGrow(t *testing.T) {
	bs := []PlacementBroker{{0, "a"}, {1, "b"}, {2, "a"}, {3, "b"}, {4, "c"}}
	first, err := Place(bs, 3, 3, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	more, err := Place(bs, 9, 3, first, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := append(first, more...)
	if err := checkPlacement(bs, 12, 3, all); err != nil {
		t.Fatal(err)
	}
	if _, err := Place(bs, 1, 6, nil, nil); err == nil {
		t.Fatal("replication factor above broker count accepted")
	}
	if _, err := Place(bs, 1, 0, nil, nil); err == nil {
		t.Fatal("replication factor 0 accepted")
	}
}

// TestPlaceClusterBalance checks that single-partition topics created one
// after another do not all get the same leader.
func TestPlaceClusterBalance(t *testing.T) {
	bs := []PlacementBroker{{0, ""}, {1, ""}, {2, ""}}
	load := map[int32]Load{}
	for i := 0; i < 6; i++ {
		a, err := Place(bs, 1, 2, nil, load)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range a[0] {
			l := load[r]
			l.Replicas++
			if j == 0 {
				l.Leaders++
			}
			load[r] = l
		}
	}
	for _, b := range bs {
		if load[b.ID].Leaders != 2 || load[b.ID].Replicas != 4 {
			t.Fatalf("load %v", load)
		}
	}
}
