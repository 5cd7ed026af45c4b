package record

import (
	"fmt"
	"testing"
)

// benchBatch builds a batch of n records with 1 KiB values (16-byte keys).
func benchBatch(b *testing.B, c Codec, n int) []byte {
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte('a' + i%7)
	}
	var bl Builder
	bl.Reset(c, 1_700_000_000_000)
	for i := range n {
		bl.Add(1_700_000_000_000+int64(i), fmt.Appendf(nil, "key-%012d", i), value, nil)
	}
	out, err := bl.AppendTo(nil)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func BenchmarkValidate64KiB(b *testing.B) {
	batch := benchBatch(b, CodecNone, 62) // ~64 KiB
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Validate(batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuilderNone(b *testing.B) {
	value := make([]byte, 1024)
	key := []byte("key-000000000001")
	var bl Builder
	var dst []byte
	const perBatch = 16
	b.SetBytes(perBatch * int64(len(value)+len(key)))
	b.ReportAllocs()
	for b.Loop() {
		bl.Reset(CodecNone, 1)
		for i := range perBatch {
			bl.Add(int64(i), key, value, nil)
		}
		var err error
		if dst, err = bl.AppendTo(dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIterate(b *testing.B) {
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			batch := benchBatch(b, c, 62)
			b.SetBytes(62 * (1024 + 16)) // record payload, not compressed size
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				if err := Iterate(batch, func(*Header, *Record) error { n++; return nil }); err != nil || n != 62 {
					b.Fatal(err, n)
				}
			}
		})
	}
}

func BenchmarkCompress(b *testing.B) {
	src := benchBatch(b, CodecNone, 62)[HeaderSize:]
	for _, c := range allCodecs[1:] {
		b.Run(c.String(), func(b *testing.B) {
			var dst []byte
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = Compress(c, dst[:0], src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
