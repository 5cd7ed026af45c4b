package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/stratalog/strata/loadgen"
	"github.com/stratalog/strata/record"
)

// loadgenDoc is `strata loadgen --help`'s text.
var loadgenDoc = cmdDoc{name: "loadgen",
	usage: "strata loadgen (--brokers host:port,... | --spawn N) [--rate R] [--duration D] [--json F] [--report F.html] [flags]",
	about: `Generates a Kafka workload against --brokers (any Kafka-compatible cluster)
or --spawn N local strata brokers, and reports throughput and latency:
produce latency from each record's scheduled send time to its ack, and
end-to-end latency to the consumer's poll (--consumers).

Examples:
  strata loadgen --spawn 1 --rate 50000 --duration 30s --json lg.json --report lg.html
  strata loadgen --brokers kafka1:9092 --engine native --keys 10000 --key-dist hot --consumers 2
  strata loadgen --spawn 1 --find-max --max-p99 15ms --step-duration 10s
  strata loadgen --spawn 1 --engine native --find-max --compare-blackhole --profile broker.pprof
  strata loadgen --spawn 1 --rate 50000 --duration 30s --warmup 5s --compare-device
  strata loadgen --spawn 1 --engine kgo --idempotent --keys 100000 --compare-binary ./strata-before --compare-rounds 4
  strata loadgen --spawn 3 --replication-factor 3 --idempotent --rate 5000 --duration 5m --verify --faults kill,pause
  strata loadgen --spawn 1 --rate 50000 --duration 20s --warmup 3s --consumers 3 --share-group workers --compare-share-group --compare-rounds 2
  strata loadgen --spawn 1 --spawn-config secured.properties --security-protocol SASL_SSL --tls-ca ca.pem \
      --sasl-mechanism SCRAM-SHA-512 --sasl-username loadgen --rate 20000 --duration 60s --compare-plaintext`}

// runLoadgen is `strata loadgen`: parse flags, run, print the table and
// write the JSON and HTML files. started is when the run began (the JSON's
// started_at).
func runLoadgen(args []string, stdout, stderr io.Writer, started time.Time) error {
	if len(args) > 0 && args[0] == loadgen.ConsumerProcessArg {
		// The consumer process a run starts for its --consumers (hidden).
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return loadgen.RunConsumerProcess(ctx, os.Stdin, stdout, timeNow)
	}
	loadgen.SetClientGC()
	cfg, out, err := parseLoadgenFlags(args, stdout)
	if err != nil {
		return err
	}
	cfg.Log = stderr
	if out.progress || isTerminal(os.Stderr) && stderr == io.Writer(os.Stderr) {
		cfg.Progress = stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if out.clientProfile != "" {
		f, err := os.Create(out.clientProfile)
		if err != nil {
			return fmt.Errorf("--client-profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--client-profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	rep, runErr := loadgen.RunRounds(ctx, cfg)
	if rep == nil {
		return runErr
	}
	rep.StrataVersion = strings.TrimPrefix(buildVersion(), "strata ")
	rep.StartedAt = started.UTC().Format(time.RFC3339)
	var errs []error
	if runErr != nil {
		errs = append(errs, runErr)
	}
	if err := rep.WriteTable(stdout); err != nil {
		errs = append(errs, err)
	}
	if out.json != "" {
		if err := rep.WriteJSONFile(out.json); err != nil {
			errs = append(errs, fmt.Errorf("--json: %w", err))
		} else {
			fmt.Fprintf(stderr, "wrote %s\n", out.json)
		}
	}
	if out.report != "" {
		if err := rep.WriteHTMLFile(out.report); err != nil {
			errs = append(errs, fmt.Errorf("--report: %w", err))
		} else {
			fmt.Fprintf(stderr, "wrote %s\n", out.report)
		}
	}
	if out.ombResult != "" {
		name := out.ombWorkload
		if name == "" {
			name = rep.Workload
		}
		if err := rep.WriteOMBResultFile(out.ombResult, name, ombDriverName); err != nil {
			errs = append(errs, fmt.Errorf("--omb-result: %w", err))
		} else {
			fmt.Fprintf(stderr, "wrote %s\n", out.ombResult)
		}
	}
	return errors.Join(errs...)
}

// ombDriverName is --omb-result's driver: OMB names the driver file's.
const ombDriverName = "Strata (strata loadgen)"

type loadgenOutputs struct {
	json, report string
	progress     bool
	// clientProfile is --client-profile's file: the load generator's own
	// CPU profile over the whole run.
	clientProfile string
	// ombResult is --omb-result's file, ombWorkload the --workload's name.
	ombResult, ombWorkload string
}

// parseLoadgenFlags maps the command line onto a loadgen.Config. --help
// writes to helpOut; mistakes are usageErrors.
func parseLoadgenFlags(args []string, helpOut io.Writer) (loadgen.Config, loadgenOutputs, error) {
	cfg, out, err := parseLoadgenFlagSet(args, helpOut)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		err = asUsage(loadgenDoc, err)
	}
	return cfg, out, err
}

func parseLoadgenFlagSet(args []string, helpOut io.Writer) (loadgen.Config, loadgenOutputs, error) {
	cfg := loadgen.DefaultConfig()
	var out loadgenOutputs
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	brokers := fs.String("brokers", "", "comma-separated host:port list of the cluster to load")
	fs.IntVar(&cfg.Spawn, "spawn", 0, "start this many local strata brokers on 127.0.0.1 for the run (N>1: one cluster, 3 controller voters)")
	fs.IntVar(&cfg.SpawnControllers, "spawn-controllers", 0, "with --spawn: also start this many controller-only nodes (process.roles=controller) as the controller quorum, the brokers then broker-only (process.roles=broker); --faults controller-kill and controller-pause then hit controllers, not brokers (0: the first 3 brokers are the voters)")
	fs.Int64Var(&cfg.SpawnSegmentBytes, "spawn-segment-bytes", 0, "log.segment.bytes of spawned brokers (0 = the broker default)")
	fs.StringVar(&cfg.SpawnConfig, "spawn-config", "", "server.properties file for spawned brokers")
	fs.BoolVar(&cfg.CompareBlackhole, "compare-blackhole", false, "with --spawn: run the same workload again against a --blackhole broker (acks without storing) and report both and the ratio")
	fs.StringVar(&cfg.CompareBinary, "compare-binary", "", "with --spawn: run the same workload again (consumers too) against brokers spawned from this strata executable, an earlier build, and report both and the ratio; exclusive with --compare-blackhole")
	fs.StringVar(&cfg.Security.Protocol, "security-protocol", "PLAINTEXT", "the clients' security.protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (producers, consumers and the admin client; kgo engines only)")
	fs.StringVar(&cfg.Security.TLSCA, "tls-ca", "", "SSL, SASL_SSL: PEM `file` of the CA certificates to trust (ssl.truststore.location; default: the system's)")
	fs.StringVar(&cfg.Security.TLSCert, "tls-cert", "", "SSL, SASL_SSL: PEM `file` of the client certificate (chain) for mutual TLS, with --tls-key")
	fs.StringVar(&cfg.Security.TLSKey, "tls-key", "", "SSL, SASL_SSL: PEM `file` of the client certificate's private key")
	fs.StringVar(&cfg.Security.SASLMechanism, "sasl-mechanism", "", "SASL_PLAINTEXT, SASL_SSL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&cfg.Security.SASLUsername, "sasl-username", "", "SASL user name")
	fs.StringVar(&cfg.Security.SASLPassword, "sasl-password", "", "SASL password (default: $STRATA_SASL_PASSWORD)")
	fs.StringVar(&cfg.SpawnListener, "spawn-listener", "", "with --spawn-config setting listeners: the listener `name` the clients use (default: the one whose protocol is --security-protocol's); spawned brokers get every listener of the file on free 127.0.0.1 ports")
	fs.BoolVar(&cfg.ComparePlaintext, "compare-plaintext", false, "with --spawn and a secured --security-protocol: run the same workload again (consumers too) over the PLAINTEXT listener of brokers spawned from the same --spawn-config, and report both and the ratio (what TLS/SASL cost)")
	fs.IntVar(&cfg.CompareRounds, "compare-rounds", 0, "with --compare-blackhole, --compare-binary or --compare-plaintext: repeat the comparison this many times (fresh brokers each, alternating which side runs first) and report every pair and the median ratio; the report's other figures are the median round's (at most 20)")
	fs.BoolVar(&cfg.CompareDevice, "compare-device", false, "with --spawn: afterwards measure the durable sequential write ceiling of the data directory's filesystem (O_DIRECT 1 MiB writes, 16 in flight, fdatasync every 16 MiB) and report acked MB/s over it")
	fs.Int64Var(&cfg.DeviceProbeBytes, "compare-device-bytes", cfg.DeviceProbeBytes, "--compare-device: bytes the probe writes (it stops after 30 s in any case)")
	fs.StringVar(&cfg.Profile, "profile", "", "with --spawn: write the first broker's CPU profile (pprof) to this file")
	fs.StringVar(&cfg.ConsumerProfile, "consumer-profile", "", "write the consumer process's CPU profile (pprof) to this file (with --consumers)")
	fs.StringVar(&out.clientProfile, "client-profile", "", "write the load generator's own CPU profile (pprof; its producers, not the consumer processes) to this file")
	fs.StringVar(&cfg.Topic, "topic", cfg.Topic, "topic to produce to (created if missing)")
	partitions := fs.Int("partitions", int(cfg.Partitions), "partitions when the topic is created")
	rf := fs.Int("replication-factor", int(cfg.ReplicationFactor), "replication factor when the topic is created")
	fs.IntVar(&cfg.RecordBytes, "record-bytes", cfg.RecordBytes, "value bytes per record (the first 8 carry the send time)")
	fs.BoolVar(&cfg.Compressible, "compressible", false, "text-like compressible values instead of random bytes")
	fs.Int64Var(&cfg.Keys, "keys", 0, "key space size; 0 = keyless records (sticky partitioner)")
	fs.StringVar(&cfg.KeyDist, "key-dist", cfg.KeyDist, "key distribution: uniform, zipf or hot")
	fs.Float64Var(&cfg.HotKeyShare, "hot-key-share", cfg.HotKeyShare, "share of records carrying the hot key (--key-dist hot)")
	fs.Float64Var(&cfg.ZipfS, "zipf-s", cfg.ZipfS, "zipf exponent s > 1 (--key-dist zipf)")
	fs.IntVar(&cfg.Producers, "producers", cfg.Producers, "producer clients")
	fs.Float64Var(&cfg.Rate, "rate", 0, "records/s over all producers, open loop; 0 = as fast as possible (closed loop)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to produce (0 = until --records)")
	fs.Int64Var(&cfg.Records, "records", 0, "records to produce at most (0 = until --duration)")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "produce this long first without measuring (fresh brokers stall on first writes); consumers, if any, run through it")
	acks := fs.String("acks", "all", "all, 1 or 0")
	fs.DurationVar(&cfg.Linger, "linger", cfg.Linger, "producer linger")
	fs.IntVar(&cfg.BatchBytes, "batch-bytes", cfg.BatchBytes, "producer batch size limit")
	compression := fs.String("compression", "none", "none, gzip, snappy, lz4 or zstd")
	fs.BoolVar(&cfg.Idempotent, "idempotent", false, "idempotent producer (needs InitProducerID on the broker)")
	fs.IntVar(&cfg.MaxInflight, "max-inflight", cfg.MaxInflight, "produce requests in flight per broker connection")
	fs.IntVar(&cfg.MaxBufferedRecords, "max-buffered-records", 0, "kgo engine: records the client buffers before Produce blocks (0 = franz-go's default, 50,000, or one batch per partition where that is more); a closed loop runs at about this over the send-to-ack latency")
	fs.IntVar(&cfg.Consumers, "consumers", 0, "tail consumers (partitions split among them) measuring end-to-end latency")
	fs.BoolVar(&cfg.ConsumersInProcess, "consumers-in-process", false, "run the consumers in the loadgen process, sharing the producers' Go runtime (default: a child process of their own)")
	fs.StringVar(&cfg.Group, "group", "", "consume through this consumer group instead of direct assignment (needs group support)")
	fs.StringVar(&cfg.ShareGroup, "share-group", "", "consume through this KIP-932 share group (a queue: members share partitions, every record acknowledged ACCEPT) instead of direct assignment; kgo consumers; its start offsets are set to the topic's end before each run")
	fs.BoolVar(&cfg.CompareShareGroup, "compare-share-group", false, "with --share-group and --consumers: after the warm-up, measure the workload with the consumers in the share group and again in a consumer group (--group, default NAME-consumers) on the same brokers and topic, and report both (--compare-rounds N alternates them N times)")
	fs.StringVar(&cfg.Engine, "engine", cfg.Engine, "producer engine: kgo (franz-go client) or native (lean batcher producer)")
	fs.StringVar(&cfg.ConsumerEngine, "consumer-engine", "", "consumer engine: kgo (franz-go client) or native (lean Fetch loop); default: --engine's, kgo with --group")
	fs.DurationVar(&cfg.ConsumerDelay, "consumer-delay", 0, "start the consumers this long after the producers, at the run's first offsets: they read back what they missed while producing goes on (catch-up from the tail cache or the disk)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed for keys, payloads and partition choice")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, "wait at most this long for outstanding acks and consumers at the end")
	fs.BoolVar(&cfg.FindMax, "find-max", false, "search for the highest rate that stays healthy")
	fs.DurationVar(&cfg.MaxP99, "max-p99", cfg.MaxP99, "--find-max: healthy while produce p99 is at most this")
	fs.Float64Var(&cfg.MaxErrorRate, "max-error-rate", cfg.MaxErrorRate, "--find-max: healthy while failed/sent is at most this")
	fs.Float64Var(&cfg.StartRate, "start-rate", cfg.StartRate, "--find-max: first step's rate (×1.5 per step)")
	fs.DurationVar(&cfg.StepDuration, "step-duration", cfg.StepDuration, "--find-max: duration of each step")
	fs.IntVar(&cfg.MaxSteps, "max-steps", cfg.MaxSteps, "--find-max: steps at most")
	fs.IntVar(&cfg.BisectSteps, "bisect-steps", cfg.BisectSteps, "--find-max: bisection steps after the first unhealthy rate")
	fs.IntVar(&cfg.StepRetries, "step-retries", cfg.StepRetries, "--find-max: runs of an unhealthy rate again before it counts as unhealthy")
	fs.BoolVar(&cfg.Verify, "verify", false, "record every acknowledged record (id in the value) and read the topic back at the end: lost, duplicated and reordered records per partition; exit 1 if any (kgo engine)")
	fs.Int64Var(&cfg.VerifyMaxRecords, "verify-max-records", cfg.VerifyMaxRecords, "--verify: refuse runs that could produce more records than this (a few bytes of memory each)")
	fs.DurationVar(&cfg.VerifyTimeout, "verify-timeout", cfg.VerifyTimeout, "--verify: bound on the read-back")
	faults := fs.String("faults", "", "with --spawn: faults to inject while producing, comma-separated: kill (SIGKILL a random broker, restart it on the same data and ports), pause (SIGSTOP, then SIGCONT), partition (cut a broker off from the other brokers through loadgen's proxies), client-partition (cut a broker off from the clients), disk-full (fill a broker's own small filesystem below its free-space floor, then free it), powerloss (cut every broker's power at once: their own small filesystems shut down losing what was not on the device, the brokers killed and restarted on them), controller-kill, controller-pause (SIGKILL and restart, or SIGSTOP for --fault-pause, the active controller of the 3-voter quorum, and write metadata through another broker meanwhile; --spawn 3 or more, or --spawn-controllers 3 or more to hit controller-only nodes)")
	fs.DurationVar(&cfg.FaultInterval, "fault-interval", cfg.FaultInterval, "--faults: one fault this often (the next waits for the cluster to recover)")
	fs.IntVar(&cfg.FaultCount, "fault-count", 0, "--faults: at most this many faults (0 = until the producers are done)")
	fs.DurationVar(&cfg.FaultPause, "fault-pause", cfg.FaultPause, "--faults pause, controller-pause: how long a broker stays stopped")
	fs.DurationVar(&cfg.FaultDiskFull, "fault-disk-full", cfg.FaultDiskFull, "--faults disk-full: how long a broker's filesystem stays full (filled to half its free-space floor)")
	fs.Int64Var(&cfg.FaultDiskBytes, "fault-disk-bytes", cfg.FaultDiskBytes, "--faults disk-full, powerloss: the size of the filesystem each spawned broker's data directory gets (an ext4 image, loop-mounted: needs root)")
	fs.DurationVar(&cfg.FaultPartition, "fault-partition", cfg.FaultPartition, "--faults partition, client-partition: how long a broker stays cut off (spawned brokers get replica.lag.time.max.ms of a quarter of it unless --spawn-config sets it)")
	fs.StringVar(&out.json, "json", "", "write the configuration, results and timeline as JSON to this file")
	fs.StringVar(&out.report, "report", "", "write a self-contained HTML report with charts to this file")
	fs.BoolVar(&out.progress, "progress", false, "print a progress line every second even when stderr is not a terminal")
	workload := fs.String("workload", "", "read topic shape, record size, keys, producers, consumers, rate, warm-up and duration from this OpenMessaging Benchmark workload file (docs/omb.md); flags given explicitly override it")
	fs.StringVar(&out.ombResult, "omb-result", "", "write the result as OpenMessaging Benchmark's result JSON to this file (docs/omb.md)")
	pos, err := parseFlags(fs, args, loadgenDoc, false, helpOut)
	if err != nil {
		return cfg, out, err
	}
	if len(pos) > 0 {
		return cfg, out, fmt.Errorf("unexpected arguments: %v", pos)
	}
	if *workload != "" {
		w, err := loadgen.ReadOMBWorkload(*workload)
		if err != nil {
			return cfg, out, fmt.Errorf("--workload: %w", err)
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if err := w.Apply(&cfg, set); err != nil {
			return cfg, out, fmt.Errorf("--workload %s: %w", *workload, err)
		}
		if !set["partitions"] {
			*partitions = int(cfg.Partitions)
		}
		out.ombWorkload = w.Name
	}
	if *brokers != "" {
		for _, b := range strings.Split(*brokers, ",") {
			if b = strings.TrimSpace(b); b != "" {
				cfg.Brokers = append(cfg.Brokers, b)
			}
		}
	}
	if *partitions < 1 || *partitions > 1<<20 {
		return cfg, out, fmt.Errorf("--partitions %d out of range", *partitions)
	}
	cfg.Partitions = int32(*partitions)
	if *rf < 1 || *rf > 32767 {
		return cfg, out, fmt.Errorf("--replication-factor %d out of range", *rf)
	}
	cfg.ReplicationFactor = int16(*rf)
	if cfg.Acks, err = loadgen.ParseAcks(*acks); err != nil {
		return cfg, out, fmt.Errorf("--acks: %w", err)
	}
	if cfg.Compression, err = record.ParseCodec(*compression); err != nil {
		return cfg, out, fmt.Errorf("--compression: %w", err)
	}
	if cfg.Faults, err = loadgen.ParseFaults(*faults); err != nil {
		return cfg, out, fmt.Errorf("--faults: %w", err)
	}
	if p := strings.ToUpper(cfg.Security.Protocol); cfg.Security.SASLPassword == "" && (p == loadgen.ProtocolSASLPlaintext || p == loadgen.ProtocolSASLSSL) {
		cfg.Security.SASLPassword = os.Getenv("STRATA_SASL_PASSWORD")
	}
	if err := cfg.Validate(); err != nil {
		return cfg, out, err
	}
	return cfg, out, nil
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
