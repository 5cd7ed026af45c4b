// Package sharehost hosts share groups (KIP-932, issue 24; moved out of
// the protocol layer by issue 19, as broker/grouphost hosts the group
// coordinator). Package share holds the pure cores (share.Groups:
// membership, epochs, assignment; share.Sessions: the share-session
// cache; share.Partition: one share-partition's records, locks and
// delivery counts, time an input); package server decodes
// ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge
// and the share-group offset APIs, calls a Host between its Lock and
// Unlock, and encodes the answer. The Host owns everything beneath:
//
//   - the share-partitions, one per group and topic-partition, created on
//     the first ShareFetch or acknowledgement that names it (starting
//     where the group's share.auto.offset.reset says) or restored from
//     their last snapshot;
//   - durability: every change of a share-partition's persistent state
//     (SPSO, delivery states and counts; ACQUIRED is written as AVAILABLE
//     with one delivery less, as KIP-932 specifies) is appended as the
//     partition's whole snapshot to the compacted internal topic
//     __share_group_state (created on first use;
//     share.coordinator.state.topic.num.partitions partitions, key =
//     group, topic id and partition, share.StateKey), and the request
//     that caused it is answered only once the record is durable
//     (Broker.WhenAcked; the handler waits with WaitDurable). A group's
//     configs (IncrementalAlterConfigs on GROUP resources) are records of
//     the same topic. At start the topic is read back; a share-partition
//     is restored from its last snapshot when first used, so a restart
//     does not redeliver accepted records. The records are Strata's
//     encoding (a versioned key and a JSON snapshot), not Kafka's
//     ShareSnapshot schema;
//   - time: a coordhost.Host's periodic callback (no leader loop, only
//     Every) expires acquisition locks (Partition.Tick), member sessions
//     (Groups.Expire: their records are released), share sessions whose
//     connection closed (released as well), and retries the ShareFetches
//     waiting for records (Waiter: long polls, no goroutine each). A
//     waiting fetch is also retried at once, by the retry loop, when
//     Kick is called (the high watermark of one of its partitions moved,
//     records became available again, its MaxWaitMillis timer fired);
//   - dead-letter topics (KIP-1191, dlq.go): the writer goroutine.
//
// In a cluster (Broker.Cluster, cluster.go) a share-partition is owned
// by its topic-partition's leader and persisted in the replicated
// __share_group_state through the cluster's Produce (one ordered writer);
// a new leader loads it when first used, from its replica of the state
// partition when that replica is in the partition's ISR, else from the
// state partition's leader (ReadPartition), refusing the share-partition
// while neither can be read. That read runs without the host's lock
// (load.go: the handlers call Load before Lock, Partition installs the
// result), so a slow load does not hold up the share-partitions already
// loaded; snapshots carry the leader epoch that wrote
// them, and a deposed leader's late write is not loaded
// (docs/share-groups.md, "Share groups in a cluster"). The group's
// coordinator tells the other brokers when a member leaves or is fenced
// (MemberGone: they release its records) and when the group's configs
// change (RefreshGroupConfigs), has the leaders delete their
// share-partitions for DeleteGroups (DeleteGroup's remote keys,
// DeleteLed), and a dead-letter topic is auto-created through the
// controller (Cluster.CreateTopic).
//
// # What it needs of the broker
//
// sharehost does not import server: the broker hands it the engine,
// WhenAcked, num.partitions, a txnhost.Clock and, in a cluster, a Cluster
// (Broker). The package reads no wall clock.
//
// # Goroutines
//
// The coordhost.Host's tick, the retry loop and the dead-letter writer
// belong to the Host and end in Close, as do, in a cluster, the state
// writer and the dead-letter produces.
//
// # Files
//
//   - host.go: Config, Broker, Host — New, Close, the lock and the
//     accessors the handlers use, persistence (keys, load, append,
//     WaitDurable), Partition, Apply, the tick, Listings, DeleteGroup,
//     Known.
//   - read.go: Acquire, the read_committed archiving of aborted records,
//     ReadBatches.
//   - offsets.go: the share-group offset APIs' side (GroupKeys, Existing,
//     Reset, Forget, Lag).
//   - configs.go: the group configs (CheckGroupConfig, SetGroupConfigs,
//     GroupConfigs).
//   - dlq.go: the dead-letter writer.
//   - cluster.go: cluster mode (Cluster, the state writer, reading a
//     share-partition's state and the group's configs,
//     RefreshGroupConfigs, dropping the share-partitions led elsewhere,
//     the replicas' keys).
//   - load.go: cluster mode, loading a share-partition without the lock
//     (Load, the reads under way, installing their results).
package sharehost
