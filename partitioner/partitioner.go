// Package partitioner holds Kafka's default keyed partitioner: Murmur2 and
// KeyPartition compute exactly what the Java client's DefaultPartitioner /
// BuiltInPartitioner and franz-go's StickyKeyPartitioner compute, so a
// record keyed "user-1" lands on the same partition whichever client (or
// Strata's own load generator, batcher and embedded engine API) produced
// it. It is a leaf package so that the engine (the embedded API's
// Topic.Produce) and the producer side (batcher) share it without either
// importing the other. Both functions are pure, safe for concurrent use,
// and never allocate.
package partitioner

// Murmur2 is the 32-bit MurmurHash2 with Kafka's seed 0x9747b28c, reading
// the input as little-endian 4-byte words, exactly as
// org.apache.kafka.common.utils.Utils.murmur2 (whose int arithmetic with
// unsigned shifts is this uint32 arithmetic).
func Murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// KeyPartition is the partition Kafka's default partitioner picks for a
// non-null key among partitions partitions: (murmur2(key) & 0x7fffffff) % n,
// Java's Utils.toPositive(Utils.murmur2(key)) % numPartitions. A nil key is
// hashed like an empty one; callers choose a sticky partition for null keys
// themselves. partitions must be positive; it panics otherwise, as the
// division would.
func KeyPartition(key []byte, partitions int32) int32 {
	if partitions <= 0 {
		panic("partitioner.KeyPartition: partitions must be positive")
	}
	return int32(Murmur2(key)&0x7fffffff) % partitions
}
