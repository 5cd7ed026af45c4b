package index

import "fmt"

// OffsetEntryBytes is the size of one offset index entry.
const OffsetEntryBytes = 8

// OffsetIndex maps offsets to byte positions in a segment: entries of
// (relative offset u32 BE, position u32 BE), increasing in both. File
// preallocated to maxBytes (rounded down to 8) while active and mmap'ed;
// Close trims it to the entries written.
type OffsetIndex struct {
	x *file
}

// OpenOffset opens or creates path for a segment whose base offset is base.
// Existing file: entries = file size / 8 (trimmed on clean close), then the
// file is grown to maxBytes for appending. maxBytes must hold one entry; a
// file already larger than maxBytes keeps its entries and is full.
func OpenOffset(path string, base int64, maxBytes int) (*OffsetIndex, error) {
	return OpenOffsetWith(path, base, maxBytes, Options{})
}

// OpenOffsetWith is OpenOffset with options.
func OpenOffsetWith(path string, base int64, maxBytes int, o Options) (*OffsetIndex, error) {
	x, err := openFile(path, base, maxBytes, OffsetEntryBytes, o)
	if err != nil {
		return nil, err
	}
	return &OffsetIndex{x: x}, nil
}

func (o *OffsetIndex) rel(i int) uint32 { return o.x.word(i, 0) }
func (o *OffsetIndex) pos(i int) uint32 { return o.x.word(i, 1) }

// Append adds an entry for the batch starting at byte pos whose first offset
// is offset (absolute). offset and pos must be greater than the last
// entry's (ErrOrder); ErrFull when the index is full.
func (o *OffsetIndex) Append(offset int64, pos int64) error {
	x := o.x
	if x.closed {
		return ErrClosed
	}
	rel, ok := x.relative(offset)
	if !ok || pos < 0 || pos > 1<<31-1 {
		return fmt.Errorf("%w: offset %d (base %d) position %d", ErrOrder, offset, x.base, pos)
	}
	n := x.entries()
	if n > 0 {
		if lastRel, lastPos := x.lastWord(n, 0), x.lastWord(n, 1); rel <= lastRel || uint32(pos) <= lastPos {
			return fmt.Errorf("%w: offset %d position %d after offset %d position %d",
				ErrOrder, offset, pos, x.base+int64(lastRel), lastPos)
		}
	}
	if n >= x.capacity {
		return ErrFull
	}
	if err := x.reserve(n); err != nil {
		return err
	}
	x.setWord(n, 0, rel)
	x.setWord(n, 1, uint32(pos))
	return x.published(n, [3]uint32{rel, uint32(pos)})
}

// floor returns the index of the greatest entry among the first n whose
// relative offset is <= rel, or -1. Like Kafka, it first checks the warm
// tail (the last warmBytes of entries, where consumers near the log end
// land) so that most searches touch only those few cache-resident pages.
func (o *OffsetIndex) floor(n int, rel uint32) int {
	lo, hi := 0, n // invariant: entries < lo are <= rel, entries >= hi are > rel
	if w := n - warmBytes/OffsetEntryBytes; w > 0 {
		if o.rel(w) <= rel {
			lo = w + 1
		} else {
			hi = w
		}
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if o.rel(m) <= rel {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// Lookup returns the greatest entry whose offset is <= offset, or (base, 0)
// if there is none. Safe concurrently with Append and TruncateTo.
func (o *OffsetIndex) Lookup(offset int64) (entryOffset int64, pos int64) {
	x := o.x
	if offset < x.base {
		return x.base, 0
	}
	rel := uint32(min(offset-x.base, 1<<32-1))
	for try := 0; try < optimisticTries; try++ {
		g := x.gen.Load()
		n := x.entries()
		i := o.floor(n, rel)
		entryOffset, pos = x.base, 0
		if i >= 0 {
			entryOffset, pos = x.base+int64(o.rel(i)), int64(o.pos(i))
		}
		if x.gen.Load() == g {
			return entryOffset, pos
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if i := o.floor(x.entries(), rel); i >= 0 {
		return x.base + int64(o.rel(i)), int64(o.pos(i))
	}
	return x.base, 0
}

// TruncateTo drops the entries whose offset is >= offset.
func (o *OffsetIndex) TruncateTo(offset int64) {
	x := o.x
	if offset <= x.base {
		x.truncate(0)
		return
	}
	rel := uint32(min(offset-x.base, 1<<32-1))
	// Entries < rel stay: the floor of rel-1 is the last one kept.
	x.truncate(o.floor(x.entries(), rel-1) + 1)
}

// Reset drops all entries (before rebuilding the index from the log).
func (o *OffsetIndex) Reset() { o.x.truncate(0) }

// Entries is the number of entries.
func (o *OffsetIndex) Entries() int { return o.x.entries() }

// Full reports whether Append would return ErrFull.
func (o *OffsetIndex) Full() bool { return o.x.full() }

// Last returns the last entry, if any.
func (o *OffsetIndex) Last() (offset int64, pos int64, ok bool) {
	x := o.x
	for try := 0; try < optimisticTries; try++ {
		g := x.gen.Load()
		n := x.entries()
		if n == 0 {
			return 0, 0, false
		}
		offset, pos = x.base+int64(o.rel(n-1)), int64(o.pos(n-1))
		if x.gen.Load() == g {
			return offset, pos, true
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := x.entries(); n > 0 {
		return x.base + int64(o.rel(n-1)), int64(o.pos(n - 1)), true
	}
	return 0, 0, false
}

// Entry returns entry i: the offset and the position it maps; ok is
// false when i is not below Entries() or the index is closed. It takes
// the writer's mutex: it is for inspection (tools, tests), not lookups.
func (o *OffsetIndex) Entry(i int) (offset int64, pos int64, ok bool) {
	x := o.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed || i < 0 || i >= x.entries() {
		return 0, 0, false
	}
	return x.base + int64(o.rel(i)), int64(o.pos(i)), true
}

// Check verifies that offsets and positions strictly increase, fit the
// signed 32-bit range Kafka reads them in, and that positions lie inside a
// log of logSize bytes. It returns an error wrapping ErrCorrupt.
func (o *OffsetIndex) Check(logSize int64) error {
	x := o.x
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.entries()
	for i := range n {
		rel, pos := o.rel(i), o.pos(i)
		switch {
		case rel > 1<<31-1 || pos > 1<<31-1:
			return fmt.Errorf("%w: %s: entry %d (%d, %d) out of range", ErrCorrupt, x.path, i, rel, pos)
		case int64(pos) >= logSize:
			return fmt.Errorf("%w: %s: entry %d position %d past the log end %d", ErrCorrupt, x.path, i, pos, logSize)
		case i > 0 && (rel <= o.rel(i-1) || pos <= o.pos(i-1)):
			return fmt.Errorf("%w: %s: entry %d (%d, %d) does not follow (%d, %d)",
				ErrCorrupt, x.path, i, rel, pos, o.rel(i-1), o.pos(i-1))
		}
	}
	return nil
}

// Sync writes the entries to disk (msync; a private mapping's new entries
// are written to the file and fdatasync'ed).
func (o *OffsetIndex) Sync() error { return o.x.sync() }

// WriteBack writes the entries a private mapping (Options.Private) added
// since the last write-back to the file, without syncing it; a no-op for a
// shared mapping. Safe concurrently with Append and readers.
func (o *OffsetIndex) WriteBack() error { return o.x.writeBackLocked(false) }

// WriteOut is WriteBack of whole pages of entries (the entries that end
// in the last page they fill; the rest wait for a later WriteOut, WriteBack,
// Sync or Close) that also waits until the device has taken the pages it
// wrote (sync_file_range on Linux; no metadata, no cache flush), so that
// they do not wait for the next sync of the file system, where they would
// queue in one burst with every other index's. An index that filled no
// page and had no WriteBack since its last write-out is skipped (the file
// is not even opened). An error is also returned by the next Sync and by
// Close.
func (o *OffsetIndex) WriteOut() error { return o.x.writeBackLocked(true) }

// Close trims the file to the entries written, unmaps and closes it. It must
// not run concurrently with readers.
func (o *OffsetIndex) Close() error { return o.x.close() }

// Rename moves the index file to newPath (same filesystem). The directory is
// not fsynced: indexes are rebuilt from the log when in doubt.
func (o *OffsetIndex) Rename(newPath string) error { return o.x.rename(newPath) }

// Path is the index file's current path.
func (o *OffsetIndex) Path() string { return o.x.pathName() }

// Base is the segment's base offset.
func (o *OffsetIndex) Base() int64 { return o.x.base }
