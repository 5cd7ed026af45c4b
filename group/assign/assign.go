package assign

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Member is one group member as an assignor sees it.
type Member struct {
	ID         string           // member id assigned by the coordinator
	InstanceID string           // group.instance.id for static members, "" otherwise
	Topics     []string         // subscription
	Owned      []TopicPartition // current assignment (sticky / cooperative input)
	Generation int32            // generation in which Owned was assigned
	Rack       string           // client.rack, optional; carried but unused
}

// Topics maps a topic name to its partition count.
type Topics map[string]int32

// Assignment maps a member id to its partitions, sorted by (topic, partition).
type Assignment map[string][]TopicPartition

// Limits on the input size; see the package doc.
const (
	MaxPartitions = 1 << 21 // partitions across all subscribed topics
	MaxMembers    = 1 << 16
)

// Errors returned for invalid input.
var (
	ErrDuplicateMember   = errors.New("assign: duplicate member id")
	ErrNegativeCount     = errors.New("assign: negative partition count")
	ErrTooManyPartitions = errors.New("assign: too many partitions")
	ErrTooManyMembers    = errors.New("assign: too many members")
	errInternal          = errors.New("assign: internal invariant violated")
)

// input is the validated, canonical form shared by all assignors. Members are
// in Kafka order; topics are the sorted subscribed topics with partitions;
// a partition is addressed by a global index g = offset[t] + p, so ascending
// g is ascending (topic, partition).
type input struct {
	members  []Member
	topics   []string
	counts   []int32
	offset   []int // offset[t] = first global index of topic t; offset[len] = n
	topicIdx map[string]int
	eligible [][]int // per topic: ascending member indices subscribed to it
	subs     [][]int // per member: ascending topic indices subscribed
	n        int
}

// memberLess orders members like Kafka's AbstractPartitionAssignor.MemberInfo:
// static members first by instance id, then dynamic ones by member id.
func memberCmp(a, b *Member) int {
	sa, sb := a.InstanceID != "", b.InstanceID != ""
	switch {
	case sa && sb:
		if c := cmp.Compare(a.InstanceID, b.InstanceID); c != 0 {
			return c
		}
	case sa:
		return -1
	case sb:
		return 1
	}
	return cmp.Compare(a.ID, b.ID)
}

func prepare(members []Member, topics Topics) (*input, error) {
	if len(members) > MaxMembers {
		return nil, fmt.Errorf("%w: %d > %d", ErrTooManyMembers, len(members), MaxMembers)
	}
	seen := make(map[string]struct{}, len(members))
	for i := range members {
		if _, dup := seen[members[i].ID]; dup {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateMember, members[i].ID)
		}
		seen[members[i].ID] = struct{}{}
	}
	in := &input{members: slices.Clone(members), topicIdx: make(map[string]int)}
	slices.SortFunc(in.members, func(a, b Member) int { return memberCmp(&a, &b) })

	total := 0
	for i := range in.members {
		for _, t := range in.members[i].Topics {
			if _, ok := in.topicIdx[t]; ok {
				continue
			}
			c, ok := topics[t]
			if !ok {
				continue
			}
			if c < 0 {
				return nil, fmt.Errorf("%w: topic %q has %d", ErrNegativeCount, t, c)
			}
			if c == 0 {
				continue
			}
			total += int(c)
			if total > MaxPartitions {
				return nil, fmt.Errorf("%w: more than %d", ErrTooManyPartitions, MaxPartitions)
			}
			in.topicIdx[t] = -1 // placeholder; indices set after sorting
			in.topics = append(in.topics, t)
		}
	}
	slices.Sort(in.topics)
	in.counts = make([]int32, len(in.topics))
	in.offset = make([]int, len(in.topics)+1)
	for i, t := range in.topics {
		in.topicIdx[t] = i
		in.counts[i] = topics[t]
		in.offset[i+1] = in.offset[i] + int(topics[t])
	}
	in.n = in.offset[len(in.topics)]
	in.eligible = make([][]int, len(in.topics))
	in.subs = make([][]int, len(in.members))
	for mi := range in.members {
		var s []int
		for _, t := range in.members[mi].Topics {
			if ti, ok := in.topicIdx[t]; ok {
				s = append(s, ti)
			}
		}
		slices.Sort(s)
		s = slices.Compact(s)
		in.subs[mi] = s
		for _, ti := range s {
			in.eligible[ti] = append(in.eligible[ti], mi) // mi ascending: sorted
		}
	}
	return in, nil
}

// subscribed reports whether member mi subscribes to topic ti.
func (in *input) subscribed(mi, ti int) bool {
	_, ok := slices.BinarySearch(in.eligible[ti], mi)
	return ok
}

// global returns the global index of tp, or -1 if it is not a partition of a
// subscribed topic.
func (in *input) global(tp TopicPartition) (g, ti int) {
	ti, ok := in.topicIdx[tp.Topic]
	if !ok || tp.Partition < 0 || tp.Partition >= in.counts[ti] {
		return -1, -1
	}
	return in.offset[ti] + int(tp.Partition), ti
}

// topicOf returns the topic index of global index g.
func (in *input) topicOf(g int) int {
	// Topics have count > 0, so offsets are strictly increasing.
	ti, found := slices.BinarySearch(in.offset, g)
	if !found {
		ti--
	}
	return ti
}

// build converts a per-partition owner array (member indices, all >= 0)
// into an Assignment.
func (in *input) build(owner []int32) (Assignment, error) {
	for _, o := range owner {
		if o < 0 {
			return nil, errInternal
		}
	}
	return in.buildPartial(owner)
}

// buildPartial is build allowing unassigned (-1) partitions.
func (in *input) buildPartial(owner []int32) (Assignment, error) {
	sizes := make([]int, len(in.members))
	for _, o := range owner {
		if int(o) >= len(in.members) {
			return nil, errInternal
		}
		if o >= 0 {
			sizes[o]++
		}
	}
	out := make(Assignment, len(in.members))
	for mi := range in.members {
		out[in.members[mi].ID] = make([]TopicPartition, 0, sizes[mi])
	}
	ti := 0
	for g, o := range owner {
		for g >= in.offset[ti+1] {
			ti++
		}
		if o < 0 {
			continue
		}
		id := in.members[o].ID
		out[id] = append(out[id], TopicPartition{in.topics[ti], int32(g - in.offset[ti])})
	}
	return out, nil
}

// emptyOwner returns an owner array of n entries set to -1.
func emptyOwner(n int) []int32 {
	o := make([]int32, n)
	for i := range o {
		o[i] = -1
	}
	return o
}
