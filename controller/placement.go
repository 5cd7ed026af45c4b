package controller

import (
	"errors"
	"fmt"
	"sort"
)

// PlacementBroker is a broker eligible for new replicas.
type PlacementBroker struct {
	ID   int32
	Rack string // "" is a rack of its own (the brokers without one)
}

// Load is how many partitions a broker leads (as preferred leader) and hosts.
type Load struct {
	Leaders  int
	Replicas int
}

// ErrPlacement is wrapped by Place's errors.
var ErrPlacement = errors.New("controller: cannot place replicas")

// Place assigns replicas for partitions new partitions of a topic whose
// existing partitions (if any) are assigned as in existing; cluster is the
// load of every broker from other topics (may be nil). It is deterministic
// with two strategies.
//
// A new topic on brokers whose racks are of equal size (or absent) is
// striped (see striped): replica counts differ by at most one, leader
// counts by at most one, each partition spans min(rf, racks) racks.
//
// Otherwise (growing a topic, or uneven racks) placement is greedy:
//
//   - brokers are ordered rack-alternating, as Kafka does (the first broker
//     of each rack, then the second of each rack, ...), and this order is
//     the rotation used to break ties;
//   - each partition's leader is the broker with the fewest leaders in this
//     topic, then the fewest replicas in this topic, then the fewest
//     leaders and replicas in the cluster, then the next in rotation after
//     the previous leader — so a topic's leader counts differ by at most
//     one across the brokers;
//   - each further replica is the broker, not already holding one, whose
//     rack holds the fewest replicas of this partition (racks spread
//     first), then the fewest replicas in this topic, then in the cluster,
//     then the next in rotation after the leader.
//
// replicationFactor must be between 1 and len(brokers).
func Place(brokers []PlacementBroker, partitions, replicationFactor int, existing [][]int32, cluster map[int32]Load) ([][]int32, error) {
	if replicationFactor < 1 || replicationFactor > len(brokers) {
		return nil, fmt.Errorf("%w: replication factor %d with %d eligible brokers", ErrPlacement, replicationFactor, len(brokers))
	}
	if partitions < 0 {
		return nil, fmt.Errorf("%w: %d partitions", ErrPlacement, partitions)
	}
	order := rackAlternating(brokers)
	n := len(order)
	pos := make(map[int32]int, n)
	rackOf := make(map[int32]string, n)
	for i, b := range order {
		if _, dup := pos[b.ID]; dup {
			return nil, fmt.Errorf("%w: broker %d listed twice", ErrPlacement, b.ID)
		}
		pos[b.ID] = i
		rackOf[b.ID] = b.Rack
	}
	topic := make([]Load, n)
	glob := make([]Load, n)
	for i, b := range order {
		glob[i] = cluster[b.ID]
	}
	if len(existing) == 0 && uniformRacks(order) {
		return striped(order, glob, partitions, replicationFactor), nil
	}
	next := 0 // rotation position after the last leader
	for _, rs := range existing {
		for j, id := range rs {
			if i, ok := pos[id]; ok {
				topic[i].Replicas++
				if j == 0 {
					topic[i].Leaders++
					next = (i + 1) % n
				}
			}
		}
	}

	out := make([][]int32, partitions)
	rackCount := make(map[string]int)
	for p := range out {
		rs := make([]int32, 0, replicationFactor)
		used := make([]bool, n)
		// Leader.
		best := -1
		for k := 0; k < n; k++ {
			i := (next + k) % n
			if best < 0 || lessLeader(topic[i], glob[i], topic[best], glob[best]) {
				best = i
			}
		}
		leader := best
		rs = append(rs, order[leader].ID)
		used[leader] = true
		clear(rackCount)
		rackCount[order[leader].Rack]++
		// Followers.
		for len(rs) < replicationFactor {
			best = -1
			for k := 1; k < n; k++ {
				i := (leader + k) % n
				if used[i] {
					continue
				}
				if best < 0 || lessFollower(rackCount[order[i].Rack], topic[i], glob[i], rackCount[order[best].Rack], topic[best], glob[best]) {
					best = i
				}
			}
			rs = append(rs, order[best].ID)
			used[best] = true
			rackCount[order[best].Rack]++
		}
		for j, id := range rs {
			i := pos[id]
			topic[i].Replicas++
			if j == 0 {
				topic[i].Leaders++
			}
		}
		next = (leader + 1) % n
		out[p] = rs
	}
	return out, nil
}

// striped lays the replicas of consecutive partitions on consecutive
// brokers of the rack-alternating order (partition p takes slots
// start+p*rf ... start+p*rf+rf-1, modulo n), so replica counts differ by at
// most one and, with racks of equal size, rf consecutive slots span
// min(rf, racks) racks. The leader is slot k = (p / (n/g)) mod g of its
// partition, g = gcd(n, rf): the partitions of one period of n/g lead on
// distinct brokers of one residue class mod g, and successive periods walk
// the classes, so leader counts differ by at most one. start is the broker
// with the fewest leaders in the cluster.
func striped(order []PlacementBroker, glob []Load, partitions, rf int) [][]int32 {
	n := len(order)
	start := 0
	for i := range glob {
		if glob[i].Leaders < glob[start].Leaders ||
			(glob[i].Leaders == glob[start].Leaders && glob[i].Replicas < glob[start].Replicas) {
			start = i
		}
	}
	g := gcd(n, rf)
	period := n / g
	out := make([][]int32, partitions)
	for p := range out {
		base := start + p*rf
		k := (p / period) % g
		rs := make([]int32, 0, rf)
		rs = append(rs, order[(base+k)%n].ID)
		for j := 0; j < rf; j++ {
			if j != k {
				rs = append(rs, order[(base+j)%n].ID)
			}
		}
		out[p] = rs
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// uniformRacks reports whether every rack holds the same number of brokers
// (true when no broker has a rack).
func uniformRacks(bs []PlacementBroker) bool {
	per := make(map[string]int)
	for _, b := range bs {
		per[b.Rack]++
	}
	for _, c := range per {
		if c != per[bs[0].Rack] {
			return false
		}
	}
	return true
}

// lessLeader orders leader candidates; equal keys keep the earlier one in
// rotation (the caller scans in rotation order and replaces only on less).
func lessLeader(ta, ga, tb, gb Load) bool {
	if ta.Leaders != tb.Leaders {
		return ta.Leaders < tb.Leaders
	}
	if ta.Replicas != tb.Replicas {
		return ta.Replicas < tb.Replicas
	}
	if ga.Leaders != gb.Leaders {
		return ga.Leaders < gb.Leaders
	}
	return ga.Replicas < gb.Replicas
}

func lessFollower(ra int, ta, ga Load, rb int, tb, gb Load) bool {
	if ra != rb {
		return ra < rb
	}
	if ta.Replicas != tb.Replicas {
		return ta.Replicas < tb.Replicas
	}
	return ga.Replicas < gb.Replicas
}

// rackAlternating orders brokers as Kafka's rack-aware assignment does:
// racks sorted by name, brokers in a rack by id, then interleaved.
func rackAlternating(brokers []PlacementBroker) []PlacementBroker {
	byRack := make(map[string][]PlacementBroker)
	for _, b := range brokers {
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	racks := make([]string, 0, len(byRack))
	for r, bs := range byRack {
		racks = append(racks, r)
		sort.Slice(bs, func(i, j int) bool { return bs[i].ID < bs[j].ID })
	}
	sort.Strings(racks)
	out := make([]PlacementBroker, 0, len(brokers))
	for i := 0; len(out) < len(brokers); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}
