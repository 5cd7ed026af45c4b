package segment_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stratalog/strata/segment"
)

// SequentialReader gives the segment's first size bytes, whole 1 MiB
// reads and a last partial one, also after the file was renamed, and
// stops at the segment's end for a larger size. On Linux it
// reads with O_DIRECT (its own descriptor), not through ReadAt.
func TestSequentialReader(t *testing.T) {
	p := filepath.Join(t.TempDir(), "00000000000000000000.log")
	s, err := segment.Create(p, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := make([]byte, 3<<20+5000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 100_000)
		if _, err := s.Append(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(p + ".deleted"); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{0, 4096, 1 << 20, 1<<20 + 1, int64(len(data)) - 1, int64(len(data))} {
		r := s.SequentialReader(size)
		if runtime.GOOS == "linux" && size == int64(len(data)) {
			if typ := fmt.Sprintf("%T", r); typ != "*segment.directReader" {
				t.Errorf("size %d: the reader is a %s, want the O_DIRECT one", size, typ)
			}
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, data[:size]) {
			t.Fatalf("size %d: read %d bytes (equal %v), %v", size, len(got), bytes.Equal(got, data[:min(int64(len(got)), size)]), err)
		}
	}
	// Past the segment's end (the file may hold zeros or old bytes there)
	// the reader stops at the end, as ReadAt does.
	r := s.SequentialReader(int64(len(data)) + 10<<20)
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("size past the end: %d bytes, %v; want the segment's %d bytes", len(got), err, len(data))
	}
}
