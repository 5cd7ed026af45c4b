// Package txn is Strata's part of Kafka's exactly-once machinery outside the
// partition logs: producer id allocation and the transaction coordinator's
// state machine, its __transaction_state records and the transaction
// marker (control) batches (issue 8). Per-partition idempotence state (sequence numbers, the
// last five batches of every producer, snapshots) lives with the log in
// package engine; this package knows nothing of the wire protocol, which
// package server speaks.
//
// # Producer ids
//
// InitProducerId hands every producer a 64-bit id that no other producer
// of the cluster ever receives. As in Kafka (KIP-730), a broker takes ids in
// blocks of BlockSize from a BlockSource and hands them out one by one
// (IDManager). In cluster mode the blocks come from the controller quorum
// (Kafka's AllocateProducerIds): the broker proposes
// controller.AllocateProducerIDs{broker id, broker epoch}, the FSM hands out
// [next, next+BlockSize) and advances next, which is part of the Raft log
// and snapshots (controller/producerids.go; the source is
// broker/txnhost/producer_ids.go, which prefetches the next block and retries
// while the quorum has no leader until the InitProducerId request's context
// ends). The controller's ids
// start at (MaxFileNodeID+1)<<47 = 2^63-2^47 (controller.FirstProducerID),
// above every node's file range, so a cluster that used FileBlockSource
// before never repeats an id. A single broker (no controller) persists its
// blocks in its data directory (FileBlockSource), taken from its own share
// of the id space (node n: [n<<47, (n+1)<<47)).
//
// FileBlockSource's file, <data dir>/producer-id-block, is text:
//
//	version: 1
//	next_producer_id: <n>
//
// where n is the first id not yet handed out in any block. Allocating a
// block [n, n+BlockSize) first makes next_producer_id = n+BlockSize durable
// (write a temporary file, fsync, rename, fsync the directory), and only then
// returns the block, so after a crash or restart ids never repeat: at worst
// the unused rest of a block is skipped. A file that does not parse is an
// error, never a reason to start again at 0.
//
// # Transaction coordinator
//
// Coordinator is Kafka's TransactionCoordinator + TransactionMetadata for
// one partition of the internal topic __transaction_state (50 partitions,
// replication 3, cleanup.policy=compact, like transaction.state.log.*); a
// transactional id belongs to partition abs(javaStringHashCode(id)) % 50
// (FindCoordinator key type 1 answers that partition's leader). It is a
// pure state machine: no I/O, no clock (every call takes nowMs), no
// goroutines. Each call returns a Step the caller executes in order:
//
//  1. Write: append the record (EncodeKey(id), EncodeValue(md); a nil
//     value, a tombstone, for Dead) to the partition with acks=all and
//     call WriteDone(id, ok) — the transition is applied only then; until
//     then every other request for the id gets CONCURRENT_TRANSACTIONS;
//  2. Markers: send WriteTxnMarkers for the partitions (grouped by leader;
//     retry each partition until it succeeds or the topic is gone), then
//     call MarkersDone, whose Step writes Complete*;
//  3. Reply: answer the waiting client.
//
// States and transitions (Kafka's numbering, persisted):
//
//	Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn--> PrepareCommit|PrepareAbort
//	Prepare* --markers written--> CompleteCommit|CompleteAbort --Add--> Ongoing
//	Ongoing --InitProducerId (fence) or timeout--> PrepareAbort with epoch+1
//	Empty|Complete* --InitProducerId--> Empty with epoch+1 (or a new id when the epoch is exhausted)
//	Empty|Complete* --idle transactional.id.expiration.ms--> Dead (tombstone, forgotten)
//
// PrepareEpochFence is never written (the fence is folded into the
// PrepareAbort record); it is accepted on load as Ongoing.
//
// Errors are Kafka's, checked in Kafka's order: INVALID_REQUEST (empty
// id), INVALID_TRANSACTION_TIMEOUT (<= 0 or > transaction.max.timeout.ms),
// INVALID_PRODUCER_ID_MAPPING (unknown id or other producer id),
// PRODUCER_FENCED (other epoch), CONCURRENT_TRANSACTIONS (a write in
// flight, or Prepare*), INVALID_TXN_STATE (EndTxn not matching the state).
// The server maps PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for requests
// older than the versions that know it (InitProducerId < v4, AddPartitions
// < v2, AddOffsets < v2, EndTxn < v2), as Kafka's KafkaApis does, and
// answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS itself (this
// broker does not lead the partition / Load not finished).
//
// KIP-360: InitProducerId v3+ with the producer's current id and epoch
// bumps it (the retry of a bump that succeeded gets the same epoch back
// through LastProducerEpoch; a rotation through PrevProducerID). KIP-890:
// partition leaders call VerifyPartitions (AddPartitionsToTxn v4+
// verifyOnly) before appending a transactional batch of a TV1 client;
// for TV2 clients (Produce v12+, EndTxn v5+) the leader calls
// AddPartitions itself, and every EndTxn bumps the epoch (markers carry
// the bumped epoch; the reply carries the new id and epoch; at
// MaxInt16-1 the end rotates to NextProducerID). AddPartitionsToTxn v4+
// batches many transactions: the server calls AddPartitions once per
// transaction. AddOffsetsToTxn is AddPartitions with the group's
// __consumer_offsets partition; TxnOffsetCommit (package group) stages
// offsets per producer id and applies or drops them on that partition's
// marker.
//
// Loading: a new leader of a __transaction_state partition calls Load on
// every record in offset order (the last record of an id wins; a tombstone
// forgets it), then Recover, whose Steps resend the markers of Prepare*
// transactions with the new coordinator epoch (its leader epoch) and
// complete them. Ongoing transactions are aborted by Tick when they time
// out. Tick (every 10 s, Kafka's
// transaction.abort.timed.out.transaction.cleanup.interval.ms) aborts
// timed-out transactions and expires idle ids.
//
// Records: key {version int16 0, transactionalId string}; value v0
// {producerId int64, producerEpoch int16, timeoutMs int32, state int8,
// partitions [topic string, [partition int32]], lastUpdateMs int64,
// startMs int64}; v1 is the flexible form with tagged fields
// PreviousProducerId (0), NextProducerId (1), ClientTransactionVersion
// (2), written only when one of them differs from its default. Decoding
// checks every field and never panics (FuzzDecodeValue).
//
// Markers: AppendMarkerBatch builds the control batch a partition leader
// appends for WriteTxnMarkers: batch v2, attributes transactional|control,
// the producer's id and (marker) epoch, base sequence -1, one record with
// key {version 0, type 0 abort / 1 commit} and value {version 0,
// coordinatorEpoch int32}. ParseMarker reads one back.
//
// # The partition side (package engine: txn.go, txnindex.go; server: 27_write_txn_markers.go)
//
// WriteTxnMarkers on a partition leader: reject a coordinator epoch below
// the one last seen for the producer (TRANSACTION_COORDINATOR_FENCED) and
// a marker epoch below the producer's (INVALID_PRODUCER_EPOCH); append
// AppendMarkerBatch; the producer's state (engine/producers.go) records
// the coordinator epoch, bumps its epoch to the marker's and clears its
// open transaction.
//
// Producer state per partition gains currentTxnFirstOffset: set by the
// first transactional batch of a producer, cleared by its marker. The set
// of open transactions, ordered by first offset, gives the last stable
// offset: LSO = min(first offset of every open transaction, high
// watermark). Fetch read_uncommitted reads to the high watermark,
// read_committed (isolation_level 1) to the LSO; ListOffsets latest with
// read_committed returns the LSO. The LSO is snapshotted and rebuilt with
// the producer state, so it survives restarts and leader changes.
//
// Aborted transaction index: when an ABORT marker is appended at offset M
// for a transaction whose first offset is F, the entry {producerId, F,
// lastOffset M, LSO at that time} is appended to the segment's .txnindex
// (Kafka's layout: version int16 0, producerId int64, firstOffset int64,
// lastOffset int64, lastStableOffset int64 = 34 bytes), fsynced with the
// segment, and kept in memory for the active segment. A read_committed
// Fetch returns, for the fetched range [start, end), every entry with
// lastOffset >= start and firstOffset < end (from the segments the range
// covers) as AbortedTransactions {producerId, firstOffset}; clients drop
// the batches of those producers from firstOffset up to their ABORT
// marker, and always skip control batches. The index is rebuilt from the
// log when a segment is recovered, and removed with its segment.
//
// Hung transactions cannot hold the LSO forever: the coordinator aborts
// them after their timeout (Tick), and a partition leader whose open
// transaction is older than transaction.max.timeout.ms plus a margin
// reports it (DescribeProducers, ListTransactions) for an operator abort.
//
// # Concurrency
//
// IDManager and FileBlockSource are safe for concurrent use; IDManager holds
// its mutex while it fetches a block (one fsync per BlockSize ids).
// Coordinator is not: the server owns one per led __transaction_state
// partition and serialises calls with a mutex (held across a call, never
// across the write or the markers: the Step is executed after unlocking,
// and WriteDone/MarkersDone re-lock). Metadata values returned in Steps
// and by Get are copies.
package txn
