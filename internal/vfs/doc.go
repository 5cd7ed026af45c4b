// Package vfs is the file-system seam: the interface (FS, File) through
// which the engine and the coordinators reach the files they own besides
// segment data, the operating system's implementation (OS), and MemFS, a
// file system in memory that can lose power, crash and fail chosen
// operations, for crash-consistency tests.
//
// Behind the seam: every file and directory of the engine (its data
// directory's listings, topic files, partition directories and
// partition.metadata, the damaged marker, offset checkpoints, the
// leader-epoch checkpoint, the clean-shutdown marker, producer-state
// snapshots, aborted-transaction indexes, offset and time indexes, which
// package index maps on OS and keeps on the heap, written back to the
// file, on any other FS (index.Options.FS), the compaction cleaner's
// .cleaned and .swap files, the journal) and txn's producer-id block
// file. Segment data has its own seam (segment.File): on OS the engine's
// I/O backend reaches it with pread/pwrite or io_uring; on any other FS
// the engine keeps it on that FS too (engine/doc.go, "The file-system
// seam"). The engine's whole-engine crash tests run wholly over a MemFS.
//
// # Files
//
//	vfs.go        FS, File, OS; Open, ReadFile, ReadFileLimit, WriteFile
//	atomic.go     WriteFileAtomicFS (replace durably), ReplaceFileNoSyncFS,
//	              SyncPathFS, TmpPath; their OS shorthands and SyncDir
//	mem.go        MemFS: the tree, its durable shadow, Crash
//	fault.go      Op, Fault: error injection into a MemFS
//	dirsync_*.go  whether the system's fsync of a directory is meaningful
//	rlimit_*.go   OpenFileLimit: the soft RLIMIT_NOFILE
//
// # What is durable when (MemFS keeps exactly these rules)
//
// They are POSIX's minimum, which ext4 and XFS honour; code written to
// them is crash-safe on any of them.
//
//  1. File data. A write, a truncate or O_TRUNC is visible to every reader
//     at once and durable only when a Sync (fsync) of the file returns nil
//     afterwards. Close syncs nothing.
//  2. Directory entries. Creating a file (O_CREATE), Mkdir, Rename and
//     Remove are visible at once and durable only when the directory that
//     holds the entry is synced afterwards (FS.SyncDir, or Sync of the
//     directory opened read-only); a rename between two directories needs
//     both synced. Syncing a file does not make its name durable, and
//     syncing a directory does not make its files' data durable. A new
//     directory's entry is in its parent; its own entries need its own
//     sync.
//  3. Data lives in the inode, not the name. A renamed file keeps its
//     synced data under the new name once the rename is durable; until
//     then a crash keeps the old name and, at the target name, the file
//     that was there before with its own synced data. Hence the atomic
//     replace (WriteFileAtomicFS): write a temporary file, fsync it,
//     rename it over the target, fsync the directory. After a crash the
//     target holds the old or the new contents, never a mix, and the new
//     ones once the directory sync returned nil.
//  4. Open files keep their inode: a file removed or renamed while open
//     stays readable and writable through the open File; at a crash an
//     inode no durable name reaches is gone.
//
// # Crashes
//
// Crash returns the file system a restart finds. By default it holds only
// durable state: every file's contents as of its last successful Sync and
// every directory's entries as of its last successful sync. That is the
// worst case, but not the only one: a real disk may also keep some of what
// was never synced. CrashOptions.KeepUnsynced keeps a random prefix of the
// unsynced directory changes, in the order they were made across
// directories (an ordered metadata journal, as ext4's), and of each file's
// unsynced writes; this is what produces, for instance, a rename that
// reached the disk before the renamed file's data (an empty file under the
// new name: ReplaceFileNoSyncFS's reader must check what it reads).
// CrashOptions.Tear applies the next unsynced write of each file in part:
// a random prefix of its bytes, and half the time zeros over the rest of
// its range past the old end of the file (the new size reached the disk
// before the data, as on XFS or ext4 with data=writeback).
// CrashOptions.Reorder, with KeepUnsynced, keeps a random subset of the
// unsynced directory changes instead of a prefix (a rename whole or not
// at all): a file system without ordered metadata, which POSIX allows, so
// that code that relies on one rename reaching the disk before the next
// without a directory sync between them fails. One seed gives one
// outcome.
//
// SetDeviceCache adds the device's volatile write cache, shared by every
// file, that the engine's shared device flushes rely on: a write wholly
// inside a file's durable size (an overwrite of blocks already written
// and synced, no metadata change) is durable once a Sync of any file
// returns nil after it, as an fdatasync of any file flushes the device's
// cache. Everything else still needs its own sync. Its crashes keep or
// lose each unsynced change of a file on its own, not a prefix, and a
// torn write keeps any subset of its 512-byte sectors. Off by default.
//
// PowerOffAfter(n) cuts the power inside a sequence of operations: the
// next n run, and every later one (on the FS or its open files) fails with
// ErrCrashed and changes nothing, so a test can crash between the fsync
// and the rename of an atomic replace. After Crash the old MemFS fails the
// same way.
//
// # Injected errors
//
// Inject makes matching operations fail (by operation, path, path suffix,
// and the Nth match or all of them) with a chosen error, wrapped as the os
// package wraps its own. A failed operation changes nothing, except:
//
//   - Sync of a file: the file's unsynced writes are dropped from what a
//     crash keeps, though reads still see them, and the next Sync succeeds
//     without bringing them back. This is Linux's behaviour since 4.13
//     (the error is reported once, the dirty pages are marked clean): a
//     caller must take a failed fsync as data lost, never retry it and
//     trust the retry.
//   - Sync of a directory: nothing; its unsynced changes stay unsynced (a
//     journaling file system aborts its journal on such an error and
//     fails what follows, which further faults can model).
//   - Close: the file is closed all the same.
//
// A failed Write writes nothing (the disk was full before its first byte).
//
// # Not modelled
//
// Symbolic and hard links (a cross-directory rename synced on one side
// only can leave an inode under two names, as fsck might), permissions,
// file times (ModTime is the zero time: a MemFS reads no clock), free
// space, and, without SetDeviceCache, sector-sized atomic writes (a tear
// may fall on any byte) and a crash keeping a later unsynced write of a
// file without an earlier one (write-back can do that page by page; the
// files behind the seam have at most one unsynced write in flight, or are
// checked by a CRC).
package vfs
