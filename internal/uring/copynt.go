package uring

import "unsafe"

// Copying into memory the device reads (CopyNT). The broker copies every
// produced batch into its segment's chunk (package segment), and nothing
// reads those bytes through the CPU's caches soon after: the device reads
// them by DMA (the segment's O_DIRECT write, the journal's write from the
// chunk), readers come later. An ordinary copy into a cold destination
// first reads each of its cache lines (a read for ownership), then writes
// it back when it is evicted, and the copy of a keyed produce request
// (~5.6 MB over 96 partitions) evicts the caches that the client sharing
// the machine works from. Non-temporal stores write the lines to memory
// without either: copying 96 batches of 60 KiB from a cold 5.6 MB buffer
// into cold 128 KiB chunks ran at ~10.5 GB/s with the runtime's copy and
// ~15.7 GB/s with them on the development VM (BenchmarkCopyNT), and the
// copy took 26 % less of the broker's CPU per record in target 1's
// profile (docs/performance.md, "Session 52").
//
// On amd64 CopyNT uses VMOVNTDQ (AVX) or MOVNTDQ (SSE2) for the 32-byte
// aligned body of copies of CopyNTMinBytes or more and ends with SFENCE,
// so the bytes are visible before anything the caller does after it
// returns; elsewhere, or below CopyNTMinBytes, it is the built-in copy.

// CopyNTMinBytes is the smallest copy CopyNT makes with non-temporal
// stores: below it the destination's partial lines and the fence cost more
// than the read for ownership saves.
const CopyNTMinBytes = 8 << 10

// CopyNT copies min(len(dst), len(src)) bytes from src to dst and returns
// that count, as the built-in copy does. Overlapping ranges are copied by
// the built-in copy.
func CopyNT(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < CopyNTMinBytes || !copyNTAvailable || copyNTOverlap(dst[:n], src[:n]) {
		return copy(dst, src)
	}
	// Head: up to the first 32-byte boundary of dst. Body: whole 128-byte
	// blocks from there. Tail: the rest.
	head := int(-copyNTAddr(dst) & 31)
	body := (n - head) &^ 127
	copy(dst[:head], src[:head])
	copyNTBody(dst[head:head+body], src[head:head+body])
	copy(dst[head+body:n], src[head+body:n])
	return n
}

// copyNTOverlap reports whether a and b (non-empty) share a byte.
func copyNTOverlap(a, b []byte) bool {
	pa, pb := copyNTAddr(a), copyNTAddr(b)
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

func copyNTAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
