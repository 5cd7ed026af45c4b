// Package ntcopy copies large byte ranges with non-temporal stores: the
// destination's cache lines are written to memory without being read into
// the caches first and without evicting what the caches hold.
//
// The broker copies every produced batch into its segment's chunk (package
// segment), and nothing reads those bytes through the CPU's caches soon
// after: the device reads them by DMA (the segment's O_DIRECT write, the
// journal's write from the chunk), readers come later. An ordinary copy of
// a cold destination first reads each of its lines into the cache (a read
// for ownership), then writes it back when it is evicted, and the copy of
// a keyed produce request (~5.6 MB over 96 partitions) evicts the caches
// that the client sharing the machine works from. Copying 96 batches of 60
// KiB from a cold 5.6 MB buffer into cold 128 KiB chunks ran at ~11 GB/s
// with the runtime's copy and ~17 GB/s with these stores on the
// development VM (BenchmarkCopy).
//
// On amd64 Copy uses VMOVNTDQ (AVX) or MOVNTDQ (SSE2) for the 32-byte
// aligned body of copies of MinBytes or more and ends with SFENCE, so the
// bytes are visible before anything the caller does after Copy returns;
// elsewhere, or below MinBytes, it is the built-in copy.
package ntcopy

// MinBytes is the smallest copy that uses non-temporal stores: below it
// the destination's partial lines and the fence cost more than the read
// for ownership saves.
const MinBytes = 8 << 10

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns
// that count, as the built-in copy does. Overlapping ranges are copied by
// the built-in copy.
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < MinBytes || !available || overlap(dst[:n], src[:n]) {
		return copy(dst, src)
	}
	// Head: up to the first 32-byte boundary of dst. Body: whole 128-byte
	// blocks from there. Tail: the rest.
	head := int(-addr(dst) & 31)
	body := (n - head) &^ 127
	copy(dst[:head], src[:head])
	copyBody(dst[head:head+body], src[head:head+body])
	copy(dst[head+body:n], src[head+body:n])
	return n
}

// overlap reports whether a and b (non-empty) share a byte.
func overlap(a, b []byte) bool {
	pa, pb := addr(a), addr(b)
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
