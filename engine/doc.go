// Package engine is a broker's set of partition logs in one data directory:
// offsets, high watermarks, log start offsets, segment rolling, crash
// recovery, group commit, leader-epoch bookkeeping, topic metadata and the
// embedded Go API (Topic.Produce / Consume, Engine.Commit / Committed, and
// in-process consumer groups: Engine.ConsumerGroup, consumergroup.go; and
// in-process share groups, queues with per-record acknowledgement, over
// package share's state machine: Engine.ShareGroup, sharegroup.go; and
// dead-letter topics by hand, Engine.MoveToDeadLetter and
// RedriveDeadLetters, deadletter.go). It knows nothing of the Kafka wire
// protocol.
//
// # On disk
//
// Kafka's layout, so operators recognise it:
//
//	<dir>/
//	    meta.properties                       (owned by the broker config, ignored here)
//	    recovery-point-offset-checkpoint      "0\n<count>\n<topic> <partition> <offset>\n..."
//	    log-start-offset-checkpoint           same format
//	    cleaner-offset-checkpoint             same format: first dirty offset of compacted logs
//	    .strata_cleanshutdown                 present only between a clean Close and the next Open
//	    __strata_topics/<topic>.json          topic metadata: the commit point of create/delete/grow
//	    <topic>-<partition>/
//	        00000000000000000000.log          record batches exactly as produced (baseOffset and
//	                                          partitionLeaderEpoch patched), preallocated
//	        00000000000000000000.index        offset index: (relative offset u32, position u32) BE
//	        00000000000000000000.timeindex    time index: (timestamp i64, relative offset u32) BE
//	        00000000000000000000.txnindex     aborted transactions whose ABORT marker is in this segment:
//	                                          34-byte entries (version i16 0, producerId i64, firstOffset
//	                                          i64, lastOffset i64, lastStableOffset i64) BE (txnindex.go)
//	        partition.metadata                "version: 0\ntopic_id: <base64url uuid>\n"
//	        leader-epoch-checkpoint           "0\n<count>\n<epoch> <startOffset>\n..."
//	        <offset>.snapshot                 producer state (idempotence) as of <offset> (producers.go)
//	    producer-id-block                     the next block of producer ids this node may hand out
//
// Segment files are named by the base offset (first offset) they hold, 20
// decimal digits. The topic file is JSON:
//
//	{"version":1,"name":"orders","id":"<base64url>","partitions":3,"configs":{"segment.bytes":"1048576"}}
//
// Every metadata and checkpoint file is replaced atomically: write <name>.tmp,
// fsync it, rename over <name>, fsync the directory. A leader epoch an
// append starts (a new topic's first append, a follower's first batch of
// a new epoch) reaches leader-epoch-checkpoint with the next
// recovery-point checkpoint, which writes it before its recovery points
// pass the epoch's start; recovery trusts the file below the first batch
// its walk reads and rebuilds the cache from the batches from there on
// (log.go, epochsAssigned; recover.go, walkSegment). Deleting a topic removes
// its JSON file first (the commit point), then renames each partition
// directory to <topic>-<p>.<id>-delete and removes it; Open removes leftover
// "-delete" directories and renames partition directories that belong to no
// known topic to "<name>.<n>-stray" (never deleting data it cannot account for).
// Segment files removed by DeleteRecords are renamed to *.deleted and unlinked
// once the last reader releases them. Segments deleted by retention
// (retention.go: retention.ms judged by a segment's largest timestamp,
// retention.bytes, every log.retention.check.interval.ms) or replaced by the
// cleaner (cleaner.go: cleanup.policy=compact) are renamed the same way, and
// the Log keeps its own reference for file.delete.delay.ms first. Retention's
// renames alone are not followed by a directory fsync (as in Kafka): a crash
// may bring such a segment back, below the checkpointed log start, and the
// next pass deletes it again. The
// cleaner writes <segment>.cleaned files, renames them to *.swap (the commit
// point), then swaps them in; Open promotes leftover *.swap files to their
// final names and removes leftover *.deleted, *.cleaned and *.tmp files.
// cleaner-offset-checkpoint (same format as the other checkpoints) holds each
// compacted log's clean point. Topic configs change at runtime
// (Engine.SetTopicConfig): the topic file is rewritten and every log's config
// pointer replaced.
//
// # Offsets and indexes
//
// A Log holds segments sorted by base offset; the last one (the active one)
// takes appends. An append request is written to one segment through the
// segment's appender (backend.go: O_DIRECT writes through io_uring by
// default, pwrite when io_uring is refused or log.io.backend=pwrite), and
// its batches are also kept in the tail cache (tailcache.go), while the
// log is read at the head, so consumers there are served from memory
// (and, for a log with remote storage, in the copy cache until the
// segment is copied to the object store: copycache.go; both caches'
// memory is 2 MiB huge-page mappings outside the Go heap, slab.go,
// unmapped once nothing reaches their pool); the log rolls
// to a new segment first when the request would push the segment past
// segment.bytes, when the segment is older than segment.ms
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
// With the journal (Options.JournalBytes; the broker's default), an append
// to a log without write.caching becomes durable, and its HW moves, when
// the journal group holding it is written and flushed (journal.go); the
// pipeline below then serves rolls, write-caching logs, Close and engines
// opened without a journal. A roll makes one directory fsync, when the new
// segment's data file is created after its index files (every backend's
// create syncs the directory); neither the roll nor its flush syncs the
// directory again (they did: three per roll; the two fewer cut a keyed
// 4 MiB-segment run's device flushes by 14 %, docs/performance.md,
// "Session 36"). A roll's flush syncs the sealed segment and its index
// files, not the new active segment while every byte in it is journaled
// (Log.activeOwn): its groups made those bytes durable and the next
// checkpoint writes them. Syncing it too cost each
// roll a tail write and a device flush: with 4 MiB segments and keyed
// traffic, 8,729-9,100 device flushes in a 20 s run at 100,000 records/s
// without it against 10,003-10,090 with it (docs/performance.md, "Session
// 35").
//
// With write.caching=false (the default) the high watermark (HW) is the
// durable end: an append is written (not synced) and returns, and its log is
// queued for the durable pipeline. A fixed pool of flush workers (16, owned
// by the Engine: started by Open, drained and stopped by Close) takes queued
// logs in FIFO order as soon as a worker is free. For one log a worker
// captures, under Log.mu, the written end and the dirty files (the active
// segment, segments sealed by a roll with their trimmed index files, the
// directory after a roll), fdatasyncs them outside the lock, then advances
// that log's durable offset and HW to the captured end, runs WhenDurable
// callbacks and closes the Wait channel. Appends that arrive during that
// sync mark the log to be queued again when it ends, so many concurrent
// appends share one fdatasync (group commit) and a log is never synced by
// two workers at once. An append therefore waits for at most the sync of
// its log already in progress, its own sync and the queue ahead of it; a
// slow sync of one log holds back no other log (there are no rounds).
//
// Per-log state (Log.flushState, under Log.mu):
//
//	idle --append--> queued --worker--> running --done--> idle
//	                   ^                   | append
//	                   |                   v
//	                   +-----done----- running-again
//	write caching: idle --append below the thresholds--> deferred
//	               deferred --flush.ms passed / flush.messages / roll--> queued
//
// With write.caching=true the HW advances at append; the log stays deferred
// until flush.messages records accumulated (checked at append) or flush.ms
// passed since its last full flush (a coordinator goroutine with one timer
// queues it then), and a roll queues it at once to sync the sealed segment.
// The coordinator also rewrites recovery-point-offset-checkpoint at most
// every five seconds after a durable offset moved, off the sync path. An
// fsync failure is never retried: the engine goes offline (Offline returns
// the error), pending and future WhenDurable calls get ErrOffline, Append,
// Read and the admin calls fail with it, and workers drop queued logs
// without syncing them.
//
// # Why one fdatasync per log (measured)
//
// Measured on this machine (ext4 on virtio, 2 cores; every file preallocated
// with FALLOC_FL_KEEP_SIZE, 64 KiB written per dirty file, medians of 60-150
// covers, other engineers' builds running): making k dirty files durable
// with fdatasync from 16 threads took 1.56 ms for k=4 and 37 ms for k=128
// (64 threads: 19 ms); one syncfs(2) of the filesystem took 1.35 ms and
// 11 ms, with 4-10x less CPU; sync_file_range on each file plus one
// fdatasync took 1.07 ms and 9.7 ms. In the broker (strata loadgen, 50,000
// 1 KiB records/s, 1,000 partitions) a worker that covered every waiting log
// with one syncfs cut syncs from ~970/s to ~350/s and broker CPU per record
// by 10-15 %, but produce p99 did not improve: a produce request touches
// about five partitions at this rate, so the queue rarely holds more than a
// few logs. What decided it: while another process dirtied 1.5 GB on the
// same filesystem, syncfs p99 for k=4 went to 513 ms (it writes back every
// dirty page of the filesystem, which in a broker includes write-caching
// topics) against 6.7 ms for fdatasync, and in loadgen runs single syncfs
// calls took 1-2 s; a writeback error of any file on the filesystem would
// also take the engine offline. sync_file_range is rejected because it does
// not make metadata durable: the extent conversion and i_size of the other
// files are committed only if the one fdatasync happens to force a journal
// commit that contains them. BenchmarkDurableRequests compares pool sizes:
// 16 workers were as fast as 32 or 64 and faster than 4 (1,000 partitions,
// 128 per request: 79-85 ms per request against 109 ms with 4).
//
// # Shared device flushes (O_DIRECT backend on ext4 or XFS)
//
// The fdatasync of an O_DIRECT segment writing into fallocated (unwritten)
// blocks commits the extent conversion: on this machine's ext4 (no
// journal, virtio disk with a volatile write cache) each one wrote the
// extent block and the inode and flushed the cache, three device round
// trips, in an io-wq kernel worker; with 96 busy partitions that was one
// fdatasync per produce batch and 35 % of the broker's CPU. So active
// segments are zero-filled ahead of their appends (segment PreWrite: a
// reservation step is fallocated, written with zeros and fdatasynced, all
// through the ring, before appends enter it; process-wide one 1 MiB zero
// write or one step's fdatasync is in flight at a time so the zeros never
// queue ahead of the appends, and the next step starts as soon as the last
// one is done, 12-16 MiB ahead of the appends), their appends are pure
// overwrites with no metadata to commit, and once a segment had one
// fdatasync of its own (after it was opened or truncated) its bytes are
// durable as soon as the device's cache is flushed after their writes
// completed. In this mode a flush worker takes every queued log at once
// (flushBatch, at most 256; workers are woken one at a time, so the logs a
// produce request dirties in a row land in one batch): each active
// segment that qualifies submits its tail (segment.StartShared), the
// worker waits for all their writes, then for one fdatasync of an anchor
// file (.strata-flush-anchor in the data directory, on the same device)
// that started after that, and marks them durable. devflush.go runs at
// most one such fdatasync at a time; a second worker (8 in all) gathers
// the logs queued meanwhile and shares the next. Sealed segments, their
// index files, directories and segments not yet synced once fsync
// themselves after the shared flush, so a roll does not delay the other
// logs' acknowledgements. Against one worker per log (64 workers, each
// waiting for its own segment's writes and then for the shared flush), a
// 200,000 records/s run with a tail consumer made about 15,000 waits on
// the flush instead of 44,000 for 9,000-11,000 flushes; broker CPU moved
// within the noise of the machine that day (0.58-0.65 against 0.64-0.79
// CPUs in three alternated pairs; 4.10-4.34 against 4.08-4.73 µs/record
// at 100,000 records/s without a consumer).
//
// Two things keep a produce request's wait short. An append whose log waits
// for durability starts the write of its segment's partial tail chunk
// itself (segment.WriteBehind, when that cannot block), so the bytes reach
// the device before a flush worker takes the log. And the flushes are
// numbered (devFlush.epoch: flushes started, raised before each fdatasync
// is issued); a segment reads that number when its written watermark
// advances, after the write completed (segment.Options.FlushEpoch,
// WrittenEpoch), so a worker waits for flush epoch+1 — which may already
// be running or even over when it gets there — instead of one that starts
// after it looked. On the virtio disk here, which serves requests one at a
// time (a write queued behind a flush waits for it), the broker-side wait
// of an acks=all produce request at 200,000 records/s (kgo, 96 partitions,
// three alternated pairs) went from p50 5.6-9.6 / p90 12.8-21.0 / p99
// 25.3-34.0 ms to 5.6-7.8 / 12.2-17.2 / 22.4-28.7 ms with 10-17 % fewer
// device flushes.
//
// Why it is correct: an fdatasync of any file of an ext4 or XFS
// filesystem, even one with nothing to write, ends with a cache flush
// (REQ_PREFLUSH) of the whole block device, which persists every write
// the device completed before it; a completed O_DIRECT write is in the
// device. Copy-on-write filesystems allocate on every overwrite, so
// elsewhere (and with log.io.flush.shared=false, or a partition directory
// on another device) each segment keeps its own fdatasync.
//
// Measured (strata loadgen --engine native, 96 partitions, closed loop for
// 25 s, 2026-12-01 05:29 UTC, the two modes back to back):
// 340,257 records/s at 1.9 µs of broker CPU per record against 318,196 at
// 3.0 µs with one fdatasync per segment, whose io-wq workers used 8.8 s of
// CPU against 0.04 s. docs/performance.md has the loadgen tables.
//
// # Writing each byte once (log.io.zero.fill=false), and the design ahead
//
// Zero-filled segments make every shared flush a bare cache flush, but the
// device writes each segment byte twice. With log.io.zero.fill=false the
// Direct segments skip the zero-fill: fallocate raises i_size over
// unwritten extents a step at a time, each O_DIRECT write converts the
// extents it covers, and the shared flush is a syncfs(2) of the data
// directory's filesystem (devflush.go; segment.Options.SharedMeta), which
// writes those conversions (and fallocate steps and truncations), followed
// by an fdatasync of the anchor file, which flushes the device cache after
// them. syncfs alone is not that flush everywhere: on ext4 without a
// journal (the development VM's root filesystem) it issues its cache flush
// before the inode-table writes it started have completed, and on XFS it
// only forces the log, so a round with nothing to log (every write within
// blocks already converted) issued no flush at all (measured on an XFS
// loop mount: 100 overwrites each followed by syncfs, 8 device flushes).
// syncfs also writes every other dirty page of the filesystem, so the
// active segments' indexes are mapped private (index.Options.Private):
// their entries reach the files at seal, close and each recovery-point
// checkpoint (writeBackIndexes: whole pages of entries), not with each
// flush. After a crash an active index holds the entries of the last
// write-back, never wrong ones,
// and recovery walks from the last entry below the recovery point as
// before. In both modes a write that starts in a page an earlier write
// covered starts at the filesystem's O_DIRECT alignment below the synced
// end (512 bytes on the development VM's disk), not at the page.
//
// Measured on the development VM (docs/performance.md, "Session 11"; keyed
// franz-go, 96 partitions, the two modes alternated in the same minutes):
// the device writes 1.32-1.36 bytes per record byte closed loop against
// 2.16-2.19 with zero-fill, 1.41 against 2.22 at 200,000 records/s and
// 1.66 against 2.45 at 100,000, for about the same throughput and latency
// and up to a quarter more broker CPU before the second cache flush above
// (with it, 230,000 against 301,000 records/s closed loop and 3.0 against
// 1.6 us of broker CPU per record): ext4 issues O_DIRECT writes into
// unwritten extents from io_uring's worker threads (a block trace shows
// them from iou-wrk), and syncfs writes the inode-table blocks of the
// dirty segments (12-20 metadata writes per flush with 96 partitions here,
// whose directories ext4 spreads over block groups). Without the journal,
// zero-fill is still the faster of the two. The worker threads came from
// the shape of a flush's write, not from unwritten extents as such: it
// started in the page the previous flush wrote (written blocks) and ran
// on over unwritten ones, which ext4 does not count as an overwrite and
// refuses to start without blocking. Since session 41 such a write goes
// out as two (segment's submitSplit), both issued inline: keyed closed
// loop without the journal, 1.12-1.14 us of broker CPU per record against
// 1.56-1.98 before, 143 of 26,634 data writes in 4 s from iou-wrk against
// 25,393 of 27,465 (docs/performance.md, "Session 41"); with the journal,
// the same for the checkpoints' partial chunks. Each round still costs a
// syncfs (8.8 ms a round in a keyed closed loop: its metadata writes, then
// a flush) and the anchor's flush after it (4.3 ms). The metadata is about
// one block per segment the round wrote, wherever the inodes lie: a 1 GiB
// segment fallocated a step at a time had ten extents after 45 MB (steps
// of 96 segments interleave on the disk), more than its inode holds, so
// each write's conversion rewrites the segment's extent-tree leaf block,
// and the inode-table blocks follow for the timestamps. Creating the
// segments' inodes side by side (a throwaway build) left 167-178 distinct
// metadata blocks and one metadata write per data write (session 41).
//
// Why neither meets the keyed targets of docs/performance.md on this disk:
// the device serves one request at a time, ~45 us each plus the bytes, and
// a keyed produce request (franz-go: up to five in flight) carries a
// small batch for nearly every partition, so every flush costs about one
// device write per partition (14,000-24,000 writes/s at 100,000 keyed
// records/s, 10-17 KiB each). The measured alternatives
// (BenchmarkDurableAppends in internal/uring, 96 files x 8 KiB per
// cycle): in-place writes with zero-fill, recycled files or syncfs all
// ran ~94 MB/s at ~98 device writes per cycle (1.0-2.0 device bytes per
// byte), a journal that writes each cycle's bytes for every file as one
// request ran 312 MB/s at 3 writes per cycle but 1.75 bytes per byte (the
// copy into the files). The design this pointed to is built: the journal
// (journal.go, log.io.journal.bytes, on by default since 2026-12-02). Every
// acks=all append is also staged in the journal — an append of 8 KiB or
// more to an O_DIRECT segment as a ref record pointing at the segment
// chunk memory that holds it (written from there with one pwritev: no
// second copy; it was 15 % of the broker's CPU in a keyed closed loop),
// a smaller one copied into the staging buffer; one
// writer writes what is staged as one group and fdatasyncs the journal's
// zero-filled, recycled files (a data write and a cache flush, no
// metadata), and that acknowledges every partition in the group. Segment
// chunks are written when full (128 KiB) and never flushed on the ack
// path; a checkpoint (each time the journal enters its next file) waits
// for the chunks of every journaled log and one shared device flush
// (syncfs with log.io.zero.fill=false, the default with the journal), then
// moves the journal's start. Replay, before recovery, writes the records
// past the start into their segment files, honouring the barrier records
// that truncation, full truncation and the cleaner's swap write first. The
// in-place path for large per-partition writes is not built: measured
// closed loop, the journal's throughput equals the in-place one's (the CPU
// is the limit there), at 2.07 device bytes per record byte against
// 2.16-2.24. Measured at target 2's load (docs/performance.md, "Session
// 13"): the broker's own produce p50 3.4-4.0 ms against 10.2-12.5 without
// the journal, p99 20-24 against 41-43, 28,000 device writes against
// 190,000, 2.12 device bytes per record byte against 2.6-2.8.
//
// A produce request that touches several partitions holds the journal
// (Engine.HoldJournal) so that its appends share one group and one device
// flush; a held stage past 1 MiB is written ahead of its flush while the
// request appends the rest (journal.go, "Writing ahead"). Until session 50
// only requests up to 1 MiB held it, so a keyed closed loop's ~5.6 MB
// requests took ~2.1 groups and flushes each; holding them all ran that
// loop at 113.4 % (median of 4 alternated rounds, 103.3-118.0 %), and
// writing ahead then cut the broker's produce mean from 9.32 to 8.61 ms
// and the client's p99 in 7 of 8 rounds, throughput within the noise
// (docs/performance.md, "Session 50").
//
// Re-measured on a faster disk (docs/performance.md, "Session 20"), the
// choice holds for a different reason: write-once layouts with written
// blocks now reach the keyed targets' byte rates (252-562 MB/s at 8-32 KiB
// per partition per round, 1.0 device byte per byte), but in place the
// broker spends 10-25 % more CPU per record than the journal's one
// sequential write per group, and on two cores shared with the client that
// is ~10 % of a closed loop's throughput. The design that would write each
// byte once without stale data on the recovery path (segment files
// recycled by retention, an ends log whose records carry each round's
// durable ends and batch CRCs, recovery from those ends instead of a walk)
// is written down there; the ends log (log.io.journal.ends, journal.go)
// and the pool are built.
//
// # The ends log: not the default yet (measured)
//
// The ends log runs where the journal and shared device flushes do (the
// O_DIRECT backend on ext4 or XFS; elsewhere the journal holds the records,
// Options.JournalEnds). Measured against the journal holding the records
// (strata loadgen --compare-binary, alternated with fresh brokers; keyed
// franz-go, 96 partitions; docs/performance.md, "Session 28"), it wins
// once retention recycles segment files and loses before: with 8 MiB
// segments and 16 MiB of retention, so that retention recycles files
// within the run, a closed loop ran at 105.1 % of the records mode's
// throughput (median of three rounds, 100.4-115.1 %) at 1.13 device bytes
// per record byte against 2.17, and three brokers with replication factor
// 3 at 114.3 % (102.6-126.0 %) with 3.41 against 6.55; at 200,000 and
// 100,000 records/s with a consumer the same rate at 1.19 and 1.38-1.47
// bytes per byte against 2.2, but with 5 and 16-22 % more broker CPU per
// record, from its many small in-place writes (every round writes each
// partition's new bytes: 214,831 device writes of 9.6 KiB in 15 s at
// 100,000 records/s, where the journal writes one group and the segments'
// 128 KiB chunks; on this virtual machine each costs several microseconds
// of kernel time). Before retention first deletes (fresh files, zero-filled
// ahead of the appends, as in any benchmark run with the default 1 GiB
// segments and a new cluster's first retention period) the device writes
// as much as with the journal (2.14 against 2.09 bytes per byte) and the
// broker spends more CPU: a default-configuration closed loop ran at 92.8 %
// (86.2 and 99.3 %) with 1.29-1.52 against 1.12-1.19 us of broker CPU per
// record, twelve brokers with replication factor 3 at 74.5 %. So it stays
// opt-in until fresh segments cost it no more than the journal does (for
// instance by journaling a fresh segment's records until retention hands
// the partition a recycled file); the pool, its free-space handling and
// the crash tests are in place for the switch.
//
// The pool of recycled segment files (recycle.go; ends mode only): the
// .log file of a segment retention deleted goes, once its last reader let
// go of it, into its partition's pool (<old base>.log.recycle, at most two
// per partition) instead of being unlinked, and the next roll renames it
// to the new segment's name, fsyncs the directory and appends over it
// without truncating (segment.RecycleWith): its blocks are written and
// durable, so appends are pure overwrites made durable by the round's
// device flush alone, with no zeros below the old file's size; only a
// fresh file (empty pool) is zero-filled, and in this mode only up to
// segment.bytes (segment.Options.CapLead: the zero-fill used to run a step
// past where the segment rolls, 4 MiB of zeros for a 1 MiB segment in a
// test, a third of each 8 MiB segment's zeros). Only in ends mode, because the
// old batches past the new segment's end are whole and valid: there every
// round of a recycled segment has an end record, recovery stops at the
// durable end they vouch for, old batches (offsets below the segment's
// base) end any walk, and a bad batch past the recovery point over old
// bytes in a segment no end record names (none yet, or the journal's start
// moved past them) is a lost write, cut; in the other modes recovery would
// have to take those bytes for damage. A crash at any point is safe: a
// *.log.deleted or *.log.recycle file is never part of a log (Open removes
// the first and adopts the second, up to the bound), and a file renamed to
// a segment's name before any round of it was acknowledged holds only old
// batches, which the walk cuts. Seal, TruncateTo and Close cut i_size back to the
// segment's size, so a sealed or cleanly closed segment has the layout of
// a fresh one.
//
// Spare inodes (spare.go; every mode, on the operating system's file
// system): the other files retention deletes, and the producer snapshots
// no longer kept, are cut to 0 bytes and kept as <name>.spare (at most
// 256 per partition) instead of unlinked, and the next rolls and snapshot
// writes rename spares to their new files' names. On an ext4 without a
// journal (this host's) an inode allocation skips every inode freed in
// the last 60-360 s, reading each one's table block: with rolls and
// deletions running continuously a file took ~260 us of CPU to create,
// os.OpenFile was 10-14 % of a small-segment broker's CPU, and the
// rolls' share of it fell by two thirds with spares (docs/performance.md,
// "Session 37"). Open adopts the spares it finds.
//
// # The file-system seam
//
// Every file and directory operation of the engine goes through its
// internal/vfs file system (Options.fs, vfs.OS in production): listings
// of the data directory and of __strata_topics, topic files (engine.go,
// topic.go, cluster.go), partition directories (create, stat, stray and
// delete renames, RemoveAll), partition.metadata and the segment listings
// (recover.go), the damaged marker (replication.go), the offset
// checkpoints (checkpoint.go), the leader-epoch checkpoint (epoch.go), the
// clean-shutdown marker, producer snapshots (producers.go), transaction
// indexes (txnindex.go), offset and time indexes (logsegment.go: mapped on
// vfs.OS, heap-backed on any other file system, index.Options.FS), the
// cleaner's .cleaned and .swap files and their promotion at Open
// (cleaner.go), journal replay's reads of partition.metadata and its
// segment opens (journal_replay.go), segment removals and, unless
// Options.journalFS is set, the journal. Directory syncs go there too
// (Engine.syncDir).
//
// Segment data has its own seam (fileLayer, segment.File): on vfs.OS the
// I/O backend (backend.go) opens segments with pread/pwrite (through
// vfs.OS inside package segment) or io_uring O_DIRECT (system calls in
// package segment); on any other file system the engine keeps segment
// data on that file system (fsFiles, segfile.go, files made by
// segment.FileOf), and every segment renames its .log through the file
// system its file came from (Segment.Rename, logSegment.renameLog), so
// everything a test crashes is on one vfs.MemFS.
//
// What stays on the operating system, and why (grep 'os\.' engine/*.go
// also shows the os package's error values and open flags, which the vfs
// interface uses, and *os.File types for sendfile):
//
//   - devflush.go's flush anchor: a real descriptor for the device flush
//     or syncfs the io_uring backend shares among segments;
//   - backend.go's O_DIRECT probe: it asks the real file system whether
//     io_uring O_DIRECT works there, before choosing that backend;
//   - recover.go's trimIndexFile on vfs.OS: lseek SEEK_DATA/SEEK_HOLE
//     over a preallocated, sparse index (other file systems read the
//     file whole through the vfs);
//   - diskfloor.go's free-space check (statfs through vfs.FreeSpace): a
//     question about the device, not a file operation;
//   - the journal's O_DIRECT files on vfs.OS (vfs.OpenDirect).
//
// The whole-engine crash tests run the engine wholly over a vfs.MemFS
// (Options.fs, no file layer) and lose its power (dropping unsynced
// writes, keeping a seeded part of them in order or not, tearing the
// last): crash_test.go's rounds of appends and journaled appends check
// acknowledged records, indexes and checkpoints after the restart;
// txn_crash_test.go's rounds of idempotent and transactional appends,
// markers, DeleteRecords and checkpoints check the recovered log against
// what was appended, every offset and time index entry, lookups by offset
// and timestamp, the log start, the committed group offset, producer
// state (a retry is a duplicate) and the aborted transactions;
// compact_crash_test.go
// cuts the cleaner mid-clean and mid-swap on a compacted topic and checks
// every key's latest acknowledged value and the offsets;
// metadata_crash_test.go cuts after topic, partition and damaged-mark
// operations. smallfiles_crash_test.go drives the small files' own code
// through power cuts and injected errors. journal_ends_crash_test.go runs
// log.io.journal.ends over a file layer (endsfiles_test.go) on a MemFS
// with its device cache model on (vfs.MemFS.SetDeviceCache: an overwrite
// inside a file's durable size is made durable by any file's fsync, as
// the journal's fdatasync makes the segments' completed writes durable in
// that mode; unsynced writes dropped independently, torn at 512-byte
// sectors): 500 seeded power cuts by default, each checking every
// acknowledged batch, contiguous offsets, nothing served that was never
// appended, and the same log after a second crash and a clean reopen. It
// found that a torn tail was cut with a fresh walk from the bad batch,
// which took back a batch whose base offset's sector was lost (zeros; the
// CRC does not cover the base offset): the tail is now cut at the bad
// batch (TestTornTailStillTruncated/offset); and that a segment no end
// record names (its rounds synced themselves, or a checkpoint passed its
// records) reported a torn write of a later round as corruption, which is
// now cut as a lost write (walkSegment). Odd seeds fill segments with old
// bytes instead of zeros, as a recycled file (recycle.go) holds.
//
// # Recovery
//
// The recovery point of a log is its durable offset, written to
// recovery-point-offset-checkpoint by the flush coordinator at most every
// second and by Close, but held at the end of a segment sealed since the
// last flush until that flush syncs its index files (Log.recoveryPoint).
// Open trusts every segment that lies wholly below the recovery
// point (its indexes are checked and rebuilt only if the check fails) and
// walks the rest with segment.Verify, which checks every CRC. Recovery
// therefore reads the segment holding the recovery point and what follows
// it, never the whole log. After a clean Close (marker file present)
// nothing is walked: the active segment's end is found from its last offset
// index entry plus a header scan of at most index.interval.bytes. Walked
// segments are fsynced, so after Open the HW equals the log end offset.
//
// A bad batch (short, zeroed, a header that does not parse, a failed CRC)
// found by the walk is one of two things (walkSegment):
//
//   - A torn tail: nothing valid follows it in its segment and it lies at
//     or past the recovery point (or it is the last segment's partial
//     batch: a file cut short). A crash loses unsynced writes from the end
//     of a file; the bad bytes are cut and, when later segments exist
//     (pages reach the disk in any order across files), those are deleted
//     too: none of it was acknowledged. A log whose end ends up below the
//     recovery point is marked damaged (replication.go).
//   - Corruption: a valid batch follows it in its segment (the bytes were
//     written whole and damaged since), or it lies below the recovery point
//     and is whole or has later segments after it (durable bytes). Nothing
//     is cut, deleted or rewritten (not even the leader-epoch checkpoint or
//     producer snapshots); the log opens with the segments up to the bad
//     one and serves nothing: Append, Read, the truncations and the admin
//     calls fail with ErrLogCorrupt, which wraps ErrOffline, so the server
//     answers KAFKA_STORAGE_ERROR for that partition alone while the
//     directory and every other partition stay online. One ERROR line names
//     the segment file, the byte position and the offsets affected
//     (Log.Corruption has them); the log is marked damaged (not eligible to
//     lead) and a log-corrupt file in the partition directory makes every
//     later Open verify the whole log, clean shutdown or not, until a
//     verification finds nothing wrong (the operator repaired it:
//     docs/operations.md, "Corrupt partition logs"), which removes it.
//     In a cluster (Options.RefetchCorrupt, set when a controller quorum
//     is configured) the log is instead cut at its last good offset and
//     marked damaged, so the replica re-fetches the rest from the leader
//     and is not eligible to lead until it has (replica package); the cut
//     bytes are kept aside, not deleted: the damaged segment's tail as
//     <segment>.log.corrupt, later segments renamed to .log.corrupt.
//
// The rule errs on the side of keeping data: a crash that kept a later
// unsynced write of a segment but lost an earlier one (the file layers of
// the crash tests keep a prefix of each file's unsynced writes; concurrent
// O_DIRECT writes to one file on real hardware may not) leaves a bad batch
// with valid, never acknowledged batches after it, and is reported as
// corruption (offline on a single node, cut and re-fetched in a cluster)
// rather than cut silently.
//
// Options.VerifyRecovery (log.recovery.verify) checks the CRC of every
// batch of the trusted segments too, at the cost of reading the whole
// directory once; a failure there is corruption. Without it, the bytes
// Open trusted (s.trustEnd: trusted segments whole, the part of a walked
// segment before its resume point) are checked by the reads that send
// them (Log.checkChunk, corrupt.go): a batch that fails its CRC is never
// sent to a consumer or a follower, the log is marked corrupt as above.
// A read checks only what it sends, and a segment's checked prefix
// (s.checked) is not checked again. Bytes appended since Open had their
// CRCs checked on the way in (record.Validate, the follower's
// AppendAsFollower) and are not checked by reads; a header that does not
// parse is caught by every read's header scan (Log.readCorruption).
//
// # Concurrency
//
// All exported methods are safe for concurrent use. Goroutines the package
// owns, all started by Open and stopped by Close: the flush workers
// (flusher.go; Close marks every log closed, queues every dirty one with
// a forced full flush, and waits until the workers drained the queue) and
// the coordinator (timer for flush.ms deadlines and the recovery-point
// checkpoint; stopped first); the retention goroutine and the log cleaner
// (retention.go, cleaner.go; stopped before any log closes). Lock order: Engine.adminMu -> Engine.mu ->
// Log.mu -> Log.idxMu (and Log.mu -> Log.epochMu, Log.mu -> Engine.fl.mu,
// Log.mu -> copyPool.mu, copycache.go, which has nothing below it);
// Log.fireMu -> Log.hwMu; Engine.ckptMu (-> Engine.mu read) and Log.hwMu are
// taken with nothing below them except as listed. Log.mu serializes appends,
// rolls, segment-list changes and the flush state; readers never take it:
// they load an immutable snapshot of the segment list, pin the segment with
// a reference count, and read the indexes under Log.idxMu (read lock).
// Batches are visible to readers only below the HW, and a segment's visible
// byte end only moves after the write completed (Segment.Written()). WhenDurable callbacks run
// from a flush worker (one at a time per log), or inline in WhenDurable, or
// (write.caching) inline in Append; they must not block or call Append.
package engine
