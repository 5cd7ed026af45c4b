package index_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratalog/strata/index"
)

// dirtyPages reports how many of path's pages the page cache holds dirty
// or under writeback (cachestat(2)); ok is false where the kernel lacks
// the call.
func dirtyPages(t *testing.T, path string) (n uint64, ok bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Cachestat_t
	err = unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &st, 0)
	if errors.Is(err, unix.ENOSYS) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.Dirty + st.Writeback, true
}

// WriteOut writes a private mapping's new entries to the file as WriteBack
// does, and leaves none of the file's pages dirty: the device has them
// before it returns (WriteBack leaves them to the next sync).
func TestWriteOutLeavesNoDirtyPages(t *testing.T) {
	dir := t.TempDir()
	const base = 1000
	off, err := index.OpenOffsetWith(filepath.Join(dir, "0.index"), base, 1<<20, index.Options{Private: true})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	tim, err := index.OpenTimeWith(filepath.Join(dir, "0.timeindex"), base, 1<<20, index.Options{Private: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tim.Close()
	next := int64(0)
	add := func(n int) {
		for range n {
			next++
			if err := off.Append(base+next, next*4096); err != nil {
				t.Fatal(err)
			}
			if err := tim.Append(1_700_000_000_000+next, base+next); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name  string
		path  string
		size  int64
		back  func() error
		out   func() error
		count func() int
	}{
		{"offset", off.Path(), 8, off.WriteBack, off.WriteOut, off.Entries},
		{"time", tim.Path(), 12, tim.WriteBack, tim.WriteOut, tim.Entries},
	}

	// Three pages of entries written back: dirty in the page cache.
	add(1100)
	for _, c := range cases {
		if err := c.back(); err != nil {
			t.Fatal(err)
		}
		if n, ok := dirtyPages(t, c.path); !ok {
			t.Logf("no cachestat(2) here: only the entries are checked")
		} else if n == 0 {
			t.Logf("%s: the kernel wrote the write-back's pages already", c.name)
		}
	}
	// More entries, written out: on the file, and no page left dirty.
	add(700)
	for _, c := range cases {
		if err := c.out(); err != nil {
			t.Fatal(err)
		}
		if n, ok := dirtyPages(t, c.path); ok && n != 0 {
			t.Fatalf("%s: %d pages dirty or under writeback after WriteOut", c.name, n)
		}
		b, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		// Whole pages of entries: the entries that end in the last
		// page they fill are on the file, the next one is not yet.
		page := int64(os.Getpagesize())
		want := int64(c.count()) * c.size / page * page / c.size * c.size
		if c.count() != 1800 || int64(len(b)) < want+c.size {
			t.Fatalf("%s: %d entries, file of %d bytes", c.name, c.count(), len(b))
		}
		if allZero(b[want-c.size : want]) {
			t.Fatalf("%s: the last entry of the last whole page is not on the file after WriteOut", c.name)
		}
		if !allZero(b[want : want+c.size]) {
			t.Fatalf("%s: WriteOut wrote an entry of the page the entries have not filled", c.name)
		}
	}
}

// A write-out writes whole pages of entries: an index whose entries have
// not filled a page since its last write-out is skipped (no open, no
// write, no sync_file_range: an idle partition's indexes, and a busy one's
// while its page fills, cost nothing each second), and one with a page
// filled, a truncation and appends filling a page, or a WriteBack since
// is not. The file is moved away behind the index's back so that a
// write-out that opens it fails: a skipped one returns nil.
func TestWriteOutSkipsIdleIndex(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.index")
	off, err := index.OpenOffsetWith(path, 0, 1<<20, index.Options{Private: true})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	perPage := int64(os.Getpagesize() / index.OffsetEntryBytes)
	next := int64(0)
	add := func(n int64) error {
		for range n {
			if err := off.Append(next, next*4096); err != nil {
				return err
			}
			next++
		}
		return nil
	}
	if err := off.WriteOut(); err != nil { // empty: nothing to do
		t.Fatal(err)
	}
	if err := add(perPage + 10); err != nil {
		t.Fatal(err)
	}
	if err := off.WriteOut(); err != nil {
		t.Fatal(err)
	}
	away := filepath.Join(dir, "away.index")
	move := func(from, to string) {
		t.Helper()
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	move(path, away)
	if err := off.WriteOut(); err != nil {
		t.Fatalf("idle index: WriteOut opened the file: %v", err)
	}
	if err := add(perPage / 2); err != nil {
		t.Fatal(err)
	}
	if err := off.WriteOut(); err != nil {
		t.Fatalf("entries within a page: WriteOut opened the file: %v", err)
	}
	changes := []struct {
		name string
		do   func() error
	}{
		{"page filled", func() error { return add(perPage) }},
		{"truncation and appends filling a page", func() error {
			off.TruncateTo(next - perPage)
			next -= perPage
			return add(2 * perPage)
		}},
		{"write-back", func() error {
			if err := add(1); err != nil {
				return err
			}
			return off.WriteBack()
		}},
	}
	for _, c := range changes {
		move(away, path)
		if err := c.do(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		move(path, away)
		if err := off.WriteOut(); err == nil {
			t.Fatalf("after a %s: WriteOut skipped the index", c.name)
		}
		move(away, path)
		if err := off.WriteOut(); err != nil {
			t.Fatalf("after a %s: %v", c.name, err)
		}
		move(path, away)
		if err := off.WriteOut(); err != nil {
			t.Fatalf("after a %s, written out: WriteOut opened the file again: %v", c.name, err)
		}
	}
	move(away, path)
}
