package segmenttest

import (
	"encoding/binary"
	"hash/crc32"
)

// Batch layout offsets used by MakeBatch (see package record).
const (
	batchHeaderSize = 61
	offCRC          = 17
	offAttrs        = 21
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MakeBatch appends to dst a RecordBatch v2 with the given base offset,
// record count (lastOffsetDelta = records-1), max timestamp and leader epoch,
// whose records section is payload (opaque bytes: recovery and scans never
// decode records). The CRC-32C covers bytes 21..end as in Kafka.
func MakeBatch(dst []byte, baseOffset int64, records int32, maxTimestamp int64, epoch int32, payload []byte) []byte {
	start := len(dst)
	var h [batchHeaderSize]byte
	be := binary.BigEndian
	be.PutUint64(h[0:], uint64(baseOffset))
	be.PutUint32(h[8:], uint32(batchHeaderSize-12+len(payload)))
	be.PutUint32(h[12:], uint32(epoch))
	h[16] = 2 // magic
	be.PutUint16(h[21:], 0)
	be.PutUint32(h[23:], uint32(records-1))
	be.PutUint64(h[27:], uint64(maxTimestamp))
	be.PutUint64(h[35:], uint64(maxTimestamp))
	be.PutUint64(h[43:], ^uint64(0)) // producerId -1
	be.PutUint16(h[51:], 0xffff)     // producerEpoch -1
	be.PutUint32(h[53:], 0xffffffff) // baseSequence -1
	be.PutUint32(h[57:], uint32(records))
	dst = append(dst, h[:]...)
	dst = append(dst, payload...)
	b := dst[start:]
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttrs:], castagnoli))
	return dst
}
