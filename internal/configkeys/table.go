package configkeys

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
)

// Milliseconds per minute and hour (synonym scales).
const (
	minuteMs = 60_000
	hourMs   = 60 * minuteMs
)

// keys is the table, in the README's order. A key's Default must be its
// own canonical text (TestDefaultsParse).
var keys = []Key{
	// `strata serve`: the broker.
	{Broker: "node.id", Synonyms: []Synonym{{Name: "broker.id"}}, Type: Int, Default: "0", Flag: "node-id", Section: "serve",
		Doc: "this broker's id"},
	{Broker: "listeners", Type: String, Default: "PLAINTEXT://127.0.0.1:9092", Strata: true, Check: checkListener, Flag: "listen", Section: "serve",
		Doc: "`NAME://host:port,...`, PLAINTEXT and SSL listeners (docs/security.md; the flag takes one plaintext host:port)"},
	{Broker: "advertised.listeners", Type: String, Shown: "each listener's address", Check: checkListener, Section: "serve",
		Doc: "per listener, the address Metadata gives clients connected to it"},
	{Broker: "log.dirs", Synonyms: []Synonym{{Name: "log.dir"}}, Type: String, Default: "./strata-data", Strata: true, Check: checkLogDirs, Flag: "data-dir", Section: "serve",
		Doc: "the data directory: one path (a comma-separated list is refused at start-up: several log directories per broker are not supported)"},
	{Broker: "num.partitions", Type: Int, Min: 1, Max: math.MaxInt32, Default: "1", Section: "serve",
		Doc: "for auto-created topics and CreateTopics with -1"},
	{Broker: "default.replication.factor", Type: Int, Min: 1, Max: math.MaxInt16, Default: "1", Section: "serve",
		Doc: "for auto-created topics and CreateTopics with -1"},
	{Broker: "auto.create.topics.enable", Type: Boolean, Default: "true", Section: "serve",
		Doc: "Metadata and Produce for an unknown topic create it"},
	{Broker: "socket.request.max.bytes", Type: Int, Min: 1024, Max: math.MaxInt32, Default: "104857600", Section: "serve",
		Doc: "larger frames close the connection before any allocation"},
	{Broker: "fetch.max.bytes", Type: Int, Min: 1024, Max: math.MaxInt32, Default: "57671680", Section: "serve",
		Doc: "the most bytes one Fetch response carries"},
	{Broker: "connections.max.idle.ms", Type: Long, Min: 0, Max: math.MaxInt64, Default: "600000", Section: "serve",
		Doc: "idle connections are closed (0: never)"},
	{Broker: "queued.max.request.bytes", Type: Long, Default: "536870912", Shown: "536870912 (512 MiB)", Strata: true, Check: checkQueuedBytes, Section: "serve",
		Doc: "the broker-wide budget of request bytes read and not yet answered, frames and their decoded requests (Kafka's memory pool, KIP-72); past it connections are not read; each connection may hold 100 MiB of it; -1: unbounded (docs/reliability.md)"},
	{Broker: "metrics.listeners", Type: String, Shown: "none (off)", Strata: true, Check: checkHTTPListeners, Flag: "metrics-listeners", Section: "serve",
		Doc: "`http://host:port,...`: where the broker serves `/metrics` (Prometheus), `/healthz` and `/readyz`, on listeners of their own, never a Kafka listener (docs/operations.md, \"Metrics\")"},
	{Broker: "metrics.partition.labels", Type: Boolean, Default: "false", Strata: true, Section: "serve",
		Doc: "log sizes and consumer group lag per partition (labels `topic`, `partition`) instead of per topic and per group: one series per partition and per group and partition (docs/metrics.md)"},
	{Broker: "log.format", Type: String, Values: []string{"text", "json"}, Default: "text", Strata: true, Flag: "log-format", Section: "serve",
		Doc: "the broker's log lines on standard error: `text` (`time=... level=INFO msg=\"...\" key=value`) or `json` (one JSON object a line with `time`, `level`, `msg` and the line's attributes), Go's log/slog handlers (docs/operations.md, \"Logs\")"},

	// Topic keys: the broker name sets every topic's default, the topic
	// name a topic's override.
	{Topic: "max.message.bytes", Broker: "message.max.bytes", Dynamic: Topic | Broker, Log: true, Type: Int, Min: 0, Max: math.MaxInt32, Default: "1048588", Section: "serve",
		Doc: "the largest record batch a Produce may write"},
	{Topic: "segment.bytes", Broker: "log.segment.bytes", Dynamic: Topic | Broker, Log: true, Type: Int, Min: 14, Max: math.MaxInt32, Default: "1073741824", Section: "serve",
		Doc: "a segment is rolled at this size"},
	{Topic: "segment.ms", Broker: "log.roll.ms", Synonyms: []Synonym{{Name: "log.roll.hours", Scale: hourMs}}, Dynamic: Topic | Broker, Log: true, Type: Long, Min: 1, Max: math.MaxInt64,
		Default: "604800000", Shown: "7 days", Section: "serve",
		Doc: "a segment is rolled at this age"},
	{Topic: "segment.index.bytes", Broker: "log.index.size.max.bytes", Dynamic: Topic | Broker, Log: true, Type: Int, Min: 4, Max: math.MaxInt32, Default: "10485760", Section: "serve",
		Doc: "the size of a segment's offset and time indexes"},
	{Topic: "index.interval.bytes", Broker: "log.index.interval.bytes", Dynamic: Topic | Broker, Log: true, Type: Int, Min: 0, Max: math.MaxInt32, Default: "4096", Section: "serve",
		Doc: "bytes of batches between index entries"},
	{Topic: "retention.ms", Broker: "log.retention.ms",
		Synonyms: []Synonym{{Name: "log.retention.minutes", Scale: minuteMs}, {Name: "log.retention.hours", Scale: hourMs}},
		Dynamic:  Topic | Broker, Log: true, Type: Long, Min: -1, Max: math.MaxInt64, Default: "604800000", Shown: "7 days", Section: "serve",
		Doc: "whole sealed segments older than this (by largest timestamp) are deleted; -1: never"},
	{Topic: "retention.bytes", Broker: "log.retention.bytes", Dynamic: Topic | Broker, Log: true, Type: Long, Default: "-1", Section: "serve",
		Doc: "per partition, oldest segments first; -1: no limit"},
	{Topic: "remote.storage.enable", Dynamic: Topic, Log: true, Type: Boolean, Default: "false", Section: "serve",
		Doc: "tiered storage (KIP-405): rolled segments are copied to the object store (`strata.remote.storage.*`) and read back from it below the local log start; local retention then follows `local.retention.*` and deletes only copied segments, and `retention.*` applies to local plus remote data (docs/tiered-storage.md)"},
	{Topic: "local.retention.ms", Broker: "log.local.retention.ms", Dynamic: Topic | Broker, Log: true, Type: Long, Min: -2, Max: math.MaxInt64, Default: "-2", Shown: "-2 (retention.ms)", Section: "serve",
		Doc: "with remote storage, how long copied segments stay on the local disk too; -2: retention.ms; -1: forever (never above retention.ms)"},
	{Topic: "local.retention.bytes", Broker: "log.local.retention.bytes", Dynamic: Topic | Broker, Log: true, Type: Long, Min: -2, Max: math.MaxInt64, Default: "-2", Shown: "-2 (retention.bytes)", Section: "serve",
		Doc: "with remote storage, the local bytes of a partition past which copied segments are deleted locally, oldest first; -2: retention.bytes; -1: no limit (never above retention.bytes)"},
	{Topic: "message.timestamp.type", Broker: "log.message.timestamp.type", Dynamic: Topic | Broker, Log: true, Type: String,
		Values: []string{"CreateTime", "LogAppendTime"}, Default: "CreateTime", Section: "serve",
		Doc: "LogAppendTime: the broker stamps batches with its clock"},
	{Topic: "cleanup.policy", Broker: "log.cleanup.policy", Dynamic: Topic | Broker, Log: true, Type: List, Values: []string{"delete", "compact"}, Default: "delete", Section: "serve",
		Doc: "delete (retention), compact (the cleaner keeps the last record of each key) or both"},
	{Topic: "preallocate", Broker: "log.preallocate", Dynamic: Topic | Broker, Log: true, Type: Boolean, Default: "true", Strata: true, Section: "serve",
		Doc: "segments are allocated whole when created (fallocate, keep-size)"},
	{Topic: "file.delete.delay.ms", Broker: "log.segment.delete.delay.ms", Dynamic: Topic | Broker, Log: true, Type: Long, Min: 0, Max: math.MaxInt64, Default: "60000", Section: "serve",
		Doc: "a deleted segment's files are removed this long after"},
	{Topic: "write.caching", Broker: "log.write.caching", Dynamic: Topic | Broker, Log: true, Type: Boolean, Default: "false", Strata: true, Section: "serve",
		Doc: "true acks from the page cache and flushes by flush.ms/flush.messages; false: the high watermark is durable (group commit)"},
	{Topic: "flush.messages", Broker: "log.flush.interval.messages", Dynamic: Topic | Broker, Log: true, Type: Long, Min: 1, Max: math.MaxInt64,
		Default: "9223372036854775807", Shown: "never", Section: "serve",
		Doc: "only with write caching"},
	{Topic: "flush.ms", Broker: "log.flush.interval.ms", Dynamic: Topic | Broker, Log: true, Type: Long, Min: 0, Max: math.MaxInt64,
		Default: "9223372036854775807", Shown: "never", Section: "serve",
		Doc: "only with write caching"},
	{Topic: "delete.retention.ms", Broker: "log.cleaner.delete.retention.ms", Dynamic: Topic | Broker, Log: true, Type: Long, Min: 0, Max: math.MaxInt64,
		Default: "86400000", Shown: "1 day", Section: "serve",
		Doc: "compacted topics keep tombstones this long"},
	{Topic: "min.cleanable.dirty.ratio", Broker: "log.cleaner.min.cleanable.ratio", Dynamic: Topic | Broker, Log: true, Type: Double, MinFloat: 0, MaxFloat: 1, Default: "0.5", Section: "serve",
		Doc: "the cleaner compacts a log once this share of it is uncleaned"},
	{Topic: "min.compaction.lag.ms", Broker: "log.cleaner.min.compaction.lag.ms", Dynamic: Topic | Broker, Log: true, Type: Long, Min: 0, Max: math.MaxInt64, Default: "0", Section: "serve",
		Doc: "records younger than this are not compacted"},
	{Topic: "max.compaction.lag.ms", Broker: "log.cleaner.max.compaction.lag.ms", Dynamic: Topic | Broker, Log: true, Type: Long, Min: 1, Max: math.MaxInt64,
		Default: "9223372036854775807", Shown: "unbounded", Section: "serve",
		Doc: "records older than this are compacted whatever the dirty ratio"},

	// The engine's background work and I/O.
	{Broker: "log.retention.check.interval.ms", Type: Long, Min: 1, Max: math.MaxInt64, Default: "300000", Section: "serve",
		Doc: "how often retention runs"},
	{Broker: "log.cleaner.enable", Type: Boolean, Default: "true", Section: "serve",
		Doc: "the compaction cleaner (`cleanup.policy=compact`)"},
	{Broker: "log.cleaner.io.max.bytes.per.second", Dynamic: Broker, Type: Double, Default: "6.7108864e+07", Shown: "64 MiB/s", Strata: true, Check: checkPositive, Section: "serve",
		Doc: "cleaner throttle, so cleaning never starves produce"},
	{Broker: "log.cleaner.backoff.ms", Dynamic: Broker, Type: Long, Min: 1, Max: math.MaxInt64, Default: "15000", Section: "serve",
		Doc: "the cleaner's pause when nothing needs cleaning"},
	{Broker: "log.io.backend", Type: String, Values: []string{"auto", "uring", "pwrite"}, Default: "auto", Strata: true, Section: "serve",
		Doc: "`auto` (O_DIRECT through io_uring, pwrite if io_uring is refused), `uring`, `pwrite`"},
	{Broker: "log.io.flush.shared", Type: Boolean, Default: "true", Strata: true, Section: "serve",
		Doc: "with the O_DIRECT backend on ext4/XFS, active segments are zero-filled ahead of their appends and acks=all durability comes from one device cache flush shared by every partition being flushed (engine/doc.go, \"Shared device flushes\"); `false`: one fdatasync per segment"},
	{Broker: "log.io.zero.fill", Type: Boolean, Default: "false", Strata: true, Section: "serve",
		Doc: "for the modes without `log.io.journal.ends` (which zero-fills fresh segment files itself): `true` zero-fills active segments ahead of their appends so that a flush of them is a bare device cache flush; `false` writes each segment byte once: appends land in unwritten extents and a shared flush is a syncfs of the data directory's filesystem, with active indexes mapped private (written back at each recovery-point checkpoint). With the journal holding the records, acks=all never waits for segment flushes, and zero-fill would add a third write of every byte (docs/performance.md, \"Session 13\")"},
	{Broker: "log.io.journal.bytes", Type: Long, Min: 0, Max: math.MaxInt64, Default: "268435456", Shown: "268435456 (256 MiB)", Strata: true, Section: "serve",
		Doc: "acks=all appends become durable through a journal of that many bytes in the data directory (`__strata_journal/`, four files zero-filled once, at least 16777216): one write and one device flush per group commit whatever the number of partitions, segment files written in 128 KiB chunks behind it and replayed from the journal after a crash (engine/journal.go); `0`: off, each partition's segment is written and flushed per group commit"},
	{Broker: "log.io.journal.ends", Type: Boolean, Default: "false", Strata: true, Section: "serve",
		Doc: "`true` (for long-running brokers whose retention deletes segments: half the device writes once it does, more CPU before; it takes effect with the journal and shared device flushes, the O_DIRECT backend on ext4 or XFS, and the journal holds the records elsewhere; engine/doc.go, \"The ends log: not the default yet\"): the journal holds no record bytes, only each flush round's segment ends; every byte is written once, into its segment (fresh files zero-filled ahead of the appends), and a round's one device flush is the journal's fdatasync of those ends (engine/journal.go; docs/performance.md, \"Session 23\"). Recovery trusts the durable ends they name: a bad batch past one is a lost write and is cut, one below it is reported as corruption; and retention hands each deleted segment's file (whose blocks are written) to the partition's next segment, at most two pooled per partition, so in steady state appends overwrite recycled files and no zeros are written (engine/recycle.go)"},
	{Broker: "log.roll.ahead.bytes", Type: Long, Min: 0, Max: math.MaxInt64, Default: "8388608", Shown: "8388608 (8 MiB)", Strata: true, Section: "serve",
		Doc: "an append that leaves its partition's active segment with less than the smaller of this and an eighth of `segment.bytes` free queues the partition for a roll by a background goroutine, outside produce requests: a roll costs a few milliseconds (the new segment's files, the old one's indexes sealed), and under keyed traffic every partition fills at the same pace, so the one request in which all of them rolled waited for every roll (engine/rollahead.go). Segments end up to that much short of `segment.bytes`; one that fills before its turn rolls in its append, as Kafka's do, and so do all segments when that margin would be under 64 KiB (`segment.bytes` under 512 KiB). `0`: off"},
	{Broker: "log.recovery.verify", Type: Boolean, Default: "false", Strata: true, Section: "serve",
		Doc: "`true`: at start-up, check the CRC of every batch of every partition, not only of what follows the recovery point (after a clean shutdown nothing is walked otherwise); it reads the whole data directory once. A partition found corrupt goes offline (KAFKA_STORAGE_ERROR for it alone) with nothing truncated (docs/operations.md, \"Corrupt partition logs\")"},
	{Broker: "log.scrub.bytes.per.second", Type: Long, Min: 0, Max: math.MaxInt64, Default: "16777216", Shown: "16777216 (16 MiB/s)", Strata: true, Section: "serve",
		Doc: "the background scrubber checks the CRC of every batch of every sealed segment, at most this many bytes a second, one pass at most every hour; a partition found corrupt goes offline as at start-up (KAFKA_STORAGE_ERROR for it alone, nothing truncated; docs/reliability.md, \"The scrubber\"); `0`: off"},
	{Broker: "log.tail.cache.bytes", Type: Long, Default: "268435456", Shown: "268435456 (256 MiB)", Strata: true, Section: "serve",
		Doc: "with the O_DIRECT backend, memory for the newest batches of each partition that consumers read at the head (shared evenly, at most 4 MiB a partition; mapped as partitions are created or opened, up to the budget, in 2 MiB pieces that the kernel turns into huge pages), from which those consumers are served; a consumer further behind reads the segment files, which O_DIRECT keeps out of the page cache, from the device. Raise it to cover the lag your consumers have (256 MiB over 96 busy partitions: about 1.3 s at 200 MB/s); `0` or `-1`: off"},
	{Broker: "remote.log.manager.task.interval.ms", Type: Long, Min: 1, Max: math.MaxInt64, Default: "1000", Strata: true, Section: "serve",
		Doc: "tiered storage: how often the remote log manager looks for rolled segments to copy and remote segments to delete (Kafka: 30000; the object store is named by `strata.remote.storage.*`, docs/tiered-storage.md)"},
	{Broker: "remote.log.manager.copy.max.bytes.per.second", Type: Long, Min: 1, Max: math.MaxInt64, Default: "9223372036854775807", Shown: "unbounded", Section: "serve",
		Doc: "tiered storage: the most bytes a second the remote log manager copies to the object store (each read of a copy waits until what earlier reads returned fits the rate)"},
	{Broker: "remote.log.manager.copy.spread.ms", Type: Long, Min: 0, Max: math.MaxInt64, Default: "5000", Strata: true, Section: "serve",
		Doc: "tiered storage: the remote log manager paces its copies by their backlog, reading each at the backlog's bytes over this many milliseconds a second (at least 16 MiB/s, at most `remote.log.manager.copy.max.bytes.per.second`), so a burst of rolled segments (a keyed topic's partitions roll within seconds of each other) is read, hashed and sent at a steady rate beside the produce path instead of at the device's full speed; the backlog shrinks by about 63 % per spread. Kafka copies at full speed; `0`: full speed (docs/tiered-storage.md)"},
	{Broker: "remote.log.manager.fetch.max.bytes.per.second", Type: Long, Min: 1, Max: math.MaxInt64, Default: "9223372036854775807", Shown: "unbounded", Section: "serve",
		Doc: "tiered storage: the most bytes a second consumers' fetches read from remote data (a read waits until what earlier reads returned fits the rate)"},
	{Broker: "remote.log.copy.cache.bytes", Type: Long, Min: -1, Max: math.MaxInt64, Default: "1073741824", Shown: "1073741824 (1 GiB)", Strata: true, Section: "serve",
		Doc: "tiered storage, with the O_DIRECT backend: memory (allocated as used) for the bytes of the newest segment of each partition of a topic with `remote.storage.enable`, copied from its appends and kept until the segment is copied to the object store, so that a copy reads memory instead of the disk (O_DIRECT segments are not in the page cache, and copy reads queue with the produce path's writes on the device); only partitions whose `segment.bytes` is at most an eighth of it, on their leader; when it is spent, new segments are not kept (their copies read the disk) and memory a rolled segment has held for 30 s (a store that is down) goes to newer ones (engine/copycache.go). It needs about the active segments plus the copy backlog (produce rate × `remote.log.manager.copy.spread.ms`). `0` or `-1`: off"},
	{Broker: "remote.log.reader.cache.bytes", Type: Long, Min: 1, Max: math.MaxInt64, Default: "134217728", Shown: "134217728 (128 MiB)", Strata: true, Section: "serve",
		Doc: "tiered storage: memory for remote data fetched for consumers; segments up to a quarter of it are fetched whole, checked against their checksum (CRC-32C; SHA-256 for objects copied before 2026-12-05) and cached, larger ones read by ranges"},
	{Broker: "remote.log.reader.read.ahead.bytes", Type: Long, Min: 0, Max: math.MaxInt64, Default: "16777216", Shown: "16777216 (16 MiB)", Strata: true, Section: "serve",
		Doc: "tiered storage: when a consumer reads remote data sequentially, the chunks and segments starting within this many bytes past what it read are fetched into the cache in the background (at most 4 fetches at once; never more than a quarter of `remote.log.reader.cache.bytes`); `0`: off"},
	{Broker: "log.dir.min.free.bytes", Dynamic: Broker, Type: Long, Min: 0, Max: math.MaxInt64, Default: "4294967296", Shown: "4294967296 (4 GiB)", Strata: true, Section: "serve",
		Doc: "the free-space floor: while the data directory's filesystem has less usable space than the smaller of this and `log.dir.min.free.percent`, produce and topic creation are refused with KAFKA_STORAGE_ERROR (retriable) and fetches, deletes and retention go on; produce resumes by itself when space returns (checked every 250 ms). Kafka has no floor; `0`: off (docs/reliability.md, \"Disk full\")"},
	{Broker: "log.dir.min.free.percent", Dynamic: Broker, Type: Double, MinFloat: 0, MaxFloat: 100, Default: "5", Strata: true, Section: "serve",
		Doc: "the floor as a percentage of the filesystem's size: the smaller bound applies, so small disks keep most of their space usable; `0`: off"},
	{Broker: "producer.id.expiration.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "86400000", Section: "serve",
		Doc: "idempotent producer state expiry"},

	// Consumer groups.
	{Broker: "group.min.session.timeout.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "6000", Section: "serve",
		Doc: "the shortest session timeout a member may ask for"},
	{Broker: "group.max.session.timeout.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "1800000", Section: "serve",
		Doc: "the longest session timeout a member may ask for"},
	{Broker: "group.initial.rebalance.delay.ms", Type: Int, Min: 0, Max: math.MaxInt32, Default: "3000", Section: "serve",
		Doc: "an empty group's first rebalance waits this long for more members"},
	{Broker: "group.max.size", Type: Int, Min: 1, Max: math.MaxInt32, Default: "2147483647", Shown: "unbounded", Section: "serve",
		Doc: "the most members of a classic group"},
	{Broker: "offsets.topic.num.partitions", Type: Int, Min: 1, Max: math.MaxInt32, Default: "50", Section: "serve",
		Doc: "partitions of `__consumer_offsets` when it is created"},
	{Broker: "offset.metadata.max.bytes", Type: Int, Min: 1, Max: math.MaxInt32, Default: "4096", Section: "serve",
		Doc: "the longest metadata string of a committed offset"},
	{Broker: "offsets.retention.minutes", Type: Int, Min: 1, Max: math.MaxInt32, Default: "10080", Shown: "7 days", Section: "serve",
		Doc: "committed offsets of a group empty this long are deleted"},

	// Share groups (KIP-932).
	{Broker: "group.share.record.lock.duration.ms", Type: Int, Min: 1000, Max: 3600000, Default: "30000", Section: "serve",
		Doc: "share groups: how long a record a member acquired stays locked to it before it is delivered again (a group's `share.record.lock.duration.ms` overrides it)"},
	{Broker: "group.share.delivery.count.limit", Type: Int, Min: 2, Max: 10, Default: "5", Section: "serve",
		Doc: "share groups: a record delivered this many times is archived instead of delivered again"},
	{Broker: "group.share.partition.max.record.locks", Type: Int, Min: 100, Max: 10000, Default: "2000", Section: "serve",
		Doc: "share groups: the most records in flight (acquired or waiting for redelivery) per share-partition"},
	{Broker: "group.share.session.timeout.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "45000", Section: "serve",
		Doc: "share groups: a member without a heartbeat this long leaves and its records are released"},
	{Broker: "group.share.heartbeat.interval.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "5000", Section: "serve",
		Doc: "share groups: the heartbeat interval members are told"},
	{Broker: "group.share.max.size", Type: Int, Min: 1, Max: 1000, Default: "200", Section: "serve",
		Doc: "share groups: the most members of a share group"},
	{Broker: "share.coordinator.state.topic.num.partitions", Type: Int, Min: 1, Max: math.MaxInt32, Default: "50", Section: "serve",
		Doc: "share groups: partitions of `__share_group_state` (share-partition state) when it is created"},
	{Broker: "errors.deadletterqueue.topic.name.prefix", Type: String, Default: "dlq.", Section: "serve",
		Doc: "share groups (KIP-1191): a group's dead-letter topic (its `errors.deadletterqueue.topic.name`) must start with this prefix; empty: any name not starting with `__`"},
	{Broker: "errors.deadletterqueue.auto.create.topics.enable", Type: Boolean, Default: "false", Section: "serve",
		Doc: "share groups (KIP-1191): a group's dead-letter topic that does not exist is created (`num.partitions` partitions, `errors.deadletterqueue.group.enable=true`) instead of refused"},
	{Topic: "errors.deadletterqueue.group.enable", Dynamic: Topic, Log: true, Type: Boolean, Default: "false", Section: "serve",
		Doc: "share groups (KIP-1191): the topic may be a share group's dead-letter topic; the broker writes dead letters only to a topic with this set (docs/share-groups.md)"},

	// A cluster.
	{Broker: "controller.quorum.voters", Type: List, Shown: "none", Flag: "controller-quorum", Section: "cluster",
		Doc: "the metadata quorum, `id@host:port,...` (Raft addresses); none: a single broker"},
	{Broker: "process.roles", Type: List, Values: []string{"broker", "controller"}, Shown: "from the quorum", Flag: "process-roles", Section: "cluster", Strata: true,
		Doc: "`broker,controller`: a broker that is a voter of the quorum; `broker`: a broker outside it (it must not be a voter); `controller`: only a voter of the quorum, with no log, broker listener or broker registration (it must be a voter; it serves its controller listeners); none: `broker,controller` for a voter, else `broker`"},
	{Broker: "controller.listener.names", Type: List, Shown: "none", Section: "cluster",
		Doc: "the listeners in `listeners` that serve controller clients (KIP-919: ApiVersions, DescribeCluster for controllers, DescribeQuorum; `strata cluster quorum --bootstrap-controller`); PLAINTEXT unless `listener.security.protocol.map` names them; a controller-only or combined node serves them, a broker-only node must have none"},
	{Broker: "broker.rack", Type: String, Shown: "none", Flag: "rack", Section: "cluster",
		Doc: "replicas of a partition are spread over racks"},
	{Broker: "broker.session.timeout.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "9000", Section: "cluster",
		Doc: "a broker without a heartbeat this long is fenced"},
	{Broker: "broker.heartbeat.interval.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "2000", Section: "cluster",
		Doc: "how often a broker heartbeats to the controller"},
	{Broker: "replica.lag.time.max.ms", Type: Long, Min: 1, Max: math.MaxInt64, Default: "30000", Section: "cluster",
		Doc: "a follower not caught up this long leaves the ISR"},
	{Broker: "replica.fetch.wait.max.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "500", Section: "cluster",
		Doc: "how long a follower's fetch waits at the leader for new records (at most `replica.lag.time.max.ms` and `replica.socket.timeout.ms`); never longer than a parked partition's next retry"},
	{Broker: "replica.fetch.min.bytes", Type: Int, Min: 1, Max: math.MaxInt32, Default: "1", Section: "cluster",
		Doc: "the bytes a follower's fetch waits for at the leader"},
	{Broker: "replica.fetch.max.bytes", Type: Int, Min: 1, Max: math.MaxInt32, Default: "1048576", Section: "cluster",
		Doc: "the bytes a follower fetches per partition (at least one batch)"},
	{Broker: "replica.fetch.response.max.bytes", Type: Int, Min: 1, Max: math.MaxInt32, Default: "10485760", Section: "cluster",
		Doc: "the bytes of a follower's fetch response, all partitions (at least one batch)"},
	{Broker: "replica.fetch.backoff.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "1000", Section: "cluster",
		Doc: "how long a follower's partition waits after a fetch error (connection errors: doubling to 8 times); errors that may only mean the leader has not applied the latest metadata yet (`UNKNOWN_TOPIC_ID`, `NOT_LEADER_OR_FOLLOWER`, ...) are retried after 10 ms, doubling to 50 ms"},
	{Broker: "replica.socket.timeout.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "30000", Section: "cluster",
		Doc: "a follower's connection to its leader fails after this long without an answer beyond the fetch's own wait"},
	{Topic: "min.insync.replicas", Broker: "min.insync.replicas", Dynamic: Topic | Broker, Type: Int, Min: 1, Max: math.MaxInt32, Default: "1", Section: "cluster",
		Doc: "acks=all produces need this many in-sync replicas"},
	{Topic: "unclean.leader.election.enable", Dynamic: Topic, Type: Boolean, Default: "false", Section: "cluster",
		Doc: "a replica outside the ISR may become leader when no ISR member is left"},
	{Broker: "auto.leader.rebalance.enable", Type: Boolean, Default: "true", Flag: "auto-leader-rebalance", Section: "cluster",
		Doc: "the controller moves leadership back to preferred replicas"},
	{Broker: "leader.imbalance.check.interval.seconds", Type: Long, Min: 1, Max: 1 << 31, Default: "300", Flag: "leader-imbalance-check-interval-seconds", Section: "cluster",
		Doc: "how often it checks"},
	{Broker: "leader.imbalance.per.broker.percentage", Type: Int, Min: 0, Max: 100, Default: "10", Flag: "leader-imbalance-per-broker-percentage", Section: "cluster",
		Doc: "a broker's share of preferred partitions led elsewhere above which it rebalances"},

	// Listeners and TLS (docs/security.md). Password keys are never
	// reported by DescribeConfigs. No default: a broker without SSL shows
	// none of them as set.
	{Broker: "listener.security.protocol.map", Type: String, Shown: "each protocol named after itself", Section: "security",
		Doc: "`NAME:PROTOCOL,...`: the security protocol of each listener name (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; SASL keys in docs/security.md)"},
	{Broker: "inter.broker.listener.name", Type: String, Shown: "PLAINTEXT, else the only listener", Strata: true, Section: "security",
		Doc: "the listener brokers replicate and send transaction markers over"},
	{Broker: "security.inter.broker.protocol", Type: String, Values: []string{"PLAINTEXT", "SSL"}, Shown: "PLAINTEXT", Section: "security",
		Doc: "names the inter-broker listener by its protocol instead"},
	{Broker: "ssl.keystore.type", Type: String, Shown: "PEM", Strata: true, Section: "security",
		Doc: "PEM only (JKS and PKCS12 are refused)"},
	{Broker: "ssl.keystore.location", Dynamic: Broker, PerBroker: true, Type: String, Section: "security",
		Doc: "a PEM file with the private key and the certificate chain; reloaded when it changes"},
	{Broker: "ssl.keystore.certificate.chain", Type: Password, Section: "security",
		Doc: "the certificate chain, inline PEM"},
	{Broker: "ssl.keystore.key", Type: Password, Section: "security",
		Doc: "the private key, inline PEM"},
	{Broker: "ssl.key.password", Type: Password, Section: "security",
		Doc: "the password of an encrypted PKCS#8 key (PBES2, AES-CBC)"},
	{Broker: "ssl.keystore.password", Type: Password, Section: "security",
		Doc: "refused: a PEM store has none (as in Kafka)"},
	{Broker: "ssl.truststore.type", Type: String, Shown: "PEM", Strata: true, Section: "security",
		Doc: "PEM only"},
	{Broker: "ssl.truststore.location", Dynamic: Broker, PerBroker: true, Type: String, Section: "security",
		Doc: "PEM CA certificates client certificates are verified against; reloaded when it changes"},
	{Broker: "ssl.truststore.certificates", Type: Password, Section: "security",
		Doc: "the CA certificates, inline PEM"},
	{Broker: "ssl.truststore.password", Type: Password, Section: "security",
		Doc: "refused: a PEM store has none (as in Kafka)"},
	{Broker: "ssl.client.auth", Type: String, Values: []string{"required", "requested", "none"}, Shown: "none", Section: "security",
		Doc: "client certificates (mTLS); the principal is `User:` and the certificate's subject"},
	{Broker: "ssl.enabled.protocols", Type: List, Values: []string{"TLSv1.2", "TLSv1.3"}, Shown: "TLSv1.2,TLSv1.3", Section: "security",
		Doc: "TLS versions accepted"},
	{Broker: "ssl.protocol", Type: String, Values: []string{"TLS", "TLSv1.2", "TLSv1.3"}, Shown: "TLSv1.3", Section: "security",
		Doc: "TLSv1.2 caps the version at 1.2"},
	{Broker: "ssl.cipher.suites", Type: List, Shown: "Go's secure suites", Strata: true, Section: "security",
		Doc: "IANA names of TLS 1.2 suites (TLS 1.3's are always on)"},
	{Broker: "ssl.endpoint.identification.algorithm", Type: String, Shown: "https", Section: "security",
		Doc: "empty: a broker dialing another does not check the certificate's names"},
	{Broker: "ssl.principal.mapping.rules", Type: String, Shown: "DEFAULT", Section: "security",
		Doc: "`RULE:pattern/replacement/[LU],...,DEFAULT`: the principal name from the subject"},
	{Broker: "authorizer.class.name", Type: String, Shown: "none (no authorization)", Check: checkAuthorizer, Section: "security",
		Doc: "`" + StandardAuthorizer + "` turns on ACLs (docs/security.md, \"Authorization\"); another class is refused at start-up"},
	{Broker: "super.users", Type: String, Shown: "none", Section: "security",
		Doc: "principals allowed everything, separated by semicolons (`User:admin;User:broker`)"},
	{Broker: "allow.everyone.if.no.acl.found", Type: Boolean, Default: "false", Section: "security",
		Doc: "with the authorizer on, a resource that has no ACL at all is open to every principal"},
	{Broker: "connections.max.reauth.ms", Type: Long, Min: 0, Max: math.MaxInt64 / 1_000_000, Default: "0", Section: "security",
		Doc: "on SASL listeners, how long a session lasts (KIP-368): SaslAuthenticate tells the client, which re-authenticates on its connection before the end; a request after it closes the connection; 0: sessions do not end"},
	{Broker: "connection.failed.authentication.delay.ms", Type: Long, Min: 0, Max: math.MaxInt64 / 1_000_000, Default: "100", Section: "security",
		Doc: "on SASL listeners, how long the answer to a failed authentication (and the close after it) is held back (KIP-306), which slows password guessing; keep it below connections.max.idle.ms; 0: at once"},
	{Broker: "max.connections", Dynamic: Broker, Type: Int, Min: 0, Max: math.MaxInt32, Default: "2147483647", Shown: "2147483647 (unlimited)", Section: "security",
		Doc: "the most connections the broker holds; at the limit new connections wait unaccepted until one closes (the inter-broker listener excepted: it closes the least recently active connection of another listener); `listener.name.<listener>.max.connections` limits one listener (docs/security.md, \"Connection limits\")"},
	{Broker: "max.connections.per.ip", Dynamic: Broker, Type: Int, Min: 0, Max: math.MaxInt32, Default: "2147483647", Shown: "2147483647 (unlimited)", Section: "security",
		Doc: "the most connections from one IP address; a connection past it is closed at once (0 only with overrides)"},
	{Broker: "max.connections.per.ip.overrides", Dynamic: Broker, Type: String, Shown: "none", Check: checkIPOverrides, Section: "security",
		Doc: "`host:count,...` per-address exceptions to `max.connections.per.ip` (hosts resolved at start-up)"},
	{Broker: "max.connection.creation.rate", Dynamic: Broker, Type: Int, Min: 0, Max: math.MaxInt32, Default: "2147483647", Shown: "2147483647 (unlimited)", Section: "security",
		Doc: "new connections a second the broker accepts (the inter-broker listener excepted); past it the accept waits the throttle time; `listener.name.<listener>.max.connection.creation.rate` limits one listener"},

	// Transactions.
	{Broker: "transaction.max.timeout.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "900000", Section: "transactions",
		Doc: "larger `transaction.timeout.ms` is refused"},
	{Broker: "transactional.id.expiration.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "604800000", Section: "transactions",
		Doc: "idle transactional ids are forgotten"},
	{Broker: "transaction.abort.timed.out.transaction.cleanup.interval.ms", Type: Int, Min: 1, Max: math.MaxInt32, Default: "10000", Section: "transactions",
		Doc: "how often timed-out transactions are aborted"},
	{Broker: "transaction.version", Type: Short, Min: 0, Max: 2, Default: "2", Section: "transactions",
		Doc: "the finalized feature level (Kafka sets it with kafka-features); 1: clients use the classic flow"},
	{Broker: "transaction.partition.verification.enable", Type: Boolean, Default: "true", Section: "transactions",
		Doc: "KIP-890 part 1"},
}

// FirstListener returns host:port of the first listener of a Kafka
// listeners value ("PLAINTEXT://host:port,SSL://..."; the scheme may be
// left out).
func FirstListener(v string) (string, error) {
	first := strings.TrimSpace(strings.Split(v, ",")[0])
	if i := strings.Index(first, "://"); i >= 0 {
		first = first[i+3:]
	}
	_, port, err := net.SplitHostPort(first)
	if err != nil {
		return "", err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", errors.New("bad port " + strconv.Quote(port))
	}
	return first, nil
}

func checkListener(v string) error {
	_, err := FirstListener(v)
	return err
}

// HTTPListeners returns host:port of each address of a metrics.listeners
// value: comma-separated http://host:port (the scheme may be left out);
// none for an empty value.
func HTTPListeners(v string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		addr := item
		if i := strings.Index(item, "://"); i >= 0 {
			if scheme := strings.ToLower(item[:i]); scheme != "http" {
				return nil, errors.New(strconv.Quote(item) + ": only http is served")
			}
			addr = item[i+3:]
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, errors.New("bad port " + strconv.Quote(port))
		}
		out = append(out, addr)
	}
	return out, nil
}

func checkHTTPListeners(v string) error {
	_, err := HTTPListeners(v)
	return err
}

// FirstLogDir returns the first directory of a log.dirs value.
func FirstLogDir(v string) string { return strings.TrimSpace(strings.Split(v, ",")[0]) }

// checkLogDirs refuses an empty value and a list: Strata serves one data
// directory, and a second one silently left unused would hold nothing an
// operator expects it to.
func checkLogDirs(v string) error {
	if FirstLogDir(v) == "" {
		return errors.New("empty directory")
	}
	if dirs := strings.Split(v, ","); len(dirs) > 1 {
		return fmt.Errorf("lists %d directories; Strata serves one data directory (several log directories per broker are not supported): give one", len(dirs))
	}
	return nil
}

// StandardAuthorizer is Kafka's authorizer class, the only value of
// authorizer.class.name Strata serves (package auth has its rules).
const StandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

func checkAuthorizer(v string) error {
	if v != "" && v != StandardAuthorizer {
		return errors.New("only " + StandardAuthorizer + " (Kafka's standard ACL authorizer) is served; refusing to start rather than ignore " + strconv.Quote(v))
	}
	return nil
}

// IPOverrides parses max.connections.per.ip.overrides: comma-separated
// host:count (an IPv6 address without brackets is split at its last
// colon); empty: none.
func IPOverrides(v string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndex(item, ":")
		if i <= 0 {
			return nil, errors.New(strconv.Quote(item) + " is not host:count")
		}
		host := strings.Trim(strings.TrimSpace(item[:i]), "[]")
		n, err := strconv.ParseInt(strings.TrimSpace(item[i+1:]), 10, 32)
		if err != nil || n < 0 || host == "" {
			return nil, errors.New(strconv.Quote(item) + " is not host:count (count 0 to 2147483647)")
		}
		if _, dup := out[host]; dup {
			return nil, errors.New("host " + strconv.Quote(host) + " appears twice")
		}
		out[host] = int(n)
	}
	return out, nil
}

func checkIPOverrides(v string) error {
	_, err := IPOverrides(v)
	return err
}

func checkQueuedBytes(v string) error {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n == 0 {
		return errors.New("must be -1 (unbounded) or > 0")
	}
	return nil
}

func checkPositive(v string) error {
	if f, err := strconv.ParseFloat(v, 64); err == nil && f <= 0 {
		return errors.New("must be > 0")
	}
	return nil
}
