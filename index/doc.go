// Package index implements Kafka's sparse offset index and time index for one
// log segment: fixed-width entries in a memory-mapped file, appended by the
// partition's writer and binary-searched by fetches.
//
// # On disk
//
// Byte layouts are Kafka's, so existing tools read them:
//
//	<base offset, 20 digits>.index      OffsetIndex, 8-byte entries
//	  0 relativeOffset uint32 BE  (offset - base)
//	  4 position       uint32 BE  (byte position of a batch in the .log)
//
//	<base offset, 20 digits>.timeindex  TimeIndex, 12-byte entries
//	  0 timestamp      int64  BE  (max timestamp seen so far)
//	  8 relativeOffset uint32 BE  (offset - base)
//
// Relative offsets and positions are limited to math.MaxInt32 because Kafka
// reads them as signed ints. In the offset index both fields strictly
// increase; in the time index timestamps strictly increase and offsets never
// decrease.
//
// While a segment is active its index file is sized to maxBytes (rounded down
// to a whole entry) and mapped read-write, but only the part ahead of the
// written entries has real blocks: ReserveStepBytes at a time, allocated with
// fallocate before any entry is stored there, so a full disk fails an Append
// instead of faulting a store into the mapping, and idle partitions do not
// hold segment.index.bytes of disk each.
// On Linux an open index holds no file descriptor: the file is mapped, the
// descriptor closed at once, and the mapping used for lookups, appends and
// msync (Sync). A reservation step and the trim at Close reopen the file by
// its path (which Rename keeps current) and check it is still the mapped
// file (device and inode) before touching it, so a broker with 10,000
// partitions does not spend 20,000 descriptors on indexes.
// Close trims the file to the entries written, so a cleanly closed index
// opens with entries = size / entry size. After a crash the file still has its
// preallocated size and zero entries follow the real ones; Check then fails
// (entries stop increasing) and the owner rebuilds the index from the log
// (Reset, then Append for each batch found by segment.Recover).
//
// # Behind a file system (tests)
//
// Options.FS opens the index on an internal/vfs file system instead of the
// operating system's, without a mapping: the entries live in a heap buffer
// read from the file at open and reach the file as a private mapping's do,
// at WriteBack, WriteOut (every entry, not whole pages, and no device wait
// here), Sync and Close
// (one write of the entries added since the last). The file is not grown
// ahead of the entries. The engine uses it when it runs over a vfs.MemFS
// (crash tests), so a crash of that file system
// loses, keeps or tears index writes by its rules; on the operating
// system's file system indexes are always mapped, and the mapped path is
// unchanged by the option (no allocation or write per Append).
//
// # Concurrency
//
// One writer (the engine's partition lock) calls Append, TruncateTo, Reset,
// Sync, Rename and Close. Lookup, Last, Entries and Full may run concurrently
// with Append and TruncateTo from any number of readers, without locks:
//
//   - every entry word is stored and loaded with sync/atomic (entries are
//     4-byte aligned in the page-aligned mapping). With 96 partitions
//     appending in turn, an index's first store is 2-3 % of a keyed
//     broker's CPU samples; a plain store there cost the same (the wait
//     is the address translation of a cold page, not the lock: session
//     46), so the stores stay atomic;
//   - Append writes the entry, then publishes it by storing the entry count;
//     a reader loads the count first and reads only entries below it;
//   - TruncateTo stores the smaller count, then bumps a generation counter.
//     Later Appends overwrite truncated slots, which a reader holding the old
//     count may be reading; the reader loads the generation before and after
//     its search and retries if it moved (a sequence lock). After a few
//     retries it takes the writer's mutex, which TruncateTo also holds.
//
// Close unmaps the file: it must not run concurrently with readers (the
// engine reference-counts segments). Check takes the mutex and may run at any
// time.
package index
