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
// # Concurrency
//
// One writer: Append, Sync, TruncateTo, Seal, Recover, Rename and Close are
// serialized by the caller (the engine's partition lock). Readers may call
// Size, Path, ReadAt, Scan and File concurrently with Append and Sync; they
// see every byte below the Size they observed. Readers concurrent with
// TruncateTo may read bytes that are being dropped; readers must not outlive
// Close (the engine reference-counts segments).
//
// # Files
//
// All I/O goes through the File interface (positional reads and writes only,
// never the file offset), implemented by *os.File (pwrite/pread/fdatasync) and
// later by an io_uring file. Package segmenttest provides an in-memory File
// that loses unsynced writes on a simulated crash and a fault-injecting
// wrapper, for crash and error tests.
package segment
