// Package record reads, checks, patches and writes Kafka RecordBatch v2, the
// unit a producer sends, the broker stores byte for byte and a consumer
// fetches.
//
// # Batch layout
//
// All integers are big endian. Offsets are from the start of the batch:
//
//	off size field
//	  0    8 baseOffset            int64   (patched by the broker; outside the CRC)
//	  8    4 batchLength           int32   bytes after this field: Size() = 12 + batchLength
//	 12    4 partitionLeaderEpoch  int32   (patched by the broker; outside the CRC)
//	 16    1 magic                 int8    always 2
//	 17    4 crc                   uint32  CRC-32C (Castagnoli) of bytes 21 .. Size()
//	 21    2 attributes            int16   see below
//	 23    4 lastOffsetDelta       int32   NumRecords-1 as produced (kept by compaction)
//	 27    8 baseTimestamp         int64   ms
//	 35    8 maxTimestamp          int64   ms; the broker's time under LogAppendTime
//	 43    8 producerId            int64   -1 when not idempotent
//	 51    2 producerEpoch         int16
//	 53    4 baseSequence          int32
//	 57    4 recordCount           int32
//	 61    . records               NumRecords records, compressed as a whole if codec != none
//
// attributes: bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
// bit 3 timestamp type (1 = LogAppendTime), bit 4 transactional, bit 5
// control, bit 6 hasDeleteHorizonMs.
//
// # Record layout
//
// Inside the (decompressed) records section each record is:
//
//	length          varint   bytes of the record after this field
//	attributes      int8     unused, 0
//	timestampDelta  varlong  ms from baseTimestamp
//	offsetDelta     varint   from baseOffset
//	keyLength       varint   -1 = null key
//	key             bytes
//	valueLength     varint   -1 = null value (tombstone)
//	value           bytes
//	headerCount     varint   >= 0
//	headers         headerCount × { keyLength varint (>= 0), key, valueLength varint (-1 = null), value }
//
// varint and varlong are zigzag-encoded base-128 integers as in protobuf; an
// encoding longer than 5 (varint) or 10 (varlong) bytes, or one whose last
// byte carries bits beyond the type's width, is malformed.
//
// # Compression
//
// gzip is RFC 1952 (klauspost/compress/gzip), multi-member accepted. snappy is
// decoded from raw snappy blocks and from the xerial framing the Java client
// writes (magic 0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0, two big-endian int32 versions,
// then repeated [int32 length, raw snappy block]); Compress writes xerial
// framing with 32 KiB blocks, like the Java client. lz4 is the LZ4 frame
// format (pierrec/lz4/v4) with 64 KiB blocks. zstd uses one shared encoder and
// decoder (klauspost/compress/zstd). Every decoder stops at
// MaxDecompressedBytes (64 MiB unless changed with SetMaxDecompressedBytes),
// so a small batch cannot expand into an unbounded allocation.
//
// # Errors
//
// ErrShort: fewer bytes than the header or batchLength claims (a torn tail).
// ErrMagic: magic is not 2. ErrCorrupt: the CRC does not match
// (CORRUPT_MESSAGE on the wire). ErrInvalid: the bytes are well formed enough
// to checksum but break a rule (counts, control batch from a client, lengths,
// malformed varints, undecodable compression; INVALID_RECORD on the wire).
// ErrInvalid is usually wrapped with the reason; test with errors.Is.
//
// # Allocation and concurrency
//
// ParseHeader, Validate, CheckCRC, Next and the Set functions never allocate
// and only touch the bytes they are given. Iterate allocates once per call
// for its Record and, for a compressed batch, once for the decompressed
// records (which the yielded keys and values alias, so they stay valid after
// Iterate returns). All package functions are safe for concurrent use on
// distinct buffers; the shared codec state (pools, the zstd encoder and
// decoder) is internally synchronised. A Builder belongs to one goroutine.
package record
