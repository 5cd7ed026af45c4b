// Package txnhost is the broker runtime's part of transactions (issue 19):
// what hosts the transaction coordinator outside the protocol layer. Package
// server decodes the requests and encodes the answers; this package owns
// the producer-id blocks the controller quorum hands out. It does not
// import server: the broker reaches it through small interfaces (Proposer,
// Clock) and function fields, and it reads no wall clock.
//
// # Files
//
//   - producer_ids.go: ControllerBlocks, a txn.BlockSource whose blocks
//     are AllocateProducerIDs commands committed through the metadata
//     quorum, with one block prefetched.
//   - clock.go: Clock, the package's only source of time.
package txnhost
