// Package txnhost hosts the transaction coordinator (issue 19: the broker
// runtime's part of transactions, out of the protocol layer). Package
// server decodes InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
// EndTxn, TxnOffsetCommit, DescribeTransactions, ListTransactions and
// Produce's transactional batches, calls a Host, and encodes the answer;
// the Host owns everything in between:
//
//   - a txn.Coordinator per __transaction_state partition this broker
//     leads, loaded by replaying the partition (ScanLog) and unloaded when
//     leadership moves, through the leader loop of a coordhost.Host
//     (cluster mode) or all at once on a single broker, which creates the
//     topic itself on first use;
//   - the execution of the coordinator's steps: its records appended to
//     __transaction_state and acknowledged as an acks=all produce, its
//     replies, the markers (MarkerWriter) and the Complete record after
//     them;
//   - the tick that aborts timed-out transactions and expires idle ids;
//   - the partition leaders' questions (KIP-890: PartitionsOp, locally or
//     to the remote coordinator) and the clients' adds that wait out the
//     previous transaction (ClientAdd);
//   - producer ids (NewProducerID: a txn.IDManager over the block source
//     it is given, by default in cluster mode blocks from the controller
//     quorum, ControllerBlocks).
//
// # What it needs of the broker
//
// txnhost does not import server. The broker hands it an *engine.Engine,
// a Cluster (the coordhost.Source of cluster views, the acks=all write
// check, broker addresses; nil on a single broker), a coordhost.Creator
// that proposes the topic, WhenAcked (the ack wait), a dialer, and a
// Clock; ControllerBlocks takes a Proposer and the broker epoch. The
// package reads no wall clock: timers, deadlines and the coordinator's
// "now" all come from the Clock.
//
// # Goroutines
//
// Every goroutine belongs to a Host or a ControllerBlocks and ends in its
// Close: the coordhost.Host's leader loop and tick, one goroutine per
// transaction whose markers are being written or whose write completion
// continues the step chain, the remote verifications and the waits of
// After; ControllerBlocks' prefetch. host.go says which locks guard what.
//
// # Files
//
//   - host.go: Config, Cluster, Host — New, Close, loading and unloading,
//     the tick, Do and View (a request on its partition's coordinator),
//     the step runner and the __transaction_state writes, the Complete
//     record after the markers, EnsureTopic and the coordinator lookup.
//   - verify.go: PartitionsOp (KIP-890 verification and implicit adds,
//     local or remote) and ClientAdd (waiting out
//     CONCURRENT_TRANSACTIONS).
//   - markers.go: MarkerWriter, which writes a transaction's COMMIT or
//     ABORT markers into every partition through WriteTxnMarkers to the
//     partitions' leaders, retrying until written, gone or fenced.
//   - client.go: Client, the host's Kafka client (pooled connections, one
//     request frame and one response frame each), which dials this broker
//     too (Host.NoteListener).
//   - scan.go: ScanLog, a partition replayed batch by batch (the group
//     coordinator's __consumer_offsets load uses it too).
//   - producer_ids.go: Host.NewProducerID, and ControllerBlocks, a
//     txn.BlockSource whose blocks are AllocateProducerIDs commands
//     committed through the metadata quorum, with one block prefetched.
//   - clock.go: Clock, the package's only source of time.
package txnhost
