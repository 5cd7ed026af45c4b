package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

func TestCodecNames(t *testing.T) {
	for _, c := range allCodecs {
		got, err := ParseCodec(c.String())
		if err != nil || got != c {
			t.Fatalf("ParseCodec(%q) = %v, %v", c.String(), got, err)
		}
	}
	if _, err := ParseCodec("brotli"); err == nil {
		t.Fatal("ParseCodec(brotli) succeeded")
	}
	if _, err := ParseCodec("GZIP"); err == nil {
		t.Fatal("names are case sensitive, like Kafka's compression.type")
	}
	if s := Codec(9).String(); s != "codec(9)" {
		t.Fatalf("Codec(9).String() = %q", s)
	}
}

// payloads of several sizes: empty, tiny, around the 32 KiB snappy block and
// 64 KiB lz4 block, and large; compressible and random.
func payloads() map[string][]byte {
	rng := rand.New(rand.NewPCG(9, 9))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	text := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcdefgh"[rng.IntN(8)]
		}
		return b
	}
	return map[string][]byte{
		"empty": {}, "one": {42}, "text-100": text(100),
		"text-32k-1": text(32<<10 - 1), "text-32k+1": text(32<<10 + 1),
		"random-64k+7": random(64<<10 + 7), "text-300k": text(300 << 10), "random-100k": random(100 << 10),
	}
}

func TestCompressRoundTrip(t *testing.T) {
	prefix := []byte("prefix")
	for name, p := range payloads() {
		for _, c := range allCodecs {
			comp, err := Compress(c, append([]byte{}, prefix...), p)
			if err != nil || !bytes.HasPrefix(comp, prefix) {
				t.Fatalf("%s/%v: Compress: %v", name, c, err)
			}
			out, err := Decompress(c, append([]byte{}, prefix...), comp[len(prefix):])
			if err != nil {
				t.Fatalf("%s/%v: Decompress: %v", name, c, err)
			}
			if !bytes.Equal(out, append(append([]byte{}, prefix...), p...)) {
				t.Fatalf("%s/%v: round trip differs (%d bytes, want %d)", name, c, len(out), len(prefix)+len(p))
			}
		}
	}
}

func TestSnappyFormats(t *testing.T) {
	p := payloads()["text-300k"]
	raw := s2.EncodeSnappy(nil, p)
	framed := xerial.Encode(nil, p)
	for name, in := range map[string][]byte{"raw": raw, "xerial (klauspost)": framed} {
		out, err := Decompress(CodecSnappy, nil, in)
		if err != nil || !bytes.Equal(out, p) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// Ours is xerial framed, with the Java version ints, readable by another decoder.
	ours, _ := Compress(CodecSnappy, nil, p)
	if !bytes.HasPrefix(ours, []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}) {
		t.Fatalf("snappy output does not start with the xerial header: %x", ours[:16])
	}
	if out, err := xerial.Decode(ours); err != nil || !bytes.Equal(out, p) {
		t.Fatalf("klauspost xerial cannot read ours: %v", err)
	}
	// A header with no blocks is an empty payload.
	if out, err := Decompress(CodecSnappy, nil, ours[:16]); err != nil || len(out) != 0 {
		t.Fatalf("empty xerial: %v %d", err, len(out))
	}
}

func TestSnappyXerialMalformed(t *testing.T) {
	good, _ := Compress(CodecSnappy, nil, payloads()["text-100"])
	hdr := good[:16]
	for name, in := range map[string][]byte{
		"partial length":        append(append([]byte{}, hdr...), 0, 0),
		"length past end":       append(append([]byte{}, hdr...), 0, 0, 1, 0, 1, 2, 3),
		"negative length":       append(append([]byte{}, hdr...), 0xff, 0xff, 0xff, 0xff, 1),
		"trailing partial":      append(append([]byte{}, good...), 0),
		"corrupt block":         append(append([]byte{}, hdr...), 0, 0, 0, 3, 0xff, 0xff, 0xff),
		"block lies about size": func() []byte { b := append([]byte{}, good...); b[20] ^= 0x7f; return b }(),
		"raw garbage":           {0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		if _, err := Decompress(CodecSnappy, nil, in); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDecompressCorrupt(t *testing.T) {
	p := payloads()["text-32k+1"]
	for _, c := range allCodecs[1:] {
		comp, _ := Compress(c, nil, p)
		for name, in := range map[string][]byte{
			"truncated": comp[:len(comp)/2],
			"garbage":   bytes.Repeat([]byte{0xa5}, 64),
			"flipped":   func() []byte { b := append([]byte{}, comp...); b[len(b)/2] ^= 0xff; b[len(b)-3] ^= 0xff; return b }(),
		} {
			out, err := Decompress(c, nil, in)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v %s: err %v (%d bytes out)", c, name, err, len(out))
			}
		}
	}
	if _, err := Decompress(Codec(5), nil, []byte{1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("codec 5: %v", err)
	}
	if _, err := Compress(Codec(5), nil, []byte{1}); err == nil {
		t.Fatal("Compress with codec 5 succeeded")
	}
}

func withLimit(t *testing.T, n int) {
	t.Helper()
	old := MaxDecompressedBytes()
	SetMaxDecompressedBytes(n)
	t.Cleanup(func() { SetMaxDecompressedBytes(old) })
}

func TestDecompressLimit(t *testing.T) {
	withLimit(t, 1000)
	at := bytes.Repeat([]byte("z"), 1000)
	over := bytes.Repeat([]byte("z"), 1001)
	for _, c := range allCodecs {
		comp, _ := Compress(c, nil, at)
		if out, err := Decompress(c, nil, comp); err != nil || len(out) != 1000 {
			t.Fatalf("%v at the limit: %v", c, err)
		}
		comp, _ = Compress(c, nil, over)
		if _, err := Decompress(c, nil, comp); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%v over the limit: %v", c, err)
		}
	}
	// The limit counts output, not what dst already held.
	comp, _ := Compress(CodecZstd, nil, at)
	if out, err := Decompress(CodecZstd, make([]byte, 5000), comp); err != nil || len(out) != 6000 {
		t.Fatalf("zstd with a full dst: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("SetMaxDecompressedBytes(0) did not panic")
		}
	}()
	SetMaxDecompressedBytes(0)
}

// TestDecompressionBomb feeds each codec 32 MiB of zeros squeezed small,
// under a 1 MiB limit, and checks the refusal costs little memory.
func TestDecompressionBomb(t *testing.T) {
	withLimit(t, 1<<20)
	zeros := make([]byte, 32<<20)
	bombs := map[string][]byte{}
	for _, c := range allCodecs[1:] {
		b, err := Compress(c, nil, zeros)
		if err != nil {
			t.Fatal(err)
		}
		bombs[c.String()] = b
	}
	// zstd streamed without a declared content size, and several frames.
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	zw.Write(zeros)
	zw.Close()
	bombs["zstd-stream"] = buf.Bytes()
	small, _ := Compress(CodecZstd, nil, zeros[:900<<10])
	bombs["zstd-2-frames"] = append(append([]byte{}, small...), small...)
	// gzip: two members, each under the limit.
	g1, _ := Compress(CodecGzip, nil, zeros[:900<<10])
	bombs["gzip-2-members"] = append(append([]byte{}, g1...), g1...)
	codecOf := map[string]Codec{"gzip": CodecGzip, "snappy": CodecSnappy, "lz4": CodecLZ4, "zstd": CodecZstd,
		"zstd-stream": CodecZstd, "zstd-2-frames": CodecZstd, "gzip-2-members": CodecGzip}
	for name, bomb := range bombs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Decompress(codecOf[name], nil, bomb)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s (%d bytes): %v", name, len(bomb), err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
			t.Errorf("%s: refusing the bomb allocated %d bytes", name, grew)
		}
	}
	// xerial whose block headers claim more than the limit in total.
	block := s2.EncodeSnappy(nil, zeros[:600<<10])
	x := append([]byte{}, xerialMagic[:]...)
	x = append(x, 0, 0, 0, 1, 0, 0, 0, 1)
	for range 2 {
		x = binary.BigEndian.AppendUint32(x, uint32(len(block)))
		x = append(x, block...)
	}
	if _, err := Decompress(CodecSnappy, nil, x); !errors.Is(err, ErrInvalid) {
		t.Fatalf("xerial over the limit: %v", err)
	}
}

func franzCodec(c Codec) kgo.CompressionCodec {
	switch c {
	case CodecGzip:
		return kgo.GzipCompression()
	case CodecSnappy:
		return kgo.SnappyCompression()
	case CodecLZ4:
		return kgo.Lz4Compression()
	case CodecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// TestCodecsAgainstFranzGo: franz-go's compressor output decodes with ours,
// and ours with franz-go's decompressor.
func TestCodecsAgainstFranzGo(t *testing.T) {
	dec := kgo.DefaultDecompressor()
	for name, p := range payloads() {
		if len(p) == 0 {
			continue // franz-go never compresses an empty batch
		}
		for _, c := range allCodecs[1:] {
			comp, err := kgo.DefaultCompressor(franzCodec(c))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			theirs, used := comp.Compress(&buf, p)
			if int8(used) != int8(c) {
				t.Fatalf("%v: franz-go used codec %d", c, used)
			}
			out, err := Decompress(c, nil, theirs)
			if err != nil || !bytes.Equal(out, p) {
				t.Fatalf("%s/%v: decoding franz-go's output: %v", name, c, err)
			}
			ours, _ := Compress(c, nil, p)
			back, err := dec.Decompress(ours, kgo.CompressionCodecType(c))
			if err != nil || !bytes.Equal(back, p) {
				t.Fatalf("%s/%v: franz-go decoding ours: %v", name, c, err)
			}
		}
	}
}

func TestGzipMultiMember(t *testing.T) {
	var buf bytes.Buffer
	for _, s := range []string{"hello ", "world"} {
		w := gzip.NewWriter(&buf)
		w.Write([]byte(s))
		w.Close()
	}
	out, err := Decompress(CodecGzip, nil, buf.Bytes())
	if err != nil || string(out) != "hello world" {
		t.Fatalf("%q %v", out, err)
	}
}

// TestCodecsConcurrent shares the pooled and global codec state between
// goroutines (run with -race).
func TestCodecsConcurrent(t *testing.T) {
	p := payloads()["text-32k+1"]
	errs := make(chan error, 4*len(allCodecs))
	for g := range 4 {
		for _, c := range allCodecs {
			go func() {
				for range 20 {
					comp, err := Compress(c, nil, p)
					if err == nil {
						var out []byte
						if out, err = Decompress(c, nil, comp); err == nil && !bytes.Equal(out, p) {
							err = errors.New("round trip differs")
						}
					}
					if err != nil {
						errs <- fmt.Errorf("goroutine %d %v: %w", g, c, err)
						return
					}
				}
				errs <- nil
			}()
		}
	}
	for range 4 * len(allCodecs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
