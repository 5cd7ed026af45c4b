package txn

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestIDsNeverRepeatAcrossRestarts: every "restart" (a new source and
// manager on the same directory) continues after the last block handed
// out, even when that block was only partly used.
func TestIDsNeverRepeatAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	seen := map[int64]bool{}
	ctx := context.Background()
	for restart := 0; restart < 4; restart++ {
		m := NewIDManager(mustFileSource(t, dir, 0))
		n := 1 + restart*700 // partial blocks and block boundaries
		for i := 0; i < n; i++ {
			id, err := m.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if id < 0 || seen[id] {
				t.Fatalf("restart %d: id %d handed out twice (or negative)", restart, id)
			}
			seen[id] = true
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, BlockFileName))
	if err != nil {
		t.Fatal(err)
	}
	next, err := parseBlockFile(data)
	if err != nil {
		t.Fatal(err)
	}
	for id := range seen {
		if id >= next {
			t.Fatalf("id %d at or above the persisted next_producer_id %d", id, next)
		}
	}
}

// TestIDManagerConcurrent: concurrent callers never get the same id.
func TestIDManagerConcurrent(t *testing.T) {
	m := NewIDManager(mustFileSource(t, t.TempDir(), 0))
	const workers, each = 4, 800
	ids := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id, err := m.Next(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				ids[w] = append(ids[w], id)
			}
		}(w)
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, l := range ids {
		for _, id := range l {
			if seen[id] {
				t.Fatalf("id %d twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != workers*each {
		t.Fatalf("%d ids, want %d", len(seen), workers*each)
	}
}

// TestBlockFileRefusesGarbage: a damaged file stops allocation instead of
// restarting at 0, and the error is retriable (nothing is overwritten).
func TestBlockFileRefusesGarbage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, BlockFileName)
	if err := os.WriteFile(path, []byte("version: 1\nnext_producer_id: 12x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := NewIDManager(mustFileSource(t, dir, 0)).Next(context.Background())
	if !errors.Is(err, errBlockFile) {
		t.Fatalf("err %v, want a malformed-file error", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "version: 1\nnext_producer_id: 12x\n" {
		t.Fatalf("file was rewritten: %q", got)
	}
}

// failingSource fails, then hands out one block.
type failingSource struct{ calls int }

func (s *failingSource) AllocateBlock(context.Context) (Block, error) {
	s.calls++
	if s.calls == 1 {
		return Block{}, errors.New("controller unavailable")
	}
	return Block{First: 5000, Size: 2}, nil
}

func TestIDManagerRetriesAfterSourceError(t *testing.T) {
	src := &failingSource{}
	m := NewIDManager(src)
	if _, err := m.Next(context.Background()); err == nil {
		t.Fatal("no error from a failing source")
	}
	for _, want := range []int64{5000, 5001, 5000} { // the source hands out 5000 again: a fake
		id, err := m.Next(context.Background())
		if err != nil || id != want {
			t.Fatalf("Next = %d, %v; want %d", id, err, want)
		}
	}
	if src.calls != 3 {
		t.Fatalf("%d block fetches, want 3", src.calls)
	}
}

// FuzzParseBlockFile: never panics; what parses re-formats to itself.
func FuzzParseBlockFile(f *testing.F) {
	f.Add(formatBlockFile(0))
	f.Add(formatBlockFile(123000))
	f.Add([]byte("version: 1\nnext_producer_id: -1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := parseBlockFile(b)
		if err != nil {
			return
		}
		if n < 0 || string(formatBlockFile(n)) != string(b) {
			t.Fatalf("parsed %d from %q", n, b)
		}
	})
}

func mustFileSource(t *testing.T, dir string, node int32) *FileBlockSource {
	t.Helper()
	s, err := NewFileBlockSource(dir, node)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFileSourceNodeRanges: each node hands out ids from its own range, so
// brokers of a cluster never collide; out-of-range node ids are refused.
func TestFileSourceNodeRanges(t *testing.T) {
	ctx := context.Background()
	for _, node := range []int32{0, 1, 7, int32(MaxFileNodeID)} {
		dir := t.TempDir()
		m := NewIDManager(mustFileSource(t, dir, node))
		lo, hi := int64(node)<<NodeRangeBits, (int64(node)+1)<<NodeRangeBits
		for i := 0; i < 1500; i++ {
			id, err := m.Next(ctx)
			if err != nil || id < lo || id >= hi {
				t.Fatalf("node %d: id %d (%v) outside [%d, %d)", node, id, err, lo, hi)
			}
		}
		// The same directory under another node id continues in that
		// node's range.
		if node == int32(MaxFileNodeID) {
			continue
		}
		id, err := NewIDManager(mustFileSource(t, dir, node+1)).Next(ctx)
		if err != nil || id != hi {
			t.Fatalf("renumbered %d -> %d: first id %d (%v), want %d", node, node+1, id, err, hi)
		}
	}
	for _, bad := range []int32{-1, int32(MaxFileNodeID) + 1} {
		if _, err := NewFileBlockSource(t.TempDir(), bad); err == nil {
			t.Fatalf("node id %d accepted", bad)
		}
	}
}
