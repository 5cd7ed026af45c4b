// Package share is the pure core of KIP-932 share groups (Kafka's
// "queues"): the state of one share-partition, a topic-partition consumed
// by a share group, as a state machine with time as an input, like the
// group and txn cores; the share-group coordinator's membership and
// assignment (Groups); and the share-session cache (Sessions). It reads no
// clock (every transition takes nowMs), does no I/O, starts no goroutine
// and takes no lock; its owner (package server's share.go) serializes
// calls, persists the writes it asks for and runs the timers it names.
//
// It is a package of its own, not group/share: a share-partition's state
// belongs to the leader of the topic-partition (KIP-932's share-partition
// leader) and is persisted in the share-group state topic, while package
// group is the group coordinator over __consumer_offsets.
//
// # Files
//
//	partition.go  Partition: record states, Acquire, Acknowledge, Tick (lock
//	              expiry), ReleaseMember, DeadLettered, AdvanceLogStart,
//	              ResetStart, SetConfig, Snapshot; Effects
//	state.go      State and StateBatch, the persistent form (what
//	              __share_group_state records), State.Apply (merging a
//	              ShareUpdate into a ShareSnapshot), Restore's validation
//	group.go      Groups: ShareGroupHeartbeat membership (client member
//	              ids, member epochs, FENCED_MEMBER_EPOCH, leave),
//	              session timeouts (Expire), KIP-932's simple assignor
//	session.go    Sessions: share sessions and their epochs (0 opens, -1
//	              closes, otherwise the next epoch), partitions added and
//	              forgotten
//	record.go     the __share_group_state record a shell writes: StateKey,
//	              StatePartition, EncodeState/DecodeState
//	config.go     Config (group.share.record.lock.duration.ms,
//	              group.share.delivery.count.limit,
//	              group.share.partition.max.record.locks, dead letters) and
//	              share.auto.offset.reset (ParseReset, Reset.Timestamp)
//	deadletter.go the names of KIP-1191's dead-letter topics: the context
//	              headers, the topic config that allows a topic to be one,
//	              the broker's name prefix and its default
//
// # Model
//
// The window holds the offsets [SPSO, end): the share-partition start
// offset and one past the highest offset acquired so far (Kafka's SPEO is
// end-1). Every offset in it is AVAILABLE, ACQUIRED (by one member, with a
// lock that expires at a time), ACKNOWLEDGED, ARCHIVED or, with a
// dead-letter topic, ARCHIVING; below it everything is done, above it
// nothing was delivered. Each offset has a delivery count.
//
//   - Acquire(now, member, max, logEnd) locks AVAILABLE records of the
//     window first, then new records from end up to logEnd (the high
//     watermark, or the last stable offset for read_committed), counting a
//     delivery each and locking them until now + the lock duration. New
//     records are not taken past group.share.partition.max.record.locks
//     offsets of window, and never more than max records (KIP-1206's
//     record_limit acquire mode; Kafka's default batch_optimized mode may
//     overshoot both to a batch boundary, which the shell can do by
//     passing a larger max). The result is ShareFetch's AcquiredRecords.
//     For read_committed the shell archives the acquired records of
//     aborted transactions with an AckGap acknowledgement on the
//     member's behalf, as Kafka archives them before answering.
//   - Acknowledge(now, member, batches) with ShareAcknowledge's types:
//     ACCEPT -> ACKNOWLEDGED, RELEASE -> AVAILABLE, REJECT -> ARCHIVED,
//     GAP -> ARCHIVED, RENEW (KIP-1222, Kafka 4.2) extends the lock. All or
//     nothing: an offset outside the window, not ACQUIRED or ACQUIRED by
//     another member refuses the whole call with INVALID_RECORD_STATE and
//     Kafka's messages ("Member is not the owner of batch record", "The
//     batch cannot be acknowledged. The batch is not in the acquired
//     state.", "Batch record not found. ..."); a malformed batch is
//     INVALID_REQUEST.
//   - Locks due at now expire at the start of every transition (and in
//     Tick; NextDeadline says when): the record goes back to AVAILABLE, or
//     to ARCHIVED once its delivery count reached
//     group.share.delivery.count.limit. RELEASE and ReleaseMember (share
//     session closed) do the same.
//   - The SPSO moves past the ACKNOWLEDGED/ARCHIVED head of the window;
//     AdvanceLogStart moves it to a new log start offset; ResetStart
//     (AlterShareGroupOffsets, only with nothing acquired) sets it and
//     bumps the state epoch. A new share-partition starts where
//     share.auto.offset.reset says: Reset.Timestamp is the ListOffsets
//     timestamp whose offset the shell passes to New.
//
// # Dead letters
//
// With Config.DeadLetter, a REJECT or a record reaching the delivery
// count limit goes to ARCHIVING (with its Reason) instead of ARCHIVED: the
// transition lists it in Effects.DeadLetters, ARCHIVING is persisted, the
// SPSO cannot pass it, and only DeadLettered (the shell wrote it to the
// dead-letter topic) archives it. After a failover Restore brings the
// ARCHIVING records back and DeadLetters lists them to be written again,
// so a record is never archived without its dead letter (the write may
// repeat: at least once). ARCHIVING records take room in the window, so a
// dead-letter topic that cannot be written stops new acquisitions
// (back-pressure) instead of growing a backlog.
//
// # Persistence
//
// Every transition that changes the persistent state returns
// Effects.Write, a ShareUpdate: the SPSO and the state batches
// (FirstOffset, LastOffset, DeliveryState, DeliveryCount) of the offsets
// it changed; Snapshot is the whole state (a ShareSnapshot); State.Apply
// merges an update into a snapshot as the share coordinator does; Restore
// rebuilds a Partition from it. ACQUIRED is not persisted: as KIP-932
// specifies, an acquired record with delivery count n is written as
// AVAILABLE with n-1, so a restarted leader delivers it again and the
// delivery under way is forgotten; acquiring therefore writes nothing.
// Strata adds ARCHIVING (3, an id Kafka does not use) and its reason.
// The tests check that the writes a partition emitted, applied in order
// to its initial state, equal its Snapshot, and that Restore of it has the
// same Snapshot, after every step of random runs against a naive
// reference model.
//
// # Shell (package broker/sharehost; server's 76-79 and 90-92 handlers)
//
// The broker hosts ShareGroupHeartbeat,
// ShareGroupDescribe, ShareFetch, ShareAcknowledge and the share-group
// offset admin APIs (Describe/Alter/DeleteShareGroupOffsets) over these
// cores, with one mutex for all of them, a periodic tick (lock expiries,
// member session timeouts, closed connections, waiting fetches) and a
// retry loop that answers a waiting ShareFetch as soon as a high
// watermark moves or records become available again. State durability is
// KIP-932's way in spirit: every transition that returns a Write appends
// the share-partition's whole Snapshot (Strata's encoding: a versioned key
// and JSON, not Kafka's ShareSnapshot/ShareUpdate schema) to the compacted
// internal topic __share_group_state, the request is answered once that
// append is durable, and a restarted broker Restores each share-partition
// from its last snapshot. Membership is not persisted; a coordinator that
// takes over adopts the members whose heartbeats carry their subscription,
// at their epochs (Groups), so their share sessions and acknowledgements
// survive the move.
// In a cluster the share-partition is its partition leader's, the state
// topic is replicated, and a new leader loads the share-partition from its
// replica (broker/sharehost/cluster.go), reading it without the mutex and
// taking it only to install the result (broker/sharehost/load.go); a
// member that leaves is announced to the other brokers with retries.
//
// # Embedded shell (package engine, sharegroup.go)
//
// Engine.ShareGroup runs the same Partition for in-process members
// (Acquire, Accept/Release/Reject/Renew, Leave) under one mutex per group,
// with the engine's clock, and persists snapshots to __share_group_state
// with the same keys and values as the server (record.go), so either shell
// restores the other's share-partitions. It has no dead-letter writer: its
// partitions run without Config.DeadLetter.
//
// # Not here yet (issue 24)
//
// A share coordinator of Kafka's kind (the state topic's partition
// leaders holding the state, FindCoordinator key type SHARE), acquisitions
// aligned to batches, and ShareUpdate records smaller than whole
// snapshots. The dead-letter writer (KIP-1191 configs and headers) is the
// broker's (broker/sharehost/dlq.go).
package share
