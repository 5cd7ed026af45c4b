//go:build linux

package segment

import (
	"bytes"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"unsafe"
)

// The O_DIRECT reader reads straight into a caller's page-aligned buffer
// (readInto: its own buffer stays unused) and through its buffer
// otherwise; either way every byte is the segment's, for buffer sizes
// around the segment's size and the chunk size, whole and partial pages.
func TestDirectReaderIntoAlignedBuffers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "00000000000000000000.log")
	s, err := Create(p, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := make([]byte, 2<<20+5000)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if _, err := s.Append(data); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	aligned := func(n int) []byte { // a page-aligned buffer of n bytes
		b := make([]byte, n+pageBytes)
		off := int((pageBytes - uintptr(unsafe.Pointer(unsafe.SliceData(b)))%pageBytes) % pageBytes)
		return b[off : off+n]
	}
	for _, tc := range []struct {
		buf    []byte
		direct bool // the reader's own buffer is never filled
	}{
		{aligned(1 << 20), true},           // two chunks, then 5000 bytes read as two pages
		{aligned(1<<20 + pageBytes), true}, // reads of one chunk each
		{aligned(3 << 20), true},           // reads of one chunk each
		{aligned(pageBytes), true},         // a page at a time, the last one partial
		{aligned(1 << 20)[1:], false},      // not aligned: through the reader's buffer
		{aligned(pageBytes - 512), false},  // shorter than a page
	} {
		o := s.file.(*osFile)
		f, err := o.get(false)
		if err != nil {
			t.Fatal(err)
		}
		r, err := openDirectReader(f, int64(len(data)))
		o.put()
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		n, err := io.CopyBuffer(struct{ io.Writer }{&got}, r, tc.buf)
		filled := r.n > 0
		r.Close()
		if err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("buffer of %d bytes: copied %d of %d (equal %v), %v", len(tc.buf), n, len(data), bytes.Equal(got.Bytes(), data), err)
		}
		if filled == tc.direct {
			t.Errorf("buffer of %d bytes: the reader's own buffer used %v, want %v", len(tc.buf), filled, !tc.direct)
		}
	}
}
