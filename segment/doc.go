// Package segment manages one segment file of a partition's log: a .log file
// holding Kafka RecordBatch v2 batches back to back, exactly as they travel on
// the wire (see package record for the batch layout).
//
// # On disk
//
//	<base offset, 20 digits>.log
//
//	pos 0          batch 0: baseOffset int64 | batchLength int32 | ... (LogOverhead+batchLength bytes)
//	pos s0         batch 1
//	...
//	pos Size()     end of valid data == the file's i_size
//	               [preallocated blocks past i_size: fallocate(FALLOC_FL_KEEP_SIZE)]
//
// Batches are stored with their producer-assigned CRC-32C (Castagnoli, over
// bytes 21..end of the batch); only baseOffset and partitionLeaderEpoch, which
// the CRC does not cover, are patched by the broker. There is no other framing
// and no footer: the valid end of a segment is found by walking batches.
//
// Create reserves space with fallocate(FALLOC_FL_KEEP_SIZE) so appends do not
// allocate blocks while i_size keeps marking the real end; Seal (on roll)
// truncates to Size, handing the unused reservation back to the filesystem.
//
// A Direct ring segment (Options.Direct) instead raises i_size ahead of the
// data (fallocate mode 0, a step at a time: PreallocFirstStepBytes, then
// doubling up to PreallocStepBytes): O_DIRECT writes that
// extend i_size are punted by the kernel to io-wq worker threads, far
// slower and costlier than writes below i_size (docs/segment-backends.md,
// "What the package doc rests on"). Its on-disk form while open is
// therefore
//
//	pos 0 .. Size()   batches
//	Size() .. i_size  zeros (allocated, unwritten blocks) — or, after a
//	                  crash, whatever part of the unsynced writes landed
//
// and i_size is not the valid end: OpenWith reports i_size as Size(), and
// Recover walks CRCs from the recovery point and stops at the zero tail (a
// zeroed header does not parse), truncating it. Close and Seal cut i_size
// back to Size (Close also fdatasyncs that when everything was synced), so a
// cleanly closed Direct segment reopens with Size() == the valid end and the
// engine's trusted-reopen check (scan to Size) holds.
//
// # Recovery
//
// After a crash the tail of an unflushed segment may hold a torn batch, zeros,
// or stale bytes. Recover walks from a known batch boundary to i_size reading
// large chunks (>= 1 MiB), parses each header with record.ParseHeader and
// checks its CRC, and stops at the first batch that is short, torn, zeroed,
// fails its CRC, has lastOffsetDelta < 0, or whose baseOffset is not greater
// than the previous batch's last offset. The file is truncated there. Work is
// proportional to the bytes walked, never to the size of the log before from.
//
// # Errors
//
// A failed write or fsync leaves the file in an unknown state (after a failed
// fsync, Linux may already have dropped the dirty pages and a retried fsync
// can succeed without them). The first such error is therefore sticky: every
// later Append and Sync returns it (wrapped in ErrFailed); the owner must close
// the segment and recover it from disk.
//
// # Backends
//
// Options (CreateWith/OpenWith, or SetDefaultOptions for Create/Open) pick
// how a segment writes; the API is the same for all:
//
//   - pwrite (zero Options, the default): Append is one pwrite into the page
//     cache, Sync one fdatasync.
//   - ring, buffered (Options.Ring): Append submits one write through the
//     ring and waits for it; Sync is an fdatasync through the ring.
//   - ring, O_DIRECT (Options.Ring, Direct): write-behind. Append copies its
//     bytes once into an aligned 64 KiB chunk of a uring.Pool and returns;
//     each full chunk is submitted as one write (up to DirectDepth in
//     flight); Sync (and Flush) submit the partially filled chunk up to the
//     end of its last page and carry that page over into a fresh chunk, so
//     the next write rewrites it — a write starting with such a page waits
//     for every earlier write first, so two writes of one page are never in
//     flight together. Completions advance a "written" watermark
//     (uring.Watermark over the logical byte ranges, completions arrive out
//     of order); readers — ReadAt, Scan, and sendfile from File, which must
//     stay below Written() — see only [0, Written()). Sync submits the tail,
//     waits until the written watermark covers the appended end, then issues
//     one fdatasync through the ring and advances the "durable" watermark
//     (Durable()). While that fdatasync runs, new chunk writes are held back
//     (Appends keep copying; one that needs a write waits): writes in flight
//     during an fdatasync lengthen it (package uring's finding; the effect
//     here: docs/segment-backends.md). O_DIRECT writes invalidate the
//     page cache for their range,
//     so buffered readers of the same file (pread, sendfile) see the new
//     bytes (TestDirectPageCacheCoherent). PreWrite additionally zero-fills
//     and fdatasyncs the next reservation step in the background so appends
//     only ever rewrite written blocks.
//
// # The default
//
// O_DIRECT through the ring (Options{Ring, Direct: true}, a shared Pool
// registered with the ring) is the engine's default for segment data: less
// CPU per byte than pwrite for small appends and no more for large ones,
// no dirty page cache build-up, and an fdatasync bounded by
// the write pipeline instead of by what the page cache accumulated.
// BenchmarkAppender's figures for every backend (pwrite, buffered ring,
// O_DIRECT, with and without PreWrite) and how to read them are in
// docs/segment-backends.md. Create/Open (and SetDefaultOptions' zero
// value) stay on pwrite; the engine passes Options to CreateWith/OpenWith
// explicitly (engine/backend.go: log.io.backend=auto). Write-behind changes
// one thing for the engine: bytes below Size() are readable only below
// Written(). An acks=all high watermark waits for Durable() <= Written()
// and is safe as it is; page-cache acks (write.caching) and follower reads
// to the log end bound file reads by Written() and call Flush when a
// wanted batch is above it, and the engine's tail cache serves the newest
// batches from memory.
//
// Buffered reads of a Direct segment (pread, sendfile, readahead past the
// written end) stay coherent with the ring's O_DIRECT rewrites of the
// partial last page: the kernel drops cached pages of a direct write's range
// before the write and again after it completed (and converted unwritten
// extents), so a read racing the write leaves no stale page
// (TestDirectHeadReadsCoherent; engine/backend.go, "Why auto is uring", has
// the reasoning and the engine bug that had been blamed on it).
//
// Readahead: while a Direct segment is active its i_size runs ahead of the
// written end, so the kernel's readahead (read_ahead_kb, 8 MiB windows
// here) would read the zero-filled reservation past Written; those pages
// are dropped when the data's O_DIRECT write lands, and a catch-up reader
// then read every byte twice from the device (docs/segment-backends.md
// has the figures). The read descriptor therefore has readahead off (FADV_RANDOM) until
// Seal cuts i_size to the end, and Prefetch (FADV_WILLNEED, bounded by
// Written) reads ahead for the engine before each file read
// (TestDirectReadaheadStopsAtWritten).
//
// # Concurrency
//
// One writer: Append, Sync, Flush, TruncateTo, Seal, Recover, Rename and
// Close are serialized by the caller (the engine's partition lock); on a
// ring-backed segment Sync may also run concurrently with Append (a flusher
// goroutine), and covers every byte appended before it started. Readers may
// call Size, Written, Durable, Path, ReadAt, Scan and File concurrently with
// Append and Sync; they see every byte below the Written() they observed
// (== Size() except on a Direct ring segment, see Backends).
//
// A ring-backed segment starts no goroutine: its write and fdatasync
// completions run as Done callbacks on the ring's owner goroutine. Locks of
// one ring segment, in order: mu (the tail chunk; Append, Sync and Flush
// while submitting) -> wmu (op free list, in-flight count, written
// watermark, hold-back flag; with a sync.Cond that Done callbacks signal)
// and syncMu (one fdatasync at a time) -> wmu. preMu (zero-fill progress)
// is a leaf. Done callbacks take only wmu or preMu, never mu or syncMu, and
// never block; waits for chunks (Pool.Get), for free ops and for the
// written watermark happen on the caller's goroutine. Readers concurrent with
// TruncateTo may read bytes that are being dropped; readers must not outlive
// Close (the engine reference-counts segments).
//
// # Files
//
// All I/O goes through the File interface (positional reads and writes only,
// never the file offset), implemented by *os.File (pwrite/pread/fdatasync) and
// by *uring.File (a ring-backed buffered segment; a Direct one reads,
// fallocates and truncates through an *os.File and writes through a second,
// O_DIRECT open of the file registered in the ring's fixed-file table,
// whose own descriptor is closed once registered: an open Direct segment
// costs one descriptor, like a pwrite one, unless the table is full).
//
// The file-system seam (seam.go): the pwrite path opens, creates and
// renames a segment's file, and syncs its directory, through an
// internal/vfs file system: Create and Open through vfs.OS, CreateFS and
// OpenFS through any (a vfs.MemFS's file becomes a File without a
// descriptor, FileOf), and Rename through the one the segment's File
// came from (New over a FileOf File; vfs.OS otherwise). The ring paths
// (CreateWith and OpenWith with a Ring) open their O_DIRECT and
// registered descriptors on the operating system and sync the directory
// with vfs.SyncDir. Package segmenttest provides an in-memory File that loses
// unsynced writes on a simulated crash and a fault-injecting wrapper, for
// crash and error tests of the pwrite path; the ring paths are tested on
// real files (a crash is simulated by imaging the file while it is open:
// zero tail past the data, torn last batch).
package segment
