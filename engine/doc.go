// Package engine is a broker's set of partition logs in one data directory:
// offsets, high watermarks, log start offsets, segment rolling, crash
// recovery, group commit, leader-epoch bookkeeping, topic metadata and the
// embedded Go API (Topic.Produce / Consume). It knows nothing of the Kafka
// wire protocol.
//
// # On disk
//
// Kafka's layout, so operators recognise it:
//
//	<dir>/
//	    meta.properties                       (owned by the broker config, ignored here)
//	    recovery-point-offset-checkpoint      "0\n<count>\n<topic> <partition> <offset>\n..."
//	    log-start-offset-checkpoint           same format
//	    .strata_cleanshutdown                 present only between a clean Close and the next Open
//	    __strata_topics/<topic>.json          topic metadata: the commit point of create/delete/grow
//	    <topic>-<partition>/
//	        00000000000000000000.log          record batches exactly as produced (baseOffset and
//	                                          partitionLeaderEpoch patched), preallocated
//	        00000000000000000000.index        offset index: (relative offset u32, position u32) BE
//	        00000000000000000000.timeindex    time index: (timestamp i64, relative offset u32) BE
//	        partition.metadata                "version: 0\ntopic_id: <base64url uuid>\n"
//	        leader-epoch-checkpoint           "0\n<count>\n<epoch> <startOffset>\n..."
//
// Segment files are named by the base offset (first offset) they hold, 20
// decimal digits. The topic file is JSON:
//
//	{"version":1,"name":"orders","id":"<base64url>","partitions":3,"configs":{"segment.bytes":"1048576"}}
//
// Every metadata and checkpoint file is replaced atomically: write <name>.tmp,
// fsync it, rename over <name>, fsync the directory. Deleting a topic removes
// its JSON file first (the commit point), then renames each partition
// directory to <topic>-<p>.<id>-delete and removes it; Open removes leftover
// "-delete" directories and renames partition directories that belong to no
// known topic to "<name>.<n>-stray" (never deleting data it cannot account for).
// Segment files removed by DeleteRecords are renamed to *.deleted and unlinked
// once the last reader releases them (reference counts replace Kafka's
// file.delete.delay.ms, which is stored but not needed); Open removes leftover
// *.deleted, *.cleaned, *.swap and *.tmp files. Retention settings
// (retention.ms, retention.bytes) are stored and reported but not enforced yet.
//
// # Offsets and indexes
//
// A Log holds segments sorted by base offset; the last one (the active one)
// takes appends. An append request is written with one pwrite to one segment;
// the log rolls to a new segment first when the request would push the
// segment past segment.bytes, when the segment is older than segment.ms
// (clock time since its first append), when an index is full, or when an
// offset would not fit the index's 31-bit relative offset. An offset index
// entry (batch last offset, batch position) and a time index entry (largest
// timestamp so far, offset of the batch that first reached it) are added each
// time index.interval.bytes have been written since the previous entry, as
// Kafka does. When a segment is sealed (roll or Close) the time index gets a
// final entry for the segment's largest timestamp (a slot is reserved for it),
// both indexes are trimmed to their entries, and the flusher fsyncs them with
// the segment data.
//
// # Durability and the high watermark
//
// With write.caching=false (the default) the high watermark (HW) is the
// durable end: an append is written (not synced) and returns; one flusher
// goroutine per Engine takes the set of logs with unsynced data, and for each
// captures its written end, fdatasyncs the dirty segments (and the index files
// and the directory after a roll), then advances that log's durable offset
// and HW to the captured end, runs WhenDurable callbacks and closes the Wait
// channel. Appends that arrive during a sync are covered by the next one, so
// many concurrent appends share one fdatasync (group commit). With
// write.caching=true the HW advances at append and the flusher syncs when
// flush.messages or flush.ms is reached and whenever a segment rolls. An fsync
// failure is never retried: the engine goes offline (Offline returns the
// error), pending and future WhenDurable calls get ErrOffline, and Append,
// Read and the admin calls fail with it.
//
// # Recovery
//
// The recovery point of a log is its durable offset, written to
// recovery-point-offset-checkpoint by the flusher at most every few seconds
// and by Close. Open trusts every segment that lies wholly below the recovery
// point (its indexes are checked and rebuilt only if the check fails) and
// walks the rest with segment.Recover, which checks every CRC and truncates at
// the first torn or bad batch; later segments are deleted after a truncation.
// Recovery therefore reads the segment holding the recovery point and what
// follows it, never the whole log. After a clean Close (marker file present)
// nothing is walked: the active segment's end is found from its last offset
// index entry plus a header scan of at most index.interval.bytes. Walked
// segments are fsynced, so after Open the HW equals the log end offset.
//
// # Concurrency
//
// All exported methods are safe for concurrent use. Goroutines: the flusher
// (started by Open, stopped by Close) is the only one the package owns.
// Lock order: Engine.adminMu -> Engine.mu -> Log.mu -> Log.idxMu (and
// Log.mu -> Log.epochMu); Log.fireMu -> Log.hwMu;
// Engine.flushMu, Engine.ckptMu (-> Engine.mu read) and Log.hwMu are taken
// with nothing below them except as listed. Log.mu serializes appends, rolls
// and segment-list changes; readers never take it: they load an immutable
// snapshot of the segment list, pin the segment with a reference count, and
// read the indexes under Log.idxMu (read lock). Batches are visible to readers
// only below the HW, and a segment's visible byte end only moves after the
// pwrite completed. WhenDurable callbacks run from the flusher goroutine, or
// inline in WhenDurable, or (write.caching) inline in Append; they must not
// block or call Append.
package engine
