// Package loadgen is Strata's workload driver (`strata loadgen`): it
// produces a configurable Kafka workload against any Kafka-compatible
// cluster, or against local strata brokers it spawns, and measures
// throughput and latency the way a capacity plan needs them.
//
// # Measurement
//
// Open loop: with a rate, each producer owns a schedule (pace.go); record i
// of producer k of n is due at start + (k/n + i)×interval, interval =
// n/rate. A sender that falls behind still sends every record it owes, and
// every latency is measured from the record's scheduled time, so queueing
// anywhere (the client, the network, the broker) shows up as latency
// instead of as silently lower load (coordinated omission). Closed loop
// (rate 0) sends as fast as the client allows and measures from the time
// a record was handed to the client.
//
//	produce latency     scheduled send → acknowledgement (acks=0: written)
//	end-to-end latency  scheduled send → the consumer poll that returned it
//
// Every value starts with an 8-byte stamp, the scheduled send time as Unix
// nanoseconds, big endian; consumers compute end-to-end latency from it.
// Latencies go into HdrHistograms (1 µs .. 1 h, 3 significant digits): one
// recorder per producer and consumer, merged once a second by the sampler
// into the per-second timeline and the run totals (hist.go, stats.go).
// Throughput counts acknowledged records; MB are 10^6 bytes of values.
// Client CPU is this process's getrusage plus the consumer process's
// (/proc/<pid>/stat); broker CPU and RSS are read from /proc/<pid>/stat and
// /status of spawned brokers only. The broker's own Produce latency is read
// from spawned brokers' Prometheus endpoints (brokermetrics.go).
//
// # Consumer process
//
// With consumers, runOnce starts `strata loadgen _consumers` (this
// executable, or StrataBin) and runs them there unless ConsumersInProcess:
// setup and start on its stdin, reports on its stdout, its end-to-end
// histograms merged into one recorder of the run's e2e set
// (consumerproc.go has the protocol and the clock hand-over).
//
// # Engines
//
// kgo: a franz-go client per producer configured like an application
// (linger, batch bytes, acks, compression, idempotence, in-flight limit),
// records recycled through a pool from their promise.
//
// native: a batcher.Accumulator per producer (murmur2 for keys, KIP-480
// sticky partitioning for keyless records, linger/size closing, CRC32C,
// compression) drained into Produce requests framed by hand (wire.go): the
// request head is appended into a reused buffer and the batch bytes are
// written as their own iovecs with one writev, so batch bytes are never
// copied in user space after encoding; up to MaxInflight requests are
// pipelined per broker connection and responses decoded with kmsg. Latency
// is recorded per record from the batch's tags (the scheduled times). No
// per-record allocation once the batch pool is warm; no retries (a failed
// batch counts its records as failed).
//
// # Goroutines
//
// Run owns everything it starts and stops it before returning:
//
//	producer k          one goroutine running its schedule (run); ends
//	                    when the schedule is done or ctx is cancelled,
//	                    after flushing and waiting (≤ DrainTimeout) for acks
//	conn reader         one per native connection (readLoop); started by
//	                    dialNative, ends after the producer closes the
//	                    in-flight queue and the last response is read, or
//	                    when the connection fails or the drain times out
//	consumer process    a child (consumerproc.go) running consumer k below;
//	                    the parent's reader goroutine owns its stdout and
//	                    its waiter reaps it; stopped by closing its stdin
//	                    (SIGKILL after consumerProcStopTimeout); it also
//	                    dies with the parent (parent-death signal, stdin
//	                    end of file)
//	consumer k          kgo: one goroutine polling; native: one goroutine
//	                    per leader broker fetching on its own connection
//	                    (fetch.go; cancelling closes the connection under a
//	                    waiting fetch); cancelled when the consumers
//	                    have caught up with the acknowledged records or
//	                    DrainTimeout after producing ended
//	sampler             one goroutine ticking every second; stopped last
//	spawned brokers     child processes (Spawn); SIGTERM at the end (SIGKILL
//	                    after 30 s), data directories removed; Linux also
//	                    sets the parent-death signal so they never outlive
//	                    the loadgen
//
// Locks: a recorder's mutex (writers vs the sampler's once-a-second
// collect); runStats.errMu for the error table; the accumulator's free list
// (Release from connection readers). No lock is held while taking another.
//
// # Bounds
//
// Every run is bounded by a duration or a record count (Validate); an
// open-loop sender more than DrainTimeout behind its schedule abandons the
// backlog and counts it as failed; each producer buffers at most
// maxPerWake records between drains plus MaxInflight requests per
// connection; response frames are capped at 16 MiB; --find-max runs at
// most MaxSteps steps of StepDuration each, each run at most 1+StepRetries
// times.
//
// # Result file (--json)
//
//	{
//	  "config":   {engine, brokers, spawn, topic, partitions, record_bytes, rate, duration_s, acks,
//	               linger_ms, batch_bytes, compression, keys, key_dist, producers, consumers, ...},
//	  "workload": "one-line description",
//	  "target":   {brokers, spawned},
//	  "result":   {records_per_sec, mb_per_sec, duration_s, record_bytes,
//	               produce_p50_ms, produce_p90_ms, produce_p99_ms, produce_p999_ms, produce_max_ms,
//	               e2e_p50_ms ... e2e_max_ms, records_sent, records_acked, records_failed, error_rate,
//	               records_consumed, group_type (share, consumer or none), group,
//	               records_redelivered (share groups only), consumer_lag_at_end, catch_up_s,
//	               batches_per_sec, requests_per_sec, records_per_batch,
//	               broker_produce_requests, broker_produce_{mean,p50,p90,p99,p999,max_bucket}_ms,
//	               broker_produce_past_last_bucket (spawned brokers with metrics only),
//	               client_cpu_seconds, client_cpu_main_seconds, client_cpu_consumer_process_seconds
//	               (null without a consumer process), consumer_pid, client_cpu_us_per_record,
//	               broker_cpu_seconds (null unless
//	               spawned), broker_rss_bytes, broker_peak_rss_bytes, errors: [{error, count}],
//	               device: {name, write_bytes, write_requests, mean_write_bytes, flushes, flushes_per_sec,
//	                        read_bytes, read_requests, busy_ms, busy_share, bytes_per_record_byte}
//	                       (spawned brokers whose data directory is on a block device only)},
//	  "timeline": [{t_s, records_per_sec, mb_per_sec, consumed_per_sec, errors, produce_p50_ms,
//	               produce_p99_ms, produce_max_ms, e2e_p99_ms, client_cpu_pct, broker_cpu_pct,
//	               broker_rss_bytes}],
//	  "distribution": {produce: [{percentile, ms}], e2e: [...]},
//	  "find_max": {max_healthy_rate, max_p99_ms, max_error_rate, steps: [{rate, healthy, reason, result}]},
//	  "baseline": {mode: "blackhole", result, find_max, ratio}      --compare-blackhole only
//	              (mode "consumer-group" with --compare-share-group: ratio of consumed records/s)
//	  "device_baseline": {mode: "device", dir, device, backend, mb_per_sec, bytes, duration_s,
//	               fdatasyncs, device_write_bytes, write_requests, mean_write_bytes, flushes,
//	               ratio}                                           --compare-device only
//	}
//
// Steps of find_max carry their own result, device included.
//
// # Device traffic
//
// For spawned brokers, runTarget finds the block device of their data
// directory (stat's st_dev major:minor, looked up in /proc/diskstats; a
// partition is counted as itself) and runOnce reads its line of
// /proc/diskstats where it reads broker CPU: when the measurement starts and
// when the last acknowledgement arrived (device.go). Result.Device is the
// difference: bytes and requests written and read, flush requests (5.5+
// kernels), io_ticks (busy ms, and its share of the window), and device
// bytes written per acknowledged record value byte. These are the whole
// device's counters: several spawned brokers on one disk add up, and so
// does anything else writing to it. A filesystem without a block device
// (tmpfs, overlay) is logged once and measures nothing.
//
// # Baseline
//
// CompareBlackhole runs the whole workload (the find-max search or the fixed
// rate) twice, each against brokers spawned for it: first the real broker,
// then one started with `serve --blackhole`, which acknowledges produce
// requests without storing them, without consumers. Report.Baseline holds the
// second result and the ratio of the two (max healthy rates, or achieved
// records/s): what the log costs relative to the network and protocol alone.
// CompareBinary is the same comparison against another build: the whole
// workload, consumers, verification and faults included, runs a second time
// against brokers spawned from the given strata executable (consumer
// processes still run this one), Report.Baseline has mode "binary", and the
// tables add the baseline's p99.9, max and end-to-end p99. With
// CompareRounds the two builds alternate (RunRounds): a change is judged
// against the build before it in the same minutes, as issue work asks.
// Profile makes the first spawned broker write a pprof CPU profile when it
// stops.
//
// # Share groups
//
// ShareGroup makes the kgo consumers members of a KIP-932 share group
// that accept every record; runOnce sets the group's start offsets to
// the topic's end before producing (AlterShareGroupOffsets) and, for a
// share group or a consumer group alike, waits until every member has
// its assignment (waitGroupReady). CompareShareGroup measures the
// workload with the consumers in the share group and in a consumer group
// on the same spawned brokers and topic after one warm-up, alternating
// over CompareRounds rounds (sharegroup.go).
//
// CompareDevice runs last (after the blackhole baseline): probeDevice
// (device_linux.go) writes DeviceProbeBytes (at most DeviceProbeMaxTime)
// into a fresh file in the directory Spawn creates its data directories in,
// allocated with fallocate first, front to back once with O_DIRECT 1 MiB
// writes through an internal/uring Ring (registered buffer pool, 16 in
// flight; its pwrite fallback with 16 workers), an fdatasync whenever the
// written prefix passes another 16 MiB (one at a time) and one at the end,
// and removes the file. Report.DeviceBaseline holds its MB/s, the device's
// counters over it and the ratio of the run's acknowledged record MB/s (the
// max healthy rate's with --find-max) to it.
package loadgen
