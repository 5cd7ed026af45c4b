// Package assign holds the consumer-group partition assignors: Range,
// RoundRobin, Sticky, CooperativeSticky and the KIP-848 server-side Uniform
// assignor. They are plain, pure functions from a member list and a topic
// catalogue to an Assignment; they do no I/O, read no clock and keep no
// state, so the classic coordinator (client-side assignment is computed by
// the group leader, but the embedded API and tests compute it here), the
// KIP-848 heartbeat path and the embedded API all call them directly.
//
// # Inputs and outputs
//
// A Member carries its id, optional static instance id, subscribed topics,
// the partitions it currently owns (Owned, with the Generation in which it
// owned them) and an optional rack. Topics maps a topic name to its partition
// count. Only topics that are both subscribed by some member and present in
// Topics with a positive count are assigned; subscriptions to unknown topics
// are ignored. Owned partitions that no longer exist, or whose topic the
// member no longer subscribes to, are ignored.
//
// The Assignment has an entry for every member (an empty, non-nil slice when
// it gets nothing); each slice is sorted by (topic, partition). Every
// assignor guarantees, for every input:
//
//   - every partition of every subscribed topic is assigned to exactly one
//     member, and only to a member subscribed to its topic;
//   - the output is a function of the input only: member order, topic order
//     and Go map iteration order do not change it.
//
// Members are ordered the way Kafka's AbstractPartitionAssignor.MemberInfo
// orders them: members with an instance id first, by instance id, then the
// others by member id (member id breaks remaining ties).
//
// # Range
//
// Kafka's RangeAssignor. Per topic, the subscribed members in the order above
// split the partitions into contiguous ranges; with n partitions and m
// members each gets n/m and the first n%m get one more. Balanced per topic,
// not across topics (the first members accumulate the extras). Rack-aware
// range (KIP-881) is not implemented: Rack is carried but unused.
//
// # RoundRobin
//
// Kafka's RoundRobinAssignor: all subscribed partitions sorted by (topic,
// partition) are dealt over the ordered members in a circle, skipping members
// not subscribed to the partition's topic. With identical subscriptions the
// sizes differ by at most one.
//
// # Sticky and Uniform
//
// Sticky (Kafka's StickyAssignor) and Uniform (the KIP-848 server-side
// "uniform" assignor) compute a balanced assignment that keeps as many
// currently owned partitions as possible. Balanced means Kafka's definition:
// no member A holding a partition of topic t has two or more partitions more
// than any member subscribed to t. In particular members with identical
// subscriptions differ by at most one.
//
// Ownership claims are validated first. Sticky is generation aware: when two
// members claim the same partition the claim from the higher Generation wins;
// claims tied at the highest generation are all invalidated (Kafka logs this
// as a bug and treats the partition as unowned). Uniform ignores Generation
// (the server holds the authoritative current assignment, so claims never
// legitimately conflict); any conflicting claim is invalidated.
//
// When all members have the same subscription (the common case) the result
// is optimal: with n partitions and m members, n%m members get ⌈n/m⌉ and the
// rest ⌊n/m⌋, the ⌈n/m⌉ slots go first to members that already own that
// many, each member keeps the first partitions of its claim up to its quota,
// and the freed and unowned partitions fill the deficits in member order,
// walking partitions in (partition, topic) order so each member's new share
// spreads across topics. No other balanced assignment moves fewer owned
// partitions (the property tests check this against exhaustive search). Cost
// O(n log n + m log m) time, O(n + m) memory.
//
// With differing subscriptions the assignor keeps every valid claim, places
// unowned partitions (topics with fewest subscribers first) on the least
// loaded subscribed member, then moves partitions one at a time from the most
// loaded holder of a topic to the least loaded subscriber while they differ
// by two or more, preferring partitions the holder did not previously own.
// Every move lowers the sum of squared sizes, so the loop ends, and it ends
// exactly when the assignment is balanced. Stickiness is then best effort, not
// proven minimal (about 1 in 500 small random cases moves one partition more
// than exhaustive search finds necessary). Cost O(n·m) for placement plus
// O(m) per balancing move.
//
// # CooperativeSticky
//
// Kafka's CooperativeStickyAssignor (incremental rebalance, KIP-429): the
// target is Sticky's, but a partition another member still holds is left out
// of this round, so the holder revokes it first and no partition ever has
// two consumers. A member holds a partition its Owned list names (subscribed
// or not) unless a valid claim from a strictly newer generation beat it: a
// member with a stale generation has already lost its partitions, as in
// Kafka. After the members revoke and rejoin with Owned equal to what they
// were given, the next round grants the rest. With identical subscriptions
// that second round needs no revocation and equals the first round's target
// exactly (the quota choice and the in-order fill are stable under removing
// already placed partitions); with differing subscriptions the property
// tests see convergence within three rounds, but it is not proven.
//
// # Limits
//
// At most MaxPartitions partitions across subscribed topics and MaxMembers
// members; negative partition counts and duplicate member ids are errors.
// Untrusted input never panics.
//
// # Concurrency
//
// All functions are safe for concurrent use; they do not retain or modify
// their arguments.
package assign
