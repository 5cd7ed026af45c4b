package kframe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/stratalog/strata/internal/crcsum"
)

// countingReader counts the bytes handed out.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// plainReadFrame is the reference: what ReadFrame must return for data.
func plainReadFrame(data []byte, maxBytes int32) (frame []byte, consumed int, err error) {
	if len(data) == 0 {
		return nil, 0, io.EOF
	}
	if len(data) < 4 {
		return nil, len(data), io.ErrUnexpectedEOF
	}
	size := int64(int32(binary.BigEndian.Uint32(data)))
	switch {
	case size < 0:
		return nil, 4, ErrNegativeSize
	case size > int64(maxBytes):
		return nil, 4, ErrTooLarge
	case int64(len(data)-4) < size:
		return nil, len(data), io.ErrUnexpectedEOF
	}
	return data[4 : 4+size], 4 + int(size), nil
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{}, int32(100), uint16(0), false)
	f.Add([]byte{0, 0}, int32(100), uint16(8), true)
	f.Add([]byte{0, 0, 0, 0}, int32(0), uint16(0), false)
	f.Add([]byte{0, 0, 0, 3, 'a', 'b', 'c', 'd'}, int32(3), uint16(2), true)
	f.Add([]byte{0, 0, 0, 3, 'a', 'b', 'c'}, int32(2), uint16(64), false)
	f.Add([]byte{0, 0, 0, 9, 'a'}, int32(100), uint16(64), true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1}, int32(100), uint16(64), false)
	f.Add([]byte{0x80, 0, 0, 0}, int32(-1), uint16(4), false)
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3}, int32(0x7fffffff), uint16(0), false)
	f.Fuzz(func(t *testing.T, data []byte, maxBytes int32, bufCap uint16, oneByte bool) {
		buf := make([]byte, 0, bufCap)
		cr := &countingReader{r: bytes.NewReader(data)}
		var r io.Reader = cr
		if oneByte {
			r = iotest.OneByteReader(cr)
		}
		got, err := ReadFrame(r, maxBytes, buf)
		want, consumed, wantErr := plainReadFrame(data, maxBytes)

		if (err == nil) != (wantErr == nil) || (wantErr != nil && !errors.Is(err, wantErr)) {
			t.Fatalf("err %v, want %v", err, wantErr)
		}
		if err != nil {
			if len(got) != 0 || cap(got) != cap(buf) {
				t.Fatalf("on error: len %d cap %d, want buf[:0] (cap %d)", len(got), cap(got), cap(buf))
			}
		} else if !bytes.Equal(got, want) {
			t.Fatalf("frame %x, want %x", got, want)
		}
		// A refused size stops after the prefix: the body is never read.
		if cr.n != consumed {
			t.Fatalf("consumed %d bytes, want %d", cr.n, consumed)
		}
		// Never allocates more than the frame: it reuses buf when the frame
		// fits, else allocates exactly the (checked) size.
		if err == nil {
			if len(got) <= cap(buf) {
				if len(got) > 0 && &got[:1][0] != &buf[:1][0] {
					t.Fatal("a frame that fits was not read into buf")
				}
			} else if cap(got) != len(got) || int64(cap(got)) > int64(maxBytes) {
				t.Fatalf("allocated cap %d for a %d-byte frame (max %d)", cap(got), len(got), maxBytes)
			}
		}
	})
}

func TestReadFrameErrors(t *testing.T) {
	_, err := ReadFrame(bytes.NewReader([]byte{0, 0, 1, 0}), 255, nil)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
	_, err = ReadFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xfe}), 255, nil)
	if !errors.Is(err, ErrNegativeSize) {
		t.Fatalf("negative: %v", err)
	}
	_, err = ReadFrame(bytes.NewReader(nil), 255, nil)
	if err != io.EOF {
		t.Fatalf("empty: %v", err)
	}
	_, err = ReadFrame(bytes.NewReader([]byte{0, 0, 0, 2, 1}), 255, nil)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated body: %v", err)
	}
	got, err := ReadFrame(bytes.NewReader(AppendFrame(nil, []byte("hello"))), 5, nil)
	if err != nil || string(got) != "hello" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestReadFrameReusesBuffer(t *testing.T) {
	buf := make([]byte, 0, 64)
	stream := bytes.NewReader(AppendFrame(AppendFrame(nil, []byte("one")), []byte("two!")))
	allocs := testing.AllocsPerRun(1, func() {
		stream.Seek(0, io.SeekStart)
		for range 2 {
			var err error
			if buf, err = ReadFrame(stream, 64, buf); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 || string(buf) != "two!" {
		t.Fatalf("%v allocations, last frame %q", allocs, buf)
	}
}

// TestReadFrameLargeGrows: a payload larger than buf and than the growth
// start is built up as it arrives; a peer that announces a large frame and
// sends little of it gets io.ErrUnexpectedEOF, and the read never allocated
// the announced size at once.
func TestReadFrameLargeGrows(t *testing.T) {
	p := make([]byte, 3*growStartBytes+5)
	for i := range p {
		p[i] = byte(i * 7)
	}
	got, err := ReadFrame(bytes.NewReader(AppendFrame(nil, p)), int32(len(p)), make([]byte, 0, 16))
	if err != nil || !bytes.Equal(got, p) || cap(got) != len(p) {
		t.Fatalf("large frame: len %d cap %d, %v", len(got), cap(got), err)
	}

	const announced = 64 << 20
	short := binary.BigEndian.AppendUint32(nil, announced)
	short = append(short, p[:growStartBytes+1]...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = ReadFrame(bytes.NewReader(short), announced, nil)
	runtime.ReadMemStats(&after)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("short large frame: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew >= announced/2 {
		t.Fatalf("allocated %d bytes for %d received of %d announced", grew, len(short)-4, announced)
	}
}

// TestReadPayloadRefusesNegative: ReadPayload's callers check the size, but
// a negative one is refused rather than sliced.
func TestReadPayloadRefusesNegative(t *testing.T) {
	if _, err := ReadPayload(bytes.NewReader(nil), nil, -1); !errors.Is(err, ErrNegativeSize) {
		t.Fatalf("negative: %v", err)
	}
}

// TestCheckSize: the size judgement at its edges, and Size's sign.
func TestCheckSize(t *testing.T) {
	for _, c := range []struct {
		hdr  [HeaderBytes]byte
		max  int32
		want error
	}{
		{[4]byte{0, 0, 0, 0}, 0, nil},
		{[4]byte{0, 0, 1, 0}, 256, nil},
		{[4]byte{0, 0, 1, 1}, 256, ErrTooLarge},
		{[4]byte{0x7f, 0xff, 0xff, 0xff}, 1<<31 - 1, nil},
		{[4]byte{0x80, 0, 0, 0}, 1<<31 - 1, ErrNegativeSize},
		{[4]byte{0xff, 0xff, 0xff, 0xff}, 100, ErrNegativeSize},
		{[4]byte{0, 0, 0, 1}, -1, ErrTooLarge},
	} {
		if got := CheckSize(Size(c.hdr), c.max); got != c.want {
			t.Errorf("%x max %d: %v, want %v", c.hdr, c.max, got, c.want)
		}
	}
}

// chunkReader hands out at most n bytes per Read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

func TestReadPayloadSummed(t *testing.T) {
	payload := make([]byte, 700<<10+333)
	for i := range payload {
		payload[i] = byte(i*131 + i>>9)
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for _, chunk := range []int{1 << 20, 4096, 9999} {
		var s crcsum.Sums
		buf := make([]byte, len(payload)+100)
		got, err := ReadPayloadSummed(chunkReader{bytes.NewReader(payload), chunk}, buf, len(payload), &s)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("chunk %d: %d bytes, %v", chunk, len(got), err)
		}
		for _, r := range [][2]int{{0, len(payload)}, {17, 300 << 10}, {5000, 5100}, {len(payload) - 70000, len(payload)}} {
			p := got[r[0]:r[1]]
			if s.Checksum(p, r[0]) != crc32.Checksum(p, castagnoli) {
				t.Fatalf("chunk %d: checksum of [%d, %d) differs", chunk, r[0], r[1])
			}
		}
	}
	var s crcsum.Sums
	buf := make([]byte, len(payload))
	if _, err := ReadPayloadSummed(bytes.NewReader(payload[:5000]), buf, len(payload), &s); err != io.ErrUnexpectedEOF {
		t.Fatalf("short stream: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := ReadPayloadSummed(bytes.NewReader(payload), buf[:0:10], 11, &s); err == nil {
		t.Fatal("a payload larger than the buffer was read")
	}
}

// ReadFrameSummed sums a payload that fits its buffer and leaves the sums
// empty for one that does not (read by ReadPayload) and after an error.
func TestReadFrameSummed(t *testing.T) {
	payload := make([]byte, 300<<10+5)
	for i := range payload {
		payload[i] = byte(i*7 + i>>11)
	}
	frame := AppendFrame(nil, payload)
	var s crcsum.Sums
	buf := make([]byte, 0, len(payload)+10)
	got, err := ReadFrameSummed(bytes.NewReader(frame), 1<<20, buf, &s)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("fitting frame: %d bytes, %v", len(got), err)
	}
	p := got[1000 : 200<<10]
	if off, ok := s.Offset(p, 0); !ok || off != 1000 {
		t.Fatalf("Offset in the summed frame: %d, %v", off, ok)
	}
	if s.Checksum(p, 1000) != crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatal("checksum from the sums differs")
	}
	got, err = ReadFrameSummed(bytes.NewReader(frame), 1<<20, make([]byte, 0, 4096), &s)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("larger frame: %d bytes, %v", len(got), err)
	}
	if _, ok := s.Offset(got[10:20], 0); ok {
		t.Fatal("sums cover a frame read without them")
	}
	if _, err := ReadFrameSummed(bytes.NewReader(frame), 1<<20, buf, &s); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFrameSummed(bytes.NewReader(frame[:5000]), 1<<20, buf, &s); err != io.ErrUnexpectedEOF {
		t.Fatalf("short stream: %v", err)
	}
	if _, ok := s.Offset(buf[:10], 0); ok {
		t.Fatal("sums cover a frame that failed")
	}
}
