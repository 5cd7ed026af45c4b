// Package txnhost is the broker runtime's part of transactions (issue 19):
// what hosts the transaction coordinator outside the protocol layer. Package
// server decodes the requests and encodes the answers; this package owns
// the producer-id blocks the controller quorum hands out and the writer of
// transaction markers with its Kafka client. It does not
// import server: the broker reaches it through small interfaces (Proposer,
// Clock) and function fields, and it reads no wall clock.
//
// # Files
//
//   - producer_ids.go: ControllerBlocks, a txn.BlockSource whose blocks
//     are AllocateProducerIDs commands committed through the metadata
//     quorum, with one block prefetched.
//   - markers.go: MarkerWriter, which writes a transaction's COMMIT or
//     ABORT markers into every partition through WriteTxnMarkers to the
//     partitions' leaders, retrying until written, gone or fenced.
//   - client.go: Client, the coordinator's Kafka client (pooled
//     connections, one request frame and one response frame each).
//   - clock.go: Clock, the package's only source of time.
package txnhost
