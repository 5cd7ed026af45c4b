package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Builder encodes one batch. Zero value is ready; Reset before reuse.
// Steady-state use allocates nothing for CodecNone.
//
// The zero value (or one just Reset) has no producer (id, epoch and base
// sequence -1) and codec none; without Reset the first record's timestamp is
// the base timestamp. Records are encoded as they are added into a buffer the
// Builder keeps across Resets. A Builder must not be used concurrently.
type Builder struct {
	codec         Codec
	baseTimestamp int64
	baseSet       bool // baseTimestamp came from Reset or the first Add
	maxTimestamp  int64
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	producerSet   bool   // SetProducer was called since the last Reset
	txnAttrs      uint16 // transactional and control attribute bits (SetTransactional, SetControl)
	count         int
	records       []byte // encoded, uncompressed records
}

// Reset empties the Builder and sets the codec and base timestamp of the
// next batch; the producer returns to none (-1, -1, -1).
func (b *Builder) Reset(codec Codec, baseTimestamp int64) {
	*b = Builder{
		codec:         codec,
		baseTimestamp: baseTimestamp,
		baseSet:       true,
		maxTimestamp:  baseTimestamp,
		records:       b.records[:0],
	}
}

// SetProducer sets the idempotent producer fields (default -1,-1,-1).
func (b *Builder) SetProducer(id int64, epoch int16, baseSequence int32) {
	b.producerID, b.producerEpoch, b.baseSequence, b.producerSet = id, epoch, baseSequence, true
}

// SetTransactional marks the batch transactional (attribute bit 4), as a
// transactional producer's batches and transaction markers are; Reset
// clears it.
func (b *Builder) SetTransactional() { b.txnAttrs |= attrTransactional }

// SetControl marks the batch a control batch (attribute bit 5: its records
// are control records, e.g. transaction markers); Reset clears it.
func (b *Builder) SetControl() { b.txnAttrs |= attrControl }

// Add appends one record. A nil key or value is encoded as null; headers
// with a nil Value carry a null value. timestamp is in ms.
func (b *Builder) Add(timestamp int64, key, value []byte, headers []RecordHeader) {
	if !b.baseSet {
		b.baseTimestamp, b.maxTimestamp, b.baseSet = timestamp, timestamp, true
	}
	if b.count == 0 || timestamp > b.maxTimestamp {
		b.maxTimestamp = timestamp
	}
	delta := timestamp - b.baseTimestamp
	offsetDelta := int64(b.count)

	body := 1 + varintLen(delta) + varintLen(offsetDelta) +
		bytesLen(key) + bytesLen(value) + varintLen(int64(len(headers)))
	for i := range headers {
		body += varintLen(int64(len(headers[i].Key))) + len(headers[i].Key) + bytesLen(headers[i].Value)
	}

	r := b.records
	r = binary.AppendVarint(r, int64(body))
	r = append(r, 0) // attributes
	r = binary.AppendVarint(r, delta)
	r = binary.AppendVarint(r, offsetDelta)
	r = appendBytes(r, key)
	r = appendBytes(r, value)
	r = binary.AppendVarint(r, int64(len(headers)))
	for i := range headers {
		r = binary.AppendVarint(r, int64(len(headers[i].Key)))
		r = append(r, headers[i].Key...)
		r = appendBytes(r, headers[i].Value)
	}
	b.records = r
	b.count++
}

// Len is the number of records added.
func (b *Builder) Len() int { return b.count }

// Size is the encoded size so far, uncompressed: HeaderSize plus the records.
func (b *Builder) Size() int { return HeaderSize + len(b.records) }

// AppendTo appends the finished batch (baseOffset 0, epoch -1, CRC set) and
// leaves the Builder as it was, so the same records can be appended again.
// It fails without records, with an unknown codec, or if the batch would
// exceed the int32 length field.
func (b *Builder) AppendTo(dst []byte) ([]byte, error) {
	if b.count == 0 {
		return dst, fmt.Errorf("%w: builder has no records", ErrInvalid)
	}
	if b.codec < CodecNone || b.codec > CodecZstd {
		return dst, fmt.Errorf("record: cannot build a batch with %v", b.codec)
	}
	if b.count > math.MaxInt32 || len(b.records) > math.MaxInt32-HeaderSize {
		return dst, fmt.Errorf("%w: batch too large", ErrInvalid)
	}
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if b.producerSet {
		pid, epoch, seq = b.producerID, b.producerEpoch, b.baseSequence
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, 0)                          // baseOffset
	dst = binary.BigEndian.AppendUint32(dst, 0)                          // batchLength, below
	dst = binary.BigEndian.AppendUint32(dst, math.MaxUint32)             // partitionLeaderEpoch -1
	dst = append(dst, magicV2)                                           //
	dst = binary.BigEndian.AppendUint32(dst, 0)                          // crc, below
	dst = binary.BigEndian.AppendUint16(dst, uint16(b.codec)|b.txnAttrs) // attributes
	dst = binary.BigEndian.AppendUint32(dst, uint32(b.count-1))          // lastOffsetDelta
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.baseTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.maxTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(pid))
	dst = binary.BigEndian.AppendUint16(dst, uint16(epoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(seq))
	dst = binary.BigEndian.AppendUint32(dst, uint32(b.count))
	var err error
	if dst, err = Compress(b.codec, dst, b.records); err != nil {
		return dst[:start], err
	}
	batch := dst[start:]
	if len(batch) > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: batch too large", ErrInvalid)
	}
	binary.BigEndian.PutUint32(batch[offsetBatchLength:], uint32(len(batch)-LogOverhead))
	binary.BigEndian.PutUint32(batch[OffsetCRC:], crc32.Checksum(batch[OffsetAttrs:], castagnoli))
	return dst, nil
}

// VarintLen is the size of x as a zigzag varint (record field encoding).
func VarintLen(x int64) int { return varintLen(x) }

// NullableBytesLen is the size of a nullable length-prefixed byte string
// (a record key, value or header value).
func NullableBytesLen(v []byte) int { return bytesLen(v) }

// AppendNullableBytes appends a nullable length-prefixed byte string.
func AppendNullableBytes(dst, v []byte) []byte { return appendBytes(dst, v) }

// varintLen is the size of x as a zigzag varint.
func varintLen(x int64) int {
	u := uint64(x<<1) ^ uint64(x>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// bytesLen is the size of a nullable length-prefixed byte string.
func bytesLen(v []byte) int {
	if v == nil {
		return 1
	}
	return varintLen(int64(len(v))) + len(v)
}

// appendBytes appends a nullable length-prefixed byte string.
func appendBytes(dst, v []byte) []byte {
	if v == nil {
		return append(dst, 1) // zigzag(-1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
}
