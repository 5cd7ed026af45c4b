package assign

import (
	"fmt"
	"testing"
)

// benchCase builds members × partitions (spread over 100 topics), every
// member subscribed to every topic. owned: "none" (fresh group), "steady"
// (balanced round-robin ownership) or "leave" (steady, then the last member
// left, so its share must move).
func benchCase(members, partitions int, owned string) ([]Member, Topics) {
	const nt = 100
	topics := Topics{}
	names := make([]string, nt)
	for i := range names {
		names[i] = fmt.Sprintf("topic-%03d", i)
		topics[names[i]] = int32(partitions / nt)
	}
	ms := make([]Member, members)
	for i := range ms {
		ms[i] = Member{ID: fmt.Sprintf("member-%05d", i), Topics: names, Generation: 7}
	}
	if owned != "none" {
		k := 0
		for _, t := range names {
			for p := int32(0); p < topics[t]; p++ {
				ms[k%members].Owned = append(ms[k%members].Owned, TopicPartition{t, p})
				k++
			}
		}
	}
	if owned == "leave" {
		ms = ms[:members-1]
	}
	return ms, topics
}

func BenchmarkSticky(b *testing.B) {
	fns := map[string]func([]Member, Topics) (Assignment, error){
		"sticky": Sticky, "uniform": Uniform, "cooperative": CooperativeSticky,
	}
	for _, name := range []string{"sticky", "uniform", "cooperative"} {
		for _, owned := range []string{"none", "steady", "leave"} {
			members, topics := benchCase(1000, 10000, owned)
			b.Run(fmt.Sprintf("%s/1000x10000/%s", name, owned), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := fns[name](members, topics); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkStickyDiffering exercises the general (differing subscriptions)
// path: member i subscribes to topics i%100 .. i%100+49 (wrapping).
func BenchmarkStickyDiffering(b *testing.B) {
	members, topics := benchCase(1000, 10000, "steady")
	names := members[0].Topics
	for i := range members {
		var sub []string
		for k := 0; k < 50; k++ {
			sub = append(sub, names[(i+k)%len(names)])
		}
		members[i].Topics = sub
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sticky(members, topics); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRangeRoundRobin(b *testing.B) {
	members, topics := benchCase(1000, 10000, "none")
	b.Run("range", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Range(members, topics); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("roundrobin", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := RoundRobin(members, topics); err != nil {
				b.Fatal(err)
			}
		}
	})
}
