// Package group is the consumer-group coordinator: the classic group
// membership protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), the
// committed offsets (OffsetCommit, OffsetFetch, OffsetDelete) and the group
// listing and deletion APIs, with everything stored in the compacted
// internal topic __consumer_offsets. Assignors live in group/assign.
//
// # Layers
//
// Group is a pure state machine per group (group.go): Empty,
// PreparingRebalance, CompletingRebalance, Stable and Dead, as Kafka's
// GroupMetadata. It takes the current time (Unix ms) as an argument, reads
// no clock and does no I/O; a transition returns Effects (a metadata record
// to write) and answers delayed requests through callbacks it stores
// (JoinGroup waits for the rebalance, SyncGroup for the leader's
// assignment and its write). Tests drive it with a fake clock.
//
// Coordinator (coordinator.go) owns the groups of the __consumer_offsets
// partitions loaded on this broker, one shard per partition: a group
// belongs to partition PartitionFor(id) (Kafka's abs(hashCode) % 50), and
// the broker that leads that partition is its coordinator. LoadPartition
// replays a partition (offset commits, group metadata, tombstones) and
// UnloadPartition drops it, so the cluster layer can move coordinators
// with partition leadership. It writes through the Log interface; the
// server implements Log over the engine, so group never imports the engine.
//
// # Records (Kafka's schemas, big-endian, strings int16-length-prefixed)
//
//	offset commit key v1    int16 1 | string group | string topic | int32 partition
//	offset commit value v3  int16 3 | int64 offset | int32 leader epoch | string metadata |
//	                        int64 commit timestamp ms
//	group metadata key v2   int16 2 | string group
//	group metadata value v3 int16 3 | string protocol type | int32 generation |
//	                        nullable string protocol | nullable string leader |
//	                        int64 state timestamp | int32 count | members
//	  member                string member id | nullable string instance id | string client id |
//	                        string client host | int32 rebalance timeout | int32 session timeout |
//	                        bytes subscription | bytes assignment
//
// A null value is a tombstone (offset deleted, group deleted). Offset keys
// v0 and values v0..v4 and group values v0..v4 are read too; keys of other
// versions (KIP-848 records) are skipped. kmsg's generated types do the
// encoding, and DecodeRecord is fuzzed.
//
// # Timing
//
// Session timeouts, rebalance timeouts, KIP-394 pending members, pending
// syncs, and the initial rebalance delay (group.initial.rebalance.delay.ms)
// are deadlines checked by Group.Tick. A pending sync is Kafka's
// pendingSyncMembers: when a rebalance's join phase completes, every member
// has the group's rebalance timeout to send SyncGroup; those that have not
// by then are removed (their late SyncGroup or Heartbeat gets
// UNKNOWN_MEMBER_ID) and the group rebalances again (the others' heartbeats
// get REBALANCE_IN_PROGRESS). The Coordinator's one goroutine calls Tick
// every Config.TickMs for groups with a due deadline, so a deadline fires
// at most TickMs late. No goroutine waits per member or per request.
//
// # Retention
//
// offsets.retention.minutes (Config.OffsetsRetentionMs, KIP-211): once a
// group has been Empty that long its offsets are deleted (tombstones), and
// a live consumer group's offsets of topics no member subscribes to expire
// that long after their commit; offsets committed only by simple commits
// (a group that never had members) expire one by one from their commit
// time. The check runs once a minute on the timer goroutine. An Empty
// group with no offsets left is dropped and its metadata tombstoned.
//
// # KIP-848 consumer groups
//
// consumer.go: ConsumerGroupHeartbeat with the assignment computed here
// (group/assign Uniform or Range) and handed out incrementally, revoking
// before reassigning, so a partition never has two owners. A group id is
// either classic or consumer; an empty group converts to whichever protocol
// joins it. Consumer group membership is not persisted (offsets are).
//
// regex.go: SubscribedTopicRegex subscriptions, resolved with Kafka's
// rules: RE2 syntax, a pattern matches a topic's whole name, and every
// topic is a candidate, internal topics (__consumer_offsets,
// __transaction_state) included, as in Kafka's group coordinator. The
// resolution is redone on every heartbeat, so a topic created or deleted
// moves the group epoch.
//
// # Not implemented
//
// KIP-848 records in __consumer_offsets (skipped on load), and the
// classic-to-consumer online upgrade of a group with members (refused:
// INCONSISTENT_GROUP_PROTOCOL / GROUP_ID_NOT_FOUND).
//
// # Transactional offset commits
//
// txnoffsets.go: TxnOffsetCommit writes the offsets as a transactional
// batch of the producer (TxnLog.AppendTxn) and stages them per producer id
// until the transaction's marker (CompleteTxn: COMMIT applies, ABORT
// drops); loading keeps a transactional batch's offsets staged until that
// producer's control batch further on in the log.
//
// # Concurrency
//
// See Coordinator. Lock order: a shard's mutex is the only lock in this
// package; it is never held while calling Log.Append (whose callback takes
// it), and member callbacks run under it.
package group
