//go:build linux

package segment_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stratalog/strata/segment"
)

func fdCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// sealedSegments makes n synced, sealed pwrite segments holding distinct
// bytes.
func sealedSegments(t *testing.T, n int) ([]*segment.Segment, [][]byte) {
	t.Helper()
	dir := t.TempDir()
	var segs []*segment.Segment
	var data [][]byte
	for i := range n {
		s, err := segment.Create(filepath.Join(dir, fmt.Sprintf("%020d.log", i)), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		d := bytes.Repeat([]byte{byte('a' + i)}, 5000+i)
		if _, err := s.Append(d); err != nil {
			t.Fatal(err)
		}
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		segs, data = append(segs, s), append(data, d)
	}
	return segs, data
}

func readBack(t *testing.T, s *segment.Segment, want []byte) {
	t.Helper()
	got := make([]byte, len(want))
	if n, err := s.ReadAt(got, 0); n != len(want) || (err != nil && n != len(want)) || !bytes.Equal(got, want) {
		t.Fatalf("%s: read %d bytes, %v, equal %v", s.Path(), n, err, bytes.Equal(got, want))
	}
}

// TestFileCacheParksIdleSegments: segments given a cache of 2 keep at most
// 2 descriptors while idle; reads of parked ones reopen them with the
// right bytes (also after a Rename); a pinned file survives eviction
// pressure; Close of a parked segment works and leaks nothing.
func TestFileCacheParksIdleSegments(t *testing.T) {
	before := fdCount(t)
	segs, data := sealedSegments(t, 6)
	c := segment.NewFileCache(2)
	for _, s := range segs {
		if err := s.SetFileCache(c); err != nil {
			t.Fatal(err)
		}
	}
	if got := fdCount(t) - before; got != 2 || c.Open() != 2 {
		t.Fatalf("6 idle segments with a cache of 2 hold %d descriptors (cache says %d)", got, c.Open())
	}
	for i, s := range segs {
		readBack(t, s, data[i])
	}
	if got := fdCount(t) - before; got != 2 {
		t.Fatalf("after reading every segment: %d descriptors", got)
	}
	// A pinned segment keeps its file while the others are read.
	segs[0].Pin()
	f := segs[0].File()
	if f == nil {
		t.Fatal("File is nil while pinned")
	}
	for i := 1; i < len(segs); i++ {
		readBack(t, segs[i], data[i])
	}
	got := make([]byte, len(data[0]))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data[0]) {
		t.Fatalf("pinned file after eviction pressure: %v", err)
	}
	segs[0].Unpin()
	// Rename a parked segment, then read it.
	readBack(t, segs[5], data[5])
	readBack(t, segs[4], data[4]) // segs[0..3] are parked now
	moved := segs[1].Path() + ".deleted"
	if err := segs[1].Rename(moved); err != nil {
		t.Fatal(err)
	}
	readBack(t, segs[1], data[1])
	_, reopens := c.Stats()
	if reopens == 0 {
		t.Fatal("no reopen counted")
	}
	for _, s := range segs {
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if got := fdCount(t); got != before {
		t.Fatalf("%d descriptors before, %d after closing every segment", before, got)
	}
}

// TestFileCacheKeepsUnsyncedFiles: a file written or truncated since its
// last Sync keeps its descriptor (a writeback error must reach the Sync of
// a descriptor that was open when it happened), and is parked once synced.
func TestFileCacheKeepsUnsyncedFiles(t *testing.T) {
	segs, data := sealedSegments(t, 3)
	c := segment.NewFileCache(1)
	for _, s := range segs {
		if err := s.SetFileCache(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := segs[0].TruncateTo(100); err != nil { // unsynced change
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		readBack(t, segs[i], data[i])
	}
	if segs[0].File() == nil {
		t.Fatal("a segment truncated and not synced was parked")
	}
	if err := segs[0].Sync(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		readBack(t, segs[i], data[i])
	}
	if segs[0].File() != nil {
		t.Fatal("a synced idle segment beyond the cache size kept its descriptor")
	}
	readBack(t, segs[0], data[0][:100])
}

// TestFileCacheNeverReadsAReplacedFile: a parked segment whose path now
// names another file fails its reads instead of reading that file.
func TestFileCacheNeverReadsAReplacedFile(t *testing.T) {
	segs, _ := sealedSegments(t, 2)
	c := segment.NewFileCache(1)
	for _, s := range segs {
		if err := s.SetFileCache(c); err != nil {
			t.Fatal(err)
		}
	}
	if segs[0].File() != nil {
		t.Fatal("segment 0 not parked")
	}
	p := segs[0].Path()
	if err := os.Rename(p, p+".gone"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Repeat([]byte{'z'}, 6000), 0o644); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := segs[0].ReadAt(buf, 0); err == nil {
		t.Fatalf("read a replaced file: %q", buf)
	}
}

// TestFileCacheConcurrentReaders: readers on many parked segments through
// a tiny cache (under -race): every read returns the segment's bytes.
func TestFileCacheConcurrentReaders(t *testing.T) {
	segs, data := sealedSegments(t, 8)
	c := segment.NewFileCache(2)
	for _, s := range segs {
		if err := s.SetFileCache(c); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 4 {
		wg.Go(func() {
			buf := make([]byte, 6000)
			for i := range 400 {
				k := (i*7 + r) % len(segs)
				s := segs[k]
				s.Pin()
				f := s.File()
				n, err := f.ReadAt(buf[:len(data[k])], 0)
				s.Unpin()
				if err != nil || !bytes.Equal(buf[:n], data[k]) {
					errs <- fmt.Errorf("segment %d: %d bytes, %v", k, n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if parks, _ := c.Stats(); parks == 0 {
		t.Fatal("nothing was parked")
	}
}
