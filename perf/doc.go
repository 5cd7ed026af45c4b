// Package perf is Strata's capacity model: it turns a workload (record
// rate and size, replication, retention, producers, per-broker limits) into
// a cluster size, and shows its working. `strata plan` is its command line.
//
// # Use
//
//	w, _, _ := perf.Preset("reference")      // or perf.Defaults() plus a rate
//	w.LocalHotHours = 12                      // try tiered storage
//	rep, err := perf.Plan(w)                  // pure: no I/O, no clock
//	fmt.Print(rep.Text())                     // inputs, steps, result, warnings
//
// Plan returns a Report: every derived figure as a Step {Symbol, Formula,
// Arithmetic, Value, Unit}, the per-limit table, headline figures and
// Warnings for where the plan does not add up. An error means invalid
// input (ErrInvalidWorkload) or a plan beyond a million brokers.
//
// # Units
//
// MB and TB are decimal (10^6, 10^12 bytes), as disks and networks are
// sold; KiB and GiB are binary, as record sizes, batch.size and RAM are.
// So 600,000 records/s × 1,024 B = 614.4 MB/s. Names carry their unit
// (RecordBytes, DiskWriteMBps, RetentionHours). Broker-facing throughput is
// sized at the peak rate, storage at the sustained rate.
//
// # The model
//
// Throughput: ingest = rate × record_bytes (record bytes before
// compression); write = ingest / compression (bytes on the wire and disk).
// Cluster demand at peak: disk writes = write × rf (every replica
// appends); network in = write × rf (produce + replication to followers);
// network out = write × (rf - 1 + groups), plus one copy for the upload to
// object storage when tiered; CPU = disk writes / (cores × per-core MB/s).
// The disk-write limit is checked against disk writes × DiskWriteAmplification
// (default 2: the broker's journal and segments each write every log byte;
// 1 with log.io.flush.shared=false and log.io.journal.bytes=0).
//
// Brokers: for each limit ceil(demand / (per-broker limit × target
// utilisation)); the plan needs the largest, plus BrokersThatMayFail, and at
// least rf. The largest names the binding limit. With FixedBrokers the same
// table gives utilisation with all brokers up and with the failures down.
//
// Storage: retained = write_sust × retention; local disks hold rf copies of
// everything, or of the hot window with tiered storage, in which case object
// storage holds one copy of everything retained.
//
// Partitions: ceil(write_peak / PartitionMBps) for throughput; for consumer
// parallelism max(ConsumersPerGroup, ceil(ingest_peak / ConsumerMBps)),
// since a group uses at most one consumer per partition; derived counts
// round up to a multiple of brokers.
//
// Producer batching follows Kafka's RecordAccumulator: keyed records spread
// every producer over all partitions; once any batch for a broker has
// lingered (or filled), the sender drains every partition that broker leads
// into one request. A request carries 1 + rate_pb × linger records in
// 1 + (k - 1)(1 - e^(-rate_pair × linger)) batches (k partitions per
// leader). Keyed traffic over many partitions therefore closes batches on
// linger with a few records each, far below batch.size. The model is exact
// for Poisson arrivals when batches close on linger
// (batching_sim_test.go checks it against a simulation); keyless records
// (sticky partitioner) fill one batch at a time.
//
// Memory: page cache per broker = disk writes per broker × ReadWindowSec,
// so consumers that far behind the log end read from memory.
//
// # Assumptions and calibration
//
// A zero limit means "not measured": Plan uses the Default* constants and
// lists each in Report.Assumed and an assumed-inputs note. ParseCalibration
// and ReadCalibrationFile (the only I/O here) read a `strata loadgen --json`
// result; Plan then derives MB/s per busy core from its broker CPU time and,
// for a --find-max run on spawned brokers, a measured per-broker ceiling.
// ReadCalibrationFile also reads a /metrics scrape of brokers
// (ParseMetricsCalibration, remote.go): tiered storage's upload rate
// (a remote upload limit) and remote read rate (the time a consumer group
// takes to read what only the object store holds).
//
// # Arithmetic strings
//
// Step.Arithmetic uses a tiny grammar (numbers with thousands separators,
// + - × / ^, parentheses, ceil floor min max exp) that Eval reads. The
// recorder checks every step as it is made: the printed arithmetic must
// evaluate to the value (exactly, for ceil and floor), printing operands at
// 5, then 8 significant digits, then exactly. A step that still disagrees
// is a bug and Plan returns it as an error rather than print it.
//
// # Concurrency
//
// Everything is a pure function of its arguments and safe for concurrent
// use; there is no package state besides the read-only preset table.
package perf
