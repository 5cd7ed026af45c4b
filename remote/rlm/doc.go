// Package rlm is the remote log manager of tiered storage (KIP-405, issue
// 23) on one broker: it copies each rolled segment of the logs with
// remote.storage.enable to an object store (remote/objstore), records
// it in remote-log metadata, lets local retention delete only copied
// segments, applies retention.ms/bytes to the remote copies, and reads
// remote data back for fetches below the local log start.
//
// # Copy
//
// A goroutine (Options.Interval, 1 s; Kick for a pass now) lists each
// log's sealed segments wholly below the high watermark
// (engine.Log.SealedSegments) and copies those past the partition's
// CopiedEnd, oldest first, under a fresh segment id (16 random bytes,
// base64url) to the keys
//
//	<topic>-<partition>/<20-digit base offset>-<segment id><kind>
//
// with kind .log, .index, .timeindex, .txnindex (aborted transactions;
// when the segment has any), .snapshot (the producer state at the
// segment's end: the engine keeps it until the segment is copied, and
// rebuilds it from the log for a segment that rolled before the topic got
// remote.storage.enable; a segment is never copied without one) and
// .leader-epoch-checkpoint (the epochs starting below its end). Each
// object is put with its CRC-32C (objstore.Sum: the .log's computed as it
// is stored, the others' first; objstore verifies it before committing
// the object; segments copied before CRC-32C keep their SHA-256). The partition's
// metadata goes COPY_SEGMENT_STARTED (persisted before the first put) →
// COPY_SEGMENT_FINISHED (persisted after the last, with every object's
// size and checksum; CopiedEnd moves to the segment's end). Compacted
// topics are not copied (Kafka refuses tiered storage on them).
//
// Failures: each store call is bounded (Options.OpTimeout) and retried
// with exponential backoff (Options.BackoffMin doubling to BackoffMax)
// for as long as the store answers Transient errors (down, slow, 5xx);
// a Permanent error is given up after three tries. Meanwhile local
// retention waits: engine retention asks CopiedEnd (engine.RemoteHook)
// and never deletes a segment not copied. A copy given up, or cut by a
// crash or Close, leaves a COPY_SEGMENT_STARTED entry that no reader
// uses; the next pass (the first after Open, at start-up) deletes its
// objects (DELETE_SEGMENT_STARTED → dropped) and copies the segment again
// under a new id. So an object is never referenced half-written.
//
// # Metadata
//
// One JSON file per partition in Options.Dir, "<topic id hex>-<partition>.json"
// (topic name and id, CopiedEnd, the segments with id, base and end
// offsets, largest timestamp, size, leader epoch, state, state-change
// time and each object's size and checksum), and the metadata log
// (eventlog.go): every state change is an event record appended to
// remote-log-metadata.log and made durable by an fdatasync of that
// zero-filled file before the change is published (a copy's
// COPY_SEGMENT_FINISHED and a deletion's DELETE_SEGMENT_FINISHED share
// the next change's fdatasync, or the one every pass ends with: one per
// copied segment, not two), and the JSON files are snapshots, rewritten
// when the log is full or replayed at Open. DELETE_SEGMENT_FINISHED drops the
// segment from the partition. A state change used to rewrite the
// partition's whole file with two fsyncs (the file's and its
// directory's), a rewrite that grew with the partition's remote segments:
// in a keyed 100,000 records/s run with 4 MiB segments (~16 segments
// copied a second) the device took 470-487 flushes a second against
// 452-453 with the log (docs/tiered-storage.md).
// That is the single broker's metadata; in a cluster
// (Options.Metadata) the same changes are events (events.go) of the
// replicated topic __remote_log_metadata, applied by each broker for the
// partitions it replicates (assigned.go), and only each partition's
// leader copies and deletes (cluster.go).
//
// # Retention
//
// Local: with remote.storage.enable the engine applies local.retention.ms
// and local.retention.bytes (-2: retention.ms/bytes) to copied segments
// only (engine/remote.go). Remote: each pass deletes, oldest first, the
// remote segments no longer held locally that retention.ms expires (by
// their largest timestamp) or that retention.bytes lets go, counting the
// partition's size as its local bytes plus its remote-only segments'.
// Segments of topics no longer in the engine are deleted too.
// DeleteRecords (Manager.DeleteRecords) moves a persisted remote log
// start: reads and timestamp lookups below it fail or skip it, and the
// segments wholly below it are deleted.
//
// # Reads
//
// Read serves offsets in COPY_SEGMENT_FINISHED segments: whole batches
// from the one holding the offset, up to maxBytes (at least one batch).
// Segments up to Options.MaxCachedSegmentBytes are fetched whole,
// checked against the checksum recorded at copy time, and kept in an LRU
// cache bounded by Options.CacheBytes; larger ones are read in
// Options.ChunkBytes chunks (cached too) from the offset index's floor
// position and each batch returned is CRC-checked. A sequential reader
// gets what follows fetched ahead into the cache (readahead.go,
// Options.ReadAheadBytes); a fetch in flight is shared by every read
// that needs it. Read holds no engine lock: a slow store delays only its
// caller. LogStart (the earliest remote offset) and HighestTieredOffset
// answer ListOffsets' earliest (-2) and latest-tiered (-5); earliest-local
// (-4) is the engine's Log.LogStartOffset. OffsetForTimestamp searches
// remote segments by time (time index, then batches) and
// AbortedTransactions reads the copied .txnindex objects for
// read_committed fetches (search.go).
//
// # In the broker
//
// `strata serve` opens a Manager when the properties file names an object
// store (strata.remote.storage.*), with its metadata in the data
// directory's engine.RemoteMetadataDirName, and installs it in the server
// (server.SetRemoteLog) for Fetch, ListOffsets and DeleteRecords
// (server/remote.go).
//
// # Followers
//
// RemoteLogAuxState (tierstate.go) gives a follower whose leader answered
// OFFSET_MOVED_TO_TIERED_STORAGE the remote segment below the leader's
// local log start: the offset to restart its log at, and that segment's
// copied leader-epoch checkpoint and producer snapshot, which the replica
// fetcher loads into the restarted log (engine.Log.RestartAtTiered,
// replica/tiered.go) instead of fetching the tiered part of the log.
//
// # Metrics
//
// Stats and Lag feed the broker's /metrics (cmd/strata/serve_remote.go);
// Stats.CopyTime and ReadBytes give the upload and remote read rates
// `strata plan --calibrate` reads (perf/remote.go).
package rlm
