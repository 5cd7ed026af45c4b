// Package batcher builds record batches on the producing side: the
// Accumulator (accumulator.go) keeps per-partition record.Builder batches
// closed by linger time and size, with time passed in as an input rather
// than read from a clock. Keyed records go to partitioner.KeyPartition,
// Kafka's default keyed partitioner.
package batcher
