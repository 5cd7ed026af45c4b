package index

import "fmt"

// TimeEntryBytes is the size of one time index entry.
const TimeEntryBytes = 12

// TimeIndex maps timestamps to offsets: entries of (timestamp i64 BE,
// relative offset u32 BE); a new entry only when timestamp > last entry's
// timestamp, and offsets never decrease.
type TimeIndex struct {
	x *file
}

// OpenTime opens or creates path for a segment whose base offset is base,
// like OpenOffset with 12-byte entries.
func OpenTime(path string, base int64, maxBytes int) (*TimeIndex, error) {
	return OpenTimeWith(path, base, maxBytes, Options{})
}

// OpenTimeWith is OpenTime with options (see Options).
func OpenTimeWith(path string, base int64, maxBytes int, o Options) (*TimeIndex, error) {
	x, err := openFile(path, base, maxBytes, TimeEntryBytes, o)
	if err != nil {
		return nil, err
	}
	return &TimeIndex{x: x}, nil
}

func (t *TimeIndex) ts(i int) int64 {
	return int64(uint64(t.x.word(i, 0))<<32 | uint64(t.x.word(i, 1)))
}
func (t *TimeIndex) rel(i int) uint32 { return t.x.word(i, 2) }

// Append adds (timestamp, offset) if timestamp is greater than the last
// entry's; otherwise it does nothing and returns nil. offset (absolute) must
// not be below the last entry's (ErrOrder); ErrFull when the index is full.
func (t *TimeIndex) Append(timestamp int64, offset int64) error {
	x := t.x
	if x.closed {
		return ErrClosed
	}
	n := x.entries()
	if n > 0 && timestamp <= int64(uint64(x.lastWord(n, 0))<<32|uint64(x.lastWord(n, 1))) {
		return nil
	}
	rel, ok := x.relative(offset)
	if !ok || (n > 0 && rel < x.lastWord(n, 2)) {
		return fmt.Errorf("%w: time index offset %d (base %d)", ErrOrder, offset, x.base)
	}
	if n >= x.capacity {
		return ErrFull
	}
	if err := x.reserve(n); err != nil {
		return err
	}
	x.setWord(n, 0, uint32(uint64(timestamp)>>32))
	x.setWord(n, 1, uint32(timestamp))
	x.setWord(n, 2, rel)
	return x.published(n, [3]uint32{uint32(uint64(timestamp) >> 32), uint32(timestamp), rel})
}

// floor returns the index of the greatest entry among the first n whose
// timestamp is <= ts, or -1.
func (t *TimeIndex) floor(n int, ts int64) int {
	lo, hi := 0, n
	if w := n - warmBytes/TimeEntryBytes; w > 0 { // the warm tail first, as in OffsetIndex
		if t.ts(w) <= ts {
			lo = w + 1
		} else {
			hi = w
		}
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.ts(m) <= ts {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// Lookup returns the greatest entry whose timestamp is <= timestamp, or
// (-1, base) if there is none. Safe concurrently with Append and TruncateTo.
func (t *TimeIndex) Lookup(timestamp int64) (entryTimestamp int64, offset int64) {
	x := t.x
	for try := 0; try < optimisticTries; try++ {
		g := x.gen.Load()
		i := t.floor(x.entries(), timestamp)
		entryTimestamp, offset = -1, x.base
		if i >= 0 {
			entryTimestamp, offset = t.ts(i), x.base+int64(t.rel(i))
		}
		if x.gen.Load() == g {
			return entryTimestamp, offset
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if i := t.floor(x.entries(), timestamp); i >= 0 {
		return t.ts(i), x.base + int64(t.rel(i))
	}
	return -1, x.base
}

// TruncateTo drops the entries whose offset is >= offset.
func (t *TimeIndex) TruncateTo(offset int64) {
	x := t.x
	if offset <= x.base {
		x.truncate(0)
		return
	}
	rel := uint32(min(offset-x.base, 1<<32-1))
	lo, hi := 0, x.entries() // offsets never decrease: first entry with rel' >= rel
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.rel(m) < rel {
			lo = m + 1
		} else {
			hi = m
		}
	}
	x.truncate(lo)
}

// Reset drops all entries.
func (t *TimeIndex) Reset() { t.x.truncate(0) }

// Entries is the number of entries.
func (t *TimeIndex) Entries() int { return t.x.entries() }

// Full reports whether an Append of a new timestamp would return ErrFull.
func (t *TimeIndex) Full() bool { return t.x.full() }

// Last returns the last entry, if any.
func (t *TimeIndex) Last() (timestamp int64, offset int64, ok bool) {
	x := t.x
	for try := 0; try < optimisticTries; try++ {
		g := x.gen.Load()
		n := x.entries()
		if n == 0 {
			return 0, 0, false
		}
		timestamp, offset = t.ts(n-1), x.base+int64(t.rel(n-1))
		if x.gen.Load() == g {
			return timestamp, offset, true
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := x.entries(); n > 0 {
		return t.ts(n - 1), x.base + int64(t.rel(n-1)), true
	}
	return 0, 0, false
}

// Entry returns entry i: its timestamp and offset; ok is false when i is
// not below Entries() or the index is closed. It takes the writer's
// mutex: it is for inspection (tools, tests), not lookups.
func (t *TimeIndex) Entry(i int) (timestamp int64, offset int64, ok bool) {
	x := t.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed || i < 0 || i >= x.entries() {
		return 0, 0, false
	}
	return t.ts(i), x.base + int64(t.rel(i)), true
}

// Check verifies that timestamps strictly increase, offsets never decrease
// and fit Kafka's signed 32-bit range. It returns an error wrapping ErrCorrupt.
func (t *TimeIndex) Check() error {
	x := t.x
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.entries()
	for i := range n {
		ts, rel := t.ts(i), t.rel(i)
		switch {
		case rel > 1<<31-1:
			return fmt.Errorf("%w: %s: entry %d offset %d out of range", ErrCorrupt, x.path, i, rel)
		case i > 0 && (ts <= t.ts(i-1) || rel < t.rel(i-1)):
			return fmt.Errorf("%w: %s: entry %d (%d, %d) does not follow (%d, %d)",
				ErrCorrupt, x.path, i, ts, rel, t.ts(i-1), t.rel(i-1))
		}
	}
	return nil
}

// Sync writes the entries to disk (msync; a private mapping's new entries
// are written to the file and fdatasync'ed).
func (t *TimeIndex) Sync() error { return t.x.sync() }

// WriteBack is OffsetIndex.WriteBack for the time index.
func (t *TimeIndex) WriteBack() error { return t.x.writeBackLocked(false) }

// WriteOut is WriteBack of whole pages of entries (the entries that end
// in the last page they fill; the rest wait for a later WriteOut, WriteBack,
// Sync or Close) that also waits until the device has taken the pages it
// wrote (sync_file_range on Linux; no metadata, no cache flush), so that
// they do not wait for the next sync of the file system, where they would
// queue in one burst with every other index's. An index that filled no
// page and had no WriteBack since its last write-out is skipped (the file
// is not even opened). An error is also returned by the next Sync and by
// Close.
func (t *TimeIndex) WriteOut() error { return t.x.writeBackLocked(true) }

// Close trims the file to the entries written, unmaps and closes it. It must
// not run concurrently with readers.
func (t *TimeIndex) Close() error { return t.x.close() }

// Rename moves the index file to newPath (same filesystem).
func (t *TimeIndex) Rename(newPath string) error { return t.x.rename(newPath) }

// Path is the index file's current path.
func (t *TimeIndex) Path() string { return t.x.pathName() }

// Base is the segment's base offset.
func (t *TimeIndex) Base() int64 { return t.x.base }
