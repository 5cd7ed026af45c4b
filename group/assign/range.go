package assign

// Range is Kafka's RangeAssignor: per topic, the subscribed members (in
// Kafka member order) take contiguous ranges of n/m partitions, the first
// n%m one more.
func Range(members []Member, topics Topics) (Assignment, error) {
	in, err := prepare(members, topics)
	if err != nil {
		return nil, err
	}
	owner := make([]int32, in.n)
	for ti, el := range in.eligible {
		n, m := int(in.counts[ti]), len(el)
		per, extra := n/m, n%m
		start := in.offset[ti]
		for i, mi := range el {
			length := per
			if i < extra {
				length++
			}
			for g := start; g < start+length; g++ {
				owner[g] = int32(mi)
			}
			start += length
		}
	}
	return in.build(owner)
}

// RoundRobin is Kafka's RoundRobinAssignor: all subscribed partitions in
// (topic, partition) order are dealt over the members in Kafka order in a
// circle, skipping members not subscribed to the partition's topic.
func RoundRobin(members []Member, topics Topics) (Assignment, error) {
	in, err := prepare(members, topics)
	if err != nil {
		return nil, err
	}
	owner := make([]int32, in.n)
	m := len(in.members)
	cursor := 0
	for ti := range in.topics {
		for g := in.offset[ti]; g < in.offset[ti+1]; g++ {
			// Bounded: the topic has at least one subscriber among m members.
			for skip := 0; !in.subscribed(cursor, ti); skip++ {
				if skip >= m {
					return nil, errInternal
				}
				cursor = (cursor + 1) % m
			}
			owner[g] = int32(cursor)
			cursor = (cursor + 1) % m
		}
	}
	return in.build(owner)
}
