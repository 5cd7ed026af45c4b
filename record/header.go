package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Fixed sizes and field offsets of a v2 batch.
const (
	HeaderSize  = 61 // fixed header bytes of a v2 batch
	LogOverhead = 12 // baseOffset + batchLength
	OffsetCRC   = 17
	OffsetAttrs = 21

	offsetBatchLength     = 8
	offsetLeaderEpoch     = 12
	offsetMagic           = 16
	offsetLastOffsetDelta = 23
	offsetBaseTimestamp   = 27
	offsetMaxTimestamp    = 35
	offsetProducerID      = 43
	offsetProducerEpoch   = 51
	offsetBaseSequence    = 53
	offsetRecordCount     = 57

	// minBatchLength is the smallest legal batchLength: the header after
	// the batchLength field, with an empty records section.
	minBatchLength = HeaderSize - LogOverhead

	// minRecordBytes is the smallest encoding of one record: a one-byte
	// varint for each of length, timestampDelta, offsetDelta, keyLength,
	// valueLength and headerCount, plus the attributes byte.
	minRecordBytes = 7

	magicV2 = 2
)

// Attribute bits.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// Errors returned by this package. ErrInvalid is usually wrapped with the
// reason; compare with errors.Is.
var (
	ErrShort   = errors.New("record: short batch")       // fewer bytes than the header/length claims
	ErrMagic   = errors.New("record: unsupported magic") // magic != 2
	ErrCorrupt = errors.New("record: CRC mismatch")      // -> CORRUPT_MESSAGE
	ErrInvalid = errors.New("record: invalid batch")     // -> INVALID_RECORD (counts, control batch from client, bad length)
)

// castagnoli is the CRC-32C table, built once.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is a parsed v2 batch header (a value type; parsing never allocates).
type Header struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the whole batch in bytes: LogOverhead + BatchLength.
func (h *Header) Size() int { return LogOverhead + int(h.BatchLength) }

// LastOffset is the offset of the batch's last record: BaseOffset + LastOffsetDelta.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec is the compression codec named by attribute bits 0-2. Values above
// CodecZstd are possible for a batch that has not been validated.
func (h *Header) Codec() Codec { return Codec(h.Attributes & attrCodecMask) }

// LogAppendTime reports whether MaxTimestamp is the broker's append time.
func (h *Header) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// Transactional reports whether the batch is part of a transaction.
func (h *Header) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports whether the batch holds a control (commit/abort) marker.
func (h *Header) Control() bool { return h.Attributes&attrControl != 0 }

// ParseHeader parses the first HeaderSize bytes of b (b may be longer or, for
// a torn tail, shorter than the whole batch). Checks magic == 2 and
// BatchLength >= HeaderSize-LogOverhead. No CRC check. Never allocates.
//
// When the error is ErrMagic or ErrInvalid the returned Header still holds
// the fields as read, so a caller can report them.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrShort
	}
	b = b[:HeaderSize]
	h := Header{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[0:])),
		BatchLength:          int32(binary.BigEndian.Uint32(b[offsetBatchLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offsetLeaderEpoch:])),
		Magic:                int8(b[offsetMagic]),
		CRC:                  binary.BigEndian.Uint32(b[OffsetCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[OffsetAttrs:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offsetLastOffsetDelta:])),
		BaseTimestamp:        int64(binary.BigEndian.Uint64(b[offsetBaseTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offsetMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offsetProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offsetProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offsetBaseSequence:])),
		NumRecords:           int32(binary.BigEndian.Uint32(b[offsetRecordCount:])),
	}
	if h.Magic != magicV2 {
		return h, ErrMagic
	}
	if h.BatchLength < minBatchLength {
		return h, errBatchLength
	}
	return h, nil
}

// errBatchLength is preallocated so ParseHeader never allocates.
var errBatchLength = fmt.Errorf("%w: batchLength below %d", ErrInvalid, minBatchLength)

// Validate checks that b is exactly one complete batch as a producer must send
// it: ParseHeader ok, len(b) == Size(), CRC-32C ok (ErrCorrupt), NumRecords > 0,
// LastOffsetDelta == NumRecords-1, not a control batch (ErrInvalid). No alloc
// on success.
//
// It also rejects (ErrInvalid) an unknown compression codec and, for an
// uncompressed batch, a NumRecords that the records section is too small to
// hold. It does not decode records; Iterate does.
func Validate(b []byte) (Header, error) { return validate(b, 0, false) }

// ValidateCRC is Validate for a caller that computed the CRC-32C of
// b[OffsetAttrs:] itself (crc; for instance from block sums taken as a
// request was read, package crcsum): the stored CRC is compared with it.
func ValidateCRC(b []byte, crc uint32) (Header, error) { return validate(b, crc, true) }

func validate(b []byte, crc uint32, given bool) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	switch size := h.Size(); {
	case len(b) < size:
		return h, ErrShort
	case len(b) > size:
		return h, fmt.Errorf("%w: %d bytes for a batch of %d", ErrInvalid, len(b), size)
	}
	if !given && !checkCRC(b) || given && crc != binary.BigEndian.Uint32(b[OffsetCRC:]) {
		return h, ErrCorrupt
	}
	switch {
	case h.NumRecords <= 0:
		return h, fmt.Errorf("%w: record count %d", ErrInvalid, h.NumRecords)
	case h.LastOffsetDelta != h.NumRecords-1:
		return h, fmt.Errorf("%w: lastOffsetDelta %d with %d records", ErrInvalid, h.LastOffsetDelta, h.NumRecords)
	case h.Control():
		return h, fmt.Errorf("%w: control batch", ErrInvalid)
	case h.Codec() > CodecZstd:
		return h, fmt.Errorf("%w: compression codec %d", ErrInvalid, h.Codec())
	case h.Codec() == CodecNone && int64(h.NumRecords)*minRecordBytes > int64(len(b)-HeaderSize):
		return h, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrInvalid, h.NumRecords, len(b)-HeaderSize)
	}
	return h, nil
}

// CheckCRC reports whether b's stored CRC matches bytes 21..Size() (b is one
// whole batch; bytes past Size() are ignored). It is false for anything
// ParseHeader rejects or that is shorter than Size().
func CheckCRC(b []byte) bool {
	h, err := ParseHeader(b)
	if err != nil || len(b) < h.Size() {
		return false
	}
	return checkCRC(b[:h.Size()])
}

// checkCRC checksums b[21:]; b is exactly one batch of at least HeaderSize.
func checkCRC(b []byte) bool {
	return crc32.Checksum(b[OffsetAttrs:], castagnoli) == binary.BigEndian.Uint32(b[OffsetCRC:])
}

// Next splits a buffer of concatenated batches: returns the first batch
// (b[:Size()]) and the rest; ErrShort if b holds a partial batch (including
// an empty b). ErrMagic and ErrInvalid are ParseHeader's. No CRC check.
func Next(b []byte) (batch, rest []byte, h Header, err error) {
	h, err = ParseHeader(b)
	if err != nil {
		return nil, b, h, err
	}
	size := h.Size()
	if len(b) < size {
		return nil, b, h, ErrShort
	}
	return b[:size:size], b[size:], h, nil
}

// mustHeader panics unless b holds at least n bytes: the in-place setters are
// for batches already accepted by ParseHeader or Validate, so a short b is a
// programming error, not bad input.
func mustHeader(b []byte, n int, fn string) {
	if len(b) < n {
		panic(fmt.Sprintf("record.%s: %d bytes, need %d", fn, len(b), n))
	}
}

// SetBaseOffset patches baseOffset in place (outside the CRC).
func SetBaseOffset(b []byte, off int64) {
	mustHeader(b, HeaderSize, "SetBaseOffset")
	binary.BigEndian.PutUint64(b[0:], uint64(off))
}

// SetPartitionLeaderEpoch patches partitionLeaderEpoch in place (outside the CRC).
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	mustHeader(b, HeaderSize, "SetPartitionLeaderEpoch")
	binary.BigEndian.PutUint32(b[offsetLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime sets attribute bit 3 and maxTimestamp = ts, recomputing the
// CRC over b[21:Size()]. b must be one whole batch (as Validate accepts).
func SetLogAppendTime(b []byte, ts int64) {
	mustHeader(b, HeaderSize, "SetLogAppendTime")
	size := LogOverhead + int(int32(binary.BigEndian.Uint32(b[offsetBatchLength:])))
	if size < HeaderSize || len(b) < size {
		panic(fmt.Sprintf("record.SetLogAppendTime: %d bytes for a batch of %d", len(b), size))
	}
	attrs := binary.BigEndian.Uint16(b[OffsetAttrs:]) | attrLogAppendTime
	binary.BigEndian.PutUint16(b[OffsetAttrs:], attrs)
	binary.BigEndian.PutUint64(b[offsetMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[OffsetCRC:], crc32.Checksum(b[OffsetAttrs:size], castagnoli))
}
