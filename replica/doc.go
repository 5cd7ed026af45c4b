// Package replica runs the leader and follower roles of replicated
// partitions, as Kafka's ReplicaManager, Partition and ReplicaFetcherThread
// do: followers pull from leaders with Fetch requests carrying their replica
// id; the leader tracks every follower's position, advances the high
// watermark (HW), shrinks and expands the in-sync replica set (ISR) through
// the controller, and followers that come back with a stale log truncate
// their divergent tail by leader epoch before fetching.
//
// It knows nothing of the client protocol beyond the two requests a follower
// sends (Fetch v15 with ReplicaState: its replica id and broker epoch,
// KIP-903; OffsetForLeaderEpoch v4), which it encodes with kmsg over plain
// TCP connections of its own.
//
// # Files
//
//	doc.go             this overview
//	core.go            the pure core of one partition: role and epochs,
//	                   the leader's follower positions, HW, ISR shrink and
//	                   expand, the controller's answers; CheckProduce's and
//	                   WaitReplicated's decisions (checkProduce, ackResult)
//	core_follower.go   the follower's decisions as pure functions: where to
//	                   truncate, what a fetch error or an append error means,
//	                   when to fetch, log start, damaged-mark clearing, backoff
//	partition.go       the shell around a core: partition (the lock, the log,
//	                   the atomics the produce path reads), the engine's
//	                   ReplicationHandler, AlterPartition calls, the ISR ticker
//	manager.go         Manager, Config and the exported types: BecomeLeader,
//	                   BecomeFollower, Stop, CheckProduce, WaitReplicated,
//	                   Status; fetchers started and stopped per source broker
//	fetcher.go         one fetcher goroutine per source broker: the Fetch and
//	                   OffsetForLeaderEpoch round trips over its own
//	                   connection, carrying out core_follower.go's decisions
//	wire.go            the response frame bound
//
// # Core and shell
//
// The replication decisions are made by code that does no I/O, starts no
// goroutine and reads no clock, as in the group and txn packages: the
// leader's partition state is a core (core.go) whose methods take the
// current time (Unix ms) and what the shell read of the log (logPos: log
// end, durable end, HW, start of the current leader epoch) and return
// actions, which the shell carries out in order: propose an ISR change
// (AlterPartition to the controller, one in flight, its answer handed back
// to core.alterDone) and advance the HW (Log.AdvanceHighWatermark, outside
// the partition's lock). The follower's decisions (truncation offset, what
// an error code means, whether a partition fetches now) are pure functions
// in core_follower.go that the fetcher applies. The shells (partition.go,
// manager.go, fetcher.go) own the locks, the goroutines, the sockets and the
// log calls, and read time only from Config.Now (the wall clock by
// default): follower fetch times, the ISR ticker's now, backoffs, and the
// socket deadlines the fetcher sets (net.Conn deadlines are wall-clock
// instants, so a Manager whose fetchers dial real brokers needs a clock
// that tracks the wall clock). The cores' unit tests (core_test.go,
// core_follower_test.go) drive them with explicit times and positions; the
// cluster tests (replica_test.go, harness_test.go) run the shells over
// real sockets.
//
// # API (stable: the broker's cluster wiring calls it)
//
//	m := replica.New(replica.Config{
//	        BrokerID:   1,
//	        BrokerAddr: func(id int32) (hostport string, ok bool) {...}, // live brokers' listeners
//	        ISR:        isrUpdater,                                     // AlterPartition to the controller
//	})
//	defer m.Close()
//
//	// The controller says this broker leads or follows a partition (again
//	// on every change of leader epoch, partition epoch, replicas or ISR):
//	err := m.BecomeLeader(replica.Partition{Log: l, Topic: "t", Partition: 0,
//	        Leader: 1, LeaderEpoch: 5, PartitionEpoch: 9,
//	        Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, MinISR: 2})
//	err = m.BecomeFollower(replica.Partition{... Leader: 2 ...})
//	m.Stop("t", 0) // no longer a replica here (deleted, reassigned away)
//
//	// Produce (server), per partition:
//	err = m.CheckProduce(l, acks)   // before Append: NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS
//	info, err := l.Append(batches, l.LeaderEpoch())
//	m.WaitReplicated(l, info.LastOffset, func(err error) {...}) // acks=-1: nil, or
//	                                   // NOT_ENOUGH_REPLICAS_AFTER_APPEND, or the log's error
//
//	// Fetch with replica id >= 0 (server/01_fetch.go): no Manager needed,
//	// the Log carries the leader's hook (engine/replication.go):
//	rr, err := l.ReadReplica(fetchOffset, maxBytes, first) // up to the log end, not the HW
//	err = l.FollowerFetch(replicaID, fetchOffset)          // records the follower's position
//	err = m.FollowerFetchEpoch(l, replicaID, brokerEpoch, fetchOffset) // the same, v15+: with
//	                                   // ReplicaState's broker epoch (KIP-903, below)
//	cancel := l.NotifyEnd(fetchOffset, wake)               // long poll: the log end passed the offset
//
//	st, ok := m.Status("t", 0) // role, epochs, ISR, HW, follower positions (tests, metrics)
//
// Errors returned to the server are *kerr.Error values (kerr.NotLeaderForPartition,
// kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.FencedLeaderEpoch,
// ...), possibly wrapped, so the server's errCode maps them unchanged.
//
// # Durability: what a follower's fetch offset means
//
// The guarantee is stronger than Kafka's: acks=all means the batch is durable
// (fsynced) on every ISR member. The follower tells the leader what it holds
// durably by when it fetches: a follower issues its next Fetch at offset X
// only once everything below X is durable in its own log (it appends the
// previous response with Log.AppendAsFollower and waits for its flush
// pipeline to report the durable end; with write.caching=true the written end
// counts). A response carrying records for several partitions is appended
// under the journal's hold (Config.HoldAppends, the engine's HoldJournal):
// its appends share one journal group, or groups written ahead and one
// device flush, as a produce request's do; its partitions with an error are
// handled first, outside the hold (one may restart its log from remote
// storage, and no acknowledgement of this broker waits for that). Without
// the hold the journal's writer took whatever was staged each time it was
// free: three brokers with replication factor 3, keyed closed loop, ran at
// 111.3 % of that (median of eleven alternated rounds, 92.4-125.1 %, nine
// faster) with a quarter fewer device flushes (docs/performance.md,
// "Session 51"). So for the leader a follower's fetch offset IS its durable
// offset, and the leader's HW is
//
//	HW = min(leader's durable end, fetch offset of every ISR follower)
//
// never moving backwards. Batches below the HW are therefore on disk on every
// ISR member; an acks=-1 produce waits with WaitReplicated until the HW passes
// its last offset. The leader's own durable end comes from its flush pipeline:
// a replicated Log does not advance its HW at fsync, it reports the durable
// end to the Manager (engine.ReplicationHandler.Durable), which recomputes the
// HW and calls Log.AdvanceHighWatermark.
//
// # Leader side
//
// Per follower the leader keeps: fetch offset (= durable offset), the time it
// was last caught up (Kafka's lastCaughtUpTimeMs: a fetch at or past the
// leader's log end at that fetch, or past the log end the leader had at the
// follower's previous fetch), and the time of its last fetch. Every
// replica.lag.time.max.ms/2 (30 s default) the leader drops ISR members not
// caught up within replica.lag.time.max.ms; a follower outside the ISR whose
// fetch offset reached the HW and the start of the current leader epoch is
// added. Both changes go to the controller through Config.ISR
// (AlterPartition with the leader epoch and partition epoch it knows; the
// controller refuses stale ones), one request in flight per partition; while
// it is in flight the HW is computed over the union of the current and the
// proposed ISR (Kafka's "maximal ISR"), and produce checks use the committed
// ISR. A refusal (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, ...) drops
// the proposal, back to the committed ISR, and no change is proposed until
// the next ISR check or the controller's next BecomeLeader, whichever comes
// first; then the change is computed again from the committed state and
// proposed again (as Kafka's leader does: a refusal caused by a state this
// broker has not applied yet resolves itself once it has, one caused by a
// member that was not yet eligible once it is). Other errors (unknown
// outcome) are retried after replica.fetch.backoff.ms.
//
// Broker epochs (KIP-903): a follower's Fetch carries its broker's
// registration epoch (Config.BrokerEpoch; -1 before it registered), and the
// leader checks it against its metadata view of that broker's registration
// (Config.Registration), as Kafka's Replica.updateFetchStateOrThrow and
// Partition.isReplicaIsrEligible do. A fetch carrying an older epoch than
// the registered one (the broker restarted and its old incarnation still
// fetches) is answered NOT_LEADER_OR_FOLLOWER and changes nothing: not the
// follower's position, not its caught-up time (so it cannot keep the
// member in the ISR), not the HW. Kafka compares with the alive (unfenced)
// registration only; Strata with any newer registration, fenced or not. A
// fetch without an epoch (-1: older Fetch versions, or through the engine's
// Log.FollowerFetch hook) is not checked. The leader keeps the epoch of each
// follower's last counted fetch; a follower is added to the ISR only when
// its broker is registered, neither fenced nor shutting down, and that
// epoch is -1 or the registered one; and every ISR proposal carries each
// member's epoch (AlterPartition.ISREpochs, -1 for the leader itself,
// whose broker epoch the request carries), which the controller checks
// against the member's registration (INELIGIBLE_REPLICA otherwise,
// controller.ISRMember). Without Config.Registration nothing is checked.
//
// acks=-1 and the ISR: CheckProduce refuses with NOT_ENOUGH_REPLICAS when the
// committed ISR is smaller than min.insync.replicas (nothing is appended);
// WaitReplicated answers NOT_ENOUGH_REPLICAS_AFTER_APPEND when the HW passed
// the batch but the ISR had shrunk below min.insync.replicas by then (the
// batch is committed, on fewer copies than asked), as Kafka does.
//
// On BecomeLeader with a new leader epoch the epoch is recorded in the log's
// leader-epoch cache at its log end (Log.AssignLeaderEpoch), so batches the
// new leader appends carry it and OffsetForLeaderEpoch answers correctly.
// Follower positions start unknown, so the HW waits for every ISR member's
// first fetch, as in Kafka.
//
// # Follower side
//
// One fetcher goroutine per source broker (not per partition), with its own
// TCP connection, sends one Fetch for all partitions it follows from that
// broker (replica.fetch.max.bytes per partition, replica.fetch.response.max.bytes
// per response, replica.fetch.wait.max.ms long poll). Partitions enter a
// fetcher in the "truncating" state: the fetcher asks the leader
// OffsetForLeaderEpoch for the follower's latest epoch, truncates the log to
// min(its log end, the leader's end offset for that epoch) (KIP-101/279; if
// the leader does not know the epoch, the follower walks back its own epoch
// cache), and only then fetches. OFFSET_OUT_OF_RANGE below the leader's log
// start truncates fully and restarts at the leader's log start (and if the
// first batch fetched then begins below it, because the leader's start falls
// inside that batch, the empty log restarts at the batch's base, as Kafka
// does); a compacted leader's log has offset gaps where the cleaner dropped
// whole batches, which the follower keeps as they are (a fetch at an offset
// inside a gap returns the next batch; Log.AppendAsFollower accepts a base
// offset past its log end); the follower's log start follows the leader's
// as far as its HW
// allows (DeleteRecords on the follower's log); past the
// leader's end, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH and
// NOT_LEADER_OR_FOLLOWER send the partition back through truncation after a
// backoff (leadership is moving; the Manager's next BecomeFollower brings
// the new epoch). A partition error backs the partition off for
// replica.fetch.backoff.ms, except errors that may only mean the leader has
// not applied the metadata this follower acts on yet (UNKNOWN_TOPIC_ID,
// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH:
// brokers apply the controller's records tens of milliseconds apart, up to
// 250 ms measured in a fresh three-broker cluster): those retry after 10 ms,
// doubling up to 50 ms (or replica.fetch.backoff.ms if shorter), reset by an
// answer without an error (retryAfter). With the full second, a fresh
// cluster's acks=all produces to a new topic's partitions waited ~1 s
// whenever a follower applied the creation before its leader
// (docs/performance.md, "Session 54"). A partition whose log fails
// (offline, closed) backs off alone. Connection errors close the
// connection and back off (replica.fetch.backoff.ms, doubling to 8x, reset
// on success). The follower sets its own HW to min(leader's HW, its durable
// end). While one partition waits for its flush, the next Fetch does not
// long-poll, so no partition's durable acknowledgement waits for another's
// data. Every fetched batch's CRC is checked before it is appended, from
// block sums taken as the response was read while its bytes were in the
// CPU's cache (kframe.ReadFrameSummed, engine.Log.AppendAsFollowerSummed).
//
// A replica whose log was damaged in the middle (engine: Log.Damaged, a
// mark persisted in the partition directory — recovery lost data below the
// recovery point, or MarkDamaged) is not eligible to lead: BecomeLeader
// refuses it (kerr.KafkaStorageError) and Status reports it, until, as a
// follower, it has re-fetched up to the leader's HW; then the mark is
// cleared.
//
// A leader that stops leading (BecomeFollower, Stop) answers acks=-1 waits
// still pending with NOT_LEADER_OR_FOLLOWER when they fire (after a
// truncation the offset may hold another producer's batch); a wait that
// never fires ends with the produce request's timeout.
//
// # Goroutines and locks
//
// The Manager owns: one fetcher goroutine per source broker (started when a
// first partition follows that broker, stopped when its last one leaves or at
// Close), one ISR-checker goroutine (ticker), and at most one AlterPartition
// goroutine per partition (bounded by a context Close cancels). Close stops
// all of them and waits (the logs keep their role; their handlers go inert).
//
// A partition's core is used only under partition.mu; after every call the
// shell republishes what the produce path reads without the lock (leading,
// the generation, the ISR size, min.insync.replicas) as atomics.
//
// Lock order: Manager.mu -> partition.mu -> (engine: Log.epochMu for
// EpochStartOffset); fetcher.procMu -> fetcher.mu and -> engine Log.mu (the
// fetcher truncates and appends under procMu; removing a partition takes
// procMu once so that, when it returns, the fetcher never touches that log
// again). Engine callbacks (Durable, FollowerFetch) take only partition.mu.
// AdvanceHighWatermark, which runs produce callbacks inline, is never called
// with Manager.mu or partition.mu held. The fetcher goroutine never takes
// Manager.mu, so the Manager may stop it while holding Manager.mu.
package replica
