// Package txn is Strata's part of Kafka's exactly-once machinery outside the
// partition logs: producer id allocation now, the transaction coordinator
// later (issue 8). Per-partition idempotence state (sequence numbers, the
// last five batches of every producer, snapshots) lives with the log in
// package engine; this package knows nothing of the wire protocol, which
// package server speaks.
//
// # Producer ids
//
// InitProducerId hands every producer a 64-bit id that no other producer
// of the cluster ever receives. As in Kafka (KIP-730), a broker takes ids in
// blocks of BlockSize from a BlockSource and hands them out one by one
// (IDManager). A broker without a controller-backed source persists its
// blocks in its data directory (FileBlockSource), taken from its own share
// of the id space (node n: [n<<47, (n+1)<<47)), so brokers of one cluster
// never hand out the same id; a controller-backed source (Kafka's
// AllocateProducerIds through the quorum) can replace it behind the same
// interface, and should start above every node's range
// ((MaxFileNodeID+1)<<47 = 2^63-2^47 is the end of the last one) if it
// takes over a cluster that used FileBlockSource.
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
// # Concurrency
//
// IDManager and FileBlockSource are safe for concurrent use; IDManager holds
// its mutex while it fetches a block (one fsync per BlockSize ids).
package txn
