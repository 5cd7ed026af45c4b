package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a batch compression codec (attribute bits 0-2).
type Codec int8

// The codecs of RecordBatch v2.
const (
	CodecNone Codec = iota
	CodecGzip
	CodecSnappy
	CodecLZ4
	CodecZstd
)

var codecNames = [...]string{"none", "gzip", "snappy", "lz4", "zstd"}

// String is the codec's Kafka config name ("none", "gzip", ...).
func (c Codec) String() string {
	if c >= 0 && int(c) < len(codecNames) {
		return codecNames[c]
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// ParseCodec maps a Kafka compression.type name ("none", "gzip", "snappy",
// "lz4", "zstd") to its Codec.
func ParseCodec(s string) (Codec, error) {
	for i, name := range codecNames {
		if s == name {
			return Codec(i), nil
		}
	}
	return CodecNone, fmt.Errorf("record: unknown compression codec %q", s)
}

// DefaultMaxDecompressedBytes is the initial MaxDecompressedBytes.
const DefaultMaxDecompressedBytes = 64 << 20

var maxDecompressed atomic.Int64

func init() { maxDecompressed.Store(DefaultMaxDecompressedBytes) }

// MaxDecompressedBytes is the most bytes Decompress (and so Iterate) will
// produce from one input before failing with ErrInvalid.
func MaxDecompressedBytes() int { return int(maxDecompressed.Load()) }

// SetMaxDecompressedBytes changes MaxDecompressedBytes (n >= 1). Safe to call
// at any time; meant to be set once from configuration.
func SetMaxDecompressedBytes(n int) {
	if n < 1 {
		panic("record.SetMaxDecompressedBytes: limit must be at least 1")
	}
	maxDecompressed.Store(int64(n))
}

// errTooBig is returned when a decoder would exceed MaxDecompressedBytes.
var errTooBig = fmt.Errorf("%w: decompressed size over the limit", ErrInvalid)

// Compress appends src compressed with c to dst. CodecNone appends src as is.
func Compress(c Codec, dst, src []byte) ([]byte, error) {
	switch c {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		return compressGzip(dst, src)
	case CodecSnappy:
		return appendXerial(dst, src), nil
	case CodecLZ4:
		return compressLZ4(dst, src)
	case CodecZstd:
		return zstdEncoder().EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("record: cannot compress with %v", c)
}

// Decompress returns the raw records section of a compressed batch (appended
// to dst); snappy accepts raw and xerial-framed input (Java client). At most
// MaxDecompressedBytes are produced; more, corrupt input or an unknown codec
// fail with an error wrapping ErrInvalid. CodecNone appends src as is.
func Decompress(c Codec, dst, src []byte) ([]byte, error) {
	limit := MaxDecompressedBytes()
	var out []byte
	var err error
	switch c {
	case CodecNone:
		if len(src) > limit {
			return dst, errTooBig
		}
		return append(dst, src...), nil
	case CodecGzip:
		out, err = decompressGzip(dst, src, limit)
	case CodecSnappy:
		out, err = decompressSnappy(dst, src, limit)
	case CodecLZ4:
		out, err = decompressLZ4(dst, src, limit)
	case CodecZstd:
		out, err = decompressZstd(dst, src, limit)
	default:
		return dst, fmt.Errorf("%w: compression codec %d", ErrInvalid, c)
	}
	if err != nil {
		if errors.Is(err, ErrInvalid) {
			return dst, err
		}
		return dst, fmt.Errorf("%w: %v: %v", ErrInvalid, c, err)
	}
	if len(out)-len(dst) > limit {
		return dst, errTooBig
	}
	return out, nil
}

// appendWriter is an io.Writer appending to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// readBounded appends everything r yields to dst, failing with errTooBig past
// limit bytes. It first makes room for hint bytes (the caller's guess, from
// the input's size), then doubles with the data actually decoded, so a lying
// header cannot make it allocate far ahead of the input.
func readBounded(dst []byte, r io.Reader, limit, hint int) ([]byte, error) {
	start := len(dst)
	dst = slices.Grow(dst, min(max(hint, 512), limit+1))
	for stalls := 0; ; {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, min(max(cap(dst)-start, 4<<10), limit+1))
		}
		room := min(cap(dst), start+limit+1)
		if room == len(dst) {
			return dst, errTooBig
		}
		n, err := r.Read(dst[len(dst):room])
		dst = dst[:len(dst)+n]
		if n == 0 && err == nil {
			if stalls++; stalls > 100 {
				return dst, io.ErrNoProgress
			}
		}
		if len(dst)-start > limit {
			return dst, errTooBig
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// ---- gzip ----

type gzipEncoder struct {
	w   *gzip.Writer
	out appendWriter
}

type gzipDecoder struct {
	r   gzip.Reader
	src bytes.Reader
}

var (
	gzipEncoders = sync.Pool{New: func() any {
		e := new(gzipEncoder)
		e.w = gzip.NewWriter(&e.out)
		return e
	}}
	gzipDecoders = sync.Pool{New: func() any { return new(gzipDecoder) }}
)

func compressGzip(dst, src []byte) ([]byte, error) {
	e := gzipEncoders.Get().(*gzipEncoder)
	defer gzipEncoders.Put(e)
	e.out.b = dst
	e.w.Reset(&e.out)
	_, err := e.w.Write(src)
	if cerr := e.w.Close(); err == nil {
		err = cerr
	}
	out := e.out.b
	e.out.b = nil
	return out, err
}

func decompressGzip(dst, src []byte, limit int) ([]byte, error) {
	d := gzipDecoders.Get().(*gzipDecoder)
	defer gzipDecoders.Put(d)
	d.src.Reset(src)
	if err := d.r.Reset(&d.src); err != nil {
		return dst, err
	}
	d.r.Multistream(true)
	out, err := readBounded(dst, &d.r, limit, gzipSizeHint(src))
	d.src.Reset(nil)
	return out, err
}

// gzipSizeHint is the decoded size a gzip stream claims in its trailer
// (ISIZE, the last member's size mod 2^32) plus one byte so the final read
// finds EOF without growing, believed only up to deflate's best ratio
// (about 1032:1).
func gzipSizeHint(src []byte) int {
	if len(src) < 18 {
		return 0
	}
	isize := int(binary.LittleEndian.Uint32(src[len(src)-4:]))
	if isize > 1032*len(src) {
		return 4 * len(src)
	}
	return isize + 1
}

// ---- snappy (xerial framing) ----

// xerialMagic starts a xerial-framed snappy stream; two big-endian int32
// versions follow (version 1, minimum compatible version 1 when we write).
var xerialMagic = [8]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16
	xerialBlockSize  = 32 << 10 // what the Java client's SnappyOutputStream writes
)

// appendXerial appends src as a xerial-framed snappy stream.
func appendXerial(dst, src []byte) []byte {
	dst = append(dst, xerialMagic[:]...)
	dst = binary.BigEndian.AppendUint32(dst, 1)
	dst = binary.BigEndian.AppendUint32(dst, 1)
	for len(src) > 0 {
		n := min(len(src), xerialBlockSize)
		dst = slices.Grow(dst, 4+s2.MaxEncodedLen(n))
		at := len(dst)
		block := s2.EncodeSnappy(dst[at+4:cap(dst)], src[:n])
		binary.BigEndian.PutUint32(dst[at:at+4], uint32(len(block)))
		dst = dst[:at+4+len(block)]
		src = src[n:]
	}
	return dst
}

func decompressSnappy(dst, src []byte, limit int) ([]byte, error) {
	if len(src) >= xerialHeaderSize && bytes.Equal(src[:len(xerialMagic)], xerialMagic[:]) {
		return decodeXerial(dst, src[xerialHeaderSize:], limit)
	}
	return decodeSnappyBlock(dst, src, limit)
}

// decodeSnappyBlock appends one raw snappy block's decoding to dst, refusing
// a claimed decoded length above limit before allocating.
func decodeSnappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return dst, err
	}
	if n > limit {
		return dst, errTooBig
	}
	dst = slices.Grow(dst, n)
	if _, err := s2.Decode(dst[len(dst):len(dst)+n], block); err != nil {
		return dst, err
	}
	return dst[:len(dst)+n], nil
}

var errXerial = fmt.Errorf("%w: malformed xerial snappy framing", ErrInvalid)

// decodeXerial decodes the blocks after the 16-byte xerial header. It first
// walks the block lengths, summing the claimed decoded sizes against limit,
// so dst grows once and never beyond the limit.
func decodeXerial(dst, src []byte, limit int) ([]byte, error) {
	total := 0
	for rem := src; len(rem) > 0; {
		if len(rem) < 4 {
			return dst, errXerial
		}
		size := binary.BigEndian.Uint32(rem)
		rem = rem[4:]
		if uint64(size) > uint64(len(rem)) {
			return dst, errXerial
		}
		n, err := s2.DecodedLen(rem[:size])
		if err != nil {
			return dst, err
		}
		if total += n; total > limit {
			return dst, errTooBig
		}
		rem = rem[size:]
	}
	dst = slices.Grow(dst, total)
	for len(src) > 0 {
		size := binary.BigEndian.Uint32(src)
		var err error
		if dst, err = decodeSnappyBlock(dst, src[4:4+size], limit); err != nil {
			return dst, err
		}
		src = src[4+size:]
	}
	return dst, nil
}

// ---- lz4 ----

type lz4Encoder struct {
	w   *lz4.Writer
	out appendWriter
}

type lz4Decoder struct {
	r   *lz4.Reader
	src bytes.Reader
}

var (
	lz4Encoders = sync.Pool{New: func() any {
		e := new(lz4Encoder)
		e.w = lz4.NewWriter(&e.out)
		// 64 KiB blocks, independent, content checksum: what the Java
		// client's KafkaLZ4BlockOutputStream reads and writes by default.
		_ = e.w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1))
		return e
	}}
	lz4Decoders = sync.Pool{New: func() any {
		d := new(lz4Decoder)
		d.r = lz4.NewReader(&d.src)
		return d
	}}
)

func compressLZ4(dst, src []byte) ([]byte, error) {
	e := lz4Encoders.Get().(*lz4Encoder)
	defer lz4Encoders.Put(e)
	e.out.b = dst
	e.w.Reset(&e.out)
	_, err := e.w.Write(src)
	if cerr := e.w.Close(); err == nil {
		err = cerr
	}
	out := e.out.b
	e.out.b = nil
	return out, err
}

// lz4Scratch holds decode buffers: an lz4 frame does not say how big it
// decodes (the content size is optional and Java omits it), so decoding
// into a pooled buffer and copying the result once beats growing dst.
var lz4Scratch = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledScratch keeps one huge batch from pinning its buffer in the pool.
const maxPooledScratch = 4 << 20

func decompressLZ4(dst, src []byte, limit int) ([]byte, error) {
	d := lz4Decoders.Get().(*lz4Decoder)
	defer lz4Decoders.Put(d)
	d.src.Reset(src)
	d.r.Reset(&d.src)
	sp := lz4Scratch.Get().(*[]byte)
	out, err := readBounded((*sp)[:0], d.r, limit, 4*len(src))
	d.src.Reset(nil)
	if err == nil {
		dst = append(dst, out...)
	}
	if cap(out) <= maxPooledScratch {
		*sp = out[:0]
		lz4Scratch.Put(sp)
	}
	return dst, err
}

// ---- zstd ----

var (
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
)

// zstdEncoder is the shared encoder; EncodeAll is safe for concurrent use.
func zstdEncoder() *zstd.Encoder {
	zstdEncOnce.Do(func() {
		var err error
		zstdEnc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithZeroFrames(true))
		if err != nil {
			panic("record: zstd encoder: " + err.Error()) // static options; cannot fail
		}
	})
	return zstdEnc
}

// zstdDecoderFor pairs the shared decoder with the limit it was built for.
type zstdDecoderFor struct {
	limit int
	dec   *zstd.Decoder
}

var zstdDec atomic.Pointer[zstdDecoderFor]

// zstdDecoder returns a decoder whose memory bound is limit, building a new
// one when the limit changed. DecodeAll is safe for concurrent use.
func zstdDecoder(limit int) (*zstd.Decoder, error) {
	if d := zstdDec.Load(); d != nil && d.limit == limit {
		return d.dec, nil
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		// The bound also caps the window; the decoder wants at least
		// MinWindowSize even for a smaller frame, and Decompress checks
		// the exact limit on the output.
		zstd.WithDecoderMaxMemory(uint64(max(limit, zstd.MinWindowSize))),
	)
	if err != nil {
		return nil, err
	}
	// A racing builder may win; either decoder is correct for limit, and a
	// decoder used only through DecodeAll holds no goroutines to close.
	zstdDec.Store(&zstdDecoderFor{limit: limit, dec: dec})
	return dec, nil
}

func decompressZstd(dst, src []byte, limit int) ([]byte, error) {
	dec, err := zstdDecoder(limit)
	if err != nil {
		return dst, err
	}
	// Decode after dst's length, not onto it: the decoder counts bytes
	// already in dst against its memory bound. When dst has the room the
	// append below copies the output onto itself.
	out, err := dec.DecodeAll(src, dst[len(dst):len(dst)])
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return dst, errTooBig
	}
	if err != nil {
		return dst, err
	}
	if len(dst) == 0 {
		return out, nil
	}
	return append(dst, out...), nil
}
