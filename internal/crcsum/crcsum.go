// Package crcsum checksums a buffer block by block as it is filled, so that
// the CRC-32C (Castagnoli) of any range of it can later be had from the
// sums of the blocks the range covers and the bytes of its two ends.
//
// Why: a keyed closed loop's produce request is several megabytes, read
// whole before its batches are checked, and by the time a batch's CRC is
// taken its bytes have left the CPU's caches (castagnoliSSE42Triple was
// 15 % of a write-caching broker's CPU, running at a third of its speed on
// bytes in cache). The connection's reader sums each block right after the
// read that filled it, while the bytes are still in cache, and a batch's
// check then reads only its ends (the summing runs between the frame's
// reads, as the rest of it arrives).
//
// The combination is the CRC's linearity over GF(2): with raw(s, x) the
// CRC register after x from state s (no pre- or post-inversion),
// raw(s, a‖b) = raw(raw(s, a), b) and raw(s, b) = adv(s, len(b)) ⊕ raw(0, b),
// where adv(s, n), the register s advanced over n zero bytes, is linear in
// s; for n = BlockBytes it is four table lookups (shift).
package crcsum

import "hash/crc32"

// BlockBytes is the size of a summed block.
const BlockBytes = 1024

// minCombined is the shortest range Checksum combines from block sums;
// shorter ones are checksummed directly (their ends would be most of it).
const minCombined = 4 * BlockBytes

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	// shift[j][v] is adv(v<<8j, BlockBytes).
	shift [4][256]uint32
)

func init() {
	var zeros [BlockBytes]byte
	var basis [32]uint32
	for i := range basis {
		basis[i] = raw(uint32(1)<<i, zeros[:])
	}
	for j := range shift {
		for v := range shift[j] {
			var x uint32
			for bit := range 8 {
				if v&(1<<bit) != 0 {
					x ^= basis[8*j+bit]
				}
			}
			shift[j][v] = x
		}
	}
}

// raw is the CRC-32C register after p from state s, without the
// inversions crc32.Update applies on entry and exit.
func raw(s uint32, p []byte) uint32 { return ^crc32.Update(^s, castagnoli, p) }

// advance is adv(s, BlockBytes).
func advance(s uint32) uint32 {
	return shift[0][s&0xff] ^ shift[1][s>>8&0xff] ^ shift[2][s>>16&0xff] ^ shift[3][s>>24]
}

// Sums holds the raw CRC-32C of the whole blocks buf[k*BlockBytes :
// (k+1)*BlockBytes] of a buffer filled from its start. The zero value
// covers nothing; a nil *Sums is valid and covers nothing.
type Sums struct {
	buf  []byte
	sums []uint32
}

// Reset starts over with buf, none of it covered yet.
func (s *Sums) Reset(buf []byte) {
	s.buf = buf
	s.sums = s.sums[:0]
}

// Cover sums the whole blocks of buf[:n] not summed yet: call it as buf
// fills, right after the bytes arrive.
func (s *Sums) Cover(n int) {
	n = min(n, len(s.buf))
	for k := len(s.sums); (k+1)*BlockBytes <= n; k++ {
		s.sums = append(s.sums, raw(0, s.buf[k*BlockBytes:(k+1)*BlockBytes]))
	}
}

// Offset is where p starts in the buffer s covers, found by the address
// of its first byte at offsets from, from+1, ... (at most
// offsetSearchBytes of them): callers walk a buffer's slices in order,
// each from where the previous one ended, so the gaps are short. ok is
// false when p is empty or not found there (not wholly inside the buffer,
// out of order, or elsewhere).
func (s *Sums) Offset(p []byte, from int) (off int, ok bool) {
	if s == nil || len(p) == 0 || from < 0 {
		return 0, false
	}
	last := min(len(s.buf)-len(p), from+offsetSearchBytes)
	for off = from; off <= last; off++ {
		if &s.buf[off] == &p[0] {
			return off, true
		}
	}
	return 0, false
}

// offsetSearchBytes bounds Offset's walk: ~64 µs when p is not there.
// A fetch response's partitions without records between two with them
// take ~50 bytes each.
const offsetSearchBytes = 64 << 10

// Checksum is crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)) for p
// at offset off of the buffer (p is buf[off:off+len(p)]: checked, by the
// address of its first byte). There, and when it spans summed blocks, it
// combines their sums and reads only p's ends; otherwise it reads p. The
// summed blocks must be unchanged since Cover: Checksum answers for the
// bytes as they were then.
func (s *Sums) Checksum(p []byte, off int) uint32 {
	if s == nil || len(p) < minCombined || off < 0 || off > len(s.buf)-len(p) || &s.buf[off] != &p[0] {
		return crc32.Checksum(p, castagnoli) // short, or not where off says in the buffer
	}
	first := (off + BlockBytes - 1) / BlockBytes      // first whole block in p
	last := min((off+len(p))/BlockBytes, len(s.sums)) // past the last whole, summed one
	if last-first < 2 {
		return crc32.Checksum(p, castagnoli)
	}
	r := raw(^uint32(0), p[:first*BlockBytes-off])
	for _, sum := range s.sums[first:last] {
		r = advance(r) ^ sum
	}
	return ^raw(r, p[last*BlockBytes-off:])
}
